// The HTTP/1.1 client connection: reading and parsing request heads, pumping request bodies,
// writing responses and floodgate's own answers, finishing an exchange and keeping the
// connection alive.
#include "client_conn.h"

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cstring>

#include "floodgate/proxy/reactor.h"
#include "h2_conn.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

Ref<ClientConnection> ClientConnection::accept(Reactor& reactor, int fd, const sockaddr* peer,
                                               const net::TlsListener* tls, bool h2c) {
  return Ref<ClientConnection>(new ClientConn(reactor, fd, peer, tls, h2c));
}

ClientConn::ClientConn(Reactor& reactor, int fd, const sockaddr* peer, const net::TlsListener* tls,
                       bool h2c)
    : ClientConnection(reactor, fd, peer, tls),
      max_requests_(reactor.snapshot().server.max_requests_per_connection),
      h2c_(h2c) {
  reactor_.exchanges().reserve(1);  // its requests' exchange, one at a time
}

ClientConn::~ClientConn() {
  // Nothing of the exchange is pending any more (it would hold this connection): it goes back.
  if (ex_ != nullptr) std::exchange(ex_, nullptr)->detach();
  reactor_.exchanges().unreserve(1);
  release_buffers();
}

char* ClientConn::in_data() const {
  return in_ + reactor_.request_fields() * sizeof(http::HeaderField);
}

// Every buffer goes back to its pool: when the last pending completion has let go (the
// destructor) or when nothing is pending (an exchange that ended).
void ClientConn::release_buffers() {
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  out_.release();
  in_len_ = in_pos_ = early_end_ = 0;
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
  count_in(n);  // between requests: begin_request() counts what is in in_
  if (const net::TlsSession* tls = client_.tls(); tls != nullptr && tls->read_early) {
    early_end_ = in_len_;  // early data comes before everything else on the connection
  }
  switch (phase_) {
    case Phase::idle:
      if (requests_ == 0) {
        bool wait = false;
        if (hand_over_to_h2(wait)) return;  // this connection is closed now
        if (wait) return do_client_read();
      }
      start_request();
      return parse_head();
    case Phase::head:
      return parse_head();
    case Phase::exchange:
      if (ex_->phase == Exchange::Phase::forwarding) return pump_request_body(ex_->attempt());
      if (ex_->phase == Exchange::Phase::queued) return watch_while_waiting(true);
      return;
    case Phase::closing:
      return;
  }
}

bool ClientConn::hand_over_to_h2(bool& wait) {
  static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const net::TlsSession* tls = client_.tls();
  if (tls != nullptr) {
    if (!tls->alpn_h2()) return false;  // HTTP/1.1 (or no ALPN: HTTP/1.1 too)
  } else {
    if (!h2c_) return false;
    const std::string_view got(in_data(), std::min(in_len_, kPreface.size()));
    if (got != kPreface.substr(0, got.size())) return false;  // HTTP/1.1
    if (got.size() < kPreface.size()) {
      wait = true;
      return false;
    }
  }
  const Ref<ClientConnection> h2(new H2Conn(*this, in_data(), in_len_, early_end_));
  static_cast<H2Conn&>(*h2).start_handed_over();
  return true;
}

void ClientConn::start_request() {
  begin_request();
  const Snapshot& snap = *ex_->gen->snapshot;
  arm_timer(snap.server.header_timeout);
  parser_.begin(in_data(), in_fields(), snap.limits);
}

// A new exchange; the caller starts the parser on where its head is. The head is read on the
// generation current now; on_head() routes on the one current then.
void ClientConn::begin_request() {
  phase_ = Phase::head;
  in_pos_ = 0;
  ++requests_;
  if (ex_ == nullptr) ex_ = &reactor_.exchanges().acquire(*this, facts_);
  ex_->begin(reactor_.current(), reactor_.poller().clock().now(), in_len_);
}

void ClientConn::parse_head() {
  switch (parser_.parse_head(in_len_)) {
    case http::Parser::Result::need_more:
      if (in_len_ == reactor_.request_data()) return ex_->answer(Reason::header_too_large);
      return do_client_read();
    case http::Parser::Result::error:
      return ex_->answer(parser_.error_reason());
    default:
      return on_head();
  }
}

