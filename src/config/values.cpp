#include "values.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

#include "floodgate/routing/params.h"  // kMaxPathPrefixBytes only: no link dependency

namespace floodgate::config::detail {
namespace {

using Millis = std::chrono::milliseconds;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

struct Unit {
  std::string_view name;
  int64_t millis;
};
// Longest suffix first is irrelevant: units are compared whole.
constexpr std::array<Unit, 4> kUnits{{{"ms", 1}, {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}}};

std::optional<int64_t> unit_millis(std::string_view unit) {
  for (const Unit& u : kUnits) {
    if (u.name == unit) {
      return u.millis;
    }
  }
  return std::nullopt;
}

// Parses a decimal without sign; nullopt when it has other characters or overflows `max`.
std::optional<uint64_t> parse_decimal(std::string_view digits, uint64_t max) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

Parsed<Endpoint> endpoint_error(std::string_view text, std::string_view why) {
  return Parsed<Endpoint>::fail(quoted(text) + " is not a valid address: " + std::string(why));
}

bool is_ip(int family, const std::string& host) {
  std::array<unsigned char, 16> buf{};
  return inet_pton(family, host.c_str(), buf.data()) == 1;
}

// A backend's host name: what DNS and /etc/hosts accept, with '_' for docker-compose service
// names: labels of [A-Za-z0-9_-], 1..63 characters each, 253 in all.
bool is_backend_name(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  std::size_t label = 0;
  for (const char c : h) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
               c == '_') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label != 0;
}

// Checks the host part of "host:port" (brackets already removed for IPv6) and maps localhost.
std::optional<std::string> check_host(std::string_view text, std::string_view host, bool bracketed,
                                      bool names, std::string& why) {
  const std::string h(host);
  if (bracketed) {
    if (is_ip(AF_INET6, h)) {
      return h;
    }
    why = "'" + h + "' is not an IPv6 address; write e.g. \"[::1]:8080\"";
  } else if (h.empty()) {
    why = "the host is missing; write e.g. \"127.0.0.1" + std::string(text) + "\"";
  } else if (h.find(':') != std::string::npos) {
    why = "IPv6 addresses need brackets; write e.g. \"[::1]:8080\"";
  } else if (lower(h) == "localhost") {
    return std::string("127.0.0.1");
  } else if (is_ip(AF_INET, h)) {
    return h;
  } else if (std::all_of(h.begin(), h.end(), [](char c) { return is_digit(c) || c == '.'; })) {
    why = "'" + h + "' is not an IPv4 address; write four numbers 0..255, e.g. 127.0.0.1";
  } else if (names && is_backend_name(h)) {
    return lower(h);
  } else if (names) {
    why = "'" + h + "' is neither an IP address nor a host name (dot-separated labels of " +
          "letters, digits, '-' and '_', each at most 63 characters)";
  } else {
    why = "'" + h + "' is not an IP address; use an IP address; DNS names are not resolved";
  }
  return std::nullopt;
}

std::optional<uint16_t> check_port(std::string_view port, PortRule rule, std::string& why) {
  const auto value = parse_decimal(port, 65535);
  if (port.empty() || !std::all_of(port.begin(), port.end(), is_digit) || !value) {
    why = rule == PortRule::nonzero
              ? "the port must be a number from 1 to 65535"
              : "the port must be a number from 0 to 65535 (0 = any free port)";
  } else if (*value == 0 && rule == PortRule::nonzero) {
    why = "port 0 is only allowed for listen addresses; use a port from 1 to 65535";
  } else {
    return static_cast<uint16_t>(*value);
  }
  return std::nullopt;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

Parsed<Millis> parse_duration(std::string_view text) {
  using P = Parsed<Millis>;
  if (text == "0") {
    return P::ok(Millis{0});
  }
  const auto fail = [&](const std::string& why) {
    return P::fail(quoted(text) + " is not a valid duration: " + why);
  };
  const size_t digits = std::find_if_not(text.begin(), text.end(), is_digit) - text.begin();
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  if (text.starts_with('-')) {
    return fail("durations cannot be negative");
  }
  if (digits == 0) {
    return fail("write a whole number and a unit (ms, s, m or h), e.g. \"10s\"");
  }
  if (unit.starts_with('.') || unit.starts_with(',')) {
    return fail("fractions are not supported; use a smaller unit, e.g. \"1500ms\" for 1.5s");
  }
  if (unit.empty()) {
    return fail("the unit is missing; add ms, s, m or h, e.g. \"" + std::string(number) + "s\"");
  }
  const auto factor = unit_millis(unit);
  if (!factor) {
    return fail("unknown unit '" + std::string(unit) + "'; use ms, s, m or h");
  }
  const auto max = static_cast<uint64_t>(kMaxDuration.count() / *factor);
  const auto value = parse_decimal(number, max);
  if (!value) {
    return fail("it exceeds the maximum of " + format_duration(kMaxDuration));
  }
  return P::ok(Millis{static_cast<int64_t>(*value) * *factor});
}

std::string format_duration(Millis d) {
  if (d.count() == 0) {
    return "0";
  }
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (d.count() % it->millis == 0) {
      return std::to_string(d.count() / it->millis) + std::string(it->name);
    }
  }
  return std::to_string(d.count()) + "ms";  // unreachable: every count divides by 1 ms
}

bool is_ip_literal(const std::string& host) {
  return is_ip(AF_INET, host) || is_ip(AF_INET6, host);
}

Parsed<Endpoint> parse_endpoint(std::string_view text, PortRule rule, bool names) {
  if (text.empty()) {
    return endpoint_error(text, "it is empty; write host:port, e.g. 127.0.0.1:8080");
  }
  const bool bracketed = text.front() == '[';
  const size_t close = bracketed ? text.find(']') : 0;
  if (bracketed && close == std::string_view::npos) {
    return endpoint_error(text, "the ']' after the IPv6 address is missing");
  }
  const size_t colon = bracketed ? close + 1 : text.rfind(':');
  if (colon == std::string_view::npos || colon >= text.size() || text[colon] != ':') {
    return endpoint_error(text, "the port is missing; write host:port, e.g. 127.0.0.1:8080");
  }
  std::string why;
  const std::string_view host = bracketed ? text.substr(1, close - 1) : text.substr(0, colon);
  const auto ip = check_host(text, host, bracketed, names, why);
  if (!ip) {
    return endpoint_error(text, why);
  }
  const auto port = check_port(text.substr(colon + 1), rule, why);
  if (!port) {
    return endpoint_error(text, why);
  }
  return Parsed<Endpoint>::ok(Endpoint{*ip, *port, std::string(text)});
}

Parsed<std::string> parse_route_host(std::string_view text) {
  using P = Parsed<std::string>;
  const auto fail = [&](std::string_view why) {
    return P::fail(quoted(text) + " is not a valid host: " + std::string(why));
  };
  if (text.empty()) {
    return fail("it is empty; use \"*\" for every host, \"*.example.com\" or an exact name");
  }
  if (text == "*") {
    return P::ok("*");
  }
  const bool wildcard = text.starts_with("*.");
  const std::string_view name = wildcard ? text.substr(2) : text;
  if (name.find('*') != std::string_view::npos) {
    return fail("'*' is allowed only alone or as a leading \"*.\", e.g. \"*.example.com\"");
  }
  if (const size_t colon = name.find(':'); colon != std::string_view::npos) {
    return fail("hosts are matched without a port; remove \"" + std::string(name.substr(colon)) +
                "\"");
  }
  if (!is_hostname(name)) {
    return fail("use dot-separated labels of letters, digits and '-', e.g. \"api.example.com\"");
  }
  return P::ok(lower(text));
}

Parsed<std::string> parse_path_prefix(std::string_view text) {
  using P = Parsed<std::string>;
  if (!text.starts_with('/')) {
    return P::fail(quoted(text) + " must start with \"/\"; e.g. path_prefix = \"/" +
                   std::string(text) + "\"");
  }
  const auto is_control = [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; };
  if (std::any_of(text.begin(), text.end(), is_control)) {
    return P::fail(quoted(text) + " contains a space or control character; percent-encode it");
  }
  // Routes match the request's normalised path, without its query (docs/http.md, Routing).
  if (const size_t cut = text.find_first_of("?#"); cut != std::string_view::npos) {
    return P::fail(quoted(text) + " contains '" + text[cut] +
                   "'; a route matches the path without the query, e.g. path_prefix = " +
                   quoted(text.substr(0, cut)));
  }
  if (text.size() > kMaxPathPrefixBytes) {
    return P::fail("a path_prefix of " + std::to_string(text.size()) +
                   " bytes is too long; at most " + std::to_string(kMaxPathPrefixBytes) +
                   " are allowed");
  }
  return P::ok(std::string(text));
}

bool is_hostname(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') {
    return false;
  }
  if (name.find("..") != std::string_view::npos) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '.'; });
}

