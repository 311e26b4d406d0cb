// Counter and Gauge: one reactor's shard of a metric.
//
// Threads: exactly one writer thread (the reactor that owns the shard); any thread may read (the
// admin scrape, which sums the shards of all reactors). Because there is a single writer, add()
// is a relaxed load and a relaxed store rather than a fetch_add: on x86 that is two plain moves,
// no locked instruction on the request path. The atomics exist only to make the scraper's
// concurrent read data-race free; it sees a value that is at most slightly stale.
//
// Not copyable or movable (std::atomic): shards are preallocated once and never relocated.
#pragma once

#include <atomic>
#include <cstdint>

namespace floodgate {

class Counter {
 public:
  // Writer thread only.
  void add(uint64_t n = 1) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Any thread.
  uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Per-reactor shards are summed at scrape time, so a gauge shard
// may go negative as long as the sum of all shards is meaningful; in practice every +1 and its
// -1 happen on the same reactor.
class Gauge {
 public:
  // Writer thread only.
  void add(int64_t n) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void set(int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  // Any thread.
  int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

}  // namespace floodgate
