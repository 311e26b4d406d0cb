#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/http/parser.h"
#include "http_test_support.h"

namespace floodgate::http {
namespace {

using testing::BodySink;
using testing::Message;
using testing::Result;

constexpr Parser::Kind kRequest = Parser::Kind::request;

const std::string kGet =
    "GET /path/to?q=1&r=%20 HTTP/1.1\r\n"
    "Host: example.com\r\n"
    "User-Agent: test/1.0\r\n"
    "Accept: */*\r\n"
    "X-Empty:\r\n"
    "X-Multi: a, b,  c\r\n"
    "\r\n";

// Everything a caller reads from a completed head, for comparing two parses.
struct HeadFacts {
  std::string method, target;
  int major, minor;
  std::size_t head_end, line_end;
  bool keep_alive, chunked, has_length;
  uint64_t length;
  std::vector<std::string> fields;
  bool operator==(const HeadFacts&) const = default;
};

HeadFacts facts_of(const Message& m) {
  const Parser& p = m.parser();
  return {std::string(p.method_name()),
          std::string(p.target()),
          p.http_major(),
          p.http_minor(),
          p.head_end(),
          p.request_line_end(),
          p.keep_alive(),
          p.chunked(),
          p.has_content_length(),
          p.content_length(),
          m.fields()};
}

// The reason a request is refused with at the head, or Reason::none when its head parses.
Reason head_error(std::string_view bytes, HeadLimits limits = {}) {
  Message m(kRequest, bytes, limits);
  const Result r = m.parse_head();
  if (r == Result::error) return m.parser().error_reason();
  EXPECT_EQ(r, Result::head_done);
  return Reason::none;
}

// A request whose request-target is exactly `n` bytes.
std::string with_target_bytes(std::size_t n) {
  return "GET /" + std::string(n - 1, 'u') + " HTTP/1.1\r\nHost: a\r\n\r\n";
}

// A request whose header section (after the request line, final CRLF included) is exactly
// `n` bytes.
std::string with_header_section_bytes(std::size_t n) {
  const std::string fixed = "Host: a\r\nX-Pad: \r\n\r\n";
  std::string section = "Host: a\r\nX-Pad: " + std::string(n - fixed.size(), 'p') + "\r\n\r\n";
  EXPECT_EQ(section.size(), n);
  return "GET / HTTP/1.1\r\n" + section;
}

// A request with exactly `n` header fields.
std::string with_fields(std::size_t n) {
  std::string s = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (std::size_t i = 1; i < n; ++i) s += "X-F" + std::to_string(i) + ": v\r\n";
  return s + "\r\n";
}

TEST(RequestParser, ParsesRequestLineAndFields) {
  Message m(kRequest, kGet);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  const Parser& p = m.parser();
  EXPECT_EQ(p.method(), HTTP_GET);
  EXPECT_EQ(p.method_name(), "GET");
  EXPECT_EQ(p.target(), "/path/to?q=1&r=%20");
  EXPECT_EQ(p.http_major(), 1);
  EXPECT_EQ(p.http_minor(), 1);
  EXPECT_EQ(p.head_end(), kGet.size());
  EXPECT_EQ(p.request_line_end(), kGet.find("\r\n") + 2);
  EXPECT_TRUE(p.keep_alive());
  EXPECT_FALSE(p.chunked());
  EXPECT_FALSE(p.has_content_length());
  EXPECT_EQ(m.fields(),
            (std::vector<std::string>{"Host: example.com", "User-Agent: test/1.0", "Accept: */*",
                                      "X-Empty: ", "X-Multi: a, b,  c"}));
}

TEST(RequestParser, TheRequestHeadCarriesWhatTheRequestPathReads) {
  Message m(kRequest, kGet);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  const RequestHead h = m.parser().request_head();
  EXPECT_TRUE(h.complete());
  EXPECT_EQ(h.method, HTTP_GET);
  EXPECT_EQ(h.method_name, "GET");
  EXPECT_EQ(h.target, "/path/to?q=1&r=%20");
  EXPECT_EQ(h.scheme, "");     // HTTP/1: the listener says it
  EXPECT_EQ(h.authority, "");  // HTTP/1: Host is a field
  EXPECT_EQ(h.protocol(), "HTTP/1.1");
  EXPECT_EQ(h.body, BodyFraming::none);
  EXPECT_TRUE(h.keep_alive);
  ASSERT_EQ(h.field_count(), 5u);
  EXPECT_EQ(h.field_name(0), "Host");
  EXPECT_EQ(h.field_value(0), "example.com");
  EXPECT_EQ(h.field_kind(0), Field::host);
  EXPECT_EQ(h.field_value(4), "a, b,  c");
  EXPECT_TRUE(h.has(bit(Field::host)));
  EXPECT_FALSE(h.has(bit(Field::transfer_encoding)));
}

TEST(RequestParser, TheRequestHeadSaysHowTheBodyIsFramed) {
  const auto framing = [](std::string_view text) {
    Message m(kRequest, text);
    EXPECT_EQ(m.parse_head(), Result::head_done) << text;
    return m.parser().request_head();
  };
  const RequestHead length = framing("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n");
  EXPECT_EQ(length.body, BodyFraming::length);
  EXPECT_EQ(length.content_length, 12u);
  const RequestHead empty = framing("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(empty.body, BodyFraming::none);
  const RequestHead chunked =
      framing("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(chunked.body, BodyFraming::chunked);
  EXPECT_TRUE(chunked.chunked());
  const RequestHead old = framing("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.protocol(), "HTTP/1.0");
  EXPECT_FALSE(old.keep_alive);
  EXPECT_FALSE(RequestHead{}.complete());
}

TEST(RequestParser, HeadFedByteByByteGivesTheSameFacts) {
  Message whole(kRequest, kGet);
  ASSERT_EQ(whole.parse_head(), Result::head_done);
  Message bytewise(kRequest, kGet);
  ASSERT_EQ(bytewise.parse_head_in_steps(1), Result::head_done);
  EXPECT_EQ(facts_of(bytewise), facts_of(whole));
}

TEST(RequestParser, HeadSplitAtEveryBoundaryGivesTheSameFacts) {
  Message whole(kRequest, kGet);
  ASSERT_EQ(whole.parse_head(), Result::head_done);
  for (std::size_t split = 1; split < kGet.size(); ++split) {
    Message m(kRequest, kGet);
    ASSERT_EQ(m.parser().parse_head(split), Result::need_more) << split;
    ASSERT_EQ(m.parse_head(), Result::head_done) << split;
    EXPECT_EQ(facts_of(m), facts_of(whole)) << split;
  }
}

TEST(RequestParser, HeadInProgressAsksForMore) {
  Message m(kRequest, kGet.substr(0, kGet.size() - 1));
  EXPECT_EQ(m.parse_head(), Result::need_more);
  EXPECT_EQ(m.parser().parsed_bytes(), kGet.size() - 1);
}

TEST(RequestParser, AnExtensionMethodIsParsedAndKeptAsSent) {
  const std::string query = "QUERY /search HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  Message m(kRequest, query);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  const Parser& p = m.parser();
  EXPECT_EQ(p.method_name(), "QUERY");
  EXPECT_TRUE(p.extension_method());
  EXPECT_EQ(p.method(), HTTP_POST);  // neither safe nor idempotent to floodgate
  EXPECT_EQ(p.target(), "/search");
  EXPECT_EQ(p.content_length(), 5U);
  EXPECT_EQ(p.head_end(), query.size() - 5);
  EXPECT_EQ(p.request_line_end(), query.find("\r\n") + 2);
}

TEST(RequestParser, AnExtensionMethodSplitAtEveryBoundaryGivesTheSameFacts) {
  const std::string req = "VERSION-CONTROL /doc HTTP/1.1\r\nHost: a\r\n\r\n";
  Message whole(kRequest, req);
  ASSERT_EQ(whole.parse_head(), Result::head_done);
  for (std::size_t split = 1; split < req.size(); ++split) {
    Message m(kRequest, req);
    ASSERT_EQ(m.parser().parse_head(split), Result::need_more) << split;
    ASSERT_EQ(m.parse_head(), Result::head_done) << split;
    EXPECT_EQ(facts_of(m), facts_of(whole)) << split;
  }
  EXPECT_EQ(whole.parser().method_name(), "VERSION-CONTROL");
}

TEST(RequestParser, AnExtensionMethodAfterEmptyLinesIsParsed) {
  const std::string req = "\r\n\r\nQUERY /q HTTP/1.1\r\nHost: a\r\n\r\n";
  Message m(kRequest, req);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().method_name(), "QUERY");
  EXPECT_EQ(m.parser().target(), "/q");
  Message bytewise(kRequest, req);
  ASSERT_EQ(bytewise.parse_head_in_steps(1), Result::head_done);
  EXPECT_EQ(facts_of(bytewise), facts_of(m));
}

// Found by the request fuzzer: llhttp 8.1 takes "CONNECT \n" as a request line whose target
// is empty and reports no target; floodgate has no request line to forward.
TEST(RequestParser, ARequestLineWithAnEmptyTargetIsRefused) {
  EXPECT_EQ(head_error("CONNECT \n\n"), Reason::bad_request);
  EXPECT_EQ(head_error("\n\n\nCONNECT \n\n\n"), Reason::bad_request);
  EXPECT_EQ(head_error("QUERY \n\n"), Reason::bad_request);
  EXPECT_EQ(head_error("GET \r\n\r\n"), Reason::bad_request);
}

TEST(RequestParser, AKnownMethodIsNotAnExtension) {
  Message m(kRequest, "PROPFIND /dav HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_FALSE(m.parser().extension_method());
  EXPECT_EQ(m.parser().method(), HTTP_PROPFIND);
  EXPECT_EQ(m.parser().method_name(), "PROPFIND");
}

TEST(RequestParser, AMethodThatIsNotATokenOrTooLongIsRefused) {
  EXPECT_EQ(head_error("G@T / HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(head_error("QUERY\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(head_error(std::string(33, 'M') + " / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(head_error(std::string(32, 'M') + " / HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::none);
  EXPECT_EQ(head_error(" / HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(RequestParser, APipelinedExtensionMethodAfterAKnownOneIsParsed) {
  const std::string two = "GET /a HTTP/1.1\r\nHost: a\r\n\r\nQUERY /b HTTP/1.1\r\nHost: a\r\n\r\n";
  Message m(kRequest, two);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().method_name(), "GET");
  std::size_t consumed = 0;
  BodySink sink;
  ASSERT_EQ(m.parser().parse_body(m.data() + m.parser().head_end(), 0, consumed, sink),
            Result::message_done);
  m.begin_next(m.parser().head_end());
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().method_name(), "QUERY");
  EXPECT_EQ(m.parser().target(), "/b");
}

TEST(RequestParser, ReportsContentLengthAndChunked) {
  Message cl(kRequest, "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n");
  ASSERT_EQ(cl.parse_head(), Result::head_done);
  EXPECT_TRUE(cl.parser().has_content_length());
  EXPECT_EQ(cl.parser().content_length(), 42u);
  EXPECT_FALSE(cl.parser().chunked());
  Message te(kRequest, "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(te.parse_head(), Result::head_done);
  EXPECT_TRUE(te.parser().chunked());
  EXPECT_FALSE(te.parser().has_content_length());
}

TEST(RequestParser, Http10IsNotKeepAliveUnlessAsked) {
  Message plain(kRequest, "GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(plain.parse_head(), Result::head_done);
  EXPECT_EQ(plain.parser().http_minor(), 0);
  EXPECT_FALSE(plain.parser().keep_alive());
  Message asked(kRequest, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(asked.parse_head(), Result::head_done);
  EXPECT_TRUE(asked.parser().keep_alive());
}

TEST(RequestParser, Http11ConnectionCloseIsNotKeepAlive) {
  Message m(kRequest, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_FALSE(m.parser().keep_alive());
}

// --- limits ---------------------------------------------------------------------------------

TEST(RequestParser, TargetOfExactlyMaxUriBytesPasses) {
  EXPECT_EQ(head_error(with_target_bytes(64), {.max_uri_bytes = 64}), Reason::none);
  EXPECT_EQ(head_error(with_target_bytes(8192)), Reason::none);
}

TEST(RequestParser, TargetOneByteOverMaxUriBytesIsUriTooLong) {
  EXPECT_EQ(head_error(with_target_bytes(65), {.max_uri_bytes = 64}), Reason::uri_too_long);
  EXPECT_EQ(head_error(with_target_bytes(8193)), Reason::uri_too_long);
}

TEST(RequestParser, UriLimitHoldsWhenTheTargetArrivesByteByByte) {
  Message ok(kRequest, with_target_bytes(64), {.max_uri_bytes = 64});
  EXPECT_EQ(ok.parse_head_in_steps(1), Result::head_done);
  Message over(kRequest, with_target_bytes(65), {.max_uri_bytes = 64});
  EXPECT_EQ(over.parse_head_in_steps(1), Result::error);
  EXPECT_EQ(over.parser().error_reason(), Reason::uri_too_long);
}

TEST(RequestParser, HeaderSectionOfExactlyMaxHeaderBytesPasses) {
  EXPECT_EQ(head_error(with_header_section_bytes(100), {.max_header_bytes = 100}), Reason::none);
  EXPECT_EQ(head_error(with_header_section_bytes(16384)), Reason::none);
}

TEST(RequestParser, HeaderSectionOneByteOverMaxHeaderBytesIsHeaderTooLarge) {
  EXPECT_EQ(head_error(with_header_section_bytes(101), {.max_header_bytes = 100}),
            Reason::header_too_large);
  EXPECT_EQ(head_error(with_header_section_bytes(16385)), Reason::header_too_large);
}

TEST(RequestParser, HeaderByteLimitHoldsAtEveryFeedSize) {
  for (std::size_t step : {1u, 2u, 7u, 50u}) {
    Message ok(kRequest, with_header_section_bytes(100), {.max_header_bytes = 100});
    EXPECT_EQ(ok.parse_head_in_steps(step), Result::head_done) << step;
    Message over(kRequest, with_header_section_bytes(101), {.max_header_bytes = 100});
    EXPECT_EQ(over.parse_head_in_steps(step), Result::error) << step;
    EXPECT_EQ(over.parser().error_reason(), Reason::header_too_large) << step;
  }
}

TEST(RequestParser, HeaderByteLimitIgnoresTheRequestLine) {
  // A long request line does not count against the header section.
  const std::string req = "GET /" + std::string(500, 'x') + " HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(head_error(req, {.max_header_bytes = 11}), Reason::none);
  EXPECT_EQ(head_error(req, {.max_header_bytes = 10}), Reason::header_too_large);
}

TEST(RequestParser, HeaderByteLimitIgnoresPipelinedBytesAfterTheHead) {
  const std::string next = "GET /next HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(head_error(with_header_section_bytes(100) + next, {.max_header_bytes = 100}),
            Reason::none);
}

TEST(RequestParser, ExactlyMaxHeadersFieldsPass) {
  Message m(kRequest, with_fields(4), {.max_headers = 4});
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().field_count(), 4u);
  EXPECT_EQ(head_error(with_fields(128)), Reason::none);
}

TEST(RequestParser, OneFieldOverMaxHeadersIsHeaderTooLarge) {
  EXPECT_EQ(head_error(with_fields(5), {.max_headers = 4}), Reason::header_too_large);
  EXPECT_EQ(head_error(with_fields(129)), Reason::header_too_large);
  Message bytewise(kRequest, with_fields(5), {.max_headers = 4});
  EXPECT_EQ(bytewise.parse_head_in_steps(1), Result::error);
  EXPECT_EQ(bytewise.parser().error_reason(), Reason::header_too_large);
}

// --- malformed and ambiguous requests -------------------------------------------------------

TEST(RequestParser, BareLfIsBadRequest) {
  EXPECT_EQ(head_error("GET / HTTP/1.1\nHost: a\n\n"), Reason::bad_request);
  EXPECT_EQ(head_error("GET / HTTP/1.1\r\nHost: a\n\r\n"), Reason::bad_request);
  EXPECT_EQ(head_error("GET / HTTP/1.1\r\nHost: a\r\n\n"), Reason::bad_request);
}

TEST(RequestParser, ContentLengthWithTransferEncodingIsBadRequest) {
  EXPECT_EQ(head_error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(head_error("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                       "Content-Length: 5\r\n\r\n"),
            Reason::bad_request);
}

TEST(RequestParser, DifferingDuplicateContentLengthIsBadRequest) {
  EXPECT_EQ(head_error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                       "Content-Length: 6\r\n\r\n"),
            Reason::bad_request);
}

TEST(RequestParser, NonNumericContentLengthIsBadRequest) {
  EXPECT_EQ(head_error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5x\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(head_error("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
            Reason::bad_request);
}

TEST(RequestParser, SpaceBeforeTheColonIsBadRequest) {
  EXPECT_EQ(head_error("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), Reason::bad_request);
}

TEST(RequestParser, GarbageRequestLineIsBadRequest) {
  EXPECT_EQ(head_error("HELLO\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(head_error("GET / HTTX/1.1\r\n\r\n"), Reason::bad_request);
}

TEST(RequestParser, ObsFoldIsBadRequest) {
  // RFC 9112 section 5.2: reject, or replace the fold with spaces; the fold's value pieces are
  // not contiguous, so recording them as one span would forward a premature end of head.
  EXPECT_EQ(head_error("GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\nY: z\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(head_error("GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n\ttwo\r\n\r\n"),
            Reason::bad_request);
  Message bytewise(kRequest, "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\n\r\n");
  EXPECT_EQ(bytewise.parse_head_in_steps(1), Result::error);
  EXPECT_EQ(bytewise.parser().error_reason(), Reason::bad_request);
}

TEST(RequestParser, InvalidChunkSizeIsBadRequest) {
  for (const char* chunk : {"zz\r\n", "-1\r\n", "\r\n", "fffffffffffffffff\r\n"}) {
    Message m(kRequest,
              std::string("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n") +
                  chunk + "hello\r\n0\r\n\r\n");
    ASSERT_EQ(m.parse_head(), Result::head_done);
    BodySink sink;
    std::size_t consumed = 0;
    EXPECT_EQ(m.parse_body(sink, consumed), Result::error) << chunk;
    EXPECT_EQ(m.parser().error_reason(), Reason::bad_request) << chunk;
  }
}

// --- bodies ---------------------------------------------------------------------------------

TEST(RequestParser, BodylessRequestCompletesOnAnEmptyBodyFeed) {
  Message m(kRequest, kGet);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 99;
  EXPECT_EQ(m.parser().parse_body(m.data() + m.parser().head_end(), 0, consumed, sink),
            Result::message_done);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(sink.pieces, 0);
}

TEST(RequestParser, ContentLengthBodyArrivesWholeAtAnyFeedSize) {
  const std::string body = "0123456789abcdefghij";
  const std::string req =
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n" + body + "GET / HT";
  for (std::size_t step = 1; step <= body.size() + 8; ++step) {
    Message m(kRequest, req);
    ASSERT_EQ(m.parse_head(), Result::head_done);
    BodySink sink;
    std::size_t consumed = 0;
    EXPECT_EQ(m.parse_body(sink, consumed, step), Result::message_done) << step;
    EXPECT_EQ(sink.body, body) << step;
    EXPECT_EQ(consumed, body.size()) << step;
    EXPECT_EQ(sink.empty_pieces, 0) << step;
  }
}

const std::string kChunkedHead =
    "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
const std::string kChunkedBody =
    "5\r\nhello\r\n"
    "1;ext=\"v\"\r\n \r\n"
    "A\r\n0123456789\r\n"
    "0\r\n"
    "X-Trailer: t\r\n"
    "X-Other: u\r\n"
    "\r\n";
const std::string kNextRequest = "GET /next HTTP/1.1\r\nHost: a\r\n\r\n";

TEST(RequestParser, ChunkedBodySplitAtEveryBoundaryYieldsTheSameBytes) {
  const std::string all = kChunkedHead + kChunkedBody + kNextRequest;
  for (std::size_t split = 0; split <= kChunkedBody.size(); ++split) {
    Message m(kRequest, all);
    ASSERT_EQ(m.parse_head(), Result::head_done);
    const char* body = m.data() + m.parser().head_end();
    BodySink sink;
    std::size_t first = 0, second = 0;
    ASSERT_EQ(m.parser().parse_body(body, split, first, sink),
              split == kChunkedBody.size() ? Result::message_done : Result::need_more)
        << split;
    EXPECT_EQ(first, split);
    if (split < kChunkedBody.size()) {
      ASSERT_EQ(m.parser().parse_body(body + first, all.size() - m.parser().head_end() - first,
                                      second, sink),
                Result::message_done)
          << split;
    }
    EXPECT_EQ(sink.body, "hello 0123456789") << split;
    EXPECT_EQ(sink.empty_pieces, 0) << split;
    EXPECT_EQ(first + second, kChunkedBody.size()) << split;
  }
}

TEST(RequestParser, ChunkedBodyFedByteByByteNeverHandsTheSinkAnEmptyPiece) {
  Message m(kRequest, kChunkedHead + kChunkedBody);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed, 1), Result::message_done);
  EXPECT_EQ(sink.body, "hello 0123456789");
  EXPECT_EQ(sink.empty_pieces, 0);
  EXPECT_EQ(consumed, kChunkedBody.size());
}

TEST(RequestParser, TrailersAreConsumedAndNotRecordedAsFields) {
  Message m(kRequest, kChunkedHead + kChunkedBody);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  const std::vector<std::string> head_fields = m.fields();
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(m.parse_body(sink, consumed, 3), Result::message_done);
  EXPECT_EQ(m.fields(), head_fields);
  EXPECT_TRUE(m.values("X-Trailer").empty());
  EXPECT_EQ(sink.body.find("X-Trailer"), std::string::npos);
}

TEST(RequestParser, TrailersDoNotCountAgainstMaxHeaders) {
  // The head fills every field slot; trailer fields must not write past them.
  Message m(kRequest,
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            "1\r\nx\r\n0\r\nT1: a\r\nT2: b\r\nT3: c\r\n\r\n",
            {.max_headers = 2});
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed), Result::message_done);
  EXPECT_EQ(m.parser().field_count(), 2u);
}

// --- pipelining -----------------------------------------------------------------------------

TEST(RequestParser, PipelinedHeadStopsAtTheEndOfTheFirstHead) {
  const std::string first = "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
  Message m(kRequest, first + "hello" + kNextRequest);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().head_end(), first.size());
  EXPECT_EQ(m.parser().parsed_bytes(), first.size());
  EXPECT_EQ(m.parser().target(), "/one");
}

TEST(RequestParser, PipelinedBodyStopsAtTheEndOfTheMessage) {
  const std::string first = "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
  const std::string all = first + "hello" + kNextRequest;
  Message m(kRequest, all);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(
      m.parser().parse_body(m.data() + first.size(), all.size() - first.size(), consumed, sink),
      Result::message_done);
  EXPECT_EQ(consumed, 5u);
  EXPECT_EQ(sink.body, "hello");
}

TEST(RequestParser, BeginOnTheRestParsesTheNextPipelinedRequest) {
  const std::string one = "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  const std::string two = "GET /two HTTP/1.1\r\nHost: b\r\n\r\n";
  const std::string three = kChunkedHead + kChunkedBody;
  const std::string all = one + two + three + kNextRequest;
  Message m(kRequest, all);
  std::size_t offset = 0;
  std::vector<std::string> targets, bodies;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) m.begin_next(offset);
    ASSERT_EQ(m.parse_head(), Result::head_done) << i;
    targets.emplace_back(m.parser().target());
    EXPECT_EQ(m.values("Host").size(), 1u) << i;
    BodySink sink;
    std::size_t consumed = 0;
    const std::size_t body_at = offset + m.parser().head_end();
    ASSERT_EQ(m.parser().parse_body(m.data() + body_at, all.size() - body_at, consumed, sink),
              Result::message_done)
        << i;
    EXPECT_LE(consumed, all.size() - body_at);
    bodies.push_back(sink.body);
    offset = body_at + consumed;
  }
  EXPECT_EQ(offset, all.size());
  EXPECT_EQ(targets, (std::vector<std::string>{"/one", "/two", "/up", "/next"}));
  EXPECT_EQ(bodies, (std::vector<std::string>{"hello", "", "hello 0123456789", ""}));
}

// --- field recording ------------------------------------------------------------------------

TEST(RequestParser, EmptyHeaderValuesDoNotMergeWithTheNextFieldName) {
  const std::string req =
      "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Next: v\r\nX-Blank:   \r\nX-Last:\r\n\r\n";
  for (std::size_t step : {std::size_t{1}, req.size()}) {
    Message m(kRequest, req);
    ASSERT_EQ(m.parse_head_in_steps(step), Result::head_done);
    EXPECT_EQ(m.fields(), (std::vector<std::string>{"Host: a", "X-Empty: ", "X-Next: v",
                                                    "X-Blank: ", "X-Last: "}))
        << step;
  }
}

TEST(RequestParser, LeadingWhitespaceIsNotPartOfAValue) {
  Message m(kRequest, "GET / HTTP/1.1\r\nHost:  \t a.example\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.values("host"), (std::vector<std::string>{"a.example"}));
}

TEST(RequestParser, BeginResetsEverythingFromThePreviousMessage) {
  Message m(kRequest, kGet + "POST /b HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(m.parser().parse_body(m.data() + kGet.size(), 0, consumed, sink), Result::message_done);
  m.begin_next(kGet.size());
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().target(), "/b");
  EXPECT_EQ(m.parser().http_minor(), 0);
  EXPECT_EQ(m.fields(), (std::vector<std::string>{"Content-Length: 0"}));
  EXPECT_EQ(m.parser().error_reason(), Reason::none);
}

}  // namespace
}  // namespace floodgate::http
