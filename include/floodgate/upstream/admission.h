// Admission: a concurrency limit with a bounded FIFO of waiters and direct handoff.
//
// At most `max_active` holders (0 = unlimited) hold a Permit at once. An arrival beyond the limit
// parks an AdmissionWaiter in a FIFO of at most `max_pending` waiters (0 = no queue: rejected at
// once); a released slot goes straight to the oldest waiter (handoff: the count never drops, so
// no newcomer can take the slot in between). Strict FIFO and no barging: while a waiter is
// parked, every arrival queues behind it even if a slot looks free.
//
// Costs: admit() and Permit::release() below the limit with an empty queue are one load and one
// compare-and-swap on one cache line, and allocate nothing. Everything else (queueing, handoff,
// cancel, set_limits) takes a std::mutex for a few pointer updates; nothing allocates, ever.
//
// Thread-safety: every member of Admission may be called from any thread. A waiter is parked by
// one owner thread (in floodgate: the reactor of the request) and completed by whichever thread
// frees a slot. The completion contract is on AdmissionWaiter.
//
// Limits: set_limits() may run at any time from any thread (a reload) and takes effect at once.
// Lowering max_active never revokes a permit: the fast path stops admitting and releases stop
// handing off while active - 1 >= max_active, so active falls monotonically to the new limit
// (its overshoot never grows). Raising it grants parked waiters up to the new limit at once.
// Lowering max_pending rejects the youngest waiters beyond it, so pending <= max_pending always.
//
// Memory ordering: admitting acquires and releasing releases, like a semaphore; nothing in
// floodgate relies on it (a permit guards no data). Observers are relaxed snapshots.
//
// Lifetime: the Admission must outlive every Permit and every queued waiter. It neither copies
// nor moves.
//
// Not here, by design: clocks, executors, sockets. A pending timeout, a client going away and
// generation retirement are all the owner calling AdmissionWaiter::cancel() on its own thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

namespace floodgate {

class Admission;

struct AdmissionLimits {
  uint32_t max_active = 0;   // 0 = unlimited; values above Admission::kMaxActive are clamped
  uint32_t max_pending = 0;  // 0 = no queue: reject at once (never "unlimited")
  bool operator==(const AdmissionLimits&) const = default;
};

// What admit() did, and what a parked waiter's completion reports (admitted or rejected).
enum class AdmitStatus : uint8_t { admitted, queued, rejected };

// Why the owner took a waiter out of the queue; each has its own counter.
enum class CancelReason : uint8_t { timed_out, client_gone, retired, count_ };

// Holds one slot of one Admission; destroying it (or release()) frees the slot exactly once, to
// the oldest waiter if there is one. Move-only; an empty Permit holds nothing.
class Permit {
 public:
  Permit() noexcept = default;
  Permit(Permit&& other) noexcept : admission_(std::exchange(other.admission_, nullptr)) {}
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      release();
      admission_ = std::exchange(other.admission_, nullptr);
    }
    return *this;
  }
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { release(); }

  // Frees the slot now; later calls and the destructor do nothing. May run a waiter's
  // completion on this thread (see AdmissionWaiter).
  inline void release() noexcept;

  explicit operator bool() const noexcept { return admission_ != nullptr; }

 private:
  friend class Admission;
  friend class AdmissionWaiter;
  explicit Permit(Admission& admission) noexcept : admission_(&admission) {}
  Admission* admission_ = nullptr;
};

