#include "floodgate/resilience/inflight.h"

#include <algorithm>
#include <string_view>

#include "floodgate/routing/params.h"

namespace floodgate::resilience {
namespace {

bool contains(const std::vector<std::string>& list, std::string_view token) noexcept {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s == token; });
}

}  // namespace

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
  // An upgrade offer is not a tunnel until its 101: it takes its slot like any request and
  // gives it back then (Exchange::release_tickets), so that a plain answer to it stays counted.
  if (upgrades_ && request.is_connect) return true;
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
