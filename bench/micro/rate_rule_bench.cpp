// A scoped rate limit's whole per-rule cost on the request path: the SHA-256 of the identity,
// the lookup of its bucket in the rule's table and the take (resilience::RateRule), for a known
// identity from one thread and from two on one identity (a single client over two reactors),
// the first take of a new identity (an insertion: a compare-and-swap on a free slot), and the
// first take of a new identity into a full table (a bucket taken over). The table's memory when
// full is reported as a counter (bytes), the same for every rule.
//
//   build-*/bench/floodgate_rate_rule_bench
//
// Each benchmark counts the heap allocations made by its own loop (core/heap_count.h) and fails
// if there is any.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/rate_rule.h"
#include "measured.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;

void measured(benchmark::State& state, auto step) {
  bench::measured(state, "a rate limit rule", step);
}

const GcraRate kRate = GcraRate::of(10'000'000, 10'000'000);

// A known identity, admitted: hash, find, take.
void BM_KnownIdentity(benchmark::State& state) {
  static RateRule rule(2);
  thread_local RateRule::Clock::time_point now = RateRule::Clock::time_point{} + 1h;
  RateRule::Shard& shard = rule.shard(static_cast<unsigned>(state.thread_index()));
  RateRule::Held held;
  measured(state, [&] {
    now += 1ns;
    const Digest id = digest_of({"h", "tenant-4711"});
    benchmark::DoNotOptimize(rule.take(id, now, kRate, OnTableFull::overflow_bucket, shard, held));
  });
  state.counters["table_bytes"] = benchmark::Counter(static_cast<double>(rule.table().bytes()),
                                                     benchmark::Counter::kAvgThreads);
}
BENCHMARK(BM_KnownIdentity)->Threads(1)->Threads(2)->UseRealTime();

// The lookup and take alone (the digest computed once): what the table adds to the bucket.
void BM_KnownDigest(benchmark::State& state) {
  static RateRule rule(1);
  static const Digest id = digest_of({"h", "tenant-4711"});
  RateRule::Clock::time_point now = RateRule::Clock::time_point{} + 1h;
  RateRule::Held held;
  measured(state, [&] {
    now += 1ns;
    benchmark::DoNotOptimize(
        rule.take(id, now, kRate, OnTableFull::overflow_bucket, rule.shard(0), held));
  });
}
BENCHMARK(BM_KnownDigest);

// A new identity each time into a table kept from filling (reclaimed as it goes): the insert.
void BM_NewIdentity(benchmark::State& state) {
  RateRule rule(1);
  RateRule::Clock::time_point now = RateRule::Clock::time_point{} + 1h;
  RateRule::Held held;
  uint64_t n = 0;
  measured(state, [&] {
    if (rule.table().live() == RateTable::kMaxLive) {
      state.PauseTiming();
      rule.reclaim(now + 1h, 1s);
      state.ResumeTiming();
    }
    const uint64_t k = n++;
    const Digest id = digest_of({"h", std::string_view(reinterpret_cast<const char*>(&k), 8)});
    benchmark::DoNotOptimize(
        rule.take(id, now, kRate, OnTableFull::overflow_bucket, rule.shard(0), held));
  });
}
BENCHMARK(BM_NewIdentity);

// A new identity each time into a full table: the look through its window and the takeover of a
// bucket there (issue 35's flood of random identities).
void BM_NewIdentityIntoAFullTable(benchmark::State& state) {
  RateRule rule(1);
  RateRule::Clock::time_point now = RateRule::Clock::time_point{} + 1h;
  RateRule::Held held;
  uint64_t n = 0;
  const auto take_new = [&] {
    now += 1ms;  // no bucket is in use in the millisecond of the next identity
    const uint64_t k = n++;
    const Digest id = digest_of({"h", std::string_view(reinterpret_cast<const char*>(&k), 8)});
    return rule.take(id, now, kRate, OnTableFull::overflow_bucket, rule.shard(0), held);
  };
  while (rule.table().live() < RateTable::kMaxLive) take_new();
  measured(state, [&] { benchmark::DoNotOptimize(take_new()); });
}
BENCHMARK(BM_NewIdentityIntoAFullTable);

}  // namespace
}  // namespace floodgate::resilience

BENCHMARK_MAIN();
