// An attempt: one try of an exchange at one backend. It owns what that try needs and nothing
// else: the backend connection (pooled or new), the request's count in the backend's
// process-wide load, the bytes to the backend (`bout_`) and from it (`bin_`, where the
// connection's response parser keeps its fields), the connect / response timer, the plan for
// re-framing the response, and the response's progress.
//
// An attempt works for its exchange (exchange.h) and reaches the client only through the
// exchange's Downstream (downstream.h): the request head is on its way (the downstream then
// pumps the body into request_room()), the response's head and body go into the downstream's
// sink (it frames them for the client's protocol, writes them and the attempt hears
// on_client_drained()), it failed (the exchange retries, answers or cuts), or it ended (the
// downstream finishes the exchange). The response pump (bin_ -> the sink) is where attempt and
// client meet; an upgrade or CONNECT tunnel is the attempt's continuation once its first bytes
// are out.
//
// Completions of the backend connection come to the attempt (it is their StreamOwner); hold()
// and release() keep the downstream, which owns the exchange and so the attempt, alive
// meanwhile.
//
// Thread-safety: reactor thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/net/stream.h"
#include "floodgate/resilience/circuit_breaker.h"
#include "floodgate/upstream/backend_load.h"

namespace floodgate::proxy {

class BackendConn;
class Exchange;
struct Upstream;

// Room kept free in an output buffer for chunk framing around one parsed piece: the request
// body's pump (client -> attempt) and the response's (attempt -> client) both re-frame.
inline constexpr std::size_t kFramingSlack = 64;

// What an attempt is to its exchange: the first try, the retry after it failed, or a hedge
// started beside it.
enum class AttemptRole : uint8_t { primary, retry, hedge };

class Attempt final : public net::StreamOwner {
 public:
  Attempt();
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  // The exchange the attempt works for; once, before the first start.
  void bind(Exchange& exchange) noexcept { ex_ = &exchange; }
  Exchange& exchange() const noexcept { return *ex_; }
  // Forgets the previous exchange's attempt (a new exchange begins).
  void reset() noexcept;

  // Tries backend `backend` of `up` (its count already `entered`, its circuit's `pass` taken):
  // a pooled connection when the reactor has one, else a new one within connect_timeout. Then
  // the request head. The attempt records its verdict on the pass once it knows it (a failure,
  // or the response head's status); one that ends without a verdict gives the pass back.
  void start(const Upstream& up, uint32_t backend, InFlight entered, resilience::CircuitPass pass,
             AttemptRole role = AttemptRole::primary);
  AttemptRole role() const noexcept { return role_; }
  // A CONNECT tunnel's connection to `to` (no pool, no backend of a pool).
  void start_tunnel(const boost::asio::ip::tcp::endpoint& to);
  bool started() const noexcept { return started_; }
  // Started and not ended: it may still produce the exchange's response.
  bool live() const noexcept { return started_ && !ended_; }
  // The backend's index in its upstream, -1 when none (not started, or a CONNECT tunnel).
  int32_t backend() const noexcept { return backend_; }
  // Times the request went to its backend: 2 when a stale pooled connection made it send the
  // request again on a new connection, else 1 once started (the access log's `attempts`).
  uint8_t sends() const noexcept { return started_ ? (stale_retried_ ? 2 : 1) : 0; }
  // From the start of the attempt to its backend connection being established (zero for a
  // pooled keep-alive connection) and to the final response head (a 101 included); -1 ns
  // while that has not happened. Measured on the reactor's loop clock.
  std::chrono::nanoseconds connect_time() const noexcept { return since_begun(connected_at_); }
  std::chrono::nanoseconds head_time() const noexcept { return since_begun(head_at_); }
  // What the backend took to answer, which adaptive admission samples: from the whole request
  // reaching it (request_done) to the final response head; zero when the head came first. The
  // client's pace (a slow head, a slow upload) and the pool's queue are not in it.
  std::chrono::nanoseconds backend_latency() const noexcept {
    const auto from = sent_at_ == std::chrono::steady_clock::time_point{} ? head_at_ : sent_at_;
    return head_at_ > from ? head_at_ - from : std::chrono::nanoseconds(0);
  }

  // The request body: the client writes body bytes (framed) into request_room() and commits
  // them; send_request() writes what is buffered, then asks the client for more.
  char* request_end() const noexcept;
  std::size_t request_room() const noexcept;
  void commit_request(std::size_t n) noexcept { bout_len_ += n; }
  bool sending() const noexcept { return backend_writing_; }
  bool request_buffered() const noexcept { return bout_len_ > 0; }
  void send_request();
  // The whole request reached the backend: the response timer runs from now.
  void request_done();

  // The client wrote every byte the attempt gave it: the response goes on.
  void on_client_drained();
  bool response_started() const noexcept { return response_head_; }

  // Ends the attempt: its in-flight count goes back and its connection returns to the
  // reactor's keep-alive pool when `reusable` (and the reactor is not draining), else closes.
  // Idempotent.
  void end(bool reusable);
  // Gives the attempt's buffers back; only when nothing is pending on them.
  void release_buffers() noexcept;
  // The request head is in the attempt's buffer (its connection is connected, or connecting
  // with TLS): body bytes can follow it.
  bool head_ready() const noexcept { return conn_ && head_ready_; }
  // Whether a byte of the request may have reached the backend: the connection was
  // established (its TLS handshake done) or was a pooled one, or a stale one was replaced. An
  // attempt that failed without reaching this point (connect refused or timed out, a failed
  // TLS handshake) provably sent nothing.
  bool request_may_have_left() const noexcept { return established_ || stale_retried_; }

