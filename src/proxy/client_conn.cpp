// The client connection: reading and parsing request heads, answering requests floodgate
// refuses, finishing an exchange and keeping the connection alive.
#include "client_conn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <array>
#include <boost/asio/error.hpp>
#include <cstring>
#include <optional>

#include "floodgate/core/ascii.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/request_key.h"
#include "floodgate/routing/match_path.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

ClientConn::ClientConn(Reactor& reactor, int fd, const sockaddr* peer, const net::TlsListener* tls)
    : reactor_(reactor),
      client_(reactor.poller(), *this),
      tls_listener_(tls),
      client_timer_([](void* c) { static_cast<ClientConn*>(c)->on_client_timeout(); }, this),
      hedge_timer_([](void* c) { static_cast<ClientConn*>(c)->on_hedge_timer(); }, this) {
  for (Attempt& a : ex_.attempts) a.bind(*this);
  ex_.wait.poller = &reactor.poller();
  ex_.clock = &reactor.poller().clock();
  ex_.wait.owner = this;
  ex_.metrics = &reactor.metrics();
  ex_.quota_links = &reactor.quota_links();
  ex_.quota.ex = &ex_;
  ex_.reactor = reactor.index();
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // What a slow reader costs the kernel is bounded too: without it the kernel grows a client's
  // send buffer to megabytes that floodgate fills (copying from the backend) for a client that
  // takes a few kilobytes a second.
  if (const uint32_t unsent = reactor.snapshot().server.max_unsent_bytes; unsent > 0) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof(unsent));
  }
  const void* addr = nullptr;
  if (peer->sa_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr;
  } else if (peer->sa_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
  }
  if (addr != nullptr && ::inet_ntop(peer->sa_family, addr, client_ip_, sizeof(client_ip_))) {
    client_ip_len_ = static_cast<uint8_t>(std::strlen(client_ip_));
  }
  ex_.peer = IpAddress::of(peer).value_or(IpAddress{});
  ex_.peer_text = client_ip();
  ex_.connection_id = reactor.next_connection_id();
  adopt_error_ = client_.adopt(fd);
  reactor_.add_client(*this);
  reactor_.metrics().client_connections.add(1);
  reactor_.metrics().accepted_connections.add();
}

ClientConn::~ClientConn() {
  release_buffers();
  reactor_.metrics().client_connections.add(-1);
  reactor_.remove_client(*this);
}

char* ClientConn::in_data() const {
  return in_ + reactor_.request_fields() * sizeof(http::HeaderField);
}

bool ClientConn::acquire_out() noexcept {
  if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
  return cout_ != nullptr;
}

std::size_t ClientConn::out_room() const noexcept {
  return BufferLayout::kResponseData - cout_len_;
}

// Every buffer goes back to its pool: when the last pending completion has let go (the
// destructor) or when nothing is pending (an exchange that ended).
void ClientConn::release_buffers() {
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  reactor_.response_buffers().release(std::exchange(cout_, nullptr));
  for (Attempt& a : ex_.attempts) a.release_buffers();
  in_len_ = in_pos_ = cout_len_ = cout_sent_ = early_end_ = 0;
}

void ClientConn::start() {
  self_ = Ref<ClientConn>(this);
  if (adopt_error_ != 0) return close();  // the poller could not take the socket
  // Until its first request head is complete the connection is an opening one: bounded in
  // number (the oldest makes room), and given handshake_timeout for its handshake (TLS) or its
  // first byte (plain), then closed without an answer. It holds no slot of any cap: a TLS
  // handshake takes one when its ClientHello is complete (on_tls_hello).
  reactor_.opening_begin(*this);
  if (tls_listener_ != nullptr) {
    // The first read runs the handshake, then reads the first head.
    auto session = std::make_unique<net::TlsSession>(reactor_.snapshot().tls,
                                                     *std::exchange(tls_listener_, nullptr));
    if (!session->ok()) return close();  // OpenSSL is out of memory
    client_.start_tls(std::move(session));
  }
  arm_client_timer(reactor_.snapshot().server.handshake_timeout);
  do_client_read();
}

void ClientConn::arm_client_timer(std::chrono::milliseconds d) {
  reactor_.wheel().schedule(client_timer_, reactor_.now() + d);
}

