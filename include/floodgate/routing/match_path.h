// MatchPath: the form of a request path that routes are matched against.
//
// A route used as an access boundary must not be bypassed by spelling its path differently:
// "/x/../admin", "//admin", "/./admin" and "/%61dmin" all name "/admin" (and nginx routes them
// so). The path is normalised as RFC 3986 section 6.2.2 describes, in one pass:
//   - the query is excluded (everything from the first '?');
//   - percent-encoded unreserved characters (ALPHA DIGIT "-" "." "_" "~") are decoded; any
//     other percent-encoding is kept, its hex digits upper-cased ("%2f" is "%2F", never "/");
//   - repeated slashes are merged ("//a" is "/a");
//   - dot segments are resolved (RFC 3986 section 5.2.4), after decoding ("/%2e%2e/" is "/../").
// A path whose ".." would climb above the root ("/../a", "/a/../../b") or that has a malformed
// percent-encoding ("%zz", "%4") is refused: the request is 400.
//
// Bounded: only the first kMaxPathPrefixBytes bytes of the normalised path are kept (the rest
// is still checked). No path_prefix is longer (config checks), so prefix matching on the kept
// bytes is exact. No allocation: a path with no '%', no "//" and no "/." is already normal and
// is used in place (one scan); any other is rewritten into the object's own buffer, which is
// meant to live on the caller's stack for the one match it serves.
//
// Thread-safety: a value type; no shared state.
#pragma once

#include <array>
#include <string_view>

#include "floodgate/routing/params.h"

namespace floodgate {

enum class PathVerdict {
  ok,
  malformed,   // a '%' not followed by two hex digits, or a path not starting with '/'
  above_root,  // a ".." segment with nothing left to remove
};

class MatchPath {
 public:
  // Normalises the path of an origin-form `target` ("/a/b?q"). On ok, view() is the result.
  PathVerdict assign(std::string_view target) noexcept;

  // The normalised path (at most kMaxPathPrefixBytes bytes of it when it had to be rewritten);
  // valid while this object and the target live.
  std::string_view view() const noexcept { return view_; }

 private:
  std::array<char, kMaxPathPrefixBytes> buf_;
  std::string_view view_;
};

}  // namespace floodgate
