// A sans-I/O HTTP/1.1 message parser over llhttp (strict mode, no lenient flags).
//
// One Parser per connection direction, reused for every message on it. Parsing a message has
// two phases:
//  - head: the caller keeps the whole head contiguous in one buffer starting at `base` and
//    calls parse_head() as bytes arrive. Header fields are recorded as offsets into that
//    buffer (no copies), into caller-provided storage. For requests the limits of
//    HeadLimits are enforced exactly and inclusively while parsing.
//  - body: parse_body() runs over arbitrary byte ranges and hands body data (de-chunked; chunk
//    framing and trailers are consumed and dropped) to a sink.
// Parsing stops (llhttp pause) right after the head and right after the message, so pipelined
// bytes that follow are never consumed early.
//
// Thread-safety: single-threaded. No allocation.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/http/field.h"

namespace floodgate::http {

// A header field recorded as offsets relative to the head's base pointer, and what it is.
struct HeaderField {
  uint32_t name_off, name_len, value_off, value_len;
  Field kind;
};

// Request head limits (inclusive). Responses use only max_headers.
struct HeadLimits {
  uint32_t max_uri_bytes = 8192;
  uint32_t max_header_bytes = 16384;  // the header section: field lines and the final CRLF
  uint32_t max_headers = 128;
};

class Parser {
 public:
  enum class Kind { request, response };
  enum class Result {
    need_more,     // consumed everything given; feed more bytes
    head_done,     // the head is complete; head_end() is its length from base
    message_done,  // the message (head and body) is complete
    error,         // malformed input; error_reason() says how to answer
  };

  explicit Parser(Kind kind);
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  // Starts a new message whose head begins at `base`. `fields` has room for
  // limits.max_headers entries and must stay valid until the head is no longer needed.
  void begin(const char* base, HeaderField* fields, const HeadLimits& limits);

  // Response parsing only: the request was HEAD (or otherwise expects no body).
  void set_no_body(bool no_body) { no_body_ = no_body; }

  // Parses the head bytes [base + parsed_bytes(), base + end).
  Result parse_head(std::size_t end);

  // Parses body bytes [p, p + n); calls sink(const char*, size_t) for body data.
  // `consumed` receives how many bytes were used (less than n at message_done).
  template <class Sink>
  Result parse_body(const char* p, std::size_t n, std::size_t& consumed, Sink& sink) {
    sink_ = &sink;
    sink_fn_ = [](void* s, const char* at, std::size_t len) { (*static_cast<Sink*>(s))(at, len); };
    return run_body(p, n, consumed);
  }

  // The peer closed: completes a close-delimited message (message_done) or reports error.
  Result finish();

  // True while a close-delimited response body is being read.
  bool needs_eof() const { return llhttp_message_needs_eof(&parser_) != 0; }

  // Head facts, valid after head_done.
  std::size_t parsed_bytes() const { return parsed_; }
  std::size_t head_end() const { return head_end_; }
  std::size_t request_line_end() const { return line_end_; }
  std::string_view target() const { return view(url_off_, url_len_); }
  std::string_view status_text() const { return view(url_off_, url_len_); }
  std::string_view method_name() const;
  llhttp_method_t method() const { return static_cast<llhttp_method_t>(parser_.method); }
  int status() const { return parser_.status_code; }
  int http_minor() const { return parser_.http_minor; }
  int http_major() const { return parser_.http_major; }
  bool chunked() const { return (parser_.flags & F_CHUNKED) != 0; }
  bool has_content_length() const { return (parser_.flags & F_CONTENT_LENGTH) != 0; }
  uint64_t content_length() const { return content_length_; }
  bool keep_alive() const { return llhttp_should_keep_alive(&parser_) != 0; }
  bool upgrade() const { return parser_.upgrade != 0; }
  uint32_t field_count() const { return field_count_; }
  std::string_view field_name(uint32_t i) const;
  std::string_view field_value(uint32_t i) const;
  Field field_kind(uint32_t i) const { return fields_[i].kind; }
  // Whether the head has at least one field of kind `f` (bit(f)), or of any kind in a set.
  bool has(uint32_t kinds) const { return (kinds_seen_ & kinds) != 0; }
  const char* base() const { return base_; }

  Reason error_reason() const { return error_reason_; }
  const char* error_detail() const { return llhttp_get_error_reason(&parser_); }

 private:
  friend struct ParserCallbacks;
  Result run_body(const char* p, std::size_t n, std::size_t& consumed);
  Result on_error(llhttp_errno_t err);
  std::string_view view(uint32_t off, uint32_t len) const { return {base_ + off, len}; }

  llhttp_t parser_{};
  const char* base_ = nullptr;
  HeaderField* fields_ = nullptr;
  HeadLimits limits_{};
  std::size_t parsed_ = 0;
  std::size_t head_end_ = 0;
  std::size_t line_end_ = 0;
  uint64_t content_length_ = 0;
  uint32_t url_off_ = 0, url_len_ = 0;
  uint32_t field_count_ = 0;
  uint32_t kinds_seen_ = 0;
  bool in_head_ = false;
  bool in_value_ = false;
  bool head_done_ = false;
  bool message_done_ = false;
  bool no_body_ = false;
  bool is_request_;
  Reason error_reason_ = Reason::none;
  void* sink_ = nullptr;
  void (*sink_fn_)(void*, const char*, std::size_t) = nullptr;
};

}  // namespace floodgate::http