void ClientConn::do_client_read() {
  if (client_.reading() || closed_) return;
  // An idle connection reads into landing_, so that it holds no pooled buffer.
  read_into_landing_ = in_ == nullptr || lingering_;
  const std::size_t cap = reactor_.request_data();
  char* const data = read_into_landing_ ? landing_ : in_data() + in_len_;
  client_.read_some(data, read_into_landing_ ? sizeof(landing_) : cap - in_len_,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      ClientConn& c = ClientConn::from(o);
                      c.on_client_read(ec, n, c.read_into_landing_);
                    });
}

void ClientConn::on_client_read(const error_code& ec, std::size_t n, bool landing) {
  if (closed_) return;
  if (lingering_) return ec ? close() : do_client_read();  // discard until the client closes
  if (ec) return cut(OutcomeSource::client);  // the client went away: a request is abandoned
  if (landing) {
    if (in_ == nullptr) in_ = reactor_.request_buffers().acquire();
    if (in_ == nullptr) return refuse_without_buffer(n);
    std::memcpy(in_data() + in_len_, landing_, n);
  }
  in_len_ += n;
  ex_.bytes_in += n;
  if (const net::TlsSession* tls = client_.tls(); tls != nullptr && tls->read_early) {
    early_end_ = in_len_;  // early data comes before everything else on the connection
  }
  switch (phase_) {
    case Phase::idle:
      start_request();
      return parse_head();
    case Phase::head:
      return parse_head();
    case Phase::forwarding:
      return pump_request_body(ex_.attempt());
    case Phase::queued:
      return watch_client_while_queued();
    default:
      return;
  }
}

void ClientConn::start_request() {
  begin_request();
  const Snapshot& snap = *ex_.gen->snapshot;
  arm_client_timer(snap.server.header_timeout);
  parser_.begin(in_data(), in_fields(), snap.limits);
}

// A new exchange; the caller starts the parser on where its head is. The head is read on the
// generation current now; on_head() routes on the one current then.
void ClientConn::begin_request() {
  phase_ = Phase::head;
  in_pos_ = 0;
  ex_.begin(reactor_.current(), ex_.now(), in_len_);
  for (Attempt& a : ex_.attempts) a.reset();
}

void ClientConn::parse_head() {
  switch (parser_.parse_head(in_len_)) {
    case http::Parser::Result::need_more:
      if (in_len_ == reactor_.request_data()) {
        return respond(Reason::header_too_large);
      }
      return do_client_read();
    case http::Parser::Result::error:
      return respond(parser_.error_reason());
    default:
      return on_head();
  }
}

void ClientConn::on_head() {
  client_timer_.cancel();
  reactor_.opening_end(*this);
  // The request runs on the configuration current now that its head is complete, not on the
  // one current at its first byte: a head still arriving when that generation was forcibly
  // retired would otherwise be routed on the retired snapshot (to a pool the reload removed,
  // or into a queue no retirement will ever empty again).
  if (ex_.gen.get() != reactor_.current().get()) ex_.gen = reactor_.current();
  http::RequestFacts& facts = ex_.facts;
  in_pos_ = parser_.head_end();
  ex_.head = parser_.request_head();
  ex_.head_request = ex_.head.method == HTTP_HEAD;
  if (const Reason r = http::inspect_request(ex_.head, facts); r != Reason::none) return respond(r);
  MatchPath path;  // what routes match: the normalised path (on the stack, for this match)
  const bool has_path = !facts.asterisk && !facts.connect;
  if (has_path && path.assign(facts.path) != PathVerdict::ok) return respond(Reason::bad_request);
  if (!facts.has_body) {
    // Complete the message in the parser now, so a rejection below can keep the connection.
    std::size_t consumed = 0;
    auto no_sink = [](const char*, std::size_t) {};
    if (parser_.parse_body(in_data() + in_pos_, 0, consumed, no_sink) ==
        http::Parser::Result::message_done) {
      ex_.request_parsed = true;
    }
  }
  // The front of the chain (the in-flight cap first): before any other per-request work.
  ex_.request = resilience::RequestView{ex_.head.method_name,
                                        ex_.head.target,
                                        has_path ? path.view() : std::string_view{},
                                        facts.host_header,
                                        facts.connect ? std::string_view{} : facts.authority,
                                        facts.connect,
                                        facts.upgrade,
                                        facts.origin,
                                        facts.cors_request_method,
                                        early_end_ > 0};
  ex_.inflight_exempt = -1;  // a new request: its exemption is decided afresh
  const Snapshot& snap = *ex_.gen->snapshot;
  if (const Decision d = snap.front.run(ex_, reactor_.metrics());
      d.verdict == Decision::Verdict::stop) {
    return respond(d);
  }
  if (snap.server.max_body_bytes != 0 && ex_.head.body == http::BodyFraming::length &&
      ex_.head.content_length > snap.server.max_body_bytes) {
    return respond(Reason::body_too_large);
  }
  if (facts.request_id.empty()) {
    reactor_.next_request_id(ex_.request_id_buf);
    ex_.request_id = {ex_.request_id_buf, sizeof(ex_.request_id_buf)};
  } else {
    ex_.request_id = facts.request_id;
  }
  if (facts.asterisk) return answer_options();
  if (facts.connect) return open_connect_tunnel();  // the protocol policy allowed it
  const Route* route = snap.routes.match(facts.host, path.view());
  if (route == nullptr) return respond(Reason::no_route);
  http::apply_h2c_policy(facts, route->allow_h2c_upgrade);
  ex_.up = &snap.upstream(route->upstream);
  ex_.cursor = 0;  // the route's chain, from its first stage
  run_chain(snap.route_chains[route->index]);
}

