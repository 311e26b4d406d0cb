#include "floodgate/http/rewrite.h"

#include <array>
#include <string>

#include "floodgate/core/ascii.h"
#include "floodgate/http/field.h"

namespace floodgate::http {
namespace {

using ascii::iequals;

bool hop_by_hop(Field f) {
  return f == Field::connection || f == Field::keep_alive || f == Field::proxy_connection ||
         f == Field::te || f == Field::trailer || f == Field::transfer_encoding ||
         f == Field::upgrade;
}

// The field names listed in Connection headers (RFC 9110 section 7.6.1). The first 16 are
// kept at hand; a head naming more (rare) has its Connection fields searched again.
template <class Head>  // a RequestHead, or a response's Parser
class ConnectionTokens {
 public:
  explicit ConnectionTokens(const Head& head) : head_(head) {
    if (!head.has(bit(Field::connection))) return;
    for (uint32_t i = 0; i < head.field_count(); ++i) {
      if (head.field_kind(i) != Field::connection) continue;
      ascii::for_each_token(head.field_value(i), [this](std::string_view t) {
        if (iequals(t, "upgrade")) upgrade_ = true;
        if (n_ < tokens_.size()) {
          tokens_[n_++] = t;
        } else {
          overflow_ = true;
        }
      });
    }
  }
  bool names(std::string_view field) const {
    for (std::size_t i = 0; i < n_; ++i) {
      if (iequals(tokens_[i], field)) return true;
    }
    return overflow_ && search(field);
  }
  bool upgrade() const { return upgrade_; }

 private:
  bool search(std::string_view field) const {
    bool found = false;
    for (uint32_t i = 0; i < head_.field_count() && !found; ++i) {
      if (head_.field_kind(i) != Field::connection) continue;
      ascii::for_each_token(head_.field_value(i),
                            [&](std::string_view t) { found = found || iequals(t, field); });
    }
    return found;
  }

  const Head& head_;
  std::array<std::string_view, 16> tokens_{};
  std::size_t n_ = 0;
  bool overflow_ = false;
  bool upgrade_ = false;
};

// Splits an absolute-form target ("http://authority/path?q") into authority and origin-form.
bool split_absolute(std::string_view target, std::string_view& authority, std::string_view& path) {
  std::size_t scheme_len;
  if (target.size() >= 7 && iequals(target.substr(0, 7), "http://")) {
    scheme_len = 7;
  } else if (target.size() >= 8 && iequals(target.substr(0, 8), "https://")) {
    scheme_len = 8;
  } else {
    return false;
  }
  std::string_view rest = target.substr(scheme_len);
  const std::size_t slash = rest.find_first_of("/?");
  authority = rest.substr(0, slash);
  if (authority.empty()) return false;
  path = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
  if (!path.empty() && path.front() == '?') return false;  // "http://h?q" is not origin-form
  return true;
}

Reason inspect_target(const RequestHead& head, RequestFacts& facts, bool& absolute) {
  const std::string_view target = head.target;
  absolute = false;
  // A request-target has no fragment (RFC 9112 section 3.2): clients strip it. One that arrives
  // is refused rather than stripped, so that floodgate and the backend never see two targets.
  if (target.find('#') != std::string_view::npos) return Reason::bad_request;
  if (!target.empty() && target.front() == '/') {
    facts.path = target;
    return Reason::none;
  }
  if (target == "*" && head.method == HTTP_OPTIONS) {
    facts.path = target;
    facts.asterisk = true;
    return Reason::none;
  }
  if (split_absolute(target, facts.host, facts.path) && valid_authority(facts.host)) {
    absolute = true;
    return Reason::none;
  }
  return Reason::bad_request;
}

// The characters of a reg-name floodgate accepts (unreserved), as a table: Host is checked on
// every request.
constexpr std::array<bool, 256> kHostChars = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[static_cast<std::size_t>(c)] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                     (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                     c == '~';
  }
  return t;
}();

bool is_host_char(char c) {
  return kHostChars[static_cast<unsigned char>(c)];
}

bool is_ipv6_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

// port = *DIGIT (RFC 3986 section 3.2.3), at most 65535; empty is allowed (no port).
bool valid_port(std::string_view port) {
  uint32_t value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
    if (value > 65535) return false;
  }
  return true;
}

