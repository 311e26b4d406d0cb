// The stages of the request path's chain that can refuse a request, as metrics label them
// (floodgate_shadow_rejections_total{stage}). docs/resilience.md lists the chain in order;
// this enum is not in that order: a new stage is appended here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/reason.h"

namespace floodgate {

enum class StageId : uint8_t {
  inflight,
  memory_guard,
  protocol,
  pool,
  circuit_breaker,
  brownout,
  adaptive_admission,
  route_queue,
  rate_limit,
  quota,
  count_
};

inline constexpr std::size_t kStageCount = static_cast<std::size_t>(StageId::count_);

inline constexpr std::array<std::string_view, kStageCount> kStageLabels{
    "inflight", "memory_guard",       "protocol",    "pool",       "circuit_breaker",
    "brownout", "adaptive_admission", "route_queue", "rate_limit", "quota"};

constexpr std::string_view label(StageId s) {
  return kStageLabels[static_cast<std::size_t>(s)];
}

// The reasons each stage can answer with, for the metrics that pre-render every series.
struct StageReason {
  StageId stage;
  Reason reason;
};
inline constexpr std::array<StageReason, 20> kStageReasons{{
    {StageId::inflight, Reason::inflight_cap},
    {StageId::memory_guard, Reason::memory_pressure},
    {StageId::protocol, Reason::method_not_allowed},
    {StageId::protocol, Reason::denied_path},
    {StageId::protocol, Reason::authority_mismatch},
    {StageId::protocol, Reason::connect_denied},
    {StageId::protocol, Reason::too_early},
    {StageId::circuit_breaker, Reason::circuit_open},
    {StageId::brownout, Reason::brownout},
    {StageId::adaptive_admission, Reason::adaptive_limit},
    {StageId::route_queue, Reason::route_cap},
    {StageId::route_queue, Reason::global_cap},
    {StageId::rate_limit, Reason::rate_limited},
    {StageId::quota, Reason::burst_quota_exhausted},
    {StageId::quota, Reason::sustained_quota_exhausted},
    {StageId::quota, Reason::selector_identity_missing},
    {StageId::quota, Reason::selector_identity_invalid},
    {StageId::quota, Reason::backend_timeout},
    {StageId::quota, Reason::backend_unavailable},
    {StageId::quota, Reason::backend_error},
}};

// The index of (stage, reason) in kStageReasons, or kStageReasons.size() when it is not one.
constexpr std::size_t stage_reason_index(StageId stage, Reason reason) {
  std::size_t i = 0;
  while (i < kStageReasons.size() &&
         (kStageReasons[i].stage != stage || kStageReasons[i].reason != reason)) {
    ++i;
  }
  return i;
}

}  // namespace floodgate