// The reactor is at server.max_buffers_per_reactor (or out of memory): the request that has
// begun in landing_ is answered from the prebuilt responses, which need no buffer, and the
// connection closes (its unread rest cannot be told from a next request).
void ClientConn::refuse_without_buffer(std::size_t n) {
  in_len_ = 0;
  begin_request();
  parser_.begin(landing_, nullptr, {});  // nothing of this request is parsed (access log)
  ex_.bytes_in = n;
  respond(Reason::buffers_exhausted);
}

void ClientConn::respond(Reason reason, const PrebuiltAnswer* answer, int status) {
  Outcome o = Outcome::generated(reason);
  if (status != 0) o.status = status;
  ex_.decide(o);
  reactor_.metrics().generated(reason);
  const bool close = generated_closes(reason);
  const bool pool_reason = pool_rejection_index(reason) < kPoolRejections.size();
  std::string_view bytes = answer != nullptr ? answer->bytes(close)
                           : pool_reason && ex_.up != nullptr
                               ? ex_.up->rejection(reason, close)
                               : http::generated_response(reason, close);
  write_generated(bytes, close);
}

void ClientConn::respond(const Decision& d) {
  if (d.answer != nullptr || (d.retry_after == 0 && d.extra.empty())) {
    return respond(d.reason, d.answer, d.status);
  }
  respond_retry_after(d.reason, d.retry_after, d.extra);
}

void ClientConn::respond_retry_after(Reason reason, uint32_t retry_after_seconds,
                                     std::string_view extra) {
  if (!acquire_out()) return respond(reason);  // no buffer: the plain response
  ex_.decide(Outcome::generated(reason));
  reactor_.metrics().generated(reason);
  const bool close = generated_closes(reason);
  http::Writer w(cout_, BufferLayout::kResponseData);
  http::write_generated_response({.reason = reason,
                                  .close = close,
                                  .retry_after_seconds = retry_after_seconds,
                                  .extra_headers = extra},
                                 w);
  cout_len_ = 0;  // the bytes are written from the buffer's start, not as the attempt's output
  write_generated({cout_, w.size()}, close);
}

// The unread rest of a rejected request cannot be told apart from a next request: close.
bool ClientConn::generated_closes(Reason reason) const noexcept {
  return http::closes_connection(reason) || !ex_.facts.keep_alive || !ex_.request_parsed ||
         reactor_.draining();
}

// OPTIONS * asks about the server, not a resource (RFC 9110 section 9.3.7), and no route has a
// path to match it with: floodgate answers for itself, with what it forwards.
void ClientConn::answer_options() {
  ex_.decide(Outcome::answered(200));
  const bool close = !ex_.facts.keep_alive || !ex_.request_parsed || reactor_.draining();
  write_generated(http::options_response(close), close);
}

