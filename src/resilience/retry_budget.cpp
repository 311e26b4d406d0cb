// RetryBudget: how the lock-free window works.
//
// THE RING. Time is cut into slices of window / kBuckets; slice n is kept in bucket n % kBuckets
// of two rings, primaries_ and retries_. Each bucket is one 64-bit word: the slice's tag (n modulo
// 2^24) and its count. The window at `now` is now's slice and the kBuckets - 1 slices before it:
// a bucket is live when its tag is 0..kBuckets-1 slices behind now's, and a read sums the live
// ones. A bucket holding an older slice is stale: it counts nothing, and the first writer of the
// new slice restarts it. A bucket holding a later slice (1..kBuckets-1 ahead: a caller whose loop
// time is ahead restarted it) is live too: the slice it replaced has left the leading caller's
// window, and counting it means that callers a slice or two apart sum the same buckets (which
// the bound below needs: a lagging caller that ignored the later slice would admit a whole
// second allowance beside it).
//
// WHY THE TAG IS IN THE COUNT'S WORD, not in an epoch word beside two counts: a separate epoch
// would need a CAS on the epoch, then zeroing the counts, and a count added by another thread
// between the two (it already sees the new epoch) would be zeroed and lost, while a reader
// between them would sum the old slice's counts as the new one's. With the tag and the count in
// one word, restarting a bucket is one CAS from the stale word to (new tag, 1): the restart and
// the first count are one indivisible step, a racing restarter's CAS fails and it then finds the
// bucket current, and a reader sees either the old slice (not live, so not summed) or the new
// one. The rings are separate, so primaries and retries restart independently: each word is
// consistent on its own, and nothing needs the two together.
//
// WHO CHANGES WHAT, and what races with it:
//   - count_primary(): a relaxed load of the current bucket; if it holds now's slice, a relaxed
//     fetch_add (every reactor, every request: the only write on the hot path). If it is stale,
//     the CAS restart (once per slice, for whichever caller comes first; the losers reload and
//     fetch_add). Between the load and the fetch_add the bucket can change only if another
//     caller restarts it for a later slice, that is a caller whose `now` is a whole window
//     ahead of this one's (loop clocks differ by a loop turn): the count then lands in that
//     later slice, one primary counted late, which is harmless. A bucket already holding a
//     later slice than the caller's (the same lagging caller) is left alone and the count
//     dropped: its slice has left the window of the caller that is ahead.
//   - try_retry(): sums the live primaries and the live retries of the past slices (relaxed
//     loads), then compare-and-swaps the current retries bucket from the word it decided on to
//     that word + 1 (or to (tag, 1), restarting it), only while past + current < allowance. A
//     CAS that loses reloads the current word and decides again.
//   - give_back(): compare-and-swaps the current retries bucket to one less, only while it
//     still holds now's slice and a non-zero count. A bucket restarted since belongs to a later
//     slice, and the retry it would undo has left the window: nothing to give back, and a blind
//     fetch_sub there could borrow from the tag.
//   - the observers: relaxed loads and sums; a snapshot a concurrent count may have missed.
//
// THE BOUND. Callers whose `now` falls in one slice are exact: every admission in that slice is
// a successful CAS on the one current retries word, so each admitted retry saw every earlier
// one in it, and the other slices' counts change under it only by going down (give_back) or by
// leaving the window. The allowance it compared with came from primaries it read, which only
// grow within a slice, so the retries counted never exceed the allowance at the moment of the
// CAS. Callers in different slices (a slice boundary, with loop clocks a turn apart) add to
// different words, and each sums the other's word, read before its own CAS: an admission can
// miss only the other side's admissions that land between that read and that CAS, each made by
// a caller in flight at the same moment. So the window may hold more retries than its
// allowance by at most the number of callers racing across the boundary (in practice: the
// reactors retrying in the same microsecond at a slice boundary). The race tests check both.
//
// MEMORY ORDER. Relaxed everywhere: a budget guards none of its callers' data, and each count
// word's modification order (total for one atomic) is all that the exactness needs.
//
// TAGS wrap at 2^24 slices: a bucket that nobody touched for a whole multiple of 2^24 slices
// (194 days with 1 s slices, 4.6 hours with 1 ms ones) could have its old count taken as live at
// one exact instant: one old slice counted once, which the budget can afford.
#include "floodgate/resilience/retry_budget.h"

