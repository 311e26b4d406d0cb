// One attempt at a backend: connecting or reusing a pooled connection (or a CONNECT target's
// connection), forwarding the request head (the downstream pumps the body), reading the
// response and streaming it into the downstream's sink, which frames it for the client.
#include "floodgate/proxy/attempt.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cstring>
#include <string_view>

#include "backend_conn.h"
#include "floodgate/proxy/circuit_log.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// This reactor's counters of backend `b` of `up` (floodgate_backend_*).
Backend::Stats& stats_of(const Upstream& up, int32_t b, const Reactor& reactor) noexcept {
  return up.backends[static_cast<std::size_t>(b)]->stats[reactor.index()];
}

// A pooled connection serves `up` only if it speaks TLS as `up` says now: plain for a plain pool,
// and under the same [upstreams.tls] parameters (the contexts of a reload that changed nothing
// else are new, the connections made under the old ones still fit).
bool same_tls(const BackendConn& c, const Upstream& up) noexcept {
  const net::TlsSession* session = c.tls();
  const net::TlsClientConfig* had = session != nullptr ? session->client() : nullptr;
  const net::TlsClientConfig* want = up.tls.get();
  return had == want || (had != nullptr && want != nullptr && had->params() == want->params());
}

}  // namespace

Attempt::Attempt() : timer_([](void* a) { static_cast<Attempt*>(a)->on_timeout(); }, this) {}

// The exchange ends every attempt and gives back its buffers before it goes back to its pool.
Attempt::~Attempt() = default;

void Attempt::hold() noexcept {
  ex_->hold();
}

void Attempt::release() noexcept {
  ex_->release();
}

net::Stream& Attempt::stream() noexcept {
  return *conn_;
}

char* Attempt::in_data() const noexcept {
  return bin_ + BufferLayout::kResponseFields * sizeof(http::HeaderField);
}

char* Attempt::request_end() const noexcept {
  return bout_ + bout_len_;
}

std::size_t Attempt::request_room() const noexcept {
  return ex_->reactor().request_data() - bout_len_;
}

void Attempt::reset() noexcept {
  up_ = nullptr;
  backend_ = -1;
  bout_len_ = bin_len_ = bin_pos_ = 0;
  role_ = AttemptRole::primary;
  started_ = ended_ = connecting_ = backend_writing_ = false;
  response_head_ = response_done_ = backend_eof_ = body_ended_ = false;
  stale_retried_ = request_sent_ = tls_failed_ = established_ = head_ready_ = false;
  backend_done_ = false;
  begun_at_ = connected_at_ = head_at_ = sent_at_ = {};
}

void Attempt::release_buffers() noexcept {
  Reactor& reactor = ex_->reactor();
  reactor.request_buffers().release(std::exchange(bout_, nullptr));
  reactor.response_buffers().release(std::exchange(bin_, nullptr));
  bout_len_ = bin_len_ = bin_pos_ = 0;
}

void Attempt::arm_timer(std::chrono::milliseconds d) {
  Reactor& reactor = ex_->reactor();
  reactor.wheel().schedule(timer_, reactor.now() + d);
}

void Attempt::start(const Upstream& up, uint32_t backend, InFlight entered,
                    resilience::CircuitPass pass, AttemptRole role) {
  started_ = true;
  ended_ = false;
  role_ = role;
  up_ = &up;
  backend_ = static_cast<int32_t>(backend);
  in_flight_ = std::move(entered);
  pass_ = std::move(pass);
  begun_at_ = ex_->reactor().now();
  connected_at_ = head_at_ = sent_at_ = {};
  Backend& peer = *up.backends[backend];
  Backend::Stats& stats = peer.stats[ex_->reactor().index()];
  Ref<BackendConn> idle = ex_->reactor().take_idle(peer);
  if (idle && !same_tls(*idle, up)) {
    idle->close();  // made under other [upstreams.tls] settings (a reload changed them)
    idle = {};
  }
  if (idle) {
    stats.reuses.add();
    established_ = true;
    connected_at_ = begun_at_;
    conn_ = std::move(idle);
    conn_->set_owner(this);
    return send_request_head();
  }
  stats.connects.add();
  conn_ = Ref<BackendConn>(new BackendConn(ex_->reactor(), up.id, up.backends[backend]));
  connect(peer.endpoint, up.params.connect_timeout,
          [](net::StreamOwner& o, const error_code& ec, std::size_t) {
            Attempt::from(o).on_connected(ec);
          });
}

