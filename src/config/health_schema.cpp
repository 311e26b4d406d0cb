#include "health_schema.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "values.h"

namespace floodgate::config::detail {
namespace {

using Text = Parsed<std::string>;

// The path goes on the probe's request line, the host in its Host header: both stay far below
// what any server accepts (request lines of 8 KiB; a DNS name is at most 253 bytes).
constexpr size_t kMaxPathBytes = 2048;
constexpr size_t kMaxHostBytes = 255;
// 1000 probes take over half an hour at the default interval of 2s: a longer streak would
// leave a server in its state long after it changed.
constexpr int64_t kMaxStreak = 1000;
// Below 64 bytes not even "HTTP/1.1 200 OK" and a few short headers fit; above 1 MiB a probe
// would buffer more per server than any health endpoint has reason to send.
constexpr int64_t kMinHeadBytes = 64;
constexpr int64_t kMaxHeadBytes = 1'048'576;

constexpr std::string_view kStatusForms =
    R"(write a code ("200"), a range ("200-399") or a comma-separated list of both )"
    R"(("200,204,300-399"))";

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Bytes that cannot go on a request line or in a header value unencoded.
bool is_space_control_or_non_ascii(char c) {
  const auto b = static_cast<unsigned char>(c);
  return b <= 0x20 || b >= 0x7f;
}

bool has_bad_byte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), is_space_control_or_non_ascii);
}

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

Text parse_probe_path(std::string_view text) {
  if (text.size() > kMaxPathBytes) {
    return Text::fail("the path is " + std::to_string(text.size()) + " bytes long; use at most " +
                      std::to_string(kMaxPathBytes) + " (it goes on the probe's request line)");
  }
  if (!text.starts_with('/')) {
    const std::string example = text.empty() || text.find("://") != std::string_view::npos
                                    ? "/healthz"
                                    : std::string("/").append(text);
    return Text::fail(quoted(text) + " must start with \"/\" (the probe sends only the path); " +
                      "e.g. path = " + quoted(example));
  }
  if (has_bad_byte(text)) {
    return Text::fail(quoted(text) +
                      " contains a space, a control character or a non-ASCII byte, which cannot " +
                      "go on the probe's request line; percent-encode it (a space is %20)");
  }
  return Text::ok(std::string(text));
}

// 1..65535, in decimal digits only.
bool is_port(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
    return false;
  }
  int value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value >= 1 && value <= 65535;
}

bool is_ipv6(std::string_view s) {
  std::array<unsigned char, sizeof(in6_addr)> buf{};
  return inet_pton(AF_INET6, std::string(s).c_str(), buf.data()) == 1;
}

// Why `text`, already free of bad bytes and '/', is not host[:port]; "" when it is.
std::string host_error(std::string_view text) {
  std::string_view rest;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return "the ']' after the IPv6 address is missing";
    }
    if (!is_ipv6(text.substr(1, close - 1))) {
      return std::string("'").append(text.substr(1, close - 1)) + "' is not an IPv6 address";
    }
    rest = text.substr(close + 1);
  } else {
    const size_t colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
    if (rest.find(':', 1) != std::string_view::npos) {
      return "IPv6 addresses need brackets, e.g. \"[::1]:8080\"";
    }
    if (!is_hostname(name)) {
      return "use a name of dot-separated labels of letters, digits and '-', or an IP address, "
             "with an optional port, e.g. \"app.internal:8080\"";
    }
  }
  if (!rest.empty() && (rest.front() != ':' || !is_port(rest.substr(1)))) {
    return "the port must follow a ':' and be a number from 1 to 65535";
  }
  return {};
}

Text parse_probe_host(std::string_view text) {
  if (text.size() > kMaxHostBytes) {
    return Text::fail("the host is " + std::to_string(text.size()) + " bytes long; use at most " +
                      std::to_string(kMaxHostBytes) + ", or \"\" for the server's address");
  }
  std::string why;
  if (has_bad_byte(text)) {
    why =
        "it contains a space, a control character or a non-ASCII byte, which cannot go in a "
        "Host header";
  } else if (text.find('/') != std::string_view::npos) {
    why = "write only host[:port], without a scheme or a path, e.g. \"app.internal\"";
  } else if (!text.empty()) {
    why = host_error(text);
  }
  if (!why.empty()) {
    return Text::fail(quoted(text) + " is not a valid probe host: " + why);
  }
  return Text::ok(std::string(text));
}

// One code of three digits in 100..599; `why` says otherwise.
std::optional<int> parse_status(std::string_view code, std::string_view item, std::string& why) {
  if (code.empty() || !std::all_of(code.begin(), code.end(), is_digit)) {
    why = std::string("'").append(item) + "' is not a status code or a range of them; " +
          std::string(kStatusForms);
    return std::nullopt;
  }
  const int value =
      code.size() == 3 ? (code[0] - '0') * 100 + (code[1] - '0') * 10 + code[2] - '0' : 0;
  if (value < 100 || value > 599) {
    why = std::string(code) + " is not an HTTP status code; use codes from 100 to 599";
    return std::nullopt;
  }
  return value;
}

