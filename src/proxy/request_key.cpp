#include "floodgate/proxy/request_key.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "floodgate/core/ascii.h"

namespace floodgate::proxy {

namespace {

using Kind = resilience::KeySource::Kind;

// Splits `s` at the first `sep`: returns what precedes it and leaves the rest in `s` (empty
// when there is no `sep`).
std::string_view next_piece(std::string_view& s, char sep) noexcept {
  const std::size_t at = s.find(sep);
  const std::string_view piece = s.substr(0, at);
  s = at == std::string_view::npos ? std::string_view{} : s.substr(at + 1);
  return piece;
}

// The value of the first field named `name` (case-insensitive), trimmed; nullptr-safe.
std::string_view first_field(const http::Parser* head, std::string_view name) noexcept {
  if (head == nullptr) return {};
  for (uint32_t i = 0; i < head->field_count(); ++i) {
    if (ascii::iequals(head->field_name(i), name)) return ascii::trim(head->field_value(i));
  }
  return {};
}

// The first cookie named `name` in one Cookie field's value; `found` says whether there was one
// (an empty cookie ends the search too: the first of that name answers).
std::string_view cookie_in(std::string_view list, std::string_view name, bool& found) noexcept {
  while (!list.empty()) {
    std::string_view pair = next_piece(list, ';');
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || ascii::trim(pair.substr(0, eq)) != name) continue;
    found = true;
    std::string_view value = ascii::trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return {};
}

std::string_view cookie(const http::Parser* head, std::string_view name) noexcept {
  if (head == nullptr || name.empty()) return {};
  for (uint32_t i = 0; i < head->field_count(); ++i) {
    if (!ascii::iequals(head->field_name(i), "cookie")) continue;
    bool found = false;
    const std::string_view value = cookie_in(head->field_value(i), name, found);
    if (found) return value;
  }
  return {};
}

std::string_view query(std::string_view target, std::string_view name) noexcept {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos || name.empty()) return {};
  std::string_view rest = target.substr(q + 1);
  rest = rest.substr(0, rest.find('#'));
  while (!rest.empty()) {
    std::string_view param = next_piece(rest, '&');
    if (next_piece(param, '=') == name) return param;  // `param` is now the value
  }
  return {};
}

std::string_view bearer_token(const http::Parser* head) noexcept {
  std::string_view credentials = first_field(head, "authorization");
  const std::string_view scheme = next_piece(credentials, ' ');
  if (!ascii::iequals(scheme, "bearer")) return {};
  return ascii::trim(credentials);
}

// `a` in its canonical text form, into `out`; empty when it does not fit (it always does).
std::string_view canonical(const IpAddress& a, std::span<char, kKeyScratch> out) noexcept {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool v4 = std::memcmp(a.bytes.data(), kMapped, sizeof(kMapped)) == 0;
  const void* src = v4 ? a.bytes.data() + sizeof(kMapped) : a.bytes.data();
  if (::inet_ntop(v4 ? AF_INET : AF_INET6, src, out.data(), out.size()) == nullptr) return {};
  return {out.data()};
}

bool trusted(const KeyContext& c) noexcept {
  if (c.peer == nullptr || c.trusted_proxies == nullptr) return false;
  return std::any_of(c.trusted_proxies->begin(), c.trusted_proxies->end(),
                     [&c](const IpRange& r) { return r.contains(*c.peer); });
}

// The left-most address of the first X-Forwarded-For field, when it is one.
std::optional<IpAddress> forwarded_for(const http::Parser* head) noexcept {
  if (head == nullptr) return std::nullopt;
  for (uint32_t i = 0; i < head->field_count(); ++i) {
    if (head->field_kind(i) != http::Field::x_forwarded_for) continue;
    std::string_view list = head->field_value(i);
    return IpAddress::parse(ascii::trim(next_piece(list, ',')));
  }
  return std::nullopt;
}

std::string_view client_ip(const KeyContext& c, std::span<char, kKeyScratch> scratch) noexcept {
  if (trusted(c)) {
    if (const std::optional<IpAddress> forwarded = forwarded_for(c.head)) {
      return canonical(*forwarded, scratch);
    }
  }
  return c.peer != nullptr ? canonical(*c.peer, scratch) : c.peer_text;
}

std::string_view from_request(Kind kind, const resilience::RequestView* r) noexcept {
  if (r == nullptr) return {};
  switch (kind) {
    case Kind::path:
      return r->path;
    case Kind::authority:
      return r->authority.empty() ? r->host : r->authority;
    case Kind::method:
      return r->method;
    default:
      return {};
  }
}

}  // namespace

std::string_view key_of(const resilience::KeySource& s, const KeyContext& c,
                        std::span<char, kKeyScratch> scratch) noexcept {
  switch (s.kind) {
    case Kind::none:
      return {};
    case Kind::header:
      return s.name.empty() ? std::string_view{} : first_field(c.head, s.name);
    case Kind::cookie:
      return cookie(c.head, s.name);
    case Kind::query:
      if (c.request != nullptr) return query(c.request->target, s.name);
      return c.head != nullptr ? query(c.head->target(), s.name) : std::string_view{};
    case Kind::path:
    case Kind::authority:
    case Kind::method:
      return from_request(s.kind, c.request);
    case Kind::cid:
      return {scratch.data(), ascii::format_dec(c.connection_id, scratch.data())};
    case Kind::peer_ip:
      return c.peer_text;
    case Kind::client_ip:
      return client_ip(c, scratch);
    case Kind::bearer_token:
      return bearer_token(c.head);
  }
  return {};
}

Identity identity_of(const resilience::KeySource& s, const KeyContext& c,
                     std::span<char, kKeyScratch> scratch) noexcept {
  if (const std::string_view v = key_of(s, c, scratch); !v.empty()) return {v, s.kind};
  for (const Kind k : {Kind::authority, Kind::path, Kind::method}) {
    if (const std::string_view v = from_request(k, c.request); !v.empty()) return {v, k};
  }
  return {};
}

}  // namespace floodgate::proxy
