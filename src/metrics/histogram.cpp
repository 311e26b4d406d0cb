#include "floodgate/metrics/histogram.h"

namespace floodgate {

uint64_t Histogram::count() const noexcept {
  uint64_t total = 0;
  for (const Counter& bucket : buckets_) {
    total += bucket.value();
  }
  return total;
}

void HistogramTotals::add(const Histogram& shard) noexcept {
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    buckets[i] += shard.bucket(i);
  }
  sum_ns += shard.sum_ns();
}

uint64_t HistogramTotals::count() const noexcept {
  uint64_t total = 0;
  for (const uint64_t bucket : buckets) {
    total += bucket;
  }
  return total;
}

}  // namespace floodgate
