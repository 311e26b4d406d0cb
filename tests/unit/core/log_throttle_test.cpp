#include "floodgate/core/log_throttle.h"

#include <gtest/gtest.h>

namespace floodgate {
namespace {

using namespace std::chrono_literals;
using Clock = LogThrottle::Clock;

TEST(LogThrottle, TheFirstOccurrenceGetsALine) {
  LogThrottle t(1s);
  EXPECT_TRUE(t.occurred(Clock::time_point{}));
  EXPECT_EQ(t.take(), 1u);
}

TEST(LogThrottle, OccurrencesWithinThePeriodAreCountedForTheNextLine) {
  LogThrottle t(1s);
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(t.occurred(t0));
  t.take();
  for (int i = 1; i < 10; ++i) EXPECT_FALSE(t.occurred(t0 + i * 100ms));
  EXPECT_TRUE(t.occurred(t0 + 1s));
  EXPECT_EQ(t.take(), 10u);  // nine held back and this one
  EXPECT_EQ(t.take(), 0u);
}

TEST(LogThrottle, ReadyStartsTheNextPeriodWithoutCounting) {
  LogThrottle t(1s);
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(t.occurred(t0));
  EXPECT_FALSE(t.ready(t0 + 999ms));
  EXPECT_TRUE(t.ready(t0 + 1s));
  EXPECT_FALSE(t.occurred(t0 + 1500ms));
  EXPECT_EQ(t.take(), 2u);
}

}  // namespace
}  // namespace floodgate
