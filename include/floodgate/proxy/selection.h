// Choosing the backend of an attempt: the balancer's pick among the backends that may take it.
// A backend may take an attempt when health checks have not marked it down, it is below the
// pool's max_active_per_backend, and (breakers on) its circuit lets the attempt through:
// closed or half-open with a probe permit free for a first attempt, closed only for a retry or
// a hedge (an alternate must be a backend known to be well). Health owns `down` and the breaker
// owns its state; selection only reads both.
//
// When no backend may take a first attempt, the answer says why: every backend is down
// (no_healthy_backend), every backend that is up has an open circuit (when_all_open:
// least_recently_failed, the default, fails open: it sends the attempt to the backend whose
// latest failure is oldest and says so in `fail_open`, so that a pool never blacks out on its
// breakers, a one-backend pool included; reject is 503 circuit_open with Retry-After until the
// first half-open), or every one is at its cap (no_eligible_backend).
//
// The try_pass() that moves a circuit from open to half-open is made here: its line in the
// process log is written here too (circuit_log.h), naming `up`.
//
// In shadow mode (circuit_breaker.mode = "shadow") selection ignores the circuits, but each
// attempt still takes a pass (a forced one when the circuit would refuse it), so the breakers
// keep their state from every verdict; a first attempt that enforce mode would have answered
// circuit_open says so in `would_refuse`.
//
// Thread-safety: the reactor's thread (the balancer is the reactor's own); the backends'
// counts and breakers are shared atomics.
#pragma once

#include <cstdint>

#include "floodgate/core/clock.h"
#include "floodgate/core/reason.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/circuit_breaker.h"
#include "floodgate/upstream/backend_load.h"

namespace floodgate::proxy {

struct Selection {
  int32_t backend = -1;                // index in the upstream; -1: none, see `refusal`
  InFlight entered;                    // the attempt's count in the backend's load
  resilience::CircuitPass pass;        // empty when breakers are off
  Reason refusal = Reason::none;       // no backend: no_healthy_backend, circuit_open, ...
  Clock::time_point half_open_at{};    // circuit_open: when the first open circuit half-opens
  Reason would_refuse = Reason::none;  // shadow mode: circuit_open when enforce would refuse
  // Every backend that is up had an open circuit and this one was picked anyway
  // (when_all_open = least_recently_failed): floodgate_circuit_fail_open_total.
  bool fail_open = false;

  explicit operator bool() const noexcept { return backend >= 0; }
};

// A first attempt of a request to `up`.
Selection select_primary(const Upstream& up, Balancer& balancer, const FailurePolicy& policy,
                         Clock::time_point now);
// A retry or a hedge: another backend than `exclude`, closed circuit (breakers on). An empty
// selection (refusal none) when there is none.
Selection select_alternate(const Upstream& up, Balancer& balancer, const FailurePolicy& policy,
                           Clock::time_point now, uint32_t exclude);

}  // namespace floodgate::proxy
