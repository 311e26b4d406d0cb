// A token bucket that holds for the whole process (scoped rate limits, issue 15): GCRA, the
// generic cell rate algorithm, keeps one number per bucket, its theoretical arrival time (TAT),
// in one atomic. A take at `now` computes new = max(TAT, now) + interval and refuses when
// new - now > burst x interval; otherwise it publishes new with a compare-and-swap, retrying
// when another reactor took in between. So one bucket is exact across every reactor (a single
// hot client spread over all of them gets the rate once, not once per reactor), lock-free, and
// allocation-free; the same arithmetic serves a Redis script.
//
// Semantics, as a bucket of `burst` tokens refilled at `rate` per second: a fresh (or long idle)
// bucket admits `burst` requests at once, then one per 1/rate; over any period P it admits at
// most burst + rate x P. A refusal says when one token will be there (retry_after).
//
// Thread-safety: every member from any thread. Time comes from the caller (steady clock
// nanoseconds), so tests drive it by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace floodgate::resilience {

// A bucket's rates in GCRA's terms: the emission interval (1 s / rate) and the tolerance (burst
// intervals). A value: a rule's tiers each have one, chosen per request.
struct GcraRate {
  int64_t interval = 1'000'000'000;   // ns between tokens (at least 1)
  int64_t tolerance = 1'000'000'000;  // burst x interval
  uint32_t burst = 1;
  // `rate` tokens per second (> 0), `burst` tokens at most (> 0); 0s are taken as 1.
  static GcraRate of(uint32_t rate, uint32_t burst) noexcept;
  bool operator==(const GcraRate&) const = default;
};

struct GcraTake {
  bool allowed = false;
  std::chrono::nanoseconds retry_after{0};  // refused: until one token is there (> 0)
};

// One bucket's state, the theoretical arrival time, taken from at whatever rate the caller
// passes (the same rate for the same bucket, or a tier's: the state is rate-independent).
class GcraCell {
 public:
  using Clock = std::chrono::steady_clock;

  GcraCell() = default;
  GcraCell(const GcraCell&) = delete;
  GcraCell& operator=(const GcraCell&) = delete;

  // One token at `now`, or a refusal that consumes nothing.
  GcraTake take(Clock::time_point now, const GcraRate& rate) noexcept;
  // Gives one token back (a later rule refused the request this one admitted): the bucket is as
  // if the take had not happened, never fuller than full.
  void give_back(Clock::time_point now, const GcraRate& rate) noexcept;
  // Whether the bucket has been full for at least `ttl` at `now`: nobody took from it since.
  bool idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept;
  // Full, as if never taken from (a reused table slot). Only while no one else takes from it.
  void reset() noexcept { tat_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> tat_{0};  // steady-clock ns; 0 = full since ever
};

// A bucket with its own fixed rates.
class Gcra {
 public:
  using Clock = GcraCell::Clock;
  using Take = GcraTake;

  Gcra(uint32_t rate, uint32_t burst) noexcept : rate_(GcraRate::of(rate, burst)) {}

  Take take(Clock::time_point now) noexcept { return cell_.take(now, rate_); }
  void give_back(Clock::time_point now) noexcept { cell_.give_back(now, rate_); }
  bool idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept {
    return cell_.idle_for(now, ttl);
  }

  std::chrono::nanoseconds interval() const noexcept {
    return std::chrono::nanoseconds(rate_.interval);
  }
  uint32_t burst() const noexcept { return rate_.burst; }

 private:
  GcraRate rate_;
  GcraCell cell_;
};

}  // namespace floodgate::resilience
