#include "redis_url.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <utility>

#include "resilience_values.h"

namespace floodgate::config::detail {
namespace {

using resilience::RedisTarget;
using Result = Parsed<RedisTarget>;

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kForm =
    "redis://[:password@]host[:port][/db], e.g. \"redis://127.0.0.1:6379/0\"";

// The url, as every message quotes it: without its password.
std::string shown(std::string_view text) {
  return quoted(redact_redis_url(text));
}

Result fail(std::string_view text, std::string_view why) {
  return Result::fail(shown(text) + ": " + std::string(why));
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding; nullopt for a '%' without two hex digits after it.
std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool is_ip(int family, const std::string& host) {
  std::array<unsigned char, 16> buf{};
  return inet_pton(family, host.c_str(), buf.data()) == 1;
}

// The scheme: "redis://" (in any case, as schemes are case-insensitive), else why not. The
// text after it in `rest`.
std::optional<std::string> check_scheme(std::string_view text, std::string_view& rest) {
  const size_t end = text.find("://");
  if (end == std::string_view::npos) {
    return shown(text) + " is not a Redis URL; write " + std::string(kForm);
  }
  const std::string scheme = lower(text.substr(0, end));
  if (scheme == "rediss") {
    return shown(text) +
           " asks for TLS (rediss://), which floodgate's Redis client does not speak; write "
           "redis:// and reach Redis over a trusted network";
  }
  if (scheme != "redis") {
    return shown(text) + " is not a Redis URL: its scheme is " + quoted(scheme) + "; write " +
           std::string(kForm);
  }
  rest = text.substr(kScheme.size());
  return std::nullopt;
}

// "[user]:password" into `t`; the error, if any.
std::optional<std::string> read_userinfo(std::string_view text, std::string_view info,
                                         RedisTarget& t) {
  const size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    return shown(text) +
           " has user information without a ':'; write a password as "
           "redis://:<password>@host, or an ACL user and its password as "
           "redis://<user>:<password>@host";
  }
  auto user = percent_decode(info.substr(0, colon));
  auto password = percent_decode(info.substr(colon + 1));
  if (!user || !password) {
    return shown(text) +
           " has a '%' in its user information that is not followed by two hex digits; write "
           "a '%' itself as %25";
  }
  if (password->empty()) {
    return shown(text) +
           " has an empty password; write it after the ':', or remove the user information for "
           "a Redis without AUTH";
  }
  t.username = std::move(*user);
  t.password = std::move(*password);
  return std::nullopt;
}

// The host: a bracketed IPv6 address, an IPv4 address or a DNS name (lower-cased).
std::optional<std::string> check_host(std::string_view text, std::string_view host, bool bracketed,
                                      RedisTarget& t) {
  const std::string h = lower(host);
  const bool dotted_digits =
      std::all_of(h.begin(), h.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  if (h.empty()) {
    return shown(text) + " names no host; write e.g. \"redis://127.0.0.1:6379/0\"";
  }
  if (bracketed && !is_ip(AF_INET6, h)) {
    return shown(text) + ": '" + h +
           "' is not an IPv6 address; write e.g. \"redis://[::1]:6379/0\"";
  }
  if (!bracketed && h.find(':') != std::string::npos) {
    return shown(text) + ": an IPv6 address needs brackets; write e.g. \"redis://[::1]:6379/0\"";
  }
  if (!bracketed && dotted_digits && !is_ip(AF_INET, h)) {
    return shown(text) + ": '" + h +
           "' is not an IPv4 address; write four numbers 0..255, e.g. 127.0.0.1";
  }
  if (!bracketed && !is_hostname(h)) {
    return shown(text) + ": '" + h +
           "' is neither a host name (letters, digits, '-' and '.') nor an IP address";
  }
  t.host = h;
  return std::nullopt;
}

// "host[:port]" or "[v6][:port]".
std::optional<std::string> read_host_port(std::string_view text, std::string_view hp,
                                          RedisTarget& t) {
  std::string_view host = hp;
  std::optional<std::string_view> port;
  const bool bracketed = hp.starts_with('[');
  if (bracketed) {
    const size_t close = hp.find(']');
    if (close == std::string_view::npos) {
      return shown(text) + ": '[' without ']'; write e.g. \"redis://[::1]:6379/0\"";
    }
    host = hp.substr(1, close - 1);
    const std::string_view after = hp.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return shown(text) + ": only \":port\" may follow ']'; write e.g. \"redis://[::1]:6379/0\"";
    }
    if (!after.empty()) port = after.substr(1);
  } else if (const size_t colon = hp.rfind(':');
             colon != std::string_view::npos && hp.find(':') == colon) {
    host = hp.substr(0, colon);
    port = hp.substr(colon + 1);
  }
  if (auto why = check_host(text, host, bracketed, t)) return why;
  if (!port) return std::nullopt;
  const auto value = parse_digits(*port, 65535);
  if (!value || *value == 0) {
    return shown(text) + ": the port must be a number from 1 to 65535 (6379 when left out)";
  }
  t.port = static_cast<uint16_t>(*value);
  return std::nullopt;
}

}  // namespace

std::string redact_redis_url(std::string_view text) {
  const size_t scheme = text.find("://");
  const size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(text);
  const std::string_view info = text.substr(start, at - start);
  const size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    return std::string(text.substr(0, start)) + "***" + std::string(text.substr(at));
  }
  if (colon + 1 == info.size()) return std::string(text);  // an empty password hides nothing
  return std::string(text.substr(0, start + colon + 1)) + "***" + std::string(text.substr(at));
}

Parsed<RedisTarget> parse_redis_url(std::string_view text) {
  std::string_view rest;
  if (auto why = check_scheme(text, rest)) return Result::fail(std::move(*why));
  RedisTarget t;
  // The last '@' ends the user information, so that a password may hold a raw '@' or '/'.
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    if (auto why = read_userinfo(text, rest.substr(0, at), t)) return Result::fail(*why);
    rest = rest.substr(at + 1);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return fail(text,
                "a query or fragment ('?', '#') is not read; remove it (the timeouts are the "
                "keys connect_timeout and command_timeout)");
  }
  const size_t slash = rest.find('/');
  if (auto why = read_host_port(text, rest.substr(0, slash), t)) return Result::fail(*why);
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    const auto db = parse_digits(rest.substr(slash + 1), static_cast<uint64_t>(kMaxRedisDb));
    if (!db) {
      return fail(text, "the database after the '/' must be a number from 0 to " +
                            std::to_string(kMaxRedisDb) + " (0 when left out)");
    }
    t.db = static_cast<uint32_t>(*db);
  }
  return Result::ok(std::move(t));
}

Parsed<std::string> resolve_redis_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
#ifdef FLOODGATE_FUZZING
  hints.ai_flags = AI_NUMERICHOST;  // a fuzz input never makes a DNS query
#endif
  addrinfo* raw = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &raw);
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(raw, &::freeaddrinfo);
  if (rc != 0 || list == nullptr) {
    const std::string why = rc != 0 ? ::gai_strerror(rc) : "no address";
    return Parsed<std::string>::fail("cannot resolve '" + host + "' (" + why + ")");
  }
  std::array<char, NI_MAXHOST> name{};
  if (::getnameinfo(list->ai_addr, list->ai_addrlen, name.data(), name.size(), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return Parsed<std::string>::fail("cannot resolve '" + host + "' (no numeric address)");
  }
  return Parsed<std::string>::ok(std::string(name.data()));
}

}  // namespace floodgate::config::detail
