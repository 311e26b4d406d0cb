// The circuit breaker's window of verdicts (resilience::FailureWindow), on a manual clock: what
// it counts, when a verdict leaves it, clearing and reloads, the per-slice cap, that adding
// allocates nothing, and exact counts from racing threads.
#include "floodgate/resilience/failure_window.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/heap_count.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using Counts = FailureWindow::Counts;

// The manual clock starts on a whole second: slice boundaries fall on whole seconds (10 s
// window, 1 s slices).
struct Window {
  ManualClock clock;
  FailureWindow window{10s};

  void add(int n, bool failure) {
    for (int i = 0; i < n; ++i) window.add(clock.now(), failure);
  }
  Counts counts() const { return window.counts(clock.now()); }
};

TEST(FailureWindow, CountsVerdictsAndFailures) {
  Window w;
  w.add(7, false);
  w.add(3, true);
  EXPECT_EQ(w.counts(), (Counts{.requests = 10, .failures = 3}));
}

TEST(FailureWindow, SumsTheSlicesOfTheWindow) {
  Window w;
  for (int i = 0; i < 10; ++i) {
    w.add(1, i % 2 == 0);
    w.clock.advance(1s);
  }
  w.clock.advance(-1s);
  EXPECT_EQ(w.counts(), (Counts{.requests = 10, .failures = 5}));
}

TEST(FailureWindow, AVerdictLeavesOnceItsSliceIsAWindowOld) {
  Window w;
  w.add(4, true);
  w.clock.advance(10s - 1ns);
  EXPECT_EQ(w.counts(), (Counts{.requests = 4, .failures = 4}));
  w.clock.advance(1ns);
  EXPECT_EQ(w.counts(), Counts{});
}

TEST(FailureWindow, AStaleBucketRestartsWithTheNewSlicesFirstVerdict) {
  Window w;
  w.add(4, true);
  w.clock.advance(10s);  // the same bucket, ten slices later
  w.add(1, false);
  EXPECT_EQ(w.counts(), (Counts{.requests = 1, .failures = 0}));
}

TEST(FailureWindow, ACallerWhoseLoopTimeLagsCountsTheSlicesAheadOfIt) {
  Window w;
  const Clock::time_point lagging = w.clock.now();
  w.clock.advance(2s);
  w.add(3, true);
  EXPECT_EQ(w.window.counts(lagging), (Counts{.requests = 3, .failures = 3}));
}

// Slice numbers count from the clock's epoch (boot, for the steady clock): past half the tag
// period (2^19 slices, about 6 days of uptime with 1 s slices) an empty bucket's tag 0 reads
// as a later slice than the current one, and must still restart.
TEST(FailureWindow, CountsFromAnUptimePastHalfTheTagPeriod) {
  for (const auto uptime : {std::chrono::seconds((1 << 19) + 5), std::chrono::seconds(7 * 86400),
                            std::chrono::seconds(10 * 86400)}) {
    Window w;
    w.clock.set(Clock::time_point{} + uptime);
    w.add(3, true);
    EXPECT_EQ(w.counts(), (Counts{.requests = 3, .failures = 3})) << uptime.count();
    w.window.clear();
    w.add(2, false);
    EXPECT_EQ(w.counts(), (Counts{.requests = 2, .failures = 0})) << uptime.count();
  }
}

TEST(FailureWindow, ClearForgetsEveryCount) {
  Window w;
  w.add(5, true);
  w.clock.advance(1s);
  w.add(5, false);
  w.window.clear();
  EXPECT_EQ(w.counts(), Counts{});
  w.add(1, true);
  EXPECT_EQ(w.counts(), (Counts{.requests = 1, .failures = 1}));
}

TEST(FailureWindow, AReloadKeepsTheCountsUnlessTheLengthChanges) {
  Window w;
  w.add(5, true);
  w.window.set_window(10s);
  EXPECT_EQ(w.counts(), (Counts{.requests = 5, .failures = 5}));
  w.window.set_window(20s);
  EXPECT_EQ(w.counts(), Counts{});
  EXPECT_EQ(w.window.window(), 20s);
}

TEST(FailureWindow, TheLengthIsRoundedToWholeSlices) {
  EXPECT_EQ(FailureWindow(15ns).window(), 10ns);
  EXPECT_EQ(FailureWindow(0ns).window(), 10ns);
  EXPECT_EQ(FailureWindow(-1s).window(), 10ns);
}

TEST(FailureWindow, ASliceStopsCountingAtItsCap) {
  Window w;
  for (uint32_t i = 0; i < FailureWindow::kSliceCap + 5; ++i) {
    w.window.add(w.clock.now(), i % 4 == 0);
  }
  EXPECT_EQ(w.counts(), (Counts{.requests = FailureWindow::kSliceCap,
                                .failures = FailureWindow::kSliceCap / 4}));
  w.clock.advance(1s);
  w.add(1, true);
  EXPECT_EQ(w.counts().requests, FailureWindow::kSliceCap + 1) << "the next slice counts again";
}

TEST(FailureWindow, AddingDoesNotAllocate) {
  Window w;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 1000; ++i) {
    w.window.add(w.clock.now(), i % 3 == 0);
    w.clock.advance(100ms);
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

TEST(FailureWindowRace, ThreadsAddingInOneSliceLoseNoVerdict) {
  constexpr int kThreads = 8;
  constexpr int kEach = 20'000;
  Window w;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) w.window.add(w.clock.now(), (i + t) % 2 == 0);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(w.counts(), (Counts{.requests = kThreads * kEach, .failures = kThreads * kEach / 2}));
}

TEST(FailureWindowRace, ThreadsRestartingAStaleBucketTogetherLoseNoVerdict) {
  constexpr int kThreads = 8;
  Window w;
  w.add(100, true);
  w.clock.advance(10s);  // every thread finds the bucket stale at once
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      w.window.add(w.clock.now(), false);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(w.counts(), (Counts{.requests = kThreads, .failures = 0}));
}

}  // namespace
}  // namespace floodgate::resilience
