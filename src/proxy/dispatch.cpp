// The exchange between client and attempt: choosing the backend a routed, admitted request
// goes to, inviting and pumping the request body into the attempt as it arrives.
#include <algorithm>
#include <boost/asio/error.hpp>

#include "client_conn.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

using boost::system::error_code;

void ClientConn::select_backend() {
  const Upstream& up = *ex_.up;
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
    return ex_.attempt().start(up, static_cast<uint32_t>(*pick), std::move(entered));
  }
  // No peer to send it to: every one is down, or every one that is up is at its cap. The
  // pool slot goes back at once.
  const bool any_up = std::any_of(up.backends.begin(), up.backends.end(), [](const auto& b) {
    return !b->health->down.load(std::memory_order_relaxed);
  });
  if (!any_up) {
    ex_.permit.release();
    return respond(Reason::no_healthy_backend);
  }
  if (cap != 0) return reject(Reason::no_eligible_backend);
  respond(Reason::upstream_connect_failed);
}

void ClientConn::reject(Reason reason) {
  ex_.permit.release();  // a turned-away request holds no slot while its answer is written
  reactor_.metrics().pool_rejected(ex_.up->id, reason);
  respond(reason);
}

void ClientConn::on_request_head_sent() {
  if (ex_.facts.expect_continue && !ex_.request_parsed && in_pos_ == in_len_ &&
      parser_.http_minor() >= 1) {
    // Invite the body now that the request is routed and has a backend.
    client_writing_ = true;
    client_.write(http::kContinue.data(), http::kContinue.size(),
                  [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                    ClientConn& c = ClientConn::from(o);
                    c.client_writing_ = false;
                    c.ex_.bytes_out += n;
                    if (c.closed_) return;
                    if (ec) return c.cut(OutcomeSource::client);
                    if (c.cout_len_ > 0) c.write_out();
                  });
  }
  pump_request_body();
}

void ClientConn::pump_request_body() {
  Attempt& a = ex_.attempt();
  if (a.sending() || closed_ || !a.connected()) return;
  const ServerParams& server = ex_.gen->snapshot->server;
  const bool chunked = parser_.chunked();
  while (!ex_.request_parsed && a.request_room() >= 2 * kFramingSlack) {
    const std::size_t feed = std::min(in_len_ - in_pos_, a.request_room() - kFramingSlack);
    http::Writer w(a.request_end(), a.request_room());
    auto sink = [&](const char* p, std::size_t n) {
      if (chunked) http::write_chunk_header(n, w);
      w.put({p, n});
      if (chunked) w.put(http::kChunkEnd);
      ex_.body_bytes += n;
    };
    std::size_t consumed = 0;
    const auto r = parser_.parse_body(in_data() + in_pos_, feed, consumed, sink);
    a.commit_request(w.size());
    in_pos_ += consumed;
    if (r == http::Parser::Result::error) {
      a.end(false);
      if (ex_.outcome.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return respond(Reason::bad_request);
    }
    if (server.max_body_bytes != 0 && ex_.body_bytes > server.max_body_bytes) {
      a.end(false);
      if (ex_.outcome.client_saw_bytes || client_writing_) return cut(OutcomeSource::client);
      return respond(Reason::body_too_large);
    }
    if (r == http::Parser::Result::message_done) {
      ex_.request_parsed = true;
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
  if (ex_.request_parsed) {
    client_timer_.cancel();
    return a.request_done();
  }
  // Everything buffered is forwarded: read more body, reusing the space after the head.
  in_len_ = in_pos_ = parser_.head_end();
  arm_client_timer(server.idle_timeout);
  do_client_read();
}

}  // namespace floodgate::proxy
