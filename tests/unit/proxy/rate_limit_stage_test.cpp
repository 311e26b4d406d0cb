// The scoped rate limits' stage on a route's chain: the first exhausted enforced rule answers
// 429 with its name and Retry-After, the rules before it get their tokens back, shadow rules
// count and let the request on, tiers pick the rates, the allowlist picks the routes, a request
// without the key is counted as missing_key says, and a request that passes allocates nothing.
#include "floodgate/proxy/rate_limit_stage.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/heap_count.h"
#include "floodgate/http/parser.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::proxy {
namespace {

using namespace std::chrono_literals;
using resilience::KeySource;
using resilience::MissingKey;
using resilience::Mode;
using resilience::RateScope;
using resilience::ScopedRateLimitParams;
using Verdict = Decision::Verdict;

ScopedRateLimitParams rule(std::string name, RateScope scope, uint32_t rate, uint32_t burst) {
  ScopedRateLimitParams p;
  p.name = std::move(name);
  p.scope = scope;
  p.requests_per_sec = rate;
  p.burst = burst;
  if (scope == RateScope::client) p.key = {.kind = KeySource::Kind::peer_ip};
  return p;
}

KeySource header(std::string name) {
  return {.kind = KeySource::Kind::header, .name = std::move(name)};
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

class RateLimitStageTest : public ::testing::Test {
 protected:
  RateLimitStageTest() {
    for (uint32_t i = 0; i < 2; ++i) {
      ups[i].id = i;
      ups[i].params.name = i == 0 ? "api" : "web";
    }
  }

  void build(std::vector<ScopedRateLimitParams> rules) {
    auto limits = std::make_shared<RateLimits>();
    for (auto& p : rules) {
      limits->rules.emplace_back(std::move(p), std::make_shared<resilience::RateRule>(1));
    }
    this->limits = limits;
    for (uint32_t i = 0; i < 2; ++i) chains[i] = chain(ups[i], routes[i]);
  }

  // The chain of `route` to `up`, with the rules of the last build().
  Chain chain(const Upstream& up, const RouteParams& route) const {
    std::vector<std::unique_ptr<const Stage>> stages;
    add_rate_limit_stage(stages, up, route, limits);
    return Chain(std::move(stages));
  }

  // A request from `peer` with the header fields `fields`, to upstream `up`.
  Decision send(std::string_view fields = "", std::string_view peer = "192.0.2.1",
                uint32_t up = 0) {
    text = "GET /x HTTP/1.1\r\nHost: example.com\r\n" + std::string(fields) + "\r\n";
    ex.reset();  // before the parser its head points to
    parser = std::make_unique<http::Parser>(http::Parser::Kind::request);
    parser->begin(text.data(), fields_.get(), http::HeadLimits{});
    EXPECT_EQ(parser->parse_head(text.size()), http::Parser::Result::head_done);
    ex = std::make_unique<Exchange>();
    ex->metrics = &metrics;
    ex->started = now;
    ex->head = parser->request_head();
    ex->request = {.method = "GET", .target = "/x", .path = "/x", .host = "example.com"};
    conn = std::make_unique<ConnectionFacts>();  // each request on a connection of its own
    conn->peer = IpAddress::parse(peer).value_or(IpAddress{});
    conn->peer_text = peer;
    ex->conn = conn.get();
    return chains[up].run(*ex, metrics);
  }

  const resilience::RateRule::Totals totals(std::size_t i) const {
    return limits->rules[i].state->totals();
  }

  std::array<Upstream, 2> ups;
  std::array<RouteParams, 2> routes{RouteParams{.host = "a.example", .upstream = "api"},
                                    RouteParams{.host = "*", .upstream = "web"}};
  std::shared_ptr<const RateLimits> limits;
  std::array<Chain, 2> chains;
  ReactorMetrics metrics{2};
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1h;
  std::string text;
  std::unique_ptr<http::HeaderField[]> fields_ =
      std::make_unique<http::HeaderField[]>(http::HeadLimits{}.max_headers);
  std::unique_ptr<http::Parser> parser;
  std::unique_ptr<ConnectionFacts> conn;
  std::unique_ptr<Exchange> ex;
};

TEST_F(RateLimitStageTest, AnExhaustedRuleAnswers429WithItsNameAndRetryAfter) {
  build({rule("per-client", RateScope::client, 1, 2)});
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(send().verdict, Verdict::go);
  const Decision d = send();
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::rate_limited);
  ASSERT_NE(d.answer, nullptr);
  const std::string_view bytes = d.answer->bytes(false);
  EXPECT_TRUE(contains(bytes, "HTTP/1.1 429 ")) << bytes;
  EXPECT_TRUE(contains(bytes, "X-Floodgate-Limit: per-client\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "Retry-After: 1\r\n")) << bytes;
  EXPECT_EQ(*ex->rate_limited_by, "per-client");
  EXPECT_EQ(totals(0).allowed, 2u);
  EXPECT_EQ(totals(0).limited, 1u);
}

TEST_F(RateLimitStageTest, ClientsAreCountedApart) {
  build({rule("per-client", RateScope::client, 1, 1)});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::stop);
  EXPECT_EQ(send("", "192.0.2.2").verdict, Verdict::go);
  EXPECT_EQ(limits->rules[0].state->table().live(), 2u);
}

TEST_F(RateLimitStageTest, ADenialByALaterRuleCostsTheEarlierRulesNothing) {
  ScopedRateLimitParams tenant = rule("tenant", RateScope::tenant, 1, 1);
  tenant.key = header("x-tenant");
  build({rule("per-client", RateScope::client, 1, 3), tenant});
  EXPECT_EQ(send("X-Tenant: t\r\n").verdict, Verdict::go);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send("X-Tenant: t\r\n").reason, Reason::rate_limited);
  // per-client gave back every token of the five refused requests: two of its three are left.
  EXPECT_EQ(send("X-Tenant: u\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: v\r\n").verdict, Verdict::go);
  const Decision d = send("X-Tenant: w\r\n");
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_TRUE(contains(d.answer->bytes(false), "X-Floodgate-Limit: per-client\r\n"));
}

TEST_F(RateLimitStageTest, AShadowRuleCountsWhatItWouldRefuseAndLetsItPass) {
  ScopedRateLimitParams p = rule("watch", RateScope::client, 1, 1);
  p.mode = Mode::shadow;
  build({p});
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(ex->would_reject, Reason::rate_limited);
  EXPECT_EQ(ex->would_reject_stage, StageId::rate_limit);
  EXPECT_EQ(totals(0).shadow_limited, 1u);
  EXPECT_EQ(metrics.shadow_rejections(stage_reason_index(StageId::rate_limit, Reason::rate_limited))
                .value(),
            1u);
}

TEST_F(RateLimitStageTest, ATierPicksTheRatesAndAnUnknownPlanGetsTheRulesOwn) {
  ScopedRateLimitParams p = rule("tenant", RateScope::tenant, 1, 1);
  p.key = header("x-tenant");
  p.tier_key = header("x-plan");
  p.tiers = {{"pro", {.requests_per_sec = 100, .burst = 5}}};
  build({p});
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(send("X-Tenant: a\r\nX-Plan: pro\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: a\r\nX-Plan: pro\r\n").verdict, Verdict::stop);
  EXPECT_EQ(send("X-Tenant: b\r\nX-Plan: gold\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: b\r\nX-Plan: gold\r\n").verdict, Verdict::stop);
  EXPECT_EQ(send("X-Tenant: c\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: c\r\n").verdict, Verdict::stop);
}

TEST_F(RateLimitStageTest, AnAllowlistedRuleLeavesOtherRoutesAlone) {
  ScopedRateLimitParams p = rule("api-only", RateScope::route, 1, 1);
  p.route_allowlist = {"api"};
  build({p});
  EXPECT_TRUE(chains[1].empty());  // no rule applies to "web": no stage at all
  EXPECT_EQ(send("", "192.0.2.1", 0).verdict, Verdict::go);
  EXPECT_EQ(send("", "192.0.2.2", 0).verdict, Verdict::stop);  // route scope: one bucket
  EXPECT_EQ(send("", "192.0.2.1", 1).verdict, Verdict::go);
}

ScopedRateLimitParams tenant_rule(MissingKey missing) {
  ScopedRateLimitParams p = rule("tenant", RateScope::tenant, 1, 1);
  p.key = header("x-tenant");
  p.missing_key = missing;
  return p;
}

TEST_F(RateLimitStageTest, ARequestWithoutTheKeyIsCountedByItsClientByDefault) {
  EXPECT_EQ(ScopedRateLimitParams{}.missing_key, MissingKey::peer);
  build({tenant_rule(MissingKey::peer)});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::stop);
  EXPECT_EQ(send("", "192.0.2.2").verdict, Verdict::go);  // another anonymous client: its own
  // The tenant "192.0.2.1" is not the anonymous client 192.0.2.1.
  EXPECT_EQ(send("X-Tenant: 192.0.2.1\r\n", "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(limits->rules[0].state->table().live(), 3u);
}

TEST_F(RateLimitStageTest, ARouteRuleCountsEveryAnonymousClientOfTheRouteInOneBucket) {
  build({tenant_rule(MissingKey::route)});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(send("", "192.0.2.2").verdict, Verdict::stop);
  EXPECT_EQ(send("X-Tenant: t\r\n", "192.0.2.2").verdict, Verdict::go);  // a key: its own
  EXPECT_EQ(send("", "192.0.2.3", 1).verdict, Verdict::go);  // another route: another bucket
  EXPECT_EQ(limits->rules[0].state->table().live(), 3u);
}

TEST_F(RateLimitStageTest, TheRouteBucketIsTheRoutesNotTheUpstreamsNorTheSpellingOfItsHost) {
  build({tenant_rule(MissingKey::route)});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::go);  // the route a.example, to api
  chains[0] = chain(ups[0], RouteParams{.host = "b.example", .upstream = "api"});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::go);  // another route to api: its own
  chains[0] = chain(ups[0], RouteParams{.host = "A.EXAMPLE.", .upstream = "api"});
  EXPECT_EQ(send("", "192.0.2.1").verdict, Verdict::stop);  // a.example's, written otherwise
}

