#include "floodgate/metrics/counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>

namespace floodgate {
namespace {

TEST(Counter, StartsAtZero) {
  EXPECT_EQ(Counter{}.value(), 0u);
}

TEST(Counter, AddAccumulates) {
  Counter c;
  c.add();
  c.add(41);
  EXPECT_EQ(c.value(), 42u);
}

TEST(Gauge, GoesUpAndDown) {
  Gauge g;
  g.add(3);
  g.add(-1);
  EXPECT_EQ(g.value(), 2);
  g.add(-5);
  EXPECT_EQ(g.value(), -3);
}

TEST(Counter, ReaderOnAnotherThreadSeesMonotonicValuesUpToTheFinalOne) {
  Counter c;
  constexpr uint64_t kAdds = 200'000;
  std::latch start(2);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    start.arrive_and_wait();
    for (uint64_t i = 0; i < kAdds; ++i) {
      c.add();
    }
    done.store(true, std::memory_order_release);
  });
  start.arrive_and_wait();
  uint64_t last = 0;
  bool monotonic = true;
  while (!done.load(std::memory_order_acquire)) {
    const uint64_t now = c.value();
    monotonic = monotonic && now >= last;
    last = now;
  }
  writer.join();
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(c.value(), kAdds);
}

}  // namespace
}  // namespace floodgate
