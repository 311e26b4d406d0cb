// The loop every micro benchmark runs: `step` as the benchmark loop, items per second, and the
// heap allocations per iteration (core/heap_count.h), which must be none. The count is
// process-wide over counted threads, so only thread 0 is counted and checked: the other
// threads run the same loop, and thread 0 (the framework's main thread) allocates outside its
// own loop while they are still in theirs.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "floodgate/core/heap_count.h"

namespace floodgate::bench {

// `what` names the thing measured in the error of a loop that allocated ("admission").
template <class Step>
void measured(benchmark::State& state, const char* what, Step step) {
  const bool counting = state.thread_index() == 0;
  if (counting) count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (auto _ : state) step();
  const uint64_t allocations = counted_heap_allocations() - before;
  state.SetItemsProcessed(state.iterations());  // summed over threads: items/s is the total
  if (!counting) return;
  state.counters["allocs/op"] =
      benchmark::Counter(static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
  if (allocations != 0) {
    state.SkipWithError((std::string(what) + " allocated on the heap").c_str());
  }
}

}  // namespace floodgate::bench
