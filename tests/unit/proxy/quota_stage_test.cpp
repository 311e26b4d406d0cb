// The quota stage on a route's chain with the in-memory backend: exhausted windows answer 429
// with the policy's name and Retry-After until the window ends, a denial counts in no window,
// identities are counted apart and must resolve (or are skipped, or stood in for by the client's
// address, as missing_key says), shadow mode counts and lets the request on,
// policies run in order and an enforced denial stops them, a full table is a backend failure for
// backend_failure_policy, and a request that passes allocates nothing. (The Redis backend runs
// end to end against a real Redis: tests/integration/test_quota.py.)
#include "floodgate/proxy/quota_stage.h"

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
using resilience::BackendFailurePolicy;
using resilience::KeySource;
using resilience::MissingKey;
using resilience::Mode;
using resilience::QuotaParams;
using resilience::QuotaPolicyParams;
using resilience::QuotaWindow;
using Verdict = Decision::Verdict;

QuotaPolicyParams policy(std::string name, std::optional<QuotaWindow> burst,
                         std::optional<QuotaWindow> sustained = std::nullopt) {
  QuotaPolicyParams p;
  p.name = std::move(name);
  p.selector.tenant = {.kind = KeySource::Kind::header, .name = "x-tenant"};
  p.burst = burst;
  p.sustained = sustained;
  return p;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

class QuotaStageTest : public ::testing::Test {
 protected:
  QuotaStageTest() {
    for (uint32_t i = 0; i < 2; ++i) {
      ups[i].id = i;
      ups[i].params.name = i == 0 ? "api" : "web";
    }
  }

  void build(std::vector<QuotaPolicyParams> policies, Mode enforcement = Mode::enforce,
             BackendFailurePolicy failure = BackendFailurePolicy::fail_closed) {
    QuotaParams q;
    q.enabled = true;
    q.enforcement = enforcement;
    q.backend_failure_policy = failure;
    q.policies = std::move(policies);
    std::vector<std::shared_ptr<QuotaPolicyCounts>> counts;
    for (std::size_t i = 0; i < q.policies.size(); ++i) {
      counts.push_back(std::make_shared<QuotaPolicyCounts>(1));
    }
    quota = build_quota(q, {}, state, std::move(counts));
    for (uint32_t i = 0; i < 2; ++i) {
      std::vector<std::unique_ptr<const Stage>> stages;
      add_quota_stage(stages, ups[i], quota);
      chains[i] = Chain(std::move(stages));
    }
  }

  // A request with the header fields `fields`, to upstream `up`, from `peer`.
  Decision send(std::string_view fields = "X-Tenant: a\r\n", uint32_t up = 0,
                std::string_view peer = "192.0.2.1") {
    text = "GET /x HTTP/1.1\r\nHost: example.com\r\n" + std::string(fields) + "\r\n";
    ex.reset();  // before the parser its head points to
    parser = std::make_unique<http::Parser>(http::Parser::Kind::request);
    parser->begin(text.data(), fields_.get(), http::HeadLimits{});
    EXPECT_EQ(parser->parse_head(text.size()), http::Parser::Result::head_done);
    ex = std::make_unique<Exchange>();
    ex->quota.ex = ex.get();
    ex->metrics = &metrics;
    ex->started = now;
    ex->head = parser->request_head();
    ex->up = &ups[up];
    ex->request = {.method = "GET", .target = "/x", .path = "/x", .host = "example.com"};
    conn = std::make_unique<ConnectionFacts>();  // each request on a connection of its own
    conn->peer = IpAddress::parse(peer).value_or(IpAddress{});
    conn->peer_text = peer;
    ex->conn = conn.get();
    return chains[up].run(*ex, metrics);
  }

  uint64_t count(std::size_t policy, QuotaOutcome o) const {
    return quota->policies[policy].counts->total(o);
  }

  std::array<Upstream, 2> ups;
  std::shared_ptr<QuotaState> state = std::make_shared<QuotaState>(1);
  std::shared_ptr<const Quota> quota;
  std::array<Chain, 2> chains;
  ReactorMetrics metrics{2};
  // On a window boundary of every window length used here (10 s, 100 s).
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1h;
  std::string text;
  std::unique_ptr<http::HeaderField[]> fields_ =
      std::make_unique<http::HeaderField[]>(http::HeadLimits{}.max_headers);
  std::unique_ptr<http::Parser> parser;
  std::unique_ptr<ConnectionFacts> conn;
  std::unique_ptr<Exchange> ex;
};

TEST_F(QuotaStageTest, AnExhaustedBurstAnswers429WithThePolicyAndRetryAfterUntilTheWindowEnds) {
  build({policy("tenants", QuotaWindow{.requests = 3, .window = 10s})});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send().verdict, Verdict::go);
  now += 4s;
  const Decision d = send();
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::burst_quota_exhausted);
  EXPECT_EQ(d.retry_after, 6u);  // the window ends 6 s later
  EXPECT_EQ(d.extra, "X-Floodgate-Quota: tenants\r\n");
  EXPECT_EQ(*ex->quota_by, "tenants");
  EXPECT_EQ(count(0, QuotaOutcome::allowed), 3u);
  EXPECT_EQ(count(0, QuotaOutcome::burst_quota_exhausted), 1u);
  EXPECT_EQ(state->total(QuotaMode::in_memory), 4u);
  now += 6s;  // the next window
  EXPECT_EQ(send().verdict, Verdict::go);
}

