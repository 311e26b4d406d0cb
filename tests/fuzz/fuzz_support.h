// Shared by the libFuzzer targets: a property check that aborts (libFuzzer records the input
// as a crash), and deterministic split points drawn from the input itself, so a crash replays
// exactly from its file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace floodgate::fuzz {

// Aborts with `what` when a property does not hold.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

// A tiny deterministic generator (xorshift) seeded from a few input bytes: chooses where an
// input is cut into the pieces a socket would deliver.
class Splits {
 public:
  explicit Splits(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  // The length of the next piece: 1..max (max >= 1), biased towards short pieces.
  std::size_t next(std::size_t max) {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    const std::size_t cap = (state_ & 3) == 0 ? max : (state_ >> 8) % 16 + 1;
    return cap < max ? cap : max;
  }

 private:
  uint64_t state_;
};

}  // namespace floodgate::fuzz
