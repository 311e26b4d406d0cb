#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/http/rewrite.h"
#include "http_test_support.h"

namespace floodgate::http {
namespace {

using testing::Message;
using testing::Result;
using Values = std::vector<std::string>;

constexpr Parser::Kind kResponse = Parser::Kind::response;

const std::string kLength = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
const std::string kChunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
const std::string kUntilClose = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";

// The plan for a backend response head; `head_request` also tells the parser no body follows.
ResponsePlan plan(std::string_view response, bool head_request, int client_minor,
                  bool client_keep_alive) {
  Message m(kResponse, response);
  m.begin_next(0, head_request);
  const Result r = m.parse_head();
  EXPECT_TRUE(r == Result::head_done || r == Result::message_done) << response;
  return plan_response(m.parser(), head_request, client_minor, client_keep_alive);
}

struct Expected {
  Framing framing;
  bool close_client;
};

void expect_plan(std::string_view response, bool head_request, int client_minor,
                 bool client_keep_alive, Expected e) {
  const ResponsePlan p = plan(response, head_request, client_minor, client_keep_alive);
  EXPECT_EQ(p.framing, e.framing) << response << " head=" << head_request
                                  << " minor=" << client_minor << " ka=" << client_keep_alive;
  EXPECT_EQ(p.close_client, e.close_client)
      << response << " head=" << head_request << " minor=" << client_minor
      << " ka=" << client_keep_alive;
}

// The head the client receives for a backend response head.
std::string rewritten(std::string_view response, const ResponsePlan& p, int client_minor) {
  Message m(kResponse, response);
  const Result r = m.parse_head();
  EXPECT_TRUE(r == Result::head_done || r == Result::message_done) << response;
  std::string out(8192, '\0');
  Writer w(out.data(), out.size());
  EXPECT_TRUE(write_response_head(m.parser(), p, client_minor, w));
  out.resize(w.size());
  return out;
}

// The rewritten head parsed back, as the client sees it.
class ClientView {
 public:
  ClientView(std::string_view response, const ResponsePlan& p, int client_minor)
      : text_(rewritten(response, p, client_minor)), m_(kResponse, text_) {
    const Result r = m_.parse_head();
    EXPECT_TRUE(r == Result::head_done || r == Result::message_done) << text_;
    EXPECT_EQ(m_.parser().head_end(), text_.size()) << text_;
  }
  const std::string& text() const { return text_; }
  const Parser& parser() const { return m_.parser(); }
  Values values(std::string_view name) const { return m_.values(name); }

