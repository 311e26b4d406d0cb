// What floodgate's parser layer refuses on top of llhttp 8.1's strict mode (docs/http.md,
// "Requests" and "Bodies and framing"): empty field names, every obs-fold, HTTP/0.9 request
// lines, response transfer codings other than chunked, and chunk framing out of bounds.
#include <gtest/gtest.h>

#include <cstring>
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
constexpr Parser::Kind kResponse = Parser::Kind::response;

const std::string kChunkedRequest =
    "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
const std::string kChunkedResponse = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

// How a head ends when fed `step` bytes at a time: the reason it is refused with, or none.
Reason head_error(Parser::Kind kind, std::string_view bytes, std::size_t step = SIZE_MAX) {
  Message m(kind, bytes);
  const Result r = m.parse_head_in_steps(step);
  if (r == Result::error) return m.parser().error_reason();
  EXPECT_NE(r, Result::need_more) << bytes;
  return Reason::none;
}

std::string detail_of_head(Parser::Kind kind, std::string_view bytes) {
  Message m(kind, bytes);
  EXPECT_EQ(m.parse_head(), Result::error) << bytes;
  return m.parser().error_detail();
}

// A body parsed after `head`, fed `step` bytes at a time.
struct BodyOutcome {
  Result result;
  Reason reason;
  std::string detail;
  std::string data;  // what the sink was handed
};

BodyOutcome parse_body(const std::string& head, const std::string& body,
                       std::size_t step = SIZE_MAX) {
  Message m(head.starts_with("HTTP/") ? kResponse : kRequest, head + body);
  EXPECT_EQ(m.parse_head(), Result::head_done) << head;
  BodySink sink;
  std::size_t consumed = 0;
  const Result r = m.parse_body(sink, consumed, step);
  const Parser& p = m.parser();
  return {r, p.error_reason(), r == Result::error ? p.error_detail() : "", sink.body};
}

// A chunk line of exactly `n` bytes (CRLF included) for a chunk of size 5.
std::string chunk_line_of(std::size_t n) {
  const std::string fixed = "5;\r\n";
  return "5;" + std::string(n - fixed.size(), 'e') + "\r\n";
}

// --- empty field names ----------------------------------------------------------------------

TEST(EmptyFieldName, IsBadRequestInARequestHead) {
  for (const char* line : {": v", ":Transfer-Encoding: chunked", ":"}) {
    const std::string req = std::string("GET / HTTP/1.1\r\nHost: a\r\n") + line + "\r\n\r\n";
    EXPECT_EQ(head_error(kRequest, req), Reason::bad_request) << line;
    EXPECT_EQ(head_error(kRequest, req, 1), Reason::bad_request) << line;
  }
}

