// Issue 13 on the request path's side: the retry eligibility rules one by one, what a
// configuration resolves to, and backend selection with circuit breakers (open backends
// skipped like down ones, half-open probes, when_all_open, alternates), on a manual clock.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/selection.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::proxy {
namespace {

using namespace std::chrono_literals;
using resilience::CircuitState;
using resilience::CircuitVerdict;

// -- Retry eligibility ------------------------------------------------------------------------

RetryCandidate retryable_get() {
  return RetryCandidate{
      Outcome::generated(Reason::upstream_connect_failed), HTTP_GET, false, false, false, 1};
}

TEST(RetryRule, AFailedBodylessGetMayBeRetried) {
  EXPECT_EQ(retry_rule(retryable_get()), NoRetry::none);
}

TEST(RetryRule, TimeoutsAndTransportFailuresAreRetryable) {
  for (const Reason r : {Reason::upstream_connect_failed, Reason::upstream_connect_timeout,
                         Reason::upstream_reset, Reason::upstream_timeout}) {
    RetryCandidate c = retryable_get();
    c.failure = Outcome::generated(r);
    EXPECT_EQ(retry_rule(c), NoRetry::none) << info(r).name;
  }
}

TEST(RetryRule, AProtocolFailureOrFloodgatesOwnRejectionIsTerminal) {
  for (const Reason r :
       {Reason::upstream_bad_response, Reason::buffers_exhausted, Reason::header_too_large,
        Reason::no_eligible_backend, Reason::circuit_open, Reason::proxy_overloaded}) {
    RetryCandidate c = retryable_get();
    c.failure = Outcome::generated(r);
    EXPECT_EQ(retry_rule(c), NoRetry::not_retryable) << info(r).name;
  }
}

TEST(RetryRule, OnlyIdempotentMethodsAreRetried) {
  for (const llhttp_method_t m :
       {HTTP_GET, HTTP_HEAD, HTTP_PUT, HTTP_DELETE, HTTP_OPTIONS, HTTP_TRACE}) {
    RetryCandidate c = retryable_get();
    c.method = m;
    EXPECT_EQ(retry_rule(c), NoRetry::none) << llhttp_method_name(m);
  }
  for (const llhttp_method_t m : {HTTP_POST, HTTP_PATCH, HTTP_CONNECT, HTTP_PROPFIND}) {
    RetryCandidate c = retryable_get();
    c.method = m;
    EXPECT_EQ(retry_rule(c), NoRetry::method) << llhttp_method_name(m);
  }
}

TEST(RetryRule, ARequestWithABodyIsNotRetried) {
  RetryCandidate c = retryable_get();
  c.method = HTTP_PUT;
  c.has_body = true;
  EXPECT_EQ(retry_rule(c), NoRetry::body);
}

TEST(RetryRule, ATunnelIsNotRetried) {
  RetryCandidate c = retryable_get();
  c.tunnel = true;
  EXPECT_EQ(retry_rule(c), NoRetry::tunnel);
}

TEST(RetryRule, NothingIsRetriedOnceTheClientHasResponseBytes) {
  RetryCandidate c = retryable_get();
  c.client_saw_bytes = true;  // a forwarded 1xx
  EXPECT_EQ(retry_rule(c), NoRetry::response_started);
}

TEST(RetryRule, AnExchangeRetriesOnce) {
  RetryCandidate c = retryable_get();
  c.attempts = 2;
  EXPECT_EQ(retry_rule(c), NoRetry::attempts_used);
}

TEST(RetryRule, ARequestThatNeverLeftFloodgateIsRetriedWhateverItsMethodAndBody) {
  for (const Reason r : {Reason::upstream_connect_failed, Reason::upstream_connect_timeout,
                         Reason::upstream_reset, Reason::upstream_tls_failed}) {
    for (const llhttp_method_t m : {HTTP_POST, HTTP_PATCH, HTTP_PROPFIND}) {
      RetryCandidate c = retryable_get();
      c.failure = Outcome::generated(r);
      c.method = m;
      c.has_body = true;
      c.unsent = true;
      EXPECT_EQ(retry_rule(c), NoRetry::none) << info(r).name << " " << llhttp_method_name(m);
    }
  }
}

TEST(RetryRule, AFailedTlsHandshakeIsTerminalOnceTheRequestMayHaveLeft) {
  RetryCandidate c = retryable_get();
  c.failure = Outcome::generated(Reason::upstream_tls_failed);
  EXPECT_EQ(retry_rule(c), NoRetry::not_retryable);
}

TEST(RetryRule, AnUnsentRequestKeepsTheOtherRules) {
  RetryCandidate c = retryable_get();
  c.unsent = true;
  c.failure = Outcome::generated(Reason::upstream_bad_response);
  EXPECT_EQ(retry_rule(c), NoRetry::not_retryable);
  c = retryable_get();
  c.unsent = true;
  c.tunnel = true;
  EXPECT_EQ(retry_rule(c), NoRetry::tunnel);
  c = retryable_get();
  c.unsent = true;
  c.attempts = 2;
  EXPECT_EQ(retry_rule(c), NoRetry::attempts_used);
}

// -- What a configuration resolves to --------------------------------------------------------

TEST(FailurePolicyOf, FailureStatusesAreTheConfiguredOnes) {
  resilience::Params params;
  params.circuit_breaker.failure_statuses = {500, 503};
  const FailurePolicy p = FailurePolicy::of(params);
  EXPECT_TRUE(p.failure_status(500));
  EXPECT_TRUE(p.failure_status(503));
  EXPECT_FALSE(p.failure_status(502));
  EXPECT_FALSE(p.failure_status(404));
  EXPECT_FALSE(p.failure_status(200));
  EXPECT_EQ(circuit_verdict_of_status(p, 503), CircuitVerdict::failure);
  EXPECT_EQ(circuit_verdict_of_status(p, 429), CircuitVerdict::success);
}

TEST(FailurePolicyOf, TheDefaultsCountNoStatusAndFailOpen) {
  const FailurePolicy p = FailurePolicy::of(resilience::Params{});
  for (int status = 500; status < 600; ++status) EXPECT_FALSE(p.failure_status(status)) << status;
  EXPECT_EQ(p.when_all_open, resilience::WhenAllOpen::least_recently_failed);
  EXPECT_EQ(p.limits, resilience::CircuitLimits{});
}

TEST(FailurePolicyOf, HedgeMethodsAreTheNamedOnesExactly) {
  resilience::Params params;
  params.hedging.enabled = true;
  params.hedging.safe_methods = {"GET", "OPTIONS", "get", "BREW"};
  const FailurePolicy p = FailurePolicy::of(params);
  EXPECT_TRUE(p.hedging);
  EXPECT_EQ(p.hedge_methods, method_bit(HTTP_GET) | method_bit(HTTP_OPTIONS));
}

TEST(BackendFailure, OnlyTheBackendsOwnFailuresCountForItsBreaker) {
  EXPECT_TRUE(backend_failure(Reason::upstream_connect_failed));
  EXPECT_TRUE(backend_failure(Reason::upstream_connect_timeout));
  EXPECT_TRUE(backend_failure(Reason::upstream_reset));
  EXPECT_TRUE(backend_failure(Reason::upstream_timeout));
  EXPECT_TRUE(backend_failure(Reason::upstream_bad_response));
  EXPECT_FALSE(backend_failure(Reason::buffers_exhausted));
  EXPECT_FALSE(backend_failure(Reason::header_too_large));
  EXPECT_FALSE(backend_failure(Reason::bad_request));
}

// -- Selection -------------------------------------------------------------------------------

class Selecting : public ::testing::Test {
 protected:
  // A pool of `n` backends (round robin, equal weights), one breaker each.
  void build(std::size_t n, uint32_t cap = 0) {
    up_.params.name = "app";
    up_.params.balance = Balance::round_robin;
    up_.params.resilience.max_active_per_backend = cap;
    for (std::size_t i = 0; i < n; ++i) {
      const auto port = static_cast<uint16_t>(9000 + i);
      const Endpoint address{"127.0.0.1", port, "127.0.0.1:" + std::to_string(port)};
      up_.backends.push_back(std::make_shared<Backend>(
          address, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), port), 1,
          std::make_shared<resilience::CircuitBreaker>(policy_.limits)));
      up_.weights.push_back(1);
    }
    up_.apply_policy();
    balancer_.emplace(up_.params.balance, up_.weights, 7);
  }

  resilience::CircuitBreaker& breaker(std::size_t i) { return *up_.backends[i]->breaker; }

  // Opens backend i's circuit at the clock's now.
  void open(std::size_t i) {
    for (uint32_t f = 0; f < policy_.limits.failure_threshold; ++f) {
      breaker(i).record(breaker(i).try_pass(clock_.now()), CircuitVerdict::failure, clock_.now());
    }
    ASSERT_EQ(breaker(i).state(clock_.now()), CircuitState::open);
  }

  Selection primary() { return select_primary(up_, *balancer_, policy_, clock_.now()); }
  Selection alternate(uint32_t exclude) {
    return select_alternate(up_, *balancer_, policy_, clock_.now(), exclude);
  }

  ManualClock clock_;
  // The streak alone (min_requests 1, no rate rule), so that open() opens at once.
  FailurePolicy policy_ = [] {
    FailurePolicy p;
    p.limits = {.failure_threshold = 2,
                .min_requests = 1,
                .failure_rate_percent = 0,
                .open = 10s,
                .half_open_max_probes = 1};
    return p;
  }();
  Upstream up_;
  std::optional<Balancer> balancer_;
};

