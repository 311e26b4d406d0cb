// Replaces the global allocation functions for this test binary to count allocations around the
// calls that run on the request path.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {
std::atomic<std::size_t> g_allocations{0};
}  // namespace

// GCC 12 does not see that this file's operator new is malloc: a delete inlined into another
// function then "frees what operator new returned" (-Wmismatched-new-delete), wrongly here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

// Allocations made while running `f`.
template <class F>
std::size_t allocations_during(F&& f) {
  const std::size_t before = g_allocations.load();
  f();
  return g_allocations.load() - before;
}

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
