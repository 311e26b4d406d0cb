// The request-key sources of scoped rate limits: every source of seed 004's table, what a
// request without its rule's key is counted by (missing_key), and that reading them allocates
// nothing.
#include "floodgate/proxy/request_key.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/heap_count.h"
#include "floodgate/http/parser.h"

namespace floodgate::proxy {
namespace {

using Kind = resilience::KeySource::Kind;

resilience::KeySource src(Kind kind, std::string name = {}) {
  return resilience::KeySource{.kind = kind, .name = std::move(name)};
}

IpRange range(std::string_view text) {
  const std::optional<IpRange> r = IpRange::parse(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r.value_or(IpRange{});
}

// One request as the client connection holds it: the head parsed in place, the RequestView the
// stages see, and the connection's peer.
class Request {
 public:
  explicit Request(std::string_view fields, std::string_view target = "/p",
                   std::string_view method = "GET", std::string_view peer = "192.0.2.10")
      : text_(std::string(method) + " " + std::string(target) + " HTTP/1.1\r\n" +
              std::string(fields) + "\r\n"),
        fields_(std::make_unique<http::HeaderField[]>(http::HeadLimits{}.max_headers)),
        parser_(http::Parser::Kind::request),
        peer_text_(peer) {
    parser_.begin(text_.data(), fields_.get(), http::HeadLimits{});
    EXPECT_EQ(parser_.parse_head(text_.size()), http::Parser::Result::head_done) << text_;
    head_ = parser_.request_head();
    view_.method = parser_.method_name();
    view_.target = parser_.target();
    view_.path = target.starts_with('/') ? target.substr(0, target.find('?')) : "";
    for (uint32_t i = 0; i < parser_.field_count(); ++i) {
      if (parser_.field_kind(i) == http::Field::host) view_.host = parser_.field_value(i);
    }
    peer_ = IpAddress::parse(peer_text_).value_or(IpAddress{});
  }

  KeyContext context() const {
    return KeyContext{.head = &head_,
                      .request = &view_,
                      .peer = &peer_,
                      .peer_text = peer_text_,
                      .connection_id = 42,
                      .trusted_proxies = &trusted};
  }
  std::string key(const resilience::KeySource& s) const {
    std::array<char, kKeyScratch> scratch{};
    return std::string(key_of(s, context(), scratch));
  }
  std::string key(Kind kind, std::string name = {}) const {
    return key(src(kind, std::move(name)));
  }

  resilience::RequestView view_;
  std::vector<IpRange> trusted;

 private:
  std::string text_;
  std::unique_ptr<http::HeaderField[]> fields_;
  http::Parser parser_;
  http::RequestHead head_;
  std::string peer_text_;
  IpAddress peer_{};
};

// --- header:<name>

TEST(HeaderKey, IsTheFirstFieldOfThatNameInAnyCaseTrimmed) {
  const Request r("Host: h\r\nX-Tenant-ID:  acme \r\nx-tenant-id: other\r\n");
  EXPECT_EQ(r.key(Kind::header, "x-tenant-id"), "acme");
}

TEST(HeaderKey, AnEmptyFirstFieldIsMissingEvenWhenALaterOneHasAValue) {
  const Request r("Host: h\r\nX-Tenant-Id:\r\nX-Tenant-Id: acme\r\n");
  EXPECT_EQ(r.key(Kind::header, "x-tenant-id"), "");
}

TEST(HeaderKey, AnAbsentFieldIsMissing) {
  EXPECT_EQ(Request("Host: h\r\n").key(Kind::header, "x-tenant-id"), "");
}

// --- cookie:<name>

TEST(CookieKey, IsTheNamedCookieOfTheCookieField) {
  const Request r("Host: h\r\nCookie: a=1; session=abc; b=2\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "session"), "abc");
}

TEST(CookieKey, SearchesEveryCookieFieldInOrder) {
  const Request r("Host: h\r\nCookie: a=1\r\ncookie: session=abc\r\nCookie: session=late\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "session"), "abc");
}

TEST(CookieKey, StripsOnePairOfSurroundingQuotes) {
  const Request r("Host: h\r\nCookie: session=\"abc\"; q=\"\"; half=\"x\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "session"), "abc");
  EXPECT_EQ(r.key(Kind::cookie, "q"), "");
  EXPECT_EQ(r.key(Kind::cookie, "half"), "\"x");
}

TEST(CookieKey, NamesAreCaseSensitive) {
  const Request r("Host: h\r\nCookie: Session=upper; session=lower\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "session"), "lower");
  EXPECT_EQ(r.key(Kind::cookie, "SESSION"), "");
}

TEST(CookieKey, ToleratesMissingSpacesAndSkipsPairsWithoutEquals) {
  const Request r("Host: h\r\nCookie: junk;a=1;session = abc ;\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "session"), "abc");
  EXPECT_EQ(r.key(Kind::cookie, "junk"), "");
}

TEST(CookieKey, AValueContainingEqualsIsKeptWhole) {
  const Request r("Host: h\r\nCookie: t=a=b==\r\n");
  EXPECT_EQ(r.key(Kind::cookie, "t"), "a=b==");
}

TEST(CookieKey, NoCookieFieldIsMissing) {
  EXPECT_EQ(Request("Host: h\r\n").key(Kind::cookie, "session"), "");
}

// --- query:<name>

TEST(QueryKey, IsTheFirstParameterOfThatName) {
  const Request r("Host: h\r\n", "/p?x=1&tenant=acme&tenant=other");
  EXPECT_EQ(r.key(Kind::query, "tenant"), "acme");
}

TEST(QueryKey, IsNotPercentDecoded) {
  const Request r("Host: h\r\n", "/p?t%65nant=x&tenant=a%62c+d");
  EXPECT_EQ(r.key(Kind::query, "tenant"), "a%62c+d");
}

TEST(QueryKey, ANameWithoutEqualsOrAnEmptyValueIsMissing) {
  EXPECT_EQ(Request("Host: h\r\n", "/p?tenant&x=1").key(Kind::query, "tenant"), "");
  EXPECT_EQ(Request("Host: h\r\n", "/p?tenant=").key(Kind::query, "tenant"), "");
}

TEST(QueryKey, MatchesWholeNamesOnly) {
  const Request r("Host: h\r\n", "/p?tenants=1&xtenant=2&tenant=3");
  EXPECT_EQ(r.key(Kind::query, "tenant"), "3");
  EXPECT_EQ(r.key(Kind::query, "Tenant"), "");
}

TEST(QueryKey, StopsAtAFragmentAndToleratesEmptyParameters) {
  EXPECT_EQ(Request("Host: h\r\n", "/p?&&tenant=a#x").key(Kind::query, "tenant"), "a");
  EXPECT_EQ(Request("Host: h\r\n", "/p?x=1#tenant=a").key(Kind::query, "tenant"), "");
}

TEST(QueryKey, ReadsTheQueryOfAnAbsoluteFormTarget) {
  const Request r("Host: h\r\n", "http://h/p?tenant=acme");
  EXPECT_EQ(r.key(Kind::query, "tenant"), "acme");
}

TEST(QueryKey, ATargetWithoutAQueryIsMissing) {
  EXPECT_EQ(Request("Host: h\r\n", "/p").key(Kind::query, "tenant"), "");
  EXPECT_EQ(Request("Host: h\r\n", "/p?").key(Kind::query, "tenant"), "");
}

// --- path, authority, method, cid, peer_ip

TEST(RequestKeys, PathIsTheNormalisedPath) {
  Request r("Host: h\r\n", "/a/../b?q=1");
  r.view_.path = "/b";  // what MatchPath made of it
  EXPECT_EQ(r.key(Kind::path), "/b");
}

TEST(RequestKeys, AuthorityIsTheTargetsAuthorityElseTheHost) {
  Request r("Host: h.example\r\n");
  EXPECT_EQ(r.key(Kind::authority), "h.example");
  r.view_.authority = "abs.example:8080";
  EXPECT_EQ(r.key(Kind::authority), "abs.example");
}

TEST(RequestKeys, AuthorityIsNormalisedAsRoutingComparesHosts) {
  for (const std::string_view host :
       {"a.example", "A.EXAMPLE:80", "a.example.", "A.Example.:8080"}) {
    Request r("Host: x\r\n");
    r.view_.host = host;
    EXPECT_EQ(r.key(Kind::authority), "a.example") << host;
  }
}

TEST(RequestKeys, AnAuthorityLongerThanAnyHostNameIsMissing) {
  Request r("Host: x\r\n");
  const std::string longest(255, 'h');
  r.view_.host = longest;
  EXPECT_EQ(r.key(Kind::authority), longest);
  const std::string longer(256, 'h');
  r.view_.host = longer;
  EXPECT_EQ(r.key(Kind::authority), "");
}

TEST(RequestKeys, MethodIsTheMethodToken) {
  EXPECT_EQ(Request("Host: h\r\n", "/p", "DELETE").key(Kind::method), "DELETE");
}

TEST(RequestKeys, CidIsTheConnectionIdInDecimal) {
  const Request r("Host: h\r\n");
  EXPECT_EQ(r.key(Kind::cid), "42");
  KeyContext c = r.context();
  std::array<char, kKeyScratch> scratch{};
  c.connection_id = UINT64_MAX;
  EXPECT_EQ(key_of(src(Kind::cid), c, scratch), "18446744073709551615");
  c.connection_id = 0;
  EXPECT_EQ(key_of(src(Kind::cid), c, scratch), "0");
}

TEST(RequestKeys, PeerIpIsThePeersTextEvenWithForwardedFor) {
  Request r("Host: h\r\nX-Forwarded-For: 203.0.113.9\r\n");
  r.trusted = {range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::peer_ip), "192.0.2.10");
}

TEST(RequestKeys, NoneIsAlwaysMissing) {
  EXPECT_EQ(Request("Host: h\r\nX-A: b\r\n").key(Kind::none), "");
}

// --- client_ip

TEST(ClientIp, IsTheRightMostForwardedForAddressThatIsNotATrustedProxy) {
  // The client 198.51.100.7 sent "203.0.113.9" itself; the proxy 10.0.0.5 appended it, and the
  // proxy 192.0.2.10 (the peer) appended 10.0.0.5.
  Request r("Host: h\r\nX-Forwarded-For:  203.0.113.9 , 198.51.100.7,10.0.0.5\r\n");
  r.trusted = {range("10.0.0.0/8"), range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "198.51.100.7");
}

TEST(ClientIp, AClientsOwnForwardedForBehindAnAppendingProxyIsNotItsKey) {
  // What a trusted proxy that appends forwards when the client sent a spoofed header: every
  // request is the one client the proxy saw, whatever address it claims.
  for (const char* spoofed : {"203.0.113.1", "203.0.113.2", "2001:db8::99", "10.0.0.1"}) {
    Request r(std::string("Host: h\r\nX-Forwarded-For: ") + spoofed + ", 198.51.100.7\r\n");
    r.trusted = {range("192.0.2.0/24"), range("10.0.0.0/8")};
    EXPECT_EQ(r.key(Kind::client_ip), "198.51.100.7") << spoofed;
  }
}

TEST(ClientIp, ReadsEveryForwardedForFieldInOrderAsOneList) {
  Request r(
      "Host: h\r\nX-Forwarded-For: 203.0.113.9\r\nX-A: b\r\n"
      "x-forwarded-for: 198.51.100.7, 10.0.0.6\r\nX-Forwarded-For: 10.0.0.5\r\n");
  r.trusted = {range("10.0.0.0/8"), range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "198.51.100.7");
  r.trusted.push_back(range("198.51.100.7"));  // the walk goes on into the first field
  EXPECT_EQ(r.key(Kind::client_ip), "203.0.113.9");
}

TEST(ClientIp, IsTheLeftMostAddressWhenEveryOneIsTrusted) {
  Request r("Host: h\r\nX-Forwarded-For: 10.0.0.7, 10.0.0.6\r\nX-Forwarded-For: 10.0.0.5\r\n");
  r.trusted = {range("10.0.0.0/8"), range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "10.0.0.7");
}

TEST(ClientIp, AnElementThatIsNotAnAddressEndsTheWalkAtTheLastTrustedAddress) {
  // Left of a broken element nothing is believed, a spoofed address included: the client is the
  // trusted address right of it.
  for (const char* broken : {"unknown", "host.example", "203.0.113.9 extra", "_hidden",
                             "203.0.113.9:", "203.0.113.9:123456", "[2001:db8::1", "[192.0.2.1]",
                             "[2001:db8::1]x", "fe80::1%eth0"}) {
    Request r(std::string("Host: h\r\nX-Forwarded-For: 203.0.113.66, ") + broken +
              ", 10.0.0.5\r\n");
    r.trusted = {range("10.0.0.0/8"), range("192.0.2.0/24")};
    EXPECT_EQ(r.key(Kind::client_ip), "10.0.0.5") << broken;
  }
}

TEST(ClientIp, IsThePeerWhenTheRightMostElementIsNotAnAddress) {
  for (const char* xff : {"unknown", "203.0.113.9, unknown", "203.0.113.9, host.example"}) {
    Request r(std::string("Host: h\r\nX-Forwarded-For: ") + xff + "\r\n");
    r.trusted = {range("192.0.2.0/24")};
    EXPECT_EQ(r.key(Kind::client_ip), "192.0.2.10") << xff;
  }
}

TEST(ClientIp, SkipsEmptyElements) {
  Request r("Host: h\r\nX-Forwarded-For: 203.0.113.9, ,,\r\nX-Forwarded-For:\r\n");
  r.trusted = {range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "203.0.113.9");
}

TEST(ClientIp, TakesAddressesWithAPortAsProxiesWriteThem) {
  for (const char* xff : {"203.0.113.9:4711", "[2001:db8::1]:443", "[2001:db8::1]"}) {
    Request r(std::string("Host: h\r\nX-Forwarded-For: ") + xff + "\r\n");
    r.trusted = {range("192.0.2.0/24")};
    EXPECT_EQ(r.key(Kind::client_ip), xff[0] == '[' ? "2001:db8::1" : "203.0.113.9") << xff;
  }
  Request r("Host: h\r\nX-Forwarded-For: 198.51.100.7:50000, 10.0.0.5:8080\r\n");
  r.trusted = {range("10.0.0.0/8"), range("192.0.2.0/24")};  // 10.0.0.5:8080 is trusted too
  EXPECT_EQ(r.key(Kind::client_ip), "198.51.100.7");
}

TEST(ClientIp, NeverBelievesAnUntrustedPeer) {
  Request r("Host: h\r\nX-Forwarded-For: 203.0.113.9\r\n");
  r.trusted = {range("10.0.0.0/8")};
  EXPECT_EQ(r.key(Kind::client_ip), "192.0.2.10");
  r.trusted.clear();
  EXPECT_EQ(r.key(Kind::client_ip), "192.0.2.10");
}

TEST(ClientIp, IsThePeerWhenATrustedProxySendsNoForwardedFor) {
  Request r("Host: h\r\n");
  r.trusted = {range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "192.0.2.10");
}

TEST(ClientIp, TakesIpv6FromAnIpv6ProxyInCanonicalForm) {
  Request r("Host: h\r\nX-Forwarded-For: 203.0.113.9, 2001:DB8:0:0::0:1, 2001:db8:ffff::7\r\n",
            "/p", "GET", "2001:db8:ffff::2");
  r.trusted = {range("2001:db8:ffff::/48")};
  EXPECT_EQ(r.key(Kind::client_ip), "2001:db8::1");
}

TEST(ClientIp, AnIpv4MappedPeerIsInItsIpv4RangeAndWrittenAsIpv4) {
  Request r("Host: h\r\nX-Forwarded-For: ::ffff:203.0.113.9\r\n", "/p", "GET", "::ffff:192.0.2.10");
  EXPECT_EQ(r.key(Kind::client_ip), "192.0.2.10");  // untrusted: the peer, as IPv4
  r.trusted = {range("192.0.2.0/24")};
  EXPECT_EQ(r.key(Kind::client_ip), "203.0.113.9");
}

TEST(ClientIp, WithoutAPeerAddressIsThePeerText) {
  const Request r("Host: h\r\nX-Forwarded-For: 203.0.113.9\r\n");
  KeyContext c = r.context();
  c.peer = nullptr;
  c.peer_text = "unix";
  std::array<char, kKeyScratch> scratch{};
  EXPECT_EQ(key_of(src(Kind::client_ip), c, scratch), "unix");
}

// --- forwarded_client: what the access log's `client` is

TEST(ForwardedClient, IsNothingWhenTheClientIsThePeerItself) {
  const std::vector<IpRange> trusted = {range("192.0.2.0/24")};
  const IpAddress proxy = *IpAddress::parse("192.0.2.10");
  const IpAddress other = *IpAddress::parse("198.51.100.7");
  Request with("Host: h\r\nX-Forwarded-For: 203.0.113.9\r\n");
  const http::RequestHead* head = with.context().head;
  EXPECT_EQ(forwarded_client(other, trusted, head), std::nullopt);  // an untrusted peer
  EXPECT_EQ(forwarded_client(proxy, {}, head), std::nullopt);       // nobody trusted
  EXPECT_EQ(forwarded_client(proxy, trusted, nullptr), std::nullopt);
  Request without("Host: h\r\n");
  EXPECT_EQ(forwarded_client(proxy, trusted, without.context().head), std::nullopt);
  Request unknown("Host: h\r\nX-Forwarded-For: unknown\r\n");
  EXPECT_EQ(forwarded_client(proxy, trusted, unknown.context().head), std::nullopt);
}

TEST(ForwardedClient, IsTheAddressClientIpWritesForATrustedPeer) {
  const std::vector<IpRange> trusted = {range("192.0.2.0/24")};
  Request r("Host: h\r\nX-Forwarded-For: 203.0.113.66, ::FFFF:198.51.100.7\r\n");
  const std::optional<IpAddress> a =
      forwarded_client(*IpAddress::parse("192.0.2.10"), trusted, r.context().head);
  ASSERT_TRUE(a.has_value());
  std::array<char, kKeyScratch> text{};
  EXPECT_EQ(address_text(*a, text), "198.51.100.7");
  r.trusted = trusted;
  EXPECT_EQ(r.key(Kind::client_ip), "198.51.100.7");
}

// --- bearer_token

TEST(BearerToken, IsTheCredentialsOfABearerAuthorization) {
  EXPECT_EQ(Request("Host: h\r\nAuthorization: Bearer abc.def\r\n").key(Kind::bearer_token),
            "abc.def");
}

TEST(BearerToken, TheSchemeIsCaseInsensitiveAndTheTokenTrimmed) {
  EXPECT_EQ(Request("Host: h\r\nauthorization: bEaReR   tok  \r\n").key(Kind::bearer_token), "tok");
}

TEST(BearerToken, AnyOtherSchemeOrNoTokenIsMissing) {
  for (const char* value : {"Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "Bearertok", "tok", ""}) {
    const Request r(std::string("Host: h\r\nAuthorization: ") + value + "\r\n");
    EXPECT_EQ(r.key(Kind::bearer_token), "") << value;
  }
  EXPECT_EQ(Request("Host: h\r\n").key(Kind::bearer_token), "");
}

// --- lengths, null members

TEST(RequestKeys, AValueLongerThan256BytesIsReturnedWhole) {
  const std::string tenant(1000, 't');
  const Request r("Host: h\r\nX-Tenant: " + tenant + "\r\n");
  EXPECT_EQ(r.key(Kind::header, "x-tenant"), tenant);
}

TEST(RequestKeys, AnEmptyContextGivesOnlyTheConnectionsOwnKeys) {
  const KeyContext c{.peer_text = "192.0.2.10", .connection_id = 7};
  std::array<char, kKeyScratch> scratch{};
  for (const Kind k : {Kind::header, Kind::cookie, Kind::query, Kind::path, Kind::authority,
                       Kind::method, Kind::bearer_token}) {
    EXPECT_EQ(key_of(src(k, "x"), c, scratch), "") << static_cast<int>(k);
  }
  EXPECT_EQ(key_of(src(Kind::cid), c, scratch), "7");
  EXPECT_EQ(key_of(src(Kind::peer_ip), c, scratch), "192.0.2.10");
  EXPECT_EQ(key_of(src(Kind::client_ip), c, scratch), "192.0.2.10");
}

// --- a request without the key (missing_key)

using resilience::MissingKey;

Identity identity(const Request& r, const resilience::KeySource& s, MissingKey missing,
                  std::array<char, kKeyScratch>& scratch) {
  return identity_of(s, missing, r.context(), scratch);
}

TEST(MissingKey, ThePresentKeyAnswersWhateverMissingKeySays) {
  const Request r("Host: h\r\nX-Tenant: acme\r\n");
  std::array<char, kKeyScratch> scratch{};
  for (const MissingKey m :
       {MissingKey::peer, MissingKey::route, MissingKey::skip, MissingKey::refuse}) {
    const Identity id = identity(r, src(Kind::header, "x-tenant"), m, scratch);
    EXPECT_EQ(id.value, "acme");
    EXPECT_EQ(id.as, Counted::by_key);
  }
}

TEST(MissingKey, PeerCountsAnAnonymousRequestByItsClientsAddress) {
  const Request r("Host: h.example\r\n", "/p", "GET", "192.0.2.10");
  std::array<char, kKeyScratch> scratch{};
  const Identity id = identity(r, src(Kind::header, "x-tenant"), MissingKey::peer, scratch);
  EXPECT_EQ(id.value, "192.0.2.10");
  EXPECT_EQ(id.as, Counted::by_peer);
}

TEST(MissingKey, PeerIsTheAddressATrustedProxyAppendedNotTheHost) {
  Request r("Host: h.example\r\nX-Forwarded-For: 203.0.113.9, 198.51.100.7\r\n", "/p", "GET",
            "192.0.2.10");
  r.trusted = {range("192.0.2.0/24")};
  std::array<char, kKeyScratch> scratch{};
  const Identity id = identity(r, src(Kind::bearer_token), MissingKey::peer, scratch);
  EXPECT_EQ(id.value, "198.51.100.7");
  EXPECT_EQ(id.as, Counted::by_peer);
}

TEST(MissingKey, PeerIgnoresXForwardedForFromAnUntrustedPeer) {
  const Request r("Host: h\r\nX-Forwarded-For: 198.51.100.7\r\n", "/p", "GET", "192.0.2.10");
  std::array<char, kKeyScratch> scratch{};
  EXPECT_EQ(identity(r, src(Kind::cookie, "s"), MissingKey::peer, scratch).value, "192.0.2.10");
}

TEST(MissingKey, RouteSkipAndRefuseGiveNoValue) {
  const Request r("Host: h.example\r\n");
  std::array<char, kKeyScratch> scratch{};
  const resilience::KeySource key = src(Kind::header, "x-tenant");
  EXPECT_EQ(identity(r, key, MissingKey::route, scratch).as, Counted::by_route);
  EXPECT_EQ(identity(r, key, MissingKey::skip, scratch).as, Counted::skipped);
  EXPECT_EQ(identity(r, key, MissingKey::refuse, scratch).as, Counted::refused);
  for (const MissingKey m : {MissingKey::route, MissingKey::skip, MissingKey::refuse}) {
    EXPECT_EQ(identity(r, key, m, scratch).value, "");
  }
}

TEST(MissingKey, AnEmptyValueIsMissingAsNginxDoesNotCountAnEmptyKey) {
  const Request r("Host: h\r\nX-Tenant: \r\n");
  std::array<char, kKeyScratch> scratch{};
  EXPECT_EQ(identity(r, src(Kind::header, "x-tenant"), MissingKey::skip, scratch).as,
            Counted::skipped);
}

TEST(MissingKey, OnlyTheSourcesARequestCanLackAreEverMissing) {
  for (const Kind k :
       {Kind::header, Kind::cookie, Kind::query, Kind::authority, Kind::bearer_token}) {
    EXPECT_TRUE(resilience::can_be_missing(k)) << static_cast<int>(k);
  }
  for (const Kind k :
       {Kind::none, Kind::path, Kind::method, Kind::cid, Kind::peer_ip, Kind::client_ip}) {
    EXPECT_FALSE(resilience::can_be_missing(k)) << static_cast<int>(k);
  }
}

// --- allocation

TEST(RequestKeys, ReadingEverySourceAllocatesNothing) {
  Request r(
      "Host: h\r\nX-Tenant: acme\r\nCookie: a=1; s=\"v\"\r\nAuthorization: Bearer tok\r\n"
      "X-Forwarded-For: 2001:db8::1\r\n",
      "/p?t=1");
  r.trusted = {range("192.0.2.0/24")};
  const std::vector<resilience::KeySource> sources = {src(Kind::header, "x-tenant"),
                                                      src(Kind::cookie, "s"),
                                                      src(Kind::query, "t"),
                                                      src(Kind::path),
                                                      src(Kind::authority),
                                                      src(Kind::method),
                                                      src(Kind::cid),
                                                      src(Kind::peer_ip),
                                                      src(Kind::client_ip),
                                                      src(Kind::bearer_token),
                                                      src(Kind::header, "x-absent")};
  const KeyContext c = r.context();
  std::array<char, kKeyScratch> scratch{};
  std::size_t total = 0;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 100; ++i) {
    for (const resilience::KeySource& s : sources) {
      total += key_of(s, c, scratch).size() +
               identity_of(s, resilience::MissingKey::peer, c, scratch).value.size();
    }
  }
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
  EXPECT_GT(total, 0u);
}

}  // namespace
}  // namespace floodgate::proxy