void Attempt::connect(const asio::ip::tcp::endpoint& to, std::chrono::milliseconds timeout,
                      net::Stream::Done done) {
  conn_->set_owner(this);
  connecting_ = true;
  arm_timer(timeout);
  conn_->connect(to, done);
}

void Attempt::on_connected(const error_code& ec) {
  if (ec) {
    connecting_ = false;
    timer_.cancel();
    return fail(Reason::upstream_connect_failed, ec.value());
  }
  if (up_->tls) {
    // The handshake runs with the request's first read and write; connect_timeout goes on
    // covering it (nginx's proxy_connect_timeout does the same).
    auto session =
        std::make_unique<net::TlsSession>(up_->tls, up_->hosts[static_cast<std::size_t>(backend_)]);
    if (!session->ok()) {
      connecting_ = false;
      timer_.cancel();
      return fail(Reason::upstream_tls_failed, 0, "cannot start a TLS session");
    }
    tls_failed_ = false;
    conn_->start_tls(std::move(session));
  } else {
    on_established();
  }
  send_request_head();
}

void Attempt::on_established() {
  established_ = true;
  connecting_ = false;
  timer_.cancel();
  connected_at_ = ex_->reactor().now();
  stats_of(*up_, backend_, ex_->reactor()).connect_time.observe(connected_at_ - begun_at_);
}

void Attempt::on_tls_handshake(Handshake result) noexcept {
  if (!connecting_ || !conn_ || conn_->tls() == nullptr) return;
  if (result == Handshake::ok) return on_established();
  // The pending read or write fails next and says how; a peer that closed mid-handshake is a
  // reset (retryable), any other failure TLS's own (terminal).
  tls_failed_ = result == Handshake::failed;
}

void Attempt::fail_transport(const error_code& ec) {
  const bool tls = tls_failed_ || ec.category() == net::tls_category();
  if (!tls) {
    const bool system = ec.category() == boost::system::system_category();
    return fail(Reason::upstream_reset, system ? ec.value() : 0);
  }
  const net::TlsSession* session = conn_ ? conn_->tls() : nullptr;
  const std::string_view refused = session != nullptr ? session->verify_failure() : "";
  const std::string message = refused.empty() ? ec.message() : std::string(refused);
  if (connecting_) {
    connecting_ = false;
    timer_.cancel();
  }
  fail(Reason::upstream_tls_failed, 0, message);
}

bool Attempt::acquire_buffers() {
  Reactor& reactor = ex_->reactor();
  if (bout_ == nullptr) bout_ = reactor.request_buffers().acquire();
  if (bin_ == nullptr) bin_ = reactor.response_buffers().acquire();
  return bout_ != nullptr && bin_ != nullptr;
}

void Attempt::send_request_head() {
  Exchange& ex = *ex_;
  if (!acquire_buffers()) {  // at server.max_buffers_per_reactor
    end(true);               // nothing was sent on it
    return ex_->on_attempt_failed(*this, Reason::buffers_exhausted);
  }
  http::Writer w(bout_, ex_->reactor().request_data());
  const http::ForwardInfo fwd{ex_->downstream().client_ip(), ex.request_id,
                              up_->backends[static_cast<std::size_t>(backend_)]->address.text,
                              ex_->downstream().tls() != nullptr, ex.request.early_data};
  if (!http::write_request_head(ex.head, ex.facts, fwd, w)) {
    end(true);
    return ex_->on_attempt_failed(*this, Reason::header_too_large);
  }
  bout_len_ = w.size();
  head_ready_ = true;
  bin_len_ = bin_pos_ = 0;
  conn_->parser.begin(in_data(), reinterpret_cast<http::HeaderField*>(bin_),
                      http::HeadLimits{0, 0, BufferLayout::kResponseFields});
  conn_->parser.set_no_body(ex.head_request);
  do_backend_read();
  ex_->downstream().on_request_head_sent(*this);
}