TEST_F(QuotaStageTest, ADenialCountsInNeitherWindow) {
  build({policy("tenants", QuotaWindow{.requests = 2, .window = 10s},
                QuotaWindow{.requests = 3, .window = 100s})});
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(send().verdict, Verdict::go);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send().reason, Reason::burst_quota_exhausted);
  now += 10s;  // a new burst window; the sustained one has counted 2 of its 3
  EXPECT_EQ(send().verdict, Verdict::go);
  const Decision d = send();
  EXPECT_EQ(d.reason, Reason::sustained_quota_exhausted);
  EXPECT_EQ(d.retry_after, 90u);
}

TEST_F(QuotaStageTest, IdentitiesAreCountedApart) {
  build({policy("tenants", QuotaWindow{.requests = 1, .window = 10s})});
  EXPECT_EQ(send("X-Tenant: a\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: a\r\n").verdict, Verdict::stop);
  EXPECT_EQ(send("X-Tenant: b\r\n").verdict, Verdict::go);
  EXPECT_EQ(quota->table->live(), 2u);
}

TEST_F(QuotaStageTest, AMissingOrOverlongIdentityIsRefusedWithoutAFallback) {
  build({policy("tenants", QuotaWindow{.requests = 5, .window = 10s})});
  Decision d = send("");
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::selector_identity_missing);
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->bytes(false), "HTTP/1.1 429 ")) << d.answer->bytes(false);
  EXPECT_TRUE(contains(d.answer->bytes(false), "X-Floodgate-Quota: tenants\r\n"));
  EXPECT_EQ(send("X-Tenant: " + std::string(256, 'x') + "\r\n").verdict, Verdict::go);
  d = send("X-Tenant: " + std::string(257, 'x') + "\r\n");
  EXPECT_EQ(d.reason, Reason::selector_identity_invalid);
  EXPECT_EQ(count(0, QuotaOutcome::selector_identity_missing), 1u);
  EXPECT_EQ(count(0, QuotaOutcome::selector_identity_invalid), 1u);
}

TEST_F(QuotaStageTest, RefuseIsTheDefaultForAMissingIdentity) {
  EXPECT_EQ(QuotaPolicyParams{}.missing_key, MissingKey::refuse);
}

TEST_F(QuotaStageTest, ASkippingPolicyLetsARequestWithoutTheIdentityThroughUncounted) {
  QuotaPolicyParams p = policy("tenants", QuotaWindow{.requests = 1, .window = 10s});
  p.missing_key = MissingKey::skip;
  build({p});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send("").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: a\r\n").verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: a\r\n").reason, Reason::burst_quota_exhausted);
  EXPECT_EQ(count(0, QuotaOutcome::skipped), 3u);
  EXPECT_EQ(count(0, QuotaOutcome::selector_identity_missing), 0u);
  EXPECT_EQ(quota->table->live(), 1u);
  EXPECT_EQ(label(QuotaOutcome::skipped), "skipped");
}

