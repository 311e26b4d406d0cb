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

inline CircuitLimits limits(uint32_t threshold, std::chrono::nanoseconds open,
                            uint32_t probes = 1) {
  return {.failure_threshold = threshold, .open = open, .half_open_max_probes = probes};
}

// A breaker and the clock it is driven by, with the steps the tests repeat.
struct Fixture {
  explicit Fixture(CircuitLimits l = limits(3, 30s)) : breaker(l) {}

  CircuitState state() const { return breaker.state(clock.now()); }
  CircuitPass pass() { return breaker.try_pass(clock.now()); }
  void succeed() { breaker.record(pass(), kSuccess, clock.now()); }
  void fail() { breaker.record(pass(), kFailure, clock.now()); }
  void fail(int n) {
    for (int i = 0; i < n; ++i) fail();
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
