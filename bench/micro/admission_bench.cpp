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

#include "floodgate/upstream/admission.h"
#include "measured.h"

namespace floodgate {
namespace {

struct Flag {
  std::atomic<bool> set{false};
  static void on_complete(void* self, AdmitStatus) noexcept {
    static_cast<Flag*>(self)->set.store(true, std::memory_order_release);
  }
};

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "admission", step);
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