void Attempt::send_request() {
  backend_writing_ = true;
  conn_->write(bout_, bout_len_, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    Attempt& a = Attempt::from(o);
    a.backend_writing_ = false;
    a.on_backend_written(ec);
  });
}

void Attempt::on_backend_written(const error_code& ec) {
  if (!ec && up_ != nullptr) stats_of(*up_, backend_, ex_->reactor()).bytes_sent.add(bout_len_);
  if (ec) {
    if (retry_stale_connection()) return;
    if (!ex_->outcome.client_saw_bytes) return fail_transport(ec);
    // reset before the response (after a 1xx)
    judge(resilience::CircuitVerdict::failure, Reason::upstream_reset, 0);
    log_failure(Reason::upstream_reset, ec.value(), true);
    return ex_->downstream().cut(OutcomeSource::upstream);
  }
  bout_len_ = 0;
  ex_->downstream().pump_request_body(*this);
}

void Attempt::request_done() {
  request_sent_ = true;
  sent_at_ = ex_->reactor().now();
  if (!response_head_ && !awaiting_) {
    awaiting_ = true;
    ex_->reactor().metrics().awaiting_backend.add(1);
  }
  if (!response_head_) arm_timer(up_->params.response_timeout);
}

void Attempt::do_backend_read() {
  if (conn_->reading()) return;
  conn_->read_some(in_data() + bin_len_, BufferLayout::kResponseData - bin_len_,
                   [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                     Attempt::from(o).on_backend_read(ec, n);
                   });
}

void Attempt::on_backend_read(const error_code& ec, std::size_t n) {
  if (ex_->downstream().gone() || !conn_) return;
  if (ec && retry_stale_connection()) return;
  if (ec == asio::error::eof) {
    backend_eof_ = true;
    if (!response_head_) return fail(Reason::upstream_reset);
    return pump_response_body();  // completes a close-delimited body or detects truncation
  }
  if (ec) {
    if (!response_head_) return fail_transport(ec);
    log_failure(Reason::upstream_reset, ec.value(), true);
    return ex_->downstream().cut(OutcomeSource::upstream);
  }
  bin_len_ += n;
  if (up_ != nullptr) stats_of(*up_, backend_, ex_->reactor()).bytes_received.add(n);
  if (response_head_) timer_.cancel();
  process_response();
}

void Attempt::process_response() {
  if (response_head_) return pump_response_body();
  const auto head = conn_->parser.parse_head(bin_len_);
  switch (head) {
    case http::Parser::Result::need_more:
      if (bin_len_ == BufferLayout::kResponseData) return fail(Reason::upstream_bad_response);
      return do_backend_read();
    case http::Parser::Result::error:
      return fail(Reason::upstream_bad_response);
    default:
      break;
  }
  const int status = conn_->parser.status();
  if (status < 200 && status != 101) return on_interim_response();
  if (status == 101) {
    if (!ex_->facts.upgrade) return fail(Reason::upstream_bad_response);
    stop_awaiting();
    head_at_ = ex_->reactor().now();
    judge(resilience::CircuitVerdict::success, Reason::none, status);
    return begin_tunnel();
  }
  on_response_head(head == http::Parser::Result::message_done);
}

// 1xx other than 101: forwarded to HTTP/1.1 clients (except 100, which floodgate sends
// itself), then the next response head is parsed from the bytes that follow.
void Attempt::on_interim_response() {
  ex_->claim(*this);  // a hedged request's response comes from this attempt from now on
  http::Parser& rp = conn_->parser;
  if (const Reason r = ex_->downstream().response_head(rp, true); r != Reason::none) return fail(r);
  std::size_t consumed = 0;
  auto no_sink = [](const char*, std::size_t) {};
  const std::size_t end = rp.head_end();
  rp.parse_body(in_data() + end, 0, consumed, no_sink);
  std::memmove(in_data(), in_data() + end, bin_len_ - end);
  bin_len_ -= end;
  rp.begin(in_data(), reinterpret_cast<http::HeaderField*>(bin_),
           http::HeadLimits{0, 0, BufferLayout::kResponseFields});
  rp.set_no_body(ex_->head_request);
  if (ex_->downstream().response_pending()) {
    return ex_->downstream().flush();  // on_client_drained() goes on
  }
  process_response();
}

