// Histogram: one reactor's shard of a request-duration histogram with fixed buckets.
//
// Threads: as Counter (counter.h): observe() only on the owning reactor's thread; the read
// accessors on any thread. HistogramTotals is a plain value the scraper fills by adding shards.
//
// Buckets are in seconds, upper bounds inclusive as in Prometheus ("le"):
//   0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 +Inf
// Each shard stores the count of its own bucket only (not cumulative), so an observation is one
// counter store plus the sum; the scrape makes the counts cumulative. The count of observations is
// the sum of the buckets, so _count always equals the +Inf bucket. The sum is kept in integer
// nanoseconds (wraps after 584 years of summed request time per reactor).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/metrics/counter.h"

namespace floodgate {

inline constexpr std::size_t kDurationBuckets = 15;  // including +Inf

// Upper bounds of the finite buckets, in nanoseconds.
inline constexpr std::array<int64_t, kDurationBuckets - 1> kDurationBoundsNs{
    500'000,       1'000'000,     2'500'000,     5'000'000,     10'000'000,
    25'000'000,    50'000'000,    100'000'000,   250'000'000,   500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};

// The same bounds as Prometheus "le" label values.
inline constexpr std::array<std::string_view, kDurationBuckets> kDurationBucketLabels{
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25",   "0.5",   "1",      "2.5",   "5",    "10",    "+Inf"};

class Histogram {
 public:
  // Writer thread only. A negative duration counts as zero.
  void observe(std::chrono::nanoseconds duration) noexcept {
    const int64_t ns = duration.count() > 0 ? duration.count() : 0;
    std::size_t i = 0;  // linear: typical proxy latencies stop in the first few buckets
    while (i < kDurationBoundsNs.size() && ns > kDurationBoundsNs[i]) {
      ++i;
    }
    buckets_[i].add();
    sum_ns_.add(static_cast<uint64_t>(ns));
  }

  // Any thread. Observations that fell into bucket i alone (not cumulative).
  uint64_t bucket(std::size_t i) const noexcept { return buckets_[i].value(); }
  uint64_t count() const noexcept;
  uint64_t sum_ns() const noexcept { return sum_ns_.value(); }

 private:
  std::array<Counter, kDurationBuckets> buckets_{};
  Counter sum_ns_;
};

// Shards added together at scrape time.
struct HistogramTotals {
  std::array<uint64_t, kDurationBuckets> buckets{};  // per bucket, not cumulative
  uint64_t sum_ns = 0;

  void add(const Histogram& shard) noexcept;
  uint64_t count() const noexcept;
};

}  // namespace floodgate
