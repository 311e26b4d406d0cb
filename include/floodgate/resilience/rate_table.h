// A table of per-identity buckets, at most `max_live` of them, in slots allocated once, when the
// table is built: a scoped rate limit's GCRA cells (issue 15: the rule's max_keys, 1,024 unless
// it says otherwise) and the quota's fixed-window counters (issue 16: the in-memory backend's
// 4,096, the local fallback's max_entries). Identities are SHA-256 digests (identity_digest.h):
// the table never sees a raw value. A Cell provides reset() (a reused slot starts empty) and
// idle_for(now, ttl) (it may be reclaimed; idle_for(now, 0): it holds nothing that a new
// identity's bucket would not, so taking it over loses nothing).
//
// Where a bucket is: in one of the kWindow slots from its identity's home slot on (its window),
// so a look-up reads at most kWindow slots. There are twice as many slots as buckets, so a
// window with no free slot is rare (a few new identities in 100,000 when every bucket is live).
//
// When there is no room for a new identity (every bucket live, or its window full):
//   - find_or_evict, a rate rule's (issue 35), takes over a bucket of the window: one that is
//     fully refilled if there is one (its identity would get a full bucket again anyway: nothing
//     is lost), else the least recently used one. Each slot keeps when its bucket was last found
//     or made, in milliseconds, as nginx's limit_req keeps each state's `last` and evicts its
//     least recently used state. So an attacker flooding new identities only cycles the
//     table: an honest newcomer still gets a bucket of its own (the flood cannot push it into one
//     shared bucket that the flood keeps empty), and an identity in active use goes only after
//     the buckets of its window used less recently. A bucket found or made in the current
//     millisecond is never taken over (it is in use right now); when every bucket of the window
//     is, the new identity gets none and the caller falls back (the rate rule's overflow
//     bucket). With 1,024 buckets that takes about a million new identities a second.
//   - find_or_insert, the quota's, takes nothing over: the new identity gets no bucket.
//
// Concurrency, the part that matters: no lock, on any path.
//   - A slot's state word says empty, busy, live or dead, with a version that changes on every
//     transition; a reader reads the word, the digest (atomic words) and the word again, and
//     trusts the digest only when the word has not moved (a seqlock with atomics, so it is data-
//     race free).
//   - A slot is taken (a free one, or a bucket taken over) with a compare-and-swap of its word
//     from what the taker saw to busy, so of two threads taking one slot only one gets it; the
//     other looks again, and after a few lost races gives up (the caller treats the request as
//     one that found no room). The winner writes the digest and a full bucket, then makes the
//     slot live. The number of live buckets is reserved with a compare-and-swap before a free
//     slot is taken, so it never passes max_live.
//   - A bucket being made is not used until it is settled: its slot is busy, then live but
//     unsettled while its maker looks through the window for another bucket of the identity
//     (below), then settled. A look-up that meets a busy slot, or an unsettled one of its
//     identity, waits for it (about a microsecond; a bounded spin), so two threads making the same
//     new identity at once normally agree on one slot: the second finds the first's bucket. When
//     the wait runs out (the maker was descheduled), the look-up goes on past that slot, and
//     if it finds no bucket it may make a second one (below) or give up (Entry::busy).
//   - So two buckets of one identity can still be made at once: when a maker was descheduled,
//     or each thread saw a different first free slot (one freed between their looks). Each
//     makes its slot live and then looks through the window again: of two buckets of one
//     identity the one nearer its home stays and the other is made dead, by whichever thread
//     sees both. Both make live and look with sequentially consistent operations, so at least
//     one of the two sees the other's bucket: one bucket per identity remains. A quota's counts
//     in the one that goes move into the one that stays in the same step as the retirement,
//     under both cells' flags (retire_into), and only ever into the mover's own bucket before it
//     settles, so a decision on the settled bucket sees every count before it.
//   - A reader may use a cell that another thread reclaims, takes over or makes dead at that
//     very moment. A rate limit's reader checks the slot's word afterwards (Entry::current) and,
//     when it moved, undoes what it did and looks up again. A quota's reader checks the word
//     under the cell's flag before it counts (QuotaCell::take_if), and whoever retires the bucket
//     reads or judges the cell under that flag after moving the word: a count is either in the
//     bucket when it goes, and moves on with it, or not made.
//   - A freed slot stays free (dead) until it is taken again: nothing moves buckets or tidies
//     the table, so no reader has to agree with a tidier, and a look-up reads the whole window
//     unless it finds the identity first.
//
// Memory: 2 x max_live slots, rounded up to a power of two, of one cache line each (128 KiB for
// a rate rule's 1,024), never more; nothing is allocated after construction.
//
// Thread-safety: every member from any thread (reclaim is the main thread's sweep).
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
  static constexpr uint32_t kMaxLive = 1024;  // a scoped rate limit's, unless max_keys says
  static constexpr uint32_t kWindow = 32;     // slots an identity's bucket may be in (at most)

  // A live bucket found for an identity: its cell, and the slot word that vouches for it.
  struct Entry {
    Cell* cell = nullptr;
    uint32_t slot = 0;
    uint32_t word = 0;
    bool evicted = false;  // made by taking over another identity's bucket (find_or_evict)
    // Empty because other threads kept winning the race, or a bucket being made (perhaps the
    // identity's) stayed so: a maker was descheduled. Not a full table.
    bool busy = false;
    explicit operator bool() const noexcept { return cell != nullptr; }
  };

  explicit BucketTable(uint32_t max_live = kMaxLive);
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  // The bucket of `id`: found, or made in a free slot (a full bucket). Empty when the table
  // holds max_live buckets already or the identity's window is full, or when other threads kept
  // winning the race for the slot (see above).
  Entry find_or_insert(const Digest& id) noexcept;
  // The same, and when there is no free slot the bucket of another identity taken over (see
  // above) at `now`, which is also noted as when the bucket found or made was last used. Empty
  // only when every bucket of the window was used in the current millisecond, or other threads
  // kept winning the race.
  Entry find_or_evict(const Digest& id, Clock::time_point now) noexcept;
  // The bucket of `id` when there is one (no insertion).
  Entry find(const Digest& id) const noexcept;
  // Whether `e` still is the bucket it was found as (not reclaimed, taken over or retired since;
  // settled since or not).
  bool current(const Entry& e) const noexcept;
  // Reclaims every bucket idle for `ttl` at `now`; returns how many.
  uint32_t reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept;

  uint32_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  uint32_t max_live() const noexcept { return max_live_; }
  // The bytes the table holds (its slots), for the benchmark and the docs.
  std::size_t bytes() const noexcept { return sizeof(Slot) * (mask_ + 1); }

 private:
  // Status in the low two bits of a slot's word, the settled mark (of a live bucket) in the
  // third, the version in the rest. Empty and dead slots are both free; dead ones held a bucket
  // (their version moved on, for Entry::current).
  static constexpr uint32_t kEmpty = 0, kBusy = 1, kLive = 2, kDead = 3;
  static constexpr uint32_t kSettled = 4;
  static constexpr uint32_t kNone = ~uint32_t{0};  // no slot

  struct alignas(64) Slot {
    std::atomic<uint32_t> word{kEmpty};
    // When the bucket was last found or made: milliseconds of Clock, wrapping (ages are signed
    // 32-bit differences, right for buckets used in the last 24 days). Relaxed: a hint for
    // choosing which bucket to take over, written on each use.
    std::atomic<uint32_t> used{0};
    std::array<std::atomic<uint64_t>, 4> id{};  // the digest, written only while kBusy
    Cell cell;
  };
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");

  using Words = std::array<uint64_t, 4>;

  // What one pass over an identity's window saw.
  struct Look {
    Entry found;            // the identity's live bucket
    uint32_t free = kNone;  // the first free slot, and its word
    uint32_t free_word = 0;
    uint32_t victim = kNone;  // find_or_evict: the bucket to take over, and its word
    uint32_t victim_word = 0;
    bool unsure = false;  // a slot being made was passed (its maker descheduled): see look()
  };

  static uint32_t status(uint32_t word) noexcept { return word & 3; }
  static bool settled(uint32_t word) noexcept { return (word & kSettled) != 0; }
  // Being made: busy, or live and not settled yet.
  static bool making(uint32_t word) noexcept {
    return status(word) == kBusy || (status(word) == kLive && !settled(word));
  }
  // Two words of one bucket: the same but for the settled mark (settling changes nothing else:
  // not the digest, not the cell).
  static bool same_bucket(uint32_t a, uint32_t b) noexcept {
    return (a | kSettled) == (b | kSettled);
  }
  static uint32_t next_word(uint32_t word, uint32_t status) noexcept {
    return ((word & ~7u) + 8) | status;
  }
  static uint32_t millis(Clock::time_point t) noexcept;
  // How far slot `i` is from `home` along the window.
  uint32_t distance(uint32_t home, uint32_t i) const noexcept { return (i - home) & mask_; }
  bool holds(const Slot& s, uint32_t word, const Words& id) const noexcept;
  Look look(const Words& id, uint32_t home, Clock::time_point now, bool evict) const noexcept;
  Entry find_or_make(const Words& id, uint32_t home, Clock::time_point now, bool evict) noexcept;
  bool reserve_live() noexcept;
  Entry claim(uint32_t slot, uint32_t word, const Words& id, uint32_t home, uint32_t used) noexcept;
  Entry settle(Entry mine, const Words& id, uint32_t home) noexcept;
  bool retire(uint32_t slot, uint32_t word) noexcept;
  bool retire_into(const Entry& mine, uint32_t slot, uint32_t word) noexcept;

  const uint32_t max_live_;
  const uint32_t mask_;    // slots - 1 (a power of two)
  const uint32_t window_;  // kWindow, or every slot of a smaller table
  std::unique_ptr<Slot[]> slots_;
  // Reserved before a free slot is taken, given back when a bucket dies; read by any thread.
  alignas(64) std::atomic<uint32_t> live_{0};
};

// A scoped rate limit's buckets.
using RateTable = BucketTable<GcraCell>;

}  // namespace floodgate::resilience
