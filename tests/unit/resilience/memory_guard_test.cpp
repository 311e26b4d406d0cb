#include "floodgate/resilience/memory_guard.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace floodgate::resilience {
namespace {

using std::chrono::milliseconds;

// The head of a real /proc/meminfo (Linux 6.1), with the fields the guard reads in their places.
std::string meminfo(uint64_t total_kib, uint64_t available_kib, uint64_t swap_total_kib,
                    uint64_t swap_free_kib) {
  return "MemTotal:       " + std::to_string(total_kib) +
         " kB\n"
         "MemFree:          123456 kB\n"
         "MemAvailable:   " +
         std::to_string(available_kib) +
         " kB\n"
         "Buffers:           20480 kB\n"
         "Cached:           512000 kB\n"
         "SwapCached:            0 kB\n"
         "Active:           300000 kB\n"
         "SwapTotal:      " +
         std::to_string(swap_total_kib) +
         " kB\n"
         "SwapFree:       " +
         std::to_string(swap_free_kib) +
         " kB\n"
         "HugePages_Total:       0\n"
         "Hugepagesize:       2048 kB\n";
}

constexpr uint64_t kMiB = 1024;  // in kB

TEST(ParseMeminfo, ReadsTheFourFields) {
  const auto info = parse_meminfo(meminfo(2048 * kMiB, 700 * kMiB, 512 * kMiB, 100 * kMiB));
  ASSERT_TRUE(info);
  EXPECT_EQ(*info, (MemInfo{2048 * kMiB, 700 * kMiB, 512 * kMiB, 100 * kMiB}));
}

TEST(ParseMeminfo, TakesTheFieldsInAnyOrderAmongOthers) {
  const auto info = parse_meminfo(
      "SwapFree: 5 kB\nNoise\nHugePages_Free: 0\nMemAvailable: 3 kB\nSwapTotal: 4 kB\n"
      "MemTotal: 9 kB\n");
  ASSERT_TRUE(info);
  EXPECT_EQ(*info, (MemInfo{9, 3, 4, 5}));
}

TEST(ParseMeminfo, ParsesALastLineWithoutItsNewline) {
  const auto info = parse_meminfo("MemTotal: 9 kB\nMemAvailable: 3 kB");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->mem_available_kib, 3u);
}

TEST(ParseMeminfo, SwapIsZeroWhenTheKernelListsNone) {
  const auto info = parse_meminfo("MemTotal: 9 kB\nMemAvailable: 3 kB\n");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->swap_total_kib, 0u);
  EXPECT_EQ(info->swap_free_kib, 0u);
  EXPECT_FALSE(has_swap(*info));
}

TEST(ParseMeminfo, FailsWithoutMemAvailable) {
  EXPECT_FALSE(parse_meminfo("MemTotal: 9 kB\nMemFree: 3 kB\nSwapFree: 1 kB\n"));
}

TEST(ParseMeminfo, FailsWithoutMemTotal) {
  EXPECT_FALSE(parse_meminfo("MemAvailable: 3 kB\nSwapFree: 1 kB\n"));
}

TEST(ParseMeminfo, FailsOnAValueThatIsNotANumberOfKilobytes) {
  EXPECT_FALSE(parse_meminfo("MemTotal: 9 kB\nMemAvailable: lots kB\n"));
  EXPECT_FALSE(parse_meminfo("MemTotal: 9 kB\nMemAvailable: 3 MB\n"));
  EXPECT_FALSE(parse_meminfo("MemTotal: 9 kB\nMemAvailable:\n"));
  EXPECT_FALSE(parse_meminfo("MemTotal: 99999999999999999999999 kB\nMemAvailable: 3 kB\n"));
}

TEST(ParseMeminfo, FailsOnAFieldListedTwice) {
  EXPECT_FALSE(parse_meminfo("MemTotal: 9 kB\nMemAvailable: 3 kB\nMemAvailable: 4 kB\n"));
}

TEST(ParseMeminfo, FailsOnAnEmptyFile) {
  EXPECT_FALSE(parse_meminfo(""));
}

TEST(ParseMeminfo, ReadsThisHostsMeminfo) {
  std::ifstream in("/proc/meminfo");
  if (!in) GTEST_SKIP() << "no /proc/meminfo";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto info = parse_meminfo(text);
  ASSERT_TRUE(info);
  EXPECT_GT(info->mem_total_kib, 0u);
  EXPECT_LE(info->mem_available_kib, info->mem_total_kib);
}

TEST(AvailableMib, IsMemAvailablePlusSwapFree) {
  EXPECT_EQ(available_mib(MemInfo{4096 * kMiB, 100 * kMiB, 1024 * kMiB, 50 * kMiB}), 150u);
}

TEST(ResolveFloorMib, AutoIsTwoPercentOfMemTotal) {
  EXPECT_EQ(resolve_floor_mib(MemoryGuardParams{}, MemInfo{16384 * kMiB}), 327u);
  EXPECT_EQ(resolve_floor_mib(MemoryGuardParams{}, MemInfo{2048 * kMiB}), 40u);
}

