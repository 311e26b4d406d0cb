// Admission: how the locking works.
//
// THE STATE WORD. word_ packs the active count (bits 0-30), the flag "the FIFO is not empty"
// (bit 31) and the limit (bits 32-62). Every change of any of them is one atomic operation on
// the word, so a compare-and-swap that admits has checked, in one indivisible step, that the
// count is below the current limit and that nobody is queued. Who may change it:
//   - flag clear: anyone by CAS. The fast paths (admit below the limit, release with nobody
//     waiting) never take the lock; slow paths under mu_ race them and use CAS too.
//   - flag set: only a holder of mu_. A fast path that sees the flag takes mu_ instead, and a
//     CAS prepared from an older value fails. So under mu_, once the flag is seen set, the word
//     stays exactly as read until we write it, and plain fetch_add/fetch_sub are safe.
// The flag is set in the same CAS that observes "count >= limit" just before the first waiter
// is linked, and cleared when the FIFO empties, both under mu_: whenever mu_ is free, the flag
// says exactly whether the FIFO holds nodes.
//
// THE FIFO (head_, tail_, each node's prev_/next_/linked_) and pending_ change only under mu_.
// pending_ counts linked nodes, including a cancelled one whose owner has not yet unlinked it.
//
// A WAITER'S STATE is one atomic: idle -> queued -> granted | rejected | cancelled.
//   - queued is set by admit() under mu_ as the node is linked.
//   - granted / rejected: a mu_ holder pops the node, then CASes it from queued. The CAS fails
//     only if the owner cancelled first; the popper then just drops the node (it is unlinked,
//     and nobody else touches it) and, if it was handing off a slot, tries the next one.
//   - cancelled: the owner CASes from queued WITHOUT the lock (grant and cancel race on this one
//     CAS; the winner decides), then takes mu_ and unlinks the node unless a popper already did
//     (linked_). Losing the CAS means a completion is in flight: see admission.h.
//   - granted -> idle: take_permit(), by whoever calls it first.
// Only the owner and the thread that popped a granted or rejected node touch it, and the popper
// only until it has called the completion, which it reads out of the node first.
//
// THE INVARIANT that makes handoff sufficient: whenever mu_ is free, a live (queued) waiter
// implies active >= limit, so nobody waits while a slot is free. Each change keeps it:
//   - linking: the FIFO was empty and the CAS that set the flag saw count >= limit, or the FIFO
//     already held a live waiter (so count >= limit already, and stays while we hold mu_);
//   - release: over the limit (count - 1 >= limit) it only decrements, leaving count >= limit;
//     otherwise it hands the slot to the oldest live waiter (count unchanged), or, with none
//     left, decrements and clears the flag;
//   - set_limits: grants from the head while count < limit; a fast-path admit only ever raises
//     the count; a cancel only removes waiters.
// Monotonic recovery follows from the same rules: every increment checks count < limit in its
// CAS, and a handoff needs count - 1 < limit, so once count exceeds a new limit it only falls.
//
// COMPLETIONS run after mu_ is dropped, so a completion that posts to another reactor (taking
// that reactor's lock, writing its eventfd) never extends the critical section, and may call
// back into the admission. Popped nodes are chained through their own next_ (unused once
// unlinked) and completed oldest first.
#include "floodgate/upstream/admission.h"

#include <algorithm>
#include <cassert>

namespace floodgate {

// Popped nodes waiting for their completion to run outside the lock.
class Admission::Completions {
 public:
  void push(AdmissionWaiter& waiter) noexcept {
    waiter.next_ = nullptr;
    (tail_ != nullptr ? tail_->next_ : head_) = &waiter;
    tail_ = &waiter;
  }

  // Each node is read before its completion runs: after it, the owner may destroy the node.
  void run(AdmitStatus status) noexcept {
    for (AdmissionWaiter* node = head_; node != nullptr;) {
      AdmissionWaiter* const next = node->next_;
      const AdmissionWaiter::Completion on_complete = node->on_complete_;
      void* const context = node->context_;
      node = next;
      on_complete(context, status);
    }
    head_ = tail_ = nullptr;
  }

