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
class ConnectionTokens {
 public:
  explicit ConnectionTokens(const Parser& head) : head_(head) {
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

  const Parser& head_;
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

Reason inspect_target(const Parser& head, RequestFacts& facts, bool& absolute) {
  const std::string_view target = head.target();
  absolute = false;
  if (!target.empty() && target.front() == '/') {
    facts.path = target;
    return Reason::none;
  }
  if (target == "*" && head.method() == HTTP_OPTIONS) {
    facts.path = target;
    return Reason::none;
  }
  if (split_absolute(target, facts.host, facts.path)) {
    absolute = true;
    return Reason::none;
  }
  return Reason::bad_request;
}

}  // namespace

Reason inspect_request(const Parser& head, RequestFacts& facts) {
  facts = RequestFacts{};
  if (head.http_major() != 1 || head.http_minor() > 1) return Reason::bad_request;
  if (head.method() == HTTP_CONNECT) return Reason::bad_request;
  bool absolute = false;
  if (inspect_target(head, facts, absolute) != Reason::none) return Reason::bad_request;
  int hosts = 0, codings = 0;
  bool upgrade_field = false;
  bool connection_upgrade = false;
  for (uint32_t i = 0; i < head.field_count(); ++i) {
    const std::string_view value = head.field_value(i);
    switch (head.field_kind(i)) {
      case Field::host:
        if (++hosts == 1 && !absolute) facts.host = ascii::trim(value);
        break;
      case Field::transfer_encoding:
        // Only "chunked" alone is forwarded faithfully; anything else is refused rather than
        // guessed at (request smuggling).
        if (++codings > 1 || !iequals(ascii::trim(value), "chunked")) return Reason::bad_request;
        break;
      case Field::upgrade:
        upgrade_field = true;
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
        if (facts.request_id.empty()) facts.request_id = ascii::trim(value);
        break;
      default:
        break;
    }
  }
  // RFC 9112 section 3.2: an HTTP/1.1 request without Host is refused even in absolute-form.
  if (hosts > 1 || (hosts == 0 && head.http_minor() == 1)) return Reason::bad_request;
  facts.upgrade = upgrade_field && connection_upgrade;
  facts.keep_alive = head.keep_alive();
  facts.has_body = head.chunked() || head.content_length() > 0;
  return Reason::none;
}

bool write_request_head(const Parser& head, const RequestFacts& facts, const ForwardInfo& fwd,
                        Writer& out) {
  const ConnectionTokens named(head);
  out.put(head.method_name()).put(" ").put(facts.path).put(" HTTP/1.1\r\n");
  out.header("Host", facts.host);
  std::string_view upgrade_value;
  const bool have_xff = head.has(bit(Field::x_forwarded_for));
  const bool have_via = head.has(bit(Field::via));
  for (uint32_t i = 0; i < head.field_count(); ++i) {
    const Field f = head.field_kind(i);
    if (f == Field::upgrade && upgrade_value.empty()) upgrade_value = head.field_value(i);
    if (f != Field::other && f != Field::content_length) continue;
    const std::string_view name = head.field_name(i);
    // Content-Length frames the body we forward: never hop-by-hop, whatever Connection says.
    if (f == Field::other && named.names(name)) continue;
    out.put(name).put(": ").put(head.field_value(i)).put("\r\n");
  }
  // Append to the existing chains: every X-Forwarded-For / Via value in order, then ours.
  out.put("X-Forwarded-For: ");
  for (uint32_t i = 0; have_xff && i < head.field_count(); ++i) {
    if (head.field_kind(i) == Field::x_forwarded_for) out.put(head.field_value(i)).put(", ");
  }
  out.put(fwd.client_ip).put("\r\n");
  out.put("X-Forwarded-Proto: http\r\n");
  if (!facts.host.empty()) out.header("X-Forwarded-Host", facts.host);
  out.put("Via: ");
  for (uint32_t i = 0; have_via && i < head.field_count(); ++i) {
    if (head.field_kind(i) == Field::via) out.put(head.field_value(i)).put(", ");
  }
  out.put("1.1 floodgate\r\n");
  out.header("X-Request-Id", fwd.request_id);
  if (head.chunked()) out.put("Transfer-Encoding: chunked\r\n");
  if (facts.upgrade) out.put("Connection: upgrade\r\n").header("Upgrade", upgrade_value);
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
  out.put("HTTP/1.1 ").dec(static_cast<uint64_t>(response.status())).put(" ");
  out.put(response.status_text()).put("\r\n");
  for (uint32_t i = 0; i < response.field_count(); ++i) {
    const std::string_view name = response.field_name(i);
    const Field f = response.field_kind(i);
    if (hop_by_hop(f) && !(switching && f == Field::upgrade)) continue;
    if (named.names(name) && !(switching && f == Field::upgrade) && f != Field::content_length) {
      continue;  // Content-Length frames a length plan's body: never hop-by-hop
    }
    out.put(name).put(": ").put(response.field_value(i)).put("\r\n");
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

std::string build_generated_response(Reason reason, bool close, uint32_t retry_after_seconds) {
  const ReasonInfo& ri = info(reason);
  const std::string body = std::string(ri.name) + ": " + std::string(ri.body) + "\n";
  std::string s = "HTTP/1.1 " + std::to_string(ri.status) + " " + std::string(ri.phrase) + "\r\n";
  s += "Content-Type: text/plain; charset=utf-8\r\n";
  s += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (retry_after_seconds != 0) s += "Retry-After: " + std::to_string(retry_after_seconds) + "\r\n";
  s += "X-Floodgate-Reason: " + std::string(ri.name) + "\r\n";
  s += close ? "Connection: close\r\n\r\n" : "\r\n";
  s += body;
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
