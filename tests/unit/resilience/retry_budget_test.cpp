// The retry budget (resilience::RetryBudget): the allowance arithmetic, the sliding window on a
// ManualClock, give_back and the two-budget helper, the per-upstream ratio, and that its
// per-request calls allocate nothing. The races are in retry_budget_race_test.cpp.
#include "floodgate/resilience/retry_budget.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "floodgate/core/clock.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/resilience/params.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

// A budget and the clock that drives it. The clock starts on a slice boundary (1 h).
struct Fixture {
  explicit Fixture(uint32_t ratio, std::chrono::nanoseconds window = 10s, uint32_t min_retries = 0)
      : budget(ratio, window, min_retries) {}

  Clock::time_point now() const { return clock.now(); }
  void primaries(uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) budget.count_primary(now());
  }
  // try_retry until it refuses (at most `limit` times); the number admitted.
  uint64_t drain(uint64_t limit = 100'000) {
    uint64_t admitted = 0;
    while (admitted < limit && budget.try_retry(now())) ++admitted;
    return admitted;
  }

  ManualClock clock;
  RetryBudget budget;
};

// --- the allowance ---

struct Arithmetic {
  uint32_t ratio;
  uint64_t primaries;
  uint64_t allowance;
};

class RetryBudgetArithmetic : public ::testing::TestWithParam<Arithmetic> {};

TEST_P(RetryBudgetArithmetic, AdmitsFloorOfPrimariesTimesRatioPlusOne) {
  const Arithmetic a = GetParam();
  Fixture f(a.ratio);
  f.primaries(a.primaries);
  EXPECT_EQ(f.budget.primaries(f.now()), a.primaries);
  EXPECT_EQ(f.budget.allowance(f.now()), a.allowance);
  EXPECT_EQ(f.budget.remaining(f.now()), a.allowance);
  EXPECT_EQ(f.drain(), a.allowance);
  EXPECT_EQ(f.budget.retries(f.now()), a.allowance);
  EXPECT_EQ(f.budget.remaining(f.now()), 0u);
  EXPECT_FALSE(f.budget.try_retry(f.now()));
  EXPECT_EQ(f.budget.retries(f.now()), a.allowance);  // a refusal counts nothing
}

INSTANTIATE_TEST_SUITE_P(
    Table, RetryBudgetArithmetic,
    ::testing::Values(Arithmetic{0, 0, 1}, Arithmetic{0, 9, 1}, Arithmetic{0, 10, 1},
                      Arithmetic{0, 19, 1}, Arithmetic{0, 20, 1}, Arithmetic{10, 0, 1},
                      Arithmetic{10, 9, 1}, Arithmetic{10, 10, 2}, Arithmetic{10, 19, 2},
                      Arithmetic{10, 20, 3}, Arithmetic{100, 0, 1}, Arithmetic{100, 9, 10},
                      Arithmetic{100, 10, 11}, Arithmetic{100, 19, 20}, Arithmetic{100, 20, 21}),
    [](const ::testing::TestParamInfo<Arithmetic>& info) {
      return "ratio" + std::to_string(info.param.ratio) + "_primaries" +
             std::to_string(info.param.primaries);
    });

TEST(RetryBudget, PrimariesCountedAfterRetriesRaiseTheAllowance) {
  Fixture f(10);
  EXPECT_EQ(f.drain(), 1u);
  f.primaries(10);
  EXPECT_EQ(f.drain(), 1u);
  EXPECT_EQ(f.budget.retries(f.now()), 2u);
}

TEST(RetryBudget, ARatioAbove100IsTakenAs100) {
  Fixture f(250);
  EXPECT_EQ(f.budget.ratio_percent(), 100u);
  f.primaries(5);
  EXPECT_EQ(f.budget.allowance(f.now()), 6u);
}

