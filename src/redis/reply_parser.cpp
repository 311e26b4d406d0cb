// The parser reads the buffered bytes left to right and decides every error at one byte, from
// that byte and the ones before it (a length over its limit at the LF that ends its line). The
// contract in reply_parser.h rests on two consequences: a prefix of a reply is either need_more
// or the same error as the whole reply at the same offset, so cutting never changes a verdict;
// and need_more is answered only when a byte the parser needs is past the end of the span, so
// nothing past it is ever read.
#include "floodgate/redis/reply_parser.h"

#include <algorithm>
#include <limits>

#include "decimal.h"

namespace floodgate::redis {
namespace {

enum class Step : uint8_t { ok, more, fail };

// One pass over `in` from its first byte. Every method starts at pos_ and leaves pos_ after
// what it read when it returns ok.
class Reader {
 public:
  Reader(std::span<const char> in, const ReplyLimits& limits) noexcept : in_(in), limits_(limits) {}

  // A scalar, or at top level an array header: then `out` is array or null_array and `count`
  // its elements.
  Step value(ReplyValue& out, bool top, std::size_t& count) noexcept;

  std::size_t pos() const noexcept { return pos_; }
  ProtocolError error() const noexcept { return error_; }
  std::size_t error_offset() const noexcept { return error_offset_; }

 private:
  bool at_end() const noexcept { return pos_ == in_.size(); }
  Step fail(ProtocolError e) noexcept { return fail_at(e, pos_); }
  Step fail_at(ProtocolError e, std::size_t offset) noexcept {
    error_ = e;
    error_offset_ = offset;
    return Step::fail;
  }

  Step text_line(std::string_view& text) noexcept;
  Step number(int64_t& value) noexcept;
  Step crlf() noexcept;
  Step bulk(ReplyValue& out) noexcept;
  Step array_header(ReplyValue& out, std::size_t& count) noexcept;

  std::span<const char> in_;
  const ReplyLimits& limits_;
  std::size_t pos_ = 0;
  ProtocolError error_ = ProtocolError::none;
  std::size_t error_offset_ = 0;
};

// The type bytes RESP3 adds: null, double, boolean, blob error, verbatim string, big number,
// map, set, push, attribute.
bool is_resp3_type(char c) noexcept {
  return std::string_view("_,#!=(%~>|").find(c) != std::string_view::npos;
}

Step Reader::value(ReplyValue& out, bool top, std::size_t& count) noexcept {
  if (at_end()) return Step::more;
  const char type = in_[pos_];
  switch (type) {
    case '+':
    case '-':
      out.type = type == '+' ? ReplyType::simple_string : ReplyType::error;
      ++pos_;
      return text_line(out.text);
    case ':':
      out.type = ReplyType::integer;
      ++pos_;
      return number(out.integer);
    case '$':
      ++pos_;
      return bulk(out);
    case '*':
      if (!top) return fail(ProtocolError::nested_array);
      ++pos_;
      return array_header(out, count);
    default:
      return fail(is_resp3_type(type) ? ProtocolError::resp3_type : ProtocolError::unknown_type);
  }
}

// The text of a simple string or error, up to CRLF: no CR or LF inside, at most max_line_bytes.
Step Reader::text_line(std::string_view& text) noexcept {
  const std::size_t start = pos_;
  for (;;) {
    if (at_end()) return Step::more;
    const char c = in_[pos_];
    if (c == '\r') break;
    if (c == '\n') return fail(ProtocolError::bare_line_feed);
    if (pos_ - start == limits_.max_line_bytes) return fail(ProtocolError::line_too_long);
    ++pos_;
  }
  text = std::string_view(in_.data() + start, pos_ - start);
  return crlf();
}

// A canonical decimal int64 up to CRLF: an optional '-', then digits without a leading zero;
// "-0" is refused. Overflow is caught at the digit that causes it.
Step Reader::number(int64_t& value) noexcept {
  if (at_end()) return Step::more;
  const bool negative = in_[pos_] == '-';
  if (negative) ++pos_;
  const uint64_t limit =
      negative ? uint64_t{1} << 63 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t magnitude = 0;
  std::size_t digits = 0;
  for (;;) {
    if (at_end()) return Step::more;
    const char c = in_[pos_];
    if (c == '\r') break;
    if (c == '\n') return fail(ProtocolError::bare_line_feed);
    if (c < '0' || c > '9') return fail(ProtocolError::bad_number);
    if (digits == 1 && magnitude == 0) return fail(ProtocolError::bad_number);  // leading 0
    const auto d = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - d) / 10) return fail(ProtocolError::integer_overflow);
    magnitude = magnitude * 10 + d;
    ++digits;
    ++pos_;
  }
  if (digits == 0 || (negative && magnitude == 0)) return fail(ProtocolError::bad_number);
  // Two's complement: 0 - 2^63 is INT64_MIN (conversion is modular since C++20).
  value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return crlf();
}

