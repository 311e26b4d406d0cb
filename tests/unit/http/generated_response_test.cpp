#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "floodgate/http/rewrite.h"
#include "http_test_support.h"

namespace floodgate::http {
namespace {

using testing::Message;
using testing::Result;
using Values = std::vector<std::string>;

std::vector<Reason> every_reason() {
  std::vector<Reason> all;
  for (std::size_t i = 1; i < kReasonCount; ++i) all.push_back(static_cast<Reason>(i));
  return all;
}

TEST(GeneratedResponse, EveryReasonIsAWellFormedResponseWithItsStatusAndReasonHeader) {
  for (const Reason reason : every_reason()) {
    for (const bool close : {false, true}) {
      const ReasonInfo& ri = info(reason);
      const std::string_view bytes = generated_response(reason, close);
      Message m(Parser::Kind::response, bytes);
      ASSERT_EQ(m.parse_head(), Result::head_done) << ri.name;
      EXPECT_EQ(m.parser().status(), ri.status) << ri.name;
      EXPECT_EQ(m.parser().status_text(), ri.phrase) << ri.name;
      EXPECT_EQ(m.values("X-Floodgate-Reason"), Values{std::string(ri.name)}) << ri.name;
      EXPECT_EQ(m.values("Connection"), close ? Values{"close"} : Values{}) << ri.name;
      testing::BodySink sink;
      std::size_t consumed = 0;
      ASSERT_EQ(m.parse_body(sink, consumed), Result::message_done) << ri.name;
      EXPECT_EQ(m.parser().head_end() + consumed, bytes.size()) << "bytes after the body";
      EXPECT_EQ(m.values("Content-Length"), Values{std::to_string(sink.body.size())});
      EXPECT_NE(sink.body.find(ri.name), std::string::npos) << sink.body;
      EXPECT_NE(sink.body.find(ri.body), std::string::npos) << sink.body;
    }
  }
}

TEST(GeneratedResponse, ReturnsTheSameBytesEveryTime) {
  const std::string_view a = generated_response(Reason::no_route, false);
  EXPECT_EQ(generated_response(Reason::no_route, false).data(), a.data());
}

TEST(GeneratedResponse, ClosingAndKeepAliveVariantsDifferOnlyInConnection) {
  for (const Reason reason : every_reason()) {
    std::string close(generated_response(reason, true));
    const std::string keep(generated_response(reason, false));
    close.erase(close.find("Connection: close\r\n"), 19);
    EXPECT_EQ(close, keep) << info(reason).name;
  }
}

TEST(GeneratedResponse, WithAStatusOverrideCarriesThatStatusTheExtraHeadersAndRetryAfter) {
  const std::string body = "connect_denied: CONNECT to this authority is not allowed\n";
  const std::string head =
      "HTTP/1.1 405 Method Not Allowed\r\n"
      "Allow: GET, HEAD\r\n"
      "Content-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: " +
      std::to_string(body.size()) +
      "\r\n"
      "Retry-After: 7\r\n"
      "X-Floodgate-Reason: connect_denied\r\n";
  for (const bool close : {false, true}) {
    const std::string bytes = build_generated_response({.reason = Reason::connect_denied,
                                                        .close = close,
                                                        .retry_after_seconds = 7,
                                                        .status = 405,
                                                        .extra_headers = "Allow: GET, HEAD\r\n"});
    EXPECT_EQ(bytes, head + (close ? "Connection: close\r\n\r\n" : "\r\n") + body);
    Message m(Parser::Kind::response, bytes);
    ASSERT_EQ(m.parse_head(), Result::head_done);
    EXPECT_EQ(m.parser().status(), 405);
    EXPECT_EQ(m.values("Allow"), Values{"GET, HEAD"});
  }
}

TEST(GeneratedResponse, WithTheReasonsOwnStatusAndNoExtrasIsTheSharedResponse) {
  for (const Reason reason : every_reason()) {
    for (const bool close : {false, true}) {
      EXPECT_EQ(build_generated_response(
                    {.reason = reason, .close = close, .status = info(reason).status}),
                generated_response(reason, close))
          << info(reason).name;
    }
  }
}

TEST(RetryAfterSeconds, RoundsUpToWholeSecondsAndIsAtLeastOne) {
  using std::chrono::milliseconds;
  EXPECT_EQ(retry_after_seconds(milliseconds(0)), 1u);
  EXPECT_EQ(retry_after_seconds(milliseconds(1)), 1u);
  EXPECT_EQ(retry_after_seconds(milliseconds(1'000)), 1u);
  EXPECT_EQ(retry_after_seconds(milliseconds(1'001)), 2u);
  EXPECT_EQ(retry_after_seconds(milliseconds(30'000)), 30u);
}

TEST(ClosesConnection, AfterRefusingTheClientsRequestButNotAfterBackendFaults) {
  const std::vector<Reason> closing = {Reason::bad_request, Reason::header_timeout,
                                       Reason::body_too_large, Reason::uri_too_long,
                                       Reason::header_too_large};
  for (const Reason reason : every_reason()) {
    const bool expected = std::find(closing.begin(), closing.end(), reason) != closing.end();
    EXPECT_EQ(closes_connection(reason), expected) << info(reason).name;
  }
}

}  // namespace
}  // namespace floodgate::http
