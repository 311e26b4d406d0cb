// A scoped rate limit's process-wide state (issue 15): its table of buckets, its overflow
// bucket and its counts. One per rule for as long as some generation has the rule with the
// same name, scope, key, rates and max_keys (app::Generations keys them so), so a reload that
// keeps a rule keeps its buckets and one that changes it starts afresh.
//
// take() is the whole per-identity decision: find or make the identity's bucket (taking over a
// fully refilled or the least recently used bucket when the table is full: rate_table.h), fall
// back to the overflow bucket (or pass, fail_open) when not even that can be done, take one
// token at the rate given (the rule's, or the request's tier), and report what to give back
// when a later rule refuses the request.
//
// Thread-safety: take / give_back from every reactor at once (each with its own shard of the
// counts); reclaim from the main thread. Nothing allocates after construction.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "floodgate/resilience/gcra.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/rate_table.h"

namespace floodgate::resilience {

class RateRule {
 public:
  using Clock = GcraCell::Clock;

  // The counts of one reactor: written by it alone (relaxed adds), read by the metrics scrape.
  struct alignas(64) Shard {
    std::atomic<uint64_t> allowed{0};
    std::atomic<uint64_t> limited{0};         // refused, enforced
    std::atomic<uint64_t> shadow_limited{0};  // would have been refused (shadow mode)
    std::atomic<uint64_t> overflow{0};        // took from the overflow bucket: no bucket
    std::atomic<uint64_t> failed_open{0};     // passed unlimited: no bucket, fail_open
    std::atomic<uint64_t> evicted{0};         // made a bucket by taking over another's
    std::atomic<uint64_t> skipped{0};         // lacked the key, missing_key = "skip": not counted
  };
  struct Totals {
    uint64_t allowed = 0, limited = 0, shadow_limited = 0, overflow = 0, failed_open = 0,
             evicted = 0, skipped = 0;
  };

  // What a take holds, to give back when a later rule refuses the request.
  struct Held {
    GcraCell* cell = nullptr;  // nullptr: nothing taken (fail_open)
    const GcraRate* rate = nullptr;
  };

  // `max_live`: the most identities the table holds at once (the rule's max_keys).
  RateRule(unsigned reactors, uint32_t max_live = RateTable::kMaxLive);

  // One token for identity `id` at `now` at `rate`. `held` says what to give back.
  GcraTake take(const Digest& id, Clock::time_point now, const GcraRate& rate, OnTableFull full,
                Shard& counts, Held& held) noexcept;
  static void give_back(const Held& held, Clock::time_point now) noexcept {
    if (held.cell != nullptr) held.cell->give_back(now, *held.rate);
  }
  // The main thread's sweep: buckets idle for `ttl` are reclaimed (counted).
  uint32_t reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept;

  Shard& shard(unsigned reactor) noexcept { return shards_[reactor < reactors_ ? reactor : 0]; }
  Totals totals() const noexcept;
  uint64_t reclaimed() const noexcept { return reclaimed_.load(std::memory_order_relaxed); }
  const RateTable& table() const noexcept { return table_; }

 private:
  RateTable table_;
  GcraCell overflow_;  // the identities that found no bucket to take share it
  unsigned reactors_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<uint64_t> reclaimed_{0};  // written by the sweep, read by the scrape
};

}  // namespace floodgate::resilience
