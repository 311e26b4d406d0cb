// The retry budget (resilience::RetryBudget): what counting a primary costs a request (a load
// and a relaxed fetch_add on the current bucket), from one thread and from several sharing one
// budget (the global budget is shared by every reactor: its current bucket's line bounces), and
// what a retry decision costs (two rings summed and a compare-and-swap), with proof that none of
// them allocates.
//
//   build-*/bench/floodgate_retry_budget_bench
//
// Each benchmark counts the heap allocations made by its own loop (core/heap_count.h) and fails
// if there is any.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/retry_budget.h"
#include "measured.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "the retry budget", step);
}

const Clock::time_point kNow = Clock::time_point{} + 1h;

// The hot path: a primary counted in a current bucket.
void BM_CountPrimary(benchmark::State& state) {
  static RetryBudget budget(10);
  measured(state, [&] { budget.count_primary(kNow); });
}
BENCHMARK(BM_CountPrimary)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

// One budget per thread (an upstream's budget used by one reactor only): no sharing.
void BM_CountPrimary_OwnBudget(benchmark::State& state) {
  RetryBudget budget(10);
  measured(state, [&] { budget.count_primary(kNow); });
}
BENCHMARK(BM_CountPrimary_OwnBudget)->Threads(1)->Threads(4)->UseRealTime();

// A retry decision that admits, and its give_back (the helper's refusal path), one thread.
void BM_TryRetryAndGiveBack(benchmark::State& state) {
  RetryBudget budget(10);
  for (int i = 0; i < 1000; ++i) budget.count_primary(kNow);
  measured(state, [&] {
    const bool admitted = budget.try_retry(kNow);
    benchmark::DoNotOptimize(admitted);
    budget.give_back(kNow);
  });
}
BENCHMARK(BM_TryRetryAndGiveBack);

// A refused retry (the budget spent: what an outage does all day).
void BM_TryRetryRefused(benchmark::State& state) {
  RetryBudget budget(0);
  (void)budget.try_retry(kNow);
  measured(state, [&] {
    const bool admitted = budget.try_retry(kNow);
    benchmark::DoNotOptimize(admitted);
  });
}
BENCHMARK(BM_TryRetryRefused);

}  // namespace
}  // namespace floodgate::resilience

BENCHMARK_MAIN();