// An HTTP/2 protocol in an Upgrade offer: "h2c", "h2" (never valid in cleartext, refused
// alike) or "HTTP/2..." (RFC 9110 section 7.8 protocol-name "/" protocol-version).
bool is_http2_token(std::string_view t) {
  return iequals(t, "h2c") || iequals(t, "h2") ||
         (t.size() >= 6 && iequals(t.substr(0, 6), "HTTP/2"));
}

// A client X-Request-Id is adopted only when it is short and visible ASCII: it is forwarded
// and logged as is.
bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (const char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e) return false;
  }
  return true;
}

constexpr std::string_view kHttp2Settings = "HTTP2-Settings";

}  // namespace

Reason inspect_request(const RequestHead& head, RequestFacts& facts) {
  facts = RequestFacts{};
  const bool h2 = head.h2;
  if (h2 ? head.version_major != 2 : head.version_major != 1 || head.version_minor > 1) {
    return Reason::bad_request;
  }
  bool absolute = false;
  if (head.method == HTTP_CONNECT) {
    // authority-form (RFC 9112 section 3.2.3): host ":" port, nothing else.
    const std::string_view target = head.target;
    const std::size_t colon = target.rfind(':');
    if (!valid_authority(target) || colon == std::string_view::npos || colon + 1 == target.size() ||
        target.back() == ']') {
      return Reason::bad_request;
    }
    facts.connect = true;
    facts.authority = facts.host = target;
    absolute = true;  // the target names the host, not Host
  } else if (inspect_target(head, facts, absolute) != Reason::none) {
    return Reason::bad_request;
  }
  if (absolute && !facts.connect) facts.authority = facts.host;
  const bool options = head.method == HTTP_OPTIONS;
  int hosts = 0, codings = 0, request_ids = 0;
  bool connection_upgrade = false;
  for (uint32_t i = 0; i < head.field_count(); ++i) {
    const std::string_view value = head.field_value(i);
    switch (head.field_kind(i)) {
      case Field::host:
        // Checked even when an absolute-form authority replaces it. Empty is allowed (RFC 9110
        // section 7.2); it then matches only "*" routes.
        if (++hosts > 1 || (!ascii::trim(value).empty() && !valid_authority(ascii::trim(value)))) {
          return Reason::bad_request;
        }
        facts.host_header = ascii::trim(value);
        if (!absolute) facts.host = facts.host_header;
        break;
      case Field::transfer_encoding:
        // Only "chunked" alone is forwarded faithfully; anything else is refused rather than
        // guessed at (request smuggling). HTTP/1.0 has no transfer codings (RFC 9112 section
        // 6.1): its message would be framed one way here and another way by an HTTP/1.0 peer.
        if (++codings > 1 || head.version_minor == 0 || !iequals(ascii::trim(value), "chunked")) {
          return Reason::bad_request;
        }
        break;
      case Field::upgrade:
        ascii::for_each_token(value, [&](std::string_view t) {
          (is_http2_token(t) ? facts.offers_h2c : facts.offers_other) = true;
        });
        break;
      case Field::connection:
        ascii::for_each_token(value, [&](std::string_view t) {
          if (iequals(t, "upgrade")) connection_upgrade = true;
        });
        break;
      case Field::expect:
        if (iequals(ascii::trim(value), "100-continue")) facts.expect_continue = true;
        break;
      case Field::x_request_id:
        // The first one decides; one floodgate cannot adopt is replaced by a generated id.
        if (++request_ids == 1 && acceptable_request_id(ascii::trim(value))) {
          facts.request_id = ascii::trim(value);
        }
        break;
      case Field::other:
        if (options) {  // a CORS preflight is OPTIONS with both (resilience.inflight exempts it)
          const std::string_view name = head.field_name(i);
          if (iequals(name, "origin")) facts.origin = true;
          if (iequals(name, "access-control-request-method")) facts.cors_request_method = true;
        }
        break;
      default:
        break;
    }
  }
  if (h2 && !facts.connect) {
    // HTTP/2's :authority is what Host says on HTTP/1.1 (RFC 9113 section 8.3.1), and
    // replaces it: a Host field naming another host makes the request malformed. Without
    // either there is no host to route on.
    const std::string_view authority = head.authority;
    if (!authority.empty()) {
      if (!valid_authority(authority) || (hosts > 0 && !iequals(facts.host_header, authority))) {
        return Reason::bad_request;
      }
      facts.host = facts.host_header = authority;
    } else if (hosts == 0) {
      return Reason::bad_request;
    }
  }
  // RFC 9112 section 3.2: an HTTP/1.1 request without Host is refused even in absolute-form.
  if (hosts == 0 && head.version_major == 1 && head.version_minor == 1) {
    return Reason::bad_request;
  }
  if (!connection_upgrade) facts.offers_h2c = facts.offers_other = false;
  facts.upgrade = facts.offers_other;  // h2c only once a route allows it (apply_h2c_policy)
  facts.keep_alive = head.keep_alive;
  facts.has_body = head.chunked() || head.content_length > 0 || head.body == BodyFraming::stream;
  return Reason::none;
}