 private:
  AdmissionWaiter* head_ = nullptr;
  AdmissionWaiter* tail_ = nullptr;
};

AdmissionWaiter::~AdmissionWaiter() {
  assert(state() != State::queued && "destroying a queued AdmissionWaiter");
  if (state() == State::queued) (void)cancel(CancelReason::client_gone);  // best effort
  take_permit().release();  // a grant nobody took goes back (to the next waiter)
}

bool AdmissionWaiter::cancel(CancelReason reason) noexcept {
  State expected = State::queued;
  if (!state_.compare_exchange_strong(expected, State::cancelled, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    return false;
  }
  admission_->cancel_queued(*this, reason);
  return true;
}

Permit AdmissionWaiter::take_permit() noexcept {
  State expected = State::granted;
  if (!state_.compare_exchange_strong(expected, State::idle, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
    return {};
  }
  return Permit(*admission_);
}

uint64_t Admission::limit_field(uint32_t max_active) noexcept {
  return max_active == 0 ? kUnlimited : std::min(max_active, kMaxActive);
}

Admission::Admission(AdmissionLimits limits) noexcept
    : word_(limit_field(limits.max_active) << kLimitShift), max_pending_(limits.max_pending) {}

Admission::~Admission() {
  assert(head_ == nullptr && "destroying an Admission with queued waiters");
  assert(count_of(word_.load(std::memory_order_relaxed)) == 0 && "permits outlive Admission");
}

Admission::Result Admission::admit_slow(AdmissionWaiter& waiter) noexcept {
  assert(waiter.state() != AdmissionWaiter::State::queued &&
         waiter.state() != AdmissionWaiter::State::granted);
  std::lock_guard lock(mu_);
  drop_cancelled_heads();
  uint64_t word = word_.load(std::memory_order_relaxed);
  for (;;) {
    if (head_ == nullptr && count_of(word) < limit_of(word)) {  // a slot freed meanwhile
      if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        admitted_.fetch_add(1, std::memory_order_relaxed);
        return {AdmitStatus::admitted, Permit(*this)};
      }
      continue;
    }
    if (pending_.load(std::memory_order_relaxed) >= max_pending_.load(std::memory_order_relaxed)) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return {AdmitStatus::rejected, Permit()};
    }
    if (head_ != nullptr) break;  // queue behind the live waiters; the flag is already set
    if (word_.compare_exchange_weak(word, word | kQueuedFlag, std::memory_order_relaxed,
                                    std::memory_order_relaxed)) {
      break;
    }
  }
  waiter.admission_ = this;
  waiter.state_.store(AdmissionWaiter::State::queued, std::memory_order_relaxed);
  link_tail(waiter);
  queued_.fetch_add(1, std::memory_order_relaxed);
  return {AdmitStatus::queued, Permit()};
}

void Admission::release_slow() noexcept {
  Completions granted;
  {
    std::lock_guard lock(mu_);
    const uint64_t word = word_.load(std::memory_order_relaxed);
    if ((word & kQueuedFlag) == 0) {
      // A cancel emptied the FIFO after our fast path saw the flag. Fast paths may race us, and
      // an atomic decrement is correct against any of them.
      word_.fetch_sub(1, std::memory_order_release);
      return;
    }
    // The flag is set: the word is ours until we write it (see the top of this file).
    AdmissionWaiter* next = nullptr;
    if (count_of(word) - 1 < limit_of(word)) next = pop_live_head();
    if (next != nullptr) {  // handoff: the slot moves to `next`, the count stays
      admitted_.fetch_add(1, std::memory_order_relaxed);
      granted.push(*next);
      if (head_ == nullptr) word_.fetch_and(~kQueuedFlag, std::memory_order_release);
    } else {  // over the limit, or nobody left to take it
      word_.fetch_sub(head_ == nullptr ? 1 + kQueuedFlag : 1, std::memory_order_release);
    }
  }
  granted.run(AdmitStatus::admitted);
}

void Admission::cancel_queued(AdmissionWaiter& waiter, CancelReason reason) noexcept {
  std::lock_guard lock(mu_);
  if (waiter.linked_) {
    unlink(waiter);
    clear_flag_if_empty();
  }
  cancelled_[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void Admission::set_limits(AdmissionLimits limits) noexcept {
  const uint64_t limit = limit_field(limits.max_active);
  Completions granted;
  Completions evicted;
  {
    std::lock_guard lock(mu_);
    max_pending_.store(limits.max_pending, std::memory_order_relaxed);
    uint64_t word = word_.load(std::memory_order_relaxed);
    uint64_t updated = 0;
    do {
      updated = (word & ~(kUnlimited << kLimitShift)) | (limit << kLimitShift);
    } while (!word_.compare_exchange_weak(word, updated, std::memory_order_relaxed,
                                          std::memory_order_relaxed));
    // A raised limit: grant the oldest waiters. A non-empty FIFO means the flag is set, so the
    // word is ours and a plain increment is exact.
    for (uint64_t count = count_of(updated); count < limit; ++count) {
      AdmissionWaiter* next = pop_live_head();
      if (next == nullptr) break;
      word_.fetch_add(1, std::memory_order_acquire);
      admitted_.fetch_add(1, std::memory_order_relaxed);
      granted.push(*next);
    }
    // A lowered max_pending: reject the youngest beyond it.
    while (pending_.load(std::memory_order_relaxed) > limits.max_pending) {
      AdmissionWaiter& last = *tail_;
      unlink(last);
      auto expected = AdmissionWaiter::State::queued;
      if (last.state_.compare_exchange_strong(expected, AdmissionWaiter::State::rejected,
                                              std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
        rejected_.fetch_add(1, std::memory_order_relaxed);
        evicted.push(last);
      }  // else cancelled: its owner sees !linked_ and leaves it
    }
    clear_flag_if_empty();
  }
  granted.run(AdmitStatus::admitted);
  evicted.run(AdmitStatus::rejected);
}

void Admission::link_tail(AdmissionWaiter& waiter) noexcept {
  waiter.prev_ = tail_;
  waiter.next_ = nullptr;
  (tail_ != nullptr ? tail_->next_ : head_) = &waiter;
  tail_ = &waiter;
  waiter.linked_ = true;
  pending_.store(pending_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void Admission::unlink(AdmissionWaiter& waiter) noexcept {
  (waiter.prev_ != nullptr ? waiter.prev_->next_ : head_) = waiter.next_;
  (waiter.next_ != nullptr ? waiter.next_->prev_ : tail_) = waiter.prev_;
  waiter.prev_ = waiter.next_ = nullptr;
  waiter.linked_ = false;
  pending_.store(pending_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

AdmissionWaiter* Admission::pop_live_head() noexcept {
  while (head_ != nullptr) {
    AdmissionWaiter& first = *head_;
    unlink(first);
    auto expected = AdmissionWaiter::State::queued;
    if (first.state_.compare_exchange_strong(expected, AdmissionWaiter::State::granted,
                                             std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
      return &first;
    }  // cancelled first: its owner sees !linked_ and leaves it
  }
  return nullptr;
}

void Admission::drop_cancelled_heads() noexcept {
  while (head_ != nullptr && head_->state() != AdmissionWaiter::State::queued) unlink(*head_);
  clear_flag_if_empty();
}

void Admission::clear_flag_if_empty() noexcept {
  if (head_ == nullptr && (word_.load(std::memory_order_relaxed) & kQueuedFlag) != 0) {
    word_.fetch_and(~kQueuedFlag, std::memory_order_relaxed);
  }
}

}  // namespace floodgate
