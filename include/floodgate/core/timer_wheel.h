// A hierarchical timing wheel: the one timer mechanism of a reactor.
//
// Every connection deadline (header, idle, connect, response, keep-alive), a queued request's
// pending_timeout and a hedge's delay is an intrusive TimerWheel::Entry owned by the object it
// times out. Scheduling and cancelling are O(1) and touch no allocator and no kernel, which is
// why the request path uses this instead of one asio::steady_timer per deadline (re-arming a
// steady_timer cancels its pending wait, which posts a completion).
//
// Two levels. The inner one has `slots` slots of `resolution` each (1 ms x 1024 by default)
// and holds the entries due within its span; the outer one has `outer_slots` slots a quarter
// of the inner span wide (256 ms x 4096 by default, about 17 minutes) and holds the rest. An
// outer slot's entries move to the inner level when its time comes, so each fires in the
// inner slot of its deadline, however far it was armed. An occupancy bitmap per level finds
// the next slot that holds anything without visiting the empty ones: next_due() tells the
// event loop how long it may sleep (Poller::run bounds its wait by it), so a reactor wakes up
// when a deadline is due, never on a periodic tick, and advance() after a long sleep costs
// the occupied slots only.
//
// Thread-safety: single-threaded. A wheel and its entries belong to one reactor thread.
// Resolution: deadlines fire at most one `resolution` late (after the loop's own latency),
// never early. Entries further than the outer span are moved on each time their outer slot
// comes round, and still fire on time.
// Lifetime: an Entry must be cancelled (or have fired) before it is destroyed; ~Entry cancels.
#pragma once

