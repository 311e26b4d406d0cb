// The circuit breaker (resilience::CircuitBreaker): its state machine driven by a ManualClock,
// what stragglers and abandoned probes do, reloads, the transition counters and the time
// observers, and that its per-request calls allocate nothing. The races are in
// circuit_breaker_race_test.cpp.
#include "floodgate/resilience/circuit_breaker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "circuit_breaker_fixture.h"
#include "floodgate/core/clock.h"
#include "floodgate/core/heap_count.h"

namespace floodgate::resilience {
namespace {

using namespace breaker_test;

// --- closed -> open ---

TEST(CircuitBreaker, StartsClosedAndLetsEveryAttemptThroughAsRegular) {
  Fixture f;
  EXPECT_EQ(f.state(), closed);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(f.pass().kind(), Kind::regular);
  EXPECT_EQ(f.breaker.streak(), 0u);
}

TEST(CircuitBreaker, OpensAfterExactlyFailureThresholdConsecutiveFailures) {
  Fixture f(limits(3, 30s));
  f.fail(2);
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.streak(), 2u);
  f.fail();
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.streak(), 3u);
}

TEST(CircuitBreaker, ASuccessWhileClosedResetsTheStreak) {
  Fixture f(limits(3, 30s));
  f.fail(2);
  f.succeed();
  EXPECT_EQ(f.breaker.streak(), 0u);
  f.fail(2);
  EXPECT_EQ(f.state(), closed);
  f.fail();
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, AThresholdOfOneOpensOnTheFirstFailure) {
  Fixture f(limits(1, 30s));
  f.fail();
  EXPECT_EQ(f.state(), open);
}

// --- open -> half_open ---

TEST(CircuitBreaker, RefusesEveryAttemptWhileOpen) {
  Fixture f(limits(1, 30s));
  f.fail();
  for (int i = 0; i < 10; ++i) {
    f.clock.advance(1s);
    EXPECT_FALSE(f.pass());
  }
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, TheFirstAttemptOnceTheOpenPeriodHasPassedIsAProbe) {
  Fixture f(limits(1, 30s));
  f.fail();
  f.clock.advance(30s - 1ns);
  EXPECT_FALSE(f.pass());
  f.clock.advance(1ns);
  const CircuitPass probe = f.pass();
  EXPECT_EQ(probe.kind(), Kind::probe);
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
  EXPECT_EQ(f.state(), half_open);
}

TEST(CircuitBreaker, HalfOpenLetsOneProbeThroughAtATimeByDefault) {
  Fixture f(limits(1, 30s));
  f.open_then_wait();
  CircuitPass first = f.pass();
  EXPECT_TRUE(first.probe());
  EXPECT_FALSE(f.pass());
  EXPECT_FALSE(f.pass());
  f.breaker.abandon(std::move(first));
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, HalfOpenLetsAtMostMaxProbesThroughAtOnce) {
  Fixture f(limits(1, 30s, 3));
  f.open_then_wait();
  std::vector<CircuitPass> probes;
  probes.reserve(3);
  for (int i = 0; i < 3; ++i) probes.push_back(f.pass());
  for (const CircuitPass& p : probes) EXPECT_TRUE(p.probe());
  EXPECT_FALSE(f.pass());
  EXPECT_EQ(f.breaker.probes_in_flight(), 3u);
  f.breaker.abandon(std::move(probes[1]));
  EXPECT_TRUE(f.pass().probe());  // and gives it back at once
  EXPECT_EQ(f.breaker.probes_in_flight(), 2u);
}

// --- how a half-open period ends ---

TEST(CircuitBreaker, ASuccessfulProbeClosesTheCircuitAndResetsTheStreak) {
  Fixture f(limits(2, 30s));
  f.open_then_wait();
  f.breaker.record(f.pass(), kSuccess, f.clock.now());
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.streak(), 0u);
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
  f.fail();
  EXPECT_EQ(f.state(), closed);  // a fresh streak: threshold 2 again
}