namespace {

// The Upgrade field the backend receives: the client's offer in order, without the HTTP/2
// tokens unless the route forwards them.
void write_upgrade(const RequestHead& head, const RequestFacts& facts, Writer& out) {
  const bool h2c = facts.offers_h2c && facts.allow_h2c;
  out.put(h2c ? "Connection: upgrade, HTTP2-Settings\r\nUpgrade: "
              : "Connection: upgrade\r\nUpgrade: ");
  const char* separator = "";
  for (uint32_t i = 0; i < head.field_count(); ++i) {
    if (head.field_kind(i) != Field::upgrade) continue;
    ascii::for_each_token(head.field_value(i), [&](std::string_view t) {
      if (!h2c && is_http2_token(t)) return;
      out.put(separator).put(t);
      separator = ", ";
    });
  }
  out.put("\r\n");
}

}  // namespace

bool valid_authority(std::string_view a) {
  std::size_t i = 0;
  if (!a.empty() && a.front() == '[') {  // IP-literal: IPv6 only (no IPvFuture, no zone)
    const std::size_t close = a.find(']');
    if (close == std::string_view::npos || close < 3) return false;
    const std::string_view literal = a.substr(1, close - 1);
    if (literal.find(':') == std::string_view::npos) return false;
    for (const char c : literal) {
      if (!is_ipv6_char(c)) return false;
    }
    i = close + 1;
  } else {
    while (i < a.size() && is_host_char(a[i])) ++i;
    if (i == 0) return false;  // no host before the port
  }
  if (i == a.size()) return true;
  return a[i] == ':' && valid_port(a.substr(i + 1));
}

void apply_h2c_policy(RequestFacts& facts, bool allow) {
  facts.allow_h2c = allow;
  facts.upgrade = facts.offers_other || (facts.offers_h2c && allow);
  // The parser took the head as an upgrade request and reads nothing after it: the client
  // connection closes after the response, as after an upgrade the backend declined.
  if (facts.offers_h2c && !facts.upgrade) facts.keep_alive = false;
}

std::string_view options_response(bool close) {
  static constexpr std::string_view kKeep =
      "HTTP/1.1 200 OK\r\nAllow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\n"
      "Content-Length: 0\r\n\r\n";
  static constexpr std::string_view kClose =
      "HTTP/1.1 200 OK\r\nAllow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\n"
      "Content-Length: 0\r\nConnection: close\r\n\r\n";
  return close ? kClose : kKeep;
}

