// RESP2: the bytes the command writer produces, and the reply parser on every reply type, on
// replies cut at every byte, on pipelines and on every protocol error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/heap_count.h"
#include "floodgate/redis/command_writer.h"
#include "floodgate/redis/reply_parser.h"

namespace floodgate::redis {
namespace {

using namespace std::string_view_literals;

std::span<const char> bytes(std::string_view s) {
  return {s.data(), s.size()};
}

// Parses `input` alone, expecting one reply of exactly its size.
Reply parse_whole(std::string_view input, ReplyLimits limits = {}) {
  Reply r;
  const Parsed p = ReplyParser(limits).parse(bytes(input), r);
  EXPECT_EQ(p.status, ParseStatus::reply) << input;
  EXPECT_EQ(p.consumed, input.size()) << input;
  return r;
}

Parsed parse_error(std::string_view input, ReplyLimits limits = {}) {
  Reply r;
  return ReplyParser(limits).parse(bytes(input), r);
}

void expect_same_value(const ReplyValue& a, const ReplyValue& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.integer, b.integer);
  EXPECT_EQ(a.text, b.text);
}

void expect_same(const Reply& a, const Reply& b) {
  expect_same_value(a.value, b.value);
  ASSERT_EQ(a.count, b.count);
  for (std::size_t i = 0; i < a.count; ++i) expect_same_value(a.items[i], b.items[i]);
}

// ---- The command writer ----

TEST(CommandWriter, EncodesACommandAsAnArrayOfBulkStrings) {
  char buf[64];
  CommandWriter w(buf);
  EXPECT_EQ(w.write({"PING"}), 14u);
  EXPECT_EQ(std::string_view(w.written().data(), w.size()), "*1\r\n$4\r\nPING\r\n");
}

TEST(CommandWriter, EncodesEvalshaWithKeysAndIntegerArguments) {
  char buf[256];
  CommandWriter w(buf);
  const std::string_view sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
  const std::size_t n =
      w.write({"EVALSHA", sha, IntegerArg(2).view(), "{q}:b", "{q}:s",
               IntegerArg(int64_t{-5}).view(), IntegerArg(uint64_t{1000}).view()});
  const std::string_view expected =
      "*7\r\n$7\r\nEVALSHA\r\n$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n$1\r\n2\r\n"
      "$5\r\n{q}:b\r\n$5\r\n{q}:s\r\n$2\r\n-5\r\n$4\r\n1000\r\n";
  EXPECT_EQ(n, expected.size());
  EXPECT_EQ(std::string_view(buf, w.size()), expected);
}

TEST(CommandWriter, ArgumentsAreBinarySafeAndMayBeEmpty) {
  char buf[64];
  CommandWriter w(buf);
  ASSERT_GT(w.write({"SET", "k\r\n"sv, "\0x"sv, ""}), 0u);
  EXPECT_EQ(std::string_view(buf, w.size()),
            "*4\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n\0x\r\n$0\r\n\r\n"sv);
}

TEST(CommandWriter, AppendsCommandsOneAfterAnotherForAPipeline) {
  char buf[128];
  CommandWriter w(buf);
  const std::size_t a = w.write({"AUTH", "secret"});
  const std::size_t b = w.write({"SELECT", IntegerArg(3).view()});
  const std::size_t c = w.write({"SCRIPT", "LOAD", "return 1"});
  EXPECT_EQ(w.size(), a + b + c);
  EXPECT_EQ(std::string_view(buf, w.size()),
            "*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"
            "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n");
  EXPECT_EQ(w.room(), sizeof buf - w.size());
}

TEST(CommandWriter, ACommandThatDoesNotFitWritesNothing) {
  const std::string_view ping = "*1\r\n$4\r\nPING\r\n";
  std::string buf(ping.size(), '#');
  CommandWriter w(std::span<char>(buf.data(), ping.size() - 1));
  EXPECT_EQ(w.write({"PING"}), 0u);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(buf, std::string(ping.size(), '#'));

  CommandWriter exact(std::span<char>(buf.data(), buf.size()));
  EXPECT_EQ(exact.write({"PING"}), ping.size());
  EXPECT_EQ(exact.room(), 0u);
  EXPECT_EQ(exact.write({"PING"}), 0u);  // full: the first command stays whole
  EXPECT_EQ(buf, ping);
}

TEST(CommandWriter, ACommandWithoutArgumentsIsRefused) {
  char buf[16];
  CommandWriter w(buf);
  EXPECT_EQ(w.write({}), 0u);
  EXPECT_EQ(w.size(), 0u);
}

TEST(CommandWriter, EncodedSizeIsTheBytesWrittenOrSizeMaxOverTheLimit) {
  const std::string_view args[] = {"EXPIRE", "key", "10"};
  char buf[64];
  CommandWriter w(buf);
  EXPECT_EQ(CommandWriter::encoded_size(args), w.write(args));
  EXPECT_EQ(CommandWriter::encoded_size(args, w.size()), w.size());
  EXPECT_EQ(CommandWriter::encoded_size(args, w.size() - 1), SIZE_MAX);
  EXPECT_EQ(CommandWriter::encoded_size({}), 0u);
}

TEST(CommandWriter, ClearStartsAgainAtTheFirstByte) {
  char buf[32];
  CommandWriter w(buf);
  w.write({"PING"});
  w.clear();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.write({"ECHO", "a"}), std::string_view("*2\r\n$4\r\nECHO\r\n$1\r\na\r\n").size());
  EXPECT_EQ(std::string_view(buf, w.size()), "*2\r\n$4\r\nECHO\r\n$1\r\na\r\n");
}