// Writes a response floodgate made (static bytes), then finishes the request; `close` ends the
// connection after it (with a lingering close: see linger_close()).
void ClientConn::write_generated(std::string_view bytes, bool close) {
  const std::size_t head = bytes.find("\r\n\r\n") + 4;
  if (ex_.head_request) bytes = bytes.substr(0, head);  // HEAD: no body
  ex_.head_bytes_out += head;
  // The answer is decided: what admitted the request goes back before the client reads it, so
  // that its next request (on this connection or another) finds the slot free.
  ex_.release_admission();
  arm_send_timer();
  phase_ = Phase::generated;
  client_writing_ = true;
  generated_close_ = close;
  client_.write(bytes.data(), bytes.size(),
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  ClientConn& c = ClientConn::from(o);
                  c.client_writing_ = false;
                  c.ex_.bytes_out += n;
                  c.on_generated_written(ec, c.generated_close_);
                });
}

void ClientConn::on_generated_written(const error_code& ec, bool close) {
  if (closed_) return;
  finish_request(ec || close);
}

// The bytes the attempt put in the output go to the client.
void ClientConn::write_out() {
  if (client_writing_) return;  // the completion writes what was added meanwhile
  client_writing_ = true;
  ex_.outcome.client_saw_bytes = true;
  arm_send_timer();
  const std::size_t from = std::exchange(cout_sent_, cout_len_);
  client_.write(cout_ + from, cout_len_ - from,
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  ClientConn& c = ClientConn::from(o);
                  c.client_writing_ = false;
                  c.on_client_written(ec, n);
                });
}

void ClientConn::on_client_written(const error_code& ec, std::size_t n) {
  ex_.bytes_out += n;
  if (closed_) return;
  client_timer_.cancel();
  if (ec) return cut(OutcomeSource::client);
  if (phase_ == Phase::closing) return linger_close();
  if (cout_sent_ < cout_len_) return write_out();  // the attempt added bytes meanwhile
  cout_len_ = cout_sent_ = 0;
  ex_.attempt().on_client_drained();
}

void ClientConn::on_attempt_failed(Attempt& failed, Reason reason) {
  Attempt& other = ex_.other(failed);
  if (other.live()) {  // hedged: the other attempt may still answer
    ex_.current = ex_.index_of(other);
    return;
  }
  ex_.current = ex_.index_of(failed);
  hedge_timer_.cancel();
  if (ex_.outcome.client_saw_bytes || client_writing_) return cut(OutcomeSource::upstream);
  if (retry_elsewhere(reason)) return;
  respond(reason);
}

void ClientConn::claim(Attempt& a) {
  hedge_timer_.cancel();
  ex_.current = ex_.index_of(a);
  Attempt& other = ex_.other(a);
  const bool hedged = ex_.attempts[1].role() == AttemptRole::hedge && ex_.attempts[1].started();
  if (!hedged || ex_.hedge_settled) return;
  ex_.hedge_settled = true;
  ReactorMetrics& m = reactor_.metrics();
  m.hedge(ex_.up->id,
          a.role() == AttemptRole::hedge ? HedgeResult::won_by_hedge : HedgeResult::won_by_primary);
  if (other.live()) {
    // HTTP/1.1 cannot cancel a request on a connection: the loser's is closed, never pooled
    // mid-response; its count in the backend's load and its circuit pass go back (no verdict).
    other.end(false);
    m.hedge(ex_.up->id, HedgeResult::cancelled);
  }
}

void ClientConn::on_response_done(bool close) {
  finish_request(close || !ex_.request_parsed);
}

void ClientConn::end_attempts() noexcept {
  for (Attempt& a : ex_.attempts) a.end(false);  // one still running is abandoned, never pooled
}

// Ends the exchange in progress: metrics, access log, backend release, then either the next
// request (keep-alive, possibly already pipelined in in_) or closing the connection.
void ClientConn::finish_request(bool close_client) {
  if (phase_ == Phase::idle || phase_ == Phase::closing) return;
  hedge_timer_.cancel();
  log_request();
  end_attempts();
  ex_.end();  // the pool slot, then the stages' tickets (the in-flight cap's slot)
  // Nothing is pending on the response side: its buffers go back now.
  reactor_.response_buffers().release(std::exchange(cout_, nullptr));
  cout_len_ = cout_sent_ = 0;
  for (Attempt& a : ex_.attempts) a.release_buffers();
  if (close_client || reactor_.draining()) return linger_close();
  // Keep-alive: move pipelined bytes to the front of in_.
  const std::size_t leftover = in_len_ - in_pos_;
  phase_ = Phase::idle;
  if (leftover > 0) {
    std::memmove(in_data(), in_data() + in_pos_, leftover);
    in_len_ = leftover;
    early_end_ = early_end_ > in_pos_ ? early_end_ - in_pos_ : 0;
    start_request();
    return parse_head();
  }
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  in_len_ = in_pos_ = early_end_ = 0;
  arm_client_timer(reactor_.snapshot().server.idle_timeout);
  do_client_read();
}