void Attempt::on_response_head(bool message_done) {
  Exchange& ex = *ex_;
  Reactor& reactor = ex.reactor();
  const http::Parser& rp = conn_->parser;
  const auto verdict = circuit_verdict_of_status(ex.gen->snapshot->failure, rp.status());
  judge(verdict, Reason::none, rp.status());
  if (role_ == AttemptRole::retry) {
    reactor.metrics().retry(up_->id, verdict == resilience::CircuitVerdict::failure
                                         ? RetryResult::failed
                                         : RetryResult::succeeded);
  }
  if (verdict == resilience::CircuitVerdict::failure && ex.other(*this).live()) {
    // A hedged request's failed response while the other attempt may still succeed: the
    // first successful head wins.
    end(false);
    return ex.on_attempt_failed(*this, Reason::none);
  }
  ex.claim(*this);
  stop_awaiting();
  head_at_ = reactor.now();
  Backend::Stats& stats = stats_of(*up_, backend_, reactor);
  stats.responses[status_class(rp.status())].add();
  stats.head_time.observe(head_at_ - begun_at_);
  ex.decide(Outcome::relayed(rp.status(), backend_latency()));
  if (const Reason r = ex.downstream().response_head(rp, false); r != Reason::none) return fail(r);
  response_head_ = true;
  timer_.cancel();
  bin_pos_ = rp.head_end();
  response_done_ = message_done;  // e.g. the response to HEAD ends with its head
  pump_response_body();
}

// Parses what the backend sent into the client's output, while the client writes what is
// already there: the backend is read as long as the output has room, so that a response that
// fits in it is read to its end whatever the client's pace (then the backend's part is over).
void Attempt::pump_response_body() {
  Downstream& sink = ex_->downstream();
  if (sink.gone()) return;
  http::Parser& rp = conn_->parser;
  auto put = [&sink](const char* p, std::size_t n) { sink.put_body(p, n); };
  while (!response_done_ && sink.body_room() > 0) {
    const std::size_t feed = std::min(bin_len_ - bin_pos_, sink.body_room());
    std::size_t consumed = 0;
    auto r = rp.parse_body(in_data() + bin_pos_, feed, consumed, put);
    bin_pos_ += consumed;
    if (r == http::Parser::Result::need_more && backend_eof_ && bin_pos_ == bin_len_) {
      r = rp.finish();  // close-delimited body ends at EOF; anything else is truncation
    }
    if (r == http::Parser::Result::error) {
      if (!ex_->outcome.client_saw_bytes && !backend_eof_) {
        sink.discard_response();  // nothing reached the client: say so
        return fail(Reason::upstream_bad_response);
      }
      // Never present a short body as whole.
      log_failure(backend_eof_ ? Reason::upstream_reset : Reason::upstream_bad_response, 0, true);
      return sink.cut(OutcomeSource::upstream);
    }
    if (r == http::Parser::Result::message_done) {
      response_done_ = true;
    } else if (bin_pos_ == bin_len_) {
      break;
    }
  }
  if (response_done_ && !body_ended_) {
    sink.end_body();
    body_ended_ = true;
  }
  if (response_done_ && request_sent_ && !ended_) {
    // The whole response is in the client's output and the whole request reached the
    // backend: the backend's part is over, whatever the client's pace. Its connection goes
    // back to the pool and its buffers to the reactor now, then what admitted the request.
    end(reusable());
    release_buffers();
    ex_->on_backend_done();
  }
  if (sink.response_pending()) {
    sink.flush();  // on_client_drained() goes on once it is all out
    if (response_done_) return;
  } else if (response_done_) {
    return finish_response();
  }
  // response_timeout runs while floodgate waits on the backend alone (the output empty, every
  // byte read parsed), never while the client holds the response up.
  if (conn_->reading()) {  // a read into bin_ is on its way
    if (!sink.response_pending()) arm_timer(up_->params.response_timeout);
    return;
  }
  if (bin_pos_ == bin_len_) {
    bin_len_ = bin_pos_ = 0;
    arm_timer(up_->params.response_timeout);
  } else {
    // The output is full: the client sets the pace. The backend is still read into what bin_
    // has free, so that its whole response can arrive (and its part end) meanwhile; each read
    // that completes looks again.
    note_client_paced();
    std::memmove(in_data(), in_data() + bin_pos_, bin_len_ - bin_pos_);
    bin_len_ -= bin_pos_;
    bin_pos_ = 0;
    if (backend_eof_) return;  // the rest is parsed as the client drains (a short body fails)
    if (bin_len_ == BufferLayout::kResponseData) {
      // Floodgate holds all it can of the response and waits on the client alone: the stages'
      // tickets go back now; the pool slot stays while the backend may still be sending.
      ex_->on_client_paced();
      return;
    }
  }
  do_backend_read();
}

