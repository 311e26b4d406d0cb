// The circuit breaker (resilience::CircuitBreaker): what it costs a request to a healthy backend
// (try_pass + a recorded success while closed: two loads of the state word, none of its writes,
// and the verdict's relaxed fetch_add on the window's own line), a refusal while open, and a
// half-open probe taken and given back (two compare-and-swaps), with proof that none of them
// allocates.
//
//   build-*/bench/floodgate_circuit_breaker_bench
//
// Each benchmark counts the heap allocations made by its own loop (core/heap_count.h) and fails
// if there is any. The two-thread runs stand for two reactors sending to one backend: while
// closed the state word's line is only read; what the two threads share is the window's
// counter, as they share the retry budget's.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/circuit_breaker.h"
#include "measured.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "the circuit breaker", step);
}

const Clock::time_point kNow = Clock::time_point{} + 1h;

// Closed: try_pass alone, the request path's check before it sends.
void BM_TryPassClosed_OneThread(benchmark::State& state) {
  CircuitBreaker breaker;
  measured(state, [&] {
    CircuitPass pass = breaker.try_pass(kNow);
    benchmark::DoNotOptimize(pass);
  });
}
BENCHMARK(BM_TryPassClosed_OneThread);

// Closed: the whole cost of a healthy attempt, try_pass and its recorded success.
void BM_PassAndSucceedClosed_OneThread(benchmark::State& state) {
  CircuitBreaker breaker;
  measured(state, [&] {
    CircuitPass pass = breaker.try_pass(kNow);
    benchmark::DoNotOptimize(pass);
    breaker.record(std::move(pass), CircuitVerdict::success, kNow);
  });
}
BENCHMARK(BM_PassAndSucceedClosed_OneThread);

// The same, two threads on one breaker: a read-only state line, a shared window counter.
void BM_PassAndSucceedClosed_TwoThreads(benchmark::State& state) {
  static CircuitBreaker breaker;
  measured(state, [&] {
    CircuitPass pass = breaker.try_pass(kNow);
    benchmark::DoNotOptimize(pass);
    breaker.record(std::move(pass), CircuitVerdict::success, kNow);
  });
}
BENCHMARK(BM_PassAndSucceedClosed_TwoThreads)->Threads(2)->UseRealTime();

// Open, before its time: a load and the period's end (two more loads), no write.
void BM_RefusedWhileOpen_TwoThreads(benchmark::State& state) {
  static CircuitBreaker breaker(
      {.failure_threshold = 1, .min_requests = 1, .failure_rate_percent = 0, .open = 1h});
  if (state.thread_index() == 0) {
    breaker.record(breaker.try_pass(kNow), CircuitVerdict::failure, kNow);
  }
  measured(state, [&] {
    CircuitPass pass = breaker.try_pass(kNow);
    benchmark::DoNotOptimize(pass);
  });
}
BENCHMARK(BM_RefusedWhileOpen_TwoThreads)->Threads(2)->UseRealTime();

// Half-open: a probe taken and abandoned, one CAS each way.
void BM_ProbeAndAbandon_OneThread(benchmark::State& state) {
  CircuitBreaker breaker({.failure_threshold = 1,
                          .min_requests = 1,
                          .failure_rate_percent = 0,
                          .open = 1s,
                          .half_open_max_probes = 1});
  breaker.record(breaker.try_pass(kNow), CircuitVerdict::failure, kNow);
  measured(state, [&] {
    CircuitPass pass = breaker.try_pass(kNow + 1s);
    benchmark::DoNotOptimize(pass);
    breaker.abandon(std::move(pass));
  });
}
BENCHMARK(BM_ProbeAndAbandon_OneThread);

}  // namespace
}  // namespace floodgate::resilience

BENCHMARK_MAIN();