void ClientConn::log_request() {
  const Outcome& outcome = ex_.outcome;
  const Upstream* up = ex_.up;
  const std::size_t slot = up != nullptr ? ReactorMetrics::slot_for(up->id) : 0;
  const auto elapsed = ex_.now() - ex_.started;
  if (outcome.status != 0) reactor_.metrics().count_request(slot, outcome.status, elapsed);
  reactor_.metrics().refused(slot, outcome.reason);  // the process log's shedding summary
  AccessLog& log = reactor_.access_log();
  if (!log.enabled()) return;
  const http::RequestHead& head = ex_.head;
  AccessRecord r;
  r.time = std::chrono::system_clock::now();
  r.client = r.peer = client_ip();
  std::array<char, kKeyScratch> client{};  // the client's address, from a trusted proxy's head
  if (head.complete()) {
    // The client the rate limits' client_ip counted, by the generation the request ran on.
    const Snapshot& snap = request_snapshot();
    if (const std::optional<IpAddress> forwarded =
            forwarded_client(ex_.peer, snap.server.trusted_proxies, &head)) {
      r.client = address_text(*forwarded, client);
    }
    r.method = head.method_name;
    r.target = head.target;
    r.protocol = head.protocol();
    r.host = ex_.facts.host.empty() ? ex_.facts.authority : ex_.facts.host;
    for (uint32_t i = 0; i < head.field_count(); ++i) {
      const std::string_view name = head.field_name(i);
      if (r.user_agent.empty() && name.size() == 10 && ascii::iequals(name, "user-agent")) {
        r.user_agent = head.field_value(i);
      } else if (r.referer.empty() && name.size() == 7 && ascii::iequals(name, "referer")) {
        r.referer = head.field_value(i);
      }
    }
  }
  if (const net::TlsSession* tls = client_.tls()) {
    const net::TlsFacts facts = tls->facts();
    r.tls_version = facts.version;
    r.tls_cipher = facts.cipher;
  }
  r.status = outcome.status;
  r.bytes_in = ex_.bytes_in;
  r.bytes_out = ex_.bytes_out;
  r.body_bytes_sent = ex_.bytes_out > ex_.head_bytes_out ? ex_.bytes_out - ex_.head_bytes_out : 0;
  if (const Attempt& a = ex_.attempt(); a.started()) {
    r.connect_time = a.connect_time();
    r.head_time = a.head_time();
  }
  if (up != nullptr) {
    r.upstream = up->params.name;
    if (const int32_t b = ex_.attempt().backend(); b >= 0) {
      r.backend = up->backends[static_cast<std::size_t>(b)]->address.text;
    }
    for (const Attempt& a : ex_.attempts) {  // in the order they were made, every send
      if (a.backend() < 0) continue;
      for (uint8_t i = 0; i < a.sends() && r.attempts < r.backends.size(); ++i) {
        r.backends[r.attempts++] =
            up->backends[static_cast<std::size_t>(a.backend())]->address.text;
      }
    }
  }
  if (ex_.facts.connect) {  // a CONNECT tunnel's target
    r.backend = ex_.facts.authority;
    if (ex_.attempt().started()) {
      r.backends[0] = r.backend;
      r.attempts = 1;
    }
  }
  r.duration = elapsed;
  r.reason = outcome.reason;
  if (ex_.rate_limited_by != nullptr) r.rate_limit = *ex_.rate_limited_by;
  if (ex_.quota_by != nullptr) r.quota = *ex_.quota_by;
  r.request_id = ex_.request_id;
  r.would_reject = ex_.would_reject;
  log.write(reactor_.index(), r);
}

// Closes the connection gracefully: our response is out, so stop sending and discard what
// the client still sends for a moment, so that closing with unread bytes does not reset the
// connection before the client has read the response (nginx's lingering close).
void ClientConn::linger_close() {
  if (closed_) return;
  phase_ = Phase::closing;
  if (client_writing_) return;  // the write completion comes back here
  if (!lingering_) {
    lingering_ = true;
    client_.shutdown_send();
    reactor_.wheel().schedule(client_timer_, reactor_.now() + std::chrono::seconds(2));
  }
  do_client_read();
}

