#include "floodgate/resilience/rate_table.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "floodgate/core/cpu_relax.h"
#include "floodgate/resilience/quota_counter.h"

namespace floodgate::resilience {

namespace {

// How many times a thread looks again after another thread won the race for the slot it chose
// (each lost race means another thread made progress) before it gives up.
constexpr int kClaimTries = 4;
// How many times a look-up re-reads a slot whose bucket is being made before it gives up on it
// (making it takes a few stores and one pass over the window, about a microsecond: well under
// this, some 40 us, unless the maker was descheduled).
constexpr int kMakingSpins = 1024;

std::array<uint64_t, 4> words_of(const Digest& d) noexcept {
  std::array<uint64_t, 4> w{};
  std::memcpy(w.data(), d.data(), sizeof(w));
  return w;
}

uint32_t home_of(const std::array<uint64_t, 4>& id, uint32_t mask) noexcept {
  return static_cast<uint32_t>(id[0]) & mask;  // SHA-256 bits are uniform: any four bytes index
}

}  // namespace

template <class Cell>
BucketTable<Cell>::BucketTable(uint32_t max_live)
    : max_live_(max_live == 0 ? 1 : max_live),
      mask_(std::bit_ceil(2 * max_live_) - 1),
      window_(std::min(kWindow, mask_ + 1)),
      slots_(std::make_unique<Slot[]>(mask_ + 1)) {}

template <class Cell>
uint32_t BucketTable<Cell>::millis(Clock::time_point t) noexcept {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  return static_cast<uint32_t>(ms.count());  // wraps: only differences are used
}

// The seqlock read: the digest counts only when the word around it did not move.
template <class Cell>
bool BucketTable<Cell>::holds(const Slot& s, uint32_t word, const Words& id) const noexcept {
  bool same = true;
  for (std::size_t i = 0; i < id.size(); ++i) {
    same = same && s.id[i].load(std::memory_order_relaxed) == id[i];
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return same && same_bucket(s.word.load(std::memory_order_relaxed), word);
}

// The whole window, unless the identity's bucket comes first: a bucket can be past a free slot
// (it took over a bucket there while the table was full, or the slot was freed after it was
// made), so a free slot does not end the search.
template <class Cell>
typename BucketTable<Cell>::Look BucketTable<Cell>::look(const Words& id, uint32_t home,
                                                         Clock::time_point now,
                                                         bool evict) const noexcept {
  Look l;
  const uint32_t ms = millis(now);
  uint64_t best = 0;  // the victim's rank: refilled, then unused for longest
  for (uint32_t n = 0; n < window_; ++n) {
    const uint32_t i = (home + n) & mask_;
    Slot& s = slots_[i];
    uint32_t word = s.word.load(std::memory_order_acquire);
    // A bucket being made may be this identity's: wait for it (a live one not yet settled only
    // when it holds the identity), so that two threads agree on one slot.
    for (int spin = 0;
         spin < kMakingSpins && making(word) && (status(word) == kBusy || holds(s, word, id));
         ++spin) {
      cpu_relax();
      word = s.word.load(std::memory_order_acquire);
    }
    if (making(word)) {  // another identity's, or its maker was descheduled
      l.unsure = l.unsure || status(word) == kBusy || holds(s, word, id);
      continue;
    }
    const uint32_t st = status(word);
    if (st == kLive && holds(s, word, id)) {
      l.found = {&s.cell, i, word};
      return l;
    }
    if ((st == kEmpty || st == kDead) && l.free == kNone) {
      l.free = i;
      l.free_word = word;
    } else if (st == kLive && evict) {
      // A refilled bucket first: its identity loses nothing. Then the one unused for longest,
      // but never one used in this millisecond (or, by a reactor whose clock is a little ahead,
      // after it): it is in use now.
      const bool refilled = s.cell.idle_for(now, std::chrono::nanoseconds(0));
      const auto age = static_cast<int32_t>(ms - s.used.load(std::memory_order_relaxed));
      if (!refilled && age <= 0) continue;
      const uint64_t rank = uint64_t{refilled} << 32 | static_cast<uint32_t>(std::max(age, 0));
      if (l.victim == kNone || rank > best) {
        l.victim = i;
        l.victim_word = word;
        best = rank;
      }
    }
  }
  return l;
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find(const Digest& digest) const noexcept {
  const Words id = words_of(digest);
  return look(id, home_of(id, mask_), Clock::time_point{}, false).found;
}

template <class Cell>
bool BucketTable<Cell>::current(const Entry& e) const noexcept {
  return same_bucket(slots_[e.slot].word.load(std::memory_order_acquire), e.word);
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find_or_insert(const Digest& digest) noexcept {
  const Words id = words_of(digest);
  return find_or_make(id, home_of(id, mask_), Clock::time_point{}, false);
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find_or_evict(const Digest& digest,
                                                                   Clock::time_point now) noexcept {
  const Words id = words_of(digest);
  return find_or_make(id, home_of(id, mask_), now, true);
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find_or_make(const Words& id, uint32_t h,
                                                                  Clock::time_point now,
                                                                  bool evict) noexcept {
  const uint32_t ms = millis(now);
  for (int t = 0; t < kClaimTries; ++t) {
    const Look l = look(id, h, now, evict);
    if (l.found) {
      if (evict) {
        std::atomic<uint32_t>& used = slots_[l.found.slot].used;
        // Stored only when it changes: a refused take writes nothing else to the slot.
        if (used.load(std::memory_order_relaxed) != ms) used.store(ms, std::memory_order_relaxed);
      }
      return l.found;
    }
    if (l.free != kNone && reserve_live()) {
      const Entry e = claim(l.free, l.free_word, id, h, ms);
      if (!e) {
        live_.fetch_sub(1, std::memory_order_relaxed);  // lost the slot: look again
      } else if (current(e)) {
        return e;
      }  // else made and gone at once (another bucket of the identity stays): look again
      continue;
    }
    if (!evict || l.victim == kNone) return {.busy = l.unsure};  // no room, nothing to take over
    if (Entry e = claim(l.victim, l.victim_word, id, h, ms); e && current(e)) {
      e.evicted = true;  // the bucket stays live: the count does not change
      return e;
    }
  }
  return {.busy = true};  // other threads kept winning, or a maker kept its slot (descheduled)
}

// The live count reserved for a bucket about to be made, unless it is at max_live.
template <class Cell>
bool BucketTable<Cell>::reserve_live() noexcept {
  uint32_t n = live_.load(std::memory_order_relaxed);
  do {
    if (n >= max_live_) return false;
  } while (!live_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  return true;
}

// Takes slot `i`, seen as `word` (free, or a live bucket to take over), for `id`: a full bucket,
// used at `used`. Empty when another thread changed the slot first.
template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::claim(uint32_t i, uint32_t word,
                                                           const Words& id, uint32_t home,
                                                           uint32_t used) noexcept {
  Slot& s = slots_[i];
  const uint32_t busy = next_word(word, kBusy);
  if (!s.word.compare_exchange_strong(word, busy, std::memory_order_relaxed)) return {};
  std::atomic_thread_fence(std::memory_order_release);  // busy is seen before the new digest
  for (std::size_t k = 0; k < id.size(); ++k) s.id[k].store(id[k], std::memory_order_relaxed);
  s.cell.reset();
  s.used.store(used, std::memory_order_relaxed);
  const uint32_t live = next_word(busy, kLive);
  s.word.store(live, std::memory_order_seq_cst);  // before settle()'s look: see there
  return settle({&s.cell, i, live}, id, home);
}

// After `mine` was made live for `id`: another thread may have made the same identity a bucket
// in another slot of the window at the same time. Of the two, the one nearer the home stays and
// the other is made dead (by this thread, or the other one, or both: one of them wins). Each
// thread makes its bucket live before it looks here, both sequentially consistent, so at least
// one of the two sees the other's. Counts move only into the mover's own bucket, before it is
// settled (retire_into): `mine` has none of its own when it goes (only settled buckets are used,
// and this thread moves counts into it only after the nearer ones, which come first, are past).
template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::settle(Entry mine, const Words& id,
                                                            uint32_t home) noexcept {
  const uint32_t my_distance = distance(home, mine.slot);
  for (uint32_t n = 0; n < window_; ++n) {
    const uint32_t i = (home + n) & mask_;
    if (i == mine.slot) continue;
    Slot& s = slots_[i];
    const uint32_t word = s.word.load(std::memory_order_seq_cst);
    if (status(word) != kLive || !holds(s, word, id)) continue;
    if (n < my_distance) {  // the other one stays: this one goes
      retire(mine.slot, mine.word);
      return mine;  // gone: the caller looks again (and waits for the other to settle)
    }
    if (!retire_into(mine, i, word)) {
      if (!current(mine)) return mine;  // this one went meanwhile: the caller looks again
    }
  }
  // The one bucket of the identity: settled, and from now on used. When it went meanwhile, the
  // caller finds it gone and looks again.
  uint32_t word = mine.word;
  if (slots_[mine.slot].word.compare_exchange_strong(word, mine.word | kSettled,
                                                     std::memory_order_seq_cst)) {
    mine.word |= kSettled;
  }
  return mine;
}

// Retires the bucket in slot `i` (seen as `word`), a duplicate of `mine` farther from the home.
// A quota's counts in it move into `mine` in the same step, under both cells' flags (taken in
// slot order; nothing else ever holds two), and only while `mine` still stands: so no count
// made there is lost, none lands in a bucket already gone, and none reaches another identity's
// bucket through a reused slot. A rate limit's token bucket is left as it is (a token or two of
// one identity's burst, at its first requests).
template <class Cell>
bool BucketTable<Cell>::retire_into(const Entry& mine, uint32_t i, uint32_t word) noexcept {
  if constexpr (requires(Cell & c) { c.move_to(c, true, [] { return true; }); }) {
    return slots_[i].cell.move_to(*mine.cell, i < mine.slot,
                                  [&] { return current(mine) && retire(i, word); });
  } else {
    return retire(i, word);
  }
}

// Makes slot `i` dead when it still is the live bucket of `word` (settled since or not).
template <class Cell>
bool BucketTable<Cell>::retire(uint32_t i, uint32_t word) noexcept {
  std::atomic<uint32_t>& w = slots_[i].word;
  uint32_t seen = word;
  while (!w.compare_exchange_weak(seen, next_word(seen, kDead), std::memory_order_release,
                                  std::memory_order_relaxed)) {
    if (!same_bucket(seen, word)) return false;  // another bucket's, or gone
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

template <class Cell>
uint32_t BucketTable<Cell>::reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept {
  uint32_t reclaimed = 0;
  for (uint32_t i = 0; i <= mask_; ++i) {
    Slot& s = slots_[i];
    const uint32_t word = s.word.load(std::memory_order_acquire);
    if (status(word) != kLive || !settled(word)) continue;  // one being made is in use
    const auto retire_it = [&] { return retire(i, word); };
    bool gone = false;
    if constexpr (requires { s.cell.retire_when_idle(now, ttl, retire_it); }) {
      gone = s.cell.retire_when_idle(now, ttl, retire_it);  // no take between check and retire
    } else {
      gone = s.cell.idle_for(now, ttl) && retire_it();
    }
    if (gone) ++reclaimed;
  }
  return reclaimed;
}

template class BucketTable<GcraCell>;
template class BucketTable<QuotaCell>;

}  // namespace floodgate::resilience
