// The process-wide token bucket (GCRA) on hand-moved time: the burst, the refill, the time until
// a token is back, giving one back, idleness, and two threads hammering one bucket getting
// exactly burst + rate x period between them.
#include "floodgate/resilience/gcra.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "floodgate/core/clock.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using TimePoint = Gcra::Clock::time_point;

const TimePoint kStart = TimePoint{} + 1h;

int admitted(Gcra& bucket, TimePoint now, int tries) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += bucket.take(now).allowed ? 1 : 0;
  return n;
}

TEST(Gcra, AFreshBucketAdmitsItsBurstAtOnceThenRefuses) {
  Gcra bucket(10, 5);
  EXPECT_EQ(admitted(bucket, kStart, 100), 5);
  const Gcra::Take refused = bucket.take(kStart);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, 100ms);  // one token at 10 per second
}

TEST(Gcra, RefillsOneTokenPerIntervalAndNeverAboveTheBurst) {
  Gcra bucket(10, 5);
  ASSERT_EQ(admitted(bucket, kStart, 5), 5);
  EXPECT_EQ(admitted(bucket, kStart + 99ms, 10), 0);
  EXPECT_EQ(admitted(bucket, kStart + 100ms, 10), 1);
  EXPECT_EQ(admitted(bucket, kStart + 350ms, 10), 2);  // 2.5 intervals later: two
  EXPECT_EQ(bucket.take(kStart + 350ms).retry_after, 50ms);
  EXPECT_EQ(admitted(bucket, kStart + 1h, 100), 5);  // a long idle spell refills to the burst
}

TEST(Gcra, ARefusalConsumesNothing) {
  Gcra bucket(1, 1);
  ASSERT_TRUE(bucket.take(kStart).allowed);
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(bucket.take(kStart + 500ms).allowed);
  EXPECT_TRUE(bucket.take(kStart + 1s).allowed);
}

TEST(Gcra, AGivenBackTokenCanBeTakenAgainButTheBucketNeverOverfills) {
  Gcra bucket(10, 2);
  ASSERT_EQ(admitted(bucket, kStart, 2), 2);
  bucket.give_back(kStart);
  EXPECT_EQ(admitted(bucket, kStart, 10), 1);
  Gcra full(10, 2);
  full.give_back(kStart);  // already full: nothing to give back
  EXPECT_EQ(admitted(full, kStart, 10), 2);
}

TEST(Gcra, IsIdleOnceFullForTheTtl) {
  Gcra bucket(10, 5);
  EXPECT_TRUE(bucket.idle_for(kStart, 300s));  // never used
  ASSERT_EQ(admitted(bucket, kStart, 5), 5);   // full again 500 ms later
  EXPECT_FALSE(bucket.idle_for(kStart + 300s, 300s));
  EXPECT_TRUE(bucket.idle_for(kStart + 500ms + 300s, 300s));
}

// Two threads take as fast as they can while the main thread moves the clock 1 ms at a time
// for a second, each step only once a thread has seen the bucket empty at that time: between
// them they get exactly burst + rate x period, never a token more or less.
TEST(Gcra, TwoThreadsOnOneBucketGetExactlyTheRateBetweenThem) {
  constexpr uint32_t kRate = 1000;
  constexpr uint32_t kBurst = 10;
  constexpr int kSteps = 1000;
  Gcra bucket(kRate, kBurst);
  ManualClock clock(kStart);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> emptied_at{-1};  // the latest time a thread saw a refusal at
  std::atomic<uint64_t> taken{0};
  auto hammer = [&] {
    while (!stop.load(std::memory_order_acquire)) {
      const TimePoint now = clock.now();
      if (bucket.take(now).allowed) {
        taken.fetch_add(1, std::memory_order_relaxed);
      } else {  // a thread that read the clock before the last step may be late: keep the max
        const int64_t at = now.time_since_epoch().count();
        int64_t seen = emptied_at.load(std::memory_order_relaxed);
        while (seen < at &&
               !emptied_at.compare_exchange_weak(seen, at, std::memory_order_release)) {
        }
      }
    }
  };
  std::thread a(hammer);
  std::thread b(hammer);
  int stuck_at = -1;  // the step at which the threads stopped emptying the bucket, if any
  for (int step = 0; step <= kSteps && stuck_at < 0; ++step) {
    const int64_t now = clock.now().time_since_epoch().count();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (emptied_at.load(std::memory_order_acquire) < now &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (emptied_at.load(std::memory_order_acquire) < now) stuck_at = step;
    if (step < kSteps) clock.advance(1ms);
  }
  stop.store(true, std::memory_order_release);
  a.join();
  b.join();
  ASSERT_EQ(stuck_at, -1) << "the threads stopped taking";
  EXPECT_EQ(taken.load(), kBurst + kRate * 1);  // one second at 1000 per second
}

}  // namespace
}  // namespace floodgate::resilience
