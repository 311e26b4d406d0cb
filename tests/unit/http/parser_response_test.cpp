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

constexpr Parser::Kind kResponse = Parser::Kind::response;

TEST(ResponseParser, ParsesStatusLineAndFields) {
  const std::string head = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nX-A: b\r\n\r\n";
  Message m(kResponse, head + "abc");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().status(), 404);
  EXPECT_EQ(m.parser().status_text(), "Not Found");
  EXPECT_EQ(m.parser().http_minor(), 1);
  EXPECT_EQ(m.parser().head_end(), head.size());
  EXPECT_EQ(m.fields(), (std::vector<std::string>{"Content-Length: 3", "X-A: b"}));
  BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed), Result::message_done);
  EXPECT_EQ(sink.body, "abc");
}

TEST(ResponseParser, StatusLineFedByteByByteGivesTheSameFacts) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nServer: x\r\n\r\n";
  Message m(kResponse, head);
  ASSERT_EQ(m.parse_head_in_steps(1), Result::head_done);
  EXPECT_EQ(m.parser().status(), 200);
  EXPECT_EQ(m.parser().status_text(), "OK");
  EXPECT_EQ(m.fields(), (std::vector<std::string>{"Content-Length: 0", "Server: x"}));
}

TEST(ResponseParser, ZeroContentLengthCompletesOnAnEmptyBodyFeed) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  Message m(kResponse, head + "HTTP/1.1 200 OK\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 7;
  EXPECT_EQ(m.parser().parse_body(m.data() + head.size(), 0, consumed, sink), Result::message_done);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(sink.pieces, 0);
}

TEST(ResponseParser, ResponsesThatNeverHaveABodyCompleteAtTheHeadDespiteContentLength) {
  for (const char* status : {"204 No Content", "304 Not Modified"}) {
    const std::string head = std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 10\r\n\r\n";
    Message m(kResponse, head + "HTTP/1.1 200 OK\r\n");
    EXPECT_EQ(m.parse_head(), Result::message_done) << status;
    EXPECT_EQ(m.parser().head_end(), head.size()) << status;
  }
}

TEST(ResponseParser, InterimResponsesCompleteAtTheHeadAndTheFinalOneFollows) {
  const std::string interim =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\nContent-Length: 4\r\n\r\n";
  const std::string final_head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
  Message m(kResponse, interim + final_head + "ok");
  std::size_t offset = 0;
  std::vector<int> statuses;
  for (int i = 0; i < 2; ++i) {
    if (i > 0) m.begin_next(offset);
    ASSERT_EQ(m.parse_head(), Result::message_done) << i;
    statuses.push_back(m.parser().status());
    offset += m.parser().head_end();
  }
  EXPECT_EQ(statuses, (std::vector<int>{100, 103}));
  EXPECT_EQ(offset, interim.size());
  m.begin_next(offset);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_EQ(m.parser().status(), 200);
  BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed), Result::message_done);
  EXPECT_EQ(sink.body, "ok");
}

TEST(ResponseParser, NoBodyResponseCompletesAtTheHeadDespiteContentLength) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
  Message m(kResponse, head);
  m.begin_next(0, /*no_body=*/true);
  EXPECT_EQ(m.parse_head(), Result::message_done);
  EXPECT_EQ(m.parser().head_end(), head.size());
  EXPECT_TRUE(m.parser().has_content_length());
  EXPECT_EQ(m.parser().content_length(), 5u);
}

TEST(ResponseParser, NoBodyResponseCompletesAtTheHeadDespiteChunked) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  m.begin_next(0, /*no_body=*/true);
  EXPECT_EQ(m.parse_head(), Result::message_done);
}

TEST(ResponseParser, BeginClearsNoBody) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx");
  m.parser().set_no_body(true);
  m.begin_next(0);
  EXPECT_EQ(m.parse_head(), Result::head_done);
}

TEST(ResponseParser, CloseDelimitedBodyCompletesOnFinish) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_TRUE(m.parser().needs_eof());
  BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed, 4), Result::need_more);
  EXPECT_EQ(sink.body, "until the end");
  EXPECT_EQ(sink.empty_pieces, 0);
  EXPECT_EQ(m.parser().finish(), Result::message_done);
}

TEST(ResponseParser, EmptyCloseDelimitedBodyCompletesOnFinish) {
  Message m(kResponse, "HTTP/1.0 200 OK\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_TRUE(m.parser().needs_eof());
  EXPECT_EQ(m.parser().finish(), Result::message_done);
}

TEST(ResponseParser, LengthDelimitedBodyDoesNotNeedEof) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_FALSE(m.parser().needs_eof());
}

