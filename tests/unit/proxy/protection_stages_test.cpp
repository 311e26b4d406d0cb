// The local protection on a route's chain (build_route_chain with LocalProtection): the order
// of its stages, what each answers, the permits held until the exchange ends and given back
// once, the adaptive ceiling's samples, brownout's core routes and exemptions, shadow mode.
#include "floodgate/proxy/protection_stages.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/core/heap_count.h"
#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/pool_stage.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/params.h"

namespace floodgate::proxy {
namespace {

using namespace std::chrono_literals;
using resilience::Mode;
using Verdict = Decision::Verdict;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Two upstreams, "core" and "extra", behind one process-wide protection state; the limits are
// applied as Generations::apply_limits() applies them when a generation becomes active.
class Protection : public ::testing::Test {
 protected:
  Protection() {
    params.brownout.core_routes = {"core"};
    for (uint32_t id = 0; id < 2; ++id) {
      ups[id].id = id;
      ups[id].params.name = id == 0 ? "core" : "extra";
      ups[id].pool = std::make_shared<Pool>();
    }
  }

  void build(uint32_t max_inflight) {
    protection = LocalProtection::of(params, max_inflight, state);
    for (Upstream& up : ups) {
      up.route_cap = protection.route_cap(up.params.name);
      up.pool->route_cap.set_limits({.max_active = up.route_cap});
      chains[up.id] = build_route_chain(up, protection);
    }
    state->global_cap.set_limits({.max_active = protection.global_cap});
    state->adaptive.configure(protection.aimd, protection.window);
  }

  Decision run(Exchange& ex, uint32_t upstream, std::string_view method = "GET") {
    ex.metrics = &metrics;
    ex.started = now;
    ex.request = {.method = method, .target = "/x", .path = "/x", .host = "example.com"};
    ex.inflight_exempt = -1;
    ex.cursor = 0;
    return chains[upstream].run(ex, metrics);
  }

  uint64_t rejected(uint32_t upstream, Reason r) const {
    return metrics.protection_rejected(upstream, protection_rejection_index(r)).value();
  }

  // Destroyed in reverse: exchanges (in the test bodies) before the chains before the pools.
  resilience::Params params;
  std::shared_ptr<ProtectionState> state = std::make_shared<ProtectionState>(1);
  LocalProtection protection;
  std::array<Upstream, 2> ups;
  std::array<Chain, 2> chains;
  ReactorMetrics metrics{2};
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1h;
};

TEST_F(Protection, TheChainIsBrownoutAdaptiveAdmissionRouteCapGlobalCapThenThePool) {
  build(1000);
  const Chain& c = chains[0];
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c.stage(0).id(), StageId::brownout);
  EXPECT_EQ(c.stage(1).id(), StageId::adaptive_admission);
  EXPECT_EQ(c.stage(2).id(), StageId::route_queue);
  EXPECT_EQ(c.stage(3).id(), StageId::route_queue);
  EXPECT_EQ(c.stage(4).id(), StageId::pool);
}

TEST_F(Protection, WithoutAFrontCapOrMaxLimitThereIsNoCeilingAndNoBrownout) {
  build(0);
  ASSERT_EQ(chains[0].size(), 3u);  // the caps and the pool
  EXPECT_EQ(chains[0].stage(0).id(), StageId::route_queue);
}

TEST_F(Protection, TheCeilingsRangeIsMaxLimitClampedToTheFrontCap) {
  params.adaptive_admission.max_limit = 300;
  build(200);
  EXPECT_EQ(protection.aimd.max, 200u);
  EXPECT_EQ(protection.aimd.min, 64u);
  build(0);  // no front cap: max_limit stands alone
  EXPECT_EQ(protection.aimd.max, 300u);
  params.adaptive_admission.max_limit = 0;
  build(32);  // a small front cap: the minimum is the cap
  EXPECT_EQ(protection.aimd.max, 32u);
  EXPECT_EQ(protection.aimd.min, 32u);
}

TEST_F(Protection, AFullRouteCapAnswers503RouteCapWithRetryAfterAndCounts) {
  params.route_queue.caps = {{"extra", 1}};
  params.route_queue.retry_after = 3s;
  build(1000);
  Exchange held;
  ASSERT_EQ(run(held, 1).verdict, Verdict::go);
  held.permit.release();  // the pool's slot: not under test
  Exchange over;
  const Decision d = run(over, 1);
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::route_cap);
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->keep_alive, "HTTP/1.1 503 "));
  EXPECT_TRUE(contains(d.answer->keep_alive, "Retry-After: 3\r\n"));
  EXPECT_TRUE(contains(d.answer->keep_alive, "X-Floodgate-Reason: route_cap\r\n"));
  EXPECT_EQ(rejected(1, Reason::route_cap), 1u);
  Exchange other;  // the other upstream has its own cap (default_cap)
  EXPECT_EQ(run(other, 0).verdict, Verdict::go);
}

