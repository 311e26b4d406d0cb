#include "floodgate/resilience/adaptive.h"

#include <thread>

namespace floodgate::resilience {

AimdMove AimdController::judge(const AimdWindow& w) noexcept {
  if (skip_next_) {  // the window right after a cut still ran under the old ceiling
    skip_next_ = false;
    return AimdMove::skipped;
  }
  if (w.samples >= kMinSamples && w.bad * 100 >= w.samples * kBadSharePercent) {
    const uint32_t floor = limits_.min;
    const uint32_t next =
        ceiling_ > floor + limits_.decrease_step ? ceiling_ - limits_.decrease_step : floor;
    skip_next_ = true;
    if (next == ceiling_) return AimdMove::hold;
    ceiling_ = next;
    return AimdMove::decrease;
  }
  if (uint64_t{w.peak_in_flight} * 2 >= ceiling_ && ceiling_ < limits_.max) {
    ceiling_ = static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{ceiling_} + limits_.increase_step, limits_.max));
    return AimdMove::increase;
  }
  return AimdMove::hold;
}

Sample sample_of(const Outcome& o, std::chrono::nanoseconds high_latency) noexcept {
  switch (o.kind) {
    case OutcomeKind::connect_timeout:
    case OutcomeKind::response_timeout:
      return Sample::bad;
    case OutcomeKind::response:
    case OutcomeKind::cut:  // the head came: judged by it
      if (o.time_to_head.count() < 0 || (o.status >= 400 && o.status < 500)) {
        return Sample::none;  // a 4xx says the request was wrong, not the backend slow
      }
      if (o.time_to_head >= high_latency || o.status == 503 || o.status == 504) {
        return Sample::bad;
      }
      return Sample::good;
    case OutcomeKind::answered:
    case OutcomeKind::client_error:
    case OutcomeKind::client_aborted:
    case OutcomeKind::rejection:
    case OutcomeKind::connect_refused:
    case OutcomeKind::reset_before_response:
    case OutcomeKind::bad_response:
    case OutcomeKind::tls_failed:
      return Sample::none;
  }
  return Sample::none;
}

AdaptiveLimiter::AdaptiveLimiter(unsigned reactors)
    : ceiling_({.max_active = 0}),
      shards_(std::make_unique<Shard[]>(reactors == 0 ? 1 : reactors)),
      reactor_count_(reactors == 0 ? 1 : reactors) {}

void AdaptiveLimiter::configure(AimdLimits limits, std::chrono::nanoseconds window) noexcept {
  bool expected = false;
  while (!deciding_.compare_exchange_weak(expected, true, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
    expected = false;
    std::this_thread::yield();  // main thread only; a decision takes well under a microsecond
  }
  window_ns_.store(std::max<int64_t>(window.count(), 1), std::memory_order_relaxed);
  if (limits.max == 0) {
    controller_ = AimdController{};  // off: the next enabling starts again at its max
    ceiling_.set_limits({.max_active = 0});
  } else {
    controller_.configure(limits);
    ceiling_.set_limits({.max_active = controller_.ceiling()});
  }
  deciding_.store(false, std::memory_order_release);
}

void AdaptiveLimiter::record(unsigned shard, Sample s) noexcept {
  if (s == Sample::none) return;
  Shard& sh = shards_[shard];
  sh.samples.store(sh.samples.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (s == Sample::bad) {
    sh.bad.store(sh.bad.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

void AdaptiveLimiter::note_in_flight(unsigned shard, uint32_t in_flight) noexcept {
  std::atomic<uint32_t>& peak = shards_[shard].peak;
  // A decider resetting it meanwhile loses nothing that matters: what is stored is a count
  // seen now, a fair peak for the new window too.
  if (in_flight > peak.load(std::memory_order_relaxed)) {
    peak.store(in_flight, std::memory_order_relaxed);
  }
}

void AdaptiveLimiter::tick(std::chrono::steady_clock::time_point now) noexcept {
  const int64_t t = now.time_since_epoch().count();
  if (t < window_end_.load(std::memory_order_relaxed)) return;
  if (deciding_.exchange(true, std::memory_order_acquire)) return;  // someone else decides
  if (t >= window_end_.load(std::memory_order_relaxed)) decide(now);
  deciding_.store(false, std::memory_order_release);
}

void AdaptiveLimiter::decide(std::chrono::steady_clock::time_point now) noexcept {
  const int64_t t = now.time_since_epoch().count();
  const int64_t window = window_ns_.load(std::memory_order_relaxed);
  if (window_end_.load(std::memory_order_relaxed) == 0 || controller_.limits().max == 0) {
    // The first window starts now (what came before was not observed as one).
    uint64_t samples = 0;
    uint64_t bad = 0;
    for (unsigned i = 0; i < reactor_count_; ++i) {
      samples += shards_[i].samples.load(std::memory_order_relaxed);
      bad += shards_[i].bad.load(std::memory_order_relaxed);
      shards_[i].peak.store(0, std::memory_order_relaxed);
    }
    seen_samples_ = samples;
    seen_bad_ = bad;
    window_end_.store(t + window, std::memory_order_relaxed);
    return;
  }
  AimdWindow w;
  uint64_t samples = 0;
  uint64_t bad = 0;
  for (unsigned i = 0; i < reactor_count_; ++i) {
    samples += shards_[i].samples.load(std::memory_order_relaxed);
    bad += shards_[i].bad.load(std::memory_order_relaxed);
  }
  w.samples = samples - seen_samples_;
  w.bad = bad - seen_bad_;
  if (!AimdController::judgeable(w)) {  // too few samples yet: the window goes on
    window_end_.store(t + window, std::memory_order_relaxed);
    return;
  }
  uint32_t peak = static_cast<uint32_t>(std::max<int64_t>(0, ceiling_.active()));
  for (unsigned i = 0; i < reactor_count_; ++i) {
    peak = std::max(peak, shards_[i].peak.exchange(0, std::memory_order_relaxed));
  }
  w.peak_in_flight = peak;
  seen_samples_ = samples;
  seen_bad_ = bad;
  const AimdMove move = controller_.judge(w);
  decisions_[static_cast<std::size_t>(move)].fetch_add(1, std::memory_order_relaxed);
  if (move == AimdMove::decrease || move == AimdMove::increase) {
    ceiling_.set_limits({.max_active = controller_.ceiling()});  // uncontended: no queue
  }
  window_end_.store(t + window, std::memory_order_relaxed);
}

}  // namespace floodgate::resilience