bool write_request_head(const RequestHead& head, const RequestFacts& facts, const ForwardInfo& fwd,
                        Writer& out) {
  const ConnectionTokens named(head);
  out.put(head.method_name).put(" ").put(facts.path).put(" HTTP/1.1\r\n");
  // A request without a Host (HTTP/1.0) or with an empty one still names a host to the backend.
  out.header("Host", facts.host.empty() ? fwd.backend_host : facts.host);
  const bool have_xff = head.has(bit(Field::x_forwarded_for));
  const bool have_via = head.has(bit(Field::via));
  // HTTP2-Settings belongs to an h2c upgrade: forwarded with one, dropped otherwise.
  const bool h2c = facts.upgrade && facts.offers_h2c && facts.allow_h2c;
  for (uint32_t i = 0; i < head.field_count(); ++i) {
    const Field f = head.field_kind(i);
    if (f != Field::other && f != Field::content_length) continue;
    const std::string_view name = head.field_name(i);
    const bool settings = f == Field::other && iequals(name, kHttp2Settings);
    // Content-Length frames the body we forward: never hop-by-hop, whatever Connection says.
    if (settings ? !h2c : f == Field::other && named.names(name)) continue;
    // A request that came in early data says so with floodgate's own Early-Data: 1 (RFC 8470
    // section 5.1): the client's field, whatever its value ("0" too), is not passed on then.
    if (fwd.early_data && f == Field::other && iequals(name, "Early-Data")) continue;
    out.header(name, head.field_value(i));
  }
  // Append to the existing chains: every X-Forwarded-For / Via value in order, then ours.
  out.put("X-Forwarded-For: ");
  for (uint32_t i = 0; have_xff && i < head.field_count(); ++i) {
    if (head.field_kind(i) == Field::x_forwarded_for) out.put(head.field_value(i)).put(", ");
  }
  out.put(fwd.client_ip).put("\r\n");
  out.put(fwd.https ? "X-Forwarded-Proto: https\r\n" : "X-Forwarded-Proto: http\r\n");
  if (fwd.early_data) out.put("Early-Data: 1\r\n");
  if (!facts.host.empty()) out.header("X-Forwarded-Host", facts.host);
  out.put("Via: ");
  for (uint32_t i = 0; have_via && i < head.field_count(); ++i) {
    if (head.field_kind(i) == Field::via) out.put(head.field_value(i)).put(", ");
  }
  out.put("1.1 floodgate\r\n");
  out.header("X-Request-Id", fwd.request_id);
  // An HTTP/2 body of no declared length (DATA frames up to END_STREAM) is re-chunked.
  if (head.chunked() || head.body == BodyFraming::stream) {
    out.put("Transfer-Encoding: chunked\r\n");
  }
  if (facts.upgrade) write_upgrade(head, facts, out);
  out.put("\r\n");
  return out.ok();
}

ResponsePlan plan_response(const Parser& response, bool head_request, int client_minor,
                           bool client_keep_alive) {
  const int status = response.status();
  ResponsePlan plan;
  if (status < 200) return plan;  // interim (1xx) or 101: no body, connection unchanged
  plan.close_client = !client_keep_alive;
  if (head_request || status == 204 || status == 304) return plan;
  if (response.has_content_length()) {
    plan.framing = Framing::length;
  } else if (client_minor >= 1) {
    plan.framing = Framing::chunked;
  } else {
    plan.framing = Framing::close;
    plan.close_client = true;
  }
  return plan;
}

