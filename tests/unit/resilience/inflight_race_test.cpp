// The front cap under real concurrency: the tests the ThreadSanitizer build exists for. Threads
// start together on a latch; nothing sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "floodgate/resilience/inflight.h"

namespace floodgate::resilience {
namespace {

constexpr int kIterations = 200'000;

// Counts the holders of a slot and remembers the most ever seen at once.
struct Holders {
  void enter() {
    const int64_t now = count.fetch_add(1, std::memory_order_relaxed) + 1;
    int64_t seen = most.load(std::memory_order_relaxed);
    while (now > seen && !most.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void leave() { count.fetch_sub(1, std::memory_order_relaxed); }
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> most{0};
};

TEST(InflightCapRace, TwoThreadsHammeringOneSlotNeverHoldItTogether) {
  InflightCap cap(1);
  Holders holders;
  std::atomic<uint64_t> entered{0};
  std::latch start(2);
  auto hammer = [&] {
    start.arrive_and_wait();
    uint64_t mine = 0;
    for (int i = 0; i < kIterations; ++i) {
      Permit permit = cap.try_enter();
      if (!permit) continue;
      holders.enter();
      ++mine;
      holders.leave();
    }
    entered.fetch_add(mine, std::memory_order_relaxed);
  };
  std::thread a(hammer);
  std::thread b(hammer);
  a.join();
  b.join();
  EXPECT_EQ(holders.most.load(), 1);
  EXPECT_EQ(cap.in_flight(), 0);
  EXPECT_EQ(cap.admitted(), entered.load());
  EXPECT_GT(entered.load(), 0u);
}

// Each thread keeps up to three permits, so together they press on a cap of four all the time.
TEST(InflightCapRace, TwoThreadsHoldingSeveralPermitsNeverExceedTheCap) {
  constexpr uint32_t kLimit = 4;
  InflightCap cap(kLimit);
  Holders holders;
  std::atomic<uint64_t> refused{0};
  std::latch start(2);
  auto hammer = [&] {
    start.arrive_and_wait();
    std::vector<Permit> held;
    held.reserve(3);
    uint64_t mine = 0;
    for (int i = 0; i < kIterations; ++i) {
      if (held.size() == 3 || (i % 5 == 4 && !held.empty())) {
        holders.leave();  // before the slot is freed: a count never lags its permits
        held.pop_back();
      }
      Permit permit = cap.try_enter();
      if (!permit) {
        ++mine;
        continue;
      }
      holders.enter();
      held.push_back(std::move(permit));
    }
    for (std::size_t i = 0; i < held.size(); ++i) holders.leave();
    held.clear();
    refused.fetch_add(mine, std::memory_order_relaxed);
  };
  std::thread a(hammer);
  std::thread b(hammer);
  a.join();
  b.join();
  EXPECT_LE(holders.most.load(), int64_t{kLimit});
  EXPECT_EQ(cap.in_flight(), 0);
  EXPECT_EQ(cap.admitted() + refused.load(), 2u * kIterations);
}

// A reload moving the limit while two threads hammer: never more holders than the largest limit,
// and every slot comes back.
TEST(InflightCapRace, ALimitMovingUnderLoadNeverLeaksASlot) {
  InflightCap cap(1);
  Holders holders;
  std::atomic<bool> stop{false};
  std::latch start(3);
  auto hammer = [&] {
    start.arrive_and_wait();
    for (int i = 0; i < kIterations; ++i) {
      Permit permit = cap.try_enter();
      if (!permit) continue;
      holders.enter();
      holders.leave();
    }
  };
  std::thread a(hammer);
  std::thread b(hammer);
  std::thread reload([&] {
    start.arrive_and_wait();
    for (uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) cap.set_limit(1 + i % 2);
  });
  a.join();
  b.join();
  stop.store(true);
  reload.join();
  EXPECT_LE(holders.most.load(), 2);
  EXPECT_EQ(cap.in_flight(), 0);
}

}  // namespace
}  // namespace floodgate::resilience
