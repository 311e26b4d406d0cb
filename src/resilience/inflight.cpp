#include "floodgate/resilience/inflight.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "floodgate/routing/params.h"

namespace floodgate::resilience {
namespace {

bool contains(const std::vector<std::string>& list, std::string_view token) noexcept {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s == token; });
}

}  // namespace

uint32_t pool_capacity(const UpstreamParams& pool) noexcept {
  if (pool.resilience.max_active_requests != 0) return pool.resilience.max_active_requests;
  const uint64_t capacity = uint64_t{pool.servers.size()} * pool.keepalive;
  return static_cast<uint32_t>(std::min<uint64_t>(capacity, std::numeric_limits<uint32_t>::max()));
}

uint32_t resolve_max_inflight(const InflightParams& params, uint32_t reactors,
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

bool is_cors_preflight(const RequestView& request) noexcept {
  return request.method == "OPTIONS" && request.origin_present &&
         request.access_control_request_method_present;
}

InflightExemptions::InflightExemptions(const InflightParams& params)
    : methods_(params.exempt_methods),
      prefixes_(params.exempt_path_prefixes),
      suffixes_(params.exempt_path_suffixes),
      preflight_(params.exempt_preflight),
      upgrades_(params.exempt_upgrades) {}

bool InflightExemptions::exempt(const RequestView& request) const noexcept {
  if (upgrades_ && (request.upgrade || request.is_connect)) return true;
  if (preflight_ && is_cors_preflight(request)) return true;
  if (contains(methods_, request.method)) return true;
  const std::string_view path = request.path;
  for (const std::string& prefix : prefixes_) {
    if (path.starts_with(prefix)) return true;
  }
  if (path.size() == kMaxPathPrefixBytes) return false;  // maybe truncated: its end is unknown
  for (const std::string& suffix : suffixes_) {
    if (path.ends_with(suffix)) return true;
  }
  return false;
}

}  // namespace floodgate::resilience
