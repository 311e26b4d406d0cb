// SharedLogThrottle: LogThrottle for a line that any thread may write, e.g. one backend's
// failures seen by every reactor. At most one line per period gets through, process-wide, and
// it learns how many occurrences it stands for (itself and those suppressed since the last line).
//
// Thread-safety: any thread; lock-free (two atomics, one compare-and-swap per line written).
// Time is passed in (steady clock, as nanoseconds since its epoch), so tests need no clock.
// Never allocates.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace floodgate {

class SharedLogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SharedLogThrottle(Clock::duration period = std::chrono::seconds(1)) noexcept
      : period_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(period).count()) {}

  // Counts one occurrence at `now`. Returns 0 when no line may be written for it, else how many
  // occurrences the line stands for (this one and every one suppressed before it): exactly one
  // caller per period gets a non-zero count, and the counts given out add up to the
  // occurrences counted before them.
  uint64_t occurred(Clock::time_point now) noexcept {
    count_.fetch_add(1, std::memory_order_relaxed);
    const int64_t t =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    int64_t next = next_ns_.load(std::memory_order_relaxed);
    if (t < next) return 0;
    if (!next_ns_.compare_exchange_strong(next, t + period_ns_, std::memory_order_relaxed)) {
      return 0;  // another thread writes this period's line
    }
    return count_.exchange(0, std::memory_order_relaxed);
  }

 private:
  const int64_t period_ns_;
  std::atomic<int64_t> next_ns_{std::numeric_limits<int64_t>::min()};
  std::atomic<uint64_t> count_{0};
};

}  // namespace floodgate
