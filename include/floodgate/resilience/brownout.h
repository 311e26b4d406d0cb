// Brownout ([resilience.brownout], issue 14): while the adaptive ceiling is nearly used up,
// the upstreams that are not core are shed so that the core ones keep what capacity there is.
//
// The state is one process-wide word: active or not, and when it last changed. observe()
// moves it with hysteresis: it becomes active when the adaptive in-flight count reaches
// trigger_percent of the current ceiling and inactive again at or below recover_percent
// (lower), at once; once ended it does not start again within `dwell` (one adaptive window),
// so it cannot flap within a window. Every request routed to an upstream observes it (the brownout
// stage); one compare-and-swap per change, a load otherwise.
//
// Thread-safety: every member from any thread (lock-free). Time comes from the caller.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace floodgate::resilience {

struct BrownoutThresholds {
  uint32_t trigger_percent = 90;
  uint32_t recover_percent = 60;  // < trigger_percent
  std::chrono::nanoseconds dwell{100'000'000};
};

class Brownout {
 public:
  Brownout() = default;
  Brownout(const Brownout&) = delete;
  Brownout& operator=(const Brownout&) = delete;

  // Judges the pressure now: `in_flight` of `ceiling` (0 = no ceiling: brownout ends, never
  // starts). Returns whether brownout is active after it.
  bool observe(std::chrono::steady_clock::time_point now, int64_t in_flight, uint32_t ceiling,
               const BrownoutThresholds& t) noexcept;

  bool active() const noexcept { return (word_.load(std::memory_order_relaxed) & 1U) != 0; }
  // Transitions so far into the active (true) or inactive (false) state.
  uint64_t transitions(bool to_active) const noexcept {
    return transitions_[to_active ? 1 : 0].load(std::memory_order_relaxed);
  }

 private:
  // (time of the last change in steady-clock ticks << 1) | active. 0 = inactive since ever.
  std::atomic<uint64_t> word_{0};
  std::array<std::atomic<uint64_t>, 2> transitions_{};
};

}  // namespace floodgate::resilience