#include <algorithm>

namespace floodgate::resilience {
namespace {

Clock::duration::rep slice_ticks_of(std::chrono::nanoseconds window) noexcept {
  const auto ticks = std::chrono::duration_cast<Clock::duration>(window).count();
  return std::max<Clock::duration::rep>(
      ticks / static_cast<Clock::duration::rep>(RetryBudget::kBuckets), 1);
}

}  // namespace

RetryBudget::RetryBudget(uint32_t ratio_percent, std::chrono::nanoseconds window,
                         uint32_t min_retries) noexcept
    : ratio_(std::min(ratio_percent, kMaxRatio)),
      min_retries_(min_retries),
      slice_ticks_(slice_ticks_of(window)) {}

void RetryBudget::add_slow(Ring& ring, Slice slice, uint64_t word) noexcept {
  std::atomic<uint64_t>& bucket = ring[slice.bucket];
  const uint64_t restarted = (slice.tag << kTagShift) | 1;
  for (;;) {
    const uint64_t tag = tag_of(word);
    if (tag == slice.tag) {
      bucket.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // A later slice than the caller's (a lagging caller): the count is dropped. An empty word
    // (never used) holds no slice, whatever its tag reads as: restarted.
    if (count_of(word) != 0 && tag_distance(tag, slice.tag) < (kTagMask + 1) / 2) return;
    if (bucket.compare_exchange_weak(word, restarted, std::memory_order_relaxed)) return;
  }
}

uint64_t RetryBudget::sum(const Ring& ring, Slice slice) noexcept {
  uint64_t total = 0;
  for (const std::atomic<uint64_t>& bucket : ring) {
    const uint64_t word = bucket.load(std::memory_order_relaxed);
    if (live(tag_of(word), slice.tag)) total += count_of(word);
  }
  return total;
}

bool RetryBudget::try_retry(time_point now) noexcept {
  const Slice slice = slice_of(now);
  const uint64_t allowance = allowance_for(sum(primaries_, slice));
  std::atomic<uint64_t>& current = retries_[slice.bucket];
  uint64_t word = current.load(std::memory_order_relaxed);
  // The other slices' retries; the current bucket is decided on below, from `word`.
  uint64_t others = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    if (i == slice.bucket) continue;
    const uint64_t other = retries_[i].load(std::memory_order_relaxed);
    if (live(tag_of(other), slice.tag)) others += count_of(other);
  }
  if (others >= allowance) return false;
  for (;;) {
    const uint64_t tag = tag_of(word);
    uint64_t counted = 0;
    uint64_t next = (slice.tag << kTagShift) | 1;  // restarts a stale bucket
    if (tag == slice.tag) {
      counted = count_of(word);
      next = word + 1;
    } else if (count_of(word) != 0 && tag_distance(tag, slice.tag) < (kTagMask + 1) / 2) {
      return false;  // the bucket holds a later slice: a lagging caller, refused
    }
    if (others + counted >= allowance) return false;
    if (current.compare_exchange_weak(word, next, std::memory_order_relaxed)) return true;
  }
}

void RetryBudget::give_back(time_point now) noexcept {
  const Slice slice = slice_of(now);
  std::atomic<uint64_t>& current = retries_[slice.bucket];
  uint64_t word = current.load(std::memory_order_relaxed);
  while (tag_of(word) == slice.tag && count_of(word) != 0) {
    if (current.compare_exchange_weak(word, word - 1, std::memory_order_relaxed)) return;
  }
}

uint64_t RetryBudget::primaries(time_point now) const noexcept {
  return sum(primaries_, slice_of(now));
}

uint64_t RetryBudget::retries(time_point now) const noexcept {
  return sum(retries_, slice_of(now));
}

uint64_t RetryBudget::allowance(time_point now) const noexcept {
  return allowance_for(primaries(now));
}

uint64_t RetryBudget::remaining(time_point now) const noexcept {
  const uint64_t allowed = allowance(now);
  const uint64_t used = retries(now);
  return used >= allowed ? 0 : allowed - used;
}

}  // namespace floodgate::resilience
