// The [[routes]] keys that request hardening added or tightened: allow_h2c_upgrade, and
// path_prefix values that could never match a normalised path.
#include <gtest/gtest.h>

#include <string>

#include "config_test_support.h"

namespace floodgate::config {
namespace {

using testing::kMinimal;
using testing::load;
using testing::only;

LoadResult route_with(std::string_view tail) {
  return load(std::string(kMinimal) + std::string(tail));
}

TEST(RouteKeys, AllowH2cUpgradeIsOffByDefault) {
  const LoadResult r = route_with("");
  ASSERT_TRUE(r.config) << only(r);
  EXPECT_FALSE(r.config->routes.at(0).allow_h2c_upgrade);
}

TEST(RouteKeys, AllowH2cUpgradeCanBeTurnedOn) {
  const LoadResult r = route_with("allow_h2c_upgrade = true\n");
  ASSERT_TRUE(r.config) << only(r);
  EXPECT_TRUE(r.config->routes.at(0).allow_h2c_upgrade);
}

TEST(RouteKeys, AllowH2cUpgradeMustBeABoolean) {
  EXPECT_EQ(only(route_with("allow_h2c_upgrade = \"yes\"\n")),
            "test.toml:7:1: error: routes[0].allow_h2c_upgrade: expected a boolean, got a string "
            "(\"yes\"); e.g. allow_h2c_upgrade = true");
}

TEST(RouteKeys, PathPrefixWithAQueryIsRefusedBecauseItCouldNeverMatch) {
  EXPECT_EQ(only(route_with("path_prefix = \"/search?q=\"\n")),
            "test.toml:7:1: error: routes[0].path_prefix: \"/search?q=\" contains '?'; a route "
            "matches the path without the query, e.g. path_prefix = \"/search\"");
  EXPECT_FALSE(route_with("path_prefix = \"/a#b\"\n").config);
}

TEST(RouteKeys, PathPrefixIsAtMost1024Bytes) {
  const std::string longest = "/" + std::string(kMaxPathPrefixBytes - 1, 'a');
  EXPECT_TRUE(route_with("path_prefix = \"" + longest + "\"\n").config);
  EXPECT_EQ(only(route_with("path_prefix = \"" + longest + "a\"\n")),
            "test.toml:7:1: error: routes[0].path_prefix: a path_prefix of 1025 bytes is too "
            "long; at most 1024 are allowed");
}

}  // namespace
}  // namespace floodgate::config
