// A client connection: the socket, reading and parsing request heads, writing responses,
// keep-alive, pipelining and the lingering close. It embeds one Exchange (exchange.h), begun
// again for each request, whose Attempts (attempt.h) do the backend side. The request path:
//   read head -> parse -> front of the chain -> route -> admit (pool) -> select backend ->
//   attempt: connect or reuse, forward the head; client: pump the body ->
//   attempt: stream the response into the client's output; client: write it -> log
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
#include "floodgate/net/stream.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

class ClientConn final : public RefCounted<ClientConn>, public net::StreamOwner, public WaitOwner {
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
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  void on_tls_handshake(Handshake result) noexcept override;
  bool on_tls_hello() noexcept override;
  std::string_view tls_plain_http_answer() noexcept override;
  static ClientConn& from(net::StreamOwner& owner) { return static_cast<ClientConn&>(owner); }

  // -- For the exchange's attempts (attempt.cpp).
  Reactor& reactor() const noexcept { return reactor_; }
  Exchange& exchange() noexcept { return ex_; }
  std::string_view client_ip() const noexcept { return {client_ip_, client_ip_len_}; }
  // The client's TLS session, or nullptr on a plain listener.
  const net::TlsSession* tls() const noexcept { return client_.tls(); }
  bool closed() const noexcept { return closed_; }
  // Attempt `a`'s request head is on its way: invite the body (100-continue), pump it.
  void on_request_head_sent(Attempt& a);
  // Forwards buffered request body into attempt `a`, or reads more of it.
  void pump_request_body(Attempt& a);
  // The response's bytes for the client: a response buffer the attempt fills, written by
  // write_out() (which calls the attempt's on_client_drained() when all is out). The attempt
  // may go on adding bytes while a write is in progress (its completion writes them next), so
  // that a response that fits is read from the backend whatever the client's pace.
  bool acquire_out() noexcept;
  char* out_end() const noexcept { return cout_ + cout_len_; }
  std::size_t out_room() const noexcept;
  void commit_out(std::size_t n) noexcept { cout_len_ += n; }
  // Bytes in the output the client has not taken yet (written or being written).
  bool out_pending() const noexcept { return cout_len_ > 0; }
  // Only before the first write_out() of the response: nothing of it reached the client.
  void discard_out() noexcept { cout_len_ = cout_sent_ = 0; }
  bool writing() const noexcept { return client_writing_; }
  void write_out();
  // Attempt `failed` failed for `reason`. When the exchange's other attempt is still live (a
  // hedge), that one goes on alone. Otherwise a retry when the rules allow it, else the
  // failure is answered when the client has seen nothing of a response yet, or the exchange is
  // cut short (the client must not take a short response for a whole one).
  void on_attempt_failed(Attempt& failed, Reason reason);
  // Attempt `a` has the exchange's response (its first byte is about to go to the client):
  // the other attempt, if still live, is cancelled (hedging: the first response head wins).
  void claim(Attempt& a);
  // The backend's part of the exchange is over (its response is read to the end and wholly in
  // the output, its connection given back): the pool slot and the stages' tickets go back now,
  // while the client may still be reading (Exchange::release_admission).
  void on_backend_done() noexcept { ex_.release_admission(); }
  // The attempt holds all it can of the response (output and backend buffers full) and waits
  // on the client alone: the client sets the pace (Exchange::release_tickets).
  void on_client_paced() noexcept { ex_.release_tickets(); }
  // The response is complete: the exchange ends, then the connection goes on or closes.
  void on_response_done(bool close);
  // Answers with floodgate's response for `reason` (or a stage's prebuilt `answer`, sent with
  // `status`), then finishes the request.
  void respond(Reason reason, const PrebuiltAnswer* answer = nullptr, int status = 0);
  // The same with a Retry-After known only now (circuit_open) and header lines `extra`,
  // written into the output buffer.
  void respond_retry_after(Reason reason, uint32_t retry_after_seconds,
                           std::string_view extra = {});
  // A stage's stop: its prebuilt answer, or one built now (Decision::stop_built).
  void respond(const Decision& d);
  // Ends a request in progress before its response is complete, by `by` (the outcome says
  // so), then closes.
  void cut(OutcomeSource by);
  // The attempt's first bytes for the client are in the output: relay both ways (tunnel.cpp).
  void run_tunnel();

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
  // queued: routed, waiting for a stage of its route's chain (the pool's queue; no backend).
  enum class Phase { idle, head, queued, forwarding, generated, tunnel, closing };