#include <algorithm>
#include <bit>
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
    uint32_t slot_ = 0;
    uint8_t level_ = 0;  // kInner, kOuter or kPending
    Clock::time_point deadline_{};
  };

  // `slots` and `outer_slots` must be powers of two, at least 64.
  explicit TimerWheel(Clock::duration resolution = std::chrono::milliseconds(1),
                      std::size_t slots = 1024, std::size_t outer_slots = 4096)
      : resolution_(resolution),
        inner_(slots),
        outer_(outer_slots),
        span_(static_cast<int64_t>(slots)),
        per_outer_(static_cast<int64_t>(slots / 4)),
        outer_span_(per_outer_ * static_cast<int64_t>(outer_slots)) {}

  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  Clock::duration resolution() const { return resolution_; }
  std::size_t size() const { return size_; }

  // (Re)arms `e` to fire at `deadline`. An armed entry is moved.
  void schedule(Entry& e, Clock::time_point deadline) {
    if (e.wheel_ != nullptr) unlink(e);
    e.deadline_ = deadline;
    e.wheel_ = this;
    ++size_;
    place(e);
  }

  // Fires every entry whose deadline is <= now, in deadline order to the resolution. A
  // callback may schedule or cancel any entry, including itself and the entry that would fire
  // next.
  void advance(Clock::time_point now) {
    const int64_t target = ticks(now);
    if (cursor_ < 0) start(target);
    if (target < hint_) return;  // nothing is due before hint_
    for (;;) {
      const int64_t t = next_event(target);
      if (t > target) break;
      // schedule() from a callback clamps to the tick being fired, never to one already
      // visited (that would wait a whole revolution).
      cursor_ = t;
      if (t % per_outer_ == 0) cascade(t / per_outer_);
      fire_slot(static_cast<std::size_t>(t) & inner_.mask, now);
      cursor_ = t + 1;
    }
    cursor_ = target + 1;
    set_hint(size_ == 0 ? kNever : next_event(kNever));
  }

  // Whether advance(now) has anything to do: the event loop asks on every turn (an inline
  // comparison), and advances only then. Until it does, the wheel's cursor stays where it
  // was: entries armed meanwhile are placed from there, which costs at most a move from the
  // outer level and never a late firing.
  bool due(Clock::time_point now) const { return now >= hint_at_ || cursor_ < 0; }

  // When advance() next has something to do: the earliest time an inner slot holding
  // entries comes due, or an outer slot's entries must move in. Clock::time_point::max() when
  // nothing is armed; the past (min()) when entries armed before the first advance() wait.
  // O(1) while the earliest entry stays armed; a cancelled one is looked past once.
  Clock::time_point next_due() const {
    if (size_ == 0) return Clock::time_point::max();
    if (cursor_ < 0) return Clock::time_point::min();
    if (!event_at(hint_)) set_hint(next_event(kNever));
    return hint_at_;
  }

 private:
  static constexpr uint8_t kInner = 0;
  static constexpr uint8_t kOuter = 1;
  static constexpr uint8_t kPending = 2;  // armed before the first advance(): no time yet
  static constexpr int64_t kNever = INT64_MAX;

  // One level: list heads, a bitmap of the non-empty ones, and a summary bitmap of the
  // bitmap's non-zero words, so that finding the next non-empty slot costs a few word
  // operations however far it is (the loop asks before every wait).
  struct Level {
    explicit Level(std::size_t n)
        : heads(n, nullptr),
          bits(n / 64, 0),
          summary((n / 64 + 63) / 64, 0),
          mask(n - 1),
          word_mask(n / 64 - 1) {}
    std::vector<Entry*> heads;
    std::vector<uint64_t> bits;
    std::vector<uint64_t> summary;
    std::size_t mask;
    std::size_t word_mask;

    bool occupied(std::size_t s) const { return heads[s] != nullptr; }
    void mark(std::size_t s) {
      bits[s / 64] |= uint64_t{1} << (s % 64);
      summary[s / 4096] |= uint64_t{1} << (s / 64 % 64);
    }
    void clear(std::size_t s) {
      uint64_t& word = bits[s / 64];
      word &= ~(uint64_t{1} << (s % 64));
      if (word == 0) summary[s / 4096] &= ~(uint64_t{1} << (s / 64 % 64));
    }
    // The first non-zero word of the bitmap from word `w` on, wrapping; `w` when every word
    // is zero.
    std::size_t next_word(std::size_t w) const {
      const std::size_t n = summary.size();
      std::size_t i = w / 64;
      uint64_t pending = summary[i] & (~uint64_t{0} << (w % 64));
      for (std::size_t k = 0; k <= n; ++k) {
        if (pending != 0) return i * 64 + static_cast<std::size_t>(std::countr_zero(pending));
        i = i + 1 == n ? 0 : i + 1;
        pending = summary[i];
      }
      return w;  // every word is zero
    }
    // Of the `n` slots from `from` on (wrapping), how far the first non-empty one is; n when
    // none is.
    int64_t distance_to_occupied(std::size_t from, int64_t n) const {
      const auto size = static_cast<int64_t>(heads.size());
      if (n > size) n = size;
      const std::size_t s = from & mask;
      const std::size_t w = s / 64;
      // This slot and the rest of its word.
      if (const uint64_t here = bits[w] >> (s % 64); here != 0) {
        const int64_t d = std::countr_zero(here);
        return d < n ? d : n;
      }
      // The next non-zero word after this one, wrapping round to this word's lower slots.
      const std::size_t next = next_word((w + 1) & word_mask);
      if (bits[next] == 0) return n;  // nothing anywhere
      const std::size_t slot = next * 64 + static_cast<std::size_t>(std::countr_zero(bits[next]));
      const auto d = static_cast<int64_t>((slot - s) & mask);
      return d < n ? d : n;
    }
  };

  int64_t ticks(Clock::time_point t) const { return t.time_since_epoch() / resolution_; }

  // Puts an armed entry in the level and slot of its deadline, from the cursor's tick on.
  void place(Entry& e) {
    if (cursor_ < 0) return link(e, kPending, 0, pending_);
    // The tick visited first at or after the deadline: ceil(deadline / resolution), and never
    // one the cursor has already passed.
    int64_t t = ticks(e.deadline_);
    if (Clock::time_point(resolution_ * t) < e.deadline_) ++t;
    if (t < cursor_) t = cursor_;
    if (t < cursor_ + span_) {
      const auto s = static_cast<std::size_t>(t) & inner_.mask;
      inner_.mark(s);
      if (t < hint_) set_hint(t);
      return link(e, kInner, static_cast<uint32_t>(s), inner_.heads[s]);
    }
    // Moved in when the outer tick floor(t / per_outer_) begins, within a quarter span of t
    // (after the cursor: t is a whole inner span ahead of it). A deadline beyond the outer
    // span is in the slot that comes round first with its index.
    const int64_t outer_tick = t / per_outer_;
    const auto s = static_cast<std::size_t>(outer_tick) & outer_.mask;
    outer_.mark(s);
    int64_t at = outer_tick * per_outer_;
    if (t - cursor_ >= outer_span_) {
      const int64_t first = (cursor_ + per_outer_ - 1) / per_outer_;
      at = (first + static_cast<int64_t>((s - static_cast<std::size_t>(first)) & outer_.mask)) *
           per_outer_;
    }
    if (at < hint_) set_hint(at);
    link(e, kOuter, static_cast<uint32_t>(s), outer_.heads[s]);
  }

  void set_hint(int64_t t) const {
    hint_ = t;
    hint_at_ = t == kNever ? Clock::time_point::max() : Clock::time_point(resolution_ * t);
  }

  // Whether advance() has work at tick `t` (at or after the cursor): its inner slot holds
  // entries, or an outer slot's entries move in then.
  bool event_at(int64_t t) const {
    if (t == kNever) return false;
    if (t < cursor_ + span_ && inner_.occupied(static_cast<std::size_t>(t) & inner_.mask)) {
      return true;
    }
    return t % per_outer_ == 0 &&
           outer_.occupied(static_cast<std::size_t>(t / per_outer_) & outer_.mask);
  }

  void link(Entry& e, uint8_t level, uint32_t slot, Entry*& head) {
    e.level_ = level;
    e.slot_ = slot;
    e.prev_ = nullptr;
    e.next_ = head;
    if (head != nullptr) head->prev_ = &e;
    head = &e;
  }

  void unlink(Entry& e) {
    Entry*& head = e.level_ == kInner   ? inner_.heads[e.slot_]
                   : e.level_ == kOuter ? outer_.heads[e.slot_]
                                        : pending_;
    if (e.prev_ != nullptr) {
      e.prev_->next_ = e.next_;
    } else {
      head = e.next_;
      if (head == nullptr) {
        if (e.level_ == kInner) inner_.clear(e.slot_);
        if (e.level_ == kOuter) outer_.clear(e.slot_);
      }
    }
    if (e.next_ != nullptr) e.next_->prev_ = e.prev_;
    e.prev_ = e.next_ = nullptr;
    e.wheel_ = nullptr;
    --size_;
  }

  // The first advance() gives the wheel its time: what was armed before is placed now (a
  // deadline already passed fires in this advance()).
  void start(int64_t target) {
    cursor_ = target;
    Entry* e = pending_;
    pending_ = nullptr;
    while (e != nullptr) {
      Entry* next = e->next_;
      place(*e);
      e = next;
    }
  }

  // The first tick from the cursor up to `limit` at which advance() has work: an inner slot
  // holding entries, or the start of an outer tick whose slot holds entries. limit + 1 when
  // there is none (INT64_MAX when limit is INT64_MAX).
  int64_t next_event(int64_t limit) const {
    if (limit < cursor_) return limit + 1;
    const int64_t window = limit == INT64_MAX ? span_ : limit - cursor_ + 1;
    int64_t best = limit == INT64_MAX ? INT64_MAX : limit + 1;
    const int64_t d = inner_.distance_to_occupied(static_cast<std::size_t>(cursor_), window);
    if (d < window) best = cursor_ + d;
    // Outer ticks whose start is at or after the cursor: those before were moved in.
    const int64_t first = (cursor_ + per_outer_ - 1) / per_outer_;
    const int64_t last = limit == INT64_MAX ? INT64_MAX : limit / per_outer_;
    if (first <= last) {
      const int64_t outer_window = last == INT64_MAX ? INT64_MAX : last - first + 1;
      const int64_t o = outer_.distance_to_occupied(static_cast<std::size_t>(first), outer_window);
      if (o < outer_window && o < static_cast<int64_t>(outer_.heads.size())) {
        best = std::min(best, (first + o) * per_outer_);
      }
    }
    return best;
  }

  // The outer tick `outer_tick` begins: its slot's entries go where their deadline now puts
  // them (the inner level; a deadline further than the outer span comes round again).
  void cascade(int64_t outer_tick) {
    const auto s = static_cast<std::size_t>(outer_tick) & outer_.mask;
    Entry* e = outer_.heads[s];
    outer_.heads[s] = nullptr;
    outer_.clear(s);
    while (e != nullptr) {
      Entry* next = e->next_;
      place(*e);
      e = next;
    }
  }

  // Fires due entries one at a time, rescanning from the slot head after each callback: a
  // callback may cancel, re-arm or destroy any other entry, so no pointer into the slot is
  // kept across a call. Slots hold few entries (deadlines spread over a thousand slots).
  void fire_slot(std::size_t slot, Clock::time_point now) {
    for (;;) {
      Entry* e = inner_.heads[slot];
      while (e != nullptr && e->deadline_ > now) e = e->next_;
      if (e == nullptr) return;
      unlink(*e);
      e->on_fire_(e->context_);
    }
  }

  Clock::duration resolution_;
  Level inner_;
  Level outer_;
  int64_t span_;        // inner slots
  int64_t per_outer_;   // inner ticks per outer tick (a quarter of the inner span)
  int64_t outer_span_;  // inner ticks the outer level covers
  Entry* pending_ = nullptr;
  std::size_t size_ = 0;
  // No inner tick before hint_ has work for advance() (a lower bound: an entry cancelled since
  // leaves it early until next_due() or advance() looks again).
  mutable int64_t hint_ = kNever;
  mutable Clock::time_point hint_at_ = Clock::time_point::max();  // hint_'s time
  int64_t cursor_ = -1;  // the next inner tick advance() visits; -1 before the first
};

}  // namespace floodgate
