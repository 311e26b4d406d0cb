// The quota's fixed-window counters: `requests` per window and then a denial with the window and
// its reset, both windows one decision (a denial counts in neither), windows aligned to the clock
// (and the edge bound that follows), the table's bound and its reclaim of ended windows, and one
// exact count when reactors decide on one identity at once, from its first request on.
#include "floodgate/resilience/quota_counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using Clock = QuotaCell::Clock;

// An hour past the clock's epoch: a boundary of every window length used here.
const Clock::time_point kStart = Clock::time_point{} + 1h;

QuotaLimits burst(uint32_t requests, std::chrono::milliseconds window) {
  return {.burst_requests = requests, .burst_window = window};
}

QuotaLimits both(uint32_t b, std::chrono::milliseconds bw, uint32_t s,
                 std::chrono::milliseconds sw) {
  return {.burst_requests = b, .burst_window = bw, .sustained_requests = s, .sustained_window = sw};
}

Digest key(uint32_t n) {
  return digest_of({"test", std::to_string(n)});
}

TEST(QuotaCell, AllowsTheWindowsRequestsThenDeniesUntilItEnds) {
  QuotaCell c;
  const QuotaLimits l = burst(3, 10s);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.take(kStart + 1s, l).verdict, QuotaVerdict::allowed);
  const QuotaDecision d = c.take(kStart + 2500ms, l);
  EXPECT_EQ(d.verdict, QuotaVerdict::denied);
  EXPECT_EQ(d.window, QuotaWindowKind::burst);
  EXPECT_EQ(d.reset, 7500ms);
  EXPECT_EQ(c.take(kStart + 9999ms, l).verdict, QuotaVerdict::denied);
  EXPECT_EQ(c.take(kStart + 10s, l).verdict, QuotaVerdict::allowed);  // the next window
}