void ClientConn::on_head() {
  client_timer_.cancel();
  reactor_.opening_end(*this);
  in_pos_ = parser_.head_end();
  ex_->head = parser_.request_head();
  phase_ = Phase::exchange;
  if (!ex_->take_head(reactor_.current())) return;  // refused: answered
  if (!ex_->facts.has_body) {
    // Complete the message in the parser now, so a rejection below can keep the connection.
    std::size_t consumed = 0;
    auto no_sink = [](const char*, std::size_t) {};
    if (parser_.parse_body(in_data() + in_pos_, 0, consumed, no_sink) ==
        http::Parser::Result::message_done) {
      ex_->request_parsed = true;
    }
  }
  ex_->route(early_end_ > 0);
}

// The reactor is at server.max_buffers_per_reactor (or out of memory): the request that has
// begun in landing_ is answered from the prebuilt responses, which need no buffer, and the
// connection closes (its unread rest cannot be told from a next request).
void ClientConn::refuse_without_buffer(std::size_t n) {
  in_len_ = 0;
  begin_request();
  parser_.begin(landing_, nullptr, {});  // nothing of this request is parsed (access log)
  ex_->bytes_in = n;
  ex_->answer(Reason::buffers_exhausted);
}

// floodgate's answer (the exchange decided its outcome): a stage's prebuilt bytes, the pool's
// (with its Retry-After) for a pool reason, the plain one for the reason, or one built now
// into the output buffer when its Retry-After or header lines are known only now.
void ClientConn::respond(const Decision& d) {
  const bool close = generated_closes(d.reason);
  // One built now goes into the output buffer, written from its start (not as an attempt's
  // output).
  const bool built = d.answer == nullptr && (d.retry_after != 0 || !d.extra.empty());
  char* const buf = built && out_.acquire() ? out_.data() : nullptr;
  if (buf != nullptr) out_.clear();
  write_generated(ex_->answer_bytes(d, close, buf, out_.capacity()), close);
}

// OPTIONS * asks about the server, not a resource (RFC 9110 section 9.3.7), and no route has a
// path to match it with: floodgate answers for itself, with what it forwards.
void ClientConn::answer_options() {
  const bool close =
      !ex_->facts.keep_alive || !ex_->request_parsed || reactor_.draining() || last_request();
  write_generated(http::options_response(close), close);
}

// The unread rest of a rejected request cannot be told apart from a next request: close.
bool ClientConn::generated_closes(Reason reason) const noexcept {
  return http::closes_connection(reason) || !ex_->facts.keep_alive || !ex_->request_parsed ||
         reactor_.draining() || last_request();
}

// Writes a response floodgate made (static bytes), then finishes the request; `close` ends the
// connection after it (with a lingering close: see linger_close()).
void ClientConn::write_generated(std::string_view bytes, bool close) {
  const std::size_t head = bytes.find("\r\n\r\n") + 4;
  if (ex_->head_request) bytes = bytes.substr(0, head);  // HEAD: no body
  ex_->head_bytes_out += head;
  arm_send_timer();
  phase_ = Phase::exchange;
  client_writing_ = true;
  generated_close_ = close;
  client_.write(bytes.data(), bytes.size(),
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  ClientConn& c = ClientConn::from(o);
                  c.client_writing_ = false;
                  c.count_out(n);
                  c.on_generated_written(ec, c.generated_close_);
                });
}

void ClientConn::on_generated_written(const error_code& ec, bool close) {
  if (closed_) return;
  finish_request(ec || close);
}

// The bytes the attempt put in the output go to the client.
void ClientConn::flush() {
  if (client_writing_) return;  // the completion writes what was added meanwhile
  client_writing_ = true;
  ex_->outcome.client_saw_bytes = true;
  arm_send_timer();
  const std::string_view bytes = out_.next_write();
  client_.write(bytes.data(), bytes.size(),
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  ClientConn& c = ClientConn::from(o);
                  c.client_writing_ = false;
                  c.on_client_written(ec, n);
                });
}

void ClientConn::on_client_written(const error_code& ec, std::size_t n) {
  count_out(n);
  if (closed_) return;
  client_timer_.cancel();
  if (ec) return cut(OutcomeSource::client);
  if (phase_ == Phase::closing) return linger_close();
  if (out_.unsent()) return flush();  // the attempt added bytes meanwhile
  out_.clear();
  ex_->attempt().on_client_drained();
}

