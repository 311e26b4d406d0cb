#include "floodgate/resilience/gcra.h"

#include <algorithm>

namespace floodgate::resilience {

namespace {
int64_t ns(Gcra::Clock::time_point t) noexcept {
  return t.time_since_epoch().count();
}
}  // namespace

Gcra::Gcra(uint32_t rate, uint32_t burst) noexcept
    : interval_(std::max<int64_t>(1, 1'000'000'000 / std::max<uint32_t>(rate, 1))),
      tolerance_(interval_ * std::max<uint32_t>(burst, 1)),
      burst_(std::max<uint32_t>(burst, 1)) {}

Gcra::Take Gcra::take(Clock::time_point now) noexcept {
  const int64_t t = ns(now);
  int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t next = std::max(tat, t) + interval_;
    if (next - t > tolerance_) {
      return {.allowed = false, .retry_after = std::chrono::nanoseconds(next - t - tolerance_)};
    }
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) {
      return {.allowed = true};
    }
  }
}

void Gcra::give_back(Clock::time_point now) noexcept {
  const int64_t t = ns(now);
  int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    if (tat <= t) return;  // already full
    const int64_t next = std::max(tat - interval_, t);
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) return;
  }
}

bool Gcra::idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept {
  return tat_.load(std::memory_order_relaxed) + ttl.count() <= ns(now);
}

}  // namespace floodgate::resilience
