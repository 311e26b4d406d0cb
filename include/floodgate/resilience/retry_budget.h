// RetryBudget: the retry budget of issue 13 ([resilience.retry_budget], seed 004 "Retry Budget").
// A standalone primitive: the request path counts its primary attempts and asks it before a
// retry or a hedge; metrics and /status read it; it knows nothing of them.
//
// The rule: allowance = max(floor(primaries in the window x ratio_percent / 100) + 1,
// min_retries), and a retry (or a hedge, which consumes the same budget) is admitted only while
// the retries in the window are fewer than the allowance; an admitted one is counted at once.
// The "+ 1" is the seed's bootstrap slot, so ratio 0 still allows one retry per window;
// min_retries is a floor for quiet pools (Envoy's min_retry_concurrency, 3 by default there and
// in the configuration): at low traffic the ratio would allow one retry when a backend restart
// fails a few requests at once.
// floodgate's deliberate deviation from the seed, which counts since the runtime was built:
// primaries and retries are counted over a sliding `window` (default 10 s), so that a long
// healthy period cannot bank an allowance that a later outage would spend at once (the retry
// storm the budget exists to stop).
//
// One object is one scope: the global budget, or one upstream's (its per_route_ratio_percent,
// else ratio_percent). The caller holds several; a retry needs both the global budget's and its
// upstream's admission: try_retry_both() takes from two, giving the first one's retry back when
// the second refuses. Count every primary attempt in every scope it belongs to.
//
// The window: a ring of kBuckets buckets, each holding the counts of one slice of window /
// kBuckets (1 s by default). The window read at `now` is now's slice and the kBuckets - 1 before
// it, so it covers between window - slice and window of the past: a count leaves the window
// between 9 and 10 s after it was made (default), when its slice is reused. The precision is one
// slice, and at a slice boundary the count drops by that slice's share at once. A caller whose
// loop time lags another's by a few slices also counts the buckets the other has already moved
// on to (later slices, up to kBuckets - 1 ahead), so both read the same buckets.
//
// Thread-safety: every member from any thread (every reactor shares the budgets). Lock-free and
// allocation-free; the essay at the top of retry_budget.cpp says what races with what and what
// the concurrent bound is: admission is exact among callers whose `now` falls in one slice, and
// callers racing across a slice boundary may overshoot the allowance by at most their number.
//
// Costs: count_primary() is a relaxed load and a relaxed fetch_add (a compare-and-swap once per
// slice, for the caller that starts it), plus one division for the slice. try_retry() reads the
// kBuckets primaries and retries words and compare-and-swaps the current retries word.
//
// Time: the caller's loop time (Poller::now, or a ManualClock in tests) is passed to each call;
// the budget never reads a clock. Times before the clock's epoch are taken as the epoch.
//
// Reload: the budget has no setter. A reload that changes a scope's ratio or window builds a new
// RetryBudget (its counts start at zero); one that keeps them keeps the same object (and its
// counts). That is the rule, and it is the caller's, by construction.
//
// Not here, by design: `enabled = false` (the caller does not consult or count the budget;
// eligibility still applies), which failures may retry, and the circuit-open primary's retry,
// which takes no budget (the caller does not ask).
//
// Lifetime: outlives its callers' calls. Neither copies nor moves.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/params.h"

namespace floodgate::resilience {

class alignas(64) RetryBudget {
 public:
  using time_point = Clock::time_point;

  // The ring's size: slices of window / kBuckets.
  static constexpr std::size_t kBuckets = 10;
  // ratio_percent is clamped to this (the configuration allows 0..100).
  static constexpr uint32_t kMaxRatio = 100;

  // `window` shorter than kBuckets clock ticks is taken as kBuckets ticks (non-positive ones
  // too); it is rounded down to a multiple of kBuckets ticks.
  explicit RetryBudget(uint32_t ratio_percent,
                       std::chrono::nanoseconds window = std::chrono::seconds(10),
                       uint32_t min_retries = 0) noexcept;
  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  // A primary attempt was sent at `now` (the hot path: every request, every scope).
  inline void count_primary(time_point now) noexcept;

  // May a retry (or a hedge) be sent at `now`? Admitted while retries(now) < allowance(now),
  // and then counted. Concurrent callers: see "Thread-safety" above.
  [[nodiscard]] bool try_retry(time_point now) noexcept;

  // Undoes one retry that try_retry(now) admitted, with the same `now` (try_retry_both's second
  // budget refused, or the caller found no alternate after asking). A retry whose slice has
  // since left the window is not undone: it no longer counts anyway.
  void give_back(time_point now) noexcept;

