#include "floodgate/upstream/balancer.h"

namespace floodgate {

Balancer::Balancer(Balance kind, std::span<const uint32_t> weights, uint64_t seed)
    : kind_(kind), random_(seed) {
  assert(weights.size() <= UINT32_MAX);
  peers_.reserve(weights.size());
  for (const uint32_t weight : weights) {
    assert(weight >= 1);
    peers_.push_back(Peer{.weight = weight});
  }
}

}  // namespace floodgate
