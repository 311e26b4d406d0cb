#include "generations.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace floodgate::app {
namespace {

config::Config parse(const std::string& toml) {
  config::LoadResult r = config::load_string(toml, "test.toml");
  EXPECT_TRUE(r.ok()) << (r.diagnostics.empty() ? "" : config::format(r.diagnostics[0]));
  return *r.config;
}

const std::string kOnePool = R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9001"]
[[routes]]
upstream = "app"
)";

const std::string kTwoPools = R"(
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9100"]
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9001", "127.0.0.1:9002"]
balance = "p2c"
[[routes]]
upstream = "app"
[[routes]]
path_prefix = "/api"
upstream = "api"
)";

TEST(Generations, NumbersGenerationsAndHashesTheirSource) {
  Generations g(2);
  auto first = g.build(parse(kOnePool), kOnePool);
  EXPECT_EQ(first.snapshot->generation, 1U);
  EXPECT_EQ(first.snapshot->sha256, sha256_hex(kOnePool));
  g.activate(std::move(first));
  const auto second = g.build(parse(kOnePool), kOnePool);
  EXPECT_EQ(second.snapshot->generation, 2U);
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Generations, AGenerationBuiltButNeverActivatedUsesNoNumber) {
  Generations g(2);
  g.activate(g.build(parse(kOnePool), kOnePool));
  // Refused after it was built (a listener that cannot be bound): dropped, never activated.
  const auto refused = g.build(parse(kTwoPools), kTwoPools);
  EXPECT_EQ(refused.snapshot->generation, 2U);
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  EXPECT_EQ(g.active().snapshot->generation, 2U);
  // A rollback reactivates generation 1 under its own number; the next one is 3.
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(g.active().snapshot->generation, 1U);
  EXPECT_EQ(g.build(parse(kOnePool), kOnePool).snapshot->generation, 3U);
}

TEST(Generations, KeepsAPoolsIdAndItsBackendsByNameAcrossReloads) {
  Generations g(2);
  g.activate(g.build(parse(kOnePool), kOnePool));
  const proxy::Snapshot& one = *g.active().snapshot;
  const proxy::Upstream& app1 = *one.upstreams[0];
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  const proxy::Snapshot& two = *g.active().snapshot;
  const proxy::Upstream& app2 = two.upstream(app1.id);
  EXPECT_EQ(app2.params.name, "app");
  // 127.0.0.1:9001 is kept: the same object, with its in-flight count and idle lists.
  EXPECT_EQ(app2.backends[0].get(), app1.backends[1].get());
  EXPECT_NE(app2.backends[1].get(), app1.backends[0].get());  // 9002 is new
  // The new pool gets the next id; the route table points at ids.
  const proxy::Upstream& api = *two.upstreams[0];
  EXPECT_EQ(api.params.name, "api");
  EXPECT_NE(api.id, app1.id);
  EXPECT_EQ(two.upstream_names.size(), 2U);
  EXPECT_EQ(two.routes.match("example.test", "/api/x")->upstream, api.id);
  EXPECT_EQ(two.routes.match("example.test", "/x")->upstream, app1.id);
}

TEST(Generations, ARemovedPoolKeepsItsIdForWhenItComesBack) {
  Generations g(1);
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  const uint32_t api_id = g.active().snapshot->upstreams[0]->id;
  g.activate(g.build(parse(kOnePool), kOnePool));
  EXPECT_EQ(g.active().snapshot->by_id[api_id], nullptr);
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  EXPECT_EQ(g.active().snapshot->upstreams[0]->id, api_id);
}

TEST(Generations, GivesEachReactorItsOwnBalancerAndIdleLists) {
  Generations g(3);
  const auto e = g.build(parse(kOnePool), kOnePool);
  const proxy::Upstream& up = *e.snapshot->upstreams[0];
  for (unsigned r = 0; r < 3; ++r) EXPECT_TRUE(up.per_reactor[r].balancer.has_value());
  EXPECT_EQ(up.backends[0]->idle[2].count, 0U);
}