TEST(IntegerArg, FormatsEveryIntegerWidthInDecimal) {
  EXPECT_EQ(IntegerArg(0).view(), "0");
  EXPECT_EQ(IntegerArg(std::numeric_limits<int64_t>::min()).view(), "-9223372036854775808");
  EXPECT_EQ(IntegerArg(std::numeric_limits<uint64_t>::max()).view(), "18446744073709551615");
  EXPECT_EQ(IntegerArg(uint16_t{65535}).view(), "65535");
  EXPECT_EQ(IntegerArg(-1).view(), "-1");
}

// ---- The reply parser: every type ----

TEST(ReplyParser, ParsesASimpleString) {
  const Reply r = parse_whole("+OK\r\n");
  EXPECT_EQ(r.type(), ReplyType::simple_string);
  EXPECT_EQ(r.value.text, "OK");
  EXPECT_EQ(parse_whole("+\r\n").value.text, "");
}

TEST(ReplyParser, ParsesTheNoscriptErrorAndItsCode) {
  const Reply r = parse_whole("-NOSCRIPT No matching script. Please use EVAL.\r\n");
  EXPECT_EQ(r.type(), ReplyType::error);
  EXPECT_EQ(r.value.text, "NOSCRIPT No matching script. Please use EVAL.");
  EXPECT_EQ(error_code(r.value.text), "NOSCRIPT");
  EXPECT_EQ(error_code("ERR"), "ERR");
}

TEST(ReplyParser, ParsesIntegersAcrossTheWholeInt64Range) {
  EXPECT_EQ(parse_whole(":0\r\n").value.integer, 0);
  EXPECT_EQ(parse_whole(":1500\r\n").value.integer, 1500);
  EXPECT_EQ(parse_whole(":-1\r\n").value.integer, -1);
  EXPECT_EQ(parse_whole(":9223372036854775807\r\n").value.integer,
            std::numeric_limits<int64_t>::max());
  const Reply min = parse_whole(":-9223372036854775808\r\n");
  EXPECT_EQ(min.type(), ReplyType::integer);
  EXPECT_EQ(min.value.integer, std::numeric_limits<int64_t>::min());
}

