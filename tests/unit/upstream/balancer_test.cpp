#include "floodgate/upstream/balancer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace floodgate {
namespace {

// A fake upstream: in-flight counts and eligibility per backend, set by the test.
struct Backends {
  std::vector<int64_t> active;
  std::vector<bool> eligible;

  explicit Backends(std::size_t n) : active(n, 0), eligible(n, true) {}

  std::optional<std::size_t> pick(Balancer& b) {
    return b.pick([this](std::size_t i) { return active[i]; },
                  [this](std::size_t i) { return static_cast<bool>(eligible[i]); });
  }
};

Balancer make(Balance kind, std::vector<uint32_t> weights, uint64_t seed = 1) {
  return Balancer(kind, weights, seed);
}

// Picks `n` times and returns the backends as letters ("aab...").
std::string sequence(Balancer& b, Backends& backends, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += static_cast<char>('a' + *backends.pick(b));
  }
  return out;
}

std::vector<int> histogram(Balancer& b, Backends& backends, int picks) {
  std::vector<int> counts(backends.active.size(), 0);
  for (int i = 0; i < picks; ++i) {
    ++counts[*backends.pick(b)];
  }
  return counts;
}

constexpr std::array kAllKinds{Balance::round_robin, Balance::least_active, Balance::p2c};

TEST(Balancer, NoBackendsMeansNoPick) {
  for (Balance kind : kAllKinds) {
    auto b = make(kind, {});
    Backends none(0);
    EXPECT_EQ(none.pick(b), std::nullopt);
  }
}

TEST(Balancer, NoEligibleBackendMeansNoPick) {
  for (Balance kind : kAllKinds) {
    auto b = make(kind, {1, 1, 1});
    Backends backends(3);
    backends.eligible = {false, false, false};
    EXPECT_EQ(backends.pick(b), std::nullopt);
  }
}

TEST(Balancer, NeverPicksAnIneligibleBackend) {
  for (Balance kind : kAllKinds) {
    auto b = make(kind, {1, 3, 1, 2});
    Backends backends(4);
    backends.eligible = {true, false, true, false};
    for (int i = 0; i < 200; ++i) {
      const auto picked = backends.pick(b);
      ASSERT_TRUE(picked == 0u || picked == 2u);
    }
  }
}

TEST(Balancer, SingleEligibleBackendIsAlwaysPicked) {
  for (Balance kind : kAllKinds) {
    auto b = make(kind, {1, 1, 1});
    Backends backends(3);
    backends.eligible = {false, true, false};
    backends.active = {0, 50, 0};
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(backends.pick(b), 1u);
    }
  }
}

TEST(RoundRobin, WeightsFiveOneOneGiveTheNginxSmoothSequence) {
  auto b = make(Balance::round_robin, {5, 1, 1});
  Backends backends(3);
  EXPECT_EQ(sequence(b, backends, 14), "aabacaaaabacaa");
}

TEST(RoundRobin, EqualWeightsAlternate) {
  auto b = make(Balance::round_robin, {1, 1, 1});
  Backends backends(3);
  EXPECT_EQ(sequence(b, backends, 6), "abcabc");
}

TEST(RoundRobin, DistributionMatchesWeightsExactlyOverWholeCycles) {
  auto b = make(Balance::round_robin, {1, 2, 3, 4});
  Backends backends(4);
  EXPECT_EQ(histogram(b, backends, 10 * 1000), (std::vector<int>{1000, 2000, 3000, 4000}));
}

TEST(RoundRobin, SkippedBackendLeavesTheOthersInWeightProportion) {
  auto b = make(Balance::round_robin, {1, 5, 2});
  Backends backends(3);
  backends.eligible = {true, false, true};
  EXPECT_EQ(histogram(b, backends, 300), (std::vector<int>{100, 0, 200}));
}

TEST(RoundRobin, BackendReturningToEligibilityIsPickedAgain) {
  auto b = make(Balance::round_robin, {1, 1});
  Backends backends(2);
  backends.eligible = {true, false};
  EXPECT_EQ(sequence(b, backends, 3), "aaa");
  backends.eligible = {true, true};
  EXPECT_EQ(histogram(b, backends, 10), (std::vector<int>{5, 5}));
}

