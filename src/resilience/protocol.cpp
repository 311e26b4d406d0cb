#include "floodgate/resilience/protocol.h"

#include <algorithm>

#include "floodgate/core/ascii.h"
#include "floodgate/routing/params.h"

namespace floodgate::resilience {
namespace {

constexpr uint16_t kHttpPort = 80;
constexpr uint16_t kHttpsPort = 443;

template <class T, class U>
bool contains(const std::vector<T>& list, const U& value) noexcept {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The port an absolute-form target means when its authority names none.
uint16_t default_port(std::string_view target) noexcept {
  return target.size() >= 8 && ascii::iequals(target.substr(0, 8), "https://") ? kHttpsPort
                                                                               : kHttpPort;
}

// Whether two authorities name the same host and port (see rule 4 in protocol.h).
bool same_authority(std::string_view a, std::string_view b, uint16_t default_port) noexcept {
  const std::optional<Authority> x = split_authority(a);
  const std::optional<Authority> y = split_authority(b);
  if (!x || !y || !ascii::iequals(x->host, y->host)) return false;
  const std::optional<uint16_t> px = x->port.empty() ? default_port : port_number(x->port);
  const std::optional<uint16_t> py = y->port.empty() ? default_port : port_number(y->port);
  return px && py && *px == *py;
}

std::string join_allow(const ProtocolParams& params) {
  if (params.allowed_methods.empty()) return std::string(kDefaultAllow);
  std::vector<std::string_view> listed;
  std::string allow;
  for (const std::string& method : params.allowed_methods) {
    if (contains(listed, std::string_view(method))) continue;
    if (method == "CONNECT" && !params.allow_connect) continue;  // refused anyway
    listed.emplace_back(method);
    if (!allow.empty()) allow += ", ";
    allow += method;
  }
  return allow;
}

}  // namespace

std::optional<Authority> split_authority(std::string_view authority) noexcept {
  std::size_t colon = std::string_view::npos;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      colon = close + 1;
    }
  } else {
    colon = authority.find(':');
  }
  Authority parts{authority.substr(0, colon), {}};
  if (colon != std::string_view::npos) parts.port = authority.substr(colon + 1);
  if (parts.host.empty() || parts.port.size() > 5) return std::nullopt;
  return parts;
}

std::optional<uint16_t> port_number(std::string_view port) noexcept {
  if (port.empty() || port.size() > 5) return std::nullopt;
  uint32_t value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

ProtocolPolicy::ProtocolPolicy(const ProtocolParams& params)
    : methods_(params.allowed_methods),
      denied_(params.denied_path_prefixes),
      early_safe_(params.early_data_safe_methods),
      connect_ports_(params.connect_allowed_ports),
      allow_(join_allow(params)),
      enforce_host_match_(params.enforce_authority_host_match),
      allow_connect_(params.allow_connect) {
  // config/ validates the entries; one that does not parse here could never match and is left
  // out (fail closed).
  for (const std::string& entry : params.connect_allowed_authorities) {
    const std::optional<Authority> parts = split_authority(entry);
    const std::optional<uint16_t> port = parts ? port_number(parts->port) : std::nullopt;
    if (port && *port != 0) connect_authorities_.push_back({std::string(parts->host), *port});
  }
}

Verdict ProtocolPolicy::refuse(Reason reason, int status) const noexcept {
  return {reason, status, status == 405 ? std::string_view(allow_) : std::string_view()};
}

Verdict ProtocolPolicy::check(const RequestView& request) const noexcept {
  if (request.is_connect && !allow_connect_) return refuse(Reason::connect_denied, 405);
  if (!method_allowed(request.method)) return refuse(Reason::method_not_allowed, 405);
  // Early data can be replayed (RFC 8470): only the safe methods are taken from it.
  if (request.early_data && !contains(early_safe_, request.method)) {
    return refuse(Reason::too_early, 425);
  }
  if (request.is_connect) {
    return connect_target_allowed(request.target) ? Verdict{} : refuse(Reason::connect_denied, 403);
  }
  if (enforce_host_match_ && !request.authority.empty() &&
      !same_authority(request.authority, request.host, default_port(request.target))) {
    return refuse(Reason::authority_mismatch, 400);
  }
  if (path_denied(request.path)) return refuse(Reason::denied_path, 403);
  return {};
}

bool ProtocolPolicy::method_allowed(std::string_view method) const noexcept {
  return methods_.empty() || contains(methods_, method);
}

bool ProtocolPolicy::connect_target_allowed(std::string_view target) const noexcept {
  const std::optional<Authority> parts = split_authority(target);
  const std::optional<uint16_t> port = parts ? port_number(parts->port) : std::nullopt;
  if (!port || *port == 0) return false;  // authority-form needs a port (RFC 9110 9.3.6)
  if (contains(connect_ports_, *port)) return true;
  return std::any_of(connect_authorities_.begin(), connect_authorities_.end(),
                     [&](const HostPort& allowed) {
                       return allowed.port == *port && ascii::iequals(allowed.host, parts->host);
                     });
}

bool ProtocolPolicy::path_denied(std::string_view path) const noexcept {
  const bool maybe_truncated = path.size() == kMaxPathPrefixBytes;
  for (const std::string_view prefix : denied_) {
    if (path.starts_with(prefix)) return true;
    if (prefix.size() > 1 && prefix.back() == '/' && path == prefix.substr(0, prefix.size() - 1)) {
      return true;
    }
    if (maybe_truncated && prefix.size() > path.size() && prefix.starts_with(path)) return true;
  }
  return false;
}

}  // namespace floodgate::resilience
