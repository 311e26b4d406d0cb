// The client side of a Session: reading and parsing request heads, answering requests
// floodgate rejects, finishing a request and keeping the connection alive.
#include "session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <boost/asio/error.hpp>
#include <cstring>

#include "floodgate/proxy/reactor.h"
#include "floodgate/routing/match_path.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

Session::Session(Reactor& reactor, int fd, const sockaddr* peer)
    : reactor_(reactor),
      client_(reactor.poller(), *this),
      client_timer_([](void* s) { static_cast<Session*>(s)->on_client_timeout(); }, this),
      backend_timer_([](void* s) { static_cast<Session*>(s)->on_backend_timeout(); }, this),
      handoff_(*this, reactor.poller()),
      waiter_(&Session::on_admission_complete, &handoff_) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const void* addr = nullptr;
  if (peer->sa_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr;
  } else if (peer->sa_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
  }
  if (addr != nullptr && ::inet_ntop(peer->sa_family, addr, client_ip_, sizeof(client_ip_))) {
    client_ip_len_ = static_cast<uint8_t>(std::strlen(client_ip_));
  }
  adopt_error_ = client_.adopt(fd);
  reactor_.add_session(*this);
  reactor_.metrics().client_connections.add(1);
}

Session::~Session() {
  release_buffers();
  reactor_.metrics().client_connections.add(-1);
  reactor_.remove_session(*this);
}

char* Session::in_data() const {
  return in_ + reactor_.request_fields() * sizeof(http::HeaderField);
}

char* Session::bin_data() const {
  return bin_ + BufferLayout::kResponseFields * sizeof(http::HeaderField);
}

void Session::release_buffers() {
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  reactor_.request_buffers().release(std::exchange(bout_, nullptr));
  reactor_.response_buffers().release(std::exchange(bin_, nullptr));
  reactor_.response_buffers().release(std::exchange(cout_, nullptr));
  in_len_ = in_pos_ = bout_len_ = bin_len_ = bin_pos_ = cout_len_ = 0;
}

void Session::start() {
  self_ = Ref<Session>(this);
  if (adopt_error_ != 0) return close();  // the poller could not take the socket
  // A connection that never sends a byte is closed silently after header_timeout.
  arm_client_timer(reactor_.snapshot().server.header_timeout);
  do_client_read();
}

void Session::arm_client_timer(std::chrono::milliseconds d) {
  reactor_.wheel().schedule(client_timer_, reactor_.now() + d);
}

void Session::arm_backend_timer(std::chrono::milliseconds d) {
  reactor_.wheel().schedule(backend_timer_, reactor_.now() + d);
}

void Session::do_client_read() {
  if (client_.reading() || closed_) return;
  // An idle connection reads into landing_, so that it holds no pooled buffer.
  read_into_landing_ = in_ == nullptr || lingering_;
  const std::size_t cap = reactor_.request_data();
  char* const data = read_into_landing_ ? landing_ : in_data() + in_len_;
  client_.read_some(data, read_into_landing_ ? sizeof(landing_) : cap - in_len_,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      Session& s = Session::from(o);
                      s.on_client_read(ec, n, s.read_into_landing_);
                    });
}

void Session::on_client_read(const error_code& ec, std::size_t n, bool landing) {
  if (closed_) return;
  if (lingering_) return ec ? close() : do_client_read();  // discard until the client closes
  if (ec) return cut(OutcomeSource::client);  // the client went away: a request is abandoned
  if (landing) {
    if (in_ == nullptr) in_ = reactor_.request_buffers().acquire();
    if (in_ == nullptr) return refuse_without_buffer(n);
    std::memcpy(in_data() + in_len_, landing_, n);
  }
  in_len_ += n;
  bytes_in_ += n;
  switch (phase_) {
    case Phase::idle:
      start_request();
      return parse_head();
    case Phase::head:
      return parse_head();
    case Phase::forwarding:
      return pump_request_body();
    case Phase::queued:
      return watch_client_while_queued();
    default:
      return;
  }
}