void Attempt::on_client_drained() {
  if (!response_head_) return process_response();  // after an interim response
  if (response_done_) return finish_response();
  pump_response_body();
}

// A pooled keep-alive connection can be closed by the backend just as it is reused; the
// request then fails before any response byte. That is usually not the backend refusing the
// request, so it is sent once more on a new connection to the same backend, when that is safe:
// nothing of the response arrived, the request has no body (so it is still whole in the
// client's input), and its method is idempotent. The backend may have read the request and
// acted on it before it closed, so a POST or PATCH is never sent again (RFC 9112 section
// 9.3.1); it gets 502 upstream_reset.
bool Attempt::retry_stale_connection() {
  const Exchange& ex = *ex_;
  if (!conn_ || !conn_->reused || stale_retried_ || ex.facts.has_body || response_head_ ||
      bin_len_ != 0 || ex.outcome.client_saw_bytes || !idempotent(ex.head.method)) {
    return false;
  }
  stale_retried_ = true;
  stop_awaiting();  // counted again once the request is sent whole on the new connection
  Ref<BackendConn> stale = std::move(conn_);
  stale->set_owner(nullptr);
  stale->close();  // drops its pending operations
  backend_writing_ = false;
  timer_.cancel();
  bout_len_ = 0;
  head_ready_ = established_ = false;
  request_sent_ = false;
  backend_eof_ = false;
  const std::shared_ptr<Backend>& peer = up_->backends[static_cast<std::size_t>(backend_)];
  conn_ = Ref<BackendConn>(new BackendConn(ex_->reactor(), up_->id, peer));
  connect(peer->endpoint, up_->params.connect_timeout,
          [](net::StreamOwner& o, const error_code& ec, std::size_t) {
            Attempt::from(o).on_connected(ec);
          });
  return true;
}

// The response waits for the client with the output full. When the rest of it is all on
// floodgate's side already (a Content-Length body whose remaining bytes are in bin_ and in the
// backend socket's receive queue), the backend has sent everything and is idle: its part is
// over, and what admitted the request goes back now, though the connection carries bytes until
// the client has taken them (it returns to the pool then). A chunked or close-delimited body,
// or one from a TLS backend, cannot be told complete before it is read: it is at the end.
void Attempt::note_client_paced() {
  if (backend_done_ || !request_sent_ || !conn_ || conn_->tls() != nullptr) return;
  const http::Parser& rp = conn_->parser;
  if (rp.chunked() || !rp.has_content_length()) return;
  if ((bin_len_ - bin_pos_) + conn_->unread_bytes() < rp.body_left()) return;
  backend_done_ = true;
  in_flight_.release();
  ex_->on_backend_done();
}

void Attempt::stop_awaiting() noexcept {
  if (!awaiting_) return;
  awaiting_ = false;
  ex_->reactor().metrics().awaiting_backend.add(-1);
}

bool Attempt::reusable() const noexcept {
  return request_sent_ && !backend_eof_ && conn_ && conn_->parser.keep_alive();
}

void Attempt::finish_response() {
  end(reusable());  // nothing more when the backend's part ended before the client's
  ex_->downstream().response_done();
}