TEST(CircuitBreaker, AFailedProbeReopensForAFullOpenPeriodFromTheFailure) {
  Fixture f(limits(1, 30s));
  f.open_then_wait();
  CircuitPass probe = f.pass();
  f.clock.advance(5s);  // the probe's attempt took 5 s
  const Clock::time_point failed_at = f.clock.now();
  f.breaker.record(std::move(probe), kFailure, failed_at);
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.half_open_at(), failed_at + 30s);
  f.clock.set(failed_at + 30s - 1ns);
  EXPECT_FALSE(f.pass());
  f.clock.set(failed_at + 30s);
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, AnAbandonedProbeFreesItsPermitAndLeavesTheCircuitHalfOpen) {
  Fixture f(limits(1, 30s));
  f.open_then_wait();
  f.breaker.abandon(f.pass());
  EXPECT_EQ(f.state(), half_open);
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
  EXPECT_EQ(f.breaker.transitions(half_open, open), 0u);
  EXPECT_EQ(f.breaker.transitions(half_open, closed), 0u);
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, DestroyingAProbeThatWasNeitherRecordedNorAbandonedAbandonsIt) {
  Fixture f(limits(1, 30s));
  f.open_then_wait();
  { const CircuitPass probe = f.pass(); }
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
  EXPECT_EQ(f.state(), half_open);
}

TEST(CircuitBreaker, MovingAProbeMovesItsPermit) {
  Fixture f(limits(1, 30s));
  f.open_then_wait();
  CircuitPass a = f.pass();
  CircuitPass b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is refused
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
  a = std::move(b);
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
  a = CircuitPass();  // assigning over a probe abandons it
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
}

TEST(CircuitBreaker, ARecordedPassIsEmptyAfterwards) {
  Fixture f;
  CircuitPass pass = f.pass();
  f.breaker.record(std::move(pass), kFailure, f.clock.now());
  EXPECT_FALSE(pass);                                          // NOLINT(bugprone-use-after-move)
  f.breaker.record(std::move(pass), kFailure, f.clock.now());  // NOLINT: records nothing
  EXPECT_EQ(f.breaker.streak(), 1u);
}

// --- stragglers: passes that outlived the state that issued them ---

TEST(CircuitBreaker, AFailureAdmittedBeforeTheOpeningDoesNotExtendTheOpenPeriod) {
  Fixture f(limits(2, 30s));
  CircuitPass straggler = f.pass();
  f.fail(2);
  const Clock::time_point half_open_at = f.breaker.half_open_at();
  f.clock.advance(10s);
  f.breaker.record(std::move(straggler), kFailure, f.clock.now());
  EXPECT_EQ(f.breaker.half_open_at(), half_open_at);
  EXPECT_EQ(f.breaker.last_failure(), f.clock.now());
  EXPECT_EQ(f.breaker.streak(), 3u);
  EXPECT_EQ(f.breaker.transitions(closed, open), 1u);
}

TEST(CircuitBreaker, ASuccessAdmittedBeforeTheOpeningDoesNotCloseAHalfOpenCircuit) {
  Fixture f(limits(1, 30s));
  CircuitPass straggler = f.pass();
  f.open_then_wait();
  const CircuitPass probe = f.pass();
  f.breaker.record(std::move(straggler), kSuccess, f.clock.now());
  EXPECT_EQ(f.state(), half_open);
  EXPECT_EQ(f.breaker.streak(), 1u);
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
}

TEST(CircuitBreaker, AFailureAdmittedBeforeTheOpeningDoesNotReopenAHalfOpenCircuit) {
  Fixture f(limits(1, 30s));
  CircuitPass straggler = f.pass();
  f.open_then_wait();
  const CircuitPass probe = f.pass();
  f.breaker.record(std::move(straggler), kFailure, f.clock.now());
  EXPECT_EQ(f.state(), half_open);
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
  EXPECT_EQ(f.breaker.transitions(half_open, open), 0u);
}

TEST(CircuitBreaker, AProbeOfAnEndedPeriodHoldsNoPermitInTheNext) {
  Fixture f(limits(1, 30s, 2));
  f.open_then_wait();
  CircuitPass old_probe = f.pass();
  f.breaker.record(f.pass(), kFailure, f.clock.now());  // the other probe reopens it
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
  f.clock.advance(30s);
  CircuitPass new_probe = f.pass();
  EXPECT_TRUE(new_probe.probe());
  f.breaker.abandon(std::move(old_probe));  // must not give back new_probe's permit
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
}