TEST(RetryBudget, TheWindowIsAMultipleOfTenTicksAndAtLeastTen) {
  EXPECT_EQ(RetryBudget(10, 10s).window(), 10s);
  EXPECT_EQ(RetryBudget(10, 15ns).window(), 10ns);
  EXPECT_EQ(RetryBudget(10, 3ns).window(), 10ns);
  EXPECT_EQ(RetryBudget(10, 0ns).window(), 10ns);
  EXPECT_EQ(RetryBudget(10, -5s).window(), 10ns);
  EXPECT_EQ(RetryBudget(10).window(), 10s);
}

// Slice numbers count from the clock's epoch (boot, for the steady clock): past half the tag
// period (2^23 slices, about 97 days of uptime with 1 s slices) an empty bucket's tag 0 reads
// as a later slice than the current one, and must still restart.
TEST(RetryBudget, CountsAndRetriesFromAnUptimePastHalfTheTagPeriod) {
  for (const auto uptime :
       {std::chrono::seconds((1 << 23) + 5), std::chrono::seconds(120 * 86400)}) {
    Fixture f(20);
    f.clock.set(Clock::time_point{} + uptime);
    f.primaries(100);  // floor(100 x 20 / 100) + 1 = 21
    EXPECT_EQ(f.budget.allowance(f.now()), 21u) << uptime.count();
    EXPECT_EQ(f.drain(), 21u) << uptime.count();
  }
}

// --- ratio 0: one retry per window ---

TEST(RetryBudget, RatioZeroAdmitsOneRetryPerWindow) {
  Fixture f(0);
  f.primaries(1000);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  f.clock.advance(5s);
  f.primaries(1000);
  EXPECT_FALSE(f.budget.try_retry(f.now()));  // the first is still in the window
  f.clock.advance(5s);                        // its slice has left
  EXPECT_EQ(f.budget.retries(f.now()), 0u);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  EXPECT_FALSE(f.budget.try_retry(f.now()));
}

// --- min_retries: a floor for quiet pools ---

TEST(RetryBudget, AQuietPoolGetsAtLeastMinRetriesPerWindow) {
  Fixture f(10, 10s, 3);
  f.primaries(5);  // the ratio alone: floor(5 x 10 / 100) + 1 = 1
  EXPECT_EQ(f.budget.allowance(f.now()), 3u);
  EXPECT_EQ(f.drain(), 3u);
  f.clock.advance(10s);  // a new window, the same floor
  EXPECT_EQ(f.drain(), 3u);
}

TEST(RetryBudget, UnderLoadTheRatioDecidesAboveTheFloor) {
  Fixture f(10, 10s, 3);
  f.primaries(200);  // floor(200 x 10 / 100) + 1 = 21
  EXPECT_EQ(f.budget.allowance(f.now()), 21u);
  EXPECT_EQ(f.drain(), 21u);
}

TEST(RetryBudget, MinRetriesZeroKeepsTheRatiosFormula) {
  Fixture f(10, 10s, 0);
  f.primaries(5);
  EXPECT_EQ(f.drain(), 1u);
}

TEST(RetryBudget, TheFloorTakesNoPrimariesToApply) {
  Fixture f(0, 10s, 3);
  EXPECT_EQ(f.budget.remaining(f.now()), 3u);
  EXPECT_EQ(f.drain(), 3u);
  EXPECT_EQ(f.budget.remaining(f.now()), 0u);
}

// --- the sliding window ---

TEST(RetryBudget, PrimariesStopCountingWhenTheirSliceLeavesTheWindow) {
  Fixture f(10);
  f.primaries(30);  // slice 0 (its first instant)
  f.clock.advance(1s - 1ns);
  f.primaries(20);  // slice 0 (its last instant)
  f.clock.advance(1ns);
  f.primaries(10);            // slice 1
  f.clock.advance(9s - 1ns);  // the last instant of slice 9: slice 0 is still in
  EXPECT_EQ(f.budget.primaries(f.now()), 60u);
  f.clock.advance(1ns);  // slice 10: slice 0 has left, 9 s + 1 ns after its last primary
  EXPECT_EQ(f.budget.primaries(f.now()), 10u);
  EXPECT_EQ(f.budget.allowance(f.now()), 2u);
  f.clock.advance(1s);
  EXPECT_EQ(f.budget.primaries(f.now()), 0u);
  EXPECT_EQ(f.budget.allowance(f.now()), 1u);
}

