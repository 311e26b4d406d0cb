// The backend side of a Session: selecting a backend, connecting or reusing a pooled
// connection, forwarding the request (head, then the body as it arrives) and streaming the
// response back, re-framed as plan_response() decided.
#include <algorithm>
#include <boost/asio/error.hpp>
#include <cstring>

#include "floodgate/proxy/reactor.h"
#include "session.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// Room kept free in an output buffer for chunk framing around one parsed piece.
constexpr std::size_t kFramingSlack = 64;
}  // namespace

void Session::select_backend() {
  const Upstream& up = *up_;
  const uint32_t cap = up.policy.max_active_per_backend;
  Balancer& balancer = *up.per_reactor[reactor_.index()].balancer;
  const auto active = [&up](std::size_t i) {
    return up.backends[i]->load.active.load(std::memory_order_relaxed);
  };
  // max_active_per_backend is a selection filter, not a second queue. Between the pick and
  // the compare-and-swap another reactor can take a backend's last slot: pick again, at most
  // once per backend.
  // Peers the health task marked down are skipped (one relaxed load each).
  const auto eligible = [&](std::size_t i) {
    return !up.backends[i]->health->down.load(std::memory_order_relaxed) &&
           (cap == 0 || active(i) < cap);
  };
  for (std::size_t tries = 0; tries <= up.backends.size(); ++tries) {
    const auto pick = balancer.pick(active, eligible);
    if (!pick) break;
    InFlight entered = InFlight::enter_below(up.backends[*pick]->load, cap);
    if (!entered) continue;
    backend_ = static_cast<int32_t>(*pick);
    in_flight_ = std::move(entered);
    if (Ref<BackendConn> idle = reactor_.take_idle(*up.backends[*pick])) {
      conn_ = std::move(idle);
      conn_->owner = Ref<Session>(this);
      return send_request_head();
    }
    return connect_backend(static_cast<uint32_t>(*pick));
  }
  // No peer to send it to: every one is down, or every one that is up is at its cap. The
  // pool slot goes back at once.
  const bool any_up = std::any_of(up.backends.begin(), up.backends.end(), [](const auto& b) {
    return !b->health->down.load(std::memory_order_relaxed);
  });
  if (!any_up) {
    permit_.release();
    return respond(Reason::no_healthy_backend);
  }
  if (cap != 0) return reject(Reason::no_eligible_backend);
  respond(Reason::upstream_connect_failed);
}

void Session::connect_backend(uint32_t backend) {
  const Upstream& up = *up_;
  conn_ = Ref<BackendConn>(new BackendConn(reactor_, up.id, up.backends[backend]));
  conn_->owner = Ref<Session>(this);
  connecting_ = true;
  arm_backend_timer(up.params.connect_timeout);
  conn_->connect(up.backends[backend]->endpoint,
                 [](net::StreamOwner& o, const error_code& ec, std::size_t) {
                   Session& s = Session::from(o);
                   s.on_connected(ec);
                 });
}

void Session::on_connected(const error_code& ec) {
  connecting_ = false;
  backend_timer_.cancel();
  if (ec) return fail_backend(Reason::upstream_connect_failed);
  send_request_head();
}

void Session::send_request_head() {
  const std::size_t cap = reactor_.request_data();
  if (bout_ == nullptr) bout_ = reactor_.request_buffers().acquire();
  if (bin_ == nullptr) bin_ = reactor_.response_buffers().acquire();
  if (bout_ == nullptr || bin_ == nullptr) {  // at server.max_buffers_per_reactor
    release_backend(true);                    // nothing was sent on it
    return respond(Reason::buffers_exhausted);
  }
  http::Writer w(bout_, cap);
  const http::ForwardInfo fwd{{client_ip_, client_ip_len_},
                              request_id_view_,
                              up_->backends[static_cast<std::size_t>(backend_)]->address.text};
  if (!http::write_request_head(parser_, facts_, fwd, w)) {
    release_backend(true);
    return respond(Reason::header_too_large);
  }
  bout_len_ = w.size();
  bin_len_ = bin_pos_ = 0;
  conn_->parser.begin(bin_data(), bin_fields(),
                      http::HeadLimits{0, 0, BufferLayout::kResponseFields});
  conn_->parser.set_no_body(head_request_);
  if (facts_.expect_continue && !request_parsed_ && in_pos_ == in_len_ &&
      parser_.http_minor() >= 1) {
    // Invite the body now that the request is routed and has a backend.
    client_writing_ = true;
    client_.write(http::kContinue.data(), http::kContinue.size(),
                  [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                    Session& s = Session::from(o);
                    s.client_writing_ = false;
                    s.bytes_out_ += n;
                    if (s.closed_) return;
                    if (ec) return s.cut(OutcomeSource::client);
                    if (s.cout_len_ > 0) s.do_client_write();
                  });
  }
  do_backend_read();
  pump_request_body();
}