// A handshake costs far more CPU than a request: from its complete ClientHello (before the
// signature and the key exchange) to its end it holds a slot of the front in-flight cap, so a
// flood of new TLS connections cannot take the CPU admitted requests need. A connection that
// sends nothing, or only part of a ClientHello, costs no CPU and holds no slot (its bound is
// the opening connections'). At the cap the handshake ends with an internal_error alert (it
// cannot be answered with an HTTP status before TLS); in shadow mode it goes on and the
// would-be refusal is counted.
bool ClientConn::on_tls_hello() noexcept {
  return admit_handshake();
}

// nginx answers "400 The plain HTTP request was sent to HTTPS port"; floodgate answers its
// plain_http_to_tls 400 (prebuilt), counted like every generated answer, then closes.
std::string_view ClientConn::tls_plain_http_answer() noexcept {
  reactor_.metrics().generated(Reason::plain_http_to_tls);
  return http::generated_response(Reason::plain_http_to_tls, true);
}

bool ClientConn::admit_handshake() noexcept {
  const Snapshot& snap = reactor_.snapshot();
  if (snap.max_inflight == 0) return true;
  handshake_permit_ = snap.front_state->inflight.try_enter();
  if (handshake_permit_) return true;
  if (snap.inflight_shadow) {
    reactor_.metrics().shadow_rejected(StageId::inflight, Reason::inflight_cap);
    return true;
  }
  reactor_.metrics().tls_handshake(TlsHandshakeResult::refused, kTlsVersionUnknown);
  return false;
}

void ClientConn::on_tls_handshake(Handshake result) noexcept {
  handshake_permit_.release();
  const net::TlsSession& tls = *client_.tls();
  if (tls.hello == net::TlsSession::Hello::refused) return;  // counted as refused already
  if (result == Handshake::ok && phase_ == Phase::idle && !closed_) {
    // The first head has header_timeout from the handshake's end (and again from its first
    // byte, start_request).
    arm_client_timer(reactor_.snapshot().server.header_timeout);
  }
  const std::size_t v = tls_version_index(tls.version_label());
  TlsHandshakeResult r = TlsHandshakeResult::ok;
  if (result == Handshake::failed) r = TlsHandshakeResult::failed;
  if (result == Handshake::closed) r = TlsHandshakeResult::closed;
  reactor_.metrics().tls_handshake(r, v);
  if (result == Handshake::ok) {
    reactor_.metrics().tls_handshake_done(reactor_.poller().clock().now() - tls.started,
                                          tls.facts().resumed);
  }
}

// send_timeout is checked four times per period: the kernel says when it takes bytes of a
// write (Stream::last_sent_at), and how much it still holds for the client (unsent_bytes),
// which shrinks as the client reads even while the socket is too full to take more. The
// connection is closed between send_timeout and 1.25 x send_timeout after the last progress.
void ClientConn::arm_send_timer() {
  send_since_ = reactor_.now();
  send_unsent_ = kUnsentUnknown;
  const std::chrono::milliseconds timeout = request_snapshot().server.send_timeout;
  arm_client_timer(std::clamp(timeout / 4, std::chrono::milliseconds(1), kClientPacedAfter));
}

bool ClientConn::send_progressing() {
  const auto now = reactor_.now();
  const std::size_t unsent = client_.unsent_bytes();
  if (send_unsent_ != kUnsentUnknown && unsent < send_unsent_) send_since_ = now;
  send_unsent_ = unsent;
  const auto since = std::max(send_since_, client_.last_sent_at());
  const std::chrono::milliseconds timeout = request_snapshot().server.send_timeout;
  if (now - since >= timeout) {
    reactor_.metrics().send_timeouts.add();
    return false;
  }
  const auto check = now + std::max(timeout / 4, std::chrono::milliseconds(1));
  reactor_.wheel().schedule(client_timer_, std::min(since + timeout, check));
  return true;
}

