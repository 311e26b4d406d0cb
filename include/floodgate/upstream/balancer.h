// Balancer: chooses the backend of one upstream for the next request.
//
// Threads: one Balancer per reactor per upstream, used only by that reactor's thread. It keeps
// plain (non-atomic) state. The process-wide inputs (in-flight counts, down flags, caps) come in
// through the two callbacks passed to pick(), which read the shared atomics.
//
// Algorithms (UpstreamParams::balance):
//   round_robin   smooth weighted round robin (nginx): among the eligible backends each gains its
//                 weight, the highest wins and loses the total. Weights 5,1,1 give a a b a c a a.
//                 Ineligible backends neither gain nor lose.
//   least_active  the eligible backend with the fewest requests in flight. The scan starts just
//                 after the previous pick, so equally loaded backends take turns.
//   p2c           two distinct eligible backends chosen uniformly at random; the one with fewer
//                 in flight wins (a tie goes to either at random). One eligible: that one.
// Weights matter only to round_robin. Randomness comes from `seed` alone, so tests are repeatable;
// give each reactor a different seed.
//
// pick() allocates nothing and never throws; it returns nullopt when no backend is eligible.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "floodgate/upstream/params.h"

namespace floodgate {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, fast and well mixed; any seed is fine.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) noexcept : state_(seed) {}

  uint64_t next() noexcept {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n) for 0 < n < 2^32 (Lemire's multiply-shift, no division).
  std::size_t below(std::size_t n) noexcept {
    assert(n > 0 && n <= UINT32_MAX);
    return static_cast<std::size_t>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

 private:
  uint64_t state_;
};

class Balancer {
 public:
  // One weight per backend, in the upstream's server order. Preconditions: every weight is at
  // least 1 (config allows 1..1000); at most 2^32 - 1 backends.
  Balancer(Balance kind, std::span<const uint32_t> weights, uint64_t seed);

  // active(i) -> int64_t: requests in flight on backend i now (process-wide).
  // eligible(i) -> bool: backend i may take this request (proxy/selection.cpp: not down,
  // below max_active_per_backend, its circuit breaker letting the attempt through).
  // Each callback is called at most a few times per backend per pick.
  template <class ActiveFn, class EligibleFn>
  std::optional<std::size_t> pick(ActiveFn&& active, EligibleFn&& eligible);

  Balance kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return peers_.size(); }

 private:
  struct Peer {
    int64_t weight;
    int64_t current = 0;  // smooth weighted round robin state
  };

  template <class EligibleFn>
  std::optional<std::size_t> pick_round_robin(EligibleFn& eligible);
  template <class ActiveFn, class EligibleFn>
  std::optional<std::size_t> pick_least_active(ActiveFn& active, EligibleFn& eligible);
  template <class ActiveFn, class EligibleFn>
  std::optional<std::size_t> pick_p2c(ActiveFn& active, EligibleFn& eligible);
  template <class EligibleFn>
  std::size_t sample_two(EligibleFn& eligible, std::size_t& a, std::size_t& b);

  Balance kind_;
  std::vector<Peer> peers_;
  std::size_t next_ = 0;  // least_active: where the next scan starts
  SplitMix64 random_;
};

template <class ActiveFn, class EligibleFn>
std::optional<std::size_t> Balancer::pick(ActiveFn&& active, EligibleFn&& eligible) {
  switch (kind_) {
    case Balance::round_robin:
      return pick_round_robin(eligible);
    case Balance::least_active:
      return pick_least_active(active, eligible);
    case Balance::p2c:
      return pick_p2c(active, eligible);
  }
  return std::nullopt;
}

template <class EligibleFn>
std::optional<std::size_t> Balancer::pick_round_robin(EligibleFn& eligible) {
  std::optional<std::size_t> best;
  int64_t total = 0;
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (!eligible(i)) {
      continue;
    }
    Peer& peer = peers_[i];
    peer.current += peer.weight;
    total += peer.weight;
    if (!best || peer.current > peers_[*best].current) {
      best = i;
    }
  }
  if (best) {
    peers_[*best].current -= total;
  }
  return best;
}

template <class ActiveFn, class EligibleFn>
std::optional<std::size_t> Balancer::pick_least_active(ActiveFn& active, EligibleFn& eligible) {
  const std::size_t n = peers_.size();
  std::optional<std::size_t> best;
  int64_t best_active = 0;
  for (std::size_t k = 0, i = next_; k < n; ++k, i = (i + 1 == n) ? 0 : i + 1) {
    if (!eligible(i)) {
      continue;
    }
    const int64_t in_flight = active(i);
    if (!best || in_flight < best_active) {
      best = i;
      best_active = in_flight;
    }
  }
  if (best) {
    next_ = (*best + 1 == n) ? 0 : *best + 1;
  }
  return best;
}

template <class ActiveFn, class EligibleFn>
std::optional<std::size_t> Balancer::pick_p2c(ActiveFn& active, EligibleFn& eligible) {
  const std::size_t n = peers_.size();
  std::size_t a = 0;
  std::size_t b = 0;
  // Fast path: a uniform random distinct pair, kept when both are eligible. Conditioned on being
  // kept it is uniform over the eligible pairs, and so is the fallback, so the mix is unbiased.
  bool found = false;
  if (n >= 2) {
    a = random_.below(n);
    b = random_.below(n - 1);
    if (b >= a) {
      ++b;
    }
    found = eligible(a) && eligible(b);
  }
  if (!found) {
    const std::size_t eligible_count = sample_two(eligible, a, b);
    if (eligible_count == 0) {
      return std::nullopt;
    }
    if (eligible_count == 1) {
      return a;
    }
  }
  return active(b) < active(a) ? b : a;  // a tie goes to `a`, which is random
}

// Reservoir sampling of two distinct eligible backends in one pass: afterwards {a, b} is a
// uniform random pair and a/b are in random order. Returns how many eligible backends it saw.
template <class EligibleFn>
std::size_t Balancer::sample_two(EligibleFn& eligible, std::size_t& a, std::size_t& b) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (!eligible(i)) {
      continue;
    }
    if (seen == 0) {
      a = i;
    } else if (seen == 1) {
      b = i;
    } else if (const std::size_t slot = random_.below(seen + 1); slot < 2) {
      (slot == 0 ? a : b) = i;
    }
    ++seen;
  }
  if (seen >= 2 && (random_.next() & 1U) != 0) {
    std::swap(a, b);
  }
  return seen;
}

}  // namespace floodgate
