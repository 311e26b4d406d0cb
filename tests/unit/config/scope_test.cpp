// Keys that belong to a different scope: the pool-scoped admission keys written in a route get
// an error that names where they go, not "unknown key".
#include <gtest/gtest.h>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;

// kMinimal (its route on lines 5-6, upstream "app") followed by `tail` from line 7 on.
LoadResult route_with(std::string_view tail) {
  return load(std::string(kMinimal) + std::string(tail));
}

TEST(ConfigScope, NamesTheRoutesUpstreamForAPoolScopedKeyInARoute) {
  EXPECT_EQ(only(route_with("max_active_requests = 100\n")),
            "test.toml:7:1: error: routes[0].max_active_requests: max_active_requests is "
            "pool-scoped: set it under [upstreams.resilience] of upstream 'app'");
}

TEST(ConfigScope, NamesTheRoutesUpstreamForAPoolScopedKeyInRoutesResilience) {
  EXPECT_EQ(only(route_with("\n[routes.resilience]\nmax_active_requests = 100\n")),
            "test.toml:9:1: error: routes[0].resilience.max_active_requests: "
            "max_active_requests is pool-scoped: set it under [upstreams.resilience] of upstream "
            "'app'");
}

TEST(ConfigScope, ReportsEveryPoolScopedKeyInBothPlaces) {
  const LoadResult r = route_with(
      "max_active_per_backend = 4\nmax_pending_requests = 64\n[routes.resilience]\n"
      "max_active_requests = 100\npending_timeout = \"1s\"\n");
  ASSERT_EQ(r.diagnostics.size(), 4u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "routes[0].max_active_per_backend");
  EXPECT_EQ(r.diagnostics[1].path, "routes[0].max_pending_requests");
  EXPECT_EQ(r.diagnostics[2].path, "routes[0].resilience.max_active_requests");
  EXPECT_EQ(r.diagnostics[3].path, "routes[0].resilience.pending_timeout");
  EXPECT_EQ(r.diagnostics[3].message,
            "pending_timeout is pool-scoped: set it under [upstreams.resilience] of upstream "
            "'app'");
}

TEST(ConfigScope, NamesNoUpstreamWhenTheRoutesUpstreamIsNotDefined) {
  const LoadResult r = load(std::string(kMinimal) +
                            "[[routes]]\npath_prefix = \"/x\"\nupstream = \"nope\"\n"
                            "max_pending_requests = 8\n");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "routes[1].upstream");
  EXPECT_EQ(format(r.diagnostics[1]),
            "test.toml:10:1: error: routes[1].max_pending_requests: max_pending_requests is "
            "pool-scoped: set it under [upstreams.resilience] of the upstream the route uses");
}

TEST(ConfigScope, NamesNoUpstreamWhenTheRouteHasNone) {
  const LoadResult r =
      load(std::string(kMinimal) + "[[routes]]\npath_prefix = \"/x\"\nmax_active_requests = 1\n");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "routes[1].upstream");
  EXPECT_EQ(r.diagnostics[1].message,
            "max_active_requests is pool-scoped: set it under [upstreams.resilience] of the "
            "upstream the route uses");
}

TEST(ConfigScope, ReportsOtherKeysInRoutesResilienceAsUnknown) {
  EXPECT_EQ(only(route_with("[routes.resilience]\nretries = 3\n")),
            "test.toml:8:1: error: routes[0].resilience.retries: unknown key 'retries' in "
            "[routes.resilience], which accepts no keys in this version of floodgate");
}

TEST(ConfigScope, TellsWhereAKeyOfAnotherTableInRoutesResilienceBelongs) {
  EXPECT_EQ(only(route_with("[routes.resilience]\nkeepalive = 3\n")),
            "test.toml:8:1: error: routes[0].resilience.keepalive: unknown key 'keepalive' in "
            "[routes.resilience]; 'keepalive' belongs in an [[upstreams]] entry");
}

TEST(ConfigScope, TreatsAResilienceThatIsNotATableAsAnUnknownRouteKey) {
  EXPECT_EQ(only(route_with("resilience = 3\n")),
            "test.toml:7:1: error: routes[0].resilience: unknown key 'resilience' in "
            "[[routes]]; expected one of: host, path_prefix, upstream, allow_h2c_upgrade");
}

TEST(ConfigScope, ListsOnlyRealRouteKeysForATypo) {
  EXPECT_EQ(only(route_with("hots = \"a.b\"\n")),
            "test.toml:7:1: error: routes[0].hots: unknown key 'hots' in [[routes]] (did you "
            "mean 'host'?); expected one of: host, path_prefix, upstream, allow_h2c_upgrade");
}

TEST(ConfigScope, TellsThatAPoolScopedKeyInAnUpstreamBelongsInItsResilienceTable) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\nmax_active_requests = "
      "1\n[upstreams.resilience]\nmax_active_requests = 8\n[[routes]]\nupstream = \"app\"\n");
  EXPECT_EQ(only(r),
            "test.toml:4:1: error: upstreams[0].max_active_requests: unknown key "
            "'max_active_requests' in [[upstreams]]; 'max_active_requests' belongs in "
            "[upstreams.resilience]");
}

TEST(ConfigScope, TellsWhereAPoolScopedKeyInAnotherTableBelongs) {
  EXPECT_EQ(only(testing::load_with("[server]\npending_timeout = \"1s\"")),
            "test.toml:2:1: error: server.pending_timeout: unknown key 'pending_timeout' in "
            "[server]; 'pending_timeout' belongs in [upstreams.resilience]");
}

}  // namespace
}  // namespace floodgate::config