TEST(CircuitBreaker, ASuccessfulProbeOfAnEndedPeriodDoesNotCloseTheNext) {
  Fixture f(limits(1, 30s, 2));
  f.open_then_wait();
  CircuitPass old_probe = f.pass();
  f.breaker.record(f.pass(), kFailure, f.clock.now());
  f.clock.advance(30s);
  const CircuitPass new_probe = f.pass();
  f.breaker.record(std::move(old_probe), kSuccess, f.clock.now());
  EXPECT_EQ(f.state(), half_open);
  EXPECT_EQ(f.breaker.probes_in_flight(), 1u);
}

TEST(CircuitBreaker, AProbeRecordedAfterAnotherClosedTheCircuitCountsAsClosedTraffic) {
  Fixture f(limits(2, 30s, 2));
  f.open_then_wait();
  CircuitPass late = f.pass();
  f.breaker.record(f.pass(), kSuccess, f.clock.now());
  f.breaker.record(std::move(late), kFailure, f.clock.now());
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.streak(), 1u);
}

TEST(CircuitBreaker, ARefusedPassRecordsNothing) {
  Fixture f(limits(1, 30s));
  f.fail();
  const uint32_t streak = f.breaker.streak();
  const Clock::time_point last = f.breaker.last_failure();
  f.clock.advance(1s);
  CircuitPass refused = f.pass();
  ASSERT_FALSE(refused);
  f.breaker.record(std::move(refused), kFailure, f.clock.now());
  EXPECT_EQ(f.breaker.streak(), streak);
  EXPECT_EQ(f.breaker.last_failure(), last);
}

// --- observers ---

TEST(CircuitBreaker, StateReadsHalfOpenOnceTheOpenPeriodHasPassedBeforeAnyAttempt) {
  Fixture f(limits(1, 30s));
  f.fail();
  f.clock.advance(29s);
  EXPECT_EQ(f.state(), open);
  f.clock.advance(1s);
  EXPECT_EQ(f.state(), half_open);
  EXPECT_EQ(f.breaker.transitions(open, half_open), 0u);  // the word moves on the next pass
}

TEST(CircuitBreaker, HalfOpenAtIsWhenTheOpeningFailureWasRecordedPlusTheOpenPeriod) {
  Fixture f(limits(2, 30s));
  f.fail();
  f.clock.advance(3s);
  const Clock::time_point opened_at = f.clock.now();
  f.fail();
  EXPECT_EQ(f.breaker.half_open_at(), opened_at + 30s);
}

TEST(CircuitBreaker, NeverOpenedOrNeverFailedReadsAsTheClocksEpoch) {
  const Fixture f;
  EXPECT_EQ(f.breaker.half_open_at(), Clock::time_point{});
  EXPECT_EQ(f.breaker.last_failure(), Clock::time_point{});
}

TEST(CircuitBreaker, LastFailureIsTheLatestRecordedFailureAndNeverMovesBack) {
  Fixture f(limits(10, 30s));
  f.fail();
  f.clock.advance(2s);
  const Clock::time_point latest = f.clock.now();
  f.fail();
  f.breaker.record(f.pass(), kFailure, latest - 1s);  // a reactor whose loop time lags
  EXPECT_EQ(f.breaker.last_failure(), latest);
  f.clock.advance(1s);
  f.succeed();
  EXPECT_EQ(f.breaker.last_failure(), latest);
}

TEST(CircuitBreaker, TransitionCountersCountEveryTransitionOnce) {
  Fixture f(limits(2, 30s, 2));
  f.open_then_wait();                                       // closed -> open
  CircuitPass a = f.pass();                                 // open -> half_open
  CircuitPass b = f.pass();                                 // a second probe: no transition
  f.breaker.record(std::move(a), kFailure, f.clock.now());  // half_open -> open
  f.breaker.record(std::move(b), kFailure, f.clock.now());  // a straggler: none
  f.clock.advance(30s);
  f.breaker.record(f.pass(), kSuccess, f.clock.now());  // open -> half_open -> closed
  f.open_then_wait();                                   // closed -> open
  EXPECT_EQ(f.breaker.transitions(closed, open), 2u);
  EXPECT_EQ(f.breaker.transitions(open, half_open), 2u);
  EXPECT_EQ(f.breaker.transitions(half_open, open), 1u);
  EXPECT_EQ(f.breaker.transitions(half_open, closed), 1u);
  EXPECT_EQ(f.breaker.transitions(closed, half_open), 0u);
  EXPECT_EQ(f.breaker.transitions(open, closed), 0u);
  EXPECT_EQ(f.breaker.transitions(open, open), 0u);
}

