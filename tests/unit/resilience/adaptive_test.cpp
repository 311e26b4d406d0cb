// Adaptive admission's AIMD controller on synthetic windows, what counts as a sample, and the
// limiter that feeds the controller once per window from per-reactor shards, on hand-moved time.
#include "floodgate/resilience/adaptive.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "floodgate/core/outcome.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr AimdLimits kLimits{.min = 64, .max = 512, .decrease_step = 16, .increase_step = 16};

AimdWindow healthy(uint32_t peak, uint64_t samples = 100) {
  return {.samples = samples, .bad = 0, .peak_in_flight = peak};
}
AimdWindow overloaded(uint32_t peak, uint64_t samples = 100) {
  return {.samples = samples, .bad = samples, .peak_in_flight = peak};
}

// --- The controller ---

TEST(AimdController, StartsAtItsMaximum) {
  EXPECT_EQ(AimdController(kLimits).ceiling(), 512u);
}

TEST(AimdController, ABadWindowLowersTheCeilingOnceAndTheNextWindowIsNotJudged) {
  AimdController c(kLimits);
  EXPECT_EQ(c.judge(overloaded(512)), AimdMove::decrease);
  EXPECT_EQ(c.ceiling(), 496u);
  EXPECT_EQ(c.judge(overloaded(496)), AimdMove::skipped);
  EXPECT_EQ(c.ceiling(), 496u);
  EXPECT_EQ(c.judge(overloaded(496)), AimdMove::decrease);
  EXPECT_EQ(c.ceiling(), 480u);
}

TEST(AimdController, ConvergesToTheMinimumUnderSustainedOverloadAndNeverGoesBelowIt) {
  AimdController c(kLimits);
  int decreases = 0;
  for (int i = 0; i < 200; ++i) {
    if (c.judge(overloaded(c.ceiling())) == AimdMove::decrease) ++decreases;
    EXPECT_GE(c.ceiling(), kLimits.min);
  }
  EXPECT_EQ(c.ceiling(), kLimits.min);
  EXPECT_EQ(decreases, (512 - 64) / 16);  // one step per decision, never two
}

TEST(AimdController, AStepThatWouldCrossTheMinimumStopsAtIt) {
  AimdController c({.min = 10, .max = 20, .decrease_step = 16, .increase_step = 16});
  EXPECT_EQ(c.judge(overloaded(20)), AimdMove::decrease);
  EXPECT_EQ(c.ceiling(), 10u);
}

TEST(AimdController, AHealthyWindowThatUsedHalfTheCeilingRaisesItUpToTheMaximum) {
  AimdController c(kLimits);
  for (int i = 0; i < 10; ++i) (void)c.judge(overloaded(512));  // five cuts: 432
  ASSERT_EQ(c.ceiling(), 432u);
  (void)c.judge(healthy(0));  // the window after the last cut is skipped
  EXPECT_EQ(c.judge(healthy(216)), AimdMove::increase);
  EXPECT_EQ(c.ceiling(), 448u);
  for (int i = 0; i < 100; ++i) (void)c.judge(healthy(c.ceiling()));
  EXPECT_EQ(c.ceiling(), 512u);  // never above the maximum
  EXPECT_EQ(c.judge(healthy(512)), AimdMove::hold);
}

TEST(AimdController, AHealthyWindowThatDidNotUseTheCeilingHoldsIt) {
  AimdController c(kLimits);
  (void)c.judge(overloaded(512));
  (void)c.judge(healthy(0));                         // skipped
  EXPECT_EQ(c.judge(healthy(247)), AimdMove::hold);  // 247 < 496 / 2
  EXPECT_EQ(c.ceiling(), 496u);
}

TEST(AimdController, AWindowWithTooFewSamplesIsNotJudgeable) {
  EXPECT_FALSE(AimdController::judgeable({.samples = AimdController::kMinSamples - 1}));
  EXPECT_TRUE(AimdController::judgeable({.samples = AimdController::kMinSamples}));
}

TEST(AimdController, ABadShareBelowTheThresholdIsHealthy) {
  AimdController c(kLimits);
  EXPECT_EQ(c.judge({.samples = 100, .bad = 24, .peak_in_flight = 0}), AimdMove::hold);
  EXPECT_EQ(c.judge({.samples = 100, .bad = 25, .peak_in_flight = 0}), AimdMove::decrease);
}