TEST(Generations, RollbackSwapsTheActiveAndThePreviousGeneration) {
  Generations g(1);
  EXPECT_FALSE(g.rollback());
  g.activate(g.build(parse(kOnePool), kOnePool));
  EXPECT_FALSE(g.rollback());  // no previous yet
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(g.active().snapshot->generation, 1U);
  ASSERT_NE(g.previous(), nullptr);
  EXPECT_EQ(g.previous()->snapshot->generation, 2U);
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(g.active().snapshot->generation, 2U);
}

TEST(Generations, RefusesMorePoolNamesThanTheMetricsSlotsSizedAtStart) {
  Generations g(1);
  auto config_named = [](std::size_t i) {
    return "[[upstreams]]\nname = \"pool" + std::to_string(i) +
           "\"\nservers = [\"127.0.0.1:9000\"]\n[[routes]]\nupstream = \"pool" + std::to_string(i) +
           "\"\n";
  };
  for (std::size_t i = 0; i < proxy::kMaxPools; ++i) {
    const std::string text = config_named(i);
    g.activate(g.build(parse(text), text));
  }
  const std::string text = config_named(proxy::kMaxPools);
  try {
    (void)g.build(parse(text), text);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("restart"), std::string::npos) << e.what();
  }
  // Names seen before still work.
  const std::string again = config_named(7);
  EXPECT_NO_THROW((void)g.build(parse(again), again));
}

const std::string kLimited = R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9001"]
[upstreams.resilience]
max_active_requests = 8
max_pending_requests = 4
pending_timeout = "2s"
max_active_per_backend = 5
retry_after = "1500ms"
[[routes]]
upstream = "app"
)";

TEST(Generations, APoolKeepsItsAdmissionAcrossReloadsAndTakesTheActiveLimits) {
  Generations g(1);
  g.activate(g.build(parse(kOnePool), kOnePool));
  const std::shared_ptr<proxy::Pool> pool = g.active().snapshot->upstreams[0]->pool;
  EXPECT_EQ(pool->admission.limit(), 0U);  // no [upstreams.resilience]: unlimited
  g.activate(g.build(parse(kLimited), kLimited));
  EXPECT_EQ(g.active().snapshot->upstreams[0]->pool, pool);
  EXPECT_EQ(pool->admission.limit(), 8U);
  EXPECT_EQ(pool->admission.max_pending(), 4U);
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(pool->admission.limit(), 0U);
}

TEST(Generations, ABuiltGenerationChangesNoLimitUntilItIsActivated) {
  Generations g(1);
  g.activate(g.build(parse(kOnePool), kOnePool));
  const auto next = g.build(parse(kLimited), kLimited);
  EXPECT_EQ(next.snapshot->upstreams[0]->pool->admission.limit(), 0U);
}

TEST(Generations, ResolvesThePolicyAndPrebuildsRejectionsWithRetryAfterInWholeSeconds) {
  Generations g(1);
  const auto e = g.build(parse(kLimited), kLimited);
  const proxy::Upstream& up = *e.snapshot->upstreams[0];
  EXPECT_EQ(up.policy.max_active_per_backend, 5U);
  EXPECT_EQ(up.policy.pending_timeout, std::chrono::seconds(2));
  EXPECT_EQ(up.policy.retry_after_seconds, 2U);  // 1.5s rounds up
  const std::string_view keep = up.rejection(Reason::pending_timeout, false);
  EXPECT_TRUE(keep.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << keep;
  EXPECT_NE(keep.find("\r\nRetry-After: 2\r\n"), std::string_view::npos) << keep;
  EXPECT_NE(keep.find("\r\nX-Floodgate-Reason: pending_timeout\r\n"), std::string_view::npos);
  EXPECT_EQ(keep.find("Connection: close"), std::string_view::npos);
  EXPECT_NE(up.rejection(Reason::proxy_overloaded, true).find("\r\nConnection: close\r\n"),
            std::string_view::npos);
}

TEST(Generations, TheSameAddressTwiceInAPoolIsTwoPeersWithTheirOwnHealth) {
  const std::string twice = R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9000"]
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "app"
)";
  Generations g(1);
  g.activate(g.build(parse(twice), twice));
  const proxy::Snapshot& one = *g.active().snapshot;
  const auto& app = one.upstreams[0]->backends;
  const auto& api = one.upstreams[1]->backends;
  EXPECT_NE(app[0].get(), app[1].get());
  EXPECT_NE(app[0]->health, app[1]->health);
  EXPECT_NE(app[0]->health, api[0]->health);
  // A reload keeps each occurrence's peer, and so its health state.
  g.activate(g.build(parse(twice), twice));
  EXPECT_EQ(g.active().snapshot->upstreams[0]->backends[1]->health, app[1]->health);
}

