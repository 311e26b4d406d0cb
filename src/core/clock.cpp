#include "floodgate/core/clock.h"

namespace floodgate {
namespace {

class SteadyClock final : public Clock {
 public:
  time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const Clock& Clock::steady() noexcept {
  static const SteadyClock clock;
  return clock;
}

}  // namespace floodgate
