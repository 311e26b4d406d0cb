#include "floodgate/routing/route_table.h"
#include "floodgate/routing/match_path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate {
namespace {

RouteParams route(std::string host, std::string prefix) {
  return {.host = std::move(host), .path_prefix = std::move(prefix), .upstream = "app"};
}

// Builds a table where route i sends to upstream id 100 + i, so a match names its route.
RouteTable table(const std::vector<RouteParams>& routes) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < routes.size(); ++i) {
    ids.push_back(100 + i);
  }
  return RouteTable::build(routes, ids);
}

// Index in the configuration of the route matching host and path; -1 for none.
int matched(const RouteTable& t, std::string_view host, std::string_view path) {
  const Route* r = t.match(host, path);
  return r == nullptr ? -1 : static_cast<int>(r->index);
}

TEST(RouteTable, EmptyTableMatchesNothing) {
  EXPECT_EQ(matched(RouteTable{}, "example.com", "/"), -1);
}

TEST(RouteTable, MatchReportsTheRoutesUpstreamAndConfigIndex) {
  const auto t = table({{.host = "a.com", .path_prefix = "/", .upstream = "app"}});
  const Route* r = t.match("a.com", "/");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->upstream, 100u);
  EXPECT_EQ(r->index, 0u);
  EXPECT_EQ(r->host, "a.com");
  EXPECT_EQ(r->path_prefix, "/");
}

TEST(RouteTable, HostMatchesCaseInsensitively) {
  const auto t = table({route("Example.COM", "/")});
  EXPECT_EQ(matched(t, "eXample.com", "/"), 0);
}

TEST(RouteTable, HostPortIsIgnored) {
  const auto t = table({route("example.com", "/")});
  EXPECT_EQ(matched(t, "example.com:8080", "/"), 0);
  EXPECT_EQ(matched(t, "example.com:", "/"), 0);
}

TEST(RouteTable, Ipv6LiteralHostMatchesWithOrWithoutPort) {
  const auto t = table({route("[::1]", "/")});
  EXPECT_EQ(matched(t, "[::1]:8080", "/"), 0);
  EXPECT_EQ(matched(t, "[::1]", "/"), 0);
  EXPECT_EQ(matched(t, "[::2]:8080", "/"), -1);
}

TEST(RouteTable, Ipv6RouteWithoutBracketsMatchesBracketedHost) {
  const auto t = table({route("::1", "/")});
  EXPECT_EQ(matched(t, "[::1]:8080", "/"), 0);
}

TEST(RouteTable, TrailingDotInHostIsIgnored) {
  const auto t = table({route("example.com", "/")});
  EXPECT_EQ(matched(t, "example.com.", "/"), 0);
  EXPECT_EQ(matched(t, "example.com.:80", "/"), 0);
}

TEST(RouteTable, OtherHostDoesNotMatchExactRoute) {
  const auto t = table({route("example.com", "/")});
  EXPECT_EQ(matched(t, "example.org", "/"), -1);
  EXPECT_EQ(matched(t, "www.example.com", "/"), -1);
}

TEST(RouteTable, PathPrefixIsAPlainBytePrefix) {
  const auto t = table({route("*", "/api")});
  EXPECT_EQ(matched(t, "h", "/api"), 0);
  EXPECT_EQ(matched(t, "h", "/apix"), 0);
  EXPECT_EQ(matched(t, "h", "/ap"), -1);
  EXPECT_EQ(matched(t, "h", "/API"), -1);
}

TEST(RouteTable, LongestPrefixWinsRegardlessOfConfigOrder) {
  const auto t = table({route("*", "/"), route("*", "/api/v1"), route("*", "/api")});
  EXPECT_EQ(matched(t, "h", "/api/v1/users"), 1);
  EXPECT_EQ(matched(t, "h", "/api/v2"), 2);
  EXPECT_EQ(matched(t, "h", "/other"), 0);
}

TEST(RouteTable, DuplicateHostAndPrefixFirstInConfigWins) {
  const auto t = table({route("a.com", "/"), route("A.com", "/")});
  EXPECT_EQ(matched(t, "a.com", "/"), 0);
}

TEST(RouteTable, WildcardMatchesSubdomainsButNotTheBareDomain) {
  const auto t = table({route("*.example.com", "/")});
  EXPECT_EQ(matched(t, "a.example.com", "/"), 0);
  EXPECT_EQ(matched(t, "a.b.example.com:443", "/"), 0);
  EXPECT_EQ(matched(t, "example.com", "/"), -1);
  EXPECT_EQ(matched(t, ".example.com", "/"), -1);
  EXPECT_EQ(matched(t, "badexample.com", "/"), -1);
}

TEST(RouteTable, CatchAllMatchesEveryHost) {
  const auto t = table({route("*", "/")});
  EXPECT_EQ(matched(t, "anything.example", "/x"), 0);
  EXPECT_EQ(matched(t, "10.0.0.1:80", "/x"), 0);
}

TEST(RouteTable, ExactHostBeatsWildcardAndCatchAllEvenWithShorterPrefix) {
  const auto t = table(
      {route("*", "/api/long"), route("*.example.com", "/api/lo"), route("www.example.com", "/")});
  EXPECT_EQ(matched(t, "www.example.com", "/api/long"), 2);
}

TEST(RouteTable, ExactHostWithoutMatchingPrefixFallsBackToWildcard) {
  const auto t = table({route("www.example.com", "/admin"), route("*.example.com", "/")});
  EXPECT_EQ(matched(t, "www.example.com", "/admin/x"), 0);
  EXPECT_EQ(matched(t, "www.example.com", "/public"), 1);
}