void ClientConn::on_client_timeout() {
  Ref<ClientConn> keep(this);
  if (const net::TlsSession* tls = client_.tls(); tls != nullptr && !tls->handshake_reported) {
    // The handshake did not finish within header_timeout: closed, never answered in plain text.
    reactor_.metrics().tls_handshake(TlsHandshakeResult::timeout, kTlsVersionUnknown);
    return close();
  }
  switch (phase_) {
    case Phase::idle:  // nothing sent yet, or between keep-alive requests: close silently
      return close();
    case Phase::head:  // the head did not complete in time
      return respond(Reason::header_timeout);
    case Phase::queued:  // the wait's deadline (the pool's pending_timeout)
      return leave_wait(ex_.wait.at_deadline, CancelReason::timed_out);
    case Phase::forwarding:  // the client stalled reading the response, or sending its body
      if (client_writing_ && ex_.attempt().response_started()) {
        // A write of the response has waited kClientPacedAfter at least: the kernel holds all
        // it can for this client, which reads slower than the backend sends.
        ex_.release_tickets();
      }
      if (client_writing_ && send_progressing()) return;
      return cut(OutcomeSource::client);
    case Phase::tunnel:  // no traffic either way for idle_timeout
      return cut(OutcomeSource::client);
    case Phase::generated:
    case Phase::closing:  // a response still being written, or the linger
      if (client_writing_ && send_progressing()) return;
      return close();
  }
}

void ClientConn::drain() {
  if (phase_ == Phase::idle) close();
  // Otherwise finish_request() sees draining() and closes after the response.
}

bool ClientConn::force_close() {
  const bool cut = phase_ != Phase::idle && phase_ != Phase::closing;
  Ref<ClientConn> keep(this);
  if (cut) ex_.outcome.cut_short(OutcomeSource::floodgate);
  close();
  return cut;
}

void ClientConn::on_generation_retired(uint64_t retired, const Snapshot& current) {
  if (!ex_.gen || ex_.gen->snapshot->generation != retired || ex_.up == nullptr) return;
  if (phase_ == Phase::queued) {
    // A waiter never outlives its generation's grace: wake it and turn it away, whether or not
    // its pool lives on (it would otherwise be admitted onto a configuration that is gone).
    const Ref<ClientConn> keep(this);
    return leave_wait(Reason::generation_retired, CancelReason::retired);
  }
  // A pool that lives on by name belongs to the current generation too: its requests (long
  // downloads, tunnels) carry on. Only a request whose pool was removed is ended.
  const uint32_t id = ex_.up->id;
  if (id < current.by_id.size() && current.by_id[id] != nullptr) return;
  const Ref<ClientConn> keep(this);
  cut(OutcomeSource::floodgate);
}

void ClientConn::cut(OutcomeSource by) {
  if (phase_ != Phase::idle && phase_ != Phase::closing) ex_.outcome.cut_short(by);
  // The client gave up on a backend's response (HAProxy's cli_abrt): counted for that backend.
  if (const Attempt& a = ex_.attempt(); by == OutcomeSource::client && ex_.up != nullptr &&
                                        a.live() && a.backend() >= 0 &&
                                        (phase_ == Phase::forwarding || phase_ == Phase::tunnel)) {
    ex_.up->backends[static_cast<std::size_t>(a.backend())]
        ->stats[reactor_.index()]
        .client_aborts.add();
  }
  close();
}

void ClientConn::close() {
  if (closed_) return;
  closed_ = true;
  const bool queued = phase_ == Phase::queued;
  if (phase_ == Phase::forwarding || phase_ == Phase::tunnel || phase_ == Phase::generated ||
      queued) {
    log_request();  // cut short: logged with the status it had (0 = no response was sent)
  }
  phase_ = Phase::closing;
  client_timer_.cancel();
  hedge_timer_.cancel();
  handshake_permit_.release();
  reactor_.opening_end(*this);
  if (queued && ex_.wait.stage != nullptr) {  // the client went away while waiting
    Wait& w = ex_.wait;
    w.abandoned = true;
    if (w.stage->cancel(ex_, CancelReason::client_gone)) {
      w.stage = nullptr;
      parked_ = Ref<ClientConn>();  // self_ still holds the connection
    }  // else the completion is on its way: the stage gives back what it brings
  }
  end_attempts();
  ex_.end(false);  // settled; the generation stays pinned while completions may be pending
  client_.close();
  const Ref<ClientConn> last = std::move(self_);  // may be the last reference: nothing follows
  // Buffers go back to the pool when the last pending completion releases the connection.
}

}  // namespace floodgate::proxy