void ClientConn::response_done() {
  finish_request(out_.plan().close_client || !ex_->request_parsed);
}

// The exchange waits for a stage: a read stays pending so that a client that goes away is
// noticed (and the wait given up, close()) at once. Bytes it sends meanwhile (the body, a
// pipelined request) are kept for later; once in_ is full nothing more is read until the
// exchange stops waiting.
void ClientConn::watch_while_waiting(bool on) {
  if (!on) return client_.cancel_read();
  if (client_.reading() || closed_) return;
  const std::size_t room = reactor_.request_data() - in_len_;
  if (room == 0) return;
  client_.read_some(in_data() + in_len_, room,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      ClientConn& c = ClientConn::from(o);
                      c.on_client_read(ec, n, false);
                    });
}

void ClientConn::on_request_head_sent(Attempt& a) {
  if (ex_->facts.expect_continue && !ex_->request_parsed && in_pos_ == in_len_ &&
      parser_.http_minor() >= 1) {
    // Invite the body now that the request is routed and has a backend.
    client_writing_ = true;
    arm_send_timer();
    ex_->head_bytes_out += http::kContinue.size();
    client_.write(http::kContinue.data(), http::kContinue.size(),
                  [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                    ClientConn& c = ClientConn::from(o);
                    c.client_writing_ = false;
                    c.count_out(n);
                    if (c.closed_) return;
                    if (ec) return c.cut(OutcomeSource::client);
                    if (c.out_.pending()) c.flush();
                  });
  }
  pump_request_body(a);
}

