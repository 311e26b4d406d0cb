// A strict parser of Redis replies in RESP2, sans-I/O: the transport appends what the socket
// delivers to its own buffer and asks the parser whether that buffer now starts with a whole
// reply. Replies are matched to commands in order by the caller (a pipeline); the parser sees
// one reply at a time.
//
// The buffer contract (why reply views are safe although the caller compacts its buffer):
//   - parse(buffered, out) looks at `buffered`, which must start at the first byte of the next
//     reply. It reports a reply only when the whole reply is in `buffered`, contiguous; then
//     `consumed` is its size and the caller drops exactly that many bytes before the next call.
//   - The parser keeps nothing between calls: after need_more the caller may move the bytes
//     (compact), append to them and call again with the longer span. A reply split at any byte
//     boundary, or several replies in one span, parse exactly as one reply per call.
//   - The string views of a reply point into `buffered`: valid until the caller overwrites,
//     moves or frees those bytes (its next compaction). Copy what must live longer.
//   - It never reads a byte outside `buffered`.
// Cost: a call rescans the reply from its first byte, but only its lines (type byte, number,
// simple text); a bulk string's payload is skipped by its length, never scanned. So a reply
// that arrives in k pieces costs k times its header lines, bounded by the limits.
//
// Strictness: only what a RESP2 server sends, in canonical form, is a reply; anything else is
// a protocol error after which the link is unusable (the parser does not resynchronise: the
// caller closes the connection). Refused: an unknown type byte or a RESP3 one, a line not ended
// by exactly CRLF (a bare CR or LF), a simple string or error longer than max_line_bytes, a
// number with a sign other than a leading '-', a leading zero or no digit ("-0", "01", ""), an
// integer outside int64, a length below -1, a bulk string over max_bulk_bytes or whose payload
// is not followed by CRLF, an array of more than Reply::kMaxElements, and a nested array: the
// replies floodgate asks for (its quota script returns a flat array of a few integers and
// strings) never nest, so depth 1 is the bound.
//
// Never allocates, never throws. Thread-safety: the parser is immutable after construction
// (its limits), so any thread may call parse(); each call writes only `out`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace floodgate::redis {

enum class ReplyType : uint8_t {
  simple_string,  // +OK
  error,          // -ERR ..., -NOSCRIPT ...
  integer,        // :42
  bulk_string,    // $3 abc (binary-safe)
  null_bulk,      // $-1
  array,          // *n, elements in Reply::elements()
  null_array,     // *-1
};

// One scalar: a whole reply, or an element of an array reply (never an array itself).
struct ReplyValue {
  ReplyType type = ReplyType::null_bulk;
  int64_t integer = 0;    // integer
  std::string_view text;  // simple_string and error: the line without CRLF; bulk_string: payload
};

// A reply: a scalar, or a flat array of at most kMaxElements scalars.
struct Reply {
  static constexpr std::size_t kMaxElements = 8;

  ReplyValue value;  // type and scalar fields; for array and null_array only the type
  std::array<ReplyValue, kMaxElements> items{};
  uint8_t count = 0;  // elements of an array reply

  ReplyType type() const noexcept { return value.type; }
  std::span<const ReplyValue> elements() const noexcept { return {items.data(), count}; }
};

// The first word of an error reply's text, Redis's error code ("NOSCRIPT", "ERR", "WRONGPASS").
std::string_view error_code(std::string_view error_text) noexcept;

enum class ProtocolError : uint8_t {
  none,
  unknown_type,          // a type byte that is not + - : $ *
  resp3_type,            // a RESP3 type byte (_ , # ! = ( % ~ > |): the link speaks RESP2
  line_too_long,         // a simple string or error over max_line_bytes
  bare_line_feed,        // LF without CR inside a line
  bare_carriage_return,  // CR not followed by LF
  bad_number,            // not '-'? digit+ in canonical form
  integer_overflow,      // a number outside int64
  bad_length,            // a length below -1
  bulk_too_long,         // a bulk string over max_bulk_bytes
  bulk_unterminated,     // a bulk payload not followed by CRLF
  array_too_long,        // more than Reply::kMaxElements elements
  nested_array,          // an array (or null array) inside an array
};

// A short static description ("bulk string longer than the limit").
std::string_view describe(ProtocolError error) noexcept;

struct ReplyLimits {
  std::size_t max_bulk_bytes = 65536;  // 64 KiB; SCRIPT LOAD answers a 40-byte sha
  std::size_t max_line_bytes = 1024;   // a simple string's or error's text

  // The largest reply these limits admit, encoded: a caller whose buffer holds at least this
  // many bytes can always hold a whole reply, so need_more on a full buffer cannot happen.
  // With the defaults that is 524,372 bytes (eight 64 KiB bulk strings); a link that expects
  // only its own replies (a sha, OK, a few integers, an error line) can choose far smaller.
  std::size_t max_reply_bytes() const noexcept;
};

enum class ParseStatus : uint8_t { need_more, reply, protocol_error };

struct Parsed {
  ParseStatus status = ParseStatus::need_more;
  std::size_t consumed = 0;  // reply: its size in bytes, which the caller drops; otherwise 0
  ProtocolError error = ProtocolError::none;  // protocol_error: why
  // protocol_error: the byte at which the reply became malformed (for a bad length, the LF that
  // ends its line); every shorter prefix of the same bytes is need_more.
  std::size_t error_offset = 0;
};

class ReplyParser {
 public:
  explicit ReplyParser(ReplyLimits limits = {}) noexcept : limits_(limits) {}

  // Whether `buffered` starts with a whole reply (see the contract above). On `reply`, `out`
  // holds it, its views into `buffered`; otherwise `out` is unspecified.
  Parsed parse(std::span<const char> buffered, Reply& out) const noexcept;

  const ReplyLimits& limits() const noexcept { return limits_; }

 private:
  ReplyLimits limits_;
};

}  // namespace floodgate::redis