  // -- the connection (client_conn.cpp)
  void do_client_read();
  void on_client_read(const boost::system::error_code& ec, std::size_t n, bool landing);
  void start_request();
  void begin_request();
  void parse_head();
  void on_head();
  void answer_options();
  void write_generated(std::string_view bytes, bool close);
  bool generated_closes(Reason reason) const noexcept;
  // No request buffer for the bytes in landing_: 503 buffers_exhausted, then close.
  void refuse_without_buffer(std::size_t n);
  void on_generated_written(const boost::system::error_code& ec, bool close);
  void on_client_written(const boost::system::error_code& ec, std::size_t n);
  void finish_request(bool close_client);
  void end_attempts() noexcept;
  void log_request();
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

  // -- the route's chain and waiting (waiting.cpp)
  void run_chain(const Chain& chain);
  void park(const Decision& d);
  void leave_wait(Reason reason, CancelReason why);
  void watch_client_while_queued();
  void on_wait_over() override;

  // -- backend selection, the retry and the hedge (dispatch.cpp)
  void select_backend();
  // Arms the hedge timer when the exchange's request may be hedged (resilience.hedging).
  void arm_hedge(const Upstream& up, const FailurePolicy& policy);
  bool brownout_suppresses_hedging() const noexcept;
  void on_hedge_timer();
  // After a failed attempt: starts the exchange's retry on another backend when the rules, an
  // alternate and the budgets allow; false when the failure stands.
  bool retry_elsewhere(Reason reason);
  enum class SecondAttempt : uint8_t { started, no_alternate, denied_budget };
  SecondAttempt start_second_attempt(AttemptRole role, uint32_t exclude);
  // Turns the request away for a pool reason (kPoolRejections): frees its pool slot at once.
  void reject(Reason reason);

  // -- CONNECT (connect.cpp) and the tunnel relay (tunnel.cpp)
  void open_connect_tunnel();
  void tunnel_client_to_backend();
  void tunnel_backend_to_client();
  void tunnel_half_closed();

  // The generation of the request in progress (a reload does not change its timeouts), or the
  // reactor's current one between requests.
  const Snapshot& request_snapshot() const noexcept {
    return ex_.gen ? *ex_.gen->snapshot : reactor_.snapshot();
  }

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
  // header_timeout, idle_timeout, send_timeout, a wait's deadline (pending_timeout), the linger.
  TimerWheel::Entry client_timer_;
  // The pending client write: when it began or last made progress, and what the kernel still
  // held for the client at the last check (send_progressing).
  static constexpr std::size_t kUnsentUnknown = ~std::size_t{0};
  // A response write pending this long makes the exchange client-paced: what the stages
  // admitted it with goes back (Exchange::release_tickets). Also send_timeout's first check.
  static constexpr std::chrono::milliseconds kClientPacedAfter{1000};
  std::chrono::steady_clock::time_point send_since_{};
  std::size_t send_unsent_ = kUnsentUnknown;
  TimerWheel::Entry hedge_timer_;  // hedging.delay after the first attempt started
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

  // The request in progress.
  Exchange ex_;

  // Holds the connection while its exchange waits for a stage (waiting.cpp).
  Ref<ClientConn> parked_;
};

}  // namespace floodgate::proxy