 private:
  std::string text_;
  Message m_;
};

// --- plan_response --------------------------------------------------------------------------

TEST(PlanResponse, ResponseToHeadHasNoBody) {
  for (const std::string& r : {kLength, kChunked, kUntilClose}) {
    expect_plan(r, true, 1, true, {Framing::none, false});
    expect_plan(r, true, 0, true, {Framing::none, false});
    expect_plan(r, true, 1, false, {Framing::none, true});
  }
}

TEST(PlanResponse, NoContentAndNotModifiedHaveNoBody) {
  for (const char* r : {"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                        "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
                        "HTTP/1.1 304 Not Modified\r\n\r\n"}) {
    expect_plan(r, false, 1, true, {Framing::none, false});
    expect_plan(r, false, 0, true, {Framing::none, false});
    expect_plan(r, false, 1, false, {Framing::none, true});
  }
}

TEST(PlanResponse, ContentLengthPassesThroughToEveryClient) {
  expect_plan(kLength, false, 1, true, {Framing::length, false});
  expect_plan(kLength, false, 0, true, {Framing::length, false});
  expect_plan(kLength, false, 1, false, {Framing::length, true});
  expect_plan(kLength, false, 0, false, {Framing::length, true});
}

TEST(PlanResponse, ChunkedIsRechunkedForHttp11Clients) {
  expect_plan(kChunked, false, 1, true, {Framing::chunked, false});
  expect_plan(kChunked, false, 1, false, {Framing::chunked, true});
}

TEST(PlanResponse, ChunkedIsCloseDelimitedForHttp10Clients) {
  expect_plan(kChunked, false, 0, true, {Framing::close, true});
  expect_plan(kChunked, false, 0, false, {Framing::close, true});
}

TEST(PlanResponse, CloseDelimitedIsChunkedForHttp11Clients) {
  expect_plan(kUntilClose, false, 1, true, {Framing::chunked, false});
  expect_plan(kUntilClose, false, 1, false, {Framing::chunked, true});
}

TEST(PlanResponse, CloseDelimitedStaysCloseDelimitedForHttp10Clients) {
  expect_plan(kUntilClose, false, 0, true, {Framing::close, true});
  expect_plan(kUntilClose, false, 0, false, {Framing::close, true});
}

TEST(PlanResponse, InterimResponsesHaveNoBodyAndKeepTheConnection) {
  for (const char* r : {"HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 103 Early Hints\r\n\r\n",
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: upgrade\r\n\r\n"}) {
    expect_plan(r, false, 1, true, {Framing::none, false});
    expect_plan(r, false, 1, false, {Framing::none, false});
  }
}

// --- write_response_head --------------------------------------------------------------------

TEST(WriteResponseHead, WritesAnHttp11StatusLineWithTheBackendsStatusAndPhrase) {
  ClientView v("HTTP/1.0 404 Nope Not Here\r\nContent-Length: 0\r\n\r\n", {Framing::length, false},
               1);
  EXPECT_EQ(v.text().substr(0, v.text().find("\r\n")), "HTTP/1.1 404 Nope Not Here");
}

TEST(WriteResponseHead, RemovesHopByHopFieldsAndFieldsNamedInConnection) {
  ClientView v(
      "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n"
      "Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\n"
      "Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Hop: 1\r\nX-End: 2\r\n\r\n",
      {Framing::chunked, false}, 1);
  for (const char* name :
       {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade", "X-Hop"}) {
    EXPECT_TRUE(v.values(name).empty()) << name;
  }
  EXPECT_EQ(v.values("Transfer-Encoding"), Values{"chunked"});
  EXPECT_EQ(v.values("X-End"), Values{"2"});
}

TEST(WriteResponseHead, CopiesEndToEndFieldsInOrder) {
  ClientView v(
      "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nContent-Length: 5\r\nSet-Cookie: b=2\r\n"
      "X-Empty:\r\n\r\n",
      {Framing::length, false}, 1);
  EXPECT_EQ(v.values("Set-Cookie"), (Values{"a=1", "b=2"}));
  EXPECT_EQ(v.values("Content-Length"), Values{"5"});
  EXPECT_EQ(v.values("X-Empty"), Values{""});
}

TEST(WriteResponseHead, RemovesFieldsNamedAfterManyConnectionOptions) {
  std::string options;
  for (int i = 0; i < 40; ++i) options += "x-opt-" + std::to_string(i) + ", ";
  ClientView v("HTTP/1.1 200 OK\r\nConnection: " + options +
                   "X-Secret\r\nX-Secret: s\r\nContent-Length: 0\r\n\r\n",
               {Framing::length, false}, 1);
  EXPECT_TRUE(v.values("X-Secret").empty());
}

TEST(WriteResponseHead, KeepsContentLengthEvenWhenConnectionNamesIt) {
  // Without it the client could not tell where the body ends.
  ClientView v("HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\n",
               {Framing::length, false}, 1);
  EXPECT_EQ(v.values("Content-Length"), Values{"5"});
}

TEST(WriteResponseHead, SwitchingProtocolsKeepsUpgradeAndSaysConnectionUpgrade) {
  ClientView v(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: x\r\n\r\n",
      {}, 1);
  EXPECT_EQ(v.values("Upgrade"), Values{"websocket"});
  EXPECT_EQ(v.values("Connection"), Values{"upgrade"});
  EXPECT_EQ(v.values("Sec-WebSocket-Accept"), Values{"x"});
  EXPECT_EQ(v.parser().status(), 101);
}

TEST(WriteResponseHead, ChunkedPlanAddsTransferEncodingOnce) {
  ClientView from_chunked(kChunked, {Framing::chunked, false}, 1);
  EXPECT_EQ(from_chunked.values("Transfer-Encoding"), Values{"chunked"});
  ClientView from_close(kUntilClose, {Framing::chunked, false}, 1);
  EXPECT_EQ(from_close.values("Transfer-Encoding"), Values{"chunked"});
  EXPECT_TRUE(from_close.parser().chunked());
}

TEST(WriteResponseHead, CloseDelimitedPlanHasNoFramingFieldAndClosesTheConnection) {
  ClientView v(kChunked, {Framing::close, true}, 0);
  EXPECT_TRUE(v.values("Transfer-Encoding").empty());
  EXPECT_TRUE(v.values("Content-Length").empty());
  EXPECT_EQ(v.values("Connection"), Values{"close"});
}

TEST(WriteResponseHead, ClosingPlanSaysConnectionClose) {
  for (int minor : {0, 1}) {
    ClientView v("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
                 {Framing::length, true}, minor);
    EXPECT_EQ(v.values("Connection"), Values{"close"}) << minor;
  }
}

TEST(WriteResponseHead, KeepAliveHttp10ClientIsToldKeepAlive) {
  ClientView v("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", {Framing::length, false}, 0);
  EXPECT_EQ(v.values("Connection"), Values{"keep-alive"});
}

TEST(WriteResponseHead, KeepAliveHttp11ClientGetsNoConnectionField) {
  ClientView v("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
               {Framing::length, false}, 1);
  EXPECT_TRUE(v.values("Connection").empty());
}

TEST(WriteResponseHead, InterimResponseGetsNoConnectionField) {
  ClientView v("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n", {}, 1);
  EXPECT_EQ(v.values("Link"), Values{"</a.css>"});
  EXPECT_TRUE(v.values("Connection").empty());
}

TEST(WriteResponseHead, DropsContentLengthFromNoContent) {
  const std::string r = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-A: b\r\n\r\n";
  ClientView v(r, plan(r, false, 1, true), 1);
  EXPECT_TRUE(v.values("Content-Length").empty()) << v.text();
  EXPECT_EQ(v.values("X-A"), Values{"b"});
}

TEST(WriteResponseHead, DropsContentLengthFromInterimResponses) {
  for (const char* r : {"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nContent-Length: 0\r\n\r\n",
                        "HTTP/1.1 100 Continue\r\nContent-Length: 7\r\n\r\n",
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: upgrade\r\nContent-Length: 0\r\n\r\n"}) {
    ClientView v(r, {}, 1);
    EXPECT_TRUE(v.values("Content-Length").empty()) << v.text();
  }
}

TEST(WriteResponseHead, KeepsContentLengthOnNotModifiedAndOnAResponseToHead) {
  const std::string not_modified = "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n";
  ClientView v(not_modified, plan(not_modified, false, 1, true), 1);
  EXPECT_EQ(v.values("Content-Length"), Values{"50"});
  ClientView head(kLength, plan(kLength, true, 1, true), 1);
  EXPECT_EQ(head.values("Content-Length"), Values{"5"});
}

TEST(WriteResponseHead, ReturnsFalseWhenTheHeadDoesNotFit) {
  const std::string response = "HTTP/1.1 200 OK\r\nX-A: aaaa\r\n\r\n";
  const ResponsePlan p{Framing::chunked, true};
  const std::string full = rewritten(response, p, 1);
  Message m(kResponse, response);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  for (std::size_t cap = 0; cap <= full.size(); ++cap) {
    std::vector<char> buf(cap + 1, '#');
    Writer w(buf.data(), cap);
    EXPECT_EQ(write_response_head(m.parser(), p, 1, w), cap == full.size()) << cap;
    EXPECT_EQ(buf[cap], '#') << cap;
  }
}

// --- chunk framing --------------------------------------------------------------------------

TEST(ChunkFraming, ChunkHeaderIsTheHexSizeAndCrlf) {
  char buf[32];
  Writer w(buf, sizeof buf);
  write_chunk_header(0x1a2b, w);
  EXPECT_EQ(std::string_view(buf, w.size()), "1a2b\r\n");
  EXPECT_EQ(kChunkEnd, "\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(ChunkFraming, RechunkedBodyParsesBackToTheSameBytes) {
  std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::string_view piece : {"hello", " ", "world, this is a longer piece"}) {
    char buf[32];
    Writer w(buf, sizeof buf);
    write_chunk_header(piece.size(), w);
    wire += std::string_view(buf, w.size());
    wire += piece;
    wire += kChunkEnd;
  }
  wire += kLastChunk;
  Message m(kResponse, wire);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  testing::BodySink sink;
  std::size_t consumed = 0;
  EXPECT_EQ(m.parse_body(sink, consumed), Result::message_done);
  EXPECT_EQ(sink.body, "hello world, this is a longer piece");
}

TEST(ContinueResponse, IsACompleteInterimResponse) {
  Message m(kResponse, kContinue);
  EXPECT_EQ(m.parse_head(), Result::message_done);
  EXPECT_EQ(m.parser().status(), 100);
  EXPECT_EQ(m.parser().head_end(), kContinue.size());
}

}  // namespace
}  // namespace floodgate::http
