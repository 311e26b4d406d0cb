// A client connection speaking HTTP/1.1: the socket, reading and parsing request heads,
// keep-alive and pipelining, 100-continue, the request body's pump, writing responses (their
// heads rewritten, bodies passed through, re-chunked or close-delimited), floodgate's own
// answers, the lingering close and the tunnel relay (tunnel.cpp). It takes an Exchange
// (exchange.h) from the reactor's pool for each request, one at a time, from the request's
// first byte to its end, and is that exchange's Downstream (downstream.h): the exchange runs
// the request (the chain, waits, backends, retries, hedges), its Attempts (attempt.h) talk to
// the backend, and both reach the client only through the Downstream interface. The path:
//   read head -> parse -> Exchange::route (front of the chain, route, the route's chain,
//   select backend) -> attempt: connect or reuse, forward the head; here: pump the body ->
//   attempt: response head and body into this connection's output; here: write it -> log
// Each async step is a do_x() that starts an operation and an on_x() that handles its
// completion (Boost.Beast style). docs/architecture.md describes the shape.
//
// Buffers: an idle connection holds none. While a request is in progress it borrows from the
// reactor's pools `in_` (client bytes: head, then body) and `cout_` (bytes to the client);
// its attempt borrows the backend's two. Each block starts with the header-field slots its
// parser needs.
//
// Concurrency: the request body is pumped client -> backend while the response is read
// backend -> client, so a backend may answer before it has read the whole body.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted; an open connection holds
// itself, and whoever runs its code (a completion, a timer, the poller) holds a Ref meanwhile.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "floodgate/core/outcome.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/net/stream.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

class ClientConn final : public RefCounted<ClientConn>, public net::StreamOwner, public Downstream {
 public:
  // Takes the accepted socket `fd`; `peer` is the client's address. `tls`: the listener speaks
  // TLS with these certificates (of the reactor's current generation), else nullptr.
  ClientConn(Reactor& reactor, int fd, const sockaddr* peer, const net::TlsListener* tls = nullptr);
  ~ClientConn();

  void start();
  // Drain: close now if no request is in progress, else after the current response.
  void drain();
  // Shutdown deadline: close now. Returns true when a request was cut.
  bool force_close();
  // Generation `retired` is being forced out (server.retirement_grace passed) and `current`
  // serves: a request still on `retired` whose pool `current` no longer has is ended.
  void on_generation_retired(uint64_t retired, const Snapshot& current);

  // net::StreamOwner: the client stream's completions.
  void on_tls_handshake(Handshake result) noexcept override;
  bool on_tls_hello() noexcept override;
  std::string_view tls_plain_http_answer() noexcept override;
  static ClientConn& from(net::StreamOwner& owner) { return static_cast<ClientConn&>(owner); }

  // Downstream (downstream.h), and net::StreamOwner's hold/release.
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  bool gone() const noexcept override { return closed_; }
  std::string_view client_ip() const noexcept override { return {client_ip_, client_ip_len_}; }
  const net::TlsSession* tls() const noexcept override { return client_.tls(); }
  void respond(const Decision& d) override;
  void answer_options() override;
  void cut(OutcomeSource by) override;
  void watch_while_waiting(bool on) override;
  void on_request_head_sent(Attempt& a) override;
  void pump_request_body(Attempt& a) override;
  Reason response_head(const http::Parser& head, bool interim) override;
  Reason tunnel_head(const http::Parser* head) override;
  std::size_t body_room() const noexcept override;
  void put_body(const char* data, std::size_t n) override;
  void end_body() override;
  bool response_pending() const noexcept override { return cout_len_ > 0; }
  bool writing() const noexcept override { return client_writing_; }
  void flush() override;
  void discard_response() noexcept override { cout_len_ = cout_sent_ = 0; }
  void response_done() override;
  void run_tunnel() override;

  // Reactor's intrusive connection list.
  ClientConn* list_prev = nullptr;
  ClientConn* list_next = nullptr;
  // Reactor's list of opening connections (Reactor::opening_begin), while `opening`.
  ClientConn* opening_prev = nullptr;
  ClientConn* opening_next = nullptr;
  bool opening = false;
  // Closes the connection (the reactor makes room for a newer opening one).
  void evict() { close(); }

 private:
  // The connection's phases; while `exchange`, the exchange's own phase says where it is.
  enum class Phase { idle, head, exchange, closing };

