// Admission: the cost of admit + release, and proof that it allocates nothing.
//
//   build-*/bench/floodgate_admission_bench
//
// Each benchmark counts the heap allocations made by its own loop (floodgate's operator new
// counts per thread, core/heap_count.h) and fails if there is any.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "floodgate/core/heap_count.h"
#include "floodgate/upstream/admission.h"

namespace floodgate {
namespace {

struct Flag {
  std::atomic<bool> set{false};
  static void on_complete(void* self, AdmitStatus) noexcept {
    static_cast<Flag*>(self)->set.store(true, std::memory_order_release);
  }
};

// Runs the benchmark loop body `step` and reports allocations per iteration. The count is
// process-wide over counted threads, so only thread 0 is counted and checked: the other
// threads run the same loop, and thread 0 (the framework's main thread) allocates outside its
// own loop while they are still in theirs.
template <class Step>
void measured(benchmark::State& state, Step step) {
  const bool counting = state.thread_index() == 0;
  if (counting) count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (auto _ : state) step();
  const uint64_t allocations = counted_heap_allocations() - before;
  state.SetItemsProcessed(state.iterations());  // summed over threads: items/s is the total
  if (!counting) return;
  state.counters["allocs/op"] =
      benchmark::Counter(static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
  if (allocations != 0) state.SkipWithError("admission allocated on the heap");
}

// The fast path, one thread: one CAS to admit, one to release.
void BM_AdmitRelease_Uncontended(benchmark::State& state) {
  Admission admission({.max_active = 1000, .max_pending = 16});
  Flag flag;
  AdmissionWaiter waiter(&Flag::on_complete, &flag);
  measured(state, [&] {
    auto result = admission.admit(waiter);
    benchmark::DoNotOptimize(result);
  });
}
BENCHMARK(BM_AdmitRelease_Uncontended);

// The fast path, two threads hammering one admission (the state word's cache line bounces).
void BM_AdmitRelease_TwoThreads(benchmark::State& state) {
  static Admission admission({.max_active = 1000, .max_pending = 16});
  Flag flag;
  AdmissionWaiter waiter(&Flag::on_complete, &flag);
  measured(state, [&] {
    auto result = admission.admit(waiter);
    benchmark::DoNotOptimize(result);
  });
}
BENCHMARK(BM_AdmitRelease_TwoThreads)->Threads(2)->UseRealTime();

// The slow path, one thread: queue behind the slot it holds, hand the slot over, take it.
void BM_QueueAndHandoff_Uncontended(benchmark::State& state) {
  Admission admission({.max_active = 1, .max_pending = 1});
  Flag flag;
  AdmissionWaiter waiter(&Flag::on_complete, &flag);
  AdmissionWaiter unused(&Flag::on_complete, &flag);
  Permit held = admission.admit(unused).permit;
  measured(state, [&] {
    const auto result = admission.admit(waiter);
    benchmark::DoNotOptimize(result.status);
    held.release();  // handoff: runs the completion
    held = waiter.take_permit();
  });
}
BENCHMARK(BM_QueueAndHandoff_Uncontended);

// Two threads sharing one slot: each admit mostly queues and waits for the other's handoff, so
// this measures the handoff round trip between threads (yielding while it waits, as two
// reactors on two cores would each go on with other work).
void BM_AdmitRelease_TwoThreadsOneSlot(benchmark::State& state) {
  static Admission admission({.max_active = 1, .max_pending = 2});
  Flag flag;
  AdmissionWaiter waiter(&Flag::on_complete, &flag);
  measured(state, [&] {
    auto result = admission.admit(waiter);
    if (result.status == AdmitStatus::queued) {
      while (!flag.set.load(std::memory_order_acquire)) std::this_thread::yield();
      flag.set.store(false, std::memory_order_relaxed);
      result.permit = waiter.take_permit();
    }
    benchmark::DoNotOptimize(result);
  });
}
BENCHMARK(BM_AdmitRelease_TwoThreadsOneSlot)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace floodgate

BENCHMARK_MAIN();