  // -- The tunnel relay (tunnel.cpp): the backend's stream and the bytes read from it.
  net::Stream& stream() noexcept;
  char* in_data() const noexcept;
  std::size_t in_len() const noexcept { return bin_len_; }
  void set_in_len(std::size_t n) noexcept { bin_len_ = n; }

  // net::StreamOwner: the backend connection's completions.
  void hold() noexcept override;
  void release() noexcept override;
  // A TLS backend connection's handshake ended ([upstreams.tls]).
  void on_tls_handshake(Handshake result) noexcept override;
  static Attempt& from(net::StreamOwner& owner) { return static_cast<Attempt&>(owner); }

 private:
  void connect(const boost::asio::ip::tcp::endpoint& to, std::chrono::milliseconds timeout,
               net::Stream::Done done);
  void on_connected(const boost::system::error_code& ec);
  // The connection is established (and its TLS handshake done): the connect time is known.
  void on_established();
  // A failure of the backend connection before the response head: TLS (the handshake, a
  // refused certificate, an alert) or a reset.
  void fail_transport(const boost::system::error_code& ec);
  void on_tunnel_connected(const boost::system::error_code& ec);
  void send_request_head();
  void on_backend_written(const boost::system::error_code& ec);
  void do_backend_read();
  void on_backend_read(const boost::system::error_code& ec, std::size_t n);
  void process_response();
  void on_interim_response();
  void on_response_head(bool message_done);
  void begin_tunnel();
  void pump_response_body();
  void finish_response();
  // The backend connection may serve another request once this response is read to its end.
  bool reusable() const noexcept;
  void note_client_paced();
  // The backend answered (a final head or a 101), or the attempt ended: it no longer counts
  // in the reactor's awaiting_backend. Idempotent.
  void stop_awaiting() noexcept;
  bool retry_stale_connection();
  // The attempt's verdict for its backend's circuit breaker (once; later calls do nothing).
  // What it was, for the process log's line if the verdict moves the circuit: a transport
  // failure's `reason`, or Reason::none and the response head's `status`.
  void judge(resilience::CircuitVerdict verdict, Reason reason, int status) noexcept;
  // Fails the attempt for `reason` (metrics by kind, the process log), then lets the client
  // answer or cut. `error`: the system's errno behind it, 0 when none.
  // `detail`: what the system or OpenSSL said, when `error` does not say it.
  void fail(Reason reason, int error = 0, std::string_view detail = {});
  // The process log's line for a backend failure (`reason`, one of backend_failure()'s), before
  // or after the response head reached floodgate; throttled per backend and kind.
  void log_failure(Reason reason, int error, bool after_head, std::string_view detail = {});
  void on_timeout();
  void arm_timer(std::chrono::milliseconds d);
  bool acquire_buffers();
  std::chrono::nanoseconds since_begun(std::chrono::steady_clock::time_point t) const noexcept {
    return t == std::chrono::steady_clock::time_point{} ? std::chrono::nanoseconds(-1)
                                                        : t - begun_at_;
  }

  Exchange* ex_ = nullptr;
  const Upstream* up_ = nullptr;  // nullptr for a CONNECT tunnel
  Ref<BackendConn> conn_;
  InFlight in_flight_;            // this request's count in its backend's process-wide load
  resilience::CircuitPass pass_;  // its backend's circuit let it through (empty: breakers off)
  int32_t backend_ = -1;
  // When the attempt started, its connection was established, its final response head came.
  std::chrono::steady_clock::time_point begun_at_{};
  std::chrono::steady_clock::time_point connected_at_{};
  std::chrono::steady_clock::time_point head_at_{};
  std::chrono::steady_clock::time_point sent_at_{};  // the whole request reached the backend
  TimerWheel::Entry timer_;                          // connect_timeout, then response_timeout

  char* bout_ = nullptr;  // bytes to the backend (a request buffer)
  std::size_t bout_len_ = 0;
  char* bin_ = nullptr;  // bytes from the backend (a response buffer, its fields first)
  std::size_t bin_len_ = 0;
  std::size_t bin_pos_ = 0;

  AttemptRole role_ = AttemptRole::primary;
  bool started_ = false;
  bool ended_ = false;
  bool connecting_ = false;  // a new backend connection is being established (TLS included)
  bool tls_failed_ = false;  // its TLS handshake failed: the pending operations fail next
  bool backend_writing_ = false;
  bool response_head_ = false;  // the final response head has been parsed
  bool response_done_ = false;
  bool backend_eof_ = false;    // the backend closed its side
  bool body_ended_ = false;     // the sink has the body's end (end_body)
  bool stale_retried_ = false;  // a stale pooled connection was already replaced once
  bool established_ = false;    // the connection was established (or pooled): bytes may leave
  bool head_ready_ = false;     // the request head is in bout_ (send_request_head wrote it)
  bool request_sent_ = false;   // the whole request reached the backend
  bool awaiting_ = false;       // counted in the reactor's awaiting_backend (stop_awaiting)
  bool backend_done_ = false;   // the whole response is on floodgate's side (note_client_paced)
};

}  // namespace floodgate::proxy
