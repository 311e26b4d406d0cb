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

constexpr Parser::Kind kRequest = Parser::Kind::request;
const ForwardInfo kFwd{.client_ip = "10.0.0.9", .request_id = "rid-1"};

// The head the backend receives for `request`, or "" (with a test failure) when it is refused.
// `allow_h2c`: the route's allow_h2c_upgrade.
std::string forwarded(std::string_view request, const ForwardInfo& fwd = kFwd,
                      bool allow_h2c = false) {
  Message m(kRequest, request);
  if (m.parse_head() != Result::head_done) {
    ADD_FAILURE() << "head does not parse: " << request;
    return "";
  }
  RequestFacts facts;
  if (inspect_request(m.parser().request_head(), facts) != Reason::none) {
    ADD_FAILURE() << "request refused: " << request;
    return "";
  }
  apply_h2c_policy(facts, allow_h2c);
  std::string out(16384, '\0');
  Writer w(out.data(), out.size());
  EXPECT_TRUE(write_request_head(m.parser().request_head(), facts, fwd, w));
  out.resize(w.size());
  return out;
}

// The forwarded head parsed back, as the backend sees it.
class Forwarded {
 public:
  explicit Forwarded(std::string_view request, const ForwardInfo& fwd = kFwd,
                     bool allow_h2c = false)
      : text_(forwarded(request, fwd, allow_h2c)), m_(kRequest, text_) {
    EXPECT_EQ(m_.parse_head(), Result::head_done) << text_;
    EXPECT_EQ(m_.parser().head_end(), text_.size()) << text_;
  }
  const std::string& text() const { return text_; }
  const Parser& parser() const { return m_.parser(); }
  Values values(std::string_view name) const { return m_.values(name); }
  Values fields() const { return m_.fields(); }

 private:
  std::string text_;
  Message m_;
};

TEST(WriteRequestHead, WritesOriginFormHttp11RequestLineAndHostFirst) {
  Forwarded f("GET /a/b?c=d HTTP/1.0\r\nX-A: 1\r\nHost: h.example\r\n\r\n");
  EXPECT_EQ(f.text().substr(0, f.text().find("\r\n")), "GET /a/b?c=d HTTP/1.1");
  ASSERT_FALSE(f.fields().empty());
  EXPECT_EQ(f.fields()[0], "Host: h.example");
  EXPECT_EQ(f.values("Host"), Values{"h.example"});
  EXPECT_EQ(f.parser().method(), HTTP_GET);
  EXPECT_TRUE(f.parser().keep_alive());
}

TEST(WriteRequestHead, AbsoluteFormBecomesOriginFormWithHostFromTheAuthority) {
  Forwarded f("GET http://auth.example:81 HTTP/1.1\r\nHost: other\r\n\r\n");
  EXPECT_EQ(f.parser().target(), "/");
  EXPECT_EQ(f.values("Host"), Values{"auth.example:81"});
}

TEST(WriteRequestHead, CopiesEndToEndFieldsUnchangedAndInOrder) {
  Forwarded f(
      "POST /p HTTP/1.1\r\nHost: h\r\nAccept: text/html\r\nX-Empty:\r\n"
      "Content-Length: 3\r\nCookie: a=b; c=d\r\nX-Dup: 1\r\nX-Dup: 2\r\n\r\n");
  const Values all = f.fields();
  const Values expected = {"Accept: text/html", "X-Empty: ", "Content-Length: 3",
                           "Cookie: a=b; c=d",  "X-Dup: 1",  "X-Dup: 2"};
  EXPECT_EQ(Values(all.begin() + 1, all.begin() + 1 + expected.size()), expected);
}

