// Test helpers for the http component: a message held the way the proxy holds one (the bytes
// contiguous at a fixed address, field storage sized exactly to the limit, so that AddressSanitizer
// catches any access outside them), and a body sink that records what it is handed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/ascii.h"
#include "floodgate/http/parser.h"

namespace floodgate {
inline void PrintTo(Reason r, std::ostream* os) {
  *os << (r == Reason::none ? std::string_view("none") : info(r).name);
}
}  // namespace floodgate

namespace floodgate::http {
inline void PrintTo(Parser::Result r, std::ostream* os) {
  constexpr std::string_view kNames[] = {"need_more", "head_done", "message_done", "error"};
  *os << kNames[static_cast<int>(r)];
}
}  // namespace floodgate::http

namespace floodgate::http::testing {

using Result = Parser::Result;

// Collects body data; counts pieces, and empty pieces (which must never happen).
struct BodySink {
  std::string body;
  int pieces = 0;
  int empty_pieces = 0;
  void operator()(const char* p, std::size_t n) {
    ++pieces;
    if (n == 0) ++empty_pieces;
    body.append(p, n);
  }
};

// One message (head, and possibly body and following messages) in its own heap buffer.
// Not movable: the parser points into the object.
class Message {
 public:
  Message(Parser::Kind kind, std::string_view bytes, HeadLimits limits = {})
      : size_(bytes.size()),
        data_(new char[std::max<std::size_t>(size_, 1)]),
        limits_(limits),
        fields_(new HeaderField[std::max<uint32_t>(limits.max_headers, 1)]),
        parser_(kind) {
    if (size_ > 0) std::memcpy(data_.get(), bytes.data(), size_);
    parser_.begin(data_.get(), fields_.get(), limits_);
  }

  Parser& parser() { return parser_; }
  const Parser& parser() const { return parser_; }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

  // Makes bytes [offset, size) the next message (pipelining); `no_body` for responses.
  void begin_next(std::size_t offset, bool no_body = false) {
    parser_.begin(data_.get() + offset, fields_.get(), limits_);
    parser_.set_no_body(no_body);
    base_offset_ = offset;
  }

  // Feeds everything from the current message's base as one head.
  Result parse_head() { return parser_.parse_head(size_ - base_offset_); }

  // Feeds the head `step` bytes at a time until the parser stops asking for more.
  Result parse_head_in_steps(std::size_t step) {
    Result r = Result::need_more;
    const std::size_t n = size_ - base_offset_;
    for (std::size_t end = 0; end < n && r == Result::need_more;) {
      end = std::min(end + step, n);
      r = parser_.parse_head(end);
    }
    return r;
  }

  // Feeds everything after the head as body, in pieces of at most `step` bytes, until the
  // message completes or fails. `consumed` receives the body bytes the parser used.
  Result parse_body(BodySink& sink, std::size_t& consumed, std::size_t step = SIZE_MAX) {
    const std::size_t start = base_offset_ + parser_.head_end();
    consumed = 0;
    Result r = Result::need_more;
    while (r == Result::need_more && start + consumed < size_) {
      std::size_t used = 0;
      const std::size_t piece = std::min(step, size_ - start - consumed);
      r = parser_.parse_body(data_.get() + start + consumed, piece, used, sink);
      consumed += used;
      if (r == Result::need_more) {
        EXPECT_EQ(used, piece);
      }
    }
    return r;
  }

  // Values of every field named `name` (case-insensitive), in order.
  std::vector<std::string> values(std::string_view name) const {
    std::vector<std::string> out;
    for (uint32_t i = 0; i < parser_.field_count(); ++i) {
      if (ascii::iequals(parser_.field_name(i), name)) out.emplace_back(parser_.field_value(i));
    }
    return out;
  }
  // Every field as "name: value", in order.
  std::vector<std::string> fields() const {
    std::vector<std::string> out;
    for (uint32_t i = 0; i < parser_.field_count(); ++i) {
      out.push_back(std::string(parser_.field_name(i)) + ": " +
                    std::string(parser_.field_value(i)));
    }
    return out;
  }

 private:
  std::size_t size_;
  std::unique_ptr<char[]> data_;
  HeadLimits limits_;
  std::unique_ptr<HeaderField[]> fields_;
  Parser parser_;
  std::size_t base_offset_ = 0;
};

}  // namespace floodgate::http::testing