// A parked arrival: an intrusive node owned by the caller (embedded in its request), so parking
// allocates nothing.
//
// States: idle -> queued (admit) -> granted | rejected (by the admission) | cancelled (by the
// owner). Grant and cancel race on one atomic state with a compare-and-swap; whoever moves it
// out of `queued` first decides.
//
// The completion. When the admission grants (a release handed its slot over, or set_limits
// raised the limit) or rejects (set_limits lowered max_pending below the waiter's place) a
// queued waiter, it calls `on_complete(context, status)` exactly once, with status `admitted` or
// `rejected`:
//   - on the thread that freed the slot, inside Permit::release() or ~Permit (in floodgate: the
//     reactor, often another one, whose request just ended), or on the thread calling
//     set_limits() (the main thread, on reload); never from admit() or cancel(), and never
//     under the admission's lock;
//   - it must not throw, should be short (floodgate's posts a continuation to the owner's
//     executor), and must not touch the waiter or `context` after handing off: from that point
//     the owner may destroy them. It may call any Admission or waiter function, but should not
//     release a permit itself (that would run the next waiter's completion on the same stack).
// The continuation calls take_permit() to obtain the granted slot as a Permit.
//
// cancel() (a pending timeout fired, the client went away, the generation retired): returns
// true if it took the waiter out of the queue; no completion will come. It returns false when the
// waiter is not queued: then a completion is in flight or done, and if it is `admitted` the owner
// must accept the permit (take_permit()) even if it no longer wants it, and drop it, which hands
// the slot to the next waiter. A grant is never leaked: destroying a granted waiter whose permit
// was not taken releases the slot.
//
// Lifetime: once admit() returned `queued`, the waiter and `context` must stay alive and must not
// be admitted again until cancel() returned true or the completion has been called (the
// admission reads what it needs from the node before calling, and never touches it after).
// The owner learns of the outcome from the completion, not by polling state(). Destroying a
// queued waiter is a contract violation (asserted).
class AdmissionWaiter {
 public:
  using Completion = void (*)(void* context, AdmitStatus status) noexcept;
  enum class State : uint8_t { idle, queued, granted, rejected, cancelled };

  AdmissionWaiter(Completion on_complete, void* context) noexcept
      : on_complete_(on_complete), context_(context) {}
  AdmissionWaiter(const AdmissionWaiter&) = delete;
  AdmissionWaiter& operator=(const AdmissionWaiter&) = delete;
  ~AdmissionWaiter();

  State state() const noexcept { return state_.load(std::memory_order_acquire); }

  // Any thread. See the class comment.
  bool cancel(CancelReason reason) noexcept;

  // The granted slot, once: `granted` -> `idle`. Empty if the waiter is not granted (never
  // parked, still queued, rejected, cancelled, or the permit was already taken).
  [[nodiscard]] Permit take_permit() noexcept;

 private:
  friend class Admission;

  // Atomic because the owner (cancel, take_permit) and a releasing thread (grant) race on it.
  std::atomic<State> state_{State::idle};
  const Completion on_complete_;
  void* const context_;
  // The rest is written by admit() and then only under admission_->mu_.
  Admission* admission_ = nullptr;
  AdmissionWaiter* prev_ = nullptr;
  AdmissionWaiter* next_ = nullptr;
  bool linked_ = false;  // in admission_'s FIFO
};

class Admission {
 public:
  // The largest finite max_active (active counts live in 31 bits of the state word).
  static constexpr uint32_t kMaxActive = (uint32_t{1} << 31) - 2;

  struct Result {
    AdmitStatus status;
    Permit permit;  // holds the slot iff status == admitted
  };

  explicit Admission(AdmissionLimits limits = {}) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  ~Admission();

  // admitted: `permit` holds a slot. queued: `waiter` is parked; its completion will report the
  // outcome unless cancel() returns true first. rejected: the queue is full (or there is none).
  // Precondition: `waiter` is not queued and has no untaken grant. It is only touched if queued.
  [[nodiscard]] inline Result admit(AdmissionWaiter& waiter) noexcept;
  // A slot at once, or an empty Permit: never queues and never takes the lock, and never
  // barges past parked waiters (the front in-flight cap, which has no queue). A slot counts as
  // admitted; a refusal is not counted here (the caller counts it, per reactor, off the shared
  // cache line).
  [[nodiscard]] inline Permit try_admit() noexcept;

  // Takes effect at once; see the file comment. Runs completions of the waiters it grants or
  // rejects on this thread, oldest first, after dropping the lock.
  void set_limits(AdmissionLimits limits) noexcept;

  // Observers: relaxed, any thread, for metrics and tests. active() counts permits held,
  // including granted ones not yet taken; pending() counts queued waiters.
  int64_t active() const noexcept {
    return static_cast<int64_t>(word_.load(std::memory_order_relaxed) & kCountMask);
  }
  int64_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
  // max_active as configured (0 = unlimited) and max_pending. Each is exact; the pair is not
  // read atomically.
  uint32_t limit() const noexcept {
    const uint64_t limit = limit_of(word_.load(std::memory_order_relaxed));
    return limit == kUnlimited ? 0 : static_cast<uint32_t>(limit);
  }
  uint32_t max_pending() const noexcept { return max_pending_.load(std::memory_order_relaxed); }
  // Counters. Every admit() call ends up in exactly one of admitted (a slot, at once or by a
  // grant), rejected (queue full or none, or evicted by a lowered max_pending: the proxy's
  // proxy_overloaded) and cancelled(reason) (taken out by its owner: timed_out is
  // pending_timeout, retired is generation_retired). A cancel that lost to a grant counts as
  // admitted. queued counts the arrivals that had to wait.
  uint64_t admitted() const noexcept { return admitted_.load(std::memory_order_relaxed); }
  uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  uint64_t cancelled(CancelReason reason) const noexcept {
    return cancelled_[static_cast<std::size_t>(reason)].load(std::memory_order_relaxed);
  }
  uint64_t queued() const noexcept { return queued_.load(std::memory_order_relaxed); }