bool is_valid_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return is_alnum(c) || c == '_' || c == '.' || c == '-';
  });
}

Parsed<std::string> parse_admin_token(std::string_view token) {
  using P = Parsed<std::string>;
  constexpr std::string_view kHowTo = R"(e.g. the output of "openssl rand -hex 32")";
  if (token.empty()) {
    return P::fail("the token is empty; set one of at least " + std::to_string(kMinTokenLength) +
                   " characters, " + std::string(kHowTo) +
                   ", or remove the key to run the admin listener without one on loopback");
  }
  const auto is_visible = [](char c) { return c > 0x20 && c < 0x7f; };
  if (!std::all_of(token.begin(), token.end(), is_visible)) {
    return P::fail(
        "the token contains a space, a control character or a non-ASCII character; it is sent "
        "in an Authorization header, so use visible ASCII characters only, " +
        std::string(kHowTo));
  }
  if (token.size() < kMinTokenLength) {
    return P::fail("the token is shorter than " + std::to_string(kMinTokenLength) +
                   " characters; use a longer one, " + std::string(kHowTo));
  }
  return P::ok(std::string(token));
}

bool is_loopback(std::string_view host) {
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    const auto* b = v6.s6_addr;
    const bool v4_mapped =
        std::all_of(b, b + 10, [](uint8_t x) { return x == 0; }) && b[10] == 0xff && b[11] == 0xff;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (v4_mapped && b[12] == 127);
  }
  return false;
}

std::string_view closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string_view best;
  size_t best_distance = std::min<size_t>(2, word.size() / 2) + 1;  // typos of at most 2 edits
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace floodgate::config::detail