// --- the window: min_requests and the failure rate (issue 35) ---

TEST(CircuitBreaker, TheDefaultsDoNotOpenOnThreeFailuresOfOneClient) {
  Fixture f{CircuitLimits{}};
  f.fail(9);
  EXPECT_EQ(f.state(), closed) << "nine failures are fewer than min_requests = 10";
  f.fail();
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, DoesNotOpenBeforeMinRequestsVerdictsWhateverTheStreak) {
  Fixture f(window_limits(10, 50, 3));
  f.fail(9);
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.streak(), 9u);
  const CircuitTransition t = f.fail();
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(t.opened_by, OpenedBy::streak);
  EXPECT_EQ(t.window, (FailureWindow::Counts{.requests = 10, .failures = 10}));
}

TEST(CircuitBreaker, OpensWhenTheFailuresReachTheRateOfTheWindowsVerdicts) {
  Fixture f(window_limits(10, 50, 100));
  f.succeed(5);
  f.fail(4);
  EXPECT_EQ(f.state(), closed);
  const CircuitTransition t = f.fail();
  ASSERT_TRUE(t);
  EXPECT_EQ(t.from, closed);
  EXPECT_EQ(t.to, open);
  EXPECT_EQ(t.opened_by, OpenedBy::failure_rate);
  EXPECT_EQ(t.streak, 5u);
  EXPECT_EQ(t.window, (FailureWindow::Counts{.requests = 10, .failures = 5}));
}

TEST(CircuitBreaker, FailuresBelowTheRateAmongSuccessesNeverOpen) {
  Fixture f(window_limits(10, 50, 5));
  for (int i = 0; i < 200; ++i) {
    f.succeed(2);
    f.fail();
  }
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.transitions(closed, open), 0u);
}

TEST(CircuitBreaker, TheStreakOpensUnderTheRateOnceTheWindowHoldsMinRequests) {
  Fixture f(window_limits(10, 50, 5));
  f.succeed(20);
  f.fail(4);
  EXPECT_EQ(f.state(), closed);
  const CircuitTransition t = f.fail();
  EXPECT_EQ(t.opened_by, OpenedBy::streak);
  EXPECT_EQ(t.window, (FailureWindow::Counts{.requests = 25, .failures = 5}));
}

TEST(CircuitBreaker, ARateOfZeroLeavesTheStreakAlone) {
  Fixture f(window_limits(10, 0, 5));
  for (int i = 0; i < 20; ++i) {
    f.fail(4);
    f.succeed();
  }
  EXPECT_EQ(f.state(), closed) << "80% failed, never five in a row";
  f.fail(5);
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, VerdictsOlderThanTheWindowNoLongerCount) {
  Fixture f(window_limits(10, 50, 100));
  f.fail(9);
  f.clock.advance(10s);
  EXPECT_EQ(f.breaker.window(f.clock.now()), (FailureWindow::Counts{}));
  f.fail();
  EXPECT_EQ(f.state(), closed);
  EXPECT_EQ(f.breaker.window(f.clock.now()), (FailureWindow::Counts{.requests = 1, .failures = 1}));
}

TEST(CircuitBreaker, AClosingStartsTheWindowAfresh) {
  Fixture f(window_limits(10, 50, 100));
  f.fail(10);
  ASSERT_EQ(f.state(), open);
  f.clock.advance(30s);
  const CircuitTransition closing = f.succeed();
  EXPECT_EQ(closing.from, half_open);
  EXPECT_EQ(closing.to, closed);
  EXPECT_EQ(f.breaker.window(f.clock.now()), (FailureWindow::Counts{}));
  f.fail();
  EXPECT_EQ(f.state(), closed) << "the failures that opened it do not reopen it";
}

TEST(CircuitBreaker, VerdictsWhileOpenCountInTheWindow) {
  Fixture f(window_limits(10, 50, 100));
  f.fail(10);
  f.breaker.record(f.breaker.force_pass(), kSuccess, f.clock.now());
  f.breaker.record(f.breaker.force_pass(), kFailure, f.clock.now());
  EXPECT_EQ(f.breaker.window(f.clock.now()),
            (FailureWindow::Counts{.requests = 12, .failures = 11}));
  EXPECT_EQ(f.breaker.transitions(closed, open), 1u);
}

