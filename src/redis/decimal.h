// The width of a number in decimal, shared by the command writer (to size a command before
// writing it) and the reply limits (to bound a reply's encoded size).
#pragma once

#include <cstddef>
#include <cstdint>

namespace floodgate::redis {

constexpr std::size_t decimal_digits(uint64_t v) noexcept {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

}  // namespace floodgate::redis
