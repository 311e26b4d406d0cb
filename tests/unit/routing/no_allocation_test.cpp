// Counts the allocations of the calls that run on the request path, with floodgate's own
// count of heap allocations (core/heap_count.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "floodgate/core/heap_count.h"

using floodgate::allocations_during;

TEST(AllocationCounter, SeesAnAllocation) {
  static void* volatile sink = nullptr;
  EXPECT_EQ(allocations_during([] { sink = ::operator new(8); }), 1u);
  ::operator delete(sink);
}

#include <string>
#include <vector>

#include "floodgate/routing/match_path.h"
#include "floodgate/routing/route_table.h"

namespace floodgate {
namespace {

TEST(RouteTable, MatchDoesNotAllocate) {
  const std::vector<RouteParams> routes{
      {.host = "a.example.com", .path_prefix = "/a", .upstream = "x"},
      {.host = "*.example.com", .path_prefix = "/", .upstream = "x"},
      {.host = "*", .path_prefix = "/", .upstream = "x"}};
  const std::vector<uint32_t> ids{0, 1, 2};
  const auto table = RouteTable::build(routes, ids);
  const std::string long_host(400, 'h');
  const Route* hits[4] = {};
  const auto n = allocations_during([&] {
    hits[0] = table.match("A.Example.COM:8080", "/a/b");
    hits[1] = table.match("b.example.com.", "/x");
    hits[2] = table.match("[::1]:80", "/");
    hits[3] = table.match(long_host, "/");
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(hits[0]->index, 0u);
  EXPECT_EQ(hits[1]->index, 1u);
  EXPECT_EQ(hits[2]->index, 2u);
  EXPECT_EQ(hits[3]->index, 2u);
}

TEST(MatchPath, NormalisingDoesNotAllocate) {
  const std::string long_path = "/a/" + std::string(3000, 'z') + "/../%61//./b?q";
  PathVerdict v[3] = {};
  const auto n = allocations_during([&] {
    MatchPath p;
    v[0] = p.assign("/x/../admin");
    MatchPath q;
    v[1] = q.assign(long_path);
    MatchPath r;
    v[2] = r.assign("/plain/path?x");
  });
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(v[0], PathVerdict::ok);
  EXPECT_EQ(v[1], PathVerdict::ok);
  EXPECT_EQ(v[2], PathVerdict::ok);
}

}  // namespace
}  // namespace floodgate