 private:
  friend class Permit;
  friend class AdmissionWaiter;
  class Completions;

  // The state word: bits 0-30 active count, bit 31 "the FIFO is not empty", bits 32-62 the
  // limit. One word so that a compare-and-swap checks count, limit and waiters at once: an admit
  // racing set_limits() or a waiter being parked fails and retries instead of overshooting or
  // barging.
  static constexpr uint64_t kCountMask = (uint64_t{1} << 31) - 1;
  static constexpr uint64_t kQueuedFlag = uint64_t{1} << 31;
  static constexpr unsigned kLimitShift = 32;
  static constexpr uint64_t kUnlimited = kCountMask;  // limit field of max_active = 0
  static uint64_t count_of(uint64_t word) noexcept { return word & kCountMask; }
  static uint64_t limit_of(uint64_t word) noexcept { return word >> kLimitShift; }
  static uint64_t limit_field(uint32_t max_active) noexcept;

  inline void release_slot() noexcept;
  Result admit_slow(AdmissionWaiter& waiter) noexcept;
  void release_slow() noexcept;
  void cancel_queued(AdmissionWaiter& waiter, CancelReason reason) noexcept;
  // Under mu_:
  void link_tail(AdmissionWaiter& waiter) noexcept;
  void unlink(AdmissionWaiter& waiter) noexcept;
  AdmissionWaiter* pop_live_head() noexcept;  // drops cancelled heads; grants the first live one
  void drop_cancelled_heads() noexcept;
  void clear_flag_if_empty() noexcept;

  // Atomic: fast paths on every thread compare-and-swap it. Own cache line (with the admitted
  // count, written in the same operation), since every admit and release writes it.
  alignas(64) std::atomic<uint64_t> word_;
  std::atomic<uint64_t> admitted_{0};  // atomic: the fast path counts without the lock

  // The slow path. Values below are written only under mu_; the atomics are for relaxed
  // observers on other threads.
  alignas(64) std::mutex mu_;
  AdmissionWaiter* head_ = nullptr;  // guarded by mu_; oldest
  AdmissionWaiter* tail_ = nullptr;  // guarded by mu_
  std::atomic<int64_t> pending_{0};
  std::atomic<uint32_t> max_pending_;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> queued_{0};
  std::array<std::atomic<uint64_t>, static_cast<std::size_t>(CancelReason::count_)> cancelled_{};
};

// The fast paths, inline: below the limit with an empty FIFO, one load and one CAS each.

Admission::Result Admission::admit(AdmissionWaiter& waiter) noexcept {
  uint64_t word = word_.load(std::memory_order_relaxed);
  while ((word & kQueuedFlag) == 0 && count_of(word) < limit_of(word)) {
    if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      admitted_.fetch_add(1, std::memory_order_relaxed);
      return {AdmitStatus::admitted, Permit(*this)};
    }
  }
  return admit_slow(waiter);
}

Permit Admission::try_admit() noexcept {
  uint64_t word = word_.load(std::memory_order_relaxed);
  while ((word & kQueuedFlag) == 0 && count_of(word) < limit_of(word)) {
    if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acquire,
                                    std::memory_order_relaxed)) {
      admitted_.fetch_add(1, std::memory_order_relaxed);
      return Permit(*this);
    }
  }
  return {};
}

void Admission::release_slot() noexcept {
  uint64_t word = word_.load(std::memory_order_relaxed);
  while ((word & kQueuedFlag) == 0) {  // nobody to hand the slot to
    if (word_.compare_exchange_weak(word, word - 1, std::memory_order_release,
                                    std::memory_order_relaxed)) {
      return;
    }
  }
  release_slow();
}

void Permit::release() noexcept {
  if (admission_ != nullptr) std::exchange(admission_, nullptr)->release_slot();
}

}  // namespace floodgate
