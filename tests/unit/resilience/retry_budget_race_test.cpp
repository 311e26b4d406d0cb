// The retry budget under concurrent callers (RetryBudgetRace, for the ThreadSanitizer build):
// racing primaries lose no count, including when they race to restart a stale bucket; racing
// retries in one slice are admitted exactly up to the allowance; racing across a slice
// boundary stays within the documented bound; the two-budget helper gives back exactly. Threads
// start together on barriers; nothing sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/retry_budget.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

constexpr int kThreads = 8;

// Runs body(thread, round) on kThreads threads for `rounds` rounds; between rounds (with every
// thread parked) the main thread runs between(round). Rounds start together.
template <class Body, class Between>
void rounds(int count, Body body, Between between) {
  std::barrier sync(kThreads + 1);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < count; ++round) {
        sync.arrive_and_wait();  // the round starts
        body(t, round);
        sync.arrive_and_wait();  // the main thread checks
      }
    });
  }
  for (int round = 0; round < count; ++round) {
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    between(round);
  }
  for (std::thread& thread : threads) thread.join();
}

TEST(RetryBudgetRace, ConcurrentPrimariesInOneSliceLoseNoCount) {
  constexpr int kPerThread = 20'000;
  ManualClock clock;
  RetryBudget budget(10);
  rounds(
      1,
      [&](int, int) {
        for (int i = 0; i < kPerThread; ++i) budget.count_primary(clock.now());
      },
      [](int) {});
  EXPECT_EQ(budget.primaries(clock.now()), uint64_t{kThreads} * kPerThread);
}

// Every round is a new slice whose bucket holds the slice of a window ago: the threads race to
// restart it, and neither the restart nor a count added beside it may lose a count.
TEST(RetryBudgetRace, ConcurrentPrimariesRacingToRestartAStaleBucketLoseNoCount) {
  constexpr int kRounds = 200;
  constexpr int kPerThread = 500;
  constexpr uint64_t kPerRound = uint64_t{kThreads} * kPerThread;
  ManualClock clock;
  RetryBudget budget(10, 10s);
  for (int slice = 0; slice < 10; ++slice) {  // every bucket holds a slice, to go stale
    budget.count_primary(clock.now());
    clock.advance(1s);
  }
  rounds(
      kRounds,
      [&](int, int) {
        for (int i = 0; i < kPerThread; ++i) budget.count_primary(clock.now());
      },
      [&](int round) {
        const auto slices = static_cast<uint64_t>(std::min(round + 1, 10));
        ASSERT_EQ(budget.primaries(clock.now()), slices * kPerRound + (10 - slices))
            << "round " << round;
        clock.advance(1s);
      });
}

// In one slice, admissions are exact: kThreads callers each asking many times get exactly the
// allowance between them, round after round (each round a fresh window, so the current retries
// bucket is restarted by the race too).
TEST(RetryBudgetRace, ConcurrentRetriesInOneSliceAreAdmittedExactlyUpToTheAllowance) {
  constexpr int kRounds = 200;
  constexpr int kAsks = 100;
  ManualClock clock;
  RetryBudget budget(10);
  std::array<uint64_t, kThreads> admitted{};
  auto prime = [&] {
    for (int i = 0; i < 1000; ++i) budget.count_primary(clock.now());  // allowance 101
  };
  prime();
  rounds(
      kRounds,
      [&](int t, int) {
        admitted[t] = 0;
        for (int i = 0; i < kAsks; ++i) admitted[t] += budget.try_retry(clock.now()) ? 1 : 0;
      },
      [&](int round) {
        uint64_t total = 0;
        for (const uint64_t a : admitted) total += a;
        ASSERT_EQ(total, 101u) << "round " << round;
        ASSERT_EQ(budget.retries(clock.now()), 101u);
        ASSERT_EQ(budget.remaining(clock.now()), 0u);
        clock.advance(10s);
        prime();
      });
}