TEST(LeastActive, PicksTheBackendWithFewestInFlight) {
  auto b = make(Balance::least_active, {1, 1, 1, 1});
  Backends backends(4);
  backends.active = {7, 3, 9, 4};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(backends.pick(b), 1u);
  }
}

TEST(LeastActive, IgnoresAnIneligibleBackendWithFewerInFlight) {
  auto b = make(Balance::least_active, {1, 1, 1});
  Backends backends(3);
  backends.active = {5, 0, 6};
  backends.eligible = {true, false, true};
  EXPECT_EQ(backends.pick(b), 0u);
}

TEST(LeastActive, EquallyLoadedBackendsTakeTurns) {
  auto b = make(Balance::least_active, {1, 1, 1});
  Backends backends(3);
  EXPECT_EQ(sequence(b, backends, 6), "abcabc");
}

TEST(LeastActive, TiesAmongEligibleBackendsShareLoadEvenlyWhenOneIsSkipped) {
  auto b = make(Balance::least_active, {1, 1, 1});
  Backends backends(3);
  backends.eligible = {true, true, false};
  EXPECT_EQ(histogram(b, backends, 100), (std::vector<int>{50, 50, 0}));
}

TEST(P2c, NeverPicksTheMoreLoadedOfTwo) {
  auto b = make(Balance::p2c, {1, 1});
  Backends backends(2);
  backends.active = {4, 3};
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(backends.pick(b), 1u);
  }
}

TEST(P2c, MostLoadedBackendIsNeverPicked) {
  auto b = make(Balance::p2c, {1, 1, 1, 1, 1});
  Backends backends(5);
  backends.active = {1, 2, 3, 4, 100};
  const auto counts = histogram(b, backends, 2000);
  EXPECT_EQ(counts[4], 0);
  EXPECT_GT(counts[0], counts[1]);  // the least loaded wins every pair it is in
}

TEST(P2c, EqualLoadSpreadsRoughlyEvenly) {
  auto b = make(Balance::p2c, {1, 1, 1, 1}, 42);
  Backends backends(4);
  for (int count : histogram(b, backends, 40'000)) {
    EXPECT_NEAR(count, 10'000, 600);
  }
}

TEST(P2c, PairsAreDrawnOnlyFromEligibleBackends) {
  auto b = make(Balance::p2c, {1, 1, 1, 1, 1, 1}, 7);
  Backends backends(6);
  backends.eligible = {false, true, false, false, true, true};
  backends.active = {0, 5, 0, 0, 1, 5};
  const auto counts = histogram(b, backends, 3000);
  EXPECT_EQ(counts[0] + counts[2] + counts[3], 0);
  // Backend 4 wins every pair it is in: two of the three eligible pairs.
  EXPECT_NEAR(counts[4], 2000, 150);
}

TEST(P2c, SameSeedGivesTheSameSequence) {
  Backends backends(8);
  auto first = make(Balance::p2c, std::vector<uint32_t>(8, 1), 1234);
  auto second = make(Balance::p2c, std::vector<uint32_t>(8, 1), 1234);
  EXPECT_EQ(sequence(first, backends, 64), sequence(second, backends, 64));
}

TEST(P2c, DifferentSeedsGiveDifferentSequences) {
  Backends backends(8);
  auto first = make(Balance::p2c, std::vector<uint32_t>(8, 1), 1);
  auto second = make(Balance::p2c, std::vector<uint32_t>(8, 1), 2);
  EXPECT_NE(sequence(first, backends, 64), sequence(second, backends, 64));
}

TEST(SplitMix64, BelowStaysInRange) {
  SplitMix64 random(0);
  for (std::size_t n : {1u, 2u, 3u, 7u, 1000u}) {
    for (int i = 0; i < 1000; ++i) {
      EXPECT_LT(random.below(n), n);
    }
  }
}

}  // namespace
}  // namespace floodgate
