// Fuzz target: redis::ReplyParser, a Redis server's bytes towards floodgate, and the
// CommandWriter's commands read back.
//
// Byte 0 chooses the reply limits (the defaults, or small ones that reach the length refusals)
// and the split seed; byte 1 where the input is cut in two; the rest is what the server sends.
// The bytes are parsed three ways, as a transport would deliver them: whole, in two pieces, and
// in random pieces; the pieces go through a compacting buffer whose unfilled tail is poisoned,
// so a read past the bytes given is an ASan report. Properties: no crash; a reply consumes at
// least one byte and at most the bytes given; its views lie in the bytes it consumed; it
// re-encodes to exactly those bytes (only canonical RESP2 is accepted); a protocol error's
// offset is a byte given; the replies and the final verdict (need more, or the same error at
// the same input offset) do not depend on the cut. Then the input, cut into at most eight
// arguments, is written with CommandWriter into a buffer of a size the input chooses: nothing
// or the whole command is written, and the command parses back as the array of its arguments.
#include <sanitizer/asan_interface.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/redis/command_writer.h"
#include "floodgate/redis/reply_parser.h"
#include "fuzz_support.h"

namespace {

using floodgate::fuzz::check;
using floodgate::redis::CommandWriter;
using floodgate::redis::Parsed;
using floodgate::redis::ParseStatus;
using floodgate::redis::ProtocolError;
using floodgate::redis::Reply;
using floodgate::redis::ReplyLimits;
using floodgate::redis::ReplyParser;
using floodgate::redis::ReplyType;
using floodgate::redis::ReplyValue;

void encode(const ReplyValue& v, std::string& out) {
  switch (v.type) {
    case ReplyType::simple_string:
    case ReplyType::error:
      out += v.type == ReplyType::simple_string ? '+' : '-';
      out.append(v.text).append("\r\n");
      return;
    case ReplyType::integer:
      out.append(":").append(std::to_string(v.integer)).append("\r\n");
      return;
    case ReplyType::bulk_string:
      out.append("$").append(std::to_string(v.text.size())).append("\r\n");
      out.append(v.text).append("\r\n");
      return;
    case ReplyType::null_bulk:
      out += "$-1\r\n";
      return;
    case ReplyType::array:
    case ReplyType::null_array:
      check(false, "an array inside an array");
  }
}

std::string encode(const Reply& r) {
  std::string out;
  check(r.count <= Reply::kMaxElements, "more elements than the bound");
  if (r.type() == ReplyType::array) {
    out.append("*").append(std::to_string(r.count)).append("\r\n");
    for (const ReplyValue& v : r.elements()) encode(v, out);
  } else if (r.type() == ReplyType::null_array) {
    check(r.count == 0, "elements in a null array");
    out += "*-1\r\n";
  } else {
    check(r.count == 0, "elements in a scalar reply");
    encode(r.value, out);
  }
  return out;
}

bool has_text(ReplyType t) {
  return t == ReplyType::simple_string || t == ReplyType::error || t == ReplyType::bulk_string;
}

void check_views(const ReplyValue& v, const char* begin, const char* end, const ReplyLimits& l) {
  if (!has_text(v.type)) return;
  check(v.text.data() >= begin && v.text.data() + v.text.size() <= end,
        "a view outside the reply's bytes");
  check(v.text.size() <= (v.type == ReplyType::bulk_string ? l.max_bulk_bytes : l.max_line_bytes),
        "a string over its limit");
}

// Checks a reply against the bytes it consumed.
void check_reply(const Reply& r, const Parsed& p, std::size_t given, const char* bytes,
                 const ReplyLimits& limits) {
  check(p.consumed > 0 && p.consumed <= given, "a reply of no byte or of more than given");
  check_views(r.value, bytes, bytes + p.consumed, limits);
  for (const ReplyValue& v : r.elements()) check_views(v, bytes, bytes + p.consumed, limits);
  check(encode(r) == std::string_view(bytes, p.consumed), "the reply re-encodes differently");
}

struct Transcript {
  std::vector<std::size_t> replies;  // the size of each reply, in order
  ParseStatus end = ParseStatus::need_more;
  ProtocolError error = ProtocolError::none;
  std::size_t error_at = 0;  // in the whole input
  bool operator==(const Transcript&) const = default;
};

// Parses `input` delivered in pieces of next(remaining) bytes, as a transport does: append,
// parse every whole reply, drop it, compact, read again.
template <class Next>
Transcript parse_in_pieces(const ReplyParser& parser, std::string_view input, Next next) {
  std::vector<char> buf(input.size());
  std::size_t filled = 0;
  std::size_t fed = 0;
  std::size_t base = 0;  // the input offset of buf[0]
  Transcript t;
  for (;;) {
    for (;;) {
      ASAN_POISON_MEMORY_REGION(buf.data() + filled, buf.size() - filled);
      Reply r;
      const Parsed p = parser.parse(std::span<const char>(buf.data(), filled), r);
      ASAN_UNPOISON_MEMORY_REGION(buf.data() + filled, buf.size() - filled);
      if (p.status == ParseStatus::need_more) break;
      if (p.status == ParseStatus::protocol_error) {
        check(p.error_offset < filled, "an error at a byte not given");
        t.end = p.status;
        t.error = p.error;
        t.error_at = base + p.error_offset;
        return t;
      }
      check_reply(r, p, filled, buf.data(), parser.limits());
      t.replies.push_back(p.consumed);
      std::memmove(buf.data(), buf.data() + p.consumed, filled - p.consumed);
      filled -= p.consumed;
      base += p.consumed;
    }
    if (fed == input.size()) return t;
    const std::size_t n = next(input.size() - fed);
    std::memcpy(buf.data() + filled, input.data() + fed, n);
    filled += n;
    fed += n;
  }
}

// Cuts `input` into at most eight arguments, writes them as one command into a buffer of
// `capacity` bytes, and reads the command back as a reply.
void check_command(std::string_view input, std::size_t capacity, floodgate::fuzz::Splits& s) {
  std::string_view args[Reply::kMaxElements];
  std::size_t count = 0;
  for (std::size_t pos = 0; pos < input.size() && count < Reply::kMaxElements; ++count) {
    const std::size_t n = s.next(input.size() - pos);
    args[count] = input.substr(pos, n);
    pos += n;
  }
  if (count == 0) args[count++] = "PING";
  const std::span<const std::string_view> command(args, count);
  std::vector<char> buf(capacity + 1, '#');
  CommandWriter w(std::span<char>(buf.data(), capacity));
  const std::size_t n = w.write(command);
  check(buf[capacity] == '#', "the writer wrote past its buffer");
  check(n == w.size(), "the bytes written are not the size");
  const std::size_t needed = CommandWriter::encoded_size(command);
  check(n == 0 ? needed > capacity : n == needed, "neither the whole command nor nothing");
  if (n == 0) return;
  Reply r;
  const Parsed p = ReplyParser().parse(w.written(), r);
  check(p.status == ParseStatus::reply && p.consumed == n, "a command does not parse back");
  check(r.type() == ReplyType::array && r.count == count, "a command is not its arguments");
  for (std::size_t i = 0; i < count; ++i) {
    check(r.items[i].type == ReplyType::bulk_string && r.items[i].text == args[i],
          "an argument changed");
  }
}

ReplyLimits limits_for(uint8_t choice) {
  switch (choice & 3) {
    case 1:
      return ReplyLimits{.max_bulk_bytes = 16, .max_line_bytes = 8};
    case 2:
      return ReplyLimits{.max_bulk_bytes = 0, .max_line_bytes = 0};
    case 3:
      return ReplyLimits{.max_bulk_bytes = 300, .max_line_bytes = 64};
    default:
      return ReplyLimits{};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const ReplyParser parser(limits_for(data[0]));
  const std::size_t cut_at = data[1];
  floodgate::fuzz::Splits splits(data[0] >> 2);
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  // Whole, straight from libFuzzer's exactly sized copy: the reference transcript.
  Transcript whole;
  for (std::string_view rest = input;;) {
    Reply r;
    const Parsed p = parser.parse(std::span<const char>(rest.data(), rest.size()), r);
    if (p.status == ParseStatus::need_more) break;
    if (p.status == ParseStatus::protocol_error) {
      check(p.error_offset < rest.size(), "an error at a byte not given");
      whole.end = p.status;
      whole.error = p.error;
      whole.error_at = input.size() - rest.size() + p.error_offset;
      break;
    }
    check_reply(r, p, rest.size(), rest.data(), parser.limits());
    whole.replies.push_back(p.consumed);
    rest.remove_prefix(p.consumed);
  }

  const std::size_t cut = input.size() * cut_at / 255;
  bool first = true;
  const Transcript halves = parse_in_pieces(parser, input, [&](std::size_t remaining) {
    const std::size_t n = first && cut > 0 ? cut : remaining;
    first = false;
    return n;
  });
  check(halves == whole, "two pieces parse differently from the whole");
  const Transcript pieces =
      parse_in_pieces(parser, input, [&](std::size_t remaining) { return splits.next(remaining); });
  check(pieces == whole, "random pieces parse differently from the whole");

  check_command(input.substr(0, 512), input.size() * cut_at / 255 % 600, splits);
  return 0;
}
