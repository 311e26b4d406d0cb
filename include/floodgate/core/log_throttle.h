// LogThrottle: lets a recurring log line through at most once per period and counts the
// occurrences in between, so the line that does get through can say how many it stands for.
// Used where a failure can repeat many times a second (accept() out of descriptors).
//
// Thread-safety: none; one owner (a listener on its reactor thread, the admin server on the
// main thread). Time is passed in, so tests need no clock. Never allocates.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

namespace floodgate {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogThrottle(Clock::duration period) noexcept : period_(period) {}

  // Counts one occurrence at `now`; true if a line may be written for it (see ready()).
  bool occurred(Clock::time_point now) noexcept {
    ++count_;
    return ready(now);
  }
  // True if a line may be written at `now`: the first call, then once `period` has passed
  // since the last true. A true starts the next period.
  bool ready(Clock::time_point now) noexcept {
    if (written_ && now < next_) return false;
    written_ = true;
    next_ = now + period_;
    return true;
  }
  // The occurrences counted since the last take(), and starts counting again from zero.
  uint64_t take() noexcept { return std::exchange(count_, 0); }

 private:
  Clock::duration period_;
  Clock::time_point next_{};
  uint64_t count_ = 0;
  bool written_ = false;
};

}  // namespace floodgate
