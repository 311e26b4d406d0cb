#include "floodgate/resilience/brownout.h"

namespace floodgate::resilience {

bool Brownout::observe(std::chrono::steady_clock::time_point now, int64_t in_flight,
                       uint32_t ceiling, const BrownoutThresholds& t) noexcept {
  uint64_t word = word_.load(std::memory_order_relaxed);
  const bool active = (word & 1U) != 0;
  const auto pressure = static_cast<uint64_t>(in_flight < 0 ? 0 : in_flight) * 100;
  bool next = active;
  if (ceiling == 0) {
    next = false;
  } else if (!active) {
    next = pressure >= uint64_t{t.trigger_percent} * ceiling;
  } else {
    next = pressure > uint64_t{t.recover_percent} * ceiling;
  }
  if (next == active) return active;
  const auto ticks = static_cast<uint64_t>(now.time_since_epoch().count());
  const uint64_t since = word >> 1;
  if (next && word != 0 && ticks - since < static_cast<uint64_t>(t.dwell.count())) {
    return active;  // it ended less than a window ago: no flapping
  }
  const uint64_t updated = (ticks << 1) | (next ? 1U : 0U);
  if (!word_.compare_exchange_strong(word, updated, std::memory_order_relaxed)) {
    return (word & 1U) != 0;  // another reactor changed it first
  }
  transitions_[next ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
  return next;
}

}  // namespace floodgate::resilience