// Seventy per cent of capacity with 3% of requests randomly slow: windows of 40 to 400 samples
// (a low and a high rate), the ceiling in use. Never one cut, and the ceiling stays at its max.
TEST(AimdController, ThreePercentRandomSlowOutliersAtSeventyPercentLoadNeverCut) {
  std::mt19937_64 rng(14);
  std::bernoulli_distribution slow(0.03);
  for (const uint64_t per_window : {40u, 100u, 400u}) {
    AimdController c(kLimits);
    for (int window = 0; window < 20'000; ++window) {
      AimdWindow w{.samples = per_window, .bad = 0, .peak_in_flight = 358};  // 70% of 512
      for (uint64_t i = 0; i < per_window; ++i) w.bad += slow(rng) ? 1 : 0;
      ASSERT_NE(c.judge(w), AimdMove::decrease) << per_window << " per window, window " << window;
    }
    EXPECT_EQ(c.ceiling(), 512u);
  }
}

TEST(AimdController, AReloadKeepsTheCeilingClampedIntoTheNewRange) {
  AimdController c(kLimits);
  for (int i = 0; i < 10; ++i) (void)c.judge(overloaded(512));
  ASSERT_EQ(c.ceiling(), 432u);
  c.configure({.min = 64, .max = 256, .decrease_step = 16, .increase_step = 16});
  EXPECT_EQ(c.ceiling(), 256u);
  c.configure({.min = 300, .max = 1000, .decrease_step = 16, .increase_step = 16});
  EXPECT_EQ(c.ceiling(), 300u);
}

TEST(AimdController, AMinimumAboveTheMaximumIsTheMaximum) {
  AimdController c({.min = 64, .max = 8, .decrease_step = 16, .increase_step = 16});
  EXPECT_EQ(c.ceiling(), 8u);
  (void)c.judge(overloaded(8));
  EXPECT_EQ(c.ceiling(), 8u);
}

// --- Samples ---

TEST(Sample, AFastResponseIsGoodAndASlowOneBad) {
  EXPECT_EQ(sample_of(Outcome::relayed(200, 10ms), 500ms), Sample::good);
  EXPECT_EQ(sample_of(Outcome::relayed(200, 500ms), 500ms), Sample::bad);
  EXPECT_EQ(sample_of(Outcome::relayed(500, 1ms), 500ms), Sample::good);  // fast, not overload
}

TEST(Sample, TimeoutsAndABackends503Or504AreBad) {
  EXPECT_EQ(sample_of(Outcome::generated(Reason::upstream_timeout), 500ms), Sample::bad);
  EXPECT_EQ(sample_of(Outcome::generated(Reason::upstream_connect_timeout), 500ms), Sample::bad);
  EXPECT_EQ(sample_of(Outcome::relayed(503, 1ms), 500ms), Sample::bad);
  EXPECT_EQ(sample_of(Outcome::relayed(504, 1ms), 500ms), Sample::bad);
}

TEST(Sample, FloodgatesOwnAnswersClientErrorsAbortsAnd4xxAreNotSamples) {
  EXPECT_EQ(sample_of(Outcome::generated(Reason::adaptive_limit), 500ms), Sample::none);
  EXPECT_EQ(sample_of(Outcome::generated(Reason::proxy_overloaded), 500ms), Sample::none);
  EXPECT_EQ(sample_of(Outcome::generated(Reason::bad_request), 500ms), Sample::none);
  EXPECT_EQ(sample_of(Outcome::relayed(404, 900ms), 500ms), Sample::none);
  Outcome aborted = Outcome::relayed(200, 900ms);
  aborted.cut_short(OutcomeSource::client);
  EXPECT_EQ(sample_of(aborted, 500ms), Sample::none);
  EXPECT_EQ(sample_of(Outcome::generated(Reason::upstream_connect_failed), 500ms), Sample::none);
}

TEST(Sample, AResponseCutByTheBackendIsJudgedByItsHead) {
  Outcome cut = Outcome::relayed(200, 900ms);
  cut.cut_short(OutcomeSource::upstream);
  EXPECT_EQ(sample_of(cut, 500ms), Sample::bad);
}

// --- The limiter ---

class Limiter : public ::testing::Test {
 protected:
  Limiter() { limiter.configure(kLimits, 100ms); }

  // `n` samples on `shard`, `bad` of them bad.
  void feed(unsigned shard, uint64_t n, uint64_t bad) {
    for (uint64_t i = 0; i < n; ++i) limiter.record(shard, i < bad ? Sample::bad : Sample::good);
  }

  AdaptiveLimiter limiter{2};
  Clock::time_point t = Clock::time_point{} + 1h;
};

TEST_F(Limiter, StartsAtTheMaximumAndAdmitsUpToIt) {
  EXPECT_EQ(limiter.ceiling(), 512u);
  std::vector<Permit> permits;
  for (int i = 0; i < 512; ++i) permits.push_back(limiter.try_enter());
  EXPECT_FALSE(limiter.try_enter());
  EXPECT_EQ(limiter.in_flight(), 512);
}

