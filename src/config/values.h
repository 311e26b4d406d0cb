// Parsers for the scalar syntaxes of the configuration: durations, endpoints, route hosts and
// names. No TOML here: each function takes the text as the operator wrote it and returns either
// the value or a message that says what is wrong and how to fix it (ready to become the message
// of a Diagnostic, without key path or position). Pure functions; any thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/endpoint.h"

namespace floodgate::config::detail {

template <class T>
struct Parsed {
  std::optional<T> value;
  std::string error;  // non-empty exactly when `value` is empty

  static Parsed ok(T v) { return {std::move(v), {}}; }
  static Parsed fail(std::string message) { return {std::nullopt, std::move(message)}; }
};

// `s` in double quotes, as messages show a value the user wrote.
std::string quoted(std::string_view s);

// Upper bound for every duration, so that `now + duration` can never overflow a clock (a
// steady_clock in nanoseconds spans about 292 years). One year is far beyond any sane timeout.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours{24 * 365};

// "250ms", "2s", "1m", "1h" (a non-negative integer and a unit), or "0" alone.
Parsed<std::chrono::milliseconds> parse_duration(std::string_view text);

// The shortest exact spelling of `d` in the syntax above ("1m", "1500ms", "0").
std::string format_duration(std::chrono::milliseconds d);

// Listen addresses may use port 0 (an ephemeral port); everything else needs 1..65535.
enum class PortRule { nonzero, zero_allowed };

// "127.0.0.1:8080", "[::1]:8080" or "localhost:8080" (host becomes 127.0.0.1). The host must be
// an IP literal, unless `names` (a backend's address): then a host name is accepted too, as
// `host` in lower case, for the caller to resolve. `text` of the result keeps the input.
Parsed<Endpoint> parse_endpoint(std::string_view text, PortRule rule, bool names = false);

// True if `host` is an IPv4 or IPv6 literal (without brackets).
bool is_ip_literal(const std::string& host);

// A route host: "*", "*.example.com" or an exact name of [A-Za-z0-9.-]; returned lower-case.
Parsed<std::string> parse_route_host(std::string_view text);

// A route path prefix: starts with "/" and holds no space or control character.
Parsed<std::string> parse_path_prefix(std::string_view text);

// A dot-separated sequence of non-empty labels of [A-Za-z0-9-] (an IPv4 address is one too).
bool is_hostname(std::string_view name);

// An upstream name: one or more of [A-Za-z0-9_.-].
bool is_valid_name(std::string_view name);

// The shortest admin.token accepted: 16 characters, e.g. 96 bits of base64.
inline constexpr size_t kMinTokenLength = 16;

// admin.token: at least kMinTokenLength visible ASCII characters (it travels in an
// Authorization header, which cannot carry every byte). The error never quotes the token.
Parsed<std::string> parse_admin_token(std::string_view token);

// True for an IPv4 address in 127.0.0.0/8, ::1, and ::ffff:127.x.y.z: a listener on it is
// reachable from this host only. `host` is an IP literal as in Endpoint::host.
bool is_loopback(std::string_view host);

// The candidate closest to `word` by edit distance if it is a plausible typo, else "".
std::string_view closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace floodgate::config::detail
