// A scoped rate limit's table and rule on hand-moved time: one bucket per identity, the bound
// on live buckets, reclaiming idle ones (and reusing their slots), taking over a fully refilled
// or the least recently used bucket for a new identity when the table is full (issue 35), the
// overflow bucket and fail_open when every bucket is in use, giving a token back, and one
// bucket per identity when two threads make the same identities at once (many threads at once:
// rate_table_race_test.cpp).
#include "floodgate/resilience/rate_table.h"

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/core/clock.h"
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

TEST(RateTable, LookingUpInsertingAndTakingOverAllocateNothing) {
  RateTable table(16);
  const Digest a = id(1), b = id(2);
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  table.find_or_insert(a);
  table.find_or_insert(b);
  table.find_or_insert(a);
  for (int n = 0; n < 40; ++n) table.find_or_evict(id(n), kStart + n * 1ms);  // takes over
  table.reclaim(kStart, 1s);
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

// --- a full table: taking a bucket over (issue 35) ---------------------------------------------
// These tables (and the rules' below) have at most 32 slots, so every identity's window is the
// whole table and the bucket taken over is the one of the whole table that the rule says.

const GcraRate kOnePerSecond = GcraRate::of(1, 1);

// Makes the bucket of each of `identities` at `now` and takes its one token (so it is not
// refilled for a second).
void fill(RateTable& table, std::initializer_list<int> identities, TimePoint now) {
  for (const int n : identities) {
    const RateTable::Entry e = table.find_or_evict(id(n), now);
    ASSERT_TRUE(e) << n;
    ASSERT_FALSE(e.evicted) << n;
    ASSERT_TRUE(e.cell->take(now, kOnePerSecond).allowed) << n;
  }
}

TEST(RateTable, AFullTableGivesANewIdentityAFullyRefilledBucketFirst) {
  ManualClock clock;
  RateTable table(8);
  fill(table, {0, 1, 2, 3, 4, 6, 7}, clock.now());
  ASSERT_TRUE(table.find_or_evict(id(5), clock.now()));  // made, never taken from: full
  clock.advance(500ms);
  // 5 is the most recently used, but the only full bucket: taking it over loses nothing, while
  // any other would hand its identity a token it has not earned back yet.
  ASSERT_TRUE(table.find_or_evict(id(5), clock.now()));
  clock.advance(100ms);
  const RateTable::Entry fresh = table.find_or_evict(id(100), clock.now());
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(fresh.evicted);
  EXPECT_FALSE(table.find(id(5)));
  for (const int n : {0, 1, 2, 3, 4, 6, 7}) EXPECT_TRUE(table.find(id(n))) << n;
  EXPECT_EQ(table.find(id(100)).cell, fresh.cell);
  EXPECT_EQ(table.live(), 8u);
}

TEST(RateTable, AFullTableGivesANewIdentityTheLeastRecentlyUsedBucketOtherwise) {
  ManualClock clock;
  RateTable table(8);
  for (int n = 0; n < 8; ++n) {
    fill(table, {n}, clock.now());
    clock.advance(1ms);
  }
  ASSERT_TRUE(table.find_or_evict(id(0), clock.now()));  // a request of 0: 1 is the oldest now
  clock.advance(10ms);
  const RateTable::Entry first = table.find_or_evict(id(100), clock.now());
  ASSERT_TRUE(first);
  EXPECT_TRUE(first.evicted);
  EXPECT_FALSE(table.find(id(1)));
  EXPECT_TRUE(table.find(id(0)));
  // The bucket taken over starts full: 1 had spent its token, 100 has its own.
  EXPECT_TRUE(first.cell->take(clock.now(), kOnePerSecond).allowed);
  clock.advance(1ms);
  ASSERT_TRUE(table.find_or_evict(id(101), clock.now()));  // then 2, the oldest left
  EXPECT_FALSE(table.find(id(2)));
  for (const int n : {0, 3, 4, 5, 6, 7, 100, 101}) EXPECT_TRUE(table.find(id(n))) << n;
  EXPECT_EQ(table.live(), 8u);
}

TEST(RateTable, NeverTakesOverABucketUsedInTheCurrentMillisecond) {
  ManualClock clock;
  RateTable table(8);
  fill(table, {0, 1, 2, 3, 4, 5, 6, 7}, clock.now());
  EXPECT_FALSE(table.find_or_evict(id(100), clock.now() + 999us));  // all in use right now
  clock.advance(1ms);
  EXPECT_TRUE(table.find_or_evict(id(100), clock.now()));  // a millisecond later they are not
}

TEST(RateTable, FindOrInsertNeverTakesABucketOver) {
  ManualClock clock;
  RateTable table(8);
  fill(table, {0, 1, 2, 3, 4, 5, 6, 7}, clock.now());
  clock.advance(1h);                            // every bucket refilled and long unused
  EXPECT_FALSE(table.find_or_insert(id(100)));  // the quota's table: no room is no room
  EXPECT_EQ(table.live(), 8u);
}

TEST(RateTable, TwoThreadsMakingTheSameIdentitiesEndWithOneBucketEach) {
  RateTable table(512);
  std::barrier start(2);
  std::vector<RateTable::Entry> got[2];
  const auto work = [&](std::vector<RateTable::Entry>& entries) {
    start.arrive_and_wait();
    for (int n = 0; n < 400; ++n) entries.push_back(table.find_or_insert(id(n)));
  };
  got[0].reserve(400);
  got[1].reserve(400);
  std::thread other(work, std::ref(got[1]));
  work(got[0]);
  other.join();
  // A thread whose bucket lost to the other thread's (see rate_table.h) can tell: the entry it
  // got is no longer current. Every other entry is the identity's one bucket. A thread may
  // also give up when the other kept winning the race or was descheduled mid-make (busy, never
  // "full": the table has room for all): rare, but a slow or sanitized run sees it.
  for (const std::vector<RateTable::Entry>& entries : got) {
    for (int n = 0; n < 400; ++n) {
      const RateTable::Entry& e = entries[static_cast<std::size_t>(n)];
      if (!e) {
        EXPECT_TRUE(e.busy) << n;
        continue;
      }
      EXPECT_TRUE(table.find(id(n)).cell == e.cell || !table.current(e)) << n;
    }
  }
  // One bucket each, for every identity either thread made: a second one would be counted.
  uint32_t made = 0;
  for (int n = 0; n < 400; ++n) made += table.find(id(n)) ? 1U : 0U;
  EXPECT_EQ(table.live(), made);
  EXPECT_GE(made, 300U);  // giving up is the exception
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

TEST_F(Rule, IdentitiesFindingEveryBucketInUseShareTheOverflowBucket) {
  ASSERT_TRUE(take(1, kStart).allowed);
  ASSERT_TRUE(take(2, kStart).allowed);
  // Both buckets were used in this very millisecond: neither is taken over.
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

TEST_F(Rule, ANewIdentityAfterAFloodOfNewIdentitiesGetsAFreshBucketOfItsOwn) {
  // Issue 35: 200 random identities, one request each, then 20 honest newcomers. With the
  // overflow bucket as the answer to a full table, the flood kept that one shared bucket empty
  // and every newcomer was refused; nginx's limit_req evicts its least recently used state and
  // serves all 20.
  ManualClock clock;
  RateRule small(1, 16);
  const GcraRate one = GcraRate::of(1, 1);
  const auto take_at = [&](int identity) {
    clock.advance(1ms);
    return small.take(id(identity), clock.now(), one, OnTableFull::overflow_bucket, small.shard(0),
                      held);
  };
  for (int n = 0; n < 200; ++n) ASSERT_TRUE(take_at(1000 + n).allowed) << n;
  for (int n = 0; n < 20; ++n) EXPECT_TRUE(take_at(5000 + n).allowed) << n;
  EXPECT_FALSE(take_at(5019).allowed);  // its own bucket, with its own one token spent
  const RateRule::Totals t = small.totals();
  EXPECT_EQ(t.overflow, 0u);
  EXPECT_EQ(t.evicted, 220u - 16u);  // every identity past the 16th took a bucket over
  EXPECT_EQ(small.table().live(), 16u);
}

TEST_F(Rule, AFloodOfNewIdentitiesCannotResetAnIdentityInActiveUse) {
  // A limited identity that keeps sending is never the least recently used bucket while the
  // flood's buckets are older, so its spent tokens stay spent: flooding does not buy it a fresh
  // burst.
  ManualClock clock;
  RateRule small(1, 16);
  const auto take_at = [&](int identity) {
    return small.take(id(identity), clock.now(), rate, OnTableFull::overflow_bucket, small.shard(0),
                      held);
  };
  ASSERT_TRUE(take_at(1).allowed);  // rate: burst 2, one a second
  ASSERT_TRUE(take_at(1).allowed);
  ASSERT_FALSE(take_at(1).allowed);
  for (int n = 0; n < 500; ++n) {  // half a second: no token comes back to 1 meanwhile
    clock.advance(1ms);
    ASSERT_TRUE(take_at(1000 + n).allowed) << n;
    if (n % 5 == 4) {
      EXPECT_FALSE(take_at(1).allowed) << n;
    }
  }
  EXPECT_EQ(small.totals().overflow, 0u);
  EXPECT_EQ(small.totals().evicted, 500u - 15u);
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