TEST_F(Limiter, DecidesOncePerWindowHoweverManyCompletionsAndTicks) {
  limiter.tick(t);  // the first window starts
  feed(0, 500, 500);
  feed(1, 500, 500);
  for (int i = 0; i < 1000; ++i) limiter.tick(t + 99ms);  // inside the window: nothing
  EXPECT_EQ(limiter.ceiling(), 512u);
  for (int i = 0; i < 1000; ++i) limiter.tick(t + 100ms);
  EXPECT_EQ(limiter.ceiling(), 496u);
  EXPECT_EQ(limiter.decisions(AimdMove::decrease), 1u);
}

TEST_F(Limiter, SumsTheReactorsShards) {
  limiter.tick(t);
  feed(0, 20, 0);
  feed(1, 20, 20);  // 50% bad over both, though each shard alone is 0% or 100%
  limiter.tick(t + 100ms);
  EXPECT_EQ(limiter.ceiling(), 496u);
}

TEST_F(Limiter, AWindowWithTooFewSamplesGoesOnUntilItHasThem) {
  limiter.tick(t);
  feed(0, 20, 20);
  limiter.tick(t + 100ms);  // 20 samples: not judged, the window goes on
  EXPECT_EQ(limiter.ceiling(), 512u);
  EXPECT_EQ(limiter.decisions(AimdMove::decrease), 0u);
  feed(1, 20, 20);
  limiter.tick(t + 150ms);  // within the extension
  EXPECT_EQ(limiter.ceiling(), 512u);
  limiter.tick(t + 200ms);
  EXPECT_EQ(limiter.ceiling(), 496u);
}

TEST_F(Limiter, RaisesOnlyWhenTheInFlightPeakReachedHalfTheCeiling) {
  limiter.tick(t);
  feed(0, 40, 40);
  limiter.tick(t + 100ms);  // cut to 496
  feed(0, 40, 0);
  limiter.tick(t + 200ms);  // skipped
  feed(0, 40, 0);
  limiter.note_in_flight(1, 100);
  limiter.tick(t + 300ms);  // healthy, peak 100 < 248: held
  EXPECT_EQ(limiter.ceiling(), 496u);
  feed(0, 40, 0);
  limiter.note_in_flight(0, 248);
  limiter.tick(t + 400ms);
  EXPECT_EQ(limiter.ceiling(), 512u);
  EXPECT_EQ(limiter.decisions(AimdMove::increase), 1u);
}

TEST_F(Limiter, TheInFlightCountAtTheDecisionCountsAsItsPeak) {
  limiter.tick(t);
  feed(0, 40, 40);
  limiter.tick(t + 100ms);  // 496
  feed(0, 40, 0);
  limiter.tick(t + 200ms);  // skipped
  std::vector<Permit> held;
  for (int i = 0; i < 300; ++i) held.push_back(limiter.try_enter());
  feed(0, 40, 0);
  limiter.tick(t + 300ms);  // nobody noted a peak, but 300 are in flight now
  EXPECT_EQ(limiter.ceiling(), 512u);
}

TEST_F(Limiter, ALoweredCeilingRevokesNoPermitAndAdmitsAgainBelowIt) {
  std::vector<Permit> held;
  for (int i = 0; i < 500; ++i) held.push_back(limiter.try_enter());
  limiter.tick(t);
  feed(0, 40, 40);
  limiter.tick(t + 100ms);
  ASSERT_EQ(limiter.ceiling(), 496u);
  EXPECT_EQ(limiter.in_flight(), 500);
  EXPECT_FALSE(limiter.try_enter());
  held.resize(495);
  EXPECT_TRUE(limiter.try_enter());
}

TEST_F(Limiter, AReloadClampsTheCeilingAndZeroMaximumSwitchesItOff) {
  limiter.configure({.min = 32, .max = 128, .decrease_step = 8, .increase_step = 8}, 50ms);
  EXPECT_EQ(limiter.ceiling(), 128u);
  limiter.configure({.min = 0, .max = 0}, 50ms);
  EXPECT_EQ(limiter.ceiling(), 0u);  // no ceiling
  std::vector<Permit> permits;
  for (int i = 0; i < 1000; ++i) permits.push_back(limiter.try_enter());
  EXPECT_TRUE(permits.back());
  limiter.configure(kLimits, 100ms);
  EXPECT_EQ(limiter.ceiling(), 512u);  // enabled again: from its maximum
}

}  // namespace
}  // namespace floodgate::resilience