TEST(WriteRequestHead, RemovesHopByHopFields) {
  Forwarded f(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\n"
      "Upgrade: websocket\r\nX-Kept: yes\r\n\r\n");
  for (const char* name :
       {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade"}) {
    EXPECT_TRUE(f.values(name).empty()) << name;
  }
  EXPECT_EQ(f.values("X-Kept"), Values{"yes"});
}

TEST(WriteRequestHead, RemovesFieldsNamedInConnection) {
  Forwarded f(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Secret, close\r\n"
      "Connection: x-other\r\nX-Secret: s\r\nX-Other: o\r\nX-Kept: k\r\n\r\n");
  EXPECT_TRUE(f.values("X-Secret").empty());
  EXPECT_TRUE(f.values("X-Other").empty());
  EXPECT_EQ(f.values("X-Kept"), Values{"k"});
}

TEST(WriteRequestHead, RemovesFieldsNamedAfterManyConnectionOptions) {
  std::string options;
  for (int i = 0; i < 40; ++i) options += "x-opt-" + std::to_string(i) + ", ";
  Forwarded f("GET / HTTP/1.1\r\nHost: h\r\nConnection: " + options +
              "X-Secret\r\nX-Opt-39: o\r\nX-Secret: s\r\nX-Kept: k\r\n\r\n");
  EXPECT_TRUE(f.values("X-Secret").empty());
  EXPECT_TRUE(f.values("X-Opt-39").empty());
  EXPECT_EQ(f.values("X-Kept"), Values{"k"});
}

TEST(WriteRequestHead, KeepsContentLengthEvenWhenConnectionNamesIt) {
  // Dropping it would leave the body to be read by the backend as the next request.
  Forwarded f(
      "POST / HTTP/1.1\r\nHost: h\r\nConnection: Content-Length\r\n"
      "Content-Length: 5\r\n\r\n");
  EXPECT_EQ(f.values("Content-Length"), Values{"5"});
  EXPECT_EQ(f.parser().content_length(), 5u);
}

TEST(WriteRequestHead, AppendsTheClientToTheXForwardedForChain) {
  Forwarded f(
      "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\nX-A: a\r\n"
      "x-forwarded-for: 2.2.2.2, 3.3.3.3\r\n\r\n");
  EXPECT_EQ(f.values("X-Forwarded-For"), Values{"1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9"});
}

TEST(WriteRequestHead, StartsTheXForwardedForChainWhenAbsent) {
  Forwarded f("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(f.values("X-Forwarded-For"), Values{"10.0.0.9"});
}

TEST(WriteRequestHead, AppendsToTheViaChain) {
  Forwarded f("GET / HTTP/1.1\r\nHost: h\r\nVia: 1.0 fred\r\nVia: 1.1 p.example\r\n\r\n");
  EXPECT_EQ(f.values("Via"), Values{"1.0 fred, 1.1 p.example, 1.1 floodgate"});
  Forwarded none("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(none.values("Via"), Values{"1.1 floodgate"});
}

TEST(WriteRequestHead, ReplacesXForwardedProtoAndHost) {
  Forwarded f(
      "GET / HTTP/1.1\r\nHost: real.example\r\nX-Forwarded-Proto: https\r\n"
      "X-Forwarded-Host: spoofed.example\r\nX-Forwarded-Host: again\r\n\r\n");
  EXPECT_EQ(f.values("X-Forwarded-Proto"), Values{"http"});
  EXPECT_EQ(f.values("X-Forwarded-Host"), Values{"real.example"});
}

TEST(WriteRequestHead, OmitsXForwardedHostWithoutAHost) {
  Forwarded f("GET / HTTP/1.0\r\nX-Forwarded-Host: spoofed\r\n\r\n");
  EXPECT_TRUE(f.values("X-Forwarded-Host").empty());
}

TEST(WriteRequestHead, SendsTheForwardInfoRequestIdExactlyOnce) {
  Forwarded generated("GET / HTTP/1.1\r\nHost: h\r\n\r\n", {"10.0.0.9", "gen-42"});
  EXPECT_EQ(generated.values("X-Request-Id"), Values{"gen-42"});
  Forwarded passed(
      "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Id: client-7\r\n"
      "X-Request-Id: client-8\r\n\r\n",
      {"10.0.0.9", "client-7"});
  EXPECT_EQ(passed.values("X-Request-Id"), Values{"client-7"});
}

TEST(WriteRequestHead, SendsChunkedOnlyForChunkedBodies) {
  Forwarded chunked("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(chunked.values("Transfer-Encoding"), Values{"chunked"});
  EXPECT_TRUE(chunked.parser().chunked());
  Forwarded length("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(length.values("Transfer-Encoding").empty());
  EXPECT_EQ(length.values("Content-Length"), Values{"2"});
  Forwarded none("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(none.values("Transfer-Encoding").empty());
  EXPECT_TRUE(none.values("Content-Length").empty());
}

TEST(WriteRequestHead, KeepsTheUpgradeHandshakeWhenUpgrading) {
  Forwarded f(
      "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: k\r\n\r\n");
  EXPECT_EQ(f.values("Connection"), Values{"upgrade"});
  EXPECT_EQ(f.values("Upgrade"), Values{"websocket"});
  EXPECT_EQ(f.values("Sec-WebSocket-Key"), Values{"k"});
}

TEST(WriteRequestHead, Http10ClientIsForwardedAsKeepAliveHttp11) {
  Forwarded f("GET / HTTP/1.0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(f.parser().http_minor(), 1);
  EXPECT_TRUE(f.parser().keep_alive());
  EXPECT_TRUE(f.values("Connection").empty());
}

TEST(WriteRequestHead, ReturnsFalseWhenTheHeadDoesNotFit) {
  const std::string request =
      "POST /x HTTP/1.1\r\nHost: h\r\nX-A: aaaa\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string full = forwarded(request);
  ASSERT_FALSE(full.empty());
  Message m(kRequest, request);
  ASSERT_EQ(m.parse_head(), Result::head_done);
  RequestFacts facts;
  ASSERT_EQ(inspect_request(m.parser().request_head(), facts), Reason::none);
  for (std::size_t cap = 0; cap <= full.size(); ++cap) {
    std::vector<char> buf(cap + 1, '#');
    Writer w(buf.data(), cap);
    EXPECT_EQ(write_request_head(m.parser().request_head(), facts, kFwd, w), cap == full.size())
        << cap;
    EXPECT_EQ(buf[cap], '#') << "wrote past the capacity " << cap;
  }
}

constexpr std::string_view kH2cOffer =
    "GET /h HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n";

TEST(WriteRequestHead, AnH2cOnlyOfferIsForwardedAsAPlainRequest) {
  Forwarded f(kH2cOffer);
  EXPECT_TRUE(f.values("Upgrade").empty()) << f.text();
  EXPECT_TRUE(f.values("Connection").empty()) << f.text();
  EXPECT_TRUE(f.values("HTTP2-Settings").empty()) << f.text();
}

TEST(WriteRequestHead, Http2SettingsIsDroppedEvenWhenConnectionDoesNotNameIt) {
  Forwarded f("GET / HTTP/1.1\r\nHost: h\r\nhttp2-settings: AAMA\r\n\r\n");
  EXPECT_TRUE(f.values("HTTP2-Settings").empty()) << f.text();
}

TEST(WriteRequestHead, H2cIsRemovedFromAnOfferThatAlsoNamesWebSocket) {
  Forwarded f(
      "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: h2c, websocket\r\n"
      "Upgrade: HTTP/2.0\r\n\r\n");
  EXPECT_EQ(f.values("Upgrade"), Values{"websocket"});
  EXPECT_EQ(f.values("Connection"), Values{"upgrade"});
}

TEST(WriteRequestHead, AnH2cOfferIsForwardedWhenTheRouteAllowsIt) {
  Forwarded f(kH2cOffer, kFwd, true);
  EXPECT_EQ(f.values("Upgrade"), Values{"h2c"});
  EXPECT_EQ(f.values("Connection"), Values{"upgrade, HTTP2-Settings"});
  EXPECT_EQ(f.values("HTTP2-Settings"), Values{"AAMAAABkAAQAoAAAAAIAAAAA"});
}

TEST(WriteRequestHead, ARequestWithoutHostGetsTheBackendAddressAsHost) {
  const ForwardInfo fwd{.client_ip = "10.0.0.9", .request_id = "r", .backend_host = "10.1.1.1:81"};
  EXPECT_EQ(Forwarded("GET / HTTP/1.0\r\n\r\n", fwd).values("Host"), Values{"10.1.1.1:81"});
  EXPECT_EQ(Forwarded("GET / HTTP/1.1\r\nHost:\r\n\r\n", fwd).values("Host"),
            Values{"10.1.1.1:81"});
  EXPECT_EQ(Forwarded("GET / HTTP/1.0\r\nHost: h\r\n\r\n", fwd).values("Host"), Values{"h"});
}

TEST(WriteRequestHead, ARequestFromEarlyDataCarriesEarlyData1) {
  const ForwardInfo early{.client_ip = "10.0.0.9", .request_id = "r", .early_data = true};
  EXPECT_EQ(Forwarded("GET / HTTP/1.1\r\nHost: h\r\n\r\n", early).values("Early-Data"),
            Values{"1"});
  EXPECT_TRUE(Forwarded("GET / HTTP/1.1\r\nHost: h\r\n\r\n").values("Early-Data").empty());
}

TEST(WriteRequestHead, AnEarlyDataFieldFromTheClientIsForwardedOnceAndNeverRemoved) {
  const ForwardInfo early{.client_ip = "10.0.0.9", .request_id = "r", .early_data = true};
  const std::string_view request = "GET / HTTP/1.1\r\nHost: h\r\nEarly-Data: 1\r\n\r\n";
  EXPECT_EQ(Forwarded(request, early).values("Early-Data"), Values{"1"});
  EXPECT_EQ(Forwarded(request).values("Early-Data"), Values{"1"});
}

TEST(WriteRequestHead, AClientsEarlyData0NeverHidesThatTheRequestCameInEarlyData) {
  const ForwardInfo early{.client_ip = "10.0.0.9", .request_id = "r", .early_data = true};
  const std::string_view request =
      "GET / HTTP/1.1\r\nHost: h\r\nEarly-Data: 0\r\nEarly-Data: 0\r\n\r\n";
  EXPECT_EQ(Forwarded(request, early).values("Early-Data"), Values{"1"});
  // After the handshake the field is the client's business, passed on as it came.
  EXPECT_EQ(Forwarded(request).values("Early-Data"), (Values{"0", "0"}));
}

TEST(OptionsResponse, IsA200WithAllowAndAnEmptyBody) {
  for (const bool close : {false, true}) {
    testing::Message m(Parser::Kind::response, options_response(close));
    ASSERT_EQ(m.parse_head(), Result::head_done);
    EXPECT_EQ(m.parser().status(), 200);
    EXPECT_EQ(m.values("Allow"), Values{"GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"});
    EXPECT_EQ(m.values("Content-Length"), Values{"0"});
    EXPECT_EQ(m.parser().head_end(), options_response(close).size());
    EXPECT_EQ(m.values("Connection"), close ? Values{"close"} : Values{});
  }
}

}  // namespace
}  // namespace floodgate::http