TEST(QuotaCell, ALateRequestCountsInTheNewerWindowAndKeepsItsCount) {
  // Its head began in the first window; another request has counted in the second since.
  QuotaCell c;
  const QuotaLimits l = burst(2, 10s);
  EXPECT_EQ(c.take(kStart + 10s, l).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(c.take(kStart + 9s, l).verdict, QuotaVerdict::allowed);  // late: counts in the second
  const QuotaDecision d = c.take(kStart + 11s, l);
  EXPECT_EQ(d.verdict, QuotaVerdict::denied);  // 2 of 2: the late one did not wipe the count
  EXPECT_EQ(d.reset, 9s);
}

TEST(QuotaCell, AWindowOfAnotherLengthCountedBeforeIsNotCarriedOver) {
  // A reload changed the policy's window from 1 s to 1 h: the old index is far "ahead".
  QuotaCell c;
  EXPECT_EQ(c.take(kStart + 5s, burst(1, 1s)).verdict, QuotaVerdict::allowed);
  const QuotaDecision d = c.take(kStart + 6s, burst(1, 3600s));
  EXPECT_EQ(d.verdict, QuotaVerdict::allowed);  // a new window of the new length
  EXPECT_EQ(c.take(kStart + 7s, burst(1, 3600s)).verdict, QuotaVerdict::denied);
}

TEST(QuotaCell, ADenialByEitherWindowCountsInNeither) {
  QuotaCell c;
  const QuotaLimits l = both(2, 10s, 3, 100s);
  EXPECT_EQ(c.take(kStart, l).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(c.take(kStart, l).verdict, QuotaVerdict::allowed);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.take(kStart, l).window, QuotaWindowKind::burst);
  // Had the burst denials counted in the sustained window, it would be full now.
  EXPECT_EQ(c.take(kStart + 10s, l).verdict, QuotaVerdict::allowed);
  const QuotaDecision d = c.take(kStart + 10s, l);
  EXPECT_EQ(d.window, QuotaWindowKind::sustained);
  EXPECT_EQ(d.reset, 90s);
  // Nor did the sustained denial count in the burst window: a fresh sustained window has the
  // burst's two again at once.
  EXPECT_EQ(c.take(kStart + 100s, l).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(c.take(kStart + 100s, l).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(c.take(kStart + 100s, l).window, QuotaWindowKind::burst);
}

TEST(QuotaCell, ReportsTheSustainedWindowWhenBothAreExhausted) {
  QuotaCell c;
  const QuotaLimits l = both(2, 10s, 2, 100s);
  c.take(kStart, l);
  c.take(kStart, l);
  const QuotaDecision d = c.take(kStart + 1s, l);
  EXPECT_EQ(d.window, QuotaWindowKind::sustained);
  EXPECT_EQ(d.reset, 99s);
}

TEST(QuotaCell, AtAWindowEdgeAtMostTwiceTheRequestsPassWithinOneWindowLength) {
  QuotaCell c;
  const QuotaLimits l = burst(5, 10s);
  // The whole allowance at the end of one window and the next one's at its start: 10 requests
  // within 2 ms, the most any span of one window length can see.
  int allowed = 0;
  for (int i = 0; i < 20; ++i)
    allowed += c.take(kStart + 9999ms, l).verdict == QuotaVerdict::allowed;
  for (int i = 0; i < 20; ++i)
    allowed += c.take(kStart + 10001ms, l).verdict == QuotaVerdict::allowed;
  EXPECT_EQ(allowed, 10);
  // Over any n whole windows, at most (n + 1) x requests: here 3 windows' span from mid-window.
  QuotaCell d;
  allowed = 0;
  for (auto t = kStart + 5s; t < kStart + 35s; t += 100ms) {
    allowed += d.take(t, l).verdict == QuotaVerdict::allowed;
  }
  EXPECT_EQ(allowed, 4 * 5);  // the span touches 4 windows and fills each
}

TEST(QuotaCell, IsIdleOnceEveryWindowCountedInHasEnded) {
  QuotaCell c;
  EXPECT_TRUE(c.idle_for(kStart, 0ns));
  c.take(kStart + 1s, both(5, 10s, 50, 100s));
  EXPECT_FALSE(c.idle_for(kStart + 10s, 0ns));
  EXPECT_FALSE(c.idle_for(kStart + 99s, 0ns));
  EXPECT_TRUE(c.idle_for(kStart + 100s, 0ns));
}

TEST(QuotaTable, HoldsAtMostItsLiveBucketsAndReclaimsTheEndedOnes) {
  QuotaTable t(4);
  const QuotaLimits short_window = burst(5, 10s);
  const QuotaLimits long_window = burst(5, 100s);
  EXPECT_EQ(t.decide(key(0), kStart, short_window).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(t.decide(key(1), kStart, short_window).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(t.decide(key(2), kStart, long_window).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(t.decide(key(3), kStart, long_window).verdict, QuotaVerdict::allowed);
  EXPECT_EQ(t.decide(key(4), kStart, short_window).verdict, QuotaVerdict::table_full);
  EXPECT_EQ(t.decide(key(0), kStart, short_window).verdict, QuotaVerdict::allowed);  // known
  EXPECT_EQ(t.live(), 4u);
  EXPECT_EQ(t.reclaim(kStart + 9s), 0u);
  EXPECT_EQ(t.reclaim(kStart + 10s), 2u);  // the two whose only window ended
  EXPECT_EQ(t.live(), 2u);
  EXPECT_EQ(t.decide(key(4), kStart + 10s, short_window).verdict, QuotaVerdict::allowed);
  // key(2) still has its count: 1 of 5 used.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.decide(key(2), kStart + 10s, long_window).verdict, QuotaVerdict::allowed);
  }
  EXPECT_EQ(t.decide(key(2), kStart + 10s, long_window).verdict, QuotaVerdict::denied);
}

TEST(QuotaTable, TheInMemoryBackendHolds4096Buckets) {
  QuotaTable t;
  EXPECT_EQ(t.max_live(), 4096u);
  EXPECT_EQ(t.bytes(), std::size_t{8192} * 64);
}

TEST(QuotaTable, ReactorsDecidingOnOneIdentityAtOnceAllowExactlyTheLimit) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  constexpr uint32_t kLimit = 7000;
  QuotaTable t;
  const QuotaLimits l = both(kLimit, 3600s, kLimit + 500, 7200s);
  std::atomic<int> allowed{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int n = 0; n < kPerThread; ++n) {
        QuotaDecision d = t.decide(key(7), kStart, l);
        // A holder descheduled mid-decision makes the others give up (busy), counting nothing.
        while (d.verdict == QuotaVerdict::busy) d = t.decide(key(7), kStart, l);
        ASSERT_NE(d.verdict, QuotaVerdict::table_full);
        if (d.verdict == QuotaVerdict::allowed) allowed.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(allowed.load(), static_cast<int>(kLimit));
}

// Every reactor sends the first requests of a new identity at the same instant: the identity
// gets one bucket, and the limit holds from its first request (no reactor decides on a bucket
// of its own that the others do not see).
TEST(QuotaTable, ReactorsMakingANewIdentityAtOnceAllowExactlyItsLimit) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2;  // per identity: 8 requests against a limit of 3
  constexpr uint32_t kIdentities = 400;
  constexpr uint32_t kLimit = 3;
  QuotaTable t;
  const QuotaLimits l = burst(kLimit, 3600s);
  std::vector<std::atomic<int>> allowed(kIdentities);
  std::atomic<int> table_full{0};
  std::barrier each(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (uint32_t k = 0; k < kIdentities; ++k) {
        each.arrive_and_wait();
        for (int n = 0; n < kPerThread; ++n) {
          QuotaDecision d = t.decide(key(k), kStart, l);
          while (d.verdict == QuotaVerdict::busy) d = t.decide(key(k), kStart, l);
          if (d.verdict == QuotaVerdict::table_full) table_full.fetch_add(1);  // (no ASSERT:
          if (d.verdict == QuotaVerdict::allowed) allowed[k].fetch_add(1);     // the barrier)
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table_full.load(), 0);
  for (uint32_t k = 0; k < kIdentities; ++k) EXPECT_EQ(allowed[k].load(), 3) << "identity " << k;
  EXPECT_EQ(t.live(), kIdentities);
}

}  // namespace
}  // namespace floodgate::resilience
