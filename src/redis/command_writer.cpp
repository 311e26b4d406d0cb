#include "floodgate/redis/command_writer.h"

#include <cstring>

#include "decimal.h"

namespace floodgate::redis {
namespace {

// `*<n>\r\n` or `$<len>\r\n`.
constexpr std::size_t header_size(std::size_t n) noexcept {
  return 1 + decimal_digits(n) + 2;
}

// Writes a header whose size header_size() counted; the room is known to be there.
char* put_header(char* p, char type, std::size_t n) noexcept {
  *p++ = type;
  const std::size_t digits = decimal_digits(n);
  std::to_chars(p, p + digits, n);
  p += digits;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

}  // namespace

std::size_t CommandWriter::encoded_size(std::span<const std::string_view> args,
                                        std::size_t limit) noexcept {
  if (args.empty()) return 0;
  std::size_t total = header_size(args.size());
  if (total > limit) return SIZE_MAX;
  for (const std::string_view a : args) {
    // Each step stays within `limit`, so the sum never wraps.
    if (a.size() > limit - total) return SIZE_MAX;
    const std::size_t piece = header_size(a.size()) + a.size() + 2;
    if (piece > limit - total) return SIZE_MAX;
    total += piece;
  }
  return total;
}

std::size_t CommandWriter::write(std::span<const std::string_view> args) noexcept {
  const std::size_t n = encoded_size(args, room());
  if (n == 0 || n > room()) return 0;
  char* p = buffer_.data() + size_;
  p = put_header(p, '*', args.size());
  for (const std::string_view a : args) {
    p = put_header(p, '$', a.size());
    if (!a.empty()) std::memcpy(p, a.data(), a.size());  // an empty view may be null
    p += a.size();
    *p++ = '\r';
    *p++ = '\n';
  }
  size_ += n;
  return n;
}

}  // namespace floodgate::redis
