// Running an exchange (exchange.h): routing and the route's chain, waiting for a stage,
// choosing the backend, the retry and the hedge, classifying a failed attempt, and the access
// record. What the client sees goes through the exchange's Downstream (downstream.h).
//
// Waiting: a stage that answers wait (pool admission's queue, the quota's Redis reply) parks
// the exchange, holding its downstream, with the wait's deadline on the exchange's own timer
// while the downstream watches for its client going away. The wait ends exactly once:
//   - its completion arrives through the poller's inbox: on_wait_over() gives it to the
//     stage's resume() and the chain goes on after the stage (or the stage's answer goes out);
//   - the deadline, the client going away (abandon, as the downstream closes) or the generation
//     retiring (on_generation_retired): leave_wait() asks the stage to cancel. When the cancel
//     loses to a completion already on its way, the exchange remembers why it gave up and the
//     completion is given back (the stage drops the grant, handing it to the next waiter)
//     before the exchange answers with that reason. A grant is never leaked and never used by
//     an exchange that gave up on it.
#include "floodgate/proxy/exchange.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cassert>
#include <memory>
#include <string>
#include <utility>

#include "floodgate/core/ascii.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/request_key.h"
#include "floodgate/proxy/selection.h"
#include "resolver.h"

namespace floodgate::proxy {

namespace asio = boost::asio;

Exchange::Exchange()
    : wait_timer_([](void* e) { static_cast<Exchange*>(e)->on_wait_deadline(); }, this),
      hedge_timer_([](void* e) { static_cast<Exchange*>(e)->on_hedge_timer(); }, this) {}

Exchange::~Exchange() = default;

void Exchange::bind(Reactor& reactor, ExchangePool* pool) noexcept {
  reactor_ = &reactor;
  pool_ = pool;
  for (Attempt& a : attempts) a.bind(*this);
  wait.poller = &reactor.poller();
  wait.owner = this;
  clock = &reactor.poller().clock();
  metrics = &reactor.metrics();
  quota_links = &reactor.quota_links();
  quota.ex = this;
  reactor_index = reactor.index();
}

void Exchange::attach(Downstream& downstream, ConnectionFacts& connection) noexcept {
  downstream_ = &downstream;
  conn = &connection;
  attached_ = true;
}

void Exchange::detach() noexcept {
  attached_ = false;
  if (holds_ == 0) recycle();
}

void Exchange::hold() noexcept {
  ++holds_;
  downstream_->hold();
}

void Exchange::release() noexcept {
  Downstream& d = *downstream_;
  if (--holds_ == 0 && !attached_) recycle();
  d.release();  // last: it may let go of the downstream
}

// Nothing of the exchange is pending and no downstream has it (which ended it first: end, or
// abandon): what it still holds goes back (an abandoned request's pinned generation, its
// attempts' buffers) and so does the exchange.
void Exchange::recycle() noexcept {
  wait_timer_.cancel();
  hedge_timer_.cancel();
  gen = Ref<ReactorGeneration>();
  for (Attempt& a : attempts) a.release_buffers();
  downstream_ = nullptr;
  conn = nullptr;
  if (pool_ != nullptr) pool_->put_back(*this);
}

ExchangePool::~ExchangePool() {
  assert(in_use_ == 0 && "every downstream gave its exchanges back");
  while (Exchange* e = free_) {
    free_ = e->next_free_;
    delete e;
  }
}

Exchange* ExchangePool::make() {
  auto* e = new Exchange();
  e->bind(reactor_, this);
  return e;
}

void ExchangePool::reserve(std::size_t n) {
  while (in_use_ + free_count_ < reserved_ + n) {
    Exchange* e = make();  // may throw: nothing is reserved then
    e->next_free_ = free_;
    free_ = e;
    ++free_count_;
  }
  reserved_ += n;
}

void ExchangePool::unreserve(std::size_t n) noexcept {
  reserved_ -= std::min(n, reserved_);
  trim();
}

Exchange& ExchangePool::acquire(Downstream& downstream, ConnectionFacts& conn) {
  Exchange* e = free_;
  if (e != nullptr) {
    free_ = e->next_free_;
    --free_count_;
  } else {
    e = make();  // beyond the reservations
  }
  ++in_use_;
  e->attach(downstream, conn);
  return *e;
}

// Never frees: the exchange's own code may still be on the stack (its release()).
void ExchangePool::put_back(Exchange& e) noexcept {
  --in_use_;
  e.next_free_ = free_;
  free_ = &e;
  ++free_count_;
}

void ExchangePool::trim() noexcept {
  while (free_ != nullptr && in_use_ + free_count_ > reserved_ + spare_) {
    Exchange* e = std::exchange(free_, free_->next_free_);
    --free_count_;
    delete e;
  }
}

const Snapshot& Exchange::snapshot() const noexcept {
  return gen ? *gen->snapshot : reactor_->snapshot();
}

// -- Routing and the chain ---------------------------------------------------------------------

bool Exchange::take_head(const Ref<ReactorGeneration>& current) {
  // The request runs on the configuration current now that its head is complete, not on the
  // one current at its first byte: a head still arriving when that generation was forcibly
  // retired would otherwise be routed on the retired snapshot (to a pool the reload removed,
  // or into a queue no retirement will ever empty again).
  if (gen.get() != current.get()) gen = current;
  head_request = head.method == HTTP_HEAD;
  if (const Reason r = http::inspect_request(head, facts); r != Reason::none) {
    answer(r);
    return false;
  }
  if (!facts.asterisk && !facts.connect && match_path.assign(facts.path) != PathVerdict::ok) {
    answer(Reason::bad_request);
    return false;
  }
  return true;
}

void Exchange::route(bool early_data) {
  const bool has_path = !facts.asterisk && !facts.connect;
  request = resilience::RequestView{head.method_name,
                                    head.target,
                                    has_path ? match_path.view() : std::string_view{},
                                    facts.host_header,
                                    facts.connect ? std::string_view{} : facts.authority,
                                    facts.connect,
                                    facts.upgrade,
                                    facts.origin,
                                    facts.cors_request_method,
                                    early_data};
  phase = Phase::chain;
  inflight_exempt = -1;  // a new request: its exemption is decided afresh
  const Snapshot& snap = *gen->snapshot;
  // The front of the chain (the in-flight cap first): before any other per-request work.
  if (const Decision d = snap.front.run(*this, *metrics); d.verdict == Decision::Verdict::stop) {
    return answer(d);
  }
  if (snap.server.max_body_bytes != 0 && head.body == http::BodyFraming::length &&
      head.content_length > snap.server.max_body_bytes) {
    return answer(Reason::body_too_large);
  }
  if (facts.request_id.empty()) {
    reactor_->next_request_id(request_id_buf);
    request_id = {request_id_buf, sizeof(request_id_buf)};
  } else {
    request_id = facts.request_id;
  }
  if (facts.asterisk) {
    phase = Phase::answered;
    decide(Outcome::answered(200));
    release_admission();
    return downstream_->answer_options();
  }
  if (facts.connect) return open_connect_tunnel();  // the protocol policy allowed it
  const Route* route = snap.routes.match(facts.host, request.path);
  if (route == nullptr) return answer(Reason::no_route);
  http::apply_h2c_policy(facts, route->allow_h2c_upgrade);
  up = &snap.upstream(route->upstream);
  cursor = 0;  // the route's chain, from its first stage
  run_chain(snap.route_chains[route->index]);
}

void Exchange::run_chain(const Chain& chain) {
  phase = Phase::chain;
  const Decision d = chain.run(*this, *metrics);
  switch (d.verdict) {
    case Decision::Verdict::go:
      phase = Phase::forwarding;
      return select_backend();
    case Decision::Verdict::stop:
      return answer(d);
    case Decision::Verdict::wait:
      return park(d);
  }
}

std::string_view Exchange::answer_bytes(const Decision& d, bool close, char* buf,
                                        std::size_t cap) const {
  if (d.answer != nullptr) return d.answer->bytes(close);
  if ((d.retry_after != 0 || !d.extra.empty()) && buf != nullptr) {
    http::Writer w(buf, cap);
    if (http::write_generated_response({.reason = d.reason,
                                        .close = close,
                                        .retry_after_seconds = d.retry_after,
                                        .extra_headers = d.extra},
                                       w)) {
      return {buf, w.size()};
    }
  }
  const bool pool_reason = pool_rejection_index(d.reason) < kPoolRejections.size();
  return pool_reason && up != nullptr ? up->rejection(d.reason, close)
                                      : http::generated_response(d.reason, close);
}

void Exchange::answer(const Decision& d) {
  phase = Phase::answered;
  Outcome o = Outcome::generated(d.reason);
  if (d.status != 0) o.status = d.status;
  decide(o);
  metrics->generated(d.reason);
  // The answer is decided: what admitted the request goes back before the client reads it,
  // so that its next request (on this connection or another) finds the slot free.
  release_admission();
  downstream_->respond(d);
}

// -- Waiting for a stage -----------------------------------------------------------------------

void Exchange::park(const Decision& d) {
  phase = Phase::queued;
  if (!parked_) hold();
  parked_ = true;
  wait.gave_up = Reason::none;
  wait.abandoned = false;
  wait.since = now();
  wait.at_deadline = d.reason;
  if (d.deadline.count() > 0) reactor_->wheel().schedule(wait_timer_, reactor_->now() + d.deadline);
  downstream_->watch_while_waiting(true);
}

void Exchange::on_wait_deadline() {
  if (phase != Phase::queued || wait.stage == nullptr) return;
  leave_wait(wait.at_deadline, CancelReason::timed_out);
}

void Exchange::leave_wait(Reason reason, CancelReason why) {
  if (!wait.stage->cancel(*this, why)) {
    wait.gave_up = reason;  // a completion is on its way; on_wait_over() answers
    return;
  }
  wait.stage = nullptr;
  wait_timer_.cancel();
  downstream_->watch_while_waiting(false);
  hold();
  if (std::exchange(parked_, false)) release();
  answer(reason);
  release();  // last: it may give the exchange back
}

// The exchange's reactor, from the poller's inbox.
void Exchange::on_wait_over() {
  Downstream& ds = *downstream_;
  hold();  // the parked hold goes now; this one keeps the exchange for the rest
  if (std::exchange(parked_, false)) release();
  const Stage& stage = *std::exchange(wait.stage, nullptr);
  Ticket& ticket = tickets.next(stage);
  const Decision d = stage.resume(*this, ticket, wait.result);
  tickets.commit();
  wait_timer_.cancel();
  if (ds.gone()) return release();  // the client went away: the stage gave back what came
  ds.watch_while_waiting(false);
  if (reactor_->cutting()) {
    // A slot freed by the shutdown's cut elsewhere: this request is cut with the rest.
    reactor_->count_cut();
    ds.cut(OutcomeSource::floodgate);
    return release();
  }
  if (const Reason gave_up = std::exchange(wait.gave_up, Reason::none); gave_up != Reason::none) {
    answer(Decision::stop(gave_up, d.answer, d.status));
  } else if (Chain::enforced(*this, stage, d, *metrics)) {
    answer(d);
  } else {
    run_chain(*wait.chain);  // on, after the stage that waited
  }
  release();  // last: it may give the exchange back
}

// -- Backend selection, the retry and the hedge --------------------------------------------------

void Exchange::select_backend() {
  const FailurePolicy& policy = gen->snapshot->failure;
  Balancer& balancer = *up->per_reactor[reactor_index].balancer;
  const auto t = reactor_->now();
  Selection s = select_primary(*up, balancer, policy, t);
  if (s.would_refuse != Reason::none) {  // circuit_breaker.mode = "shadow"
    metrics->shadow_rejected(StageId::circuit_breaker, s.would_refuse);
    if (would_reject == Reason::none) {
      would_reject = s.would_refuse;
      would_reject_stage = StageId::circuit_breaker;
    }
  }
  if (s) {
    if (s.fail_open) metrics->circuit_fail_open(up->id);
    if (policy.global_budget) {  // the budgets' allowance follows the primaries
      policy.global_budget->count_primary(t);
      up->retry_budget->count_primary(t);
    }
    arm_hedge(*up, policy);
    return attempt().start(*up, static_cast<uint32_t>(s.backend), std::move(s.entered),
                           std::move(s.pass));
  }
  // No peer to send it to. The pool slot goes back at once.
  switch (s.refusal) {
    case Reason::no_eligible_backend:
      return reject(s.refusal);
    case Reason::circuit_open: {
      permit.release();
      metrics->circuit_rejected(up->id);
      const auto wait_for = std::chrono::ceil<std::chrono::seconds>(s.half_open_at - t);
      return answer(Decision::stop_built(
          s.refusal,
          static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>(wait_for.count(), 86'400))),
          {}));
    }
    default:
      permit.release();
      return answer(s.refusal);
  }
}

// The retry: once, to another backend, when every rule holds (failure_policy.h), an alternate
// can take it and the budgets admit it.
bool Exchange::retry_elsewhere(Reason reason) {
  const Attempt& failed = attempt();
  if (up == nullptr || failed.backend() < 0) return false;  // a CONNECT tunnel's
  // Nothing of the request left floodgate: the attempt never had an established connection,
  // and the body, if any, is still whole in the client's buffer.
  const bool unsent = !failed.request_may_have_left() && !body_taken;
  const RetryCandidate candidate{
      Outcome::generated(reason), head.method,        facts.has_body, facts.upgrade,
      outcome.client_saw_bytes,   attempts_started(), unsent};
  if (retry_rule(candidate) != NoRetry::none) return false;
  const uint32_t upstream = up->id;
  switch (start_second_attempt(AttemptRole::retry, static_cast<uint32_t>(failed.backend()))) {
    case SecondAttempt::started:
      metrics->retry(upstream, RetryResult::sent);
      return true;
    case SecondAttempt::no_alternate:
      metrics->retry(upstream, RetryResult::no_alternate);
      return false;
    case SecondAttempt::denied_budget:
      metrics->retry(upstream, RetryResult::denied_budget);
      return false;
  }
  return false;
}

// A retry's or a hedge's attempt: another backend than `exclude` with a closed circuit, when
// both retry budgets (global and the pool's) admit it. The exchange keeps its one pool slot.
Exchange::SecondAttempt Exchange::start_second_attempt(AttemptRole role, uint32_t exclude) {
  const FailurePolicy& policy = gen->snapshot->failure;
  const auto t = reactor_->now();
  Selection s = select_alternate(*up, *up->per_reactor[reactor_index].balancer, policy, t, exclude);
  if (!s) return SecondAttempt::no_alternate;
  if (policy.global_budget &&
      !resilience::try_retry_both(*policy.global_budget, *up->retry_budget, t)) {
    return SecondAttempt::denied_budget;  // the alternate's count and pass go back with `s`
  }
  Attempt* next = free_attempt();  // there is one: a single attempt was made
  if (role == AttemptRole::retry) current = index_of(*next);
  next->start(*up, static_cast<uint32_t>(s.backend), std::move(s.entered), std::move(s.pass), role);
  return SecondAttempt::started;
}

// Hedging (resilience.hedging): a bodyless, non-tunnel request with a safe method to a pool on
// the allowlist gets a second attempt at another backend when the first has no response head
// after `delay`; the first successful head wins (claim()) and the other is cancelled.
void Exchange::arm_hedge(const Upstream& pool, const FailurePolicy& policy) {
  if (!policy.hedging || !pool.hedge || pool.backends.size() < 2 || facts.has_body ||
      facts.upgrade || (policy.hedge_methods & method_bit(head.method)) == 0 ||
      brownout_suppresses_hedging()) {
    return;
  }
  reactor_->wheel().schedule(hedge_timer_, reactor_->now() + policy.hedge_delay);
}

void Exchange::on_hedge_timer() {
  Downstream& ds = *downstream_;
  hold();
  Attempt& primary = attempt();
  if (!ds.gone() && phase == Phase::forwarding && up != nullptr && attempts_started() == 1 &&
      primary.live() && !primary.response_started() && !outcome.client_saw_bytes &&
      !brownout_suppresses_hedging()) {
    // No alternate or no budget (a hedge spends it like a retry): the primary goes on alone.
    const uint32_t upstream = up->id;
    if (start_second_attempt(AttemptRole::hedge, static_cast<uint32_t>(primary.backend())) ==
        SecondAttempt::started) {
      metrics->hedge(upstream, HedgeResult::sent);
    }
  }
  release();  // last: it may give the exchange back
}

// Brownout (enforced) is on: no second attempt that would add load (resilience.brownout).
bool Exchange::brownout_suppresses_hedging() const noexcept {
  const LocalProtection& p = gen->snapshot->protection;
  return p.brownout_enforced() && p.state->brownout.active();
}

void Exchange::reject(Reason reason) {
  permit.release();  // a turned-away request holds no slot while its answer is written
  metrics->pool_rejected(up->id, reason);
  answer(reason);
}

void Exchange::on_attempt_failed(Attempt& failed, Reason reason) {
  Attempt& alive = other(failed);
  if (alive.live()) {  // hedged: the other attempt may still answer
    current = index_of(alive);
    return;
  }
  current = index_of(failed);
  hedge_timer_.cancel();
  if (outcome.client_saw_bytes || downstream_->writing()) {
    return downstream_->cut(OutcomeSource::upstream);
  }
  if (retry_elsewhere(reason)) return;
  answer(reason);
}

void Exchange::claim(Attempt& a) {
  hedge_timer_.cancel();
  current = index_of(a);
  Attempt& loser = other(a);
  const bool hedged = attempts[1].role() == AttemptRole::hedge && attempts[1].started();
  if (!hedged || hedge_settled) return;
  hedge_settled = true;
  metrics->hedge(up->id, a.role() == AttemptRole::hedge ? HedgeResult::won_by_hedge
                                                        : HedgeResult::won_by_primary);
  if (loser.live()) {
    // HTTP/1.1 cannot cancel a request on a connection: the loser's is closed, never pooled
    // mid-response; its count in the backend's load and its circuit pass go back (no verdict).
    loser.end(false);
    metrics->hedge(up->id, HedgeResult::cancelled);
  }
}

// -- CONNECT -----------------------------------------------------------------------------------

// CONNECT host:port (RFC 9110 section 9.3.6), once the protocol policy has allowed it: the
// attempt connects to the authority (no pool), the downstream answers 200 and relays. An IP
// literal is connected at once; a name is resolved off the reactor (resolver.h). A refused or
// unreachable target is 502 upstream_connect_failed, a slow one 504 upstream_connect_timeout.
void Exchange::open_connect_tunnel() {
  phase = Phase::forwarding;  // a client that goes away now is logged as cut short
  // inspect_request checked the form: host ":" port, the port at most 65535.
  const std::string_view authority = facts.authority;
  const std::size_t colon = authority.rfind(':');
  std::string_view host = authority.substr(0, colon);
  uint16_t port = 0;
  for (const char c : authority.substr(colon + 1)) {
    port = static_cast<uint16_t>(port * 10 + static_cast<uint16_t>(c - '0'));
  }
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (!ec) return attempt().start_tunnel({address, port});
  // The completion holds the exchange (through a shared handle, so that copies of the
  // function never touch its count off this thread) until it runs here.
  struct Held {
    explicit Held(Exchange& e) : e(e) { e.hold(); }
    ~Held() { e.release(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    Exchange& e;
  };
  auto held = std::make_shared<Held>(*this);
  const bool queued = reactor_->resolver().resolve(
      std::string(host), port, [this, held](const Resolver::Result& r) {
        if (downstream_->gone()) return;  // the client went away meanwhile
        if (r.error) return answer(Reason::upstream_connect_failed);
        attempt().start_tunnel(r.endpoint);
      });
  if (!queued) answer(Reason::upstream_connect_failed);
}

// -- Endings -----------------------------------------------------------------------------------

void Exchange::end_attempts() noexcept {
  hedge_timer_.cancel();
  for (Attempt& a : attempts) a.end(false);  // one still running is abandoned, never pooled
}

void Exchange::abandon() noexcept {
  hedge_timer_.cancel();
  wait_timer_.cancel();
  if (phase == Phase::queued && wait.stage != nullptr) {  // the client went away while waiting
    wait.abandoned = true;
    if (wait.stage->cancel(*this, CancelReason::client_gone)) {
      wait.stage = nullptr;
      if (std::exchange(parked_, false)) release();
    }  // else the completion is on its way: the stage gives back what it brings
  }
  end_attempts();
  end(false);  // settled; the generation stays pinned while completions may be pending
}

void Exchange::on_generation_retired(uint64_t retired, const Snapshot& current_snapshot) {
  if (!gen || gen->snapshot->generation != retired || up == nullptr) return;
  if (phase == Phase::queued && wait.stage != nullptr) {
    // A waiter never outlives its generation's grace: wake it and turn it away, whether or not
    // its pool lives on (it would otherwise be admitted onto a configuration that is gone).
    return leave_wait(Reason::generation_retired, CancelReason::retired);
  }
  // A pool that lives on by name belongs to the current generation too: its requests (long
  // downloads, tunnels) carry on. Only a request whose pool was removed is ended.
  const uint32_t id = up->id;
  if (id < current_snapshot.by_id.size() && current_snapshot.by_id[id] != nullptr) return;
  downstream_->cut(OutcomeSource::floodgate);
}

void Exchange::log() {
  const std::size_t slot = up != nullptr ? ReactorMetrics::slot_for(up->id) : 0;
  const auto elapsed = now() - started;
  if (outcome.status != 0) metrics->count_request(slot, outcome.status, elapsed);
  metrics->refused(slot, outcome.reason);  // the process log's shedding summary
  AccessLog& access_log = reactor_->access_log();
  if (!access_log.enabled()) return;
  AccessRecord r;
  r.time = std::chrono::system_clock::now();
  r.client = r.peer = downstream_->client_ip();
  std::array<char, kKeyScratch> client{};  // the client's address, from a trusted proxy's head
  if (head.complete()) {
    // The client the rate limits' client_ip counted, by the generation the request ran on.
    const Snapshot& snap = snapshot();
    if (const std::optional<IpAddress> forwarded =
            forwarded_client(conn->peer, snap.server.trusted_proxies, &head)) {
      r.client = address_text(*forwarded, client);
    }
    r.method = head.method_name;
    r.target = head.target;
    r.protocol = head.protocol();
    r.stream = downstream_->stream_id();
    r.host = facts.host.empty() ? facts.authority : facts.host;
    for (uint32_t i = 0; i < head.field_count(); ++i) {
      const std::string_view name = head.field_name(i);
      if (r.user_agent.empty() && name.size() == 10 && ascii::iequals(name, "user-agent")) {
        r.user_agent = head.field_value(i);
      } else if (r.referer.empty() && name.size() == 7 && ascii::iequals(name, "referer")) {
        r.referer = head.field_value(i);
      }
    }
  }
  if (const net::TlsSession* tls = downstream_->tls()) {
    const net::TlsFacts tls_facts = tls->facts();
    r.tls_version = tls_facts.version;
    r.tls_cipher = tls_facts.cipher;
  }
  r.status = outcome.status;
  r.bytes_in = bytes_in;
  r.bytes_out = bytes_out;
  r.body_bytes_sent = bytes_out > head_bytes_out ? bytes_out - head_bytes_out : 0;
  if (const Attempt& a = attempt(); a.started()) {
    r.connect_time = a.connect_time();
    r.head_time = a.head_time();
  }
  if (up != nullptr) {
    r.upstream = up->params.name;
    if (const int32_t b = attempt().backend(); b >= 0) {
      r.backend = up->backends[static_cast<std::size_t>(b)]->address.text;
    }
    for (const Attempt& a : attempts) {  // in the order they were made, every send
      if (a.backend() < 0) continue;
      for (uint8_t i = 0; i < a.sends() && r.attempts < r.backends.size(); ++i) {
        r.backends[r.attempts++] =
            up->backends[static_cast<std::size_t>(a.backend())]->address.text;
      }
    }
  }
  if (facts.connect) {  // a CONNECT tunnel's target
    r.backend = facts.authority;
    if (attempt().started()) {
      r.backends[0] = r.backend;
      r.attempts = 1;
    }
  }
  r.duration = elapsed;
  r.reason = outcome.reason;
  if (rate_limited_by != nullptr) r.rate_limit = *rate_limited_by;
  if (quota_by != nullptr) r.quota = *quota_by;
  r.request_id = request_id;
  r.would_reject = would_reject;
  access_log.write(reactor_index, r);
}

}  // namespace floodgate::proxy
