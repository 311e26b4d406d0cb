#include "floodgate/resilience/rate_table.h"

#include <bit>
#include <cstring>

#include "floodgate/core/cpu_relax.h"
#include "floodgate/resilience/quota_counter.h"

namespace floodgate::resilience {

namespace {

// How many times a reactor tries the writer flag before it gives up on inserting (each try
// after a spin of a few dozen nanoseconds; a writer holds the flag for one slot's stores).
constexpr int kWriterTries = 256;

std::array<uint64_t, 4> words_of(const Digest& d) noexcept {
  std::array<uint64_t, 4> w{};
  std::memcpy(w.data(), d.data(), sizeof(w));
  return w;
}

}  // namespace

template <class Cell>
BucketTable<Cell>::BucketTable(uint32_t max_live)
    : max_live_(max_live == 0 ? 1 : max_live),
      mask_(std::bit_ceil(2 * max_live_) - 1),
      slots_(std::make_unique<Slot[]>(mask_ + 1)) {}

template <class Cell>
uint32_t BucketTable<Cell>::home(const Digest& id) const noexcept {
  uint32_t h = 0;
  std::memcpy(&h, id.data(), sizeof(h));  // SHA-256 bits are uniform: any four bytes index
  return h & mask_;
}

// The seqlock read: the digest counts only when the word around it did not move.
template <class Cell>
bool BucketTable<Cell>::holds(const Slot& s, uint32_t word,
                              const std::array<uint64_t, 4>& id) const noexcept {
  bool same = true;
  for (std::size_t i = 0; i < id.size(); ++i) {
    same = same && s.id[i].load(std::memory_order_relaxed) == id[i];
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return same && s.word.load(std::memory_order_relaxed) == word;
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find(const Digest& digest) const noexcept {
  const std::array<uint64_t, 4> id = words_of(digest);
  uint32_t i = home(digest);
  for (uint32_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    const uint32_t word = s.word.load(std::memory_order_acquire);
    if (status(word) == kEmpty) break;  // the end of the identity's probe run
    if (status(word) == kLive && holds(s, word, id)) return {&s.cell, i, word};
  }
  return {};
}

template <class Cell>
bool BucketTable<Cell>::current(const Entry& e) const noexcept {
  return slots_[e.slot].word.load(std::memory_order_acquire) == e.word;
}

template <class Cell>
bool BucketTable<Cell>::lock_writer() noexcept {
  for (int t = 0; t < kWriterTries; ++t) {
    if (!writer_.load(std::memory_order_relaxed) &&
        !writer_.exchange(true, std::memory_order_acquire)) {
      return true;
    }
    for (int k = 0; k < 16; ++k) cpu_relax();
  }
  return false;
}

template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::find_or_insert(const Digest& digest) noexcept {
  if (Entry e = find(digest)) return e;
  if (live() >= max_live_ || !lock_writer()) return {};
  Entry e = find(digest);  // inserted by another writer meanwhile?
  if (!e && live() < max_live_) e = insert_locked(words_of(digest));
  unlock_writer();
  return e;
}

// Under the writer flag: the first dead or empty slot of the identity's probe run.
template <class Cell>
typename BucketTable<Cell>::Entry BucketTable<Cell>::insert_locked(
    const std::array<uint64_t, 4>& id) noexcept {
  Digest d{};
  std::memcpy(d.data(), id.data(), sizeof(d));
  uint32_t i = home(d);
  for (uint32_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    const uint32_t word = s.word.load(std::memory_order_relaxed);
    if (status(word) != kEmpty && status(word) != kDead) continue;
    const uint32_t busy = next_word(word, kBusy);
    s.word.store(busy, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // busy is seen before the new digest
    for (std::size_t k = 0; k < id.size(); ++k) s.id[k].store(id[k], std::memory_order_relaxed);
    s.cell.reset();
    const uint32_t live = next_word(busy, kLive);
    s.word.store(live, std::memory_order_release);
    live_.fetch_add(1, std::memory_order_relaxed);
    return {&s.cell, i, live};
  }
  return {};  // unreachable while live < max_live: there are twice as many slots
}

template <class Cell>
uint32_t BucketTable<Cell>::reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept {
  uint32_t reclaimed = 0;
  for (uint32_t i = 0; i <= mask_; ++i) {
    Slot& s = slots_[i];
    if (status(s.word.load(std::memory_order_relaxed)) != kLive || !s.cell.idle_for(now, ttl)) {
      continue;
    }
    // The main thread sweeps; a reactor inserting meanwhile only spins for one slot's stores.
    while (!lock_writer()) {
    }
    const uint32_t word = s.word.load(std::memory_order_relaxed);
    if (status(word) == kLive && s.cell.idle_for(now, ttl)) {
      s.word.store(next_word(word, kDead), std::memory_order_release);
      live_.fetch_sub(1, std::memory_order_relaxed);
      ++reclaimed;
    }
    unlock_writer();
  }
  if (reclaimed != 0) {
    while (!lock_writer()) {
    }
    tidy_dead_locked();
    unlock_writer();
  }
  return reclaimed;
}

// A dead slot followed by an empty one ends no probe run that a live identity needs: it can
// be empty again, so lookups of absent identities stop early. Walking backwards from each
// empty slot empties every dead slot run before it.
template <class Cell>
void BucketTable<Cell>::tidy_dead_locked() noexcept {
  const uint32_t slots = mask_ + 1;
  for (uint32_t n = 0; n < slots; ++n) {
    const uint32_t i = slots - 1 - n;
    const uint32_t after = (i + 1) & mask_;
    Slot& s = slots_[i];
    const uint32_t word = s.word.load(std::memory_order_relaxed);
    if (status(word) == kDead &&
        status(slots_[after].word.load(std::memory_order_relaxed)) == kEmpty) {
      s.word.store(next_word(word, kEmpty), std::memory_order_release);
    }
  }
}

template class BucketTable<GcraCell>;
template class BucketTable<QuotaCell>;

}  // namespace floodgate::resilience
