// A table of per-identity buckets, at most `max_live` of them, in slots allocated once, when the
// table is built: a scoped rate limit's GCRA cells (issue 15: 1,024 per rule) and the quota's
// fixed-window counters (issue 16: the in-memory backend's 4,096, the local fallback's
// max_entries). Identities are SHA-256 digests (identity_digest.h): the table never sees a raw
// value. A Cell provides reset() (a reused slot starts empty) and idle_for(now, ttl) (it may be
// reclaimed).
//
// Concurrency, the part that matters:
//   - Lookups are lock-free and run on every reactor: a slot's state word says empty, busy,
//     live or dead, with a version that changes on every transition; a reader reads the word,
//     the digest (atomic words) and the word again, and trusts the digest only when the word has
//     not moved (a seqlock with atomics, so it is data-race free).
//   - Writers (inserting a new identity, reclaiming an idle bucket) are one at a time: they
//     hold the table's writer flag, a spin flag that is never held across anything but a few
//     stores on one slot, so a reactor waiting for it spins for nanoseconds. A reactor that
//     still does not get it within a bounded number of tries gives up (the caller treats the
//     request as one that found the table full): nothing waits without a bound.
//   - One writer at a time also means one slot per identity: an inserter looks again under the
//     flag before it claims a slot.
//   - A reader may use a cell that a writer reclaims (and reuses) at that very moment: it
//     checks the slot's word afterwards (Entry::current) and, when it moved, undoes what it did
//     and looks up again. A bucket is reclaimed only once idle, so this happens only when a
//     request arrives exactly as its bucket expires.
//
// Memory: 2 x max_live slots of one cache line each (128 KiB for a rate rule's 1,024), never
// more; nothing is allocated after construction.
//
// Thread-safety: find / insert from any thread; reclaim from any one thread at a time (the main
// thread's sweep), alongside them.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "floodgate/resilience/gcra.h"
#include "floodgate/resilience/identity_digest.h"

namespace floodgate::resilience {

template <class Cell>
class BucketTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kMaxLive = 1024;  // a scoped rate limit's

  // A live bucket found for an identity: its cell, and the slot word that vouches for it.
  struct Entry {
    Cell* cell = nullptr;
    uint32_t slot = 0;
    uint32_t word = 0;
    explicit operator bool() const noexcept { return cell != nullptr; }
  };

  explicit BucketTable(uint32_t max_live = kMaxLive);
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  // The bucket of `id`: found, or made in a free slot (a full bucket). Empty when the table
  // holds max_live buckets already, or when the writer flag stayed busy (see above).
  Entry find_or_insert(const Digest& id) noexcept;
  // The bucket of `id` when there is one (no insertion).
  Entry find(const Digest& id) const noexcept;
  // Whether `e` still is the bucket it was found as (not reclaimed since).
  bool current(const Entry& e) const noexcept;
  // Reclaims every bucket idle for `ttl` at `now`; returns how many.
  uint32_t reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept;

  uint32_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  uint32_t max_live() const noexcept { return max_live_; }
  // The bytes the table holds (its slots), for the benchmark and the docs.
  std::size_t bytes() const noexcept { return sizeof(Slot) * (mask_ + 1); }

 private:
  // Status in the low two bits of a slot's word; the version in the rest.
  static constexpr uint32_t kEmpty = 0, kBusy = 1, kLive = 2, kDead = 3;

  struct alignas(64) Slot {
    std::atomic<uint32_t> word{kEmpty};
    std::array<std::atomic<uint64_t>, 4> id{};  // the digest, written only while kBusy
    Cell cell;
  };
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");

  static uint32_t status(uint32_t word) noexcept { return word & 3; }
  static uint32_t next_word(uint32_t word, uint32_t status) noexcept {
    return ((word & ~3u) + 4) | status;
  }
  uint32_t home(const Digest& id) const noexcept;
  bool holds(const Slot& s, uint32_t word, const std::array<uint64_t, 4>& id) const noexcept;
  bool lock_writer() noexcept;
  void unlock_writer() noexcept { writer_.store(false, std::memory_order_release); }
  Entry insert_locked(const std::array<uint64_t, 4>& id) noexcept;
  void tidy_dead_locked() noexcept;

  const uint32_t max_live_;
  const uint32_t mask_;  // slots - 1 (a power of two)
  std::unique_ptr<Slot[]> slots_;
  // Written by the one writer, read by any thread for metrics and the insert bound: relaxed.
  std::atomic<uint32_t> live_{0};
  // The writer flag (exchange to take, release store to give back).
  alignas(64) std::atomic<bool> writer_{false};
};

// A scoped rate limit's buckets.
using RateTable = BucketTable<GcraCell>;

}  // namespace floodgate::resilience