TEST(RouteTable, WildcardBeatsCatchAll) {
  const auto t = table({route("*", "/longer"), route("*.example.com", "/")});
  EXPECT_EQ(matched(t, "a.example.com", "/longer"), 1);
  EXPECT_EQ(matched(t, "a.example.org", "/longer"), 0);
}

TEST(RouteTable, MostSpecificWildcardWinsOverLongerPrefix) {
  const auto t = table({route("*.example.com", "/api/v1"), route("*.eu.example.com", "/")});
  EXPECT_EQ(matched(t, "a.eu.example.com", "/api/v1"), 1);
  EXPECT_EQ(matched(t, "a.us.example.com", "/api/v1"), 0);
}

TEST(RouteTable, WildcardWithoutMatchingPrefixFallsBackToLessSpecificWildcard) {
  const auto t =
      table({route("*.eu.example.com", "/admin"), route("*.example.com", "/"), route("*", "/")});
  EXPECT_EQ(matched(t, "a.eu.example.com", "/public"), 1);
}

TEST(RouteTable, NoMatchingPrefixAnywhereIsNoRoute) {
  const auto t = table({route("a.com", "/a"), route("*.a.com", "/a"), route("*", "/a")});
  EXPECT_EQ(matched(t, "a.com", "/b"), -1);
}

TEST(RouteTable, EmptyHostMatchesOnlyCatchAll) {
  const auto t = table({route("a.com", "/")});
  EXPECT_EQ(matched(t, "", "/"), -1);
  const auto with_star = table({route("a.com", "/"), route("*", "/")});
  EXPECT_EQ(matched(with_star, "", "/"), 1);
}

TEST(RouteTable, OverlongHostMatchesOnlyCatchAll) {
  const std::string host = std::string(300, 'a') + ".example.com";
  const auto t = table({route(host, "/"), route("*.example.com", "/"), route("*", "/")});
  EXPECT_EQ(matched(t, host, "/"), 2);
}

TEST(RouteTable, HostOfExactlyMaxBytesStillMatchesExactly) {
  const std::string host(RouteTable::kMaxHostBytes, 'a');
  const auto t = table({route(host, "/"), route("*", "/")});
  EXPECT_EQ(matched(t, host + ":80", "/"), 0);
}

// normalise_host: the one normalisation routing and the rate limits' host identities share.
std::string normalised(std::string_view host) {
  std::array<char, RouteTable::kMaxHostBytes> out{};
  return std::string(normalise_host(host, out));
}

TEST(NormaliseHost, EverySpellingOfAHostIsOneName) {
  for (const std::string_view spelling :
       {"a.example", "A.EXAMPLE", "A.Example:80", "a.example.", "a.example.:8080"}) {
    EXPECT_EQ(normalised(spelling), "a.example") << spelling;
  }
}

TEST(NormaliseHost, Ipv6LiteralsLoseTheirBracketsAndPort) {
  EXPECT_EQ(normalised("[2001:DB8::1]:443"), "2001:db8::1");
  EXPECT_EQ(normalised("::1"), "::1");
}

TEST(NormaliseHost, NothingOrTooLongIsEmpty) {
  EXPECT_EQ(normalised(""), "");
  EXPECT_EQ(normalised("."), "");
  EXPECT_EQ(normalised(std::string(RouteTable::kMaxHostBytes, 'A')),
            std::string(RouteTable::kMaxHostBytes, 'a'));
  EXPECT_EQ(normalised(std::string(RouteTable::kMaxHostBytes + 1, 'a')), "");
}

TEST(RouteTable, ManyHostsEachFindTheirOwnRoute) {
  std::vector<RouteParams> routes;
  routes.reserve(50);
  for (int i = 0; i < 50; ++i) {
    routes.push_back(route("h" + std::to_string(i) + ".com", "/"));
  }
  const auto t = table(routes);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(matched(t, "H" + std::to_string(i) + ".com", "/x"), i);
  }
}

TEST(RouteTable, ConfiguredPrefixesAreNormalisedLikeRequestPaths) {
  const auto t = table({route("*", "/%7Euser"), route("*", "/a//b/./c"), route("*", "/x")});
  EXPECT_EQ(matched(t, "h", "/~user/page"), 0);
  EXPECT_EQ(matched(t, "h", "/a/b/c"), 1);
  EXPECT_EQ(matched(t, "h", "/x"), 2);
}

TEST(RouteTable, RouteCarriesItsH2cUpgradePolicy) {
  std::vector<RouteParams> routes{route("a.com", "/"), route("b.com", "/")};
  routes[1].allow_h2c_upgrade = true;
  const auto t = table(routes);
  EXPECT_FALSE(t.match("a.com", "/")->allow_h2c_upgrade);
  EXPECT_TRUE(t.match("b.com", "/")->allow_h2c_upgrade);
}

TEST(RouteTable, BypassSpellingsOfAPathMatchItsRouteOnceNormalised) {
  // What the client connection does: normalise, then match. nginx routes all four to /admin.
  const auto t = table({route("*", "/admin"), route("*", "/")});
  for (const char* target : {"/x/../admin", "//admin", "/./admin", "/%61dmin", "/admin?q"}) {
    MatchPath p;
    ASSERT_EQ(p.assign(target), PathVerdict::ok) << target;
    EXPECT_EQ(matched(t, "h", p.view()), 0) << target;
  }
}

}  // namespace
}  // namespace floodgate
