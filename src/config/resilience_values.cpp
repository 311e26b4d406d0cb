#include "resilience_values.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "floodgate/routing/params.h"  // kMaxPathPrefixBytes only: no link dependency

namespace floodgate::config::detail {
namespace {

using Text = Parsed<std::string>;

// A path longer than this cannot be opened (PATH_MAX, terminating NUL included).
constexpr size_t kMaxFilePathBytes = 4095;

constexpr std::array<std::string_view, 9> kStandardMethods{
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
char to_upper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

// tchar (RFC 9110 section 5.6.2).
bool is_tchar(char c) {
  return is_alpha(c) || is_digit(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// unreserved (RFC 3986 section 2.3): also the reg-name characters http::valid_authority
// accepts.
bool is_unreserved(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

bool is_space_or_control(char c) {
  return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `text` as routing/match_path.h normalises a request path, except for dot segments (which
// the caller looks for in the result); nullopt when a '%' starts no valid percent-encoding.
std::optional<std::string> normalised(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      const int hi = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
      const int lo = hi >= 0 ? hex_value(text[i + 2]) : -1;
      if (lo < 0) {
        return std::nullopt;
      }
      const char c = static_cast<char>(hi * 16 + lo);
      out += is_unreserved(c) ? std::string(1, c)
                              : std::string{'%', to_upper(text[i + 1]), to_upper(text[i + 2])};
      i += 2;
    } else if (text[i] != '/' || out.empty() || out.back() != '/') {
      out += text[i];
    }
  }
  return out;
}

// Why `text` can never match a normalised request path, with the spelling that can; "" when
// it is in normal form. The stages compare bytes against the normalised path, so an entry in
// another form would silently match nothing: "/%61dmin" would deny nothing at all.
std::string normal_form_error(std::string_view text) {
  const std::optional<std::string> normal = normalised(text);
  if (!normal) {
    return quoted(text) +
           " has a '%' that is not followed by two hex digits; write %25 for a literal '%'";
  }
  // Only whole segments: "/." may begin "/.git", and a prefix or suffix may end mid-segment.
  if (normal->find("/./") != std::string::npos || normal->find("/../") != std::string::npos) {
    return quoted(text) +
           R"( never matches: request paths are matched with their dot segments ("/./", "/../"))"
           " resolved; write the path without them";
  }
  if (*normal != text) {
    return quoted(text) +
           " never matches: request paths are matched in normal form (percent-encoded letters, "
           "digits and -._~ decoded, other percent-encodings in upper case, repeated slashes "
           "merged); write " +
           quoted(*normal);
  }
  return {};
}

// Why `text` cannot be part of a path that is matched without its query; "" when it can.
std::string path_text_error(std::string_view text) {
  if (std::any_of(text.begin(), text.end(), is_space_or_control)) {
    return quoted(text) + " contains a space or control character; percent-encode it";
  }
  if (const size_t cut = text.find_first_of("?#"); cut != std::string_view::npos) {
    return quoted(text) + " contains '" + text[cut] +
           "'; paths are matched without the query, e.g. " + quoted(text.substr(0, cut));
  }
  if (text.size() > kMaxPathPrefixBytes) {
    return "a path of " + std::to_string(text.size()) + " bytes is too long; at most " +
           std::to_string(kMaxPathPrefixBytes) + " are allowed";
  }
  return normal_form_error(text);
}

// 1..65535 in decimal, without leading zeros; `why` says otherwise.
std::optional<uint16_t> parse_port(std::string_view digits, std::string& why) {
  const auto value = parse_digits(digits, 65535);
  if (!value || *value == 0) {
    why = "the port must be a number from 1 to 65535";
  } else if (digits.front() == '0') {
    why = "write the port without leading zeros";
  } else {
    return static_cast<uint16_t>(*value);
  }
  return std::nullopt;
}

// Why `host` (brackets removed when `bracketed`) is not a CONNECT host; "" when it is.
std::string connect_host_error(std::string_view host, bool bracketed) {
  if (bracketed) {
    std::array<unsigned char, sizeof(in6_addr)> buf{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), buf.data()) != 1) {
      return "'" + std::string(host) + "' is not an IPv6 address";
    }
    return {};
  }
  if (host.empty()) {
    return "the host is missing";
  }
  if (host.find(':') != std::string_view::npos) {
    return "IPv6 addresses need brackets, e.g. \"[2001:db8::1]:443\"";
  }
  if (!std::all_of(host.begin(), host.end(), is_unreserved)) {
    return "use a name of letters, digits, '-', '.', '_' and '~', an IPv4 address, or an IPv6 "
           "address in brackets";
  }
  return {};
}

}  // namespace

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar);
}

Parsed<std::string> parse_method(std::string_view text) {
  if (text.empty()) {
    return Text::fail("a method cannot be empty; write a method name, e.g. \"GET\"");
  }
  if (!is_token(text)) {
    return Text::fail(quoted(text) +
                      " is not a method: a method is a token of letters, digits and "
                      "!#$%&'*+-.^_`|~ (RFC 9110 section 5.6.2), e.g. \"GET\"");
  }
  return Text::ok(std::string(text));
}

std::string_view miscased_method(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(), to_upper);
  for (const std::string_view m : kStandardMethods) {
    if (m == upper && m != text) {
      return m;
    }
  }
  return {};
}

