// A scoped rate limit's table and rule on hand-moved time: one bucket per identity, the bound
// on live buckets, reclaiming idle ones (and reusing their slots), the overflow bucket and
// fail_open when the table is full, giving a token back, and one bucket per identity when two
// threads make the same identities at once.
#include "floodgate/resilience/rate_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

#include "floodgate/core/heap_count.h"
#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/rate_rule.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using TimePoint = RateTable::Clock::time_point;

const TimePoint kStart = TimePoint{} + 1h;

Digest id(int n) {
  return digest_of({"tenant", std::to_string(n)});
}

TEST(RateTable, GivesTheSameBucketToTheSameIdentityAndAnotherToAnother) {
  RateTable table;
  const RateTable::Entry a = table.find_or_insert(id(1));
  ASSERT_TRUE(a);
  EXPECT_EQ(table.find_or_insert(id(1)).cell, a.cell);
  EXPECT_NE(table.find_or_insert(id(2)).cell, a.cell);
  EXPECT_EQ(table.live(), 2u);
}

TEST(RateTable, HoldsAtMostMaxLiveBuckets) {
  RateTable table(8);
  for (int n = 0; n < 8; ++n) ASSERT_TRUE(table.find_or_insert(id(n))) << n;
  EXPECT_FALSE(table.find_or_insert(id(8)));
  EXPECT_TRUE(table.find_or_insert(id(3)));  // a known identity still finds its bucket
  EXPECT_EQ(table.live(), 8u);
}

TEST(RateTable, TheDefaultTableHolds1024BucketsIn128KiB) {
  RateTable table;
  for (int n = 0; n < 1024; ++n) ASSERT_TRUE(table.find_or_insert(id(n))) << n;
  EXPECT_FALSE(table.find_or_insert(id(1024)));
  EXPECT_EQ(table.bytes(), 2048u * 64u);
}

TEST(RateTable, ReclaimsOnlyBucketsIdleForTheTtl) {
  RateTable table(8);
  const GcraRate rate = GcraRate::of(10, 1);
  table.find_or_insert(id(1)).cell->take(kStart, rate);
  table.find_or_insert(id(2)).cell->take(kStart + 250ms, rate);
  // Bucket 1 is full again at kStart + 100ms, so idle for 300ms at kStart + 400ms; bucket 2 is
  // full at +350ms: idle only 50ms then.
  EXPECT_EQ(table.reclaim(kStart + 400ms, 300ms), 1u);
  EXPECT_FALSE(table.find(id(1)));
  EXPECT_TRUE(table.find(id(2)));
  EXPECT_EQ(table.live(), 1u);
}

TEST(RateTable, AReclaimedSlotServesANewIdentityWithAFullBucket) {
  RateTable table(1);
  const GcraRate rate = GcraRate::of(1, 1);
  const RateTable::Entry old = table.find_or_insert(id(1));
  ASSERT_TRUE(old.cell->take(kStart, rate).allowed);
  ASSERT_FALSE(table.find_or_insert(id(2)));  // full
  ASSERT_EQ(table.reclaim(kStart + 10s, 5s), 1u);
  EXPECT_FALSE(table.current(old));  // whoever still holds the old entry can tell
  const RateTable::Entry fresh = table.find_or_insert(id(2));
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(fresh.cell->take(kStart + 10s, rate).allowed);
}

TEST(RateTable, FindsIdentitiesPastReclaimedSlotsOfTheirProbeRun) {
  RateTable table(64);
  for (int n = 0; n < 64; ++n) ASSERT_TRUE(table.find_or_insert(id(n)));
  const GcraRate rate = GcraRate::of(1, 1);
  for (int n = 0; n < 64; n += 2) table.find(id(n)).cell->take(kStart + 10s, rate);
  EXPECT_EQ(table.reclaim(kStart + 10s, 5s), 32u);  // the odd ones, never taken from
  for (int n = 0; n < 64; n += 2) EXPECT_TRUE(table.find(id(n))) << n;
  for (int n = 1; n < 64; n += 2) EXPECT_FALSE(table.find(id(n))) << n;
  for (int n = 100; n < 132; ++n) EXPECT_TRUE(table.find_or_insert(id(n))) << n;
  EXPECT_EQ(table.live(), 64u);
}

TEST(RateTable, LookingUpAndInsertingAllocateNothing) {
  RateTable table(16);
  const Digest a = id(1), b = id(2);
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  table.find_or_insert(a);
  table.find_or_insert(b);
  table.find_or_insert(a);
  table.reclaim(kStart, 1s);
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

TEST(RateTable, TwoThreadsMakingTheSameIdentitiesGetOneBucketEach) {
  RateTable table(512);
  std::barrier start(2);
  std::atomic<int> mismatches{0};
  const auto work = [&] {
    start.arrive_and_wait();
    for (int n = 0; n < 400; ++n) {
      const RateTable::Entry e = table.find_or_insert(id(n));
      if (!e || table.find(id(n)).cell != e.cell) mismatches.fetch_add(1);
    }
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(table.live(), 400u);
}

class Rule : public ::testing::Test {
 protected:
  GcraTake take(int identity, TimePoint now, OnTableFull full = OnTableFull::overflow_bucket) {
    return rule.take(id(identity), now, rate, full, rule.shard(0), held);
  }
  RateRule rule{1, 2};  // one reactor, two live buckets
  GcraRate rate = GcraRate::of(1, 2);
  RateRule::Held held;
};

TEST_F(Rule, IdentitiesPastAFullTableShareTheOverflowBucket) {
  ASSERT_TRUE(take(1, kStart).allowed);
  ASSERT_TRUE(take(2, kStart).allowed);
  EXPECT_TRUE(take(3, kStart).allowed);  // the overflow bucket's burst of 2...
  EXPECT_TRUE(take(4, kStart).allowed);
  EXPECT_FALSE(take(5, kStart).allowed);  // ...shared by every newcomer
  EXPECT_EQ(rule.totals().overflow, 3u);
  EXPECT_TRUE(take(1, kStart).allowed);  // known identities keep their own buckets
}

TEST_F(Rule, FailOpenPassesNewcomersUnlimitedAndCountsThem) {
  take(1, kStart);
  take(2, kStart);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(take(3, kStart, OnTableFull::fail_open).allowed);
  EXPECT_EQ(held.cell, nullptr);  // nothing to give back
  EXPECT_EQ(rule.totals().failed_open, 10u);
}

TEST_F(Rule, AGivenBackTokenIsAsIfNeverTaken) {
  ASSERT_TRUE(take(1, kStart).allowed);
  ASSERT_TRUE(take(1, kStart).allowed);
  RateRule::give_back(held, kStart);
  EXPECT_TRUE(take(1, kStart).allowed);
  EXPECT_FALSE(take(1, kStart).allowed);
}

TEST_F(Rule, ReclaimIsCountedAndTheIdentityStartsAfresh) {
  ASSERT_TRUE(take(1, kStart).allowed);
  ASSERT_TRUE(take(1, kStart).allowed);
  ASSERT_FALSE(take(1, kStart).allowed);
  EXPECT_EQ(rule.reclaim(kStart + 1h, 300s), 1u);
  EXPECT_EQ(rule.reclaimed(), 1u);
  EXPECT_EQ(rule.table().live(), 0u);
}

}  // namespace
}  // namespace floodgate::resilience
