// The response head an HTTP/2 client receives for a backend's HTTP/1.1 head
// (h2_response_fields, rewrite.h).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "floodgate/http/rewrite.h"
#include "http_test_support.h"

namespace floodgate::http {
namespace {

using testing::Message;
using testing::Result;
using Fields = std::vector<std::pair<std::string, std::string>>;

// The fields for `response`, or {{"error", ""}} when they do not fit.
Fields h2_fields(std::string_view response, std::size_t max = 64, std::size_t names = 4096) {
  Message m(Parser::Kind::response, response);
  const Result r = m.parse_head();
  EXPECT_TRUE(r == Result::head_done || r == Result::message_done) << response;
  std::vector<h2::ResponseField> out(max);
  std::string name_bytes(names, '\0');
  const int n = h2_response_fields(m.parser(), out.data(), max, name_bytes.data(), names);
  if (n < 0) return {{"error", ""}};
  Fields fields;
  for (int i = 0; i < n; ++i) fields.emplace_back(out[i].name, out[i].value);
  return fields;
}

TEST(H2ResponseFields, NamesAreLowerCaseAndValuesKept) {
  EXPECT_EQ(h2_fields("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Trace: AbC\r\n"
                      "Content-Length: 3\r\n\r\n"),
            (Fields{{"content-type", "text/html"}, {"x-trace", "AbC"}, {"content-length", "3"}}));
}

TEST(H2ResponseFields, ConnectionSpecificFieldsAreDropped) {
  EXPECT_EQ(
      h2_fields("HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n"
                "X-Hop: 1\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n"
                "Proxy-Connection: keep-alive\r\nUpgrade: h2c\r\nX-End: 2\r\n\r\n"),
      (Fields{{"x-end", "2"}}));
}

TEST(H2ResponseFields, ContentLengthStaysEvenWhenConnectionNamesIt) {
  EXPECT_EQ(h2_fields("HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 4\r\n\r\n"),
            (Fields{{"content-length", "4"}}));
}

TEST(H2ResponseFields, NoContentLengthInA204OrAnInterimResponse) {
  EXPECT_EQ(h2_fields("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-A: 1\r\n\r\n"),
            (Fields{{"x-a", "1"}}));
  EXPECT_EQ(h2_fields("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\nContent-Length: 0\r\n\r\n"),
            (Fields{{"link", "</s.css>"}}));
}

TEST(H2ResponseFields, TooSmallAnArrayOrNameBufferIsAnError) {
  const std::string head = "HTTP/1.1 200 OK\r\nX-One: 1\r\nX-Two: 2\r\n\r\n";
  EXPECT_EQ(h2_fields(head, 1), (Fields{{"error", ""}}));
  EXPECT_EQ(h2_fields(head, 8, 6), (Fields{{"error", ""}}));
  EXPECT_EQ(h2_fields(head, 2, 10), (Fields{{"x-one", "1"}, {"x-two", "2"}}));
}

}  // namespace
}  // namespace floodgate::http