TEST(ResponseParser, TruncatedContentLengthBodyIsAnErrorOnFinish) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(m.parse_body(sink, consumed), Result::need_more);
  EXPECT_EQ(m.parser().finish(), Result::error);
  EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response);
}

TEST(ResponseParser, CloseRightAfterAFramedHeadIsAnErrorOnFinish) {
  for (const char* head : {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    Message m(kResponse, head);
    ASSERT_EQ(m.parse_head(), Result::head_done) << head;
    EXPECT_EQ(m.parser().finish(), Result::error) << head;
    EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response) << head;
  }
}

TEST(ResponseParser, TruncatedChunkedBodyIsAnErrorOnFinish) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(m.parse_body(sink, consumed), Result::need_more);
  EXPECT_EQ(m.parser().finish(), Result::error);
  EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response);
}

TEST(ResponseParser, FinishAfterACompleteMessageIsMessageDone) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  BodySink sink;
  std::size_t consumed = 0;
  ASSERT_EQ(m.parse_body(sink, consumed), Result::message_done);
  EXPECT_EQ(m.parser().finish(), Result::message_done);
}

TEST(ResponseParser, ChunkedBodyIsDechunked) {
  const std::string body = "3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
  for (std::size_t step = 1; step <= body.size(); ++step) {
    Message m(kResponse, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
    ASSERT_EQ(m.parse_head(), Result::head_done);
    BodySink sink;
    std::size_t consumed = 0;
    EXPECT_EQ(m.parse_body(sink, consumed, step), Result::message_done) << step;
    EXPECT_EQ(sink.body, "abcde") << step;
    EXPECT_EQ(sink.empty_pieces, 0) << step;
    EXPECT_EQ(m.parser().field_count(), 1u) << step;
  }
}

TEST(ResponseParser, MalformedStatusLineIsUpstreamBadResponse) {
  for (const char* head :
       {"HTTP/1.1 abc OK\r\n\r\n", "HTTX/1.1 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 099 OK\r\n\r\n", "HTTP/1.1 000 OK\r\n\r\n",
        "garbage\r\n\r\n"}) {
    Message m(kResponse, head);
    EXPECT_EQ(m.parse_head(), Result::error) << head;
    EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response) << head;
  }
}

TEST(ResponseParser, AmbiguousFramingIsUpstreamBadResponse) {
  for (const char* head :
       {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    Message m(kResponse, head);
    EXPECT_EQ(m.parse_head(), Result::error) << head;
    EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response) << head;
  }
}

TEST(ResponseParser, ObsFoldIsUpstreamBadResponse) {
  Message m(kResponse, "HTTP/1.1 200 OK\r\nX-Folded: one\r\n two\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(m.parse_head(), Result::error);
  EXPECT_EQ(m.parser().error_reason(), Reason::upstream_bad_response);
}

TEST(ResponseParser, TooManyFieldsIsUpstreamBadResponse) {
  const std::string two = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
  Message ok(kResponse, two, {.max_headers = 3});
  EXPECT_EQ(ok.parse_head(), Result::head_done);
  Message over(kResponse, two, {.max_headers = 2});
  EXPECT_EQ(over.parse_head(), Result::error);
  EXPECT_EQ(over.parser().error_reason(), Reason::upstream_bad_response);
}

TEST(ResponseParser, HeaderByteAndUriLimitsDoNotApplyToResponses) {
  const std::string head = "HTTP/1.1 200 " + std::string(300, 'r') +
                           "\r\nX-Long: " + std::string(300, 'v') + "\r\nContent-Length: 0\r\n\r\n";
  Message m(kResponse, head, {.max_uri_bytes = 0, .max_header_bytes = 0, .max_headers = 2});
  EXPECT_EQ(m.parse_head(), Result::head_done);
}

TEST(ResponseParser, Http10ResponseWithoutKeepAliveIsNotKeepAlive) {
  Message m(kResponse, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(m.parse_head(), Result::head_done);
  EXPECT_FALSE(m.parser().keep_alive());
}

TEST(ResponseParser, SwitchingProtocolsCompletesAtTheHead) {
  const std::string head =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  Message m(kResponse, head + "\x81\x05hello");
  EXPECT_EQ(m.parse_head(), Result::message_done);
  EXPECT_EQ(m.parser().status(), 101);
  EXPECT_EQ(m.parser().head_end(), head.size());
}

}  // namespace
}  // namespace floodgate::http
