// Parsers for the scalar syntaxes of [resilience] (resilience/params.h): method tokens, the
// path patterns of exemptions and denials, CONNECT authorities, the meminfo path, and the
// numbers the environment overrides are written in. As values.h: no TOML, each takes the text
// as the operator wrote it and returns the value or a message that says what is wrong and how
// to fix it. Pure functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"  // Admission::kMaxActive only: no link dependency
#include "table_reader.h"
#include "values.h"

namespace floodgate::config::detail {

// `mode` of the tables whose stage can refuse a request.
inline constexpr std::array<Choice<resilience::Mode>, 2> kModes{{
    {"enforce", resilience::Mode::enforce},
    {"shadow", resilience::Mode::shadow},
}};

// An RFC 9110 token (1*tchar, section 5.6.2): a method, a header field name.
bool is_token(std::string_view text);

// A request method: an RFC 9110 token (1*tchar, section 5.6.2), kept as written. Methods are
// case-sensitive (section 9.1), so "get" is a valid token that never matches a GET request.
Parsed<std::string> parse_method(std::string_view text);

// The standard method (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH) that
// `text` spells in another case ("get" -> "GET"), or "" when it spells none or spells it right.
std::string_view miscased_method(std::string_view text);

// A prefix of the normalised request path: as a route's path_prefix (starts with "/", no
// space or control character, no '?' or '#', at most kMaxPathPrefixBytes bytes), and in the
// normal form of routing/match_path.h (no percent-encoded unreserved character, percent
// hex digits in upper case, no "//", no "/./" or "/../"): the stages compare it byte for byte
// with the normalised path, so another spelling would match nothing.
Parsed<std::string> parse_match_prefix(std::string_view text);

// A suffix of the normalised request path ("/events", ".mp4"): not empty, otherwise as a prefix
// but without the leading "/".
Parsed<std::string> parse_match_suffix(std::string_view text);

// A CONNECT authority an allowlist names exactly: "host:port" with a port of 1..65535 written
// without leading zeros; host a name of letters, digits, '-', '.', '_' and '~' (as
// http::valid_authority accepts), or a bracketed IPv6 address. The host is returned in lower
// case (hosts are case-insensitive, RFC 3986 section 3.2.2), so the result is canonical.
Parsed<std::string> parse_connect_authority(std::string_view text);

// The file the memory guard samples: a non-empty absolute path without control characters.
Parsed<std::string> parse_meminfo_path(std::string_view text);

// The front cap is an Admission like a pool's (upstream/admission.h): its limit stops there.
inline constexpr int64_t kMaxInflight = Admission::kMaxActive;
// 1 PiB: above the memory and swap of any host, and a floor whose byte count fits in 64 bits.
inline constexpr int64_t kMaxMinAvailableMib = int64_t{1} << 30;

// The bound of the counts of [resilience] (a breaker's streak and probes, the watchdog's
// samples and windows): far above any useful value, yet a bound, so that the counters of the
// runtime can never overflow.
inline constexpr int64_t kMaxCount = 1'000'000;

// A key that takes "auto" or a count, and what the count means: shared by the key and the
// environment variable that overrides it, so that both messages state the same syntax.
struct AutoOrCount {
  std::string_view key;
  int64_t max;
  std::string_view zero;  // what 0 means
  std::string_view unit;  // "an integer", "a number of MiB"
};
inline constexpr AutoOrCount kMaxInflightKey{"max_inflight", kMaxInflight, "no cap", "an integer"};
inline constexpr AutoOrCount kMinAvailableKey{"min_available", kMaxMinAvailableMib,
                                              "the guard is off", "a number of MiB"};

// What `k` accepts, for messages: "\"auto\" or an integer from 0 (no cap) to 2147483646", without
// the "auto" part when `with_auto` is false.
std::string accepted(const AutoOrCount& k, bool with_auto);

// A number written in decimal digits only (no sign, no space), at most `max`: an environment
// variable's integer, a port.
std::optional<uint64_t> parse_digits(std::string_view text, uint64_t max);

}  // namespace floodgate::config::detail
