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
// On top of llhttp's strict mode it refuses what llhttp 8.1 lets through (docs/http.md,
// "Requests" and "Bodies and framing"): empty field names, every obs-fold, HTTP/0.9 request
// lines, responses with a body whose transfer coding is not exactly `chunked`, chunk sizes
// above kMaxChunkSize and chunk lines longer than kMaxChunkLineBytes. Every refusal sets
// error_reason() and error_detail(); an error is final for the message.
//
// Thread-safety: single-threaded. No allocation.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/http/field.h"
#include "floodgate/http/request_head.h"

namespace floodgate::http {

// The longest chunk line accepted, inclusive: chunk-size, chunk extensions and the CRLF
// (RFC 9112 section 7.1). HAProxy and nginx also bound it; longer is a malformed body.
inline constexpr std::size_t kMaxChunkLineBytes = 4096;
// The largest chunk-size accepted: 2^63-1, as every signed 64-bit length downstream can hold.
inline constexpr uint64_t kMaxChunkSize = (uint64_t{1} << 63) - 1;
// The largest Content-Length accepted, for the same reason.
inline constexpr uint64_t kMaxContentLength = kMaxChunkSize;

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
  // The method as the client sent it. A method llhttp 8.1 does not know (QUERY, an extension)
  // reads as HTTP_POST in method(): neither safe nor idempotent (RFC 9110 section 9.2.2).
  std::string_view method_name() const;
  llhttp_method_t method() const { return static_cast<llhttp_method_t>(parser_.method); }
  bool extension_method() const { return ext_method_len_ != 0; }
  int status() const { return parser_.status_code; }
  int http_minor() const { return parser_.http_minor; }
  int http_major() const { return parser_.http_major; }
  bool chunked() const { return (parser_.flags & F_CHUNKED) != 0; }
  bool has_content_length() const { return (parser_.flags & F_CONTENT_LENGTH) != 0; }
  uint64_t content_length() const { return content_length_; }
  // A Content-Length body being parsed: the bytes of it still to come (llhttp counts down).
  uint64_t body_left() const { return parser_.content_length; }
  bool keep_alive() const { return llhttp_should_keep_alive(&parser_) != 0; }
  bool upgrade() const { return parser_.upgrade != 0; }
  uint32_t field_count() const { return field_count_; }
  std::string_view field_name(uint32_t i) const;
  std::string_view field_value(uint32_t i) const;
  Field field_kind(uint32_t i) const { return fields_[i].kind; }
  // Whether the head has at least one field of kind `f` (bit(f)), or of any kind in a set.
  bool has(uint32_t kinds) const { return (kinds_seen_ & kinds) != 0; }
  const char* base() const { return base_; }
  // A request's head as the request path reads it (request_head.h), after head_done: views
  // into the head's buffer and field table, valid while they are.
  RequestHead request_head() const;

  Reason error_reason() const { return error_reason_; }
  // Why, in a few words (for logs). Valid after error until the next begin().
  const char* error_detail() const {
    return detail_ != nullptr ? detail_ : llhttp_get_error_reason(&parser_);
  }

 private:
  friend struct ParserCallbacks;
  Result run_body(const char* p, std::size_t n, std::size_t& consumed);
  Result on_error(llhttp_errno_t err);
  Result refuse(Reason reason, const char* detail);
  Reason malformed() const {
    return is_request_ ? Reason::bad_request : Reason::upstream_bad_response;
  }
  bool check_chunk_line(uint64_t line_end);
  bool has_obs_fold() const;
  bool start_method(std::size_t end);

  static constexpr uint64_t kNoChunkLine = UINT64_MAX;
  std::string_view view(uint32_t off, uint32_t len) const { return {base_ + off, len}; }

  llhttp_t parser_{};
  const char* base_ = nullptr;
  HeaderField* fields_ = nullptr;
  HeadLimits limits_{};
  std::size_t parsed_ = 0;
  std::size_t head_end_ = 0;
  std::size_t line_end_ = 0;
  uint64_t content_length_ = 0;
  // Chunk-line bookkeeping, in offsets from the first body byte: body bytes fed before the
  // current run_body() call, and where the current (or next) chunk line starts
  // (kNoChunkLine when none is expected: not chunked, or past the last chunk).
  uint64_t body_fed_ = 0;
  uint64_t chunk_line_start_ = kNoChunkLine;
  uint32_t url_off_ = 0, url_len_ = 0;
  uint32_t field_count_ = 0;
  uint32_t kinds_seen_ = 0;
  uint32_t ext_method_off_ = 0;  // a method llhttp does not know: where it starts (after any
  uint8_t ext_method_len_ = 0;   // empty lines) and its length
  bool method_seen_ = false;     // the request line's method was given to llhttp
  bool in_head_ = false;
  bool in_value_ = false;
  bool head_done_ = false;
  bool message_done_ = false;
  bool no_body_ = false;
  bool at_chunk_header_ = false;  // llhttp paused at on_chunk_header (see run_body)
  bool is_request_;
  Reason error_reason_ = Reason::none;
  const char* detail_ = nullptr;  // a static string, set with error_reason_
  void* sink_ = nullptr;
  void (*sink_fn_)(void*, const char*, std::size_t) = nullptr;
};

}  // namespace floodgate::http
