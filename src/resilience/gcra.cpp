#include "floodgate/resilience/gcra.h"

#include <algorithm>

namespace floodgate::resilience {

namespace {
int64_t ns(GcraCell::Clock::time_point t) noexcept {
  return t.time_since_epoch().count();
}
}  // namespace

GcraRate GcraRate::of(uint32_t rate, uint32_t burst) noexcept {
  GcraRate r;
  r.interval = std::max<int64_t>(1, 1'000'000'000 / std::max<uint32_t>(rate, 1));
  r.burst = std::max<uint32_t>(burst, 1);
  r.tolerance = r.interval * r.burst;
  return r;
}

GcraTake GcraCell::take(Clock::time_point now, const GcraRate& rate) noexcept {
  const int64_t t = ns(now);
  int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t next = std::max(tat, t) + rate.interval;
    if (next - t > rate.tolerance) {
      return {.allowed = false, .retry_after = std::chrono::nanoseconds(next - t - rate.tolerance)};
    }
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) {
      return {.allowed = true};
    }
  }
}

void GcraCell::give_back(Clock::time_point now, const GcraRate& rate) noexcept {
  const int64_t t = ns(now);
  int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    if (tat <= t) return;  // already full
    const int64_t next = std::max(tat - rate.interval, t);
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) return;
  }
}

bool GcraCell::idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept {
  return tat_.load(std::memory_order_relaxed) + ttl.count() <= ns(now);
}

}  // namespace floodgate::resilience
