#include "floodgate/resilience/quota_counter.h"

#include <algorithm>

#include "floodgate/core/cpu_relax.h"

namespace floodgate::resilience {

namespace {

// How many times a taker tries a cell's flag before it gives up (QuotaVerdict::busy). The flag
// is held for a few loads and stores: only a holder descheduled by the kernel keeps it longer.
constexpr int kFlagTries = 4096;
// A decision whose bucket went under it (reclaimed, or retired as a duplicate) looks up again,
// at most this many times; then it is `busy` (each lost look-up means another thread moved on).
constexpr int kLookups = 8;

int64_t ms_of(QuotaCell::Clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

uint32_t index_of(int64_t now_ms, std::chrono::milliseconds window) noexcept {
  return static_cast<uint32_t>(now_ms / window.count());
}

// When window `index` of length `window` ends, in ms of the clock.
int64_t end_of(uint32_t index, std::chrono::milliseconds window) noexcept {
  return (int64_t{index} + 1) * window.count();
}

// How late a request may come to a window another request has already moved past: its head
// began (its stamp) at most header_timeout before, or a reactor's clock reads a little behind
// another's.
constexpr int64_t kLateMs = 600'000;

}  // namespace

// The window a request stamped at `now_ms` counts in: its own, or the newer one `counted` is
// for when the request comes late to it (its head began in the previous window, and another
// request since counted in the next). A window never goes back, or a late request would wipe
// the newer window's count. A newer index from much further ahead is of another window length
// (the policy changed on a reload): it does not count.
uint32_t QuotaCell::window_at(int64_t now_ms, std::chrono::milliseconds window,
                              const Window& counted) noexcept {
  const uint32_t own = index_of(now_ms, window);
  if (counted.index > own && int64_t{counted.index} * window.count() <= now_ms + kLateMs) {
    return counted.index;
  }
  return own;
}

QuotaLimits QuotaLimits::of(const QuotaPolicyParams& p) noexcept {
  QuotaLimits l;
  if (p.burst) {
    l.burst_requests = p.burst->requests;
    l.burst_window = p.burst->window;
  }
  if (p.sustained) {
    l.sustained_requests = p.sustained->requests;
    l.sustained_window = p.sustained->window;
  }
  return l;
}

bool QuotaCell::lock() const noexcept {
  for (int t = 0; t < kFlagTries; ++t) {
    if (!flag_.load(std::memory_order_relaxed) &&
        !flag_.exchange(true, std::memory_order_acquire)) {
      return true;
    }
    cpu_relax();
  }
  return false;
}

QuotaDecision QuotaCell::take_locked(Clock::time_point now, const QuotaLimits& limits) noexcept {
  const int64_t now_ms = ms_of(now);
  const bool has_burst = limits.burst_requests != 0;
  const bool has_sustained = limits.sustained_requests != 0;
  const uint32_t b = has_burst ? window_at(now_ms, limits.burst_window, burst_) : 0;
  const uint32_t s = has_sustained ? window_at(now_ms, limits.sustained_window, sustained_) : 0;
  // A window counted in an earlier index is over: it counts from zero.
  const uint32_t b_used = has_burst && burst_.index == b ? burst_.count : 0;
  const uint32_t s_used = has_sustained && sustained_.index == s ? sustained_.count : 0;
  QuotaDecision d;
  if (has_sustained && s_used >= limits.sustained_requests) {
    d = {.verdict = QuotaVerdict::denied,
         .window = QuotaWindowKind::sustained,
         .reset = std::chrono::milliseconds(end_of(s, limits.sustained_window) - now_ms)};
  } else if (has_burst && b_used >= limits.burst_requests) {
    d = {.verdict = QuotaVerdict::denied,
         .window = QuotaWindowKind::burst,
         .reset = std::chrono::milliseconds(end_of(b, limits.burst_window) - now_ms)};
  } else {
    int64_t ends = 0;
    if (has_burst) {
      burst_ = {.index = b, .count = b_used + 1};
      ends = end_of(b, limits.burst_window);
    }
    if (has_sustained) {
      sustained_ = {.index = s, .count = s_used + 1};
      ends = std::max(ends, end_of(s, limits.sustained_window));
    }
    const auto ends_s = static_cast<uint32_t>(std::min<int64_t>((ends + 999) / 1000, UINT32_MAX));
    ends_s_ = std::max(ends_s_, ends_s);
  }
  return d;
}

QuotaDecision QuotaCell::take(Clock::time_point now, const QuotaLimits& limits) noexcept {
  if (!lock()) return {.verdict = QuotaVerdict::busy};
  const QuotaDecision d = take_locked(now, limits);
  unlock();
  return d;
}

bool QuotaCell::idle_locked(Clock::time_point now, std::chrono::nanoseconds) const noexcept {
  return ms_of(now) >= int64_t{ends_s_} * 1000;
}

bool QuotaCell::idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept {
  if (!lock()) return false;  // in use: not idle
  const bool over = idle_locked(now, ttl);
  unlock();
  return over;
}

// A taker that found the slot just before it was reclaimed may still hold the flag: wait for it
// (it holds it for a few stores; the caller has claimed the slot and is its one writer, see
// rate_table.h).
void QuotaCell::reset() noexcept {
  while (!lock()) {
  }
  burst_ = {};
  sustained_ = {};
  ends_s_ = 0;
  unlock();
}

void QuotaCell::add_locked(const Window& burst, const Window& sustained, uint32_t ends_s) noexcept {
  const auto add_window = [](Window& to, const Window& w) {
    if (w.count == 0) return;
    if (to.count == 0 || w.index > to.index) {
      to = w;  // the duplicate counted a later window (or this one counted none)
    } else if (w.index == to.index) {
      to.count += w.count;
    }
  };
  add_window(burst_, burst);
  add_window(sustained_, sustained);
  ends_s_ = std::max(ends_s_, ends_s);
}

QuotaTable::QuotaTable(uint32_t max_live) : table_(max_live) {}

QuotaDecision QuotaTable::decide(const Digest& key, Clock::time_point now,
                                 const QuotaLimits& limits) noexcept {
  for (int n = 0; n < kLookups; ++n) {
    const auto e = table_.find_or_insert(key);
    if (!e) return {.verdict = e.busy ? QuotaVerdict::busy : QuotaVerdict::table_full};
    // Nothing when the bucket went between the look-up and the take: it counted nothing there.
    if (const auto d = e.cell->take_if(now, limits, [&] { return table_.current(e); })) return *d;
  }
  return {.verdict = QuotaVerdict::busy};
}

uint32_t QuotaTable::reclaim(Clock::time_point now) noexcept {
  return table_.reclaim(now, std::chrono::nanoseconds(0));
}

}  // namespace floodgate::resilience