TEST_F(Selecting, AnOpenBackendIsSkipped) {
  build(2);
  open(0);
  for (int i = 0; i < 4; ++i) {
    const Selection s = primary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s.backend, 1);
  }
}

TEST_F(Selecting, WithBreakersOffAnOpenCircuitIsIgnored) {
  build(2);
  open(0);
  policy_.breakers = false;
  bool saw_zero = false;
  for (int i = 0; i < 4; ++i) saw_zero = saw_zero || primary().backend == 0;
  EXPECT_TRUE(saw_zero);
}

TEST_F(Selecting, InShadowModeAnOpenBackendStillGetsAttemptsThatRecordTheirVerdicts) {
  build(2);
  policy_.breakers_shadow = true;
  open(0);
  bool saw_zero = false;
  for (int i = 0; i < 4 && !saw_zero; ++i) {
    Selection s = primary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s.would_refuse, Reason::none) << "backend 1 is closed";
    if (s.backend != 0) continue;
    saw_zero = true;
    ASSERT_TRUE(s.pass) << "a forced pass: the verdict still counts";
    breaker(0).record(std::move(s.pass), CircuitVerdict::failure, clock_.now());
  }
  EXPECT_TRUE(saw_zero);
  EXPECT_EQ(breaker(0).streak(), policy_.limits.failure_threshold + 1);
}