bool write_response_head(const Parser& response, const ResponsePlan& plan, int client_minor,
                         Writer& out) {
  const ConnectionTokens named(response);
  const bool switching = response.status() == 101;
  // RFC 9110 section 8.6: no Content-Length in a 1xx or 204 response (a 304's may stay: it
  // gives the selected representation's length).
  const bool no_length = response.status() < 200 || response.status() == 204;
  out.put("HTTP/1.1 ").dec(static_cast<uint64_t>(response.status())).put(" ");
  out.put(response.status_text()).put("\r\n");
  for (uint32_t i = 0; i < response.field_count(); ++i) {
    const std::string_view name = response.field_name(i);
    const Field f = response.field_kind(i);
    if (hop_by_hop(f) && !(switching && f == Field::upgrade)) continue;
    if (no_length && f == Field::content_length) continue;
    if (named.names(name) && !(switching && f == Field::upgrade) && f != Field::content_length) {
      continue;  // Content-Length frames a length plan's body: never hop-by-hop
    }
    out.header(name, response.field_value(i));
  }
  if (switching) {
    out.put("Connection: upgrade\r\n");
  } else if (plan.framing == Framing::chunked) {
    out.put("Transfer-Encoding: chunked\r\n");
  }
  if (response.status() >= 200) {
    if (plan.close_client) {
      out.put("Connection: close\r\n");
    } else if (client_minor == 0) {
      out.put("Connection: keep-alive\r\n");
    }
  }
  out.put("\r\n");
  return out.ok();
}

int h2_response_fields(const Parser& response, h2::ResponseField* out, std::size_t max, char* names,
                       std::size_t names_capacity) {
  const ConnectionTokens named(response);
  const bool no_length = response.status() < 200 || response.status() == 204;
  std::size_t n = 0;
  std::size_t used = 0;
  for (uint32_t i = 0; i < response.field_count(); ++i) {
    const Field f = response.field_kind(i);
    if (hop_by_hop(f) || (no_length && f == Field::content_length)) continue;
    const std::string_view name = response.field_name(i);
    if (f != Field::content_length && named.names(name)) continue;
    if (n == max || name.size() > names_capacity - used) return -1;
    char* const lower = names + used;
    for (std::size_t k = 0; k < name.size(); ++k) lower[k] = ascii::lower(name[k]);
    used += name.size();
    out[n++] = {{lower, name.size()}, response.field_value(i)};
  }
  return static_cast<int>(n);
}

namespace {

// The status line phrase floodgate uses for `status`: the first reason that answers with it.
std::string_view phrase_of(int status) {
  for (const ReasonInfo& ri : kReasons) {
    if (ri.status == status) return ri.phrase;
  }
  return {};
}

}  // namespace

bool write_generated_response(const GeneratedResponseParams& p, Writer& out) {
  const ReasonInfo& ri = info(p.reason);
  const bool own_status = p.status == 0 || p.status == ri.status;
  const int status = own_status ? ri.status : p.status;
  const std::string_view phrase = own_status ? ri.phrase : phrase_of(status);
  out.put("HTTP/1.1 ").dec(static_cast<uint64_t>(status)).put(" ").put(phrase).put("\r\n");
  out.put(p.extra_headers);
  out.put("Content-Type: text/plain; charset=utf-8\r\n");
  // The body: "<name>: <text>\n".
  out.put("Content-Length: ").dec(ri.name.size() + 2 + ri.body.size() + 1).put("\r\n");
  if (p.retry_after_seconds != 0) out.put("Retry-After: ").dec(p.retry_after_seconds).put("\r\n");
  out.header("X-Floodgate-Reason", ri.name);
  out.put(p.close ? "Connection: close\r\n\r\n" : "\r\n");
  out.put(ri.name).put(": ").put(ri.body).put("\n");
  return out.ok();
}

std::string build_generated_response(const GeneratedResponseParams& p) {
  std::string s(kGeneratedResponseMax + p.extra_headers.size(), '\0');
  Writer w(s.data(), s.size());
  write_generated_response(p, w);  // always fits: kGeneratedResponseMax bounds the rest
  s.resize(w.size());
  return s;
}

std::string_view generated_response(Reason reason, bool close) {
  static const std::array<std::string, 2 * kReasonCount> table = [] {
    std::array<std::string, 2 * kReasonCount> t;
    for (std::size_t r = 1; r < kReasonCount; ++r) {
      for (int c = 0; c < 2; ++c) {
        t[2 * r + static_cast<std::size_t>(c)] =
            build_generated_response(static_cast<Reason>(r), c == 1, 0);
      }
    }
    return t;
  }();
  return table[2 * static_cast<std::size_t>(reason) + (close ? 1 : 0)];
}

}  // namespace floodgate::http
