#include "floodgate/routing/route_table.h"

#include "floodgate/routing/match_path.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <tuple>
#include <utility>

namespace floodgate {
namespace {

// Order of the kinds is the order of precedence and the order of the groups in routes_.
enum class Kind { exact, wildcard, catch_all };

struct Pending {
  Kind kind;
  std::string key;
  Route route;
};

char to_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool all_digits(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The name part of a Host value: without the port, the IPv6 brackets and one trailing dot.
// A bare IPv6 literal ("::1", several colons) has no port. A colon followed by anything but
// digits is left in place: such a host matches no exact route.
std::string_view strip_host(std::string_view host) noexcept {
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(1, close - 1);
  }
  const auto colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(':') == colon &&
      all_digits(host.substr(colon + 1))) {
    host = host.substr(0, colon);
  }
  if (host.ends_with('.')) {
    host.remove_suffix(1);
  }
  return host;
}

// Requests are matched on their normalised path, so the prefix is normalised too ("/%7Eu" is
// "/~u"). One that config would refuse (a query, too long, climbing above the root) is kept as
// written: it then matches nothing, rather than something wider than it says.
std::string normalised_prefix(const std::string& prefix) {
  MatchPath normal;
  if (prefix.size() > kMaxPathPrefixBytes || prefix.find_first_of("?#") != std::string::npos ||
      normal.assign(prefix) != PathVerdict::ok) {
    return prefix;
  }
  return std::string(normal.view());
}

Pending classify(const RouteParams& params, uint32_t upstream, uint32_t index) {
  const std::string_view name = strip_host(params.host);
  std::string host(name.size(), '\0');
  std::transform(name.begin(), name.end(), host.begin(), to_lower);
  Kind kind = Kind::exact;
  std::string key = host;
  if (host == "*") {
    kind = Kind::catch_all;
    key.clear();
  } else if (host.starts_with("*.")) {
    kind = Kind::wildcard;
    key.erase(0, 1);  // keep the dot: ".example.com" never matches "example.com"
  }
  return {kind, std::move(key),
          Route{std::move(host), normalised_prefix(params.path_prefix), upstream, index,
                params.allow_h2c_upgrade}};
}

// Precedence order: kind, then host key, then longest prefix, then configuration order.
bool precedes(const Pending& a, const Pending& b) noexcept {
  return std::tuple(a.kind, std::string_view(a.key), b.route.path_prefix.size(), a.route.index) <
         std::tuple(b.kind, std::string_view(b.key), a.route.path_prefix.size(), b.route.index);
}

}  // namespace

RouteTable RouteTable::build(const std::vector<RouteParams>& routes,
                             std::span<const uint32_t> upstream_ids) {
  assert(upstream_ids.size() == routes.size());
  std::vector<Pending> pending;
  pending.reserve(routes.size());
  for (std::size_t i = 0; i < routes.size(); ++i) {
    pending.push_back(classify(routes[i], upstream_ids[i], static_cast<uint32_t>(i)));
  }
  std::sort(pending.begin(), pending.end(), precedes);

  RouteTable table;
  table.routes_.reserve(pending.size());
  for (Pending& p : pending) {
    const auto pos = static_cast<uint32_t>(table.routes_.size());
    table.routes_.push_back(std::move(p.route));
    if (p.kind == Kind::catch_all) {
      if (table.catch_all_.begin == table.catch_all_.end) {
        table.catch_all_.begin = pos;
      }
      table.catch_all_.end = pos + 1;
      continue;
    }
    auto& groups = p.kind == Kind::exact ? table.exact_ : table.wildcards_;
    if (groups.empty() || groups.back().key != p.key) {
      groups.push_back({std::move(p.key), pos, pos});
    }
    groups.back().end = pos + 1;
  }
  return table;
}

std::string_view normalise_host(std::string_view host,
                                std::span<char, RouteTable::kMaxHostBytes> out) noexcept {
  const std::string_view name = strip_host(host);
  if (name.size() > out.size()) return {};
  std::transform(name.begin(), name.end(), out.begin(), to_lower);
  return {out.data(), name.size()};
}

const Route* RouteTable::match(std::string_view raw_host, std::string_view path) const noexcept {
  std::array<char, kMaxHostBytes> buffer;  // the lower-cased host; no allocation per request
  if (const std::string_view host = normalise_host(raw_host, buffer); !host.empty()) {
    if (const Group* group = find(exact_, host)) {
      if (const Route* route = match_group(*group, path)) {
        return route;
      }
    }
    if (const Route* route = match_wildcards(host, path)) {
      return route;
    }
  }
  return match_group(catch_all_, path);
}

const Route* RouteTable::match_group(const Group& group, std::string_view path) const noexcept {
  for (uint32_t i = group.begin; i < group.end; ++i) {
    if (path.starts_with(routes_[i].path_prefix)) {
      return &routes_[i];
    }
  }
  return nullptr;
}

// Tries the host's suffixes from the longest down (".b.example.com", ".example.com", ".com"),
// so the most specific wildcard is consulted first. A suffix must follow a non-empty label.
const Route* RouteTable::match_wildcards(std::string_view host,
                                         std::string_view path) const noexcept {
  if (wildcards_.empty()) {
    return nullptr;
  }
  for (std::size_t i = 1; i < host.size(); ++i) {
    if (host[i] != '.') {
      continue;
    }
    if (const Group* group = find(wildcards_, host.substr(i))) {
      if (const Route* route = match_group(*group, path)) {
        return route;
      }
    }
  }
  return nullptr;
}

const RouteTable::Group* RouteTable::find(const std::vector<Group>& groups,
                                          std::string_view key) noexcept {
  const auto it = std::lower_bound(groups.begin(), groups.end(), key,
                                   [](const Group& g, std::string_view k) { return g.key < k; });
  return it != groups.end() && it->key == key ? &*it : nullptr;
}

}  // namespace floodgate
