// The process-wide token bucket (resilience::Gcra, over the GcraCell that each bucket of a
// scoped rate limit is): what a take costs from one thread, and from two sharing one bucket (a
// single hot client spread over two reactors: the bucket's line bounces and a take may retry
// its compare-and-swap), admitted or refused, with proof that none of them allocates.
//
//   build-*/bench/floodgate_gcra_bench
//
// Each benchmark counts the heap allocations made by its own loop (core/heap_count.h) and fails
// if there is any.
#include <benchmark/benchmark.h>

#include <chrono>

#include "floodgate/resilience/gcra.h"
#include "measured.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "the token bucket", step);
}

// A take that is admitted: the clock moves by one interval per take, so the bucket never empties.
void BM_TakeAdmitted(benchmark::State& state) {
  static Gcra bucket(1'000'000'000, 1'000);
  thread_local Gcra::Clock::time_point now = Gcra::Clock::time_point{} + 1h;
  measured(state, [&] {
    now += 1ns;
    benchmark::DoNotOptimize(bucket.take(now));
  });
}
BENCHMARK(BM_TakeAdmitted)->Threads(1)->Threads(2)->UseRealTime();

// A take that is refused: the clock stands still on an empty bucket (one load, no write).
void BM_TakeRefused(benchmark::State& state) {
  static Gcra bucket(1, 1);
  static const Gcra::Clock::time_point now = Gcra::Clock::time_point{} + 1h;
  (void)bucket.take(now);
  measured(state, [&] { benchmark::DoNotOptimize(bucket.take(now)); });
}
BENCHMARK(BM_TakeRefused)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace floodgate::resilience

BENCHMARK_MAIN();
