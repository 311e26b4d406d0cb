#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::load_with;
using testing::only;

TEST(ConfigLoad, UsesStructDefaultsForEverythingNotWritten) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty());
  const ServerParams server;
  EXPECT_EQ(r.config->server.listen, server.listen);
  EXPECT_EQ(r.config->server.workers, server.workers);
  EXPECT_EQ(r.config->server.max_header_bytes, server.max_header_bytes);
  EXPECT_EQ(r.config->server.header_timeout, server.header_timeout);
  EXPECT_EQ(r.config->server.io, IoMode::automatic);
  EXPECT_EQ(r.config->server.max_requests_per_connection, server.max_requests_per_connection);
  EXPECT_EQ(r.config->server.http2, server.http2);
  EXPECT_EQ(r.config->admin.listen, AdminParams{}.listen);
  EXPECT_EQ(r.config->log.level, LogLevel::info);
  EXPECT_EQ(r.config->log.access_log, "stderr");
  EXPECT_EQ(r.config->log.access_log_format, AccessLogFormat::json);
  EXPECT_EQ(r.config->log.shed_summary_interval, 10s);
}

TEST(ConfigLoad, UsesDefaultsForOptionalUpstreamAndRouteKeys) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  const UpstreamParams& u = r.config->upstreams.at(0);
  EXPECT_EQ(u.name, "app");
  ASSERT_EQ(u.servers.size(), 1u);
  EXPECT_EQ(u.servers[0].address, (Endpoint{"127.0.0.1", 9000, "127.0.0.1:9000"}));
  EXPECT_EQ(u.servers[0].weight, 1u);
  EXPECT_EQ(u.balance, Balance::round_robin);
  EXPECT_EQ(u.connect_timeout, 2s);
  EXPECT_EQ(u.response_timeout, 30s);
  EXPECT_EQ(u.keepalive, 32u);
  EXPECT_EQ(u.keepalive_timeout, 60s);
  EXPECT_EQ(r.config->routes.at(0).host, "*");
  EXPECT_EQ(r.config->routes.at(0).path_prefix, "/");
  EXPECT_EQ(r.config->routes.at(0).upstream, "app");
}

constexpr std::string_view kEveryKey = R"(
[server]
listen = ["127.0.0.1:8080", "[::1]:8081", "localhost:0"]
workers = 4
io = "epoll"
max_header_bytes = 32768
max_headers = 64
max_uri_bytes = 4096
max_body_bytes = 1048576
header_timeout = "5s"
idle_timeout = "2m"
max_requests_per_connection = 1000
drain_timeout = "0"

[admin]
listen = "[::1]:9902"

[log]
level = "debug"
access_log = "/tmp/floodgate-load-test-access.log"
access_log_format = "combined"
shed_summary_interval = "1m"

[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 2 }]
balance = "p2c"
connect_timeout = "250ms"
response_timeout = "1h"
keepalive = 0
keepalive_timeout = "90s"

[[upstreams]]
name = "api.v2"
servers = [{ address = "[::1]:9100" }]
balance = "least_active"

[[routes]]
host = "API.Example.com"
path_prefix = "/api"
upstream = "api.v2"

[[routes]]
host = "*.Example.com"
upstream = "app"
)";

TEST(ConfigLoad, ReadsEveryServerAdminAndLogKey) {
  const LoadResult r = load(kEveryKey);
  ASSERT_TRUE(r.ok()) << dump(r);
  const ServerParams& s = r.config->server;
  EXPECT_EQ(s.listen, (std::vector<Endpoint>{{"127.0.0.1", 8080, "127.0.0.1:8080"},
                                             {"::1", 8081, "[::1]:8081"},
                                             {"127.0.0.1", 0, "localhost:0"}}));
  EXPECT_EQ(s.workers, 4u);
  EXPECT_EQ(s.io, IoMode::epoll);
  EXPECT_EQ(s.max_header_bytes, 32768u);
  EXPECT_EQ(s.max_headers, 64u);
  EXPECT_EQ(s.max_uri_bytes, 4096u);
  EXPECT_EQ(s.max_body_bytes, 1048576u);
  EXPECT_EQ(s.header_timeout, 5s);
  EXPECT_EQ(s.idle_timeout, 2min);
  EXPECT_EQ(s.max_requests_per_connection, 1000u);
  EXPECT_EQ(s.drain_timeout, 0ms);
  EXPECT_EQ(r.config->admin.listen, (Endpoint{"::1", 9902, "[::1]:9902"}));
  EXPECT_EQ(r.config->log.level, LogLevel::debug);
  EXPECT_EQ(r.config->log.access_log, "/tmp/floodgate-load-test-access.log");
  EXPECT_EQ(r.config->log.access_log_format, AccessLogFormat::combined);
  EXPECT_EQ(r.config->log.shed_summary_interval, 1min);
}

TEST(ConfigLoad, TurnsTheSheddingSummaryOffWithZero) {
  const LoadResult r = load_with("[log]\nshed_summary_interval = \"0s\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->log.shed_summary_interval, 0ms);
}

TEST(ConfigLoad, ReadsEveryUpstreamKey) {
  const LoadResult r = load(kEveryKey);
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.config->upstreams.size(), 2u);
  const UpstreamParams& app = r.config->upstreams[0];
  ASSERT_EQ(app.servers.size(), 2u);
  EXPECT_EQ(app.servers[0].weight, 1u);
  EXPECT_EQ(app.servers[1].address, (Endpoint{"127.0.0.1", 9001, "127.0.0.1:9001"}));
  EXPECT_EQ(app.servers[1].weight, 2u);
  EXPECT_EQ(app.balance, Balance::p2c);
  EXPECT_EQ(app.connect_timeout, 250ms);
  EXPECT_EQ(app.response_timeout, 1h);
  EXPECT_EQ(app.keepalive, 0u);
  EXPECT_EQ(app.keepalive_timeout, 90s);
  const UpstreamParams& api = r.config->upstreams[1];
  EXPECT_EQ(api.name, "api.v2");
  EXPECT_EQ(api.servers.at(0).address, (Endpoint{"::1", 9100, "[::1]:9100"}));
  EXPECT_EQ(api.balance, Balance::least_active);
}

