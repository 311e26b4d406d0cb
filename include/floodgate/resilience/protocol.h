// The protocol policy ([resilience.protocol], seed 004 "Protocol"): which requests floodgate
// forwards at all, judged on the request's shape alone (method, path, authority), before any
// routing or backend work. Sans-I/O: a pure function of the compiled params and a RequestView.
//
// The rules, checked in this order (the first that refuses decides):
//   1. CONNECT while allow_connect is false: 405 connect_denied, with Allow.
//   2. A method not in a non-empty allowed_methods: 405 method_not_allowed, with Allow. Exact and
//      case-sensitive (RFC 9110 section 9.1: "get" is not GET). A CONNECT must pass this list
//      too when the list is not empty.
//   3. An allowed CONNECT whose target is not in the allowlists: 403 connect_denied. The target
//      must be authority-form `host:port` with a port of 1..65535; it passes when it equals an
//      entry of connect_allowed_authorities (host case-insensitive, port by value) or when its
//      port is in connect_allowed_ports (any host). Hosts are compared as text: an IP literal
//      does not match another spelling of the same address, and "host." is not "host" (both are
//      refused rather than guessed at). A CONNECT is judged by rules 1-3 only: it has no path,
//      and its Host field does not choose where the tunnel goes.
//   4. With enforce_authority_host_match, an absolute-form target whose authority differs from
//      the Host field: 400 authority_mismatch (RFC 9112 section 3.2.2: the client must send Host
//      identical to the target's authority; floodgate routes on the authority, a backend or a
//      cache behind it may use Host). Hosts compare case-insensitively (DNS names are); ports by
//      value, a missing or empty port being the scheme's default (80 for http://, 443 for
//      https://), so "http://a/" matches "Host: a:80" (RFC 3986 section 6.2.3). No other
//      equivalence: a trailing dot or another spelling of an IP literal is a mismatch, as is an
//      empty Host.
//   5. A normalised path (RequestView::path, so "/%61dmin", "/x/../admin" and "//admin" are
//      "/admin") starting with an entry of denied_path_prefixes: 403 denied_path. A byte prefix,
//      as nginx's `location /admin` and HAProxy's `path_beg /admin` match and as floodgate's
//      route path_prefix does: "/admin" denies "/admin", "/admin/x" and also "/administrator",
//      "/admin.php", "/admin;x" and "/admin%2Fx" (a deny list errs on the side of denying; a
//      segment-boundary match would let the last two through to backends that read ';' or %2F
//      as separators). An entry ending in '/' also denies the path without that slash ("/admin/"
//      denies "/admin": most backends serve both alike). Case-sensitive, like both of them:
//      "/ADMIN" passes. A path of exactly kMaxPathPrefixBytes bytes may be MatchPath's truncation
//      of a longer one; it is denied when an entry longer than it starts with it (fail closed).
//
// Thread-safety: immutable after construction; check() from any thread. Lifetime: the Allow
// value of a Verdict points into the policy, which lives in its generation. Cost: check() is a
// few comparisons of short strings per configured entry; no allocation, no lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/reason.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/request_view.h"

namespace floodgate::resilience {

// The Allow value of a 405 for CONNECT when allowed_methods is empty (every method but CONNECT
// is allowed): the methods floodgate's own OPTIONS * answer lists.
inline constexpr std::string_view kDefaultAllow = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH";

struct Verdict {
  Reason reason = Reason::none;  // none: the request passes
  int status = 0;                // the status to answer with (0 when it passes)
  std::string_view allow{};      // the Allow field value for a 405; empty otherwise

  bool pass() const noexcept { return reason == Reason::none; }
};

// `host [":" port]` split at its port colon (after the ']' of an IPv6 literal). Only the shape
// is checked: a host that is not empty, and a port of at most five digits if present (empty when
// absent or written "host:"); http::valid_authority() has vetted the characters already.
struct Authority {
  std::string_view host;
  std::string_view port;
};
std::optional<Authority> split_authority(std::string_view authority) noexcept;

// The value of a port of up to five digits, or empty when it is not a number of 0..65535.
std::optional<uint16_t> port_number(std::string_view port) noexcept;

class ProtocolPolicy {
 public:
  ProtocolPolicy() : ProtocolPolicy(ProtocolParams{}) {}
  explicit ProtocolPolicy(const ProtocolParams& params);

  Verdict check(const RequestView& request) const noexcept;

  // The Allow value of every 405 this policy sends: allowed_methods in their order without
  // duplicates (and without CONNECT unless allow_connect), or kDefaultAllow when the list is
  // empty.
  std::string_view allow() const noexcept { return allow_; }

 private:
  struct HostPort {
    std::string host;
    uint16_t port;
  };

  Verdict refuse(Reason reason, int status) const noexcept;
  bool method_allowed(std::string_view method) const noexcept;
  bool connect_target_allowed(std::string_view target) const noexcept;
  bool path_denied(std::string_view path) const noexcept;

  std::vector<std::string> methods_;     // empty = every method
  std::vector<std::string> denied_;      // as configured
  std::vector<std::string> early_safe_;  // early_data_safe_methods
  std::vector<HostPort> connect_authorities_;
  std::vector<uint16_t> connect_ports_;
  std::string allow_;
  bool enforce_host_match_;
  bool allow_connect_;
};

}  // namespace floodgate::resilience