Parsed<std::string> parse_match_prefix(std::string_view text) {
  if (!text.starts_with('/')) {
    const std::string example = text.empty() ? "/downloads/" : std::string("/").append(text);
    return Text::fail(quoted(text) + " must start with \"/\"; e.g. " + quoted(example));
  }
  if (std::string why = path_text_error(text); !why.empty()) {
    return Text::fail(std::move(why));
  }
  return Text::ok(std::string(text));
}

Parsed<std::string> parse_match_suffix(std::string_view text) {
  if (text.empty()) {
    return Text::fail("a suffix cannot be empty (it would match every path); e.g. \"/events\"");
  }
  if (std::string why = path_text_error(text); !why.empty()) {
    return Text::fail(std::move(why));
  }
  return Text::ok(std::string(text));
}

Parsed<std::string> parse_connect_authority(std::string_view text) {
  const auto fail = [&](std::string_view why) {
    return Text::fail(quoted(text) + " is not a CONNECT authority: " + std::string(why));
  };
  if (text.empty()) {
    return fail("it is empty; write host:port, e.g. \"db.internal:5432\"");
  }
  if (text.find('*') != std::string_view::npos) {
    return fail("wildcards are not supported; list each host:port exactly");
  }
  if (text.find('/') != std::string_view::npos || text.find('@') != std::string_view::npos) {
    return fail("write only host:port, without a scheme, user or path, e.g. \"db.internal:5432\"");
  }
  const bool bracketed = text.front() == '[';
  const size_t close = bracketed ? text.find(']') : 0;
  if (bracketed && close == std::string_view::npos) {
    return fail("the ']' after the IPv6 address is missing");
  }
  const size_t colon = bracketed ? close + 1 : text.rfind(':');
  if (colon == std::string_view::npos || colon >= text.size() || text[colon] != ':') {
    return fail("the port is missing; a CONNECT names host:port, e.g. \"db.internal:5432\"");
  }
  const std::string_view host = bracketed ? text.substr(1, close - 1) : text.substr(0, colon);
  if (const std::string why = connect_host_error(host, bracketed); !why.empty()) {
    return fail(why);
  }
  std::string why;
  if (!parse_port(text.substr(colon + 1), why)) {
    return fail(why);
  }
  std::string canonical(text);
  std::transform(canonical.begin(), canonical.end(), canonical.begin(), to_lower);
  return Text::ok(std::move(canonical));
}

Parsed<std::string> parse_meminfo_path(std::string_view text) {
  if (text.empty()) {
    return Text::fail("the path is empty; write an absolute path, e.g. \"/proc/meminfo\"");
  }
  if (!text.starts_with('/')) {
    return Text::fail(quoted(text) +
                      " is not an absolute path (floodgate may run from any directory); e.g. "
                      "\"/proc/meminfo\"");
  }
  const auto is_control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  if (std::any_of(text.begin(), text.end(), is_control)) {
    return Text::fail("the path contains a control character; no file can be named so");
  }
  if (text.size() > kMaxFilePathBytes) {
    return Text::fail("the path is " + std::to_string(text.size()) + " bytes long; at most " +
                      std::to_string(kMaxFilePathBytes) + " can be opened");
  }
  return Text::ok(std::string(text));
}

std::string accepted(const AutoOrCount& k, bool with_auto) {
  const std::string count =
      std::string(k.unit) + " from 0 (" + std::string(k.zero) + ") to " + std::to_string(k.max);
  return with_auto ? "\"auto\" or " + count : count;
}

std::optional<uint64_t> parse_digits(std::string_view text, uint64_t max) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), is_digit)) {
    return std::nullopt;
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

}  // namespace floodgate::config::detail