TEST(ConfigLoad, ReadsRoutesWithHostsLowerCased) {
  const LoadResult r = load(kEveryKey);
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.config->routes.size(), 2u);
  EXPECT_EQ(r.config->routes[0].host, "api.example.com");
  EXPECT_EQ(r.config->routes[0].path_prefix, "/api");
  EXPECT_EQ(r.config->routes[0].upstream, "api.v2");
  EXPECT_EQ(r.config->routes[1].host, "*.example.com");
  EXPECT_EQ(r.config->routes[1].path_prefix, "/");
}

TEST(ConfigLoad, AcceptsTheIssueExampleVerbatim) {
  const LoadResult r = load(R"([server]
listen = ["127.0.0.1:8080"]
workers = 0
max_header_bytes = 16384
max_headers = 128
max_uri_bytes = 8192
max_body_bytes = 0
header_timeout = "10s"
idle_timeout = "60s"
drain_timeout = "30s"
[admin]
listen = "127.0.0.1:9901"
[log]
level = "info"
access_log = "stderr"
access_log_format = "json"
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 2 }]
balance = "round_robin"
connect_timeout = "2s"
response_timeout = "30s"
keepalive = 32
keepalive_timeout = "60s"
[[routes]]
host = "*"
path_prefix = "/"
upstream = "app"
)");
  EXPECT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigLoad, AllowsTheSameServerTwiceInOneUpstream) {
  const LoadResult r = load(R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9000"]
[[routes]]
upstream = "app"
)");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->upstreams[0].servers.size(), 2u);
}

TEST(ConfigLoad, ReportsEveryProblemInOnePass) {
  const LoadResult r = load(R"([server]
workers = 1000
idle_timeout = 60
[log]
level = "loud"
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 0 }]
balance = "rr"
[[routes]]
upstream = "ap"
)");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 6u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.workers");
  EXPECT_EQ(r.diagnostics[1].path, "server.idle_timeout");
  EXPECT_EQ(r.diagnostics[2].path, "log.level");
  EXPECT_EQ(r.diagnostics[3].path, "upstreams[0].servers[1].weight");
  EXPECT_EQ(r.diagnostics[4].path, "upstreams[0].balance");
  EXPECT_EQ(r.diagnostics[5].path, "routes[0].upstream");
  EXPECT_EQ(r.diagnostics[5].line, 11);
}

TEST(ConfigLoad, ReportsRouteProblemsEvenWhenUpstreamsAreBroken) {
  const LoadResult r = load(R"([[upstreams]]
name = "app"
servers = []
[[routes]]
upstream = "nope"
)");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].servers");
  EXPECT_EQ(r.diagnostics[1].path, "routes[0].upstream");
}

TEST(ConfigLoad, ReportsTomlSyntaxErrorsWithTheirPosition) {
  const LoadResult r = load("[server]\nworkers = \n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:11: error: invalid TOML: error while parsing key-value pair: "
            "expected value, saw '\\n'");
}

TEST(ConfigLoad, ReportsDuplicateTomlKeysAsSyntaxErrors) {
  const LoadResult r = load_with("[server]\nworkers = 1\nworkers = 2");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].line, 3);
  EXPECT_EQ(r.diagnostics[0].path, "");
}

class ConfigFile : public ::testing::Test {
 protected:
  // One file per test and process: ctest runs test cases in parallel processes.
  std::string path() const {
    return ::testing::TempDir() + "floodgate_config_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
           std::to_string(::getpid()) + ".toml";
  }
  std::string write(std::string_view text) {
    std::ofstream(path()) << text;
    return path();
  }
  void TearDown() override { std::remove(path().c_str()); }
};

TEST_F(ConfigFile, LoadsAFileAndNamesItInDiagnostics) {
  const std::string path = write("[server]\nworkers = -1\n" + std::string(kMinimal));
  const LoadResult r = load_file(path);
  EXPECT_EQ(only(r), path +
                         ":2:1: error: server.workers: -1 is out of range; use an integer "
                         "from 0 to 256");
}

TEST_F(ConfigFile, LoadsAValidFile) {
  const LoadResult r = load_file(write(kMinimal));
  EXPECT_TRUE(r.ok()) << dump(r);
}

TEST(ConfigLoad, ReportsAMissingFileWithTheOsReason) {
  const LoadResult r = load_file("/nonexistent/floodgate.toml");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(only(r),
            "/nonexistent/floodgate.toml: error: cannot read configuration file "
            "\"/nonexistent/floodgate.toml\": No such file or directory");
  EXPECT_EQ(r.diagnostics[0].line, 0);
  EXPECT_EQ(r.diagnostics[0].column, 0);
}

TEST(ConfigLoad, ReportsADirectoryAsUnreadable) {
  const LoadResult r = load_file(::testing::TempDir());
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_NE(r.diagnostics[0].message.find("Is a directory"), std::string::npos) << dump(r);
}

}  // namespace
}  // namespace floodgate::config
