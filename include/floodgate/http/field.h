// The header fields a proxy treats specially (RFC 9110 section 7.6, RFC 9112), recognised once
// per field while the head is parsed (http::Parser), so that inspecting and rewriting a head
// compares no names.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "floodgate/core/ascii.h"

namespace floodgate::http {

enum class Field : uint8_t {
  other,
  host,
  connection,
  keep_alive,
  proxy_connection,
  te,
  trailer,
  transfer_encoding,
  upgrade,
  x_forwarded_for,
  x_forwarded_proto,
  x_forwarded_host,
  via,
  x_request_id,
  expect,
  content_length,
};

// A set of Field values, one bit each.
constexpr uint32_t bit(Field f) {
  return uint32_t{1} << static_cast<unsigned>(f);
}

// Whether the field name `n` is `lower` (lowercase letters and '-', as long as `n`) in any
// case. Every field name is parsed and classified, so this compares with bit 0x20 set, eight
// bytes at a time: exact for such a `lower`, since only '\r' (never in a field-name token)
// would fold to '-'.
constexpr bool name_is(std::string_view n, std::string_view lower) {
  if (n.size() != lower.size()) return false;
  if (std::is_constant_evaluated() || n.size() < 4) return ascii::iequals(n, lower);
  const std::size_t size = n.size();
  if (size < 8) {  // two (overlapping) four-byte words
    constexpr uint32_t kFold = 0x20202020;
    const auto word = [](const char* p) {
      uint32_t w = 0;
      std::memcpy(&w, p, sizeof(w));
      return w;
    };
    return (word(n.data()) | kFold) == word(lower.data()) &&
           (word(n.data() + size - 4) | kFold) == word(lower.data() + size - 4);
  }
  constexpr uint64_t kFold = 0x2020202020202020;
  const auto word = [](const char* p) {
    uint64_t w = 0;
    std::memcpy(&w, p, sizeof(w));
    return w;
  };
  for (std::size_t i = 0; i + 8 <= size; i += 8) {
    if ((word(n.data() + i) | kFold) != word(lower.data() + i)) return false;
  }
  // The last (overlapping) eight bytes cover a rest shorter than eight.
  return size % 8 == 0 || (word(n.data() + size - 8) | kFold) == word(lower.data() + size - 8);
}

constexpr Field classify(std::string_view n) {
  const auto iequals = name_is;
  switch (n.size()) {
    case 2:
      return iequals(n, "te") ? Field::te : Field::other;
    case 3:
      return iequals(n, "via") ? Field::via : Field::other;
    case 4:
      return iequals(n, "host") ? Field::host : Field::other;
    case 6:
      return iequals(n, "expect") ? Field::expect : Field::other;
    case 7:
      if (iequals(n, "trailer")) return Field::trailer;
      return iequals(n, "upgrade") ? Field::upgrade : Field::other;
    case 10:
      if (iequals(n, "connection")) return Field::connection;
      return iequals(n, "keep-alive") ? Field::keep_alive : Field::other;
    case 12:
      return iequals(n, "x-request-id") ? Field::x_request_id : Field::other;
    case 14:
      return iequals(n, "content-length") ? Field::content_length : Field::other;
    case 15:
      return iequals(n, "x-forwarded-for") ? Field::x_forwarded_for : Field::other;
    case 16:
      if (iequals(n, "proxy-connection")) return Field::proxy_connection;
      return iequals(n, "x-forwarded-host") ? Field::x_forwarded_host : Field::other;
    case 17:
      if (iequals(n, "transfer-encoding")) return Field::transfer_encoding;
      return iequals(n, "x-forwarded-proto") ? Field::x_forwarded_proto : Field::other;
    default:
      return Field::other;
  }
}

}  // namespace floodgate::http
