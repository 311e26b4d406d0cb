#include "floodgate/upstream/backend_load.h"

#include <gtest/gtest.h>

#include <latch>
#include <thread>
#include <utility>
#include <vector>

namespace floodgate {
namespace {

TEST(BackendLoad, EachCountHasItsOwnCacheLine) {
  EXPECT_EQ(alignof(BackendLoad), 64u);
  BackendLoad loads[2];
  EXPECT_EQ(reinterpret_cast<char*>(&loads[1]) - reinterpret_cast<char*>(&loads[0]), 64);
}

TEST(InFlight, CountsInWhileAliveAndOutWhenDestroyed) {
  BackendLoad load;
  {
    InFlight guard(load);
    EXPECT_EQ(load.active.load(), 1);
  }
  EXPECT_EQ(load.active.load(), 0);
}

TEST(InFlight, ReleaseCountsOutOnceOnly) {
  BackendLoad load;
  InFlight guard(load);
  guard.release();
  guard.release();
  EXPECT_FALSE(guard);
  EXPECT_EQ(load.active.load(), 0);
}

TEST(InFlight, MovingTransfersTheCountWithoutChangingIt) {
  BackendLoad load;
  InFlight first(load);
  InFlight second(std::move(first));
  EXPECT_EQ(load.active.load(), 1);
  first = InFlight{};
  EXPECT_EQ(load.active.load(), 1);
  second = InFlight{};
  EXPECT_EQ(load.active.load(), 0);
}

TEST(InFlight, AssigningOverAGuardReleasesItsOldCount) {
  BackendLoad a;
  BackendLoad b;
  InFlight guard(a);
  guard = InFlight(b);
  EXPECT_EQ(a.active.load(), 0);
  EXPECT_EQ(b.active.load(), 1);
}

TEST(InFlight, ConcurrentReactorsBalanceToZero) {
  BackendLoad load;
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < 10'000; ++i) {
        InFlight guard(load);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(load.active.load(), 0);
}

}  // namespace
}  // namespace floodgate
