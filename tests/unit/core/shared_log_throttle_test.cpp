#include "floodgate/core/shared_log_throttle.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

using namespace std::chrono_literals;
using Clock = SharedLogThrottle::Clock;

TEST(SharedLogThrottle, TheFirstOccurrenceGetsALineStandingForItself) {
  SharedLogThrottle t(1s);
  EXPECT_EQ(t.occurred(Clock::time_point{}), 1u);
}

TEST(SharedLogThrottle, OccurrencesWithinThePeriodAreCountedIntoTheNextLine) {
  SharedLogThrottle t(1s);
  const Clock::time_point t0 = Clock::now();
  ASSERT_EQ(t.occurred(t0), 1u);
  for (int i = 1; i < 10; ++i) EXPECT_EQ(t.occurred(t0 + i * 100ms), 0u);
  EXPECT_EQ(t.occurred(t0 + 1s), 10u);  // nine held back and this one
  EXPECT_EQ(t.occurred(t0 + 1s + 1ms), 0u);
}

TEST(SharedLogThrottle, ALongQuietGapLetsTheNextOccurrenceThroughAtOnce) {
  SharedLogThrottle t(1s);
  const Clock::time_point t0 = Clock::now();
  ASSERT_EQ(t.occurred(t0), 1u);
  EXPECT_EQ(t.occurred(t0 + 1h), 1u);
  EXPECT_EQ(t.occurred(t0 + 1h + 999ms), 0u);
  EXPECT_EQ(t.occurred(t0 + 1h + 1s), 2u);
}

// Threads hammering one throttle at one instant: exactly one line, and every occurrence is
// accounted for by it or by the next one.
TEST(SharedLogThrottle, ThreadsAtOnceGetOneLineAndLoseNoCount) {
  SharedLogThrottle t(1s);
  const Clock::time_point t0 = Clock::now();
  constexpr int kThreads = 4;
  constexpr int kEach = 10'000;
  std::atomic<uint64_t> reported{0};
  std::atomic<int> lines{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      for (int n = 0; n < kEach; ++n) {
        if (const uint64_t c = t.occurred(t0); c != 0) {
          reported.fetch_add(c);
          lines.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(lines.load(), 1);
  const uint64_t rest = t.occurred(t0 + 1s);  // counts this one too
  EXPECT_EQ(reported.load() + rest, uint64_t{kThreads} * kEach + 1);
}

}  // namespace
}  // namespace floodgate