TEST(Generations, RetryAfterIsAtLeastOneSecond) {
  ResilienceParams r;
  r.retry_after = std::chrono::milliseconds(1);
  EXPECT_EQ(proxy::Policy::of(r).retry_after_seconds, 1U);
  r.retry_after = std::chrono::seconds(30);
  EXPECT_EQ(proxy::Policy::of(r).retry_after_seconds, 30U);
}

// -- Issue 13: breakers per address, budgets kept while their ratio and window are ----------

TEST(Generations, OneBreakerPerAddressSharedByPoolsAndKeptAcrossReloads) {
  Generations g(1);
  g.activate(g.build(parse(kTwoPools), kTwoPools));  // app has 127.0.0.1:9001 and :9002
  const std::string with_shared = R"(
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9001"]
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9001", "127.0.0.1:9002"]
[[routes]]
upstream = "app"
)";
  const auto before = g.active().snapshot;
  const auto& app_before = before->upstream(before->upstreams[1]->id);
  const auto breaker_9001 = app_before.backends[0]->breaker;
  g.activate(g.build(parse(with_shared), with_shared));
  const proxy::Snapshot& after = *g.active().snapshot;
  const proxy::Upstream& api = *after.upstreams[0];
  const proxy::Upstream& app = *after.upstreams[1];
  EXPECT_EQ(app.backends[0]->breaker, breaker_9001) << "a reload keeps the address's breaker";
  EXPECT_EQ(api.backends[0]->breaker, breaker_9001) << "two pools, one address, one breaker";
  EXPECT_NE(api.backends[0], app.backends[0]) << "but each pool its own peer";
  EXPECT_NE(app.backends[1]->breaker, breaker_9001);
}

TEST(Generations, ActivationGivesEveryBreakerTheActiveLimits) {
  Generations g(1);
  const std::string tight = kOnePool + R"(
[resilience.circuit_breaker]
failure_threshold = 7
min_requests = 2
failure_rate_percent = 0
window = "5s"
open = "2s"
half_open_max_probes = 3
)";
  g.activate(g.build(parse(kOnePool), kOnePool));
  const auto breaker = g.active().snapshot->upstreams[0]->backends[0]->breaker;
  EXPECT_EQ(breaker->limits(), resilience::CircuitLimits{});
  g.activate(g.build(parse(tight), tight));
  EXPECT_EQ(breaker->limits(), (resilience::CircuitLimits{.failure_threshold = 7,
                                                          .min_requests = 2,
                                                          .failure_rate_percent = 0,
                                                          .window = std::chrono::seconds(5),
                                                          .open = std::chrono::seconds(2),
                                                          .half_open_max_probes = 3}));
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(breaker->limits(), resilience::CircuitLimits{});
}

