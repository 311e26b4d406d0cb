// The distributed quota's counting (issue 16, docs/resilience.md): fixed windows, and the
// per-process table of counters that the in-memory backend and the Redis backend's local
// fallback decide with. The Redis backend runs the same arithmetic in its Lua script
// (quota_script.h), on Redis's clock.
//
// Fixed windows: a window of length W covers [k*W, (k+1)*W) of its clock, and a policy allows at
// most `requests` requests in each. A request is allowed only when every window of the policy
// has room, and then it counts in each; a denial counts in none (both windows are one decision).
// The error bound at window edges: a client that spends a window's whole allowance at its end
// and the next window's at its start gets 2 x requests through within a span of W, never more;
// over any span of n whole windows at most (n + 1) x requests. Retry-After is the time until the
// denying window ends (when both deny, the sustained window's, the later one).
//
// Concurrency: a cell's two windows are updated together under the cell's own spin flag, held
// only for a few loads and stores (never across a call), so one decision is exact across
// reactors; a taker that cannot get the flag within a bounded number of tries gives up with
// QuotaVerdict::busy rather than wait without a bound (it means a reactor was descheduled while
// holding it).
//
// Thread-safety: QuotaTable::decide from any thread; reclaim() from one thread at a time.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/rate_table.h"

namespace floodgate::resilience {

// Which window denied (or none).
enum class QuotaWindowKind : uint8_t { none = 0, burst = 1, sustained = 2 };

enum class QuotaVerdict : uint8_t {
  allowed,
  denied,      // a window is exhausted: `window` says which, `reset` when it ends
  table_full,  // no bucket for a new identity: the table holds its maximum of live buckets
  busy,        // the cell's flag, or the bucket being made, stayed busy (see above)
};

struct QuotaDecision {
  QuotaVerdict verdict = QuotaVerdict::allowed;
  QuotaWindowKind window = QuotaWindowKind::none;
  std::chrono::milliseconds reset{0};  // denied: until the denying window ends
};

// The windows of one policy, as the counters see them (a window with requests == 0 is absent).
struct QuotaLimits {
  uint32_t burst_requests = 0;
  std::chrono::milliseconds burst_window{0};
  uint32_t sustained_requests = 0;
  std::chrono::milliseconds sustained_window{0};

  static QuotaLimits of(const QuotaPolicyParams& p) noexcept;
};

// One identity's counters for both windows of a policy.
class QuotaCell {
 public:
  using Clock = std::chrono::steady_clock;
  struct Window {
    uint32_t index = 0;  // which window of its length the count is for (time / length)
    uint32_t count = 0;
  };

  QuotaCell() = default;
  QuotaCell(const QuotaCell&) = delete;
  QuotaCell& operator=(const QuotaCell&) = delete;

  // Counts one request at `now` when every window has room; a denial counts nothing.
  QuotaDecision take(Clock::time_point now, const QuotaLimits& limits) noexcept;
  // The same, for a cell in a table slot, while `still()` (the table's: the slot still holds
  // the bucket it was found as): nothing when it does not (the bucket was retired as a
  // duplicate, reclaimed or reused: the caller looks the identity up again). `still` runs under
  // the cell's flag, and every retirement reads or judges the cell under the flag after it
  // moves the slot's word, so a count made here is either in this bucket or moved on with its
  // counts (rate_table.h).
  template <class Still>
  std::optional<QuotaDecision> take_if(Clock::time_point now, const QuotaLimits& limits,
                                       Still&& still) noexcept {
    if (!lock()) return QuotaDecision{.verdict = QuotaVerdict::busy};
    std::optional<QuotaDecision> d;
    if (still()) d = take_locked(now, limits);
    unlock();
    return d;
  }
  // Whether every window counted in has ended at `now` (`ttl` is not used: a quota bucket holds
  // nothing once its windows are over).
  bool idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept;
  // Calls `retire` (the table's: moves the slot's word) when the cell is idle at `now`, under
  // the cell's flag, so that no take counts in between (a take after it sees the word moved).
  template <class Retire>
  bool retire_when_idle(Clock::time_point now, std::chrono::nanoseconds ttl,
                        Retire&& retire) noexcept {
    if (!lock()) return false;  // in use: not idle
    const bool gone = idle_locked(now, ttl) && retire();
    unlock();
    return gone;
  }
  // Empty, as if never counted in (a reused table slot). Only while no one else uses it.
  void reset() noexcept;
  // Moves this cell's counts into `to` when `retire()` (the table's: `to` still stands and this
  // cell's slot is made dead) succeeds, both under both cells' flags, taken this cell's first
  // when `this_first` (the table's slot order: nothing else holds two flags, so two movers never
  // wait on each other in a cycle). A take on this cell that came first is in the counts moved;
  // one that comes after finds its slot gone (take_if).
  template <class Retire>
  bool move_to(QuotaCell& to, bool this_first, Retire&& retire) noexcept {
    QuotaCell& first = this_first ? *this : to;
    QuotaCell& second = this_first ? to : *this;
    while (!first.lock()) {
    }
    while (!second.lock()) {
    }
    const bool moved = retire();
    if (moved) to.add_locked(burst_, sustained_, ends_s_);
    second.unlock();
    first.unlock();
    return moved;
  }

 private:
  bool lock() const noexcept;  // bounded tries; false: busy
  void unlock() const noexcept { flag_.store(false, std::memory_order_release); }
  QuotaDecision take_locked(Clock::time_point now, const QuotaLimits& limits) noexcept;
  static uint32_t window_at(int64_t now_ms, std::chrono::milliseconds window,
                            const Window& counted) noexcept;
  bool idle_locked(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept;
  // Adds a duplicate's counts (both flags held).
  void add_locked(const Window& burst, const Window& sustained, uint32_t ends_s) noexcept;

  mutable std::atomic<bool> flag_{false};
  // Under flag_ only.
  Window burst_{};
  Window sustained_{};
  uint32_t ends_s_ = 0;  // when the last window counted in ends (whole seconds of Clock, rounded
                         // up), for idle_for: four bytes keep a table slot one cache line
};

// A process's quota counters for every policy and identity: the in-memory backend (at most
// kInMemoryBuckets live buckets) or a Redis backend's local fallback (local_fallback.max_entries).
// Buckets are keyed by the SHA-256 digest of the composite key (policy, route, tenant, token,
// client: quota_key.h), so the table never holds a raw identity. A bucket whose windows have all
// ended is reclaimed by reclaim() (the process's once-a-second sweep); until then it counts
// toward the maximum.
class QuotaTable {
 public:
  using Clock = QuotaCell::Clock;
  static constexpr uint32_t kInMemoryBuckets = 4096;

  explicit QuotaTable(uint32_t max_live = kInMemoryBuckets);

  QuotaDecision decide(const Digest& key, Clock::time_point now,
                       const QuotaLimits& limits) noexcept;
  // Reclaims every bucket whose windows have ended at `now`; returns how many.
  uint32_t reclaim(Clock::time_point now) noexcept;

  uint32_t live() const noexcept { return table_.live(); }
  uint32_t max_live() const noexcept { return table_.max_live(); }
  std::size_t bytes() const noexcept { return table_.bytes(); }

 private:
  BucketTable<QuotaCell> table_;
};

}  // namespace floodgate::resilience
