// FailureWindow: how many verdicts one backend's attempts got over the last `window`, and how
// many of them were failures: the counts behind the circuit breaker's rate rule
// ([resilience.circuit_breaker] min_requests and failure_rate_percent, issue 35). A standalone
// primitive: the breaker adds every verdict it records and reads the counts when a failure
// could open the circuit; it knows nothing of backends.
//
// The window: a ring of kBuckets buckets, each one 64-bit word holding one slice (window /
// kBuckets, 1 s by default) as its tag, its verdicts and its failures, as RetryBudget's ring
// does (retry_budget.h and the essay at the top of retry_budget.cpp; the same reasoning holds
// here, with two counts in the word instead of one). The counts read at `now` are those of
// now's slice and the kBuckets - 1 before it (and of up to kBuckets - 1 later slices, which a
// caller whose loop time is ahead has started): a verdict leaves the window between
// window - slice and window after it was counted.
//
// Thread-safety: every member from any thread (every reactor records into the one breaker of
// a backend). Lock-free and allocation-free.
//
// Costs: add() is a relaxed load and a relaxed fetch_add on the current bucket (a
// compare-and-swap once per slice, for the caller that starts it), plus one division. counts()
// is kBuckets relaxed loads.
//
// Bounds: a slice counts at most kSliceCap verdicts; later ones in the same slice are not
// counted (both counts stop together, so the failure rate read is that of the slice's first
// kSliceCap verdicts: 2^21, two million a second per backend with the default window). Callers
// that pass the check at once add at most one each beyond it, far from the field's limit.
//
// Time: the caller's loop time is passed in; the window never reads a clock. Times before the
// clock's epoch are taken as the epoch.
//
// Lifetime: outlives its callers' calls. Neither copies nor moves.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "floodgate/core/clock.h"

namespace floodgate::resilience {

class FailureWindow {
 public:
  using time_point = Clock::time_point;

  static constexpr std::size_t kBuckets = 10;
  static constexpr uint32_t kSliceCap = uint32_t{1} << 21;

  struct Counts {
    uint32_t requests = 0;  // verdicts in the window (each one request's attempt)
    uint32_t failures = 0;  // of them, failures
    bool operator==(const Counts&) const = default;
  };

  // `window` shorter than kBuckets clock ticks is taken as kBuckets ticks (non-positive ones
  // too); it is rounded down to a multiple of kBuckets ticks.
  explicit FailureWindow(std::chrono::nanoseconds window = std::chrono::seconds(10)) noexcept;
  FailureWindow(const FailureWindow&) = delete;
  FailureWindow& operator=(const FailureWindow&) = delete;

  // One verdict at `now`.
  inline void add(time_point now, bool failure) noexcept;
  // The counts in the window that ends at `now`; a snapshot a concurrent add() may be missing
  // from.
  Counts counts(time_point now) const noexcept;
  // Forgets every count (a circuit that closes starts afresh). A verdict added at the same
  // moment by another thread may be kept or lost.
  void clear() noexcept;
  // A reload: a different length clears the counts (the slices they were counted in no longer
  // exist); the same length keeps them. A call that overlaps it may count in either.
  void set_window(std::chrono::nanoseconds window) noexcept;
  // The effective window: kBuckets x the slice.
  std::chrono::nanoseconds window() const noexcept;

 private:
  using Rep = Clock::duration::rep;

  // A bucket's word: bits 0-21 the verdicts, bits 22-43 the failures, bits 44-63 the tag (the
  // slice number modulo 2^20).
  static constexpr unsigned kFailureShift = 22;
  static constexpr unsigned kTagShift = 44;
  static constexpr uint64_t kOneRequest = 1;
  static constexpr uint64_t kOneFailure = uint64_t{1} << kFailureShift;
  static constexpr uint64_t kFieldMask = (uint64_t{1} << kFailureShift) - 1;
  static constexpr uint64_t kTagMask = (uint64_t{1} << (64 - kTagShift)) - 1;

  static uint64_t tag_of(uint64_t word) noexcept { return word >> kTagShift; }
  static uint32_t requests_of(uint64_t word) noexcept {
    return static_cast<uint32_t>(word & kFieldMask);
  }
  static uint32_t failures_of(uint64_t word) noexcept {
    return static_cast<uint32_t>((word >> kFailureShift) & kFieldMask);
  }
  // (a - b) modulo 2^20: how many slices tag `a` is after tag `b`.
  static uint64_t tag_distance(uint64_t a, uint64_t b) noexcept { return (a - b) & kTagMask; }
  static bool live(uint64_t tag, uint64_t current) noexcept {
    return tag_distance(current, tag) < kBuckets || tag_distance(tag, current) < kBuckets;
  }
  struct Slice {
    std::size_t bucket;
    uint64_t tag;
  };
  Slice slice_of(time_point now) const noexcept {
    const Rep ticks = now.time_since_epoch().count();
    const Rep slice = slice_ticks_.load(std::memory_order_relaxed);
    const uint64_t number = ticks <= 0 ? 0 : static_cast<uint64_t>(ticks / slice);
    return {static_cast<std::size_t>(number % kBuckets), number & kTagMask};
  }
  void add_slow(Slice slice, uint64_t word, uint64_t one) noexcept;

  // Atomic: set_window() writes it on the main thread while reactors read it.
  std::atomic<Rep> slice_ticks_;
  // Atomic: every reactor adds to the current bucket (relaxed fetch_add) and restarts a stale
  // one (CAS); counts() sums them; clear() zeroes them. On lines of their own, so that the
  // breaker's state word beside them stays read-only while a backend is healthy.
  alignas(64) std::array<std::atomic<uint64_t>, kBuckets> ring_{};
};

// The hot path, inline: the current bucket is current and below the cap, one relaxed fetch_add.
void FailureWindow::add(time_point now, bool failure) noexcept {
  const Slice slice = slice_of(now);
  const uint64_t one = kOneRequest | (failure ? kOneFailure : 0);
  std::atomic<uint64_t>& bucket = ring_[slice.bucket];
  const uint64_t word = bucket.load(std::memory_order_relaxed);
  if (tag_of(word) == slice.tag) {
    if (requests_of(word) < kSliceCap) bucket.fetch_add(one, std::memory_order_relaxed);
    return;
  }
  add_slow(slice, word, one);
}

}  // namespace floodgate::resilience
