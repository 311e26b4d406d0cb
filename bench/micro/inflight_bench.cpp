// The front in-flight cap (resilience::InflightCap): the cost of enter + leave, of a refusal at
// the cap, and proof that neither allocates.
//
//   build-*/bench/floodgate_inflight_bench
//
// Each benchmark counts the heap allocations made by its own loop (floodgate's operator new
// counts per thread, core/heap_count.h) and fails if there is any. The two-thread runs stand for
// two reactors sharing the process-wide cap: its state word's cache line bounces between them.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "floodgate/resilience/inflight.h"
#include "measured.h"

namespace floodgate::resilience {
namespace {

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "the in-flight cap", step);
}

// Below the cap, one thread: one CAS to enter, one to leave.
void BM_EnterLeave_OneThread(benchmark::State& state) {
  InflightCap cap(1000);
  measured(state, [&] {
    Permit permit = cap.try_enter();
    benchmark::DoNotOptimize(permit);
  });
}
BENCHMARK(BM_EnterLeave_OneThread);

// Below the cap, two threads on one cap.
void BM_EnterLeave_TwoThreads(benchmark::State& state) {
  static InflightCap cap(1000);
  measured(state, [&] {
    Permit permit = cap.try_enter();
    benchmark::DoNotOptimize(permit);
  });
}
BENCHMARK(BM_EnterLeave_TwoThreads)->Threads(2)->UseRealTime();

// At the cap, one thread: what a refused request costs the cap (a relaxed read, no CAS).
void BM_RefusedAtTheCap_OneThread(benchmark::State& state) {
  InflightCap cap(1);
  const Permit held = cap.try_enter();
  measured(state, [&] {
    Permit permit = cap.try_enter();
    benchmark::DoNotOptimize(permit);
  });
}
BENCHMARK(BM_RefusedAtTheCap_OneThread);

// At the cap, two threads refused while the holder's line stays put.
void BM_RefusedAtTheCap_TwoThreads(benchmark::State& state) {
  static InflightCap cap(1);
  static const Permit held = cap.try_enter();
  measured(state, [&] {
    Permit permit = cap.try_enter();
    benchmark::DoNotOptimize(permit);
  });
}
BENCHMARK(BM_RefusedAtTheCap_TwoThreads)->Threads(2)->UseRealTime();

// Two threads contending for one slot: most tries of one thread find the other holding it, the
// overload case.
void BM_OneSlot_TwoThreads(benchmark::State& state) {
  static InflightCap cap(1);
  measured(state, [&] {
    Permit permit = cap.try_enter();
    benchmark::DoNotOptimize(permit);
  });
}
BENCHMARK(BM_OneSlot_TwoThreads)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace floodgate::resilience

BENCHMARK_MAIN();
