// RequestView: what the front stages of the chain (in-flight cap, memory guard, protocol
// policy) look at in a request, gathered once by the caller from the parsed head.
//
// Views only: every member points into the request's head buffer (or, for `path`, into the
// caller's MatchPath), so building one copies nothing and allocates nothing, and it is valid only
// while those live: for the one check it is built for. The stages never keep it.
//
// Thread-safety: a value type; no shared state.
#pragma once

#include <string_view>

namespace floodgate::resilience {

struct RequestView {
  std::string_view method{};  // the method token as received (case-sensitive: "get" is not GET)
  std::string_view target{};  // the request-target as received; for CONNECT, the authority-form
  // The normalised path of the target's path component: MatchPath::view() of the origin-form
  // target, or of the path part of an absolute-form one (routing/match_path.h: "/%61dmin" and
  // "/x/../admin" are "/admin"). Empty for CONNECT and for OPTIONS *.
  std::string_view path{};
  std::string_view host{};       // the Host field value, trimmed (may be empty)
  std::string_view authority{};  // the absolute-form target's authority; empty for origin-form
  bool is_connect = false;
  bool upgrade = false;  // forwarded as an upgrade (http::RequestFacts::upgrade: WebSocket...)
  bool origin_present = false;                         // an Origin field is present
  bool access_control_request_method_present = false;  // Access-Control-Request-Method too
  // Its head began in TLS 1.3 early data (0-RTT, before the client's Finished): replayable.
  bool early_data = false;
};

}  // namespace floodgate::resilience
