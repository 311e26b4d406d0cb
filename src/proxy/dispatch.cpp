// The exchange between client and attempt: choosing the backend a routed, admitted request
// goes to, inviting and pumping the request body into the attempt as it arrives.
#include <algorithm>
#include <boost/asio/error.hpp>

#include "client_conn.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/selection.h"

namespace floodgate::proxy {

using boost::system::error_code;

void ClientConn::select_backend() {
  const Upstream& up = *ex_.up;
  const FailurePolicy& policy = ex_.gen->snapshot->failure;
  Balancer& balancer = *up.per_reactor[reactor_.index()].balancer;
  const auto now = reactor_.now();
  Selection s = select_primary(up, balancer, policy, now);
  if (s.would_refuse != Reason::none) {  // circuit_breaker.mode = "shadow"
    reactor_.metrics().shadow_rejected(StageId::circuit_breaker, s.would_refuse);
    if (ex_.would_reject == Reason::none) {
      ex_.would_reject = s.would_refuse;
      ex_.would_reject_stage = StageId::circuit_breaker;
    }
  }
  if (s) {
    if (s.fail_open) reactor_.metrics().circuit_fail_open(up.id);
    if (policy.global_budget) {  // the budgets' allowance follows the primaries
      policy.global_budget->count_primary(now);
      up.retry_budget->count_primary(now);
    }
    arm_hedge(up, policy);
    return ex_.attempt().start(up, static_cast<uint32_t>(s.backend), std::move(s.entered),
                               std::move(s.pass));
  }
  // No peer to send it to. The pool slot goes back at once.
  switch (s.refusal) {
    case Reason::no_eligible_backend:
      return reject(s.refusal);
    case Reason::circuit_open: {
      ex_.permit.release();
      reactor_.metrics().circuit_rejected(up.id);
      const auto wait = std::chrono::ceil<std::chrono::seconds>(s.half_open_at - now);
      return respond_retry_after(s.refusal, static_cast<uint32_t>(std::max<int64_t>(
                                                1, std::min<int64_t>(wait.count(), 86'400))));
    }
    default:
      ex_.permit.release();
      return respond(s.refusal);
  }
}

// Issue 13's retry: once, to another backend, when every rule holds (failure_policy.h), an
// alternate can take it and the budgets admit it.
bool ClientConn::retry_elsewhere(Reason reason) {
  const Attempt& failed = ex_.attempt();
  if (ex_.up == nullptr || failed.backend() < 0) return false;  // a CONNECT tunnel's
  // Nothing of the request left floodgate: the attempt never had an established connection,
  // and the body, if any, is still whole in the client's buffer.
  const bool unsent = !failed.request_may_have_left() && !ex_.body_taken;
  const RetryCandidate candidate{Outcome::generated(reason),
                                 ex_.head.method,
                                 ex_.facts.has_body,
                                 ex_.facts.upgrade,
                                 ex_.outcome.client_saw_bytes,
                                 ex_.attempts_started(),
                                 unsent};
  if (retry_rule(candidate) != NoRetry::none) return false;
  const uint32_t upstream = ex_.up->id;
  switch (start_second_attempt(AttemptRole::retry, static_cast<uint32_t>(failed.backend()))) {
    case SecondAttempt::started:
      reactor_.metrics().retry(upstream, RetryResult::sent);
      return true;
    case SecondAttempt::no_alternate:
      reactor_.metrics().retry(upstream, RetryResult::no_alternate);
      return false;
    case SecondAttempt::denied_budget:
      reactor_.metrics().retry(upstream, RetryResult::denied_budget);
      return false;
  }
  return false;
}

// A retry's or a hedge's attempt: another backend than `exclude` with a closed circuit, when
// both retry budgets (global and the pool's) admit it. The exchange keeps its one pool slot.
ClientConn::SecondAttempt ClientConn::start_second_attempt(AttemptRole role, uint32_t exclude) {
  const Upstream& up = *ex_.up;
  const FailurePolicy& policy = ex_.gen->snapshot->failure;
  const auto now = reactor_.now();
  Selection s =
      select_alternate(up, *up.per_reactor[reactor_.index()].balancer, policy, now, exclude);
  if (!s) return SecondAttempt::no_alternate;
  if (policy.global_budget &&
      !resilience::try_retry_both(*policy.global_budget, *up.retry_budget, now)) {
    return SecondAttempt::denied_budget;  // the alternate's count and pass go back with `s`
  }
  Attempt* next = ex_.free_attempt();  // there is one: a single attempt was made
  if (role == AttemptRole::retry) ex_.current = ex_.index_of(*next);
  next->start(up, static_cast<uint32_t>(s.backend), std::move(s.entered), std::move(s.pass), role);
  return SecondAttempt::started;
}

// Hedging (resilience.hedging): a bodyless, non-tunnel request with a safe method to a pool on
// the allowlist gets a second attempt at another backend when the first has no response head
// after `delay`; the first successful head wins (claim()) and the other is cancelled.
void ClientConn::arm_hedge(const Upstream& up, const FailurePolicy& policy) {
  if (!policy.hedging || !up.hedge || up.backends.size() < 2 || ex_.facts.has_body ||
      ex_.facts.upgrade || (policy.hedge_methods & method_bit(ex_.head.method)) == 0 ||
      brownout_suppresses_hedging()) {
    return;
  }
  reactor_.wheel().schedule(hedge_timer_, reactor_.now() + policy.hedge_delay);
}

void ClientConn::on_hedge_timer() {
  const Ref<ClientConn> keep(this);
  Attempt& primary = ex_.attempt();
  if (closed_ || phase_ != Phase::forwarding || ex_.up == nullptr || ex_.attempts_started() != 1 ||
      !primary.live() || primary.response_started() || ex_.outcome.client_saw_bytes ||
      brownout_suppresses_hedging()) {
    return;
  }
  // No alternate or no budget (a hedge spends it like a retry): the primary goes on alone.
  const uint32_t upstream = ex_.up->id;
  if (start_second_attempt(AttemptRole::hedge, static_cast<uint32_t>(primary.backend())) ==
      SecondAttempt::started) {
    reactor_.metrics().hedge(upstream, HedgeResult::sent);
  }
}

// Brownout (enforced) is on: no second attempt that would add load (resilience.brownout).
bool ClientConn::brownout_suppresses_hedging() const noexcept {
  const LocalProtection& p = ex_.gen->snapshot->protection;
  return p.brownout_enforced() && p.state->brownout.active();
}

void ClientConn::reject(Reason reason) {
  ex_.permit.release();  // a turned-away request holds no slot while its answer is written
  reactor_.metrics().pool_rejected(ex_.up->id, reason);
  respond(reason);
}

void ClientConn::on_request_head_sent(Attempt& a) {
  if (ex_.facts.expect_continue && !ex_.request_parsed && in_pos_ == in_len_ &&
      parser_.http_minor() >= 1) {
    // Invite the body now that the request is routed and has a backend.
    client_writing_ = true;
    arm_send_timer();
    ex_.head_bytes_out += http::kContinue.size();
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
  pump_request_body(a);
}

void ClientConn::pump_request_body(Attempt& a) {
  if (a.sending() || closed_ || !a.head_ready()) return;
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
    if (consumed > 0) ex_.body_taken = true;
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