TEST(ReplyParser, ParsesBulkStringsBinarySafe) {
  const Reply sha = parse_whole("$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n");
  EXPECT_EQ(sha.type(), ReplyType::bulk_string);
  EXPECT_EQ(sha.value.text, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  EXPECT_EQ(parse_whole("$0\r\n\r\n").value.text, "");
  EXPECT_EQ(parse_whole("$4\r\n\r\n\0$\r\n"sv).value.text, "\r\n\0$"sv);
}

TEST(ReplyParser, ParsesTheNullBulkStringAndTheNullArray) {
  EXPECT_EQ(parse_whole("$-1\r\n").type(), ReplyType::null_bulk);
  const Reply r = parse_whole("*-1\r\n");
  EXPECT_EQ(r.type(), ReplyType::null_array);
  EXPECT_TRUE(r.elements().empty());
}

TEST(ReplyParser, ParsesAnArrayOfIntegers) {
  const Reply r = parse_whole("*3\r\n:1\r\n:0\r\n:1500\r\n");
  ASSERT_EQ(r.type(), ReplyType::array);
  ASSERT_EQ(r.elements().size(), 3u);
  for (const ReplyValue& v : r.elements()) EXPECT_EQ(v.type, ReplyType::integer);
  EXPECT_EQ(r.elements()[0].integer, 1);
  EXPECT_EQ(r.elements()[1].integer, 0);
  EXPECT_EQ(r.elements()[2].integer, 1500);
}

TEST(ReplyParser, ParsesAnArrayOfMixedScalarsAndTheEmptyArray) {
  const Reply r = parse_whole("*5\r\n+OK\r\n-ERR no\r\n$3\r\nabc\r\n$-1\r\n:-7\r\n");
  ASSERT_EQ(r.elements().size(), 5u);
  EXPECT_EQ(r.elements()[0].type, ReplyType::simple_string);
  EXPECT_EQ(r.elements()[1].type, ReplyType::error);
  EXPECT_EQ(r.elements()[1].text, "ERR no");
  EXPECT_EQ(r.elements()[2].text, "abc");
  EXPECT_EQ(r.elements()[3].type, ReplyType::null_bulk);
  EXPECT_EQ(r.elements()[4].integer, -7);
  const Reply empty = parse_whole("*0\r\n");
  EXPECT_EQ(empty.type(), ReplyType::array);
  EXPECT_TRUE(empty.elements().empty());
}

TEST(ReplyParser, AnArrayMayHoldExactlyTheMostElements) {
  std::string input = "*" + std::to_string(Reply::kMaxElements) + "\r\n";
  for (std::size_t i = 0; i < Reply::kMaxElements; ++i) input += ":" + std::to_string(i) + "\r\n";
  const Reply r = parse_whole(input);
  ASSERT_EQ(r.elements().size(), Reply::kMaxElements);
  EXPECT_EQ(r.elements().back().integer, static_cast<int64_t>(Reply::kMaxElements - 1));
}

TEST(ReplyParser, TheLimitsAreInclusive) {
  const ReplyLimits limits{.max_bulk_bytes = 40, .max_line_bytes = 10};
  EXPECT_EQ(parse_whole("+" + std::string(10, 'a') + "\r\n", limits).value.text.size(), 10u);
  EXPECT_EQ(parse_whole("$40\r\n" + std::string(40, 'b') + "\r\n", limits).value.text.size(), 40u);
}

TEST(ReplyParser, TheLargestReplyTheLimitsAdmitIsMaxReplyBytesLong) {
  const ReplyLimits limits{.max_bulk_bytes = 100, .max_line_bytes = 10};
  std::string input = "*8\r\n";
  for (int i = 0; i < 8; ++i) input += "$100\r\n" + std::string(100, 'x') + "\r\n";
  parse_whole(input, limits);
  EXPECT_EQ(input.size(), limits.max_reply_bytes());
  EXPECT_EQ(ReplyLimits{.max_bulk_bytes = SIZE_MAX}.max_reply_bytes(), SIZE_MAX);
}

// ---- Pieces and pipelines ----

const std::string_view kReplies[] = {
    "+OK\r\n",
    "-NOSCRIPT No matching script. Please use EVAL.\r\n",
    ":-9223372036854775808\r\n",
    "$5\r\nab\r\nc\r\n",
    "$-1\r\n",
    "*-1\r\n",
    "*0\r\n",
    "*4\r\n:1\r\n$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n$-1\r\n-ERR x\r\n",
};

TEST(ReplyParser, AReplyCutAtEveryByteAsksForMoreUntilItIsWhole) {
  for (const std::string_view whole : kReplies) {
    const Reply expected = parse_whole(whole);
    for (std::size_t cut = 0; cut < whole.size(); ++cut) {
      // The first piece lands at one place; the caller then compacts (moves the bytes) and
      // appends the rest, as a transport does between reads.
      std::vector<char> first(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
      Reply r;
      EXPECT_EQ(ReplyParser().parse(first, r).status, ParseStatus::need_more)
          << whole << " cut at " << cut;
      std::vector<char> moved(whole.size() + 7, '#');
      std::memcpy(moved.data() + 7, whole.data(), whole.size());  // the first piece, then the rest
      const Parsed p = ReplyParser().parse(std::span<const char>(moved).subspan(7), r);
      ASSERT_EQ(p.status, ParseStatus::reply) << whole << " cut at " << cut;
      EXPECT_EQ(p.consumed, whole.size());
      expect_same(r, expected);
    }
  }
}

TEST(ReplyParser, PipelinedRepliesInOneBufferParseOneAfterAnotherInOrder) {
  std::string buffer;
  for (const std::string_view r : kReplies) buffer += r;
  buffer += "*2\r\n:1";  // the next reply has not all arrived
  std::span<const char> rest = bytes(buffer);
  const ReplyParser parser;
  for (const std::string_view whole : kReplies) {
    Reply r;
    const Parsed p = parser.parse(rest, r);
    ASSERT_EQ(p.status, ParseStatus::reply) << whole;
    ASSERT_EQ(p.consumed, whole.size()) << whole;
    expect_same(r, parse_whole(whole));
    rest = rest.subspan(p.consumed);
  }
  Reply r;
  EXPECT_EQ(parser.parse(rest, r).status, ParseStatus::need_more);
  EXPECT_EQ(parser.parse({}, r).status, ParseStatus::need_more);
}

// ---- Protocol errors ----

struct BadReply {
  std::string_view input;
  ProtocolError error;
  std::size_t offset;
};

const BadReply kBadReplies[] = {
    {"?\r\n", ProtocolError::unknown_type, 0},
    {"OK\r\n", ProtocolError::unknown_type, 0},
    {"_\r\n", ProtocolError::resp3_type, 0},
    {",1.5\r\n", ProtocolError::resp3_type, 0},
    {"#t\r\n", ProtocolError::resp3_type, 0},
    {"%1\r\n", ProtocolError::resp3_type, 0},
    {"~1\r\n", ProtocolError::resp3_type, 0},
    {">2\r\n", ProtocolError::resp3_type, 0},
    {"(12\r\n", ProtocolError::resp3_type, 0},
    {"!3\r\nERR\r\n", ProtocolError::resp3_type, 0},
    {"=3\r\ntxt\r\n", ProtocolError::resp3_type, 0},
    {"|1\r\n", ProtocolError::resp3_type, 0},
    {"+OK\n", ProtocolError::bare_line_feed, 3},
    {":12\n", ProtocolError::bare_line_feed, 3},
    {"+OK\rX", ProtocolError::bare_carriage_return, 4},
    {":1\r\r\n", ProtocolError::bare_carriage_return, 3},
    {"-E\r+OK\r\n", ProtocolError::bare_carriage_return, 3},
    {":\r\n", ProtocolError::bad_number, 1},
    {":-\r\n", ProtocolError::bad_number, 2},
    {":+1\r\n", ProtocolError::bad_number, 1},
    {": 1\r\n", ProtocolError::bad_number, 1},
    {":1 \r\n", ProtocolError::bad_number, 2},
    {":01\r\n", ProtocolError::bad_number, 2},
    {":-0\r\n", ProtocolError::bad_number, 3},
    {":-01\r\n", ProtocolError::bad_number, 3},
    {":1.0\r\n", ProtocolError::bad_number, 2},
    {"$01\r\nx\r\n", ProtocolError::bad_number, 2},
    {"*x\r\n", ProtocolError::bad_number, 1},
    {":9223372036854775808\r\n", ProtocolError::integer_overflow, 19},
    {":-9223372036854775809\r\n", ProtocolError::integer_overflow, 20},
    {":123456789012345678901234567890\r\n", ProtocolError::integer_overflow, 20},
    {"$99999999999999999999\r\n", ProtocolError::integer_overflow, 19},
    {"$-2\r\n", ProtocolError::bad_length, 4},
    {"*-2\r\n", ProtocolError::bad_length, 4},
    {"$65537\r\n", ProtocolError::bulk_too_long, 7},
    {"$3\r\nabcd\r\n", ProtocolError::bulk_unterminated, 7},
    {"$3\r\nabc\rX", ProtocolError::bulk_unterminated, 8},
    {"$0\r\n\n", ProtocolError::bulk_unterminated, 4},
    {"*9\r\n", ProtocolError::array_too_long, 3},
    {"*1\r\n*0\r\n", ProtocolError::nested_array, 4},
    {"*2\r\n:1\r\n*-1\r\n", ProtocolError::nested_array, 8},
    {"*2\r\n:1\r\n%0\r\n", ProtocolError::resp3_type, 8},
    {"*1\r\n$2\r\nab\n", ProtocolError::bulk_unterminated, 10},
};

TEST(ReplyParser, RefusesEveryMalformedReplyWithItsErrorAndOffset) {
  for (const BadReply& bad : kBadReplies) {
    const Parsed p = parse_error(bad.input);
    EXPECT_EQ(p.status, ParseStatus::protocol_error) << bad.input;
    EXPECT_EQ(p.error, bad.error) << bad.input << ": " << describe(p.error);
    EXPECT_EQ(p.error_offset, bad.offset) << bad.input;
    EXPECT_EQ(p.consumed, 0u) << bad.input;
  }
}

TEST(ReplyParser, AnErrorIsDecidedAtItsOffsetWhateverFollows) {
  for (const BadReply& bad : kBadReplies) {
    for (std::size_t n = 0; n <= bad.input.size(); ++n) {
      const Parsed p = parse_error(bad.input.substr(0, n));
      if (n <= bad.offset) {
        EXPECT_EQ(p.status, ParseStatus::need_more) << bad.input << " first " << n;
      } else {
        EXPECT_EQ(p.error, bad.error) << bad.input << " first " << n;
        EXPECT_EQ(p.error_offset, bad.offset) << bad.input << " first " << n;
      }
    }
  }
}

TEST(ReplyParser, RefusesALineOrBulkStringOverItsLimitBeforeItsEnd) {
  const ReplyLimits limits{.max_bulk_bytes = 40, .max_line_bytes = 10};
  const Parsed line = parse_error("-" + std::string(11, 'e'), limits);
  EXPECT_EQ(line.error, ProtocolError::line_too_long);
  EXPECT_EQ(line.error_offset, 11u);
  EXPECT_EQ(parse_error("+" + std::string(1025, 'a')).error, ProtocolError::line_too_long);
  EXPECT_EQ(parse_error("$41\r\n", limits).error, ProtocolError::bulk_too_long);
}

TEST(ReplyParser, DescribesEveryProtocolError) {
  for (auto e = static_cast<int>(ProtocolError::unknown_type);
       e <= static_cast<int>(ProtocolError::nested_array); ++e) {
    const std::string_view text = describe(static_cast<ProtocolError>(e));
    EXPECT_FALSE(text.empty());
    EXPECT_NE(text, "unknown protocol error") << e;
  }
}

// ---- No allocation ----

TEST(Resp, WritingCommandsAndParsingRepliesDoNotAllocate) {
  std::string pipeline;
  for (const std::string_view r : kReplies) pipeline += r;
  char out[512];
  const ReplyParser parser;
  std::size_t replies = 0;
  std::size_t written = 0;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int round = 0; round < 100; ++round) {
    CommandWriter w(out);
    written += w.write({"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", IntegerArg(2).view(),
                        "{q}:b", "{q}:s", IntegerArg(round).view()});
    std::span<const char> rest = bytes(pipeline);
    Reply r;
    for (Parsed p = parser.parse(rest, r); p.status == ParseStatus::reply;
         p = parser.parse(rest, r)) {
      ++replies;
      rest = rest.subspan(p.consumed);
    }
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
  EXPECT_EQ(replies, 100 * std::size(kReplies));
  EXPECT_GT(written, 0u);
}

TEST(HeapCount, SeesAnAllocationOnThisThread) {
  static void* volatile sink = nullptr;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  sink = ::operator new(8);
  EXPECT_EQ(counted_heap_allocations() - before, 1u);
  ::operator delete(sink);
}

}  // namespace
}  // namespace floodgate::redis