TEST(ResolveFloorMib, AutoIsNeverBelowThirtyTwoMib) {
  EXPECT_EQ(resolve_floor_mib(MemoryGuardParams{}, MemInfo{957 * kMiB}), 32u);
  EXPECT_EQ(resolve_floor_mib(MemoryGuardParams{}, MemInfo{}), 32u);
}

TEST(ResolveFloorMib, ASetValueIsUsedAsIsAndZeroDisables) {
  const MemInfo big{16384 * kMiB};
  EXPECT_EQ(resolve_floor_mib({.automatic = false, .min_available_mib = 8}, big), 8u);
  EXPECT_EQ(resolve_floor_mib({.automatic = false, .min_available_mib = 0}, big), 0u);
}

TEST(IsWrite, GetHeadAndOptionsAreReads) {
  EXPECT_FALSE(is_write("GET"));
  EXPECT_FALSE(is_write("HEAD"));
  EXPECT_FALSE(is_write("OPTIONS"));
}

TEST(IsWrite, EveryOtherMethodIsAWrite) {
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE", "CONNECT", "TRACE", "PROPFIND"}) {
    EXPECT_TRUE(is_write(method)) << method;
  }
  EXPECT_TRUE(is_write("get"));  // methods are case-sensitive
}

const RequestView kRead{.method = "GET"};
const RequestView kWrite{.method = "POST"};

TEST(MemoryGuard, RefusesNothingBeforeTheFirstSample) {
  MemoryGuard guard;
  EXPECT_FALSE(guard.under_pressure());
  EXPECT_FALSE(guard.refuses(kWrite));
}

TEST(MemoryGuard, RefusesWritesBelowTheFloorAndNeverReads) {
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * kMiB, 20 * kMiB, 0, 0}, 32);
  EXPECT_TRUE(guard.under_pressure());
  EXPECT_TRUE(guard.refuses(kWrite));
  EXPECT_TRUE(guard.refuses({.method = "DELETE"}));
  EXPECT_FALSE(guard.refuses(kRead));
  EXPECT_FALSE(guard.refuses({.method = "HEAD"}));
  EXPECT_FALSE(guard.refuses({.method = "OPTIONS"}));
}

TEST(MemoryGuard, CountsSwapFreeAsAvailable) {
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * kMiB, 20 * kMiB, 1024 * kMiB, 20 * kMiB}, 32);
  EXPECT_FALSE(guard.under_pressure());
  EXPECT_EQ(guard.available_mib(), 40u);
}

TEST(MemoryGuard, ExactlyAtTheFloorIsNotBelowIt) {
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * kMiB, 32 * kMiB, 0, 0}, 32);
  EXPECT_FALSE(guard.under_pressure());
  guard.publish(MemInfo{4096 * kMiB, 32 * kMiB - 1, 0, 0}, 32);  // one kB short
  EXPECT_TRUE(guard.under_pressure());
}

TEST(MemoryGuard, AFloorOfZeroNeverRefuses) {
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * kMiB, 0, 0, 0}, 0);
  EXPECT_FALSE(guard.refuses(kWrite));
}

TEST(MemoryGuard, ANewFloorDecidesAgainAtOnceWithoutCountingASample) {
  MemoryGuard guard;
  guard.publish(MemInfo{4096 * kMiB, 50 * kMiB, 0, 0}, 32);
  ASSERT_FALSE(guard.under_pressure());
  guard.set_floor(64);
  EXPECT_TRUE(guard.under_pressure());
  EXPECT_EQ(guard.floor_mib(), 64u);
  EXPECT_EQ(guard.samples(), 1u);
  guard.set_floor(0);
  EXPECT_FALSE(guard.under_pressure());
}

// A fake meminfo file in a fresh temporary directory, and the sampler reading it.
class MeminfoSamplerTest : public ::testing::Test {
 protected:
  MeminfoSamplerTest() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "floodgate-meminfo-XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
    params_.meminfo = (std::filesystem::path(dir_) / "meminfo").string();
  }
  ~MeminfoSamplerTest() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& text) { std::ofstream(params_.meminfo, std::ios::trunc) << text; }
  // 4 GiB of RAM, 1 GiB of swap: the auto floor is 81 MiB.
  void write_available(uint64_t available_mib, uint64_t swap_free_mib = 0) {
    write(meminfo(4096 * kMiB, available_mib * kMiB, 1024 * kMiB, swap_free_mib * kMiB));
  }

  std::filesystem::path dir_;
  MemoryGuardParams params_;
  MemoryGuard guard_;
  ManualClock clock_;
};

