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

class Gcra {
 public:
  using Clock = std::chrono::steady_clock;

  struct Take {
    bool allowed = false;
    std::chrono::nanoseconds retry_after{0};  // refused: until one token is there (> 0)
  };

  // `rate` tokens per second (> 0), `burst` tokens at most (> 0).
  Gcra(uint32_t rate, uint32_t burst) noexcept;
  Gcra(const Gcra&) = delete;
  Gcra& operator=(const Gcra&) = delete;

  // One token at `now`, or a refusal that consumes nothing.
  Take take(Clock::time_point now) noexcept;
  // Gives one token back (a later rule refused the request this one admitted): the bucket is as
  // if the take had not happened, never fuller than full.
  void give_back(Clock::time_point now) noexcept;
  // Whether the bucket has been full for at least `ttl` at `now`: nobody took from it since.
  bool idle_for(Clock::time_point now, std::chrono::nanoseconds ttl) const noexcept;

  std::chrono::nanoseconds interval() const noexcept { return std::chrono::nanoseconds(interval_); }
  uint32_t burst() const noexcept { return burst_; }

 private:
  const int64_t interval_;   // 1 s / rate, in ns (at least 1)
  const int64_t tolerance_;  // burst x interval
  const uint32_t burst_;
  std::atomic<int64_t> tat_{0};  // steady-clock ns; 0 = full since ever
};

}  // namespace floodgate::resilience
