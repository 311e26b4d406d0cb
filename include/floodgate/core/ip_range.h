// IP addresses and address ranges (CIDR), for server.trusted_proxies: whose X-Forwarded-For a
// client_ip key source believes.
//
// An IpAddress is 16 bytes: an IPv4 address is held as its IPv4-mapped IPv6 form
// (::ffff:a.b.c.d), so that a peer that reaches a dual-stack listener as ::ffff:10.0.0.1 and one
// that reaches an IPv4 listener as 10.0.0.1 are the same address, and an IPv4 range matches both.
//
// Thread-safety: value types. Parsing is inet_pton (no name resolution, never blocks).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

struct sockaddr;

namespace floodgate {

struct IpAddress {
  std::array<uint8_t, 16> bytes{};
  // A textual IPv4 or IPv6 address (no port, no brackets, no zone), or nullopt.
  static std::optional<IpAddress> parse(std::string_view text) noexcept;
  // An AF_INET or AF_INET6 socket address, or nullopt for another family.
  static std::optional<IpAddress> of(const sockaddr* sa) noexcept;
  bool operator==(const IpAddress&) const = default;
};

struct IpRange {
  IpAddress base{};    // with the bits past `prefix` cleared
  uint8_t prefix = 0;  // leading bits that must match, in the 128-bit form (IPv4 /n is 96 + n)
  // "10.0.0.0/8", "2001:db8::/32", or one address ("192.0.2.7" = /32, "::1" = /128); nullopt for
  // anything else (a host name, a prefix past the family's width, bits set past the prefix are
  // cleared, not refused: "10.1.2.3/8" is 10.0.0.0/8).
  static std::optional<IpRange> parse(std::string_view text) noexcept;
  bool contains(const IpAddress& a) const noexcept;
  bool operator==(const IpRange&) const = default;
};

}  // namespace floodgate
