// A hashed timing wheel: the one timer mechanism of a reactor.
//
// Every connection deadline (header, idle, connect, response, keep-alive) is an intrusive
// TimerWheel::Entry owned by the object it times out. Scheduling and cancelling are O(1) and
// touch no allocator and no kernel, which is why the request path uses this instead of one
// asio::steady_timer per deadline (re-arming a steady_timer cancels its pending wait, which
// posts a completion). The reactor calls advance() from one periodic steady_timer tick.
//
// Thread-safety: single-threaded. A wheel and its entries belong to one reactor thread.
// Resolution: deadlines fire at most one tick late, never early.
// Lifetime: an Entry must be cancelled (or have fired) before it is destroyed; ~Entry cancels.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace floodgate {

class TimerWheel {
 public:
  using Clock = std::chrono::steady_clock;

  class Entry {
   public:
    // Called with the context given at construction (usually the owning object).
    using Callback = void (*)(void* context);
    Entry(Callback on_fire, void* context) : on_fire_(on_fire), context_(context) {}
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    ~Entry() { cancel(); }

    bool armed() const { return wheel_ != nullptr; }
    Clock::time_point deadline() const { return deadline_; }
    void cancel() {
      if (wheel_ != nullptr) wheel_->unlink(*this);
    }

   private:
    friend class TimerWheel;
    Callback on_fire_;
    void* context_;
    TimerWheel* wheel_ = nullptr;
    Entry* prev_ = nullptr;
    Entry* next_ = nullptr;
    std::size_t slot_ = 0;
    Clock::time_point deadline_{};
  };

  // `slots` must be a power of two; one revolution spans slots * resolution.
  explicit TimerWheel(Clock::duration resolution = std::chrono::milliseconds(10),
                      std::size_t slots = 4096)
      : resolution_(resolution), heads_(slots, nullptr), mask_(slots - 1) {}

  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  Clock::duration resolution() const { return resolution_; }
  std::size_t size() const { return size_; }

  // (Re)arms `e` to fire at `deadline`. An armed entry is moved.
  void schedule(Entry& e, Clock::time_point deadline) {
    if (e.wheel_ != nullptr) unlink(e);
    e.deadline_ = deadline;
    // The slot visited first at or after the deadline: ceil(deadline / resolution), and never
    // one the cursor has already passed (that would wait a whole revolution).
    int64_t t = ticks(deadline);
    if (Clock::time_point(resolution_ * t) < deadline) ++t;
    if (cursor_ >= 0 && t < cursor_) t = cursor_;
    e.slot_ = static_cast<std::size_t>(t) & mask_;
    Entry*& head = heads_[e.slot_];
    e.prev_ = nullptr;
    e.next_ = head;
    if (head != nullptr) head->prev_ = &e;
    head = &e;
    e.wheel_ = this;
    ++size_;
  }

  // Fires every entry whose deadline is <= now, in slot order. A callback may schedule or
  // cancel any entry, including itself and the entry that would fire next.
  void advance(Clock::time_point now) {
    const int64_t target = ticks(now);
    // Visit each slot passed since the last call, but at most one revolution. The first call
    // visits a whole revolution: entries scheduled before it may lie in any slot.
    const int64_t first = cursor_ < 0 ? target - static_cast<int64_t>(mask_)
                                      : std::max(cursor_, target - static_cast<int64_t>(mask_));
    for (int64_t t = first; t <= target; ++t) {
      // schedule() from a callback clamps to the slot being fired, never to one already
      // visited by this call (that would wait a whole revolution).
      cursor_ = t;
      fire_slot(static_cast<std::size_t>(t) & mask_, now);
    }
    cursor_ = target + 1;
  }

 private:
  int64_t ticks(Clock::time_point t) const { return t.time_since_epoch() / resolution_; }

  void unlink(Entry& e) {
    if (e.prev_ != nullptr) {
      e.prev_->next_ = e.next_;
    } else {
      heads_[e.slot_] = e.next_;
    }
    if (e.next_ != nullptr) e.next_->prev_ = e.prev_;
    e.prev_ = e.next_ = nullptr;
    e.wheel_ = nullptr;
    --size_;
  }

  // Fires due entries one at a time, rescanning from the slot head after each callback: a
  // callback may cancel, re-arm or destroy any other entry, so no pointer into the slot is
  // kept across a call. Slots hold few entries (deadlines spread over thousands of slots).
  void fire_slot(std::size_t slot, Clock::time_point now) {
    for (;;) {
      Entry* e = heads_[slot];
      while (e != nullptr && e->deadline_ > now) e = e->next_;
      if (e == nullptr) return;
      unlink(*e);
      e->on_fire_(e->context_);
    }
  }

  Clock::duration resolution_;
  std::vector<Entry*> heads_;
  std::size_t mask_;
  std::size_t size_ = 0;
  int64_t cursor_ = -1;
};

}  // namespace floodgate