void Session::start_request() {
  begin_request();
  const Snapshot& snap = *gen_->snapshot;
  arm_client_timer(snap.server.header_timeout);
  parser_.begin(in_data(), in_fields(), snap.limits);
}

// A new request's state; the caller starts the parser on where its head is.
void Session::begin_request() {
  phase_ = Phase::head;
  started_ = std::chrono::steady_clock::now();
  gen_ = reactor_.current();  // the head is read on this one; on_head() routes on the current
  in_pos_ = 0;
  facts_ = {};
  up_ = nullptr;
  backend_ = -1;
  plan_ = {};
  outcome_ = Outcome{};
  request_sent_ = request_parsed_ = response_done_ = false;
  connecting_ = response_head_ = backend_eof_ = last_chunk_written_ = stale_retried_ = false;
  head_request_ = false;
  body_bytes_ = bytes_out_ = 0;
  bytes_in_ = in_len_;
  request_id_view_ = {};
}

void Session::parse_head() {
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

void Session::on_head() {
  client_timer_.cancel();
  // The request runs on the configuration current now that its head is complete, not on the
  // one current at its first byte: a head still arriving when that generation was forcibly
  // retired would otherwise be routed on the retired snapshot (to a pool the reload removed,
  // or into a queue no retirement will ever empty again).
  if (gen_.get() != reactor_.current().get()) gen_ = reactor_.current();
  in_pos_ = parser_.head_end();
  head_request_ = parser_.method() == HTTP_HEAD;
  if (const Reason r = http::inspect_request(parser_, facts_); r != Reason::none) return respond(r);
  MatchPath path;  // what routes match: the normalised path (on the stack, for this match)
  const bool has_path = !facts_.asterisk && !facts_.connect;
  if (has_path && path.assign(facts_.path) != PathVerdict::ok) return respond(Reason::bad_request);
  if (!facts_.has_body) {
    // Complete the message in the parser now, so a rejection below can keep the connection.
    std::size_t consumed = 0;
    auto no_sink = [](const char*, std::size_t) {};
    if (parser_.parse_body(in_data() + in_pos_, 0, consumed, no_sink) ==
        http::Parser::Result::message_done) {
      request_parsed_ = true;
    }
  }
  // The front of the chain (the in-flight cap first): before any other per-request work.
  ex_.request = resilience::RequestView{parser_.method_name(),
                                        parser_.target(),
                                        has_path ? path.view() : std::string_view{},
                                        facts_.host_header,
                                        facts_.connect ? std::string_view{} : facts_.authority,
                                        facts_.connect,
                                        facts_.upgrade,
                                        facts_.origin,
                                        facts_.cors_request_method};
  if (const Decision d = gen_->snapshot->front.run(ex_, reactor_.metrics());
      d.verdict == Decision::Verdict::stop) {
    return respond(d.reason, d.answer, d.status);
  }
  const ServerParams& server = gen_->snapshot->server;
  if (server.max_body_bytes != 0 && !parser_.chunked() &&
      parser_.content_length() > server.max_body_bytes) {
    return respond(Reason::body_too_large);
  }
  if (facts_.request_id.empty()) {
    reactor_.next_request_id(request_id_);
    request_id_view_ = {request_id_, sizeof(request_id_)};
  } else {
    request_id_view_ = facts_.request_id;
  }
  if (facts_.asterisk) return answer_options();
  if (facts_.connect) return open_connect_tunnel();  // the protocol policy allowed it
  const Snapshot& snap = *gen_->snapshot;
  const Route* route = snap.routes.match(facts_.host, path.view());
  if (route == nullptr) return respond(Reason::no_route);
  http::apply_h2c_policy(facts_, route->allow_h2c_upgrade);
  up_ = &snap.upstream(route->upstream);
  admit();
}

// The reactor is at server.max_buffers_per_reactor (or out of memory): the request that has
// begun in landing_ is answered from the prebuilt responses, which need no buffer, and the
// connection closes (its unread rest cannot be told from a next request).
void Session::refuse_without_buffer(std::size_t n) {
  in_len_ = 0;
  begin_request();
  parser_.begin(landing_, nullptr, {});  // nothing of this request is parsed (access log)
  bytes_in_ = n;
  respond(Reason::buffers_exhausted);
}

void Session::respond(Reason reason, const PrebuiltAnswer* answer, int status) {
  Outcome o = Outcome::generated(reason);
  if (status != 0) o.status = status;
  decide(o);
  reactor_.metrics().generated(reason);
  // The unread rest of a rejected request cannot be told apart from a next request: close.
  const bool close = http::closes_connection(reason) || !facts_.keep_alive || !request_parsed_ ||
                     reactor_.draining();
  const bool pool_reason = pool_rejection_index(reason) < kPoolRejections.size();
  std::string_view bytes = answer != nullptr ? answer->bytes(close)
                           : pool_reason && up_ != nullptr
                               ? up_->rejection(reason, close)
                               : http::generated_response(reason, close);
  if (head_request_) bytes = bytes.substr(0, bytes.find("\r\n\r\n") + 4);
  write_generated(bytes, close);
}

// OPTIONS * asks about the server, not a resource (RFC 9110 section 9.3.7), and no route has a
// path to match it with: floodgate answers for itself, with what it forwards.
void Session::answer_options() {
  decide(Outcome::answered(200));
  const bool close = !facts_.keep_alive || !request_parsed_ || reactor_.draining();
  write_generated(http::options_response(close), close);
}

// Writes a response floodgate made (static bytes), then finishes the request; `close` ends the
// connection after it (with a lingering close: see linger_close()).
void Session::write_generated(std::string_view bytes, bool close) {
  client_timer_.cancel();
  phase_ = Phase::generated;
  client_writing_ = true;
  generated_close_ = close;
  client_.write(bytes.data(), bytes.size(),
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  Session& s = Session::from(o);
                  s.client_writing_ = false;
                  s.bytes_out_ += n;
                  s.on_generated_written(ec, s.generated_close_);
                });
}

