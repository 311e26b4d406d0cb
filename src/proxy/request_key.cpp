#include "floodgate/proxy/request_key.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "floodgate/core/ascii.h"
#include "floodgate/routing/route_table.h"

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
std::string_view first_field(const http::RequestHead* head, std::string_view name) noexcept {
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

std::string_view cookie(const http::RequestHead* head, std::string_view name) noexcept {
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

std::string_view bearer_token(const http::RequestHead* head) noexcept {
  std::string_view credentials = first_field(head, "authorization");
  const std::string_view scheme = next_piece(credentials, ' ');
  if (!ascii::iequals(scheme, "bearer")) return {};
  return ascii::trim(credentials);
}

// Splits `s` at the last `sep`: returns what follows it and leaves what precedes it in `s`
// (empty when there is no `sep`).
std::string_view last_piece(std::string_view& s, char sep) noexcept {
  const std::size_t at = s.rfind(sep);
  const std::string_view piece = at == std::string_view::npos ? s : s.substr(at + 1);
  s = at == std::string_view::npos ? std::string_view{} : s.substr(0, at);
  return piece;
}

bool is_trusted(const IpAddress& a, std::span<const IpRange> trusted_proxies) noexcept {
  return std::any_of(trusted_proxies.begin(), trusted_proxies.end(),
                     [&a](const IpRange& r) { return r.contains(a); });
}

// Whether `s` is a port as a proxy writes one after an address: ':' and one to five digits.
bool is_port(std::string_view s) noexcept {
  return s.size() >= 2 && s.size() <= 6 && s.front() == ':' &&
         std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The address of one X-Forwarded-For element: an IPv4 or IPv6 address, an IPv4 address with a
// port ("192.0.2.7:4711"), or an IPv6 address in brackets with or without one
// ("[2001:db8::7]:4711", "[2001:db8::7]"); nullopt for anything else.
std::optional<IpAddress> element_address(std::string_view e) noexcept {
  if (e.starts_with('[')) {
    const std::size_t close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view after = e.substr(close + 1);
    e = e.substr(1, close - 1);
    // Brackets hold an IPv6 address, and only a port may follow them.
    if (e.find(':') == std::string_view::npos || (!after.empty() && !is_port(after))) {
      return std::nullopt;
    }
  } else if (const std::size_t colon = e.find(':');
             colon != std::string_view::npos && e.find(':', colon + 1) == std::string_view::npos) {
    if (!is_port(e.substr(colon))) return std::nullopt;  // one colon: an IPv4 address and a port
    e = e.substr(0, colon);
  }
  return IpAddress::parse(e);
}

std::string_view client_ip(const KeyContext& c, std::span<char, kKeyScratch> scratch) noexcept {
  if (c.peer == nullptr) return c.peer_text;
  std::span<const IpRange> trusted;  // none without the list: nobody is trusted
  if (c.trusted_proxies != nullptr) trusted = *c.trusted_proxies;
  return address_text(forwarded_client(*c.peer, trusted, c.head).value_or(*c.peer), scratch);
}

std::string_view from_request(Kind kind, const resilience::RequestView* r,
                              std::span<char, kKeyScratch> scratch) noexcept {
  if (r == nullptr) return {};
  switch (kind) {
    case Kind::path:
      return r->path;
    case Kind::authority:
      return normalise_host(r->authority.empty() ? r->host : r->authority,
                            scratch.first<RouteTable::kMaxHostBytes>());
    case Kind::method:
      return r->method;
    default:
      return {};
  }
}

}  // namespace

std::optional<IpAddress> forwarded_client(const IpAddress& peer,
                                          std::span<const IpRange> trusted_proxies,
                                          const http::RequestHead* head) noexcept {
  if (head == nullptr || !is_trusted(peer, trusted_proxies)) return std::nullopt;
  // The last trusted address passed, from the right: nullopt while that is still the peer.
  std::optional<IpAddress> passed;
  for (uint32_t i = head->field_count(); i-- > 0;) {
    if (head->field_kind(i) != http::Field::x_forwarded_for) continue;
    std::string_view list = head->field_value(i);
    while (!list.empty()) {
      const std::string_view element = ascii::trim(last_piece(list, ','));
      if (element.empty()) continue;
      const std::optional<IpAddress> a = element_address(element);
      // Not an address: the chain of proxies breaks here, and nothing left of it is believed.
      if (!a) return passed;
      if (!is_trusted(*a, trusted_proxies)) return a;
      passed = a;
    }
  }
  return passed;  // every address trusted: the left-most one (or none: the peer)
}

std::string_view address_text(const IpAddress& a, std::span<char, kKeyScratch> out) noexcept {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool v4 = std::memcmp(a.bytes.data(), kMapped, sizeof(kMapped)) == 0;
  const void* src = v4 ? a.bytes.data() + sizeof(kMapped) : a.bytes.data();
  if (::inet_ntop(v4 ? AF_INET : AF_INET6, src, out.data(), out.size()) == nullptr) return {};
  return {out.data()};
}

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
      return c.head != nullptr ? query(c.head->target, s.name) : std::string_view{};
    case Kind::path:
    case Kind::authority:
    case Kind::method:
      return from_request(s.kind, c.request, scratch);
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

Identity identity_of(const resilience::KeySource& s, resilience::MissingKey missing,
                     const KeyContext& c, std::span<char, kKeyScratch> scratch) noexcept {
  if (const std::string_view v = key_of(s, c, scratch); !v.empty()) return {v, Counted::by_key};
  switch (missing) {
    case resilience::MissingKey::peer:
      return {client_ip(c, scratch), Counted::by_peer};
    case resilience::MissingKey::route:
      return {{}, Counted::by_route};
    case resilience::MissingKey::skip:
      return {{}, Counted::skipped};
    case resilience::MissingKey::refuse:
      break;
  }
  return {{}, Counted::refused};
}

}  // namespace floodgate::proxy