TEST(RetryBudget, RetriesStopCountingWhenTheirSliceLeavesTheWindow) {
  Fixture f(100);
  f.primaries(4);
  EXPECT_EQ(f.drain(), 5u);
  f.clock.advance(3s);
  f.primaries(4);  // window: 8 primaries, allowance 9, 5 retries
  EXPECT_EQ(f.drain(), 4u);
  f.clock.advance(7s);  // slice 10: the first slice's 4 primaries and 5 retries have left
  EXPECT_EQ(f.budget.primaries(f.now()), 4u);
  EXPECT_EQ(f.budget.retries(f.now()), 4u);
  EXPECT_EQ(f.budget.remaining(f.now()), 1u);
  EXPECT_EQ(f.drain(), 1u);
}

TEST(RetryBudget, RetriesOfEarlierSlicesInTheWindowCountAgainstTheAllowance) {
  Fixture f(10);
  f.primaries(20);  // allowance 3
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(f.budget.try_retry(f.now()));
    f.clock.advance(2s);
  }
  EXPECT_FALSE(f.budget.try_retry(f.now()));  // 6 s in: three retries, three slices
  EXPECT_EQ(f.budget.retries(f.now()), 3u);
}

TEST(RetryBudget, ABurstAfterALongHealthyPeriodGetsOnlyTheCurrentWindowsAllowance) {
  Fixture f(10);
  // 100 s of healthy traffic at 100 primaries a second: 10,000 since start (the seed's count
  // would allow 1,001 retries), 1,000 in the window.
  for (int second = 0; second < 100; ++second) {
    f.primaries(100);
    f.clock.advance(1s);
  }
  f.clock.advance(-1ns);  // the last instant of the last healthy second
  EXPECT_EQ(f.budget.primaries(f.now()), 1000u);
  // The outage: every primary fails and asks for a retry at once.
  EXPECT_EQ(f.drain(), 101u);
  EXPECT_EQ(f.budget.remaining(f.now()), 0u);
}

TEST(RetryBudget, ALongIdleLeavesNoStaleCountInAnyBucket) {
  Fixture f(100);
  for (int slice = 0; slice < 10; ++slice) {
    f.primaries(7);
    EXPECT_TRUE(f.budget.try_retry(f.now()));
    f.clock.advance(1s);
  }
  f.clock.advance(1h + 300ms);
  EXPECT_EQ(f.budget.primaries(f.now()), 0u);
  EXPECT_EQ(f.budget.retries(f.now()), 0u);
  f.primaries(1);
  EXPECT_EQ(f.budget.primaries(f.now()), 1u);
  EXPECT_EQ(f.drain(), 2u);
}

TEST(RetryBudget, ACallerAWholeWindowBehindIsNeitherCountedNorAdmitted) {
  Fixture f(100);
  const Clock::time_point late = f.now();
  f.clock.advance(10s);  // the bucket of `late`'s slice now holds slice 10
  f.primaries(1);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  f.budget.count_primary(late);
  EXPECT_FALSE(f.budget.try_retry(late));
  f.budget.give_back(late);
  EXPECT_EQ(f.budget.primaries(f.now()), 1u);
  EXPECT_EQ(f.budget.retries(f.now()), 1u);
}

TEST(RetryBudget, TimesBeforeTheClocksEpochAreTakenAsTheEpoch) {
  RetryBudget budget(100);
  const Clock::time_point before = Clock::time_point{} - 5s;
  budget.count_primary(before);
  EXPECT_EQ(budget.primaries(Clock::time_point{}), 1u);
  EXPECT_TRUE(budget.try_retry(before));
}

// --- give_back and the two-budget helper ---