TEST(CircuitBreaker, AReloadKeepsTheWindowUnlessItsLengthChanges) {
  Fixture f(window_limits(10, 50, 100));
  f.fail(5);
  f.breaker.set_limits(window_limits(20, 60, 100));
  EXPECT_EQ(f.breaker.window(f.clock.now()), (FailureWindow::Counts{.requests = 5, .failures = 5}));
  CircuitLimits longer = window_limits(20, 60, 100);
  longer.window = 20s;
  f.breaker.set_limits(longer);
  EXPECT_EQ(f.breaker.window(f.clock.now()), (FailureWindow::Counts{}));
  EXPECT_EQ(f.breaker.limits(), longer);
}

TEST(CircuitBreaker, LoweredMinRequestsOpenAtTheNextFailure) {
  Fixture f(window_limits(10, 50, 100));
  f.fail(5);
  f.breaker.set_limits(window_limits(5, 50, 100));
  EXPECT_EQ(f.state(), closed);  // set_limits opens nothing
  f.fail();
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, RecordReportsOnlyTheTransitionsItMakes) {
  Fixture f(limits(2, 30s, 2));
  EXPECT_FALSE(f.fail());
  EXPECT_FALSE(f.succeed());
  f.fail();
  const CircuitTransition opening = f.fail();
  EXPECT_EQ(opening.from, closed);
  EXPECT_EQ(opening.to, open);
  EXPECT_EQ(opening.streak, 2u);
  f.clock.advance(30s);
  CircuitPass first = f.pass();
  CircuitPass second = f.pass();
  EXPECT_TRUE(first.half_opened()) << "this pass moved open -> half_open";
  EXPECT_FALSE(second.half_opened());
  const CircuitTransition reopening = f.breaker.record(std::move(first), kFailure, f.clock.now());
  EXPECT_EQ(reopening.from, half_open);
  EXPECT_EQ(reopening.to, open);
  EXPECT_EQ(reopening.opened_by, OpenedBy::none);
  EXPECT_FALSE(f.breaker.record(std::move(second), kFailure, f.clock.now())) << "a straggler";
}

// --- reloads ---

TEST(CircuitBreaker, AReloadKeepsTheStateAndTheStreak) {
  Fixture f(limits(2, 30s));
  f.fail(2);
  f.breaker.set_limits(limits(5, 10s, 4));
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.streak(), 2u);
  EXPECT_EQ(f.breaker.limits(), limits(5, 10s, 4));
}

TEST(CircuitBreaker, ARaisedThresholdKeepsAClosedCircuitClosedWithItsStreak) {
  Fixture f(limits(3, 30s));
  f.fail(2);
  f.breaker.set_limits(limits(5, 30s));
  EXPECT_EQ(f.breaker.streak(), 2u);
  f.fail(2);
  EXPECT_EQ(f.state(), closed);
  f.fail();
  EXPECT_EQ(f.state(), open);
}

TEST(CircuitBreaker, AThresholdLoweredBelowTheStreakOpensAtTheNextFailure) {
  Fixture f(limits(10, 30s));
  f.fail(5);
  f.breaker.set_limits(limits(3, 30s));
  EXPECT_EQ(f.state(), closed);  // set_limits opens nothing
  f.fail();
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.transitions(closed, open), 1u);
}

TEST(CircuitBreaker, AThresholdLoweredBelowTheStreakIsResetByASuccess) {
  Fixture f(limits(10, 30s));
  f.fail(5);
  f.breaker.set_limits(limits(3, 30s));
  f.succeed();
  f.fail(2);
  EXPECT_EQ(f.state(), closed);
}

