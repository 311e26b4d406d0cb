// A client connection speaking HTTP/1.1: the socket, reading and parsing request heads,
// keep-alive and pipelining, 100-continue, the request body's pump, writing responses (their
// heads rewritten, bodies passed through, re-chunked or close-delimited), floodgate's own
// answers, the lingering close and the tunnel relay (tunnel.cpp). It takes an Exchange
// (exchange.h) from the reactor's pool at its first request and runs its requests on it, one
// at a time, until it closes, and is that exchange's Downstream (downstream.h): the exchange runs
// the request (the chain, waits, backends, retries, hedges), its Attempts (attempt.h) talk to
// the backend, and both reach the client only through the Downstream interface. The path:
//   read head -> parse -> Exchange::route (front of the chain, route, the route's chain,
//   select backend) -> attempt: connect or reuse, forward the head; here: pump the body ->
//   attempt: response head and body into this connection's output; here: write it -> log
// Each async step is a do_x() that starts an operation and an on_x() that handles its
// completion (Boost.Beast style). docs/architecture.md describes the shape.
//
// Buffers: an idle connection holds none. While a request is in progress it borrows from the
// reactor's pools `in_` (client bytes: head, then body) and `out_` (bytes to the client);
// its attempt borrows the backend's two. Each block starts with the header-field slots its
// parser needs.
//
// Concurrency: the request body is pumped client -> backend while the response is read
// backend -> client, so a backend may answer before it has read the whole body.
//
// What any client connection shares (the socket, TLS, the opening bound, the timer, the
// send_timeout check) is its base, ClientConnection (client_connection.h).
//
// Thread-safety: reactor thread only. Lifetime: reference-counted (ClientConnection).
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "client_connection.h"
#include "floodgate/core/outcome.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/reactor.h"
#include "response_output.h"

namespace floodgate::proxy {

class ClientConn final : public ClientConnection, public Downstream {
 public:
  ClientConn(Reactor& reactor, int fd, const sockaddr* peer, const net::TlsListener* tls, bool h2c);
  ~ClientConn() override;

  void drain() override;
  bool force_close() override;
  void on_generation_retired(uint64_t retired, const Snapshot& current) override;

  static ClientConn& from(net::StreamOwner& owner) { return static_cast<ClientConn&>(owner); }

  // Downstream (downstream.h).
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  bool gone() const noexcept override { return closed_; }
  std::string_view client_ip() const noexcept override { return peer_ip(); }
  const net::TlsSession* tls() const noexcept override { return client_.tls(); }
  void respond(const Decision& d) override;
  void answer_options() override;
  void cut(OutcomeSource by) override;
  void watch_while_waiting(bool on) override;
  void on_request_head_sent(Attempt& a) override;
  void pump_request_body(Attempt& a) override;
  Reason response_head(const http::Parser& head, bool interim) override;
  Reason tunnel_head(const http::Parser* head) override;
  std::size_t body_room() const noexcept override { return out_.body_room(); }
  void put_body(const char* data, std::size_t n) override { out_.put_body(data, n); }
  void end_body() override { out_.end_body(); }
  bool response_pending() const noexcept override { return out_.pending(); }
  bool writing() const noexcept override { return client_writing_; }
  void flush() override;
  void discard_response() noexcept override { out_.clear(); }
  void response_done() override;
  void run_tunnel() override;

 private:
  // The connection's phases; while `exchange`, the exchange's own phase says where it is.
  enum class Phase { idle, head, exchange, closing };

  // -- the connection (client_conn.cpp)
  void do_client_read();
  void on_client_read(const boost::system::error_code& ec, std::size_t n, bool landing);
  // The first bytes say HTTP/2 (ALPN chose h2, or the preface on an h2c listener): an H2Conn
  // (h2_conn.h) takes the socket over. True when it did; false when they say HTTP/1.1, or
  // (`wait`) when too few of them have come to tell.
  bool hand_over_to_h2(bool& wait);
  void start_request();
  void begin_request();
  void parse_head();
  void on_head();
  // Floodgate's own answer: `bytes` (static or in out_), then the request finishes; `close`
  // ends the connection after it (with a lingering close: see linger_close()).
  void write_generated(std::string_view bytes, bool close);
  bool generated_closes(Reason reason) const noexcept;
  // No request buffer for the bytes in landing_: 503 buffers_exhausted, then close.
  void refuse_without_buffer(std::size_t n);
  void on_generated_written(const boost::system::error_code& ec, bool close);
  void on_client_written(const boost::system::error_code& ec, std::size_t n);
  void finish_request(bool close_client);
  // ClientConnection.
  void begin() override { do_client_read(); }
  void close() override;
  void on_timer() override;
  void on_handshake_done() override;
  void linger_close();
  // server.send_timeout of the request's generation (send_progressing's checks).
  void arm_send_timer() {
    ClientConnection::arm_send_timer(request_snapshot().server.send_timeout);
  }
  bool send_progressing() {
    return ClientConnection::send_progressing(request_snapshot().server.send_timeout);
  }
  // The generation of the request in progress (a reload does not change its timeouts), or the
  // reactor's current one between requests.
  const Snapshot& request_snapshot() const noexcept {
    return ex_ != nullptr ? ex_->snapshot() : reactor_.snapshot();
  }
  // The request in progress is the last one server.max_requests_per_connection allows (as the
  // connection was accepted with): its response closes the connection.
  bool last_request() const noexcept { return max_requests_ != 0 && requests_ >= max_requests_; }
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

  // -- the tunnel relay (tunnel.cpp)
  void tunnel_client_to_backend();
  void tunnel_backend_to_client();
  void tunnel_half_closed();

  // Buffer helpers.
  char* in_data() const;
  http::HeaderField* in_fields() const { return reinterpret_cast<http::HeaderField*>(in_); }
  void release_buffers();

  http::Parser parser_{http::Parser::Kind::request};
  Phase phase_ = Phase::idle;
  bool read_into_landing_ = false;  // the pending client read goes to landing_
  bool generated_close_ = false;    // close after the generated response being written
  bool client_writing_ = false;
  bool lingering_ = false;
  int tunnel_open_ = 0;  // directions of a tunnel still open

  // Requests begun on this connection, and server.max_requests_per_connection when it was
  // accepted (0 = no bound).
  uint32_t requests_ = 0;
  uint32_t max_requests_ = 0;
  bool h2c_ = false;  // the listener takes HTTP/2 with prior knowledge

  // Where an idle connection's next bytes land, so that it holds no pooled buffer.
  char landing_[1024];

  // Buffers (borrowed from the reactor's pools while a request is in progress).
  char* in_ = nullptr;
  std::size_t in_len_ = 0;  // bytes in in_data()
  // The first early_end_ bytes of in_data() arrived in TLS early data (0-RTT): a request whose
  // head starts there is an early one (resilience.protocol.early_data_safe_methods).
  std::size_t early_end_ = 0;
  std::size_t in_pos_ = 0;  // bytes consumed by the parser
  ResponseOutput out_{reactor_.response_buffers(), BufferLayout::kResponseData};

  // The exchange its requests run on, one at a time: taken from the reactor's pool at the
  // first request's first byte (nullptr before), begun again for each request, given back
  // when the connection ends.
  Exchange* ex_ = nullptr;
};

}  // namespace floodgate::proxy