void Attempt::fail(Reason reason, int error, std::string_view detail) {
  if (up_ != nullptr) {
    // docs/metrics.md: a connect timeout is both a connect failure and a timeout.
    ReactorMetrics& metrics = ex_->reactor().metrics();
    if (reason == Reason::upstream_connect_failed || reason == Reason::upstream_connect_timeout) {
      metrics.connect_failure(up_->id);
    }
    if (reason == Reason::upstream_timeout || reason == Reason::upstream_connect_timeout) {
      metrics.timeout(up_->id);
    }
    if (role_ == AttemptRole::retry) metrics.retry(up_->id, RetryResult::failed);
  }
  if (backend_failure(reason)) {
    judge(resilience::CircuitVerdict::failure, reason, 0);
    log_failure(reason, error, false, detail);
  }
  end(false);
  ex_->on_attempt_failed(*this, reason);
}

namespace {

// What the process log says a backend failure was.
std::string_view failure_text(Reason reason, bool after_head) {
  switch (reason) {
    case Reason::upstream_connect_failed:
      return "connect failed";
    case Reason::upstream_connect_timeout:
      return "connect timed out (connect_timeout)";
    case Reason::upstream_reset:
      return after_head ? "closed the connection in the middle of the response"
                        : "closed the connection before the response head";
    case Reason::upstream_timeout:
      return after_head ? "stalled in the middle of the response (response_timeout)"
                        : "sent no response head within response_timeout";
    case Reason::upstream_bad_response:
      return after_head ? "sent a malformed response body" : "sent a malformed response head";
    case Reason::upstream_tls_failed:
      return "TLS handshake failed";
    default:
      return "failed";
  }
}

// A client's bytes, printable in a log line: at most kMax of them, quotes, backslashes and
// bytes outside visible ASCII as \xHH, "..." when cut. `out` holds at least 4 * kMax + 4.
constexpr std::size_t kMaxLoggedTarget = 200;
std::string_view printable(std::string_view in, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t n = 0;
  for (std::size_t i = 0; i < in.size() && i < kMaxLoggedTarget; ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out[n++] = static_cast<char>(c);
    } else {
      out[n++] = '\\';
      out[n++] = 'x';
      out[n++] = kHex[c >> 4];
      out[n++] = kHex[c & 0xf];
    }
  }
  if (in.size() > kMaxLoggedTarget) {
    for (int i = 0; i < 3; ++i) out[n++] = '.';
  }
  return {out, n};
}

}  // namespace

// nginx's error log for a failed upstream, throttled: one line per backend and kind of failure
// per second at most, process-wide, saying how many it stands for. Formatting is on this
// thread (spdlog's queue then writes it); it is the failure path, at most a few lines a second.
void Attempt::log_failure(Reason reason, int error, bool after_head, std::string_view detail) {
  if (up_ == nullptr || backend_ < 0) return;
  const std::size_t kind = backend_failure_kind(reason);
  if (kind >= kBackendFailureKinds) return;
  Backend& peer = *up_->backends[static_cast<std::size_t>(backend_)];
  Backend::Stats& stats = peer.stats[ex_->reactor().index()];
  stats.failures[kind].add();
  if (after_head) stats.backend_aborts.add();
  const uint64_t count = peer.failure_log[kind].occurred(ex_->reactor().now());
  if (count == 0) return;
  char errtext[128] = "";
  std::string_view why = detail;
  if (why.empty() && error != 0) why = ::strerror_r(error, errtext, sizeof errtext);
  char target[4 * kMaxLoggedTarget + 4];
  char more[64] = "";
  if (count > 1) {
    *fmt::format_to_n(more, sizeof more - 1, "; {} more like it since the last line", count - 1)
         .out = '\0';
  }
  const http::RequestHead& rh = ex_->head;
  spdlog::warn("upstream \"{}\" backend {}: {}{}{}{} [{}]; client {}, request \"{} {}\"{}",
               up_->params.name, peer.address.text, failure_text(reason, after_head),
               why.empty() ? "" : " (", why, why.empty() ? "" : ")",
               kReasons[static_cast<std::size_t>(reason)].name, ex_->downstream().client_ip(),
               rh.method_name, printable(rh.target, target), more);
}

