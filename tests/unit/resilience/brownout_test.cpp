// Brownout's hysteresis and hold on hand-moved time: on at the trigger share of the ceiling, on
// for at least its hold, off at the recover share, and a hold that backs off when brownout keeps
// coming back.
#include "floodgate/resilience/brownout.h"

#include <gtest/gtest.h>

#include <chrono>

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr BrownoutThresholds kThresholds{
    .trigger_percent = 90, .recover_percent = 60, .dwell = 100ms};

class BrownoutTest : public ::testing::Test {
 protected:
  bool at(std::chrono::milliseconds when, int64_t in_flight, uint32_t ceiling = 100) {
    return b.observe(t + when, in_flight, ceiling, kThresholds);
  }
  Brownout b;
  Clock::time_point t = Clock::time_point{} + 1h;
};

TEST_F(BrownoutTest, StartsWhenInFlightReachesTheTriggerShareOfTheCeiling) {
  EXPECT_FALSE(at(0ms, 89));
  EXPECT_FALSE(b.active());
  EXPECT_TRUE(at(1ms, 90));
  EXPECT_TRUE(b.active());
  EXPECT_EQ(b.transitions(true), 1u);
  EXPECT_EQ(b.level(), 0u);
}

TEST_F(BrownoutTest, StaysOnForItsHoldEvenWhenThePressureIsGone) {
  ASSERT_TRUE(at(0ms, 95));
  EXPECT_TRUE(at(50ms, 0));  // shedding took the pressure away: still on
  EXPECT_TRUE(at(99ms, 0));
  EXPECT_FALSE(at(100ms, 0));  // one dwell later
  EXPECT_EQ(b.transitions(false), 1u);
}

TEST_F(BrownoutTest, AfterItsHoldItStaysOnAboveTheRecoverShareAndEndsAtIt) {
  ASSERT_TRUE(at(0ms, 95));
  EXPECT_TRUE(at(200ms, 89));  // between the two: the hysteresis keeps it on
  EXPECT_TRUE(at(201ms, 61));
  EXPECT_FALSE(at(202ms, 60));
}

TEST_F(BrownoutTest, ComingBackWithinADwellOfEndingDoublesTheHoldUpToItsLongest) {
  auto now = 0ms;
  ASSERT_TRUE(at(now, 100));
  for (unsigned level = 1; level <= Brownout::kMaxLevel + 2; ++level) {
    const auto hold =
        100ms * (1 << (level - 1 > Brownout::kMaxLevel ? Brownout::kMaxLevel : level - 1));
    now += hold;
    ASSERT_FALSE(at(now, 0)) << level;  // the hold is over and the pressure down
    now += 10ms;
    ASSERT_TRUE(at(now, 100)) << level;  // back within a dwell
    EXPECT_EQ(b.level(), level < Brownout::kMaxLevel ? level : Brownout::kMaxLevel);
  }
  const auto longest = 100ms * (1 << Brownout::kMaxLevel);
  EXPECT_TRUE(at(now + longest - 1ms, 0));
  EXPECT_FALSE(at(now + longest, 0));
}

TEST_F(BrownoutTest, AQuietSpellBringsTheShortestHoldBack) {
  ASSERT_TRUE(at(0ms, 100));
  ASSERT_FALSE(at(100ms, 0));
  ASSERT_TRUE(at(110ms, 100));  // level 1
  ASSERT_EQ(b.level(), 1u);
  ASSERT_FALSE(at(310ms, 0));
  ASSERT_TRUE(at(500ms, 100));  // back after more than a dwell: the level stays
  EXPECT_EQ(b.level(), 1u);
  ASSERT_FALSE(at(700ms, 0));
  ASSERT_TRUE(at(700ms + 3200ms, 100));  // after 32 dwells of quiet
  EXPECT_EQ(b.level(), 0u);
}

TEST_F(BrownoutTest, TheShareIsOfTheCurrentCeiling) {
  EXPECT_FALSE(at(0ms, 60, 100));
  EXPECT_TRUE(at(1ms, 60, 64));  // the same count, under a lowered ceiling: 94%
}

TEST_F(BrownoutTest, WithoutACeilingItNeverStartsAndEndsAtOnce) {
  EXPECT_FALSE(at(0ms, 1'000'000, 0));
  ASSERT_TRUE(at(1ms, 100));
  EXPECT_FALSE(at(2ms, 100, 0));  // within its hold, but there is nothing to measure
}

}  // namespace
}  // namespace floodgate::resilience
