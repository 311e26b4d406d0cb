#include "floodgate/core/spsc_ring.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

std::vector<std::string> drain(SpscRing& ring) {
  std::vector<std::string> out;
  ring.pop_all([&](std::string_view r) { out.emplace_back(r); });
  return out;
}

TEST(SpscRing, DeliversRecordsInOrderWithTheirExactBytes) {
  SpscRing ring(256);
  ASSERT_TRUE(ring.push("first"));
  ASSERT_TRUE(ring.push(""));
  ASSERT_TRUE(ring.push(std::string_view("with\0nul", 8)));
  EXPECT_EQ(drain(ring), (std::vector<std::string>{"first", "", std::string("with\0nul", 8)}));
  EXPECT_TRUE(drain(ring).empty());
}

TEST(SpscRing, RefusesARecordWhenFullAndAcceptsAgainOnceConsumed) {
  SpscRing ring(64);  // 64 bytes: two 20-byte records (24 padded + header) fit, a third not
  const std::string rec(20, 'x');
  ASSERT_TRUE(ring.push(rec));
  ASSERT_TRUE(ring.push(rec));
  EXPECT_FALSE(ring.push(rec));
  EXPECT_EQ(drain(ring).size(), 2U);
  EXPECT_TRUE(ring.push(rec));
}

TEST(SpscRing, RefusesRecordsLargerThanHalfTheCapacity) {
  SpscRing ring(128);
  EXPECT_FALSE(ring.push(std::string(ring.max_record() + 1, 'x')));
  EXPECT_TRUE(ring.push(std::string(ring.max_record(), 'x')));
}

TEST(SpscRing, WrapsRecordsThatDoNotFitBeforeTheEnd) {
  SpscRing ring(128);
  for (int round = 0; round < 50; ++round) {  // sizes that never divide the capacity evenly
    const std::string a(static_cast<std::size_t>(13 + round % 17),
                        static_cast<char>('a' + round % 26));
    const std::string b(static_cast<std::size_t>(29 + round % 5), 'z');
    ASSERT_TRUE(ring.push(a)) << round;
    ASSERT_TRUE(ring.push(b)) << round;
    EXPECT_EQ(drain(ring), (std::vector<std::string>{a, b})) << round;
  }
}

TEST(SpscRing, AProducerAndAConsumerThreadLoseAndReorderNothing) {
  SpscRing ring(4096);
  constexpr int kRecords = 200000;
  std::thread producer([&] {
    for (int i = 0; i < kRecords;) {
      if (ring.push(std::to_string(i))) ++i;
    }
  });
  int expected = 0;
  bool in_order = true;
  while (expected < kRecords) {
    ring.pop_all([&](std::string_view r) {
      in_order = in_order && r == std::to_string(expected);
      ++expected;
    });
  }
  producer.join();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(expected, kRecords);
}

}  // namespace
}  // namespace floodgate
