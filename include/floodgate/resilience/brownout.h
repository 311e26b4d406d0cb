// Brownout ([resilience.brownout], issue 14): while the adaptive ceiling is nearly used up,
// the upstreams that are not core are shed so that the core ones keep what capacity there is.
//
// The state is one process-wide word: active or not, when it last changed, and its hold level.
// observe() moves it with hysteresis: brownout starts when the adaptive in-flight count reaches
// trigger_percent of the current ceiling and ends at or below recover_percent (lower), but
// never within its hold: once started it stays on for at least `dwell` (one adaptive window) x
// 2^level, so it cannot flap within a window. Shedding the non-core requests takes their
// pressure away at once, so the in-flight count alone would end brownout as soon as it began
// and let the shed load back in; the hold is what keeps it on under a sustained overload. It
// backs off like an outlier ejection: a brownout that starts again less than one dwell after
// ending holds twice as long as the last (up to 2^kMaxLevel dwells: 3.2 s with the default
// window), and one that starts after a quiet spell of 2^kMaxLevel dwells holds one dwell again.
// Every request routed to an upstream observes it (the brownout stage); one compare-and-swap
// per change, a load otherwise.
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
  static constexpr unsigned kMaxLevel = 5;  // the longest hold: 32 dwells

  Brownout() = default;
  Brownout(const Brownout&) = delete;
  Brownout& operator=(const Brownout&) = delete;

  // Judges the pressure now: `in_flight` of `ceiling` (0 = no ceiling to measure against:
  // brownout ends at once, never starts). Returns whether brownout is active after it.
  bool observe(std::chrono::steady_clock::time_point now, int64_t in_flight, uint32_t ceiling,
               const BrownoutThresholds& t) noexcept;

  bool active() const noexcept { return (word_.load(std::memory_order_relaxed) & 1U) != 0; }
  // The current hold level: brownout lasts at least dwell x 2^level once started.
  unsigned level() const noexcept {
    return static_cast<unsigned>((word_.load(std::memory_order_relaxed) >> 1) & kLevelMask);
  }
  // Transitions so far into the active (true) or inactive (false) state.
  uint64_t transitions(bool to_active) const noexcept {
    return transitions_[to_active ? 1 : 0].load(std::memory_order_relaxed);
  }

 private:
  static constexpr uint64_t kLevelMask = 7;
  // (time of the last change in steady-clock ticks << 4) | (level << 1) | active.
  // 0 = inactive since ever.
  std::atomic<uint64_t> word_{0};
  std::array<std::atomic<uint64_t>, 2> transitions_{};
};

}  // namespace floodgate::resilience