TEST_F(MeminfoSamplerTest, WritesAreRefusedOnceTheFileShowsMemoryBelowTheFloor) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(2000);
  ASSERT_TRUE(sampler.refresh());
  EXPECT_FALSE(guard_.refuses(kWrite));
  EXPECT_EQ(guard_.floor_mib(), 81u);
  write_available(60, 20);
  clock_.advance(MeminfoSampler::kInterval);
  ASSERT_TRUE(sampler.refresh());
  EXPECT_TRUE(guard_.refuses(kWrite));
  EXPECT_FALSE(guard_.refuses(kRead));
  EXPECT_EQ(guard_.available_mib(), 80u);
}

TEST_F(MeminfoSamplerTest, ReadsTheFileAtMostOncePerSecond) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(2000);
  int reads = 0;
  for (int tick = 0; tick < 50; ++tick) {  // five seconds of a 100 ms timer
    reads += sampler.refresh() ? 1 : 0;
    clock_.advance(milliseconds(100));
  }
  EXPECT_EQ(reads, 5);
  EXPECT_EQ(guard_.samples(), 5u);
}

TEST_F(MeminfoSamplerTest, ASecondRefreshWithinTheSecondKeepsTheOldSample) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(2000);
  ASSERT_TRUE(sampler.refresh());
  write_available(10);
  clock_.advance(MeminfoSampler::kInterval - milliseconds(1));
  EXPECT_FALSE(sampler.refresh());
  EXPECT_FALSE(guard_.under_pressure());
  clock_.advance(milliseconds(1));
  EXPECT_TRUE(sampler.refresh());
  EXPECT_TRUE(guard_.under_pressure());
}

TEST_F(MeminfoSamplerTest, AMalformedFileCountsAFailureAndKeepsTheLastSample) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(10);
  ASSERT_TRUE(sampler.refresh());
  ASSERT_TRUE(guard_.under_pressure());
  write("MemTotal: 4194304 kB\nMemFree: 1 kB\n");  // no MemAvailable
  clock_.advance(MeminfoSampler::kInterval);
  EXPECT_TRUE(sampler.refresh());
  EXPECT_EQ(guard_.read_failures(), 1u);
  EXPECT_EQ(guard_.samples(), 1u);
  EXPECT_EQ(guard_.available_mib(), 10u);
  EXPECT_TRUE(guard_.under_pressure());
  ASSERT_TRUE(sampler.last());
  EXPECT_EQ(sampler.last()->mem_available_kib, 10 * kMiB);
}

TEST_F(MeminfoSamplerTest, AMissingFileCountsAFailureOncePerSecond) {
  params_.meminfo = (dir_ / "absent").string();
  MeminfoSampler sampler(params_, guard_, clock_);
  EXPECT_TRUE(sampler.refresh());
  EXPECT_FALSE(sampler.refresh());
  EXPECT_EQ(guard_.read_failures(), 1u);
  EXPECT_FALSE(guard_.under_pressure());
  EXPECT_FALSE(sampler.last());
}

TEST_F(MeminfoSamplerTest, ADisabledGuardNeverReadsTheFile) {
  params_.automatic = false;
  params_.min_available_mib = 0;
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(1);
  EXPECT_FALSE(sampler.refresh());
  EXPECT_EQ(guard_.samples(), 0u);
  EXPECT_FALSE(guard_.refuses(kWrite));
}

TEST_F(MeminfoSamplerTest, AReloadedFloorAppliesToTheLastSampleAtOnce) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write_available(100);
  ASSERT_TRUE(sampler.refresh());
  ASSERT_FALSE(guard_.under_pressure());  // auto: 81 MiB
  sampler.set_params({.automatic = false, .min_available_mib = 128, .meminfo = params_.meminfo});
  EXPECT_TRUE(guard_.under_pressure());
  EXPECT_EQ(guard_.floor_mib(), 128u);
  sampler.set_params({.automatic = false, .min_available_mib = 0, .meminfo = params_.meminfo});
  EXPECT_FALSE(guard_.under_pressure());
  EXPECT_FALSE(sampler.refresh());  // disabled now
}

TEST_F(MeminfoSamplerTest, AFileLargerThanTheBufferIsReadUpToItsLastWholeLine) {
  MeminfoSampler sampler(params_, guard_, clock_);
  std::string text = meminfo(4096 * kMiB, 10 * kMiB, 0, 0);
  while (text.size() < 2 * MeminfoSampler::kBufferBytes) text += "Padding:        1 kB\n";
  write(text);
  EXPECT_TRUE(sampler.refresh());
  EXPECT_EQ(guard_.read_failures(), 0u);
  EXPECT_TRUE(guard_.under_pressure());
}

TEST_F(MeminfoSamplerTest, KnowsWhetherTheHostHasSwap) {
  MeminfoSampler sampler(params_, guard_, clock_);
  write(meminfo(4096 * kMiB, 2000 * kMiB, 0, 0));
  ASSERT_TRUE(sampler.refresh());
  ASSERT_TRUE(sampler.last());
  EXPECT_FALSE(has_swap(*sampler.last()));
}

}  // namespace
}  // namespace floodgate::resilience