void ClientConn::pump_request_body(Attempt& a) {
  if (a.sending() || closed_ || !a.head_ready()) return;
  const ServerParams& server = ex_->gen->snapshot->server;
  const bool chunked = parser_.chunked();
  while (!ex_->request_parsed && a.request_room() >= 2 * kFramingSlack) {
    const std::size_t feed = std::min(in_len_ - in_pos_, a.request_room() - kFramingSlack);
    http::Writer w(a.request_end(), a.request_room());
    auto sink = [&](const char* p, std::size_t n) {
      if (chunked) http::write_chunk_header(n, w);
      w.put({p, n});
      if (chunked) w.put(http::kChunkEnd);
      ex_->body_bytes += n;
    };
    std::size_t consumed = 0;
    const auto r = parser_.parse_body(in_data() + in_pos_, feed, consumed, sink);
    a.commit_request(w.size());
    in_pos_ += consumed;
    if (consumed > 0) ex_->body_taken = true;
    if (r == http::Parser::Result::error) {
      a.end(false);
      if (ex_->outcome.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return ex_->answer(Reason::bad_request);
    }
    if (server.max_body_bytes != 0 && ex_->body_bytes > server.max_body_bytes) {
      a.end(false);
      if (ex_->outcome.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return ex_->answer(Reason::body_too_large);
    }
    if (r == http::Parser::Result::message_done) {
      ex_->request_parsed = true;
      if (chunked) {  // the feed bound leaves room for the last chunk
        http::Writer last(a.request_end(), a.request_room());
        last.put(http::kLastChunk);
        a.commit_request(last.size());
      }
    } else if (in_pos_ == in_len_) {
      break;
    }
  }
  if (a.request_buffered()) return a.send_request();
  if (ex_->request_parsed) {
    client_timer_.cancel();
    return a.request_done();
  }
  // Everything buffered is forwarded: read more body, reusing the space after the head.
  in_len_ = in_pos_ = parser_.head_end();
  arm_timer(server.idle_timeout);
  do_client_read();
}

// -- The response sink (response_output.h): the backend's head rewritten for an HTTP/1.x
// client, the body passed through, re-chunked or close-delimited as plan_response() decides.

Reason ClientConn::response_head(const http::Parser& head, bool interim) {
  const int minor = ex_->head.version_minor;
  if (interim) {
    // floodgate sends its own 100 Continue; an HTTP/1.0 client gets no 1xx at all.
    if (head.status() == 100 || minor < 1) return Reason::none;
    return out_.put_head(&head, minor, ex_->head_bytes_out);
  }
  // An upgrade the backend declined leaves the client connection in an unknown state.
  // A draining reactor closes the connection after this response, as does the last request
  // max_requests_per_connection allows: say so.
  const bool keep =
      ex_->facts.keep_alive && !ex_->facts.upgrade && !reactor_.draining() && !last_request();
  const http::ResponsePlan plan = http::plan_response(head, ex_->head_request, minor, keep);
  return out_.put_head(&head, minor, ex_->head_bytes_out, &plan);
}

Reason ClientConn::tunnel_head(const http::Parser* head) {
  return out_.put_head(head, ex_->head.version_minor, ex_->head_bytes_out);
}

// Ends the exchange in progress: metrics, access log, backend release, then either the next
// request (keep-alive, possibly already pipelined in in_) or closing the connection.
void ClientConn::finish_request(bool close_client) {
  if (phase_ == Phase::idle || phase_ == Phase::closing) return;
  ex_->log();
  ex_->end_attempts();
  ex_->end();  // the pool slot, then the stages' tickets (the in-flight cap's slot)
  // Nothing is pending on the response side: its buffers go back now. The exchange stays
  // with the connection for its next request (begin_request begins it again).
  for (Attempt& a : ex_->attempts) a.release_buffers();
  out_.release();
  if (close_client || reactor_.draining() || last_request()) return linger_close();
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
  arm_timer(reactor_.snapshot().server.idle_timeout);
  do_client_read();
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

void ClientConn::on_handshake_done() {
  // The first head has header_timeout from the handshake's end (and again from its first
  // byte, start_request).
  if (phase_ == Phase::idle) arm_timer(reactor_.snapshot().server.header_timeout);
}

void ClientConn::on_timer() {
  switch (phase_) {
    case Phase::idle:  // nothing sent yet, or between keep-alive requests: close silently
      return close();
    case Phase::head:  // the head did not complete in time
      return ex_->answer(Reason::header_timeout);
    case Phase::exchange:
      if (ex_->phase == Exchange::Phase::forwarding) {
        // The client stalled reading the response, or sending its body.
        if (client_writing_ && ex_->attempt().response_started()) {
          // A write of the response has waited kClientPacedAfter at least: the kernel holds
          // all it can for this client, which reads slower than the backend sends.
          ex_->release_tickets();
        }
        if (client_writing_ && send_progressing()) return;
        return cut(OutcomeSource::client);
      }
      if (ex_->phase == Exchange::Phase::tunnel) return cut(OutcomeSource::client);  // idle
      // floodgate's answer still being written.
      if (client_writing_ && send_progressing()) return;
      return close();
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
  if (cut) ex_->outcome.cut_short(OutcomeSource::floodgate);
  close();
  return cut;
}

void ClientConn::on_generation_retired(uint64_t retired, const Snapshot& current) {
  if (phase_ != Phase::exchange) return;
  const Ref<ClientConn> keep(this);
  ex_->on_generation_retired(retired, current);
}

void ClientConn::cut(OutcomeSource by) {
  if (phase_ != Phase::idle && phase_ != Phase::closing) ex_->outcome.cut_short(by);
  // The client gave up on a backend's response (HAProxy's cli_abrt): counted for that backend.
  if (by == OutcomeSource::client &&
      (in_exchange(Exchange::Phase::forwarding) || in_exchange(Exchange::Phase::tunnel)) &&
      ex_->up != nullptr && ex_->attempt().live() && ex_->attempt().backend() >= 0) {
    const Attempt& a = ex_->attempt();
    ex_->up->backends[static_cast<std::size_t>(a.backend())]
        ->stats[reactor_.index()]
        .client_aborts.add();
  }
  close();
}

void ClientConn::close() {
  if (closed_) return;
  closed_ = true;
  if (phase_ == Phase::exchange) {
    ex_->log();  // cut short: logged with the status it had (0 = no response was sent)
  }
  phase_ = Phase::closing;
  begin_close();
  // A wait given up, the attempts ended, what it holds settled; the exchange stays with the
  // connection until nothing is pending (the destructor gives it back).
  if (ex_ != nullptr) ex_->abandon();
  // Buffers go back to the pool when the last pending completion releases the connection.
  finish_close();  // may be the last reference: nothing follows
}

}  // namespace floodgate::proxy
