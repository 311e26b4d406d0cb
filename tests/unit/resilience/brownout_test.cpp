// Brownout's hysteresis on hand-moved time: on at the trigger share of the ceiling, off at
// the recover share, never on again within a window of ending.
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
}

TEST_F(BrownoutTest, StaysOnAboveTheRecoverShareAndEndsAtIt) {
  ASSERT_TRUE(at(0ms, 95));
  EXPECT_TRUE(at(1ms, 89));  // between the two: the hysteresis keeps it on
  EXPECT_TRUE(at(2ms, 61));
  EXPECT_FALSE(at(3ms, 60));
  EXPECT_EQ(b.transitions(false), 1u);
}

TEST_F(BrownoutTest, DoesNotStartAgainWithinAWindowOfEnding) {
  ASSERT_TRUE(at(0ms, 95));
  ASSERT_FALSE(at(10ms, 10));
  EXPECT_FALSE(at(20ms, 100));  // pressure again, but it ended 10 ms ago
  EXPECT_FALSE(at(109ms, 100));
  EXPECT_TRUE(at(110ms, 100));  // a window later
  EXPECT_EQ(b.transitions(true), 2u);
  EXPECT_EQ(b.transitions(false), 1u);
}

TEST_F(BrownoutTest, TheShareIsOfTheCurrentCeiling) {
  EXPECT_FALSE(at(0ms, 60, 100));
  EXPECT_TRUE(at(1ms, 60, 64));  // the same count, under a lowered ceiling: 94%
}

TEST_F(BrownoutTest, WithoutACeilingItNeverStartsAndEndsAtOnce) {
  EXPECT_FALSE(at(0ms, 1'000'000, 0));
  ASSERT_TRUE(at(1ms, 100));
  EXPECT_FALSE(at(2ms, 100, 0));
}

}  // namespace
}  // namespace floodgate::resilience
