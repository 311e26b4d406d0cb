// RouteTable: maps a request's Host and path to the [[routes]] entry that serves it.
//
// Threads and lifetime: build() runs on the main thread when a configuration snapshot is made
// (it allocates). The table is immutable afterwards, so any number of reactors may call match()
// concurrently. match() neither allocates nor throws. Route pointers stay valid for the lifetime
// of the table (moving the table keeps them valid too).
//
// Host handling (request Host and configured host alike): ASCII case-insensitive; a port is
// ignored ("example.com:8080", "[::1]:8080"); IPv6 literals compare without brackets; one trailing
// dot is ignored ("example.com." is "example.com"). An empty Host (HTTP/1.0) and a host longer
// than kMaxHostBytes match only "*" routes.
//
// Precedence, first hit wins:
//   1. routes whose host equals the request host: the longest matching path_prefix;
//   2. "*.suffix" routes whose suffix ends the host ("*.example.com" matches "a.example.com", not
//      "example.com"): the longest suffix first, the longest matching path_prefix within it;
//   3. "*" routes: the longest matching path_prefix.
// path_prefix is a plain byte prefix ("/api" matches "/apix") of the normalised path
// (match_path.h: no query, unreserved characters decoded, dot segments resolved, slashes
// merged); build() normalises the configured prefixes the same way. Among routes with the same
// host and the same path_prefix the first in configuration order wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/routing/params.h"

namespace floodgate {

struct Route {
  std::string host;                // normalised: lower-case, no port, no trailing dot
  std::string path_prefix;         // byte prefix of the normalised path (normalised itself)
  uint32_t upstream;               // upstream id
  uint32_t index;                  // position in the configuration's [[routes]]
  bool allow_h2c_upgrade = false;  // RouteParams::allow_h2c_upgrade
};

class RouteTable {
 public:
  static constexpr std::size_t kMaxHostBytes = 255;

  RouteTable() = default;  // empty: match() always returns nullptr

  // Precondition: upstream_ids.size() == routes.size(); upstream_ids[i] is the id of
  // routes[i].upstream. Hosts are "*", "*.suffix" or an exact name (config validates them).
  static RouteTable build(const std::vector<RouteParams>& routes,
                          std::span<const uint32_t> upstream_ids);

  // The route serving `host` (the raw Host header value) and `path` (the request's path as
  // MatchPath::view() gives it: normalised, no query), or nullptr when none matches
  // (404 no_route).
  const Route* match(std::string_view host, std::string_view path) const noexcept;

  std::size_t size() const noexcept { return routes_.size(); }

 private:
  // routes_[begin, end): one host's routes, longest path_prefix first, then configuration order.
  struct Group {
    std::string key;  // exact host, or a wildcard's suffix with its leading dot (".example.com")
    uint32_t begin = 0;
    uint32_t end = 0;
  };

  const Route* match_group(const Group& group, std::string_view path) const noexcept;
  const Route* match_wildcards(std::string_view host, std::string_view path) const noexcept;
  static const Group* find(const std::vector<Group>& groups, std::string_view key) noexcept;

  std::vector<Route> routes_;     // grouped: exact hosts, then wildcards, then "*"
  std::vector<Group> exact_;      // sorted by key
  std::vector<Group> wildcards_;  // sorted by key
  Group catch_all_;               // the "*" routes
};

// `host` (a Host value, an absolute-form authority, or a route's configured host) as routes
// compare it: lower-case, without a port, the IPv6 brackets and one trailing dot (see "Host
// handling" above), written into `out`. Empty when that leaves nothing or more than
// kMaxHostBytes. The one normalisation of hosts: routing and the host-based identities of the
// rate limits both take it from here, so "A.Example:80" and "a.example." are "a.example" for
// both. Allocates nothing; any thread.
std::string_view normalise_host(std::string_view host,
                                std::span<char, RouteTable::kMaxHostBytes> out) noexcept;

}  // namespace floodgate
