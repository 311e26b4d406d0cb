// The generation diff (POST /config/preview, the reload log line): every kind of change is
// reported, including fields no section names explicitly.
#include "config_diff.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

namespace floodgate::app {
namespace {

namespace json = boost::json;

const char kBase[] = R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9001"]
[[routes]]
upstream = "app"
)";

config::Config parse(const std::string& toml) {
  config::LoadResult r = config::load_string(
      toml, "test.toml", [](std::string_view) { return std::optional<std::string>{}; });
  EXPECT_TRUE(r.ok()) << (r.diagnostics.empty() ? "" : config::format(r.diagnostics[0]));
  return *r.config;
}

std::string changed(const json::object& diff, const char* section) {
  return json::serialize(diff.at(section).at("changed"));
}

TEST(ConfigDiff, EqualConfigurationsChangeNothing) {
  const config::Config a = parse(kBase);
  const json::object d = config_diff(a, a);
  EXPECT_EQ(summarize(d), "nothing changed");
  EXPECT_EQ(changed(d, "tables"), "[]");
}

TEST(ConfigDiff, ReportsPoolsAddedRemovedAndServersChanged) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9002"]
[[upstreams]]
name = "api"
servers = ["127.0.0.1:9100"]
[[routes]]
upstream = "app"
)");
  const json::object d = config_diff(a, b);
  EXPECT_EQ(json::serialize(d.at("pools").at("added")), R"(["api"])");
  EXPECT_EQ(json::serialize(d.at("servers").at("added")),
            R"([{"upstream":"app","server":"127.0.0.1:9002"}])");
  EXPECT_EQ(json::serialize(d.at("servers").at("removed")),
            R"([{"upstream":"app","server":"127.0.0.1:9001"}])");
  EXPECT_EQ(changed(d, "pools"), R"(["app"])");
  EXPECT_EQ(summarize(d), "1 pool added, 1 pool changed, 1 server added, 1 server removed");
}

TEST(ConfigDiff, AnyPoolKeyBesidesServersIsAPolicyChange) {
  const config::Config a = parse(kBase);
  for (const char* key : {"keepalive_timeout = \"5s\"", "balance = \"p2c\"", "keepalive = 4",
                          "response_timeout = \"3s\"", "connect_timeout = \"1s\""}) {
    const config::Config b = parse(std::string(R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9001"]
)") + key + "\n[[routes]]\nupstream = \"app\"\n");
    const json::object d = config_diff(a, b);
    EXPECT_EQ(changed(d, "policies"), R"(["app"])") << key;
    EXPECT_EQ(changed(d, "pools"), R"(["app"])") << key;
  }
}

TEST(ConfigDiff, ServersInAnotherOrderChangeThePool) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9001", "127.0.0.1:9000"]
[[routes]]
upstream = "app"
)");
  EXPECT_EQ(changed(config_diff(a, b), "pools"), R"(["app"])");
}

TEST(ConfigDiff, ARouteKeyOtherThanItsUpstreamIsAChangeToo) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(kBase) + "allow_h2c_upgrade = true\n");
  const json::object d = config_diff(a, b);
  ASSERT_EQ(d.at("routes").at("changed").as_array().size(), 1u);
  EXPECT_EQ(d.at("routes").at("changed").as_array()[0].at("allow_h2c_upgrade"), true);
}

TEST(ConfigDiff, ReportsTheResilienceSubTablesAndTheOtherTablesThatDiffer) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(R"(
[server]
idle_timeout = "5s"
[admin]
token = "secret-token-of-enough-length"
[log]
level = "debug"
[resilience.protocol]
mode = "shadow"
[resilience.inflight]
max_inflight = 10
)") + kBase);
  const json::object d = config_diff(a, b);
  EXPECT_EQ(changed(d, "resilience"), R"(["inflight","protocol"])");
  EXPECT_EQ(changed(d, "tables"), R"(["server","admin","log"])");
  EXPECT_EQ(summarize(d), "[resilience] inflight, protocol changed, server, admin, log changed");
}

TEST(ConfigDiff, ReportsTheFailureHandlingSubTablesThatDiffer) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(R"(
[resilience.circuit_breaker]
failure_threshold = 7
[resilience.retry_budget]
ratio_percent = 20
[resilience.hedging]
enabled = true
)") + kBase);
  const json::object d = config_diff(a, b);
  EXPECT_EQ(changed(d, "resilience"), R"(["circuit_breaker","retry_budget","hedging"])");
  EXPECT_EQ(changed(d, "tables"), "[]");
}

TEST(ConfigDiff, ReportsTheLocalProtectionSubTablesThatDiffer) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(R"(
[resilience.adaptive_admission]
window = "200ms"
[resilience.brownout]
core_routes = ["app"]
[resilience.route_queue]
caps = { app = 10 }
[resilience.watchdog]
restart_cooldown = "5m"
)") + kBase);
  const json::object d = config_diff(a, b);
  EXPECT_EQ(changed(d, "resilience"),
            R"(["adaptive_admission","brownout","route_queue","watchdog"])");
  EXPECT_EQ(changed(d, "tables"), "[]");
}

TEST(ConfigDiff, ReportsTheScopedRateLimitsAndTheTrustedProxiesThatDiffer) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(R"(
[server]
trusted_proxies = ["10.0.0.0/8"]
[[resilience.scoped_rate_limits]]
name = "per-client"
scope = "client"
requests_per_sec = 10
burst = 20
)") + kBase);
  const json::object d = config_diff(a, b);
  EXPECT_EQ(changed(d, "resilience"), R"(["scoped_rate_limits"])");
  EXPECT_EQ(changed(d, "tables"), R"(["server"])");
}

TEST(ConfigDiff, ReportsHttp2AndRequestsPerConnectionAsTheServerTable) {
  const config::Config a = parse(kBase);
  const config::Config http2 = parse(std::string(R"(
[server.http2]
max_concurrent_streams = 50
)") + kBase);
  EXPECT_EQ(changed(config_diff(a, http2), "tables"), R"(["server"])");
  const config::Config per_connection = parse(std::string(R"(
[server]
max_requests_per_connection = 1000
)") + kBase);
  EXPECT_EQ(changed(config_diff(a, per_connection), "tables"), R"(["server"])");
}

TEST(ConfigDiff, ReportsTheQuotaThatDiffers) {
  const config::Config a = parse(kBase);
  const config::Config b = parse(std::string(R"(
[resilience.quota]
enforcement = "shadow"
)") + kBase);
  const json::object d = config_diff(a, b);
  EXPECT_EQ(changed(d, "resilience"), R"(["quota"])");
  EXPECT_EQ(changed(d, "tables"), "[]");
}

TEST(ConfigDiff, RoutesInAnotherOrderAreReported) {
  const std::string pools = R"(
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
)";
  const config::Config a = parse(pools + R"(
[[routes]]
upstream = "app"
[[routes]]
path_prefix = "/x"
upstream = "app"
)");
  const config::Config b = parse(pools + R"(
[[routes]]
path_prefix = "/x"
upstream = "app"
[[routes]]
upstream = "app"
)");
  EXPECT_EQ(changed(config_diff(a, b), "tables"), R"(["routes"])");
}

}  // namespace
}  // namespace floodgate::app
