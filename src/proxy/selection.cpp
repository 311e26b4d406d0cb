#include "floodgate/proxy/selection.h"

#include <limits>

#include "floodgate/proxy/circuit_log.h"

namespace floodgate::proxy {
namespace {

using resilience::CircuitState;

// Backends whose circuit refused this selection's attempt (a half-open one with every probe
// permit out, or one that opened since its state was read): not picked again. The first 64 are
// remembered; beyond them the bounded number of tries is the guard.
class Refused {
 public:
  bool has(std::size_t i) const noexcept { return i < 64 && (bits_ >> i & 1U) != 0; }
  void add(std::size_t i) noexcept {
    if (i < 64) bits_ |= uint64_t{1} << i;
  }

 private:
  uint64_t bits_ = 0;
};

bool down(const Backend& b) noexcept {
  return b.health->down.load(std::memory_order_relaxed);
}

// The pick loop both selections share. `alternate`: closed circuits only, never `exclude`.
Selection pick(const Upstream& up, Balancer& balancer, const FailurePolicy& policy,
               Clock::time_point now, int64_t exclude, Refused& refused) {
  const uint32_t cap = up.policy.max_active_per_backend;
  const bool alternate = exclude >= 0;
  const bool breakers = policy.breakers && !policy.breakers_shadow;  // they decide
  const auto active = [&up](std::size_t i) {
    return up.backends[i]->load.active.load(std::memory_order_relaxed);
  };
  const auto circuit_ok = [&](std::size_t i) {
    if (!breakers) return true;
    const CircuitState s = up.backends[i]->breaker->state(now);
    return alternate ? s == CircuitState::closed : s != CircuitState::open;
  };
  const auto eligible = [&](std::size_t i) {
    return static_cast<int64_t>(i) != exclude && !refused.has(i) && !down(*up.backends[i]) &&
           (cap == 0 || active(i) < cap) && circuit_ok(i);
  };
  // max_active_per_backend is a selection filter, not a second queue. Between the pick and the
  // compare-and-swap another reactor can take a backend's last slot, or a circuit can open or
  // run out of probe permits: pick again, at most once per backend.
  Selection s;
  for (std::size_t tries = 0; tries <= up.backends.size(); ++tries) {
    const auto chosen = balancer.pick(active, eligible);
    if (!chosen) break;
    Backend& b = *up.backends[*chosen];
    InFlight entered = InFlight::enter_below(b.load, cap);
    if (!entered) continue;
    if (policy.breakers) {
      s.pass = b.breaker->try_pass(now);
      if (s.pass.half_opened()) log_circuit_half_open(up, b, now);
    }
    if (breakers) {
      if (!s.pass || (alternate && s.pass.probe())) {
        s.pass = {};  // a probe permit goes back at once
        refused.add(*chosen);
        continue;
      }
    } else if (policy.breakers && !s.pass) {
      // shadow: the breaker keeps its state from this attempt too
      s.pass = b.breaker->force_pass();
    }
    s.backend = static_cast<int32_t>(*chosen);
    s.entered = std::move(entered);
    return s;
  }
  s.pass = {};
  return s;
}

// Shadow mode: would enforce mode have found every backend that is up open?
bool every_up_backend_open(const Upstream& up, Clock::time_point now) {
  bool any_up = false;
  for (const auto& b : up.backends) {
    if (down(*b)) continue;
    any_up = true;
    if (b->breaker->state(now) != CircuitState::open) return false;
  }
  return any_up;
}

}  // namespace

Selection select_primary(const Upstream& up, Balancer& balancer, const FailurePolicy& policy,
                         Clock::time_point now) {
  Refused refused;
  Selection s = pick(up, balancer, policy, now, -1, refused);
  if (s) {
    // Enforce mode refuses only with when_all_open = reject; least_recently_failed sends it on.
    if (policy.breakers_shadow && policy.when_all_open == resilience::WhenAllOpen::reject &&
        every_up_backend_open(up, now)) {
      s.would_refuse = Reason::circuit_open;
    }
    return s;
  }
  // No backend may take it: say why.
  bool any_up = false;
  bool any_passable = false;  // up, and its circuit would let an attempt through
  Clock::time_point first_half_open = Clock::time_point::max();
  for (std::size_t i = 0; i < up.backends.size(); ++i) {
    const Backend& b = *up.backends[i];
    if (down(b)) continue;
    any_up = true;
    const bool open =
        policy.breakers && (refused.has(i) || b.breaker->state(now) == CircuitState::open);
    if (!open) {
      any_passable = true;
    } else if (const auto at = b.breaker->half_open_at(); at < first_half_open) {
      first_half_open = at;
    }
  }
  if (!any_up) {
    s.refusal = Reason::no_healthy_backend;
    return s;
  }
  if (!any_passable) {
    if (policy.when_all_open == resilience::WhenAllOpen::reject) {
      s.refusal = Reason::circuit_open;
      s.half_open_at = first_half_open;
      return s;
    }
    // least_recently_failed: the up backend below its cap whose latest failure is oldest.
    const uint32_t cap = up.policy.max_active_per_backend;
    int64_t oldest = -1;
    auto oldest_at = Clock::time_point::max();
    for (std::size_t i = 0; i < up.backends.size(); ++i) {
      const Backend& b = *up.backends[i];
      if (down(b) || (cap != 0 && b.load.active.load(std::memory_order_relaxed) >= cap)) continue;
      if (const auto at = b.breaker->last_failure(); at < oldest_at) {
        oldest_at = at;
        oldest = static_cast<int64_t>(i);
      }
    }
    if (oldest >= 0) {
      Backend& b = *up.backends[static_cast<std::size_t>(oldest)];
      if (InFlight entered = InFlight::enter_below(b.load, cap)) {
        s.backend = static_cast<int32_t>(oldest);
        s.entered = std::move(entered);
        s.pass = b.breaker->force_pass();
        s.fail_open = true;
        return s;
      }
    }
  }
  s.refusal = up.policy.max_active_per_backend != 0 ? Reason::no_eligible_backend
                                                    : Reason::upstream_connect_failed;
  return s;
}

Selection select_alternate(const Upstream& up, Balancer& balancer, const FailurePolicy& policy,
                           Clock::time_point now, uint32_t exclude) {
  Refused refused;
  return pick(up, balancer, policy, now, exclude, refused);
}

}  // namespace floodgate::proxy
