// Clock: where floodgate's time-based code reads the time. The event loop reads it once per
// turn (Poller::now, what timers are armed from, the pool queue's deadlines among them). What
// reads the time itself takes a `const Clock&` (the poller and the reactor, the Redis link, the
// memory guard's sampler, the watchdog); the per-request policies (token buckets, circuit
// breakers, retry budgets, the AIMD window, brownout, quota windows) are given the loop's time
// as `now` and read no clock. So unit tests drive time with a ManualClock instead of sleeping.
//
// Thread-safety: now() from any thread. ManualClock::set/advance from any thread (the value is
// one atomic; a test moves it between the steps it orders). Lifetime: a Clock outlives everything
// that holds a reference to it; Clock::steady() lives for the process.
#pragma once

#include <atomic>
#include <chrono>

namespace floodgate {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual time_point now() const noexcept = 0;

  // std::chrono::steady_clock, for the process.
  static const Clock& steady() noexcept;

 protected:
  Clock() = default;
  ~Clock() = default;
  Clock(const Clock&) = default;
  Clock& operator=(const Clock&) = default;
};

// Time that moves only when a test moves it. Starts at `start` (an hour past the epoch by
// default, so that subtracting a few seconds stays a valid time).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(time_point start = time_point{} + std::chrono::hours(1)) noexcept
      : now_(start.time_since_epoch().count()) {}

  time_point now() const noexcept override {
    return time_point{duration{now_.load(std::memory_order_acquire)}};
  }
  void set(time_point t) noexcept {
    now_.store(t.time_since_epoch().count(), std::memory_order_release);
  }
  void advance(duration d) noexcept { now_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  // Atomic because a test moves it on its thread while a loop under test reads it on another.
  std::atomic<duration::rep> now_;
};

}  // namespace floodgate
