// The size of the front in-flight cap ([resilience.inflight] max_inflight): "auto" worked out
// from the shape of a generation. Its own header, and inline, so that config/ can compute the
// very value a generation enforces (to check the keys bounded by it, such as
// adaptive_admission.max_limit, in `floodgate check`) without linking the resilience component:
// one formula, two callers. Pure functions; any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"  // Admission::kMaxActive only: no link dependency
#include "floodgate/upstream/params.h"

namespace floodgate::resilience {

// "auto" = max(kAutoInflightFloor, kAutoInflightFactor x (reactors + sum of pool capacities)).
inline constexpr uint32_t kAutoInflightFloor = 32;
inline constexpr uint32_t kAutoInflightFactor = 4;

// A pool's capacity as "auto" counts it: its max_active_requests when set, else servers x
// keepalive (the connections it can keep busy per reactor), saturating at UINT32_MAX.
inline uint32_t pool_capacity(const UpstreamParams& pool) noexcept {
  if (pool.resilience.max_active_requests != 0) return pool.resilience.max_active_requests;
  const uint64_t capacity = uint64_t{pool.servers.size()} * pool.keepalive;
  return static_cast<uint32_t>(std::min<uint64_t>(capacity, std::numeric_limits<uint32_t>::max()));
}

// The cap a generation enforces; 0 = no cap. "auto" (params.automatic) is computed as above in
// 64 bits and saturates at Admission::kMaxActive, the largest finite limit the cap can hold, so
// the value logged and shown in /status is the one enforced. A set value is returned as is
// (0 = disabled); Admission clamps one above kMaxActive, so config should bound the key by it as
// it does the pools' max_active_requests. Pure.
inline uint32_t resolve_max_inflight(const InflightParams& params, uint32_t reactors,
                                     std::span<const uint32_t> pool_capacities) noexcept {
  if (!params.automatic) return params.max_inflight;
  // At most 2^32 pools of 2^32 each plus 2^32 reactors: the sum fits in 64 bits; the product
  // by the factor is taken after clamping, so it cannot overflow either.
  uint64_t sum = reactors;
  for (const uint32_t capacity : pool_capacities) sum += capacity;
  sum = std::min<uint64_t>(sum, Admission::kMaxActive);
  const uint64_t cap = std::max<uint64_t>(kAutoInflightFloor, kAutoInflightFactor * sum);
  return static_cast<uint32_t>(std::min<uint64_t>(cap, Admission::kMaxActive));
}

}  // namespace floodgate::resilience
