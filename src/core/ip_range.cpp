#include "floodgate/core/ip_range.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>

namespace floodgate {

namespace {

constexpr std::size_t kMaxText = 63;  // longer than any IPv6 text form (45) with room to spare

IpAddress mapped_v4(const void* v4) noexcept {
  IpAddress a;
  a.bytes[10] = 0xff;
  a.bytes[11] = 0xff;
  std::memcpy(a.bytes.data() + 12, v4, 4);
  return a;
}

bool is_mapped_v4(const IpAddress& a) noexcept {
  for (std::size_t i = 0; i < 10; ++i) {
    if (a.bytes[i] != 0) return false;
  }
  return a.bytes[10] == 0xff && a.bytes[11] == 0xff;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) noexcept {
  if (text.empty() || text.size() > kMaxText) return std::nullopt;
  char buf[kMaxText + 1];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  unsigned char raw[16];
  if (inet_pton(AF_INET, buf, raw) == 1) return mapped_v4(raw);
  if (inet_pton(AF_INET6, buf, raw) == 1) {
    IpAddress a;
    std::memcpy(a.bytes.data(), raw, 16);
    return a;
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::of(const sockaddr* sa) noexcept {
  if (sa == nullptr) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof(in));
    return mapped_v4(&in.sin_addr);
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof(in6));
    IpAddress a;
    std::memcpy(a.bytes.data(), &in6.sin6_addr, 16);
    return a;
  }
  return std::nullopt;
}

std::optional<IpRange> IpRange::parse(std::string_view text) noexcept {
  const std::size_t slash = text.find('/');
  const auto base = IpAddress::parse(text.substr(0, slash));
  if (!base) return std::nullopt;
  const bool v4 = is_mapped_v4(*base) && text.substr(0, slash).find(':') == std::string_view::npos;
  const unsigned width = v4 ? 32 : 128;
  unsigned bits = width;
  if (slash != std::string_view::npos) {
    const std::string_view n = text.substr(slash + 1);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), bits);
    if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || bits > width) {
      return std::nullopt;
    }
  }
  IpRange r;
  r.prefix = static_cast<uint8_t>(v4 ? 96 + bits : bits);
  r.base = *base;
  for (unsigned i = r.prefix; i < 128; ++i) {
    r.base.bytes[i / 8] = static_cast<uint8_t>(r.base.bytes[i / 8] & ~(0x80u >> (i % 8)));
  }
  return r;
}

bool IpRange::contains(const IpAddress& a) const noexcept {
  const unsigned whole = prefix / 8;
  if (std::memcmp(a.bytes.data(), base.bytes.data(), whole) != 0) return false;
  const unsigned rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff00u >> rest);
  return (a.bytes[whole] & mask) == base.bytes[whole];
}

}  // namespace floodgate
