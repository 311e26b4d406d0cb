// The per-request calls of the front stages allocate nothing: counted with floodgate's own
// replacement of operator new (core/heap_count.h), on this thread only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "floodgate/core/clock.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/resilience/inflight.h"
#include "floodgate/resilience/memory_guard.h"
#include "floodgate/resilience/protocol.h"

namespace floodgate::resilience {
namespace {

TEST(HeapCount, SeesAnAllocation) {
  static void* volatile sink = nullptr;
  EXPECT_EQ(allocations_during([] { sink = ::operator new(8); }), 1u);
  ::operator delete(sink);
}

TEST(FrontStages, ThePerRequestCallsDoNotAllocate) {
  const InflightExemptions exemptions(
      InflightParams{.exempt_methods = {"OPTIONS"}, .exempt_path_prefixes = {"/downloads/"}});
  InflightCap cap(2);
  const ProtocolPolicy policy(ProtocolParams{.allowed_methods = {"GET", "POST"},
                                             .denied_path_prefixes = {"/admin/"},
                                             .allow_connect = true,
                                             .connect_allowed_ports = {443},
                                             .connect_allowed_authorities = {"db:5432"}});
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * 1024, 1024, 0, 0}, 32);
  const RequestView requests[] = {
      {.method = "GET", .target = "/a/events", .path = "/a/events", .host = "h"},
      {.method = "POST",
       .target = "http://h/admin",
       .path = "/admin",
       .host = "h",
       .authority = "h"},
      {.method = "CONNECT", .target = "db:5432", .is_connect = true},
      {.method = "DELETE", .target = "/x", .path = "/x", .host = "h"},
  };
  int decisions = 0;
  const uint64_t n = allocations_during([&] {
    for (int i = 0; i < 100; ++i) {
      for (const RequestView& r : requests) {
        decisions += exemptions.exempt(r) ? 1 : 0;
        decisions += policy.check(r).pass() ? 1 : 0;
        decisions += guard.refuses(r) ? 1 : 0;
        Permit a = cap.try_enter();
        Permit b = cap.try_enter();
        Permit c = cap.try_enter();  // refused
        decisions += (a && b && !c) ? 1 : 0;
      }
    }
  });
  EXPECT_EQ(n, 0u);
  EXPECT_GT(decisions, 0);
}

TEST(MeminfoSampler, ARefreshAfterConstructionDoesNotAllocate) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("floodgate-meminfo-" + std::to_string(::getpid()));
  std::ofstream(file) << "MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\nSwapFree: 0 kB\n";
  MemoryGuard guard;
  ManualClock clock;
  MeminfoSampler sampler(MemoryGuardParams{.meminfo = file.string()}, guard, clock);
  int reads = 0;
  const uint64_t n = allocations_during([&] {
    for (int i = 0; i < 5; ++i) {
      reads += sampler.refresh() ? 1 : 0;
      clock.advance(MeminfoSampler::kInterval);
    }
  });
  std::filesystem::remove(file);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(reads, 5);
  EXPECT_EQ(guard.samples(), 5u);
}

}  // namespace
}  // namespace floodgate::resilience
