// Parameters of one route ([[routes]] in the configuration). Plain values.
#pragma once

#include <cstddef>
#include <string>

namespace floodgate {

// The longest path_prefix a route may have. Request paths are matched in their normalised form
// (routing/match_path.h), of which only this many bytes are kept: prefixes no longer than this
// decide exactly.
inline constexpr std::size_t kMaxPathPrefixBytes = 1024;

struct RouteParams {
  std::string host = "*";          // exact host, "*.example.com" or "*"; stored lower-case
  std::string path_prefix = "/";   // byte prefix of the normalised path; no '?' or '#'
  std::string upstream;            // name of an [[upstreams]] entry
  bool allow_h2c_upgrade = false;  // forward "Upgrade: h2c" (otherwise removed)
  bool operator==(const RouteParams&) const = default;
};

}  // namespace floodgate
