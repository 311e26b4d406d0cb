// What the circuit breaker's tests share: limits in one call, and a breaker with the manual
// clock that drives it (circuit_breaker_test.cpp, circuit_breaker_race_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/circuit_breaker.h"

namespace floodgate::resilience::breaker_test {

using namespace std::chrono_literals;
using enum CircuitState;
using Kind = CircuitPass::Kind;
constexpr CircuitVerdict kSuccess = CircuitVerdict::success;
constexpr CircuitVerdict kFailure = CircuitVerdict::failure;

// The streak alone (min_requests 1, no rate rule): issue 13's rule, which the state machine's
// tests drive.
inline CircuitLimits limits(uint32_t threshold, std::chrono::nanoseconds open,
                            uint32_t probes = 1) {
  return {.failure_threshold = threshold,
          .min_requests = 1,
          .failure_rate_percent = 0,
          .open = open,
          .half_open_max_probes = probes};
}

// Issue 35's rule: at least `min_requests` verdicts in a 10 s window, then `threshold` in a row
// or `rate` percent of them failed.
inline CircuitLimits window_limits(uint32_t min_requests, uint32_t rate, uint32_t threshold = 5) {
  return {.failure_threshold = threshold,
          .min_requests = min_requests,
          .failure_rate_percent = rate,
          .window = std::chrono::seconds(10),
          .open = std::chrono::seconds(30),
          .half_open_max_probes = 1};
}

// A breaker and the clock it is driven by, with the steps the tests repeat.
struct Fixture {
  explicit Fixture(CircuitLimits l = limits(3, 30s)) : breaker(l) {}

  CircuitState state() const { return breaker.state(clock.now()); }
  CircuitPass pass() { return breaker.try_pass(clock.now()); }
  CircuitTransition succeed() { return breaker.record(pass(), kSuccess, clock.now()); }
  CircuitTransition fail() { return breaker.record(pass(), kFailure, clock.now()); }
  void fail(int n) {
    for (int i = 0; i < n; ++i) fail();
  }
  void succeed(int n) {
    for (int i = 0; i < n; ++i) succeed();
  }
  // From closed: fails until open (the threshold), then lets the open period pass.
  void open_then_wait() {
    while (breaker.state(clock.now()) == closed) fail();
    clock.advance(breaker.limits().open);
  }

  ManualClock clock;
  CircuitBreaker breaker;
};

}  // namespace floodgate::resilience::breaker_test
