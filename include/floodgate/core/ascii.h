// ASCII helpers for protocol text: case-insensitive comparison of header names and tokens,
// and number formatting into caller-provided buffers. No locale, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace floodgate::ascii {

constexpr char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

constexpr bool is_space(char c) {
  return c == ' ' || c == '\t';
}

constexpr std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Calls f(token) for each comma-separated, trimmed, non-empty element of a header value.
template <class F>
constexpr void for_each_token(std::string_view value, F&& f) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view token = trim(value.substr(0, comma));
    if (!token.empty()) f(token);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

// Writes `v` in lower-case hex (no leading zeros; "0" for zero). Returns the length (<= 16).
inline std::size_t format_hex(uint64_t v, char* out) {
  char tmp[16];
  std::size_t n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

// Writes `v` in decimal. Returns the length (<= 20).
inline std::size_t format_dec(uint64_t v, char* out) {
  char tmp[20];
  std::size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

}  // namespace floodgate::ascii
