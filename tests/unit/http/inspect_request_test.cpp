#include <gtest/gtest.h>

#include <string>

#include "floodgate/http/rewrite.h"
#include "http_test_support.h"

namespace floodgate::http {
namespace {

using testing::Message;
using testing::Result;

// A request head as floodgate judges it: `reason` is the parser's when it refuses the head,
// else inspect_request's; `facts` (views into the head) are valid while this object lives.
class Inspected {
 public:
  explicit Inspected(std::string_view request) : m_(Parser::Kind::request, request) {
    const Result r = m_.parse_head();
    parsed_ = r == Result::head_done;
    reason_ =
        parsed_ ? inspect_request(m_.parser().request_head(), facts_) : m_.parser().error_reason();
  }
  bool parsed() const { return parsed_; }
  Reason reason() const { return reason_; }
  const RequestFacts& facts() const { return facts_; }

 private:
  Message m_;
  RequestFacts facts_;
  bool parsed_ = false;
  Reason reason_ = Reason::none;
};

Reason verdict(std::string_view request) {
  return Inspected(request).reason();
}

TEST(InspectRequest, AcceptsAnOrdinaryRequest) {
  const Inspected r("GET /a?b HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "Example.com:8080");
  EXPECT_EQ(r.facts().path, "/a?b");
  EXPECT_TRUE(r.facts().keep_alive);
  EXPECT_FALSE(r.facts().has_body);
  EXPECT_FALSE(r.facts().expect_continue);
  EXPECT_FALSE(r.facts().upgrade);
  EXPECT_TRUE(r.facts().request_id.empty());
}

TEST(InspectRequest, MissingHostOnHttp11IsBadRequest) {
  EXPECT_EQ(verdict("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, MissingHostOnHttp11IsBadRequestEvenWithAnAbsoluteTarget) {
  // RFC 9112 section 3.2: any HTTP/1.1 request without Host gets 400.
  EXPECT_EQ(verdict("GET http://a.example/ HTTP/1.1\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, TwoHostFieldsAreBadRequest) {
  EXPECT_EQ(verdict("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(verdict("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, Http10WithoutHostIsAccepted) {
  const Inspected r("GET /old HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().host.empty());
  EXPECT_EQ(r.facts().path, "/old");
  EXPECT_FALSE(r.facts().keep_alive);
}

TEST(InspectRequest, HostValueIsTrimmed) {
  const Inspected r("GET / HTTP/1.1\r\nHost: a.example \t\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "a.example");
}

TEST(InspectRequest, TransferEncodingChunkedAloneIsAccepted) {
  const Inspected r("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().has_body);
  EXPECT_EQ(verdict("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"),
            Reason::none);
}

TEST(InspectRequest, AnyOtherTransferEncodingIsBadRequest) {
  for (const char* te :
       {"Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: identity\r\n", "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked;q=1\r\n", "Transfer-Encoding: \r\n"}) {
    EXPECT_EQ(verdict(std::string("POST / HTTP/1.1\r\nHost: a\r\n") + te + "\r\n"),
              Reason::bad_request)
        << te;
  }
}

TEST(InspectRequest, AbsoluteFormTakesHostFromTheAuthority) {
  const Inspected r("GET http://Auth.example:81/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "Auth.example:81");
  EXPECT_EQ(r.facts().path, "/p/q?x=1");
}

TEST(InspectRequest, AbsoluteFormWithoutAPathForwardsSlash) {
  const Inspected r("GET http://a.example HTTP/1.1\r\nHost: a.example\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "a.example");
  EXPECT_EQ(r.facts().path, "/");
}

TEST(InspectRequest, AbsoluteFormSchemeIsCaseInsensitiveAndMayBeHttps) {
  const Inspected r("GET HTTPS://s.example/x HTTP/1.1\r\nHost: s.example\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "s.example");
  EXPECT_EQ(r.facts().path, "/x");
}

TEST(InspectRequest, AbsoluteFormOnHttp10NeedsNoHost) {
  const Inspected r("GET http://a.example/z HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "a.example");
  EXPECT_EQ(r.facts().path, "/z");
}

TEST(InspectRequest, AbsoluteFormWithAnEmptyAuthorityIsBadRequest) {
  EXPECT_EQ(verdict("GET http:///p HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, UnsupportedTargetFormsAreBadRequest) {
  EXPECT_EQ(verdict("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(verdict("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, AsteriskFormIsAcceptedForOptions) {
  const Inspected r("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(r.parsed());
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().path, "*");
}

TEST(InspectRequest, UnsupportedHttpVersionsAreBadRequest) {
  for (const char* version : {"HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0"}) {
    EXPECT_EQ(verdict(std::string("GET / ") + version + "\r\nHost: a\r\n\r\n"), Reason::bad_request)
        << version;
  }
}

TEST(InspectRequest, ConnectToHostAndPortIsReportedForTheProtocolPolicy) {
  const Inspected r("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n");
  EXPECT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().connect);
  EXPECT_EQ(r.facts().authority, "a.example:443");
  EXPECT_EQ(r.facts().host, "a.example:443");
}

TEST(InspectRequest, ConnectWithoutAnAuthorityAndPortIsBadRequest) {
  for (const char* target : {"/", "a.example", "a.example:", "http://a.example:443/", "[::1]"}) {
    EXPECT_EQ(verdict(std::string("CONNECT ") + target + " HTTP/1.1\r\nHost: a\r\n\r\n"),
              Reason::bad_request)
        << target;
  }
}

TEST(InspectRequest, HostFieldAndAbsoluteAuthorityAreKeptApart) {
  const Inspected r("GET http://b.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n");
  EXPECT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().host, "b.example");
  EXPECT_EQ(r.facts().authority, "b.example");
  EXPECT_EQ(r.facts().host_header, "a.example");
}

TEST(InspectRequest, CorsPreflightFieldsAreReportedOnOptionsOnly) {
  const Inspected pre(
      "OPTIONS /x HTTP/1.1\r\nHost: a\r\nOrigin: https://o\r\n"
      "Access-Control-Request-Method: PUT\r\n\r\n");
  EXPECT_TRUE(pre.facts().origin);
  EXPECT_TRUE(pre.facts().cors_request_method);
  const Inspected get("GET /x HTTP/1.1\r\nHost: a\r\nOrigin: https://o\r\n\r\n");
  EXPECT_FALSE(get.facts().origin);
}

TEST(InspectRequest, ExpectContinueIsReported) {
  const Inspected r(
      "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
      "Expect: 100-Continue\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().expect_continue);
  EXPECT_TRUE(r.facts().has_body);
}

TEST(InspectRequest, OtherExpectationsAreNotContinue) {
  const Inspected r("PUT / HTTP/1.1\r\nHost: a\r\nExpect: something-else\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_FALSE(r.facts().expect_continue);
}

TEST(InspectRequest, UpgradeWithConnectionUpgradeIsAnUpgrade) {
  const Inspected r(
      "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
      "Connection: keep-alive, Upgrade\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().upgrade);
}

TEST(InspectRequest, UpgradeNeedsBothUpgradeAndConnectionUpgrade) {
  const Inspected field_only("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_EQ(field_only.reason(), Reason::none);
  EXPECT_FALSE(field_only.facts().upgrade);
  const Inspected token_only("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n");
  ASSERT_EQ(token_only.reason(), Reason::none);
  EXPECT_FALSE(token_only.facts().upgrade);
}

TEST(InspectRequest, ContentLengthZeroHasNoBody) {
  const Inspected r("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_FALSE(r.facts().has_body);
}

TEST(InspectRequest, ReportsTheClientsFirstRequestIdTrimmed) {
  const Inspected r(
      "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id:  abc-1 \r\n"
      "x-request-id: second\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().request_id, "abc-1");
}

TEST(InspectRequest, ConnectionCloseOnHttp11IsNotKeepAlive) {
  const Inspected r("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_FALSE(r.facts().keep_alive);
}

TEST(InspectRequest, ClearsFactsFromAnEarlierRequest) {
  Message first(Parser::Kind::request,
                "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                "Expect: 100-continue\r\nX-Request-Id: r\r\nConnection: Upgrade\r\n"
                "Upgrade: x\r\n\r\n");
  Message second(Parser::Kind::request, "GET /b HTTP/1.1\r\nHost: b\r\n\r\n");
  ASSERT_EQ(first.parse_head(), Result::head_done);
  ASSERT_EQ(second.parse_head(), Result::head_done);
  RequestFacts facts;
  ASSERT_EQ(inspect_request(first.parser().request_head(), facts), Reason::none);
  ASSERT_EQ(inspect_request(second.parser().request_head(), facts), Reason::none);
  EXPECT_FALSE(facts.expect_continue);
  EXPECT_FALSE(facts.has_body);
  EXPECT_FALSE(facts.upgrade);
  EXPECT_TRUE(facts.request_id.empty());
  EXPECT_EQ(facts.host, "b");
  EXPECT_EQ(facts.path, "/b");
}

TEST(InspectRequest, TransferEncodingOnHttp10IsBadRequest) {
  // RFC 9112 section 6.1: HTTP/1.0 has no transfer codings; de-chunking it would frame the
  // message differently from an HTTP/1.0 peer and let a pipelined request through.
  EXPECT_EQ(verdict("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(verdict("POST / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"),
            Reason::bad_request);
}

TEST(InspectRequest, AbsoluteFormWithUserinfoIsBadRequest) {
  EXPECT_EQ(verdict("GET http://user:pw@evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(verdict("GET http://@evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, AbsoluteFormPortAbove65535IsBadRequest) {
  EXPECT_EQ(verdict("GET http://a.example:65536/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            Reason::bad_request);
  EXPECT_EQ(verdict("GET http://a.example:65535/ HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::none);
}

TEST(InspectRequest, HostThatIsNotHostAndPortIsBadRequest) {
  for (const char* host : {"a b", "a/b", "user@a.example", "a.example,b.example", "a:99999", "a:8x",
                           "a:-1", ":80", "[::1", "[zz::1]", "[1.2.3.4]", "a%41"}) {
    EXPECT_EQ(verdict(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n"),
              Reason::bad_request)
        << host;
  }
}

TEST(InspectRequest, HostIsCheckedEvenWhenAnAbsoluteTargetReplacesIt) {
  EXPECT_EQ(verdict("GET http://a.example/ HTTP/1.1\r\nHost: x@y\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, HostNamesAddressesAndPortsAreAccepted) {
  for (const char* host :
       {"a.example", "A-1.example_x~", "a.example.", "10.0.0.1:8080", "[::1]", "[::1]:8080",
        "[2001:db8::1.2.3.4]:1", "a.example:", "a.example:0", "a.example:65535"}) {
    const Inspected r(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    EXPECT_EQ(r.reason(), Reason::none) << host;
    EXPECT_EQ(r.facts().host, host);
  }
}

TEST(InspectRequest, EmptyHostOnHttp11IsAcceptedAsNoHost) {
  // RFC 9110 section 7.2 allows it; it matches only "*" routes and the backend gets its own
  // address as Host.
  const Inspected r("GET / HTTP/1.1\r\nHost: \r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().host.empty());
}

TEST(InspectRequest, FragmentInTheTargetIsBadRequest) {
  // Refused by llhttp or by inspect_request: either way 400, never forwarded.
  EXPECT_EQ(verdict("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
  EXPECT_EQ(verdict("GET http://a.example/#f HTTP/1.1\r\nHost: a\r\n\r\n"), Reason::bad_request);
}

TEST(InspectRequest, AsteriskFormIsReportedAsAsterisk) {
  const Inspected r("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().asterisk);
  EXPECT_FALSE(Inspected("OPTIONS / HTTP/1.1\r\nHost: a\r\n\r\n").facts().asterisk);
}

TEST(InspectRequest, RequestIdOfUpTo200VisibleAsciiCharactersIsAdopted) {
  const std::string id(kMaxRequestIdBytes, '~');
  const Inspected r("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: " + id + "\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_EQ(r.facts().request_id, id);
}

TEST(InspectRequest, RequestIdThatIsTooLongOrNotVisibleAsciiIsReplaced) {
  for (const std::string& id :
       {std::string(kMaxRequestIdBytes + 1, 'a'), std::string("a b"), std::string("caf\xc3\xa9"),
        std::string("a\x7f"), std::string("a\tb")}) {
    const Inspected r("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: " + id + "\r\n\r\n");
    if (!r.parsed()) continue;  // the parser refused the byte itself
    ASSERT_EQ(r.reason(), Reason::none) << id;
    EXPECT_TRUE(r.facts().request_id.empty()) << id;
  }
}

TEST(InspectRequest, OnlyTheFirstRequestIdDecides) {
  const Inspected r("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a b\r\nX-Request-Id: fine\r\n\r\n");
  ASSERT_EQ(r.reason(), Reason::none);
  EXPECT_TRUE(r.facts().request_id.empty());
}

TEST(InspectRequest, AnH2cOnlyOfferIsNotAnUpgradeUntilARouteAllowsIt) {
  RequestFacts facts = Inspected(
                           "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                           "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
                           .facts();
  EXPECT_TRUE(facts.offers_h2c);
  EXPECT_FALSE(facts.upgrade);
  RequestFacts allowed = facts;
  apply_h2c_policy(facts, false);
  EXPECT_FALSE(facts.upgrade);
  EXPECT_FALSE(facts.keep_alive);  // the parser read the head as an upgrade: close after
  apply_h2c_policy(allowed, true);
  EXPECT_TRUE(allowed.upgrade);
}

TEST(InspectRequest, AnOfferOfH2cAndWebSocketStaysAWebSocketUpgrade) {
  RequestFacts facts =
      Inspected(
          "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c, websocket\r\n\r\n")
          .facts();
  apply_h2c_policy(facts, false);
  EXPECT_TRUE(facts.upgrade);
  EXPECT_TRUE(facts.offers_h2c);
  EXPECT_TRUE(facts.offers_other);
}

TEST(InspectRequest, EveryHttp2SpellingCountsAsH2c) {
  for (const char* offer : {"h2c", "H2C", "h2", "HTTP/2.0", "http/2"}) {
    const Inspected r(std::string("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: ") +
                      offer + "\r\n\r\n");
    EXPECT_TRUE(r.facts().offers_h2c) << offer;
    EXPECT_FALSE(r.facts().offers_other) << offer;
  }
}

}  // namespace
}  // namespace floodgate::http
