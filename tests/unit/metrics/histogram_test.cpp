#include "floodgate/metrics/histogram.h"

#include <gtest/gtest.h>

#include <chrono>

namespace floodgate {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// The only bucket holding an observation of `d`, or -1.
int bucket_of(nanoseconds d) {
  Histogram h;
  h.observe(d);
  for (std::size_t i = 0; i < kDurationBuckets; ++i) {
    if (h.bucket(i) == 1) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

TEST(Histogram, UpperBoundsAreInclusive) {
  EXPECT_EQ(bucket_of(microseconds(500)), 0);
  EXPECT_EQ(bucket_of(microseconds(500) + nanoseconds(1)), 1);
  EXPECT_EQ(bucket_of(seconds(1)), 10);
  EXPECT_EQ(bucket_of(seconds(10)), 13);
}

TEST(Histogram, ZeroAndNegativeDurationsLandInTheFirstBucket) {
  EXPECT_EQ(bucket_of(nanoseconds(0)), 0);
  EXPECT_EQ(bucket_of(nanoseconds(-5)), 0);
}

TEST(Histogram, DurationsAboveTenSecondsLandInInf) {
  EXPECT_EQ(bucket_of(seconds(10) + nanoseconds(1)), 14);
  EXPECT_EQ(bucket_of(std::chrono::hours(24)), 14);
}

TEST(Histogram, EveryBoundFallsIntoItsOwnBucket) {
  for (std::size_t i = 0; i < kDurationBoundsNs.size(); ++i) {
    EXPECT_EQ(bucket_of(nanoseconds(kDurationBoundsNs[i])), static_cast<int>(i));
  }
}

TEST(Histogram, CountsAndSumsObservations) {
  Histogram h;
  h.observe(milliseconds(3));
  h.observe(milliseconds(7));
  h.observe(nanoseconds(-1));
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.sum_ns(), 10'000'000u);
}

TEST(HistogramTotals, AddsShardsBucketByBucket) {
  Histogram a;
  Histogram b;
  a.observe(milliseconds(1));
  b.observe(milliseconds(1));
  b.observe(seconds(20));
  HistogramTotals totals;
  totals.add(a);
  totals.add(b);
  EXPECT_EQ(totals.buckets[1], 2u);
  EXPECT_EQ(totals.buckets[14], 1u);
  EXPECT_EQ(totals.count(), 3u);
  EXPECT_EQ(totals.sum_ns, 20'002'000'000u);
}

}  // namespace
}  // namespace floodgate