TEST_F(QuotaStageTest, APeerPolicyCountsARequestWithoutTheIdentityByItsClient) {
  QuotaPolicyParams p = policy("tenants", QuotaWindow{.requests = 1, .window = 10s});
  p.missing_key = MissingKey::peer;
  build({p});
  EXPECT_EQ(send("", 0, "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(send("", 0, "192.0.2.1").reason, Reason::burst_quota_exhausted);
  EXPECT_EQ(send("", 0, "192.0.2.2").verdict, Verdict::go);  // another client: its own count
  // The tenant "192.0.2.1" is not the anonymous client 192.0.2.1.
  EXPECT_EQ(send("X-Tenant: 192.0.2.1\r\n", 0, "192.0.2.1").verdict, Verdict::go);
  EXPECT_EQ(quota->table->live(), 3u);
}

TEST_F(QuotaStageTest, ShadowModeCountsTheWouldBeDenialAndLetsTheRequestOn) {
  build({policy("tenants", QuotaWindow{.requests = 1, .window = 10s})}, Mode::shadow);
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(send().verdict, Verdict::go);
  EXPECT_EQ(ex->would_reject, Reason::burst_quota_exhausted);
  EXPECT_EQ(ex->would_reject_stage, StageId::quota);
  EXPECT_EQ(*ex->quota_by, "tenants");
  EXPECT_EQ(count(0, QuotaOutcome::burst_quota_exhausted), 1u);
  EXPECT_EQ(
      metrics.shadow_rejections(stage_reason_index(StageId::quota, Reason::burst_quota_exhausted))
          .value(),
      1u);
}

TEST_F(QuotaStageTest, PoliciesRunInOrderAndAnEnforcedDenialStopsTheLaterOnes) {
  build({policy("first", QuotaWindow{.requests = 2, .window = 10s}),
         policy("second", QuotaWindow{.requests = 5, .window = 10s})});
  for (int i = 0; i < 2; ++i) EXPECT_EQ(send().verdict, Verdict::go);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send().verdict, Verdict::stop);
  EXPECT_EQ(*ex->quota_by, "first");
  EXPECT_EQ(count(1, QuotaOutcome::allowed), 2u);  // never reached by the three refused
}

TEST_F(QuotaStageTest, AnAllowlistedPolicyLeavesOtherRoutesAlone) {
  QuotaPolicyParams p = policy("api-only", QuotaWindow{.requests = 1, .window = 10s});
  p.route_allowlist = {"api"};
  build({p});
  EXPECT_TRUE(chains[1].empty());
  EXPECT_EQ(send("X-Tenant: a\r\n", 0).verdict, Verdict::go);
  EXPECT_EQ(send("X-Tenant: a\r\n", 0).verdict, Verdict::stop);
  EXPECT_EQ(send("X-Tenant: a\r\n", 1).verdict, Verdict::go);
}

TEST_F(QuotaStageTest, AFullTableIsABackendFailureForTheFailurePolicy) {
  build({policy("tenants", QuotaWindow{.requests = 5, .window = 100s})});
  for (uint32_t i = 0; i < resilience::QuotaTable::kInMemoryBuckets; ++i) {
    ASSERT_EQ(send("X-Tenant: t" + std::to_string(i) + "\r\n").verdict, Verdict::go) << i;
  }
  const Decision d = send("X-Tenant: one-too-many\r\n");
  ASSERT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::backend_unavailable);
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->bytes(false), "HTTP/1.1 503 ")) << d.answer->bytes(false);
  EXPECT_TRUE(contains(d.answer->bytes(false), "Retry-After: 1\r\n"));
  EXPECT_EQ(state->total(QuotaMode::failed), 1u);
  EXPECT_EQ(send("X-Tenant: t7\r\n").verdict, Verdict::go);  // known identities go on

  build({policy("tenants", QuotaWindow{.requests = 5, .window = 100s})}, Mode::enforce,
        BackendFailurePolicy::fail_open);
  EXPECT_EQ(send("X-Tenant: one-too-many\r\n").verdict, Verdict::go);
  EXPECT_EQ(*ex->quota_by, "tenants");
  EXPECT_EQ(count(0, QuotaOutcome::backend_unavailable), 1u);

  now += 100s;  // every window has ended: the sweep frees the table
  state->sweep(now);
  EXPECT_EQ(quota->table->live(), 0u);
  EXPECT_EQ(send("X-Tenant: one-too-many\r\n").verdict, Verdict::go);
}

TEST_F(QuotaStageTest, CheckingAKnownIdentityAllocatesNothing) {
  build({policy("first", QuotaWindow{.requests = 1000, .window = 10s}),
         policy("second", QuotaWindow{.requests = 1000, .window = 10s},
                QuotaWindow{.requests = 1000, .window = 100s})});
  send();
  Exchange steady;
  steady.quota.ex = &steady;
  steady.metrics = &metrics;
  steady.started = now;
  steady.head = parser->request_head();
  steady.up = &ups[0];
  steady.request = {.method = "GET", .target = "/x", .path = "/x", .host = "example.com"};
  ConnectionFacts steady_conn{.peer = IpAddress::parse("192.0.2.1").value_or(IpAddress{}),
                              .peer_text = "192.0.2.1"};
  steady.conn = &steady_conn;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 100; ++i) {
    steady.cursor = 0;
    steady.quota.next = 0;
    ASSERT_EQ(chains[0].run(steady, metrics).verdict, Verdict::go);
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

}  // namespace
}  // namespace floodgate::proxy