TEST_F(Protection, ThePermitsAreHeldUntilTheExchangeEndsAndGivenBackOnce) {
  params.route_queue.caps = {{"extra", 1}};
  build(1000);
  {
    Exchange ex;
    ASSERT_EQ(run(ex, 1).verdict, Verdict::go);
    EXPECT_EQ(ups[1].pool->route_cap.active(), 1);
    EXPECT_EQ(state->global_cap.active(), 1);
    EXPECT_EQ(state->adaptive.in_flight(), 1);
    ex.end();
    EXPECT_EQ(ups[1].pool->route_cap.active(), 0);
    EXPECT_EQ(state->global_cap.active(), 0);
    EXPECT_EQ(state->adaptive.in_flight(), 0);
    ex.end();  // a second end gives back nothing more
  }
  EXPECT_EQ(ups[1].pool->route_cap.active(), 0);
  EXPECT_EQ(state->global_cap.active(), 0);
}

TEST_F(Protection, AFullGlobalCapAnswers503GlobalCapAndARouteCapRefusalTakesNoGlobalSlot) {
  params.route_queue.global_cap = 1;
  params.route_queue.caps = {{"extra", 1}};
  build(1000);
  Exchange first;
  ASSERT_EQ(run(first, 1).verdict, Verdict::go);
  Exchange over_route;
  EXPECT_EQ(run(over_route, 1).reason, Reason::route_cap);
  EXPECT_EQ(state->global_cap.active(), 1);
  Exchange over_global;
  const Decision d = run(over_global, 0);
  EXPECT_EQ(d.reason, Reason::global_cap);
  EXPECT_EQ(rejected(0, Reason::global_cap), 1u);
  over_global.end();
  EXPECT_EQ(ups[0].pool->route_cap.active(), 0);  // its route slot went back at the end
}

TEST_F(Protection, AtTheAdaptiveCeilingTheAnswerIs503AdaptiveLimit) {
  params.adaptive_admission.min_limit = 2;
  params.adaptive_admission.max_limit = 2;
  params.brownout.enabled = false;
  build(1000);
  std::array<Exchange, 2> held;
  for (Exchange& ex : held) ASSERT_EQ(run(ex, 0).verdict, Verdict::go);
  Exchange over;
  const Decision d = run(over, 0);
  EXPECT_EQ(d.reason, Reason::adaptive_limit);
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->keep_alive, "Retry-After: 1\r\n"));
  EXPECT_EQ(rejected(0, Reason::adaptive_limit), 1u);
}

TEST_F(Protection, SettledOutcomesAreTheControllersSamples) {
  params.adaptive_admission.max_limit = 512;
  params.adaptive_admission.high_latency = 500ms;
  build(1000);
  Exchange first;
  ASSERT_EQ(run(first, 0).verdict, Verdict::go);  // the first window starts
  first.end();
  for (int i = 0; i < 40; ++i) {
    Exchange ex;
    ASSERT_EQ(run(ex, 0).verdict, Verdict::go);
    ex.decide(Outcome::relayed(200, 600ms));  // slow
    ex.end();
  }
  now += 100ms;
  Exchange next;
  ASSERT_EQ(run(next, 0).verdict, Verdict::go);  // its arrival makes the window's decision
  EXPECT_EQ(state->adaptive.ceiling(), 496u);
}

TEST_F(Protection, BrownoutShedsTheUpstreamsThatAreNotCoreAndKeepsTheCoreOnes) {
  params.adaptive_admission.min_limit = 10;
  params.adaptive_admission.max_limit = 10;
  build(1000);
  std::array<Exchange, 9> held;  // 9 of 10: 90%
  for (Exchange& ex : held) ASSERT_EQ(run(ex, 0).verdict, Verdict::go);
  Exchange extra;
  const Decision d = run(extra, 1);
  EXPECT_EQ(d.reason, Reason::brownout);
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->keep_alive, "Retry-After: 1\r\n"));
  EXPECT_TRUE(state->brownout.active());
  EXPECT_EQ(rejected(1, Reason::brownout), 1u);
  Exchange core;
  EXPECT_EQ(run(core, 0).verdict, Verdict::go);
  for (Exchange& ex : held) ex.end();  // pressure gone: the first request after its hold ends it
  Exchange during;
  EXPECT_EQ(run(during, 1).reason, Reason::brownout);  // held on for one window
  now += 100ms;
  Exchange after;
  EXPECT_EQ(run(after, 1).verdict, Verdict::go);
  EXPECT_FALSE(state->brownout.active());
}