void Attempt::judge(resilience::CircuitVerdict verdict, Reason reason, int status) noexcept {
  if (!pass_) return;
  Backend& peer = *up_->backends[static_cast<std::size_t>(backend_)];
  const auto now = ex_->reactor().now();
  const resilience::CircuitTransition t = peer.breaker->record(std::move(pass_), verdict, now);
  if (t) log_circuit_transition(*up_, peer, t, {reason, status}, now);
}

void Attempt::end(bool reusable) {
  if (ended_ || !started_) {  // ended already, or nothing to end
    ended_ = true;
    return;
  }
  ended_ = true;
  stop_awaiting();
  timer_.cancel();
  connecting_ = false;
  in_flight_.release();
  pass_ = {};  // no verdict (cancelled, the client gone, floodgate's own failure): given back
  if (!conn_) return;
  Ref<BackendConn> c = std::move(conn_);
  c->drop_pending();  // nobody waits for them any more
  backend_writing_ = false;
  Reactor& reactor = ex_->reactor();
  if (reusable && !reactor.draining() && up_ != nullptr) {
    c->reused = true;
    reactor.put_idle(*c, up_->params);
  } else {
    c->close();
  }
  // Last: letting go of the owner may let go of the downstream, and of this attempt.
  c->set_owner(nullptr);
}

void Attempt::on_timeout() {
  Downstream& ds = ex_->downstream();
  Exchange& ex = *ex_;
  ex.hold();
  if (connecting_) {
    fail(Reason::upstream_connect_timeout);
  } else if (!response_head_) {
    fail(Reason::upstream_timeout);
  } else {
    if (up_ != nullptr) ex_->reactor().metrics().timeout(up_->id);
    log_failure(Reason::upstream_timeout, 0, true);
    ds.cut(OutcomeSource::upstream);  // the backend stalled mid-body: a short body
  }
  ex.release();
}

// -- Tunnels: an upgrade the backend accepted, a CONNECT target's connection.

// A tunnel target has no pool and so no connect_timeout of its own.
constexpr std::chrono::seconds kTunnelConnectTimeout{10};
// The id a tunnel's connection carries instead of a pool's (it is never pooled).
constexpr uint32_t kNoPool = UINT32_MAX;

// The backend agreed to switch protocols: its 101 goes to the client, then the downstream
// relays bytes both ways.
void Attempt::begin_tunnel() {
  Exchange& ex = *ex_;
  http::Parser& rp = conn_->parser;
  ex.decide(Outcome::relayed(101, backend_latency()));
  // The offer became a tunnel, which does no work inside the caps: what the stages admitted it
  // with goes back (resilience.inflight.exempt_upgrades); the pool slot stays until it closes.
  if (ex.gen->snapshot->protection.params.inflight.exempt_upgrades) ex.release_tickets();
  timer_.cancel();
  if (const Reason r = ex.downstream().tunnel_head(&rp); r != Reason::none) return fail(r);
  // Bytes the backend sent after its 101 head belong to the tunnel.
  const std::size_t extra = bin_len_ - rp.head_end();
  std::memmove(in_data(), in_data() + rp.head_end(), extra);
  bin_len_ = extra;
  ex.downstream().run_tunnel();
}

void Attempt::start_tunnel(const asio::ip::tcp::endpoint& to) {
  started_ = true;
  begun_at_ = ex_->reactor().now();
  conn_ = Ref<BackendConn>(new BackendConn(ex_->reactor(), kNoPool, nullptr));
  connect(to, kTunnelConnectTimeout, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    Attempt::from(o).on_tunnel_connected(ec);
  });
}

void Attempt::on_tunnel_connected(const error_code& ec) {
  connecting_ = false;
  timer_.cancel();
  if (ec) return fail(Reason::upstream_connect_failed);
  connected_at_ = head_at_ = ex_->reactor().now();  // the tunnel's "head" is floodgate's 200
  Exchange& ex = *ex_;
  if (bin_ == nullptr) bin_ = ex.reactor().response_buffers().acquire();
  if (bin_ == nullptr) return fail(Reason::buffers_exhausted);
  ex.decide(Outcome::relayed(200, ex.now() - ex.started));
  if (const Reason r = ex.downstream().tunnel_head(nullptr); r != Reason::none) return fail(r);
  bin_len_ = 0;
  ex.downstream().run_tunnel();
}

}  // namespace floodgate::proxy
