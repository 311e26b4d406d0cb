// The local runtime protection on each route's chain (docs/resilience.md, issue 14), after
// routing and before pool admission, in this order:
//   brownout            503 brownout for an upstream not in core_routes while brownout is on;
//   adaptive admission  503 adaptive_limit at the AIMD ceiling (resilience/adaptive.h);
//   route cap           503 route_cap when the upstream's concurrent cap is full;
//   global cap          503 global_cap when the cap across upstreams is full.
// Each answers with Retry-After (route_queue.retry_after; adaptive admission the front cap's
// inflight.retry_after, being the same concern) and has its table's shadow mode. The requests
// exempt from the front cap ([resilience.inflight] exemptions: upgrades, event streams, CORS
// preflights, listed methods and paths) pass all four untouched, holding nothing.
//
// The permits (the ceiling's, the caps') are tickets: held until the exchange ends and given
// back exactly once by its TicketBook; the ceiling's ticket turns the exchange's outcome into
// the controller's sample when it settles.
//
// What outlives generations is ProtectionState (the ceiling and its controller, brownout's
// state, the global cap; each upstream's cap is its Pool's); a generation's resolved values are
// its LocalProtection, applied to the state when it is activated (app::Generations).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/adaptive.h"
#include "floodgate/resilience/brownout.h"
#include "floodgate/resilience/inflight.h"
#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

struct Upstream;

// Process-wide, for the process's life.
struct ProtectionState {
  explicit ProtectionState(unsigned reactors) : adaptive(reactors) {}
  resilience::AdaptiveLimiter adaptive;
  resilience::Brownout brownout;
  Admission global_cap;
};

// One generation's local protection, resolved from its [resilience] and front cap.
struct LocalProtection {
  std::shared_ptr<ProtectionState> state;
  resilience::AimdLimits aimd{.min = 0, .max = 0};  // max 0 = no adaptive ceiling
  std::chrono::nanoseconds window{100'000'000};
  uint32_t front_cap = 0;  // the resolved front in-flight cap (0 = none)
  bool brownout = false;   // the stage is on (its mode below)
  resilience::BrownoutThresholds brownout_thresholds;
  uint32_t global_cap = 0;
  resilience::Params params;  // the rest: modes, exemptions, high_latency, core routes, caps

  // Worked out from the generation's [resilience] and its resolved front cap.
  static LocalProtection of(const resilience::Params& params, uint32_t max_inflight,
                            std::shared_ptr<ProtectionState> state);
  // Whether brownout, when active, suppresses hedging (enabled and enforced).
  bool brownout_enforced() const noexcept {
    return brownout && params.brownout.mode == resilience::Mode::enforce;
  }
  // The cap of the upstream named `name` (route_queue.caps, else default_cap).
  uint32_t route_cap(std::string_view name) const;
  bool core(std::string_view name) const;
};

// The protection stages of a route to `up`, in chain order.
void add_protection_stages(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                           const LocalProtection& protection);

}  // namespace floodgate::proxy
