#include "floodgate/resilience/brownout.h"

#include <algorithm>

namespace floodgate::resilience {

bool Brownout::observe(std::chrono::steady_clock::time_point now, int64_t in_flight,
                       uint32_t ceiling, const BrownoutThresholds& t) noexcept {
  uint64_t word = word_.load(std::memory_order_relaxed);
  const bool active = (word & 1U) != 0;
  const auto level = static_cast<unsigned>((word >> 1) & kLevelMask);
  const auto ticks = static_cast<uint64_t>(now.time_since_epoch().count());
  const uint64_t since = word >> 4;
  const uint64_t elapsed = ticks > since ? ticks - since : 0;
  const auto dwell = static_cast<uint64_t>(std::max<int64_t>(t.dwell.count(), 1));
  const uint64_t pressure = static_cast<uint64_t>(std::max<int64_t>(in_flight, 0)) * 100;
  unsigned next_level = level;
  if (active) {
    // On until the hold is over and the pressure is down; at once without a ceiling.
    if (ceiling != 0 &&
        (elapsed < (dwell << level) || pressure > uint64_t{t.recover_percent} * ceiling)) {
      return true;
    }
  } else {
    if (ceiling == 0 || pressure < uint64_t{t.trigger_percent} * ceiling) return false;
    if (word != 0 && elapsed < dwell) {
      next_level = std::min(level + 1, kMaxLevel);  // back so soon: hold longer
    } else if (word == 0 || elapsed >= (dwell << kMaxLevel)) {
      next_level = 0;  // after a quiet spell: the shortest hold again
    }
  }
  const bool next = !active;
  const uint64_t updated = (ticks << 4) | (uint64_t{next_level} << 1) | (next ? 1U : 0U);
  if (!word_.compare_exchange_strong(word, updated, std::memory_order_relaxed)) {
    return (word & 1U) != 0;  // another reactor changed it first
  }
  transitions_[next ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
  return next;
}

}  // namespace floodgate::resilience