TEST(RetryBudget, GiveBackUndoesOneAdmittedRetry) {
  Fixture f(0);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  EXPECT_EQ(f.budget.remaining(f.now()), 0u);
  f.budget.give_back(f.now());
  EXPECT_EQ(f.budget.retries(f.now()), 0u);
  EXPECT_EQ(f.budget.remaining(f.now()), 1u);
  f.budget.give_back(f.now());  // nothing left to give back: no underflow
  EXPECT_EQ(f.budget.retries(f.now()), 0u);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  EXPECT_FALSE(f.budget.try_retry(f.now()));
}

TEST(RetryBudget, GiveBackOfARetryWhoseSliceHasLeftDoesNothing) {
  Fixture f(100);
  f.primaries(1);
  EXPECT_TRUE(f.budget.try_retry(f.now()));
  const Clock::time_point then = f.now();
  f.clock.advance(10s);
  EXPECT_TRUE(f.budget.try_retry(f.now()));  // restarts the same bucket for slice 10
  f.budget.give_back(then);
  EXPECT_EQ(f.budget.retries(f.now()), 1u);
}

TEST(TryRetryBoth, TakesFromBothWhenBothAdmit) {
  ManualClock clock;
  RetryBudget global(100);
  RetryBudget upstream(100);
  global.count_primary(clock.now());
  upstream.count_primary(clock.now());
  EXPECT_TRUE(try_retry_both(global, upstream, clock.now()));
  EXPECT_EQ(global.retries(clock.now()), 1u);
  EXPECT_EQ(upstream.retries(clock.now()), 1u);
}

TEST(TryRetryBoth, GivesTheFirstsRetryBackWhenTheSecondRefuses) {
  ManualClock clock;
  RetryBudget global(100);
  RetryBudget upstream(0);
  for (int i = 0; i < 10; ++i) global.count_primary(clock.now());
  upstream.count_primary(clock.now());
  EXPECT_TRUE(try_retry_both(global, upstream, clock.now()));  // the upstream's one slot
  EXPECT_FALSE(try_retry_both(global, upstream, clock.now()));
  EXPECT_FALSE(try_retry_both(global, upstream, clock.now()));
  EXPECT_EQ(global.retries(clock.now()), 1u);
  EXPECT_EQ(global.remaining(clock.now()), 10u);
  EXPECT_EQ(upstream.retries(clock.now()), 1u);
}

TEST(TryRetryBoth, LeavesTheSecondAloneWhenTheFirstRefuses) {
  ManualClock clock;
  RetryBudget global(0);
  RetryBudget upstream(100);
  EXPECT_TRUE(global.try_retry(clock.now()));
  EXPECT_FALSE(try_retry_both(global, upstream, clock.now()));
  EXPECT_EQ(upstream.retries(clock.now()), 0u);
  EXPECT_EQ(global.retries(clock.now()), 1u);
}

// --- the params ---

TEST(RetryBudget, AnUpstreamsRatioIsItsOverrideElseTheGlobalOne) {
  RetryBudgetParams params;
  params.ratio_percent = 10;
  params.per_route_ratio_percent = {{"api", 25}, {"static", 0}};
  EXPECT_EQ(retry_ratio_percent(params, "api"), 25u);
  EXPECT_EQ(retry_ratio_percent(params, "static"), 0u);
  EXPECT_EQ(retry_ratio_percent(params, "other"), 10u);
  const RetryBudget budget(retry_ratio_percent(params, "api"), params.window);
  EXPECT_EQ(budget.ratio_percent(), 25u);
  EXPECT_EQ(budget.window(), 10s);
}

// --- no allocation ---

TEST(RetryBudget, ThePerRequestCallsDoNotAllocate) {
  Fixture f(10);
  RetryBudget upstream(5);
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  uint64_t sink = 0;
  for (int i = 0; i < 1000; ++i) {
    f.budget.count_primary(f.now());
    upstream.count_primary(f.now());
    if (try_retry_both(f.budget, upstream, f.now())) ++sink;
    if (f.budget.try_retry(f.now())) f.budget.give_back(f.now());
    sink += f.budget.remaining(f.now()) + upstream.primaries(f.now());
    f.clock.advance(37ms);
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
  EXPECT_GT(sink, 0u);
}

}  // namespace
}  // namespace floodgate::resilience