void Session::pump_request_body() {
  if (backend_writing_ || closed_ || !conn_) return;
  const ServerParams& server = gen_->snapshot->server;
  const std::size_t cap = reactor_.request_data();
  const bool chunked = parser_.chunked();
  while (!request_parsed_ && cap - bout_len_ >= 2 * kFramingSlack) {
    const std::size_t feed = std::min(in_len_ - in_pos_, cap - bout_len_ - kFramingSlack);
    http::Writer w(bout_ + bout_len_, cap - bout_len_);
    auto sink = [&](const char* p, std::size_t n) {
      if (chunked) http::write_chunk_header(n, w);
      w.put({p, n});
      if (chunked) w.put(http::kChunkEnd);
      body_bytes_ += n;
    };
    std::size_t consumed = 0;
    const auto r = parser_.parse_body(in_data() + in_pos_, feed, consumed, sink);
    bout_len_ += w.size();
    in_pos_ += consumed;
    if (r == http::Parser::Result::error) {
      release_backend(false);
      if (outcome_.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return respond(Reason::bad_request);
    }
    if (server.max_body_bytes != 0 && body_bytes_ > server.max_body_bytes) {
      release_backend(false);
      if (outcome_.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return respond(Reason::body_too_large);
    }
    if (r == http::Parser::Result::message_done) {
      request_parsed_ = true;
      if (chunked) {  // the feed bound leaves room for the last chunk
        http::Writer last(bout_ + bout_len_, cap - bout_len_);
        last.put(http::kLastChunk);
        bout_len_ += last.size();
      }
    } else if (in_pos_ == in_len_) {
      break;
    }
  }
  if (bout_len_ > 0) return do_backend_write();
  if (request_parsed_) {
    request_sent_ = true;
    client_timer_.cancel();
    if (!response_head_) arm_backend_timer(up_->params.response_timeout);
    return;
  }
  // Everything buffered is forwarded: read more body, reusing the space after the head.
  in_len_ = in_pos_ = parser_.head_end();
  arm_client_timer(server.idle_timeout);
  do_client_read();
}

void Session::do_backend_write() {
  backend_writing_ = true;
  conn_->write(bout_, bout_len_, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    Session& s = Session::from(o);
    s.backend_writing_ = false;
    s.on_backend_written(ec);
  });
}

void Session::on_backend_written(const error_code& ec) {
  if (ec) {
    if (retry_stale_connection()) return;
    if (!outcome_.client_saw_bytes) return fail_backend(Reason::upstream_reset);
    return cut(OutcomeSource::upstream);
  }
  bout_len_ = 0;
  pump_request_body();
}

void Session::do_backend_read() {
  if (conn_->reading()) return;
  conn_->read_some(bin_data() + bin_len_, BufferLayout::kResponseData - bin_len_,
                   [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                     Session& s = Session::from(o);
                     s.on_backend_read(ec, n);
                   });
}

void Session::on_backend_read(const error_code& ec, std::size_t n) {
  if (closed_ || !conn_) return;
  if (ec && retry_stale_connection()) return;
  if (ec == asio::error::eof) {
    backend_eof_ = true;
    return on_backend_eof();
  }
  if (ec) {
    if (!response_head_) return fail_backend(Reason::upstream_reset);
    return cut(OutcomeSource::upstream);
  }
  bin_len_ += n;
  if (response_head_) backend_timer_.cancel();
  process_response();
}

void Session::process_response() {
  if (response_head_) return pump_response_body();
  const auto head = conn_->parser.parse_head(bin_len_);
  switch (head) {
    case http::Parser::Result::need_more:
      if (bin_len_ == BufferLayout::kResponseData)
        return fail_backend(Reason::upstream_bad_response);
      return do_backend_read();
    case http::Parser::Result::error:
      return fail_backend(Reason::upstream_bad_response);
    default:
      break;
  }
  const int status = conn_->parser.status();
  if (status < 200 && status != 101) return on_interim_response();
  if (status == 101) {
    if (!facts_.upgrade) return fail_backend(Reason::upstream_bad_response);
    return start_tunnel();
  }
  on_response_head(head == http::Parser::Result::message_done);
}

// 1xx other than 101: forwarded to HTTP/1.1 clients (except 100, which floodgate sends
// itself), then the next response head is parsed from the bytes that follow.
void Session::on_interim_response() {
  http::Parser& rp = conn_->parser;
  const bool forward = rp.status() != 100 && parser_.http_minor() >= 1;
  if (forward) {
    if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
    if (cout_ == nullptr) return fail_backend(Reason::buffers_exhausted);
    http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
    if (!http::write_response_head(rp, http::ResponsePlan{}, parser_.http_minor(), w)) {
      return fail_backend(Reason::upstream_bad_response);
    }
    cout_len_ += w.size();
  }
  std::size_t consumed = 0;
  auto no_sink = [](const char*, std::size_t) {};
  const std::size_t end = rp.head_end();
  rp.parse_body(bin_data() + end, 0, consumed, no_sink);
  std::memmove(bin_data(), bin_data() + end, bin_len_ - end);
  bin_len_ -= end;
  rp.begin(bin_data(), bin_fields(), http::HeadLimits{0, 0, BufferLayout::kResponseFields});
  rp.set_no_body(head_request_);
  if (cout_len_ > 0) return do_client_write();  // on_client_written resumes process_response()
  process_response();
}

void Session::on_response_head(bool message_done) {
  const http::Parser& rp = conn_->parser;
  // An upgrade the backend declined leaves the client connection in an unknown state.
  // A draining reactor closes the connection after this response: say so.
  const bool keep = facts_.keep_alive && !facts_.upgrade && !reactor_.draining();
  plan_ = http::plan_response(rp, head_request_, parser_.http_minor(), keep);
  decide(Outcome::relayed(rp.status(), std::chrono::steady_clock::now() - started_));
  if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
  if (cout_ == nullptr) return fail_backend(Reason::buffers_exhausted);
  http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
  if (!http::write_response_head(rp, plan_, parser_.http_minor(), w)) {
    return fail_backend(Reason::upstream_bad_response);
  }
  cout_len_ += w.size();
  response_head_ = true;
  backend_timer_.cancel();
  bin_pos_ = rp.head_end();
  response_done_ = message_done;  // e.g. the response to HEAD ends with its head
  pump_response_body();
}

void Session::pump_response_body() {
  if (client_writing_ || closed_) return;
  const bool chunked = plan_.framing == http::Framing::chunked;
  http::Parser& rp = conn_->parser;
  while (!response_done_ && BufferLayout::kResponseData - cout_len_ >= 2 * kFramingSlack) {
    const std::size_t feed =
        std::min(bin_len_ - bin_pos_, BufferLayout::kResponseData - cout_len_ - kFramingSlack);
    http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
    auto sink = [&](const char* p, std::size_t n) {
      if (chunked) http::write_chunk_header(n, w);
      w.put({p, n});
      if (chunked) w.put(http::kChunkEnd);
    };
    std::size_t consumed = 0;
    auto r = rp.parse_body(bin_data() + bin_pos_, feed, consumed, sink);
    cout_len_ += w.size();
    bin_pos_ += consumed;
    if (r == http::Parser::Result::need_more && backend_eof_ && bin_pos_ == bin_len_) {
      r = rp.finish();  // close-delimited body ends at EOF; anything else is truncation
    }
    if (r == http::Parser::Result::error) {
      if (!outcome_.client_saw_bytes && !backend_eof_) {  // nothing reached the client: say so
        cout_len_ = 0;
        return fail_backend(Reason::upstream_bad_response);
      }
      return cut(OutcomeSource::upstream);  // never present a short or corrupt body as complete
    }
    if (r == http::Parser::Result::message_done) {
      response_done_ = true;
    } else if (bin_pos_ == bin_len_) {
      break;
    }
  }
  if (response_done_ && chunked && !last_chunk_written_) {
    http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
    w.put(http::kLastChunk);
    cout_len_ += w.size();
    last_chunk_written_ = true;
  }
  if (cout_len_ > 0) return do_client_write();
  if (response_done_) return finish_response();
  bin_len_ = bin_pos_ = 0;
  arm_backend_timer(up_->params.response_timeout);
  do_backend_read();
}

void Session::do_client_write() {
  if (client_writing_) return;
  client_writing_ = true;
  outcome_.client_saw_bytes = true;
  arm_client_timer(reactor_.snapshot().server.idle_timeout);
  client_.write(cout_, cout_len_, [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
    Session& s = Session::from(o);
    s.client_writing_ = false;
    s.on_client_written(ec, n);
  });
}

void Session::on_client_written(const error_code& ec, std::size_t n) {
  bytes_out_ += n;
  if (closed_) return;
  client_timer_.cancel();
  if (ec) return cut(OutcomeSource::client);
  cout_len_ = 0;
  if (phase_ == Phase::closing) return linger_close();
  if (!response_head_) return process_response();  // after an interim response
  if (response_done_) return finish_response();
  pump_response_body();
}

void Session::on_backend_eof() {
  if (!response_head_) return fail_backend(Reason::upstream_reset);
  pump_response_body();  // completes a close-delimited body or detects truncation
}

// A pooled keep-alive connection can be closed by the backend just as it is reused; the
// request then fails before any response byte. That is not the backend refusing the request,
// so it is sent once more on a new connection to the same backend, when that is safe: nothing
// of the response arrived and the request has no body (so it is still whole in in_).
bool Session::retry_stale_connection() {
  if (!conn_ || !conn_->reused || stale_retried_ || facts_.has_body || response_head_ ||
      bin_len_ != 0 || outcome_.client_saw_bytes) {
    return false;
  }
  stale_retried_ = true;
  Ref<BackendConn> stale = std::move(conn_);
  stale->owner = Ref<Session>();
  stale->close();  // drops its pending operations
  backend_writing_ = false;
  backend_timer_.cancel();
  bout_len_ = 0;
  request_sent_ = false;
  backend_eof_ = false;
  connect_backend(static_cast<uint32_t>(backend_));
  return true;
}

void Session::finish_response() {
  const bool reusable = request_sent_ && !backend_eof_ && conn_ && conn_->parser.keep_alive();
  release_backend(reusable);
  finish_request(plan_.close_client || !request_parsed_);
}

void Session::fail_backend(Reason reason) {
  if (up_ != nullptr) {
    // docs/metrics.md: a connect timeout is both a connect failure and a timeout.
    if (reason == Reason::upstream_connect_failed || reason == Reason::upstream_connect_timeout) {
      reactor_.metrics().connect_failure(up_->id);
    }
    if (reason == Reason::upstream_timeout || reason == Reason::upstream_connect_timeout) {
      reactor_.metrics().timeout(up_->id);
    }
  }
  release_backend(false);
  if (outcome_.client_saw_bytes || client_writing_) return cut(OutcomeSource::upstream);
  respond(reason);
}

void Session::release_backend(bool reusable) {
  backend_timer_.cancel();
  connecting_ = false;
  in_flight_.release();
  if (!conn_) return;
  Ref<BackendConn> c = std::move(conn_);
  c->owner = Ref<Session>();
  c->drop_pending();  // nobody waits for them any more
  backend_writing_ = false;
  if (reusable && !reactor_.draining()) {
    c->reused = true;
    reactor_.put_idle(*c, up_->params);
  } else {
    c->close();
  }
}

void Session::on_backend_timeout() {
  Ref<Session> keep(this);
  if (phase_ == Phase::queued) return leave_queue(Reason::pending_timeout, CancelReason::timed_out);
  if (connecting_) return fail_backend(Reason::upstream_connect_timeout);
  if (!response_head_) return fail_backend(Reason::upstream_timeout);
  if (up_ != nullptr) reactor_.metrics().timeout(up_->id);
  cut(OutcomeSource::upstream);  // the backend stalled mid-body: the client sees a short body
}

}  // namespace floodgate::proxy