TEST_F(Selecting, InShadowModeEveryCircuitOpenIsAWouldRefuseWhenRejectIsConfigured) {
  build(2);
  policy_.breakers_shadow = true;
  policy_.when_all_open = resilience::WhenAllOpen::reject;
  open(0);
  open(1);
  const Selection s = primary();
  ASSERT_TRUE(s) << "shadow mode refuses nothing";
  EXPECT_EQ(s.would_refuse, Reason::circuit_open);
}

TEST_F(Selecting, InShadowModeEveryCircuitOpenIsNoWouldRefuseWhenTheBreakersFailOpen) {
  build(2);
  policy_.breakers_shadow = true;
  open(0);
  open(1);
  const Selection s = primary();
  ASSERT_TRUE(s);
  EXPECT_EQ(s.would_refuse, Reason::none) << "enforce mode would have sent it on as well";
  EXPECT_FALSE(s.fail_open) << "shadow mode ignores the circuits: nothing failed open";
}

TEST_F(Selecting, InShadowModeAHalfOpenBackendsProbeStillDecides) {
  build(1);
  policy_.breakers_shadow = true;
  open(0);
  clock_.advance(10s);
  Selection probe = primary();
  ASSERT_TRUE(probe.pass.probe());
  Selection straggler = primary();  // no probe permit left: a forced pass, not a refusal
  ASSERT_TRUE(straggler);
  EXPECT_FALSE(straggler.pass.probe());
  breaker(0).record(std::move(probe.pass), CircuitVerdict::success, clock_.now());
  EXPECT_EQ(breaker(0).state(clock_.now()), CircuitState::closed);
}

TEST_F(Selecting, AHalfOpenBackendTakesOneProbeAtATime) {
  build(2);
  open(0);
  clock_.advance(10s);  // half-open
  std::vector<Selection> held;
  int probes = 0;
  for (int i = 0; i < 6; ++i) {
    Selection s = primary();
    ASSERT_TRUE(s);
    if (s.backend == 0) {
      EXPECT_TRUE(s.pass.probe());
      ++probes;
    }
    held.push_back(std::move(s));  // nothing ends: the probe permit stays out
  }
  EXPECT_EQ(probes, 1);
  held.clear();  // an attempt that ends without a verdict gives its permit back
  EXPECT_EQ(breaker(0).probes_in_flight(), 0U);
}