TEST(EmptyFieldName, IsBadRequestAsTheFirstField) {
  EXPECT_EQ(head_error(kRequest, "GET / HTTP/1.1\r\n: v\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(EmptyFieldName, IsUpstreamBadResponseInAResponseHead) {
  for (const char* line : {": v", ":Content-Length: 0", ":"}) {
    const std::string resp =
        std::string("HTTP/1.1 200 OK\r\n") + line + "\r\nContent-Length: 0\r\n\r\n";
    EXPECT_EQ(head_error(kResponse, resp), Reason::upstream_bad_response) << line;
    EXPECT_EQ(head_error(kResponse, resp, 1), Reason::upstream_bad_response) << line;
  }
}

TEST(EmptyFieldName, SaysSoInTheErrorDetail) {
  EXPECT_EQ(detail_of_head(kRequest, "GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n"),
            "empty field name");
}

// --- obs-fold -------------------------------------------------------------------------------

const std::vector<std::string> kFoldsAfterAnEmptyFirstLine = {
    "Host:\r\n evil.example\r\n",      "Host: a\r\nContent-Length:\r\n 5\r\n",
    "Host: a\r\nX-A:\r\n\tfolded\r\n",
    "Host: a\r\nX-A:\r\n \r\n",  // a continuation of whitespace only
    "Host: a\r\nX-A: v\r\n \r\n",
};

TEST(ObsFold, AfterAnEmptyFirstLineIsBadRequest) {
  for (const std::string& fields : kFoldsAfterAnEmptyFirstLine) {
    const std::string req = "POST / HTTP/1.1\r\n" + fields + "\r\nhello";
    for (std::size_t step : {std::size_t{1}, std::size_t{3}, SIZE_MAX}) {
      EXPECT_EQ(head_error(kRequest, req, step), Reason::bad_request) << fields << step;
    }
  }
}

TEST(ObsFold, AfterAnEmptyFirstLineIsUpstreamBadResponse) {
  for (const std::string& fields : kFoldsAfterAnEmptyFirstLine) {
    const std::string resp = "HTTP/1.1 200 OK\r\n" + fields + "Content-Length: 5\r\n\r\nhello";
    for (std::size_t step : {std::size_t{1}, std::size_t{3}, SIZE_MAX}) {
      EXPECT_EQ(head_error(kResponse, resp, step), Reason::upstream_bad_response) << fields << step;
    }
  }
}

TEST(ObsFold, InABodilessResponseIsUpstreamBadResponseToo) {
  EXPECT_EQ(head_error(kResponse, "HTTP/1.1 204 No Content\r\nX-A:\r\n b\r\n\r\n"),
            Reason::upstream_bad_response);
}

TEST(ObsFold, SaysSoInTheErrorDetail) {
  EXPECT_EQ(detail_of_head(kRequest, "GET / HTTP/1.1\r\nHost:\r\n evil.example\r\n\r\n"),
            "obsolete line folding");
}

TEST(ObsFold, EmptyValuesWithoutAFoldStillParse) {
  Message m(kRequest, "GET / HTTP/1.1\r\nHost: a\r\nX-A:\r\nX-B: \t\r\nX-C:\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.fields(), (std::vector<std::string>{"Host: a", "X-A: ", "X-B: ", "X-C: "}));
}

// --- HTTP/0.9 -------------------------------------------------------------------------------

TEST(Http09RequestLine, IsBadRequestAsSoonAsTheTargetEnds) {
  // No byte after the line: llhttp alone would wait for one until header_timeout.
  for (const char* line : {"GET /\r\n", "GET /\n", "GET /\r", "GET /index.html\r\n"}) {
    Message m(kRequest, line);
    EXPECT_EQ(m.parse_head(), Result::error) << line;
    EXPECT_EQ(m.parser().error_reason(), Reason::bad_request) << line;
    EXPECT_STREQ(m.parser().error_detail(), "HTTP/0.9 request line (no HTTP-version)") << line;
  }
}

TEST(Http09RequestLine, IsBadRequestWhenFedByteByByte) {
  EXPECT_EQ(head_error(kRequest, "GET /\r\n", 1), Reason::bad_request);
  EXPECT_EQ(head_error(kRequest, "GET /\r\nHost: a\r\n\r\n", 1), Reason::bad_request);
}

TEST(Http09RequestLine, TargetFollowedByASpaceInALaterFeedStillParses) {
  const std::string req = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
  Message m(kRequest, req);
  ASSERT_EQ(m.parser().parse_head(6), Result::need_more);  // "GET /a"
  EXPECT_EQ(m.parse_head(), Result::head_done);
}

// --- response transfer codings --------------------------------------------------------------

TEST(ResponseTransferCoding, OtherThanExactlyChunkedIsUpstreamBadResponse) {
  for (const char* te : {"Transfer-Encoding: gzip, chunked", "Transfer-Encoding: chunked, identity",
                         "Transfer-Encoding: xchunked", "Transfer-Encoding: gzip",
                         "Transfer-Encoding: identity", "Transfer-Encoding: chunked, chunked",
                         "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
                         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"}) {
    const std::string resp =
        std::string("HTTP/1.1 200 OK\r\n") + te + "\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    Message m(kResponse, resp);
    EXPECT_EQ(m.parse_head(), Result::error) << te;
    EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response) << te;
    EXPECT_STREQ(m.parser().error_detail(), "transfer coding other than exactly chunked") << te;
  }
}

TEST(ResponseTransferCoding, ChunkedThatLlhttpDoesNotDechunkIsUpstreamBadResponse) {
  // llhttp reads "chunked<TAB>" as an unknown coding (a body until close); a trim would not.
  Message m(kResponse, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(m.parse_head(), Result::error);
  EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response);
}

TEST(RequestTransferCoding, ChunkedThatLlhttpDoesNotDechunkIsBadRequestAtTheHead) {
  // llhttp alone accepts the head and refuses the message only once its body is parsed.
  EXPECT_EQ(head_error(kRequest,
                       "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n"
                       "\r\n5\r\nhello\r\n0\r\n\r\n"),
            Reason::bad_request);
}

TEST(ResponseTransferCoding, ChunkedInAnyCaseAndWithSpacesIsDechunked) {
  for (const char* te : {"chunked", "Chunked", "  CHUNKED "}) {
    const std::string head =
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: ") + te + "\r\n\r\n";
    const BodyOutcome o = parse_body(head, "5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(o.result, Result::message_done) << te;
    EXPECT_EQ(o.data, "hello") << te;
  }
}

TEST(ResponseTransferCoding, IsNotCheckedOnResponsesWithoutABody) {
  // A HEAD or 304 response's Transfer-Encoding describes the GET response; no body follows.
  const std::string te = "Transfer-Encoding: gzip, chunked\r\n\r\n";
  Message head(kResponse, "HTTP/1.1 200 OK\r\n" + te);
  head.begin_next(0, /*no_body=*/true);
  EXPECT_EQ(head.parse_head(), Result::message_done);
  for (const char* status : {"304 Not Modified", "204 No Content", "103 Early Hints"}) {
    Message m(kResponse, std::string("HTTP/1.1 ") + status + "\r\n" + te);
    EXPECT_EQ(m.parse_head(), Result::message_done) << status;
  }
}

// --- status line ----------------------------------------------------------------------------

TEST(ReasonPhrase, WithAControlCharacterIsUpstreamBadResponse) {
  for (const char* line :
       {"HTTP/1.1 200 O\x01K\r\n", "HTTP/1.1 200 OK\x7f\r\n", "HTTP/1.1 200 \x1b[31mOK\r\n"}) {
    EXPECT_EQ(head_error(kResponse, std::string(line) + "Content-Length: 0\r\n\r\n"),
              Reason::upstream_bad_response)
        << line;
  }
}

TEST(ReasonPhrase, WithTabsSpacesAndObsTextIsRelayed) {
  Message m(kResponse, "HTTP/1.1 200 Fine\tand \xe9l\xe9gant\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().status_text(), "Fine\tand \xe9l\xe9gant");
}

// --- content length -------------------------------------------------------------------------

TEST(ContentLength, Above2To63Minus1IsBadRequestAtTheHead) {
  for (const char* cl : {"9223372036854775808", "18446744073709551615"}) {
    EXPECT_EQ(head_error(kRequest, std::string("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ") +
                                       cl + "\r\n\r\n"),
              Reason::bad_request)
        << cl;
  }
}

TEST(ContentLength, Above2To63Minus1IsUpstreamBadResponse) {
  EXPECT_EQ(head_error(kResponse, "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n"),
            Reason::upstream_bad_response);
}

TEST(ContentLength, Of2To63Minus1IsAccepted) {
  Message m(kRequest, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n");
  EXPECT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().content_length(), kMaxContentLength);
}

// --- chunk sizes ----------------------------------------------------------------------------

TEST(ChunkSize, Above2To63Minus1IsBadRequestBeforeAnyOfItsData) {
  for (const char* size : {"8000000000000000", "ffffffffffffffff", "FFFFFFFFFFFFFFFF"}) {
    const BodyOutcome o = parse_body(kChunkedRequest, std::string(size) + "\r\nhello");
    EXPECT_EQ(o.result, Result::error) << size;
    EXPECT_EQ(o.reason, Reason::bad_request) << size;
    EXPECT_EQ(o.detail, "chunk size exceeds 2^63-1") << size;
    EXPECT_EQ(o.data, "") << size;
  }
}

TEST(ChunkSize, Above2To63Minus1IsUpstreamBadResponse) {
  const BodyOutcome o = parse_body(kChunkedResponse, "5\r\nhello\r\nffffffffffffffff\r\nxx");
  EXPECT_EQ(o.result, Result::error);
  EXPECT_EQ(o.reason, Reason::upstream_bad_response);
  EXPECT_EQ(o.data, "hello");  // the earlier chunk was handed on; the huge one never
}

TEST(ChunkSize, Of2To63Minus1IsAccepted) {
  const BodyOutcome o = parse_body(kChunkedRequest, "7fffffffffffffff\r\nhello");
  EXPECT_EQ(o.result, Result::need_more);
  EXPECT_EQ(o.data, "hello");
}

// --- chunk lines ----------------------------------------------------------------------------

TEST(ChunkLine, OfExactlyTheBoundPassesAtEveryFeedSize) {
  const std::string line = chunk_line_of(kMaxChunkLineBytes);
  ASSERT_EQ(line.size(), 4096u);
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, SIZE_MAX}) {
    const BodyOutcome o =
        parse_body(kChunkedRequest, line + "hello\r\n" + line + "world\r\n0\r\n\r\n", step);
    EXPECT_EQ(o.result, Result::message_done) << step;
    EXPECT_EQ(o.data, "helloworld") << step;
  }
}

TEST(ChunkLine, OneByteOverTheBoundIsBadRequestAtEveryFeedSize) {
  const std::string line = chunk_line_of(kMaxChunkLineBytes + 1);
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, SIZE_MAX}) {
    const BodyOutcome o = parse_body(kChunkedRequest, line + "hello\r\n0\r\n\r\n", step);
    EXPECT_EQ(o.result, Result::error) << step;
    EXPECT_EQ(o.reason, Reason::bad_request) << step;
    EXPECT_EQ(o.detail, "chunk line exceeds 4096 bytes") << step;
    EXPECT_EQ(o.data, "") << step;
  }
}

TEST(ChunkLine, BoundAppliesToEveryChunkLineNotOnlyTheFirst) {
  const std::string ok = chunk_line_of(kMaxChunkLineBytes);
  const std::string over = chunk_line_of(kMaxChunkLineBytes + 1);
  for (std::size_t step : {std::size_t{1}, std::size_t{100}, SIZE_MAX}) {
    const BodyOutcome o =
        parse_body(kChunkedRequest, ok + "hello\r\n" + over + "world\r\n0\r\n\r\n", step);
    EXPECT_EQ(o.result, Result::error) << step;
    EXPECT_EQ(o.data, "hello") << step;
  }
}

TEST(ChunkLine, LeadingZerosCountTowardsTheBound) {
  const auto body = [](std::size_t zeros) {
    return std::string(zeros, '0') + "5\r\nhello\r\n0\r\n\r\n";
  };
  EXPECT_EQ(parse_body(kChunkedRequest, body(kMaxChunkLineBytes - 3)).result, Result::message_done);
  EXPECT_EQ(parse_body(kChunkedRequest, body(kMaxChunkLineBytes - 2)).result, Result::error);
}

TEST(ChunkLine, LastChunkLineIsBoundedToo) {
  const auto body = [](std::size_t n) { return "0;" + std::string(n - 4, 'e') + "\r\n\r\n"; };
  EXPECT_EQ(parse_body(kChunkedRequest, body(kMaxChunkLineBytes)).result, Result::message_done);
  EXPECT_EQ(parse_body(kChunkedRequest, body(kMaxChunkLineBytes + 1)).result, Result::error);
}

TEST(ChunkLine, EndlessExtensionIsRefusedOnceItPassesTheBound) {
  Message m(kRequest, kChunkedRequest);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  const std::string piece = "5;" + std::string(998, 'e');
  std::string more(1000, 'e');
  BodySink sink;
  std::size_t fed = 0, consumed = 0;
  Result r = m.parser().parse_body(piece.data(), piece.size(), consumed, sink);
  for (fed = piece.size(); r == Result::need_more && fed < (1u << 20); fed += more.size()) {
    r = m.parser().parse_body(more.data(), more.size(), consumed, sink);
  }
  EXPECT_EQ(r, Result::error);
  EXPECT_EQ(m.parser().error_reason(), Reason::bad_request);
  EXPECT_LE(fed, kMaxChunkLineBytes + 1000);  // refused within one feed of passing the bound
}

TEST(ChunkLine, OverTheBoundIsUpstreamBadResponse) {
  const BodyOutcome o =
      parse_body(kChunkedResponse, chunk_line_of(kMaxChunkLineBytes + 1) + "hello");
  EXPECT_EQ(o.result, Result::error);
  EXPECT_EQ(o.reason, Reason::upstream_bad_response);
}

TEST(ChunkLine, TrailerSectionIsNotBoundedAsAChunkLine) {
  const std::string trailers = "0\r\nX-T: " + std::string(5000, 't') + "\r\n\r\n";
  EXPECT_EQ(parse_body(kChunkedRequest, "5\r\nhello\r\n" + trailers).result, Result::message_done);
}

TEST(ChunkLine, NonChunkedBodiesAreNotChunkLines) {
  const std::string body(10000, 'b');
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10000\r\n\r\n";
  EXPECT_EQ(parse_body(head, body, 3000).data, body);
  const BodyOutcome until_close = parse_body("HTTP/1.1 200 OK\r\n\r\n", body, 3000);
  EXPECT_EQ(until_close.result, Result::need_more);
  EXPECT_EQ(until_close.data, body);
}

// --- bare CR in chunk extensions ------------------------------------------------------------

TEST(ChunkExtension, BareCrAnywhereIsBadRequestAtEverySplit) {
  for (const char* line : {"5;a\rb\r\n", "5;a=b\rc\r\n", "5;a=\"b\rc\"\r\n", "5;a=\"b\"\rc\r\n",
                           "5;\r\r\n", "5\rb\r\n", "5;a=b\r\r\n"}) {
    const std::string body = std::string(line) + "hello\r\n0\r\n\r\n";
    for (std::size_t step = 1; step <= body.size(); ++step) {
      const BodyOutcome o = parse_body(kChunkedRequest, body, step);
      EXPECT_EQ(o.result, Result::error) << line << step;
      EXPECT_EQ(o.reason, Reason::bad_request) << line << step;
      EXPECT_EQ(o.data, "") << line << step;
    }
  }
}

TEST(ChunkExtension, BareCrIsUpstreamBadResponse) {
  const BodyOutcome o = parse_body(kChunkedResponse, "5;a\rb\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(o.result, Result::error);
  EXPECT_EQ(o.reason, Reason::upstream_bad_response);
}

TEST(ChunkExtension, WellFormedExtensionsAreAcceptedAndDropped) {
  const BodyOutcome o =
      parse_body(kChunkedRequest, "5;a=b\r\nhello\r\n1;q=\"x y\"\r\n!\r\n0;z\r\n\r\n");
  EXPECT_EQ(o.result, Result::message_done);
  EXPECT_EQ(o.data, "hello!");
}

// --- errors are final -----------------------------------------------------------------------

TEST(FramingError, IsFinalForTheMessage) {
  Message m(kRequest, kChunkedRequest + "ffffffffffffffff\r\nhello\r\n0\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  const char* body = m.data() + m.parser().head_end();
  ASSERT_EQ(m.parser().parse_body(body, 18, consumed, sink), Result::error);
  EXPECT_EQ(m.parser().parse_body(body + 18, 7, consumed, sink), Result::error);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(m.parser().finish(), Result::error);
  EXPECT_EQ(sink.body, "");
}

TEST(ChunkLine, BoundIsCountedAfreshForEachPipelinedMessage) {
  const std::string one = kChunkedRequest + "5\r\nhello\r\n0\r\n\r\n";
  const std::string two =
      kChunkedRequest + chunk_line_of(kMaxChunkLineBytes) + "world\r\n0\r\n\r\n";
  Message m(kRequest, one + two);
  std::size_t offset = 0;
  std::vector<std::string> bodies;
  for (int i = 0; i < 2; ++i) {
    if (i > 0) m.begin_next(offset);
    ASSERT_EQ(m.parse_head(), Result::head_done) << i;
    BodySink sink;
    std::size_t consumed = 0;
    ASSERT_EQ(m.parse_body(sink, consumed), Result::message_done) << i;
    bodies.push_back(sink.body);
    offset += m.parser().head_end() + consumed;
  }
  EXPECT_EQ(bodies, (std::vector<std::string>{"hello", "world"}));
}

}  // namespace
}  // namespace floodgate::http