TEST_F(RateLimitStageTest, ASkipRuleLetsAnonymousRequestsThroughAndCountsThem) {
  build({tenant_rule(MissingKey::skip)});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send("").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: t\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: t\r\n").verdict, Verdict::stop);  // a key is still limited
  EXPECT_EQ(totals(0).skipped, 5u);
  EXPECT_EQ(totals(0).allowed, 1u);
  EXPECT_EQ(limits->rules[0].state->table().live(), 1u);
}

TEST_F(RateLimitStageTest, ASkippingRuleTakesNothingAndALaterRuleStillDecides) {
  build({tenant_rule(MissingKey::skip), rule("per-client", RateScope::client, 1, 1)});
  EXPECT_EQ(send("").verdict, Verdict::go);
  const Decision d = send("");
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_TRUE(contains(d.answer->bytes(false), "X-Floodgate-Limit: per-client\r\n"));
  EXPECT_EQ(totals(0).skipped, 2u);
}

TEST_F(RateLimitStageTest, TheBucketRefillsAtTheRulesRate) {
  build({rule("per-client", RateScope::client, 2, 1)});
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(send().verdict, Verdict::stop);
  now += 500ms;
  EXPECT_EQ(send().verdict, Verdict::go);
}

TEST_F(RateLimitStageTest, CheckingAKnownIdentityAllocatesNothing) {
  ScopedRateLimitParams tenant = rule("tenant", RateScope::tenant, 1000, 1000);
  tenant.key = header("x-tenant");
  build({rule("per-client", RateScope::client, 1000, 1000), tenant});
  send("X-Tenant: t\r\n");
  Exchange steady;
  steady.metrics = &metrics;
  steady.started = now;
  steady.head = parser->request_head();
  steady.request = {.method = "GET", .target = "/x", .path = "/x", .host = "example.com"};
  ConnectionFacts steady_conn{.peer = IpAddress::parse("192.0.2.1").value_or(IpAddress{}),
                              .peer_text = "192.0.2.1"};
  steady.conn = &steady_conn;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 100; ++i) {
    steady.cursor = 0;
    ASSERT_EQ(chains[0].run(steady, metrics).verdict, Verdict::go);
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

TEST(RateLimitSignature, KeepsBucketsAcrossNeutralChangesOnly) {
  ScopedRateLimitParams a = rule("r", RateScope::client, 10, 20);
  ScopedRateLimitParams b = a;
  b.mode = Mode::shadow;
  b.idle_ttl = 1s;
  b.route_allowlist = {"api"};
  EXPECT_EQ(RateLimits::signature(a), RateLimits::signature(b));
  b.requests_per_sec = 11;
  EXPECT_NE(RateLimits::signature(a), RateLimits::signature(b));
  ScopedRateLimitParams c = a;
  c.key = header("x-client");
  EXPECT_NE(RateLimits::signature(a), RateLimits::signature(c));
  ScopedRateLimitParams d = a;
  d.max_keys = 16;  // a table of another size: a new one
  EXPECT_NE(RateLimits::signature(a), RateLimits::signature(d));
}

}  // namespace
}  // namespace floodgate::proxy