void Session::on_generated_written(const error_code& ec, bool close) {
  if (closed_) return;
  if (ec) {
    finish_request(true);
    return;
  }
  finish_request(close);
}

// Ends the request in progress: metrics, access log, backend release, then either the next
// request (keep-alive, possibly already pipelined in in_) or closing the connection.
void Session::finish_request(bool close_client) {
  if (phase_ == Phase::idle || phase_ == Phase::closing) return;
  log_request();
  if (conn_) release_backend(false);
  permit_.release();  // the pool slot, after the backend's (sum of backends <= pool)
  ex_.end(outcome_);  // the stages' tickets (the in-flight cap's slot), last taken first
  up_ = nullptr;
  gen_ = Ref<ReactorGeneration>();  // the request is over; its generation may retire
  reactor_.response_buffers().release(std::exchange(bin_, nullptr));
  reactor_.response_buffers().release(std::exchange(cout_, nullptr));
  reactor_.request_buffers().release(std::exchange(bout_, nullptr));
  bin_len_ = bin_pos_ = cout_len_ = bout_len_ = 0;
  backend_timer_.cancel();
  if (close_client || reactor_.draining()) return linger_close();
  // Keep-alive: move pipelined bytes to the front of in_.
  const std::size_t leftover = in_len_ - in_pos_;
  phase_ = Phase::idle;
  if (leftover > 0) {
    std::memmove(in_data(), in_data() + in_pos_, leftover);
    in_len_ = leftover;
    start_request();
    return parse_head();
  }
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  in_len_ = in_pos_ = 0;
  arm_client_timer(reactor_.snapshot().server.idle_timeout);
  do_client_read();
}