// Primaries counted while retries race: no retry is admitted beyond the allowance of what had
// been counted, and everything counted is there at the end.
TEST(RetryBudgetRace, RetriesRacingPrimariesNeverExceedTheAllowance) {
  constexpr int kRounds = 100;
  constexpr int kPerThread = 200;
  ManualClock clock;
  RetryBudget budget(50);
  std::atomic<uint64_t> admitted{0};
  rounds(
      kRounds,
      [&](int t, int) {
        for (int i = 0; i < kPerThread; ++i) {
          if (t % 2 == 0) {
            budget.count_primary(clock.now());
          } else if (budget.try_retry(clock.now())) {
            admitted.fetch_add(1, std::memory_order_relaxed);
          }
        }
      },
      [&](int round) {
        const uint64_t primaries = budget.primaries(clock.now());
        ASSERT_EQ(primaries, uint64_t{kThreads / 2} * kPerThread) << "round " << round;
        ASSERT_LE(admitted.load(), primaries / 2 + 1);
        ASSERT_EQ(budget.retries(clock.now()), admitted.load());
        admitted = 0;
        clock.advance(10s);
      });
}

// Half the callers' loop time is the last instant of a slice, half the first of the next: they
// add to different buckets, each summing the other's, so the window may overshoot the
// allowance, by at most the number of racing callers, and both sides read the same count.
TEST(RetryBudgetRace, RetriesRacingAcrossASliceBoundaryOvershootByAtMostTheRacingCallers) {
  constexpr int kRounds = 300;
  constexpr int kAsks = 50;
  ManualClock clock;
  RetryBudget budget(10);
  std::array<uint64_t, kThreads> admitted{};
  Clock::time_point early;
  Clock::time_point late;
  auto prime = [&] {
    late = clock.now();
    early = late - 1ns;
    for (int i = 0; i < 100; ++i) budget.count_primary(early);  // allowance 11 on both sides
  };
  prime();
  rounds(
      kRounds,
      [&](int t, int) {
        const Clock::time_point now = t % 2 == 0 ? early : late;
        admitted[t] = 0;
        for (int i = 0; i < kAsks; ++i) admitted[t] += budget.try_retry(now) ? 1 : 0;
      },
      [&](int round) {
        uint64_t total = 0;
        for (const uint64_t a : admitted) total += a;
        ASSERT_GE(total, 11u) << "round " << round;
        ASSERT_LE(total, 11u + kThreads) << "round " << round;
        ASSERT_EQ(budget.retries(early), total);
        ASSERT_EQ(budget.retries(late), total);
        clock.advance(20s);  // the next early window must not hold this late slice
        prime();
      });
}

// The two-budget helper under racing callers: every admission took from both, every refusal by
// the second gave the first's back, so both end with the same count: the smaller allowance.
TEST(RetryBudgetRace, TryRetryBothGivesBackExactlyUnderRacingCallers) {
  constexpr int kRounds = 200;
  constexpr int kAsks = 50;
  ManualClock clock;
  RetryBudget global(100);
  RetryBudget upstream(10);
  std::array<uint64_t, kThreads> admitted{};
  auto prime = [&] {
    for (int i = 0; i < 100; ++i) {
      global.count_primary(clock.now());    // allowance 101
      upstream.count_primary(clock.now());  // allowance 11
    }
  };
  prime();
  rounds(
      kRounds,
      [&](int t, int) {
        admitted[t] = 0;
        for (int i = 0; i < kAsks; ++i) {
          admitted[t] += try_retry_both(global, upstream, clock.now()) ? 1 : 0;
        }
      },
      [&](int round) {
        uint64_t total = 0;
        for (const uint64_t a : admitted) total += a;
        ASSERT_EQ(total, 11u) << "round " << round;
        ASSERT_EQ(upstream.retries(clock.now()), 11u);
        ASSERT_EQ(global.retries(clock.now()), 11u);
        clock.advance(10s);
        prime();
      });
}

}  // namespace
}  // namespace floodgate::resilience
