// A scoped rate limit's table under real concurrency (issue 35): several threads finding, making
// and taking over buckets at once in a table far smaller than their identities, with the sweep
// reclaiming idle buckets alongside, so that every way of changing a slot runs against every
// other: a free slot taken, a bucket taken over, one new identity made by two threads at once, a
// bucket reclaimed. The tests the ThreadSanitizer build exists for. Threads start together on a
// latch; nothing sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/gcra.h"
#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/rate_table.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

constexpr int kThreads = 4;
constexpr int kIterations = 10'000;
constexpr int kShared = 48;  // identities every thread sends, besides its own

Digest id(int n) {
  return digest_of({"race", std::to_string(n)});
}

// A bucket a thread was given: its slot, the word that vouched for it, and whose it was.
struct Seen {
  uint32_t slot = 0;
  uint32_t word = 0;
  int identity = 0;
};

TEST(RateTableRace, ThreadsMakingAndTakingOverBucketsNeverShareOneNorKeepTwo) {
  RateTable table(64);  // 128 slots: the windows of 32 overlap, and it is full at once
  ManualClock clock;
  const GcraRate rate = GcraRate::of(100, 2);
  std::latch start(kThreads + 1);
  std::atomic<int> done{0};
  std::atomic<bool> over_max{false};
  std::atomic<uint64_t> evicted{0};
  std::vector<std::vector<Seen>> seen(kThreads);
  const auto work = [&](int t) {
    std::vector<Seen>& mine = seen[static_cast<std::size_t>(t)];
    mine.reserve(kIterations);
    start.arrive_and_wait();
    for (int i = 0; i < kIterations; ++i) {
      // One request in three is of an identity every thread sends (the same new identity made
      // by several threads at once); the others of the thread's own, each new.
      const int who = i % 3 == 0 ? i / 3 % kShared : 1000 + t * kIterations + i;
      if (i % 4 == 0) clock.advance(1ms);  // some requests in one millisecond, some not
      const auto now = clock.now();
      const RateTable::Entry e = table.find_or_evict(id(who), now);
      if (table.live() > table.max_live()) over_max.store(true);
      if (!e) continue;
      if (e.evicted) evicted.fetch_add(1, std::memory_order_relaxed);
      mine.push_back({e.slot, e.word, who});
      // What a rate rule does with it: a take, given back when the bucket went meanwhile.
      const GcraTake taken = e.cell->take(now, rate);
      if (taken.allowed && !table.current(e)) e.cell->give_back(now, rate);
    }
    done.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  start.arrive_and_wait();
  // The sweep, alongside: the clock moves a millisecond every few requests, so some buckets
  // go idle for 20 ms before they are taken over (and the table still fills).
  while (done.load() < kThreads) table.reclaim(clock.now(), 20ms);
  for (std::thread& th : threads) th.join();

  EXPECT_FALSE(over_max.load());
  EXPECT_GT(evicted.load(), 0u);
  // One slot, as one word vouched for it, was only ever one identity's bucket.
  std::vector<Seen> all;
  for (const std::vector<Seen>& mine : seen) all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end(), [](const Seen& a, const Seen& b) {
    return std::tie(a.slot, a.word) < std::tie(b.slot, b.word);
  });
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i].slot == all[i - 1].slot && all[i].word == all[i - 1].word) {
      ASSERT_EQ(all[i].identity, all[i - 1].identity) << "slot " << all[i].slot;
    }
  }
  // Every live bucket is the one bucket of a distinct identity: a second bucket of an identity
  // would count in live() but not be found.
  uint32_t found = 0;
  for (int n = 0; n < kShared; ++n) found += table.find(id(n)) ? 1 : 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kIterations; ++i) {
      if (i % 3 != 0) found += table.find(id(1000 + t * kIterations + i)) ? 1 : 0;
    }
  }
  EXPECT_EQ(found, table.live());
  EXPECT_LE(table.live(), table.max_live());
}

}  // namespace
}  // namespace floodgate::resilience
