// Adaptive admission ([resilience.adaptive_admission], issue 14): a process-wide ceiling on
// admitted requests that an AIMD controller lowers when the backends get slow or fail and
// raises again when they are healthy and the ceiling is in use.
//
// Two pieces:
//   - AimdController: the decision, a pure function of one window's observations (how many
//     samples, how many of them bad, the in-flight peak). It decides once per window, never
//     per completion: a window whose bad share is at least kBadSharePercent lowers the ceiling
//     by decrease_step once, and the window after a decrease is not judged (it still holds the
//     requests admitted under the old ceiling); a healthy window in which the in-flight peak
//     reached half the ceiling raises it by increase_step (the limit was in use, so a later cut
//     is not a cliff); every other window holds it. A window is judged only with at least
//     kMinSamples samples; until then it goes on (it lasts `window` and as long again as it
//     takes to see them), so a low completion rate never makes one slow request a verdict.
//     The ceiling never leaves [min, max].
//   - AdaptiveLimiter: the runtime around it. The ceiling is an Admission (the pools'
//     primitive) with no queue, whose limit the controller moves with set_limits(). Samples
//     are counted in per-reactor shards (no shared write per request); whichever reactor
//     first admits a request after the window's end takes a try-lock (never waits) and makes
//     the window's one decision from the shards' sums.
//
// What a sample is (sample_of): a backend's response or an upstream timeout of a request that
// took a permit. Bad: time to response head >= high_latency, a connect or response timeout,
// or a backend's 503 / 504. Not samples: floodgate's own answers and rejections, client errors
// and aborts, a backend's 4xx, connect failures and resets (the circuit breakers' business),
// and requests exempt from the front cap (they take no permit).
//
// Thread-safety: AimdController is a value (its owner serialises it). AdaptiveLimiter: every
// member from any thread; record() and note_in_flight() only from the reactor that owns the
// shard. Time comes from the caller (the reactor's clock), so tests drive it by hand.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "floodgate/core/outcome.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::resilience {

// The ceiling's range and steps for one generation (min <= max, steps > 0).
struct AimdLimits {
  uint32_t min = 64;
  uint32_t max = 0;  // 0 = no ceiling at all (the limiter admits everything)
  uint32_t decrease_step = 16;
  uint32_t increase_step = 16;
  bool operator==(const AimdLimits&) const = default;
};

// One window's observations.
struct AimdWindow {
  uint64_t samples = 0;
  uint64_t bad = 0;
  uint32_t peak_in_flight = 0;
};

enum class AimdMove : uint8_t { hold, decrease, increase, skipped };

class AimdController {
 public:
  // A window is judged bad when at least this share of its samples is bad: far above the
  // outliers a healthy service has (3% slow requests stay far from it, even in small windows)
  // and far below what an overloaded backend shows (nearly every sample slow).
  static constexpr uint64_t kBadSharePercent = 25;
  // A window is judged only with at least this many samples: with fewer, chance alone puts a
  // healthy service's few slow requests above the bad share too often (3% slow requests reach
  // 25% of 20 samples once in 4,000 windows, of 40 once in 5 million).
  static constexpr uint64_t kMinSamples = 40;

  explicit AimdController(AimdLimits limits = {}) noexcept { configure(limits); }

  // New bounds and steps (a reload): the ceiling is kept, clamped into [min, max]; the first
  // configuration starts it at max.
  void configure(AimdLimits limits) noexcept {
    const bool first = limits_.max == 0;
    limits_ = limits;
    limits_.min = std::min(limits_.min, limits_.max);
    ceiling_ = first ? limits_.max : std::clamp(ceiling_, limits_.min, limits_.max);
  }

  // Whether a window with these observations is complete enough to judge.
  static bool judgeable(const AimdWindow& w) noexcept { return w.samples >= kMinSamples; }

  // The window's one decision (pure: the same observations from the same state decide the same).
  AimdMove judge(const AimdWindow& w) noexcept;

  uint32_t ceiling() const noexcept { return ceiling_; }
  const AimdLimits& limits() const noexcept { return limits_; }

 private:
  AimdLimits limits_{.min = 0, .max = 0};
  uint32_t ceiling_ = 0;
  bool skip_next_ = false;
};

// Whether `outcome` is a sample of the backends' health, and whether a bad one.
enum class Sample : uint8_t { none, good, bad };
Sample sample_of(const Outcome& outcome, std::chrono::nanoseconds high_latency) noexcept;

class AdaptiveLimiter {
 public:
  // `reactors` shards; the limiter admits everything until configure() gives it a ceiling.
  explicit AdaptiveLimiter(unsigned reactors);
  AdaptiveLimiter(const AdaptiveLimiter&) = delete;
  AdaptiveLimiter& operator=(const AdaptiveLimiter&) = delete;

  // A generation's limits and window (activation, on the main thread): waits for a decision in
  // progress (a few hundred nanoseconds) and applies the controller's clamped ceiling at once.
  // max = 0 switches the ceiling off (every request admitted).
  void configure(AimdLimits limits, std::chrono::nanoseconds window) noexcept;

  // Makes the window's decision when its end has passed and it can be judged (at most one
  // caller at a time does; the others return at once). `now` is the caller's clock.
  void tick(std::chrono::steady_clock::time_point now) noexcept;

  // A permit of the ceiling, or an empty one at the ceiling. Never blocks.
  [[nodiscard]] Permit try_enter() noexcept { return ceiling_.try_admit(); }

  // On reactor `shard`'s thread: one settled sample; the in-flight count just seen.
  void record(unsigned shard, Sample s) noexcept;
  void note_in_flight(unsigned shard, uint32_t in_flight) noexcept;

  // Observers (relaxed, any thread).
  uint32_t ceiling() const noexcept { return ceiling_.limit(); }  // 0 = no ceiling
  int64_t in_flight() const noexcept { return ceiling_.active(); }
  uint64_t decisions(AimdMove m) const noexcept {
    return decisions_[static_cast<std::size_t>(m)].load(std::memory_order_relaxed);
  }

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> samples{0};  // cumulative; written by its reactor alone
    std::atomic<uint64_t> bad{0};
    std::atomic<uint32_t> peak{0};  // since the last decision; reset by the decider
  };

  void decide(std::chrono::steady_clock::time_point now) noexcept;  // under deciding_

  Admission ceiling_;
  std::unique_ptr<Shard[]> shards_;
  unsigned reactor_count_;
  alignas(64) std::atomic<int64_t> window_end_{0};  // steady ns; 0 = the first tick starts one
  std::atomic<bool> deciding_{false};               // the try-lock around the controller
  std::atomic<int64_t> window_ns_{100'000'000};
  // Under deciding_ (configure() takes it too):
  AimdController controller_;
  uint64_t seen_samples_ = 0;
  uint64_t seen_bad_ = 0;
  std::array<std::atomic<uint64_t>, 4> decisions_{};
};

}  // namespace floodgate::resilience
