// Counts the allocations of the calls that run on the request path, with floodgate's own
// count of heap allocations (core/heap_count.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "floodgate/core/heap_count.h"

using floodgate::allocations_during;

TEST(AllocationCounter, SeesAnAllocation) {
  static void* volatile sink = nullptr;
  EXPECT_EQ(allocations_during([] { sink = ::operator new(8); }), 1u);
  ::operator delete(sink);
}

#include <array>
#include <optional>

#include "floodgate/upstream/balancer.h"

namespace floodgate {
namespace {

TEST(Balancer, PickDoesNotAllocate) {
  const std::array<uint32_t, 4> weights{1, 2, 3, 4};
  const std::array<int64_t, 4> active{3, 1, 4, 1};
  for (Balance kind : {Balance::round_robin, Balance::least_active, Balance::p2c}) {
    Balancer balancer(kind, weights, 9);
    std::optional<std::size_t> last;
    const auto n = allocations_during([&] {
      for (int i = 0; i < 100; ++i) {
        last = balancer.pick([&](std::size_t b) { return active[b]; },
                             [](std::size_t b) { return b != 2; });
      }
    });
    EXPECT_EQ(n, 0u);
    EXPECT_TRUE(last.has_value());
  }
}

}  // namespace
}  // namespace floodgate

#include "floodgate/upstream/admission.h"

namespace floodgate {
namespace {

void ignore_completion(void*, AdmitStatus) noexcept {}

// The waiter is the caller's node and the FIFO is intrusive: neither path allocates.
TEST(Admission, NeitherTheFastNorTheSlowPathAllocates) {
  Admission admission({.max_active = 1, .max_pending = 2});
  AdmissionWaiter first(&ignore_completion, nullptr);
  AdmissionWaiter second(&ignore_completion, nullptr);
  int admitted = 0;
  const auto n = allocations_during([&] {
    for (int i = 0; i < 100; ++i) {  // fast path: admit and release below the limit
      auto result = admission.admit(first);
      admitted += result.status == AdmitStatus::admitted ? 1 : 0;
    }
    Permit held = admission.admit(first).permit;
    admitted += admission.admit(first).status == AdmitStatus::queued ? 1 : 0;
    admitted += admission.admit(second).status == AdmitStatus::queued ? 1 : 0;
    held.release();  // handoff to `first`
    admitted += second.cancel(CancelReason::timed_out) ? 1 : 0;
    admission.set_limits({.max_active = 2, .max_pending = 0});
    first.take_permit().release();
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(admitted, 103);
  EXPECT_EQ(admission.active(), 0);
}

}  // namespace
}  // namespace floodgate