// At the CR that ended a line.
Step Reader::crlf() noexcept {
  ++pos_;
  if (at_end()) return Step::more;
  if (in_[pos_] != '\n') return fail(ProtocolError::bare_carriage_return);
  ++pos_;
  return Step::ok;
}

// After '$': `<len>\r\n<payload>\r\n`, or `-1\r\n` for the null bulk string.
Step Reader::bulk(ReplyValue& out) noexcept {
  int64_t length = 0;
  if (const Step s = number(length); s != Step::ok) return s;
  if (length == -1) {
    out.type = ReplyType::null_bulk;
    return Step::ok;
  }
  if (length < 0) return fail_at(ProtocolError::bad_length, pos_ - 1);
  const auto size = static_cast<uint64_t>(length);
  if (size > limits_.max_bulk_bytes) return fail_at(ProtocolError::bulk_too_long, pos_ - 1);
  if (in_.size() - pos_ < size) return Step::more;
  out.type = ReplyType::bulk_string;
  out.text = std::string_view(in_.data() + pos_, static_cast<std::size_t>(size));
  pos_ += static_cast<std::size_t>(size);
  for (const char expected : {'\r', '\n'}) {
    if (at_end()) return Step::more;
    if (in_[pos_] != expected) return fail(ProtocolError::bulk_unterminated);
    ++pos_;
  }
  return Step::ok;
}

// After '*': `<count>\r\n`, or `-1\r\n` for the null array.
Step Reader::array_header(ReplyValue& out, std::size_t& count) noexcept {
  int64_t n = 0;
  if (const Step s = number(n); s != Step::ok) return s;
  if (n == -1) {
    out.type = ReplyType::null_array;
    count = 0;
    return Step::ok;
  }
  if (n < 0) return fail_at(ProtocolError::bad_length, pos_ - 1);
  if (static_cast<uint64_t>(n) > Reply::kMaxElements) {
    return fail_at(ProtocolError::array_too_long, pos_ - 1);
  }
  out.type = ReplyType::array;
  count = static_cast<std::size_t>(n);
  return Step::ok;
}

// Saturating, so that absurd limits give SIZE_MAX rather than a small wrapped bound.
std::size_t add(std::size_t a, std::size_t b) noexcept {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

}  // namespace

Parsed ReplyParser::parse(std::span<const char> buffered, Reply& out) const noexcept {
  Reader reader(buffered, limits_);
  out = Reply{};
  std::size_t count = 0;
  Step step = reader.value(out.value, true, count);
  for (std::size_t i = 0; step == Step::ok && i < count; ++i) {
    std::size_t unused = 0;
    step = reader.value(out.items[i], false, unused);
    out.count = static_cast<uint8_t>(i + 1);
  }
  switch (step) {
    case Step::ok:
      return Parsed{.status = ParseStatus::reply, .consumed = reader.pos()};
    case Step::more:
      return Parsed{};
    case Step::fail:
      break;
  }
  return Parsed{.status = ParseStatus::protocol_error,
                .error = reader.error(),
                .error_offset = reader.error_offset()};
}

std::size_t ReplyLimits::max_reply_bytes() const noexcept {
  const std::size_t simple = add(max_line_bytes, 3);  // +<text>\r\n
  const std::size_t integer = 1 + 20 + 2;             // :-9223372036854775808
  const std::size_t bulk = add(add(max_bulk_bytes, 5), decimal_digits(max_bulk_bytes));
  const std::size_t scalar = std::max({simple, integer, bulk, std::size_t{5}});  // $-1 / *-1
  const std::size_t header = 1 + decimal_digits(Reply::kMaxElements) + 2;
  std::size_t array = header;
  for (std::size_t i = 0; i < Reply::kMaxElements; ++i) array = add(array, scalar);
  return std::max(scalar, array);
}

std::string_view error_code(std::string_view error_text) noexcept {
  return error_text.substr(0, error_text.find(' '));
}

std::string_view describe(ProtocolError error) noexcept {
  switch (error) {
    case ProtocolError::none:
      return "no error";
    case ProtocolError::unknown_type:
      return "unknown reply type byte";
    case ProtocolError::resp3_type:
      return "RESP3 reply type on a RESP2 link";
    case ProtocolError::line_too_long:
      return "simple string or error longer than the limit";
    case ProtocolError::bare_line_feed:
      return "line feed without carriage return";
    case ProtocolError::bare_carriage_return:
      return "carriage return not followed by line feed";
    case ProtocolError::bad_number:
      return "malformed number";
    case ProtocolError::integer_overflow:
      return "integer outside int64";
    case ProtocolError::bad_length:
      return "negative length other than -1";
    case ProtocolError::bulk_too_long:
      return "bulk string longer than the limit";
    case ProtocolError::bulk_unterminated:
      return "bulk string not followed by CRLF";
    case ProtocolError::array_too_long:
      return "array with more elements than the limit";
    case ProtocolError::nested_array:
      return "nested array";
  }
  return "unknown protocol error";
}

}  // namespace floodgate::redis