void Session::log_request() {
  const bool routed = up_ != nullptr;
  const std::size_t slot = routed ? ReactorMetrics::slot_for(up_->id) : 0;
  const auto elapsed = std::chrono::steady_clock::now() - started_;
  if (outcome_.status != 0) reactor_.metrics().count_request(slot, outcome_.status, elapsed);
  AccessLog& log = reactor_.access_log();
  if (!log.enabled()) return;
  const bool parsed = parser_.head_end() != 0;
  AccessRecord r;
  r.time = std::chrono::system_clock::now();
  r.client = {client_ip_, client_ip_len_};
  if (parsed) {
    r.method = parser_.method_name();
    r.target = parser_.target();
  }
  r.status = outcome_.status;
  r.bytes_in = bytes_in_;
  r.bytes_out = bytes_out_;
  if (routed) {
    const Upstream& up = *up_;
    r.upstream = up.params.name;
    if (backend_ >= 0) r.backend = up.backends[static_cast<std::size_t>(backend_)]->address.text;
  }
  if (facts_.connect) r.backend = facts_.authority;  // a CONNECT tunnel's target
  r.duration = elapsed;
  r.reason = outcome_.reason;
  r.request_id = request_id_view_;
  r.would_reject = ex_.would_reject;
  log.write(reactor_.index(), r);
}

// Closes the connection gracefully: our response is out, so stop sending and discard what
// the client still sends for a moment, so that closing with unread bytes does not reset the
// connection before the client has read the response (nginx's lingering close).
void Session::linger_close() {
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

void Session::on_client_timeout() {
  Ref<Session> keep(this);
  switch (phase_) {
    case Phase::idle:  // nothing sent yet, or between keep-alive requests: close silently
      return close();
    case Phase::head:  // the head did not complete in time
      return respond(Reason::header_timeout);
    case Phase::tunnel:      // no traffic either way for idle_timeout
    case Phase::forwarding:  // the client stalled sending its body or reading the response
      return cut(OutcomeSource::client);
    case Phase::queued:  // (not armed while queued; the pending timeout is the backend timer)
    case Phase::closing:
    case Phase::generated:
      return close();
  }
}

void Session::drain() {
  if (phase_ == Phase::idle) close();
  // Otherwise finish_request() sees draining() and closes after the response.
}

bool Session::force_close() {
  const bool cut = phase_ != Phase::idle && phase_ != Phase::closing;
  Ref<Session> keep(this);
  if (cut) outcome_.cut_short(OutcomeSource::floodgate);
  close();
  return cut;
}

void Session::on_generation_retired(uint64_t retired, const Snapshot& current) {
  if (!gen_ || gen_->snapshot->generation != retired || up_ == nullptr) return;
  if (phase_ == Phase::queued) {
    // A waiter never outlives its generation's grace: wake it and turn it away, whether or not
    // its pool lives on (it would otherwise be admitted onto a configuration that is gone).
    const Ref<Session> keep(this);
    return leave_queue(Reason::generation_retired, CancelReason::retired);
  }
  // A pool that lives on by name belongs to the current generation too: its requests (long
  // downloads, tunnels) carry on. Only a request whose pool was removed is ended.
  if (up_->id < current.by_id.size() && current.by_id[up_->id] != nullptr) return;
  const Ref<Session> keep(this);
  cut(OutcomeSource::floodgate);
}

void Session::cut(OutcomeSource by) {
  if (phase_ != Phase::idle && phase_ != Phase::closing) outcome_.cut_short(by);
  close();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  const bool queued = phase_ == Phase::queued;
  if (phase_ == Phase::forwarding || phase_ == Phase::tunnel || phase_ == Phase::generated ||
      queued) {
    log_request();  // cut short: logged with the status it had (0 = no response was sent)
  }
  phase_ = Phase::closing;
  client_timer_.cancel();
  backend_timer_.cancel();
  if (queued) {  // the client went away while waiting for a slot
    reactor_.metrics().pool_abandoned(up_->id);
    count_queue_wait();
    if (waiter_.cancel(CancelReason::client_gone)) {
      parked_ = Ref<Session>();  // self_ still holds the session
    }  // else the completion is on its way: on_admission() drops what it brings
  }
  release_backend(false);  // an exchange in progress is abandoned, never pooled
  permit_.release();
  ex_.end(outcome_);
  client_.close();
  const Ref<Session> last = std::move(self_);  // may be the last reference: nothing follows
  // Buffers go back to the pool when the last pending completion releases the session.
}

}  // namespace floodgate::proxy