  // -- the connection (client_conn.cpp)
  void do_client_read();
  void on_client_read(const boost::system::error_code& ec, std::size_t n, bool landing);
  void start_request();
  void begin_request();
  void parse_head();
  void on_head();
  // Floodgate's own answer: `bytes` (static or in cout_), then the request finishes; `close`
  // ends the connection after it (with a lingering close: see linger_close()).
  void write_generated(std::string_view bytes, bool close);
  bool generated_closes(Reason reason) const noexcept;
  // No request buffer for the bytes in landing_: 503 buffers_exhausted, then close.
  void refuse_without_buffer(std::size_t n);
  void on_generated_written(const boost::system::error_code& ec, bool close);
  void on_client_written(const boost::system::error_code& ec, std::size_t n);
  void finish_request(bool close_client);
  void close();
  void linger_close();
  bool admit_handshake() noexcept;  // the front in-flight cap, for a TLS handshake
  void on_client_timeout();
  void arm_client_timer(std::chrono::milliseconds d);
  // A write to the client begins: server.send_timeout runs from now, and from each byte the
  // client takes.
  void arm_send_timer();
  // The client timer fired while a write is pending: true (the timer re-armed) when the client
  // took a byte within send_timeout; false when it took nothing for that long.
  bool send_progressing();
  // The generation of the request in progress (a reload does not change its timeouts), or the
  // reactor's current one between requests.
  const Snapshot& request_snapshot() const noexcept {
    return ex_ != nullptr ? ex_->snapshot() : reactor_.snapshot();
  }
  bool in_exchange(Exchange::Phase p) const noexcept {
    return phase_ == Phase::exchange && ex_->phase == p;
  }
  // Bytes read from and written to the client, counted for the request in progress.
  void count_in(std::size_t n) noexcept {
    if (ex_ != nullptr) ex_->bytes_in += n;
  }
  void count_out(std::size_t n) noexcept {
    if (ex_ != nullptr) ex_->bytes_out += n;
  }

  // -- the response's output buffer
  Reason put_head(const http::Parser* head, const http::ResponsePlan& plan);
  bool acquire_out() noexcept;
  char* out_end() const noexcept { return cout_ + cout_len_; }
  std::size_t out_room() const noexcept;
  void commit_out(std::size_t n) noexcept { cout_len_ += n; }

  // -- the tunnel relay (tunnel.cpp)
  void tunnel_client_to_backend();
  void tunnel_backend_to_client();
  void tunnel_half_closed();

  // Buffer helpers.
  char* in_data() const;
  http::HeaderField* in_fields() const { return reinterpret_cast<http::HeaderField*>(in_); }
  void release_buffers();

  // The client socket; its completions come to this connection.
  class ClientStream final : public net::Stream {
   public:
    ClientStream(Poller& poller, ClientConn& conn) : Stream(poller), conn_(conn) {}
    ~ClientStream() = default;
    void hold() override { conn_.add_ref(); }
    void release() override { conn_.release_ref(); }

   private:
    net::StreamOwner* stream_owner() override { return &conn_; }
    ClientConn& conn_;
  };

  Reactor& reactor_;
  ClientStream client_;
  const net::TlsListener* tls_listener_ = nullptr;  // until start() makes the session
  // A slot of the front in-flight cap held by the TLS handshake, from its complete ClientHello
  // (when the costly steps start) to its end.
  Permit handshake_permit_;
  // An open connection holds itself: no pending operation holds a reference (stream.h).
  // close() lets go.
  Ref<ClientConn> self_;
  int adopt_error_ = 0;  // the poller refused the socket (errno)
  http::Parser parser_{http::Parser::Kind::request};
  // header_timeout, idle_timeout, send_timeout, the tunnel's idle_timeout, the linger.
  TimerWheel::Entry client_timer_;
  // The pending client write: when it began or last made progress, and what the kernel still
  // held for the client at the last check (send_progressing).
  static constexpr std::size_t kUnsentUnknown = ~std::size_t{0};
  // A response write pending this long makes the exchange client-paced: what the stages
  // admitted it with goes back (Exchange::release_tickets). Also send_timeout's first check.
  static constexpr std::chrono::milliseconds kClientPacedAfter{1000};
  std::chrono::steady_clock::time_point send_since_{};
  std::size_t send_unsent_ = kUnsentUnknown;
  // How the response in progress travels to the client (plan_response), from its head on.
  http::ResponsePlan plan_;
  Phase phase_ = Phase::idle;
  bool read_into_landing_ = false;  // the pending client read goes to landing_
  bool generated_close_ = false;    // close after the generated response being written
  bool client_writing_ = false;
  bool closed_ = false;
  bool lingering_ = false;
  int tunnel_open_ = 0;  // directions of a tunnel still open

  // Client address, formatted once at accept.
  char client_ip_[48] = {};
  uint8_t client_ip_len_ = 0;

  // Where an idle connection's next bytes land, so that it holds no pooled buffer.
  char landing_[1024];

  // Buffers (borrowed from the reactor's pools while a request is in progress).
  char* in_ = nullptr;
  std::size_t in_len_ = 0;  // bytes in in_data()
  // The first early_end_ bytes of in_data() arrived in TLS early data (0-RTT): a request whose
  // head starts there is an early one (resilience.protocol.early_data_safe_methods).
  std::size_t early_end_ = 0;
  std::size_t in_pos_ = 0;  // bytes consumed by the parser
  char* cout_ = nullptr;
  std::size_t cout_len_ = 0;
  std::size_t cout_sent_ = 0;  // of cout_len_, the bytes handed to a write (done or pending)

  // What the stages and the access log know of this connection (every exchange points to it).
  ConnectionFacts facts_;
  // The request in progress (from its first byte to its end), nullptr between requests.
  Exchange* ex_ = nullptr;
};

}  // namespace floodgate::proxy