  // Observers for metrics, /status and tests; snapshots, any thread.
  // Counts in the window that ends at `now`.
  uint64_t primaries(time_point now) const noexcept;
  uint64_t retries(time_point now) const noexcept;
  // max(floor(primaries(now) x ratio / 100) + 1, min_retries).
  uint64_t allowance(time_point now) const noexcept;
  // allowance - retries, or 0 (floodgate_retry_budget_remaining{upstream}). The two counts are
  // read one after the other, not together.
  uint64_t remaining(time_point now) const noexcept;

  uint32_t ratio_percent() const noexcept { return ratio_; }
  // The effective window: kBuckets x the slice.
  std::chrono::nanoseconds window() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        Clock::duration{slice_ticks_ * static_cast<Rep>(kBuckets)});
  }

 private:
  using Rep = Clock::duration::rep;

  // A bucket's count word: bits 40-63 the tag (the slice number, modulo 2^24), bits 0-39 the
  // count of that slice (2^40: more than 10^12 per slice, never reached).
  static constexpr unsigned kTagShift = 40;
  static constexpr uint64_t kCountMask = (uint64_t{1} << kTagShift) - 1;
  static constexpr uint64_t kTagMask = (uint64_t{1} << (64 - kTagShift)) - 1;

  static uint64_t tag_of(uint64_t word) noexcept { return word >> kTagShift; }
  static uint64_t count_of(uint64_t word) noexcept { return word & kCountMask; }
  // (a - b) modulo 2^24: how many slices tag `a` is after tag `b`.
  static uint64_t tag_distance(uint64_t a, uint64_t b) noexcept { return (a - b) & kTagMask; }
  // Does a bucket tagged `tag` count in the window of slice `current`? Its slice is one of the
  // kBuckets - 1 before, or one of the kBuckets - 1 after (written by a caller whose loop time
  // is ahead: the slice it replaced has left that caller's window, so this one counts instead).
  static bool live(uint64_t tag, uint64_t current) noexcept {
    return tag_distance(current, tag) < kBuckets || tag_distance(tag, current) < kBuckets;
  }
  // The slice holding `now`: its number, the bucket and the tag.
  struct Slice {
    uint64_t number;
    std::size_t bucket;
    uint64_t tag;
  };
  Slice slice_of(time_point now) const noexcept {
    const Rep ticks = now.time_since_epoch().count();
    const uint64_t number = ticks <= 0 ? 0 : static_cast<uint64_t>(ticks / slice_ticks_);
    return {number, static_cast<std::size_t>(number % kBuckets), number & kTagMask};
  }

  using Ring = std::array<std::atomic<uint64_t>, kBuckets>;
  // Adds one to `word` (at ring[slice.bucket]), restarting the bucket if it is stale.
  static void add_slow(Ring& ring, Slice slice, uint64_t word) noexcept;
  // The sum of the live buckets' counts at `slice`.
  static uint64_t sum(const Ring& ring, Slice slice) noexcept;
  uint64_t allowance_for(uint64_t primaries) const noexcept {
    return std::max<uint64_t>(primaries * ratio_ / 100 + 1, min_retries_);
  }

  const uint32_t ratio_;
  const uint32_t min_retries_;
  const Rep slice_ticks_;
  // Atomic: every reactor adds to the current bucket on every request (relaxed fetch_add) and
  // restarts a stale one (CAS); try_retry and the observers sum them. On their own lines, apart
  // from the retries that every retry compare-and-swaps.
  alignas(64) Ring primaries_{};
  // Atomic: try_retry compare-and-swaps the current bucket (the exact admission); give_back
  // takes one off; the observers sum them.
  alignas(64) Ring retries_{};
};

// Takes a retry from both budgets or from neither: `first`, then `second`; if `second` refuses,
// `first`'s retry is given back. `first` and `second` are different objects (the global budget
// and the upstream's). Between the two calls another caller may see `first` one retry fuller
// than it ends, so it may refuse a retry it would have admitted: strict, never loose.
[[nodiscard]] inline bool try_retry_both(RetryBudget& first, RetryBudget& second,
                                         Clock::time_point now) noexcept {
  if (!first.try_retry(now)) return false;
  if (second.try_retry(now)) return true;
  first.give_back(now);
  return false;
}

// The ratio of an upstream's budget: its per_route_ratio_percent entry, else ratio_percent.
inline uint32_t retry_ratio_percent(const RetryBudgetParams& params,
                                    std::string_view upstream) noexcept {
  const auto it = params.per_route_ratio_percent.find(upstream);
  return it == params.per_route_ratio_percent.end() ? params.ratio_percent : it->second;
}

// The hot path, inline: the current bucket is current, one relaxed fetch_add.
void RetryBudget::count_primary(time_point now) noexcept {
  const Slice slice = slice_of(now);
  std::atomic<uint64_t>& bucket = primaries_[slice.bucket];
  const uint64_t word = bucket.load(std::memory_order_relaxed);
  if (tag_of(word) == slice.tag) {
    bucket.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  add_slow(primaries_, slice, word);
}

}  // namespace floodgate::resilience