TEST(CircuitBreaker, AChangedOpenAppliesToTheCurrentOpenPeriod) {
  Fixture f(limits(1, 30s));
  f.fail();
  const Clock::time_point opened_at = f.clock.now();
  f.breaker.set_limits(limits(1, 10s));
  EXPECT_EQ(f.breaker.half_open_at(), opened_at + 10s);
  f.clock.advance(10s);
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, ALengthenedOpenKeepsTheCurrentPeriodOpenLonger) {
  Fixture f(limits(1, 10s));
  f.fail();
  f.breaker.set_limits(limits(1, 60s));
  f.clock.advance(30s);
  EXPECT_FALSE(f.pass());
  f.clock.advance(30s);
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, ALoweredProbeLimitRevokesNoProbeAndRefusesNewOnes) {
  Fixture f(limits(1, 30s, 3));
  f.open_then_wait();
  std::vector<CircuitPass> probes;
  probes.reserve(3);
  for (int i = 0; i < 3; ++i) probes.push_back(f.pass());
  f.breaker.set_limits(limits(1, 30s, 1));
  EXPECT_EQ(f.breaker.probes_in_flight(), 3u);
  probes.pop_back();
  EXPECT_FALSE(f.pass());  // 2 out, limit 1
  probes.pop_back();
  EXPECT_FALSE(f.pass());  // 1 out, limit 1
  probes.pop_back();
  EXPECT_TRUE(f.pass().probe());
}

TEST(CircuitBreaker, ARaisedProbeLimitLetsMoreThroughAtOnce) {
  Fixture f(limits(1, 30s, 1));
  f.open_then_wait();
  const CircuitPass first = f.pass();
  EXPECT_FALSE(f.pass());
  f.breaker.set_limits(limits(1, 30s, 2));
  const CircuitPass second = f.pass();
  EXPECT_TRUE(second.probe());
  EXPECT_FALSE(f.pass());
}

TEST(CircuitBreaker, LimitsAreClampedIntoTheirRanges) {
  CircuitLimits low = limits(0, -1s, 0);
  low.min_requests = 0;
  const CircuitBreaker breaker(low);
  EXPECT_EQ(breaker.limits(), limits(1, 0s, 1));
  CircuitLimits high = limits(UINT32_MAX, 1s, UINT32_MAX);
  high.min_requests = UINT32_MAX;
  high.failure_rate_percent = 101;
  const CircuitBreaker big(high);
  CircuitLimits clamped = limits(CircuitBreaker::kMaxThreshold, 1s, CircuitBreaker::kMaxProbes);
  clamped.min_requests = CircuitBreaker::kMaxMinRequests;
  clamped.failure_rate_percent = 100;
  EXPECT_EQ(big.limits(), clamped);
}

TEST(CircuitBreaker, RefusedAttemptsWhileOpenAddNothingToTheStreak) {
  Fixture f(limits(1, 30s));
  f.fail();
  for (int i = 0; i < 5; ++i) f.fail();  // refused passes: nothing recorded
  EXPECT_EQ(f.breaker.streak(), 1u);
}

TEST(CircuitLimits, ComeFromTheParams) {
  const CircuitBreakerParams params{.failure_threshold = 7,
                                    .min_requests = 1,
                                    .failure_rate_percent = 0,
                                    .window = std::chrono::milliseconds(2500),
                                    .open = std::chrono::milliseconds(1500),
                                    .half_open_max_probes = 2};
  CircuitLimits expected = limits(7, 1500ms, 2);
  expected.window = 2500ms;
  EXPECT_EQ(circuit_limits(params), expected);
  EXPECT_EQ(CircuitLimits{}, circuit_limits(CircuitBreakerParams{}));
}

TEST(CircuitLimits, DefaultToTenRequestsHalfOfThemFailedOrFiveInARow) {
  const CircuitLimits l;
  EXPECT_EQ(l.min_requests, 10u);
  EXPECT_EQ(l.failure_rate_percent, 50u);
  EXPECT_EQ(l.failure_threshold, 5u);
  EXPECT_EQ(l.window, 10s);
  EXPECT_EQ(l.open, 30s);
}

TEST(CircuitBreaker, ThePerRequestCallsDoNotAllocate) {
  Fixture f(limits(2, 1s, 2));
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 100; ++i) {
    f.succeed();
    f.fail(2);
    f.clock.advance(1s);
    CircuitPass probe = f.pass();
    f.breaker.abandon(std::move(probe));
    f.breaker.record(f.pass(), i % 2 == 0 ? kSuccess : kFailure, f.clock.now());
    f.clock.advance(1s);
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

}  // namespace
}  // namespace floodgate::resilience