TEST_F(Protection, ACeilingAtTheFrontCapIsTheCapsBusinessNotBrownouts) {
  build(10);  // max_limit = 0: the ceiling is the front cap, 10
  ASSERT_EQ(state->adaptive.ceiling(), 10u);
  std::array<Exchange, 9> held;
  for (Exchange& ex : held) ASSERT_EQ(run(ex, 0).verdict, Verdict::go);
  Exchange extra;
  EXPECT_EQ(run(extra, 1).verdict, Verdict::go);
  EXPECT_FALSE(state->brownout.active());
}

TEST_F(Protection, BrownoutNeverShedsARequestExemptFromTheInFlightCount) {
  params.adaptive_admission.min_limit = 10;
  params.adaptive_admission.max_limit = 10;
  build(1000);
  std::array<Exchange, 9> held;
  for (Exchange& ex : held) ASSERT_EQ(run(ex, 0).verdict, Verdict::go);
  Exchange preflight;
  preflight.metrics = &metrics;
  preflight.started = now;
  preflight.request = {.method = "OPTIONS",
                       .target = "/x",
                       .path = "/x",
                       .host = "example.com",
                       .origin_present = true,
                       .access_control_request_method_present = true};
  EXPECT_EQ(chains[1].run(preflight, metrics).verdict, Verdict::go);
  EXPECT_EQ(state->adaptive.in_flight(), 9);  // and it took no permit of the ceiling
}

TEST_F(Protection, AnUpgradeOfferTakesItsPermitUntilItBecomesATunnel) {
  params.route_queue.caps = {{"extra", 1}};
  build(1000);
  Exchange offer;
  offer.metrics = &metrics;
  offer.started = now;
  offer.request = {.method = "GET", .target = "/ws", .path = "/ws", .host = "h", .upgrade = true};
  EXPECT_EQ(chains[1].run(offer, metrics).verdict, Verdict::go);
  EXPECT_EQ(ups[1].pool->route_cap.active(), 1);
  Exchange plain;
  EXPECT_EQ(run(plain, 1).verdict, Verdict::stop);  // the one slot is the offer's
  offer.release_tickets();  // its 101 came: a tunnel does no work inside the caps
  EXPECT_EQ(ups[1].pool->route_cap.active(), 0);
  EXPECT_EQ(state->global_cap.active(), 0);
  Exchange next;
  EXPECT_EQ(run(next, 1).verdict, Verdict::go);
}

TEST_F(Protection, ShadowModeAdmitsAndCountsWhatEachStageWouldRefuse) {
  params.route_queue.caps = {{"extra", 1}};
  params.route_queue.mode = Mode::shadow;
  build(1000);
  Exchange first;
  ASSERT_EQ(run(first, 1).verdict, Verdict::go);
  Exchange second;
  EXPECT_EQ(run(second, 1).verdict, Verdict::go);
  EXPECT_EQ(second.would_reject, Reason::route_cap);
  EXPECT_EQ(metrics.shadow_rejections(stage_reason_index(StageId::route_queue, Reason::route_cap))
                .value(),
            1u);
  EXPECT_EQ(rejected(1, Reason::route_cap), 0u);  // enforced refusals only
}

TEST_F(Protection, ACeilingDerivedFromAFrontCapInShadowModeObservesToo) {
  params.inflight.mode = Mode::shadow;
  build(1000);
  EXPECT_EQ(protection.params.adaptive_admission.mode, Mode::shadow);
  EXPECT_EQ(protection.params.brownout.mode, Mode::shadow);
  EXPECT_FALSE(protection.brownout_enforced());
  params.adaptive_admission.max_limit = 500;  // a ceiling of its own keeps its mode
  build(1000);
  EXPECT_EQ(protection.params.adaptive_admission.mode, Mode::enforce);
}

// The per-request path of the protection (the chain's checks, the window decisions, the samples
// at settlement, the permits given back) allocates nothing, window after window.
TEST_F(Protection, ThePerRequestPathAllocatesNothing) {
  params.adaptive_admission.max_limit = 64;
  params.adaptive_admission.min_limit = 8;
  params.route_queue.caps = {{"extra", 4}};
  build(1000);
  std::array<Exchange, 8> ex;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int round = 0; round < 200; ++round) {
    now += 10ms;  // a decision every ten rounds
    for (std::size_t i = 0; i < ex.size(); ++i) {
      (void)run(ex[i], static_cast<uint32_t>(i % 2));
      ex[i].decide(Outcome::relayed(200, round % 3 == 0 ? 600ms : 5ms));
    }
    for (Exchange& e : ex) e.end();
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
  EXPECT_GT(state->adaptive.decisions(resilience::AimdMove::decrease) +
                state->adaptive.decisions(resilience::AimdMove::hold) +
                state->adaptive.decisions(resilience::AimdMove::skipped),
            0u);
}

}  // namespace
}  // namespace floodgate::proxy
