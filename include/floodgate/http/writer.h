// Appends protocol text into a fixed caller-owned buffer. Overflow is sticky and checked once
// at the end (ok()), so callers write straight-line code. No allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "floodgate/core/ascii.h"

namespace floodgate::http {

class Writer {
 public:
  Writer(char* begin, std::size_t capacity) : begin_(begin), p_(begin), end_(begin + capacity) {}

  Writer& put(std::string_view s) {
    if (s.empty()) return *this;  // an empty view may carry a null pointer: no memcpy
    if (s.size() > static_cast<std::size_t>(end_ - p_)) {
      overflow_ = true;
      return *this;
    }
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
    return *this;
  }
  Writer& dec(uint64_t v) {
    char tmp[20];
    return put({tmp, ascii::format_dec(v, tmp)});
  }
  Writer& hex(uint64_t v) {
    char tmp[16];
    return put({tmp, ascii::format_hex(v, tmp)});
  }
  // "name: value\r\n", with one bound check: heads are written a field at a time.
  Writer& header(std::string_view name, std::string_view value) {
    const std::size_t n = name.size() + value.size() + 4;
    if (n > static_cast<std::size_t>(end_ - p_)) {
      overflow_ = true;
      return *this;
    }
    copy(name);
    *p_++ = ':';
    *p_++ = ' ';
    copy(value);
    *p_++ = '\r';
    *p_++ = '\n';
    return *this;
  }

  bool ok() const { return !overflow_; }
  std::size_t size() const { return static_cast<std::size_t>(p_ - begin_); }
  std::size_t room() const { return static_cast<std::size_t>(end_ - p_); }
  char* cursor() const { return p_; }

 private:
  // Bytes that fit (checked by the caller).
  void copy(std::string_view s) noexcept {
    if (s.empty()) return;  // an empty view may carry a null pointer: no memcpy
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }

  char* begin_;
  char* p_;
  char* end_;
  bool overflow_ = false;
};

}  // namespace floodgate::http
