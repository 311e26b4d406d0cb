#include "floodgate/resilience/rate_rule.h"

namespace floodgate::resilience {

namespace {
// A take whose bucket was reclaimed or taken over under it looks up again; past this many times
// in a row the request takes from the overflow bucket. (A bucket found in this millisecond is
// taken over only when it is fully refilled and a new identity picks it at that very moment:
// three times in a row does not happen in practice.)
constexpr int kLookups = 3;
}  // namespace

RateRule::RateRule(unsigned reactors, uint32_t max_live)
    : table_(max_live),
      reactors_(reactors == 0 ? 1 : reactors),
      shards_(std::make_unique<Shard[]>(reactors_)) {}

GcraTake RateRule::take(const Digest& id, Clock::time_point now, const GcraRate& rate,
                        OnTableFull full, Shard& counts, Held& held) noexcept {
  for (int n = 0; n < kLookups; ++n) {
    const RateTable::Entry e = table_.find_or_evict(id, now);
    if (!e) break;
    if (e.evicted) counts.evicted.fetch_add(1, std::memory_order_relaxed);
    const GcraTake t = e.cell->take(now, rate);
    if (!table_.current(e)) {  // gone while taking: that token was not this identity's
      if (t.allowed) e.cell->give_back(now, rate);
      continue;
    }
    held = t.allowed ? Held{e.cell, &rate} : Held{};
    return t;
  }
  if (full == OnTableFull::fail_open) {
    counts.failed_open.fetch_add(1, std::memory_order_relaxed);
    held = {};
    return {.allowed = true};
  }
  counts.overflow.fetch_add(1, std::memory_order_relaxed);
  const GcraTake t = overflow_.take(now, rate);
  held = t.allowed ? Held{&overflow_, &rate} : Held{};
  return t;
}

uint32_t RateRule::reclaim(Clock::time_point now, std::chrono::nanoseconds ttl) noexcept {
  const uint32_t n = table_.reclaim(now, ttl);
  reclaimed_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

RateRule::Totals RateRule::totals() const noexcept {
  Totals t;
  for (unsigned r = 0; r < reactors_; ++r) {
    const Shard& s = shards_[r];
    t.allowed += s.allowed.load(std::memory_order_relaxed);
    t.limited += s.limited.load(std::memory_order_relaxed);
    t.shadow_limited += s.shadow_limited.load(std::memory_order_relaxed);
    t.overflow += s.overflow.load(std::memory_order_relaxed);
    t.failed_open += s.failed_open.load(std::memory_order_relaxed);
    t.evicted += s.evicted.load(std::memory_order_relaxed);
    t.skipped += s.skipped.load(std::memory_order_relaxed);
  }
  return t;
}

}  // namespace floodgate::resilience