TEST_F(Selecting, EveryCircuitOpenIsCircuitOpenUntilTheFirstHalfOpenWhenRejectIsConfigured) {
  policy_.when_all_open = resilience::WhenAllOpen::reject;
  build(2);
  open(0);
  clock_.advance(3s);
  open(1);
  const Selection s = primary();
  EXPECT_FALSE(s);
  EXPECT_EQ(s.refusal, Reason::circuit_open);
  EXPECT_EQ(s.half_open_at, breaker(0).half_open_at());
  EXPECT_EQ(s.half_open_at - clock_.now(), 7s);
}

TEST_F(Selecting, EveryCircuitOpenFailsOpenToTheLeastRecentlyFailedByDefault) {
  ASSERT_EQ(policy_.when_all_open, resilience::WhenAllOpen::least_recently_failed);
  build(3);
  open(1);
  clock_.advance(1s);
  open(0);
  clock_.advance(1s);
  open(2);
  const Selection s = primary();
  ASSERT_TRUE(s);
  EXPECT_EQ(s.backend, 1);
  EXPECT_FALSE(s.pass.probe());
  EXPECT_TRUE(s.fail_open) << "counted in floodgate_circuit_fail_open_total";
}

TEST_F(Selecting, AOneBackendPoolWithAnOpenCircuitKeepsGettingRequests) {
  build(1);
  open(0);
  for (int i = 0; i < 3; ++i) {
    Selection s = primary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s.backend, 0);
    EXPECT_TRUE(s.fail_open);
    breaker(0).record(std::move(s.pass), CircuitVerdict::failure, clock_.now());
  }
  EXPECT_EQ(breaker(0).state(clock_.now()), CircuitState::open);
  clock_.advance(10s);
  const Selection probe = primary();
  EXPECT_TRUE(probe.pass.probe()) << "the half-open probe still comes first";
  EXPECT_FALSE(probe.fail_open);
  const Selection beside = primary();  // the one permit is out: fails open beside the probe
  ASSERT_TRUE(beside);
  EXPECT_TRUE(beside.fail_open);
}

TEST_F(Selecting, ASelectionWithAClosedOrHalfOpenBackendIsNotAFailOpen) {
  build(2);
  open(0);
  EXPECT_FALSE(primary().fail_open);
  clock_.advance(10s);
  open(1);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(primary().fail_open);
}

TEST_F(Selecting, DownBackendsAreNoHealthyBackendWhateverTheirCircuits) {
  build(2);
  open(0);
  for (const auto& b : up_.backends) b->health->down.store(true);
  EXPECT_EQ(primary().refusal, Reason::no_healthy_backend);
}

TEST_F(Selecting, BackendsAtTheirCapAreNoEligibleBackend) {
  build(2, 1);
  std::vector<Selection> held;
  held.push_back(primary());
  held.push_back(primary());
  ASSERT_TRUE(held[0] && held[1]);
  EXPECT_EQ(primary().refusal, Reason::no_eligible_backend);
}

TEST_F(Selecting, AnAlternateIsAnotherBackendWithAClosedCircuit) {
  build(3);
  open(1);
  for (int i = 0; i < 6; ++i) {
    const Selection s = alternate(0);
    ASSERT_TRUE(s);
    EXPECT_EQ(s.backend, 2);
  }
  clock_.advance(10s);  // backend 1 half-open: not an alternate (a probe is a first attempt's)
  EXPECT_EQ(alternate(0).backend, 2);
  EXPECT_EQ(breaker(1).probes_in_flight(), 0U);
}

TEST_F(Selecting, NoAlternateIsAnEmptySelection) {
  build(2);
  open(1);
  const Selection s = alternate(0);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.refusal, Reason::none);
}

TEST_F(Selecting, ASelectionCountsItsAttemptInTheBackendsLoadUntilItEnds) {
  build(1);
  {
    const Selection s = primary();
    ASSERT_TRUE(s);
    EXPECT_EQ(up_.backends[0]->load.active.load(), 1);
  }
  EXPECT_EQ(up_.backends[0]->load.active.load(), 0);
}

}  // namespace
}  // namespace floodgate::proxy
