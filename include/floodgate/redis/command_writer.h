// Encodes Redis commands in RESP2, the form every Redis server accepts: an array of bulk
// strings, `*<n>\r\n` then `$<len>\r\n<bytes>\r\n` per argument. Sans-I/O: the bytes go into
// a fixed buffer the caller owns (the link's output buffer); the transport sends them. Several
// commands appended one after another are a pipeline: Redis answers them in order.
//
// Every command floodgate sends goes through write(): EVALSHA sha numkeys key... arg..., SCRIPT
// LOAD, AUTH, SELECT, PING. Arguments are binary-safe views; integers go through IntegerArg.
//
// Never allocates and never throws. A command that does not fit in the room left writes
// nothing (all or nothing), so the buffer always holds whole commands.
//
// Thread-safety: none; a writer belongs to the reactor that owns its buffer. Lifetime: the
// buffer must outlive the writer; the writer does not own it.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace floodgate::redis {

// An integer formatted in decimal, as Redis expects integer arguments, without allocation. The
// view points into this object: keep it alive until write() returns (a temporary in the same
// full expression is enough).
class IntegerArg {
 public:
  template <std::integral T>
  requires(!std::same_as<T, bool> &&
           sizeof(T) <= sizeof(uint64_t)) explicit IntegerArg(T value) noexcept {
    // 20 characters hold every int64 (sign and 19 digits) and every uint64 (20 digits).
    const auto r = std::to_chars(text_, text_ + sizeof text_, value);
    size_ = static_cast<uint8_t>(r.ptr - text_);
  }
  IntegerArg(const IntegerArg&) = delete;  // the view would point into the copied-from object
  IntegerArg& operator=(const IntegerArg&) = delete;

  std::string_view view() const noexcept { return {text_, size_}; }

 private:
  char text_[20];
  uint8_t size_ = 0;
};

class CommandWriter {
 public:
  // Appends commands to `buffer` from its first byte.
  explicit CommandWriter(std::span<char> buffer) noexcept : buffer_(buffer) {}

  // Appends one command whose first argument is its name. Returns the bytes written, or 0 when
  // the command does not fit in room() or has no argument; then nothing is written.
  std::size_t write(std::initializer_list<std::string_view> args) noexcept {
    return write(std::span<const std::string_view>(args.begin(), args.size()));
  }
  std::size_t write(std::span<const std::string_view> args) noexcept;

  // The exact size of `args` encoded as one command (0 for no argument), or SIZE_MAX when it
  // would exceed `limit`: a caller can tell a command too large for any buffer of that size.
  static std::size_t encoded_size(std::span<const std::string_view> args,
                                  std::size_t limit = SIZE_MAX) noexcept;

  // The commands written so far, from the buffer's first byte.
  std::span<const char> written() const noexcept { return buffer_.first(size_); }
  std::size_t size() const noexcept { return size_; }
  std::size_t room() const noexcept { return buffer_.size() - size_; }
  // Starts again at the buffer's first byte (the transport sent everything written).
  void clear() noexcept { size_ = 0; }

 private:
  std::span<char> buffer_;
  std::size_t size_ = 0;
};

}  // namespace floodgate::redis
