// FailureWindow: the ring works as RetryBudget's does (the essay at the top of
// retry_budget.cpp): a slice's tag and its counts share one word, so restarting a stale bucket
// and counting the slice's first verdict are one compare-and-swap, a racing restarter's CAS
// fails and it then finds the bucket current, and a reader sees either the old slice (not
// live, not summed) or the new one. The two counts of a slice are in the same word, so a
// reader never sees a failure without its verdict: failures <= requests in every snapshot.
//
// What differs:
//   - clear() and a changed window store 0 in every bucket (relaxed). A bucket so cleared
//     holds no count, whatever its tag reads as; the next add() of a slice restarts it. An
//     add() that loaded the bucket just before the clear and fetch_adds just after lands in a
//     word tagged 0, which counts only in the instants whose slice number is within kBuckets
//     of a multiple of 2^20 (and the next restart of that bucket drops it): the verdict is in
//     effect lost, which the header allows.
//   - the cap: add() counts only while the slice holds fewer than kSliceCap verdicts, checked
//     on the word it loaded; the callers racing past the check each add one, so the field
//     (2^22) can only overflow with millions of threads.
//
// TAGS wrap at 2^20 slices (12 days with 1 s slices): a bucket nobody touched for a whole
// multiple of that could have its old counts taken as live at one exact instant. The rate rule
// then reads one old slice among the current ones once, and the opening it might cause still
// needs min_requests verdicts, which the breaker can afford.
#include "floodgate/resilience/failure_window.h"

#include <algorithm>

namespace floodgate::resilience {
namespace {

Clock::duration::rep slice_ticks_of(std::chrono::nanoseconds window) noexcept {
  const auto ticks = std::chrono::duration_cast<Clock::duration>(window).count();
  return std::max<Clock::duration::rep>(
      ticks / static_cast<Clock::duration::rep>(FailureWindow::kBuckets), 1);
}

}  // namespace

FailureWindow::FailureWindow(std::chrono::nanoseconds window) noexcept
    : slice_ticks_(slice_ticks_of(window)) {}

void FailureWindow::add_slow(Slice slice, uint64_t word, uint64_t one) noexcept {
  std::atomic<uint64_t>& bucket = ring_[slice.bucket];
  const uint64_t restarted = (slice.tag << kTagShift) | one;
  for (;;) {
    const uint64_t tag = tag_of(word);
    if (tag == slice.tag) {
      if (requests_of(word) < kSliceCap) bucket.fetch_add(one, std::memory_order_relaxed);
      return;
    }
    // A later slice than the caller's (a lagging caller): the verdict is dropped. An empty
    // word (never used, or cleared) holds no slice, whatever its tag reads as: restarted.
    if (requests_of(word) != 0 && tag_distance(tag, slice.tag) < (kTagMask + 1) / 2) return;
    if (bucket.compare_exchange_weak(word, restarted, std::memory_order_relaxed)) return;
  }
}

FailureWindow::Counts FailureWindow::counts(time_point now) const noexcept {
  const Slice slice = slice_of(now);
  Counts total;
  for (const std::atomic<uint64_t>& bucket : ring_) {
    const uint64_t word = bucket.load(std::memory_order_relaxed);
    if (!live(tag_of(word), slice.tag)) continue;
    total.requests += requests_of(word);
    total.failures += failures_of(word);
  }
  return total;
}

void FailureWindow::clear() noexcept {
  for (std::atomic<uint64_t>& bucket : ring_) bucket.store(0, std::memory_order_relaxed);
}

void FailureWindow::set_window(std::chrono::nanoseconds window) noexcept {
  const Rep slice = slice_ticks_of(window);
  if (slice_ticks_.exchange(slice, std::memory_order_relaxed) != slice) clear();
}

std::chrono::nanoseconds FailureWindow::window() const noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      Clock::duration{slice_ticks_.load(std::memory_order_relaxed) * static_cast<Rep>(kBuckets)});
}

}  // namespace floodgate::resilience