TEST(Generations, AReloadKeepsABudgetWhoseRatioAndWindowStayAndStartsAChangedOneAfresh) {
  Generations g(1);
  const auto with = [](const std::string& budget) { return kTwoPools + budget; };
  const std::string ten = with("[resilience.retry_budget]\nratio_percent = 10\n");
  const std::string app20 = with(
      "[resilience.retry_budget]\nratio_percent = 10\nper_route_ratio_percent = { app = 20 }\n");
  const std::string off = with("[resilience.retry_budget]\nenabled = false\n");
  const auto first = g.build(parse(ten), ten);
  const auto same = g.build(parse(ten), ten);
  const auto changed = g.build(parse(app20), app20);
  const auto disabled = g.build(parse(off), off);
  const auto& s1 = *first.snapshot;
  const auto& s2 = *same.snapshot;
  const auto& s3 = *changed.snapshot;
  ASSERT_TRUE(s1.failure.global_budget);
  EXPECT_EQ(s2.failure.global_budget, s1.failure.global_budget);
  EXPECT_EQ(s3.failure.global_budget, s1.failure.global_budget) << "the global ratio is kept";
  EXPECT_EQ(s2.upstreams[1]->retry_budget, s1.upstreams[1]->retry_budget);
  EXPECT_NE(s3.upstreams[1]->retry_budget, s1.upstreams[1]->retry_budget) << "app's changed";
  EXPECT_EQ(s3.upstreams[1]->retry_budget->ratio_percent(), 20U);
  EXPECT_EQ(s3.upstreams[0]->retry_budget, s1.upstreams[0]->retry_budget) << "api's is kept";
  EXPECT_NE(s1.upstreams[0]->retry_budget, s1.upstreams[1]->retry_budget) << "one per pool";
  EXPECT_FALSE(disabled.snapshot->failure.global_budget);
  EXPECT_FALSE(disabled.snapshot->upstreams[0]->retry_budget);
}

TEST(Generations, HedgingAppliesToThePoolsOfItsAllowlist) {
  Generations g(1);
  const std::string hedged = kTwoPools + R"(
[resilience.hedging]
enabled = true
route_allowlist = ["app"]
)";
  const auto e = g.build(parse(hedged), hedged);
  EXPECT_FALSE(e.snapshot->upstreams[0]->hedge);
  EXPECT_TRUE(e.snapshot->upstreams[1]->hedge);
  EXPECT_TRUE(e.snapshot->failure.hedging);
  const auto plain = g.build(parse(kTwoPools), kTwoPools);
  EXPECT_FALSE(plain.snapshot->upstreams[1]->hedge);
}

TEST(Generations, AReloadTakesEveryLocalProtectionKeyIntoTheNewGeneration) {
  Generations g(1);
  const std::string changed = kTwoPools + R"(
[server]
drain_timeout = "5s"
[resilience.inflight]
max_inflight = 1000
[resilience.adaptive_admission]
enabled = false
min_limit = 8
max_limit = 900
decrease_step = 4
increase_step = 2
high_latency = "1s"
window = "250ms"
mode = "shadow"
[resilience.brownout]
enabled = false
trigger_inflight_percent = 80
recover_inflight_percent = 50
core_routes = ["api"]
mode = "shadow"
[resilience.route_queue]
default_cap = 100
global_cap = 400
caps = { app = 50 }
retry_after = "2s"
mode = "shadow"
[resilience.watchdog]
enabled = true
check_interval = "2s"
poll_stall_timeout = "10s"
timeout_error_rate_percent = 50
min_requests_per_window = 10
overload_inflight_percent = 90
unhealthy_consecutive_windows = 5
drain_grace = "6s"
restart_cooldown = "10m"
restart_command = ["/usr/bin/systemctl", "restart", "floodgate"]
)";
  g.activate(g.build(parse(kTwoPools), kTwoPools));
  const config::Config next = parse(changed);
  g.activate(g.build(next, changed));
  const resilience::Params& active = g.active().config.resilience;
  EXPECT_EQ(active.adaptive_admission, next.resilience.adaptive_admission);
  EXPECT_EQ(active.brownout, next.resilience.brownout);
  EXPECT_EQ(active.route_queue, next.resilience.route_queue);
  EXPECT_EQ(active.watchdog, next.resilience.watchdog);
  EXPECT_NE(active.watchdog, resilience::WatchdogParams{});
  ASSERT_TRUE(g.rollback());
  EXPECT_EQ(g.active().config.resilience, resilience::Params{});
}

}  // namespace
}  // namespace floodgate::app
