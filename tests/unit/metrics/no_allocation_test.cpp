// Counts the allocations of the calls that run on the request path, with floodgate's own
// count of heap allocations (core/heap_count.h).
#include <gtest/gtest.h>

#include "floodgate/core/heap_count.h"

using floodgate::allocations_during;

TEST(AllocationCounter, SeesAnAllocation) {
  static void* volatile sink = nullptr;
  EXPECT_EQ(allocations_during([] { sink = ::operator new(8); }), 1u);
  ::operator delete(sink);
}

#include <chrono>

#include "floodgate/metrics/reactor_metrics.h"

namespace floodgate {
namespace {

TEST(ReactorMetrics, WritersDoNotAllocate) {
  ReactorMetrics m(2);
  const auto n = allocations_during([&] {
    m.count_request(ReactorMetrics::slot_for(1), 200, std::chrono::milliseconds(3));
    m.count_request(ReactorMetrics::kUnroutedSlot, 400, std::chrono::seconds(30));
    m.generated(Reason::bad_request);
    m.connect_failure(0);
    m.timeout(1);
    m.client_connections.add(1);
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(m.requests(2, 1).value(), 1u);
}

}  // namespace
}  // namespace floodgate