// "200" or "200-399"; `why` says otherwise.
std::optional<StatusRange> parse_status_item(std::string_view item, std::string& why) {
  const size_t dash = item.find('-');
  const auto lo = parse_status(item.substr(0, dash), item, why);
  if (!lo || dash == std::string_view::npos) {
    return lo ? std::optional(StatusRange{*lo, *lo}) : std::nullopt;
  }
  const auto hi = parse_status(item.substr(dash + 1), item, why);
  if (!hi) {
    return std::nullopt;
  }
  if (*lo > *hi) {
    why = "the range " + std::string(item) + " is backwards; write the lower code first, \"" +
          std::to_string(*hi) + "-" + std::to_string(*lo) + "\"";
    return std::nullopt;
  }
  return StatusRange{*lo, *hi};
}

Parsed<std::vector<StatusRange>> parse_expect_status(std::string_view text) {
  using P = Parsed<std::vector<StatusRange>>;
  const auto fail = [&](const std::string& why) {
    return P::fail(quoted(text) + " is not a valid expect_status: " + why);
  };
  if (trim(text).empty()) {
    return fail("it is empty; " + std::string(kStatusForms));
  }
  std::vector<StatusRange> ranges;
  std::string why;
  for (size_t start = 0, n = 1; start <= text.size(); ++n) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = trim(text.substr(start, comma - start));
    if (item.empty()) {
      return fail("item " + std::to_string(n) + " is empty; " + std::string(kStatusForms));
    }
    const auto range = parse_status_item(item, why);
    if (!range) {
      return fail(why);
    }
    ranges.push_back(*range);
    start = comma + 1;
  }
  return P::ok(std::move(ranges));
}

// A string as above, or an integer for a single code (`expect_status = 200`).
bool read_expect_status(TableReader& r, std::vector<StatusRange>& out) {
  constexpr std::string_view kKey = "expect_status";
  const toml::node* n = r.find(kKey);
  if (!n) {
    return true;
  }
  if (const auto* code = n->as_integer()) {
    const int64_t v = code->get();
    if (v < 100 || v > 599) {
      r.error(kKey, std::to_string(v) +
                        " is not an HTTP status code; use codes from 100 to 599, e.g. " +
                        "expect_status = 200");
      return false;
    }
    out = {StatusRange{static_cast<int>(v), static_cast<int>(v)}};
    return true;
  }
  const auto* s = n->as_string();
  if (!s) {
    type_error(r.out(), r.position(kKey), r.path(kKey),
               "a status code or a string of codes and ranges", *n,
               R"(expect_status = "200,204,300-399")");
    return false;
  }
  auto parsed = parse_expect_status(s->get());
  if (!parsed.value) {
    r.error(kKey, std::move(parsed.error));
    return false;
  }
  out = std::move(*parsed.value);
  return true;
}

// Like TableReader::integer, with a message that says why the bounds are where they are.
bool read_head_bytes(TableReader& r, uint32_t& out) {
  constexpr std::string_view kKey = "max_response_header_bytes";
  const toml::node* n = r.peek(kKey);
  const auto* v = n ? n->as_integer() : nullptr;
  if (v && (v->get() < kMinHeadBytes || v->get() > kMaxHeadBytes)) {
    r.find(kKey);
    r.error(kKey, std::to_string(v->get()) + " is out of range; use an integer from " +
                      std::to_string(kMinHeadBytes) + " (room for a status line and a few " +
                      "headers) to " + std::to_string(kMaxHeadBytes) +
                      " (a bound on what a probe reads from a server)");
    return false;
  }
  return r.integer(kKey, kMinHeadBytes, kMaxHeadBytes, out);
}

// Rules between the keys of one [upstreams.health]; `*_ok` as in check_resilience: a value
// that had an error keeps its default, which is not what the operator wrote.
void check_health(TableReader& r, const HealthParams& p, bool interval_ok, bool timeout_ok) {
  if (interval_ok && timeout_ok && p.interval < p.timeout) {
    const std::string timeout = quoted(format_duration(p.timeout));
    r.warning("interval", "interval = " + quoted(format_duration(p.interval)) +
                              " is shorter than timeout = " + timeout +
                              ", but probes never overlap: a server whose probe is still " +
                              "running when its interval comes is skipped that round, so it is " +
                              "probed at most once every " + timeout + "; set interval to at " +
                              "least " + timeout + " or lower timeout");
  }
}

}  // namespace

void read_health(TableReader& r, HealthParams& p) {
  r.text("path", R"(path = "/healthz")", parse_probe_path, p.path);
  r.text("host", R"(host = "app.internal")", parse_probe_host, p.host);
  const bool interval_ok = r.duration("interval", Zero::rejected, p.interval);
  const bool timeout_ok = r.duration("timeout", Zero::rejected, p.timeout);
  r.integer("fall", 1, kMaxStreak, p.fall);
  r.integer("rise", 1, kMaxStreak, p.rise);
  read_expect_status(r, p.expect_status);
  read_head_bytes(r, p.max_response_header_bytes);
  check_health(r, p, interval_ok, timeout_ok);
}

}  // namespace floodgate::config::detail
