// The duration and address syntaxes, exercised through the keys that use them.
#include <gtest/gtest.h>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::load;
using testing::load_with;

// drain_timeout accepts zero, so it shows the plain duration syntax.
LoadResult with_drain(std::string_view value) {
  return load_with("[server]\ndrain_timeout = " + std::string(value));
}

std::string drain_error(std::string_view value) {
  const LoadResult r = with_drain(value);
  if (r.diagnostics.size() != 1 || r.diagnostics[0].path != "server.drain_timeout") {
    return "unexpected diagnostics:\n" + dump(r);
  }
  return r.diagnostics[0].message;
}

TEST(ConfigDurations, AcceptsEachUnitAndAPlainZero) {
  const std::pair<const char*, std::chrono::milliseconds> cases[] = {
      {R"("250ms")", 250ms}, {R"("2s")", 2s},  {R"("1m")", 1min}, {R"("1h")", 1h},
      {R"("0")", 0ms},       {R"("0s")", 0ms}, {R"("007s")", 7s}, {R"("8760h")", 8760h}};
  for (const auto& [text, expected] : cases) {
    const LoadResult r = with_drain(text);
    ASSERT_TRUE(r.ok()) << text << "\n" << dump(r);
    EXPECT_EQ(r.config->server.drain_timeout, expected) << text;
  }
}

TEST(ConfigDurations, RejectsANumberWithoutAUnit) {
  EXPECT_EQ(drain_error(R"("10")"),
            R"("10" is not a valid duration: the unit is missing; add ms, s, m or h, e.g. "10s")");
}

TEST(ConfigDurations, RejectsFractions) {
  EXPECT_EQ(drain_error(R"("1.5s")"), R"("1.5s" is not a valid duration: fractions are not )"
                                      R"(supported; use a smaller unit, e.g. "1500ms" for 1.5s)");
}

TEST(ConfigDurations, RejectsNegativeValues) {
  EXPECT_EQ(drain_error(R"("-1s")"),
            R"("-1s" is not a valid duration: durations cannot be negative)");
}

TEST(ConfigDurations, RejectsUnknownUnits) {
  EXPECT_EQ(drain_error(R"("2d")"),
            R"("2d" is not a valid duration: unknown unit 'd'; use ms, s, m or h)");
  EXPECT_EQ(drain_error(R"("5 s")"),
            R"("5 s" is not a valid duration: unknown unit ' s'; use ms, s, m or h)");
}

TEST(ConfigDurations, RejectsTextWithoutANumber) {
  for (const char* text : {R"("")", R"("s")", R"("+5s")", R"(" 5s")"}) {
    EXPECT_NE(drain_error(text).find("write a whole number and a unit"), std::string::npos) << text;
  }
}

TEST(ConfigDurations, RejectsValuesBeyondOneYearWithoutOverflowing) {
  const std::string limit = "it exceeds the maximum of 8760h";
  EXPECT_NE(drain_error(R"("8761h")").find(limit), std::string::npos);
  EXPECT_NE(drain_error(R"("31536000001ms")").find(limit), std::string::npos);
  EXPECT_NE(drain_error(R"("99999999999999999999999h")").find(limit), std::string::npos);
  EXPECT_NE(drain_error(R"("9223372036854775807m")").find(limit), std::string::npos);
}

TEST(ConfigDurations, RejectsABareIntegerSuggestingUnits) {
  EXPECT_EQ(drain_error("5"), R"(expected a duration string with a unit, got an integer (5); )"
                              R"(write drain_timeout = "5s" or "5ms")");
}

TEST(ConfigDurations, RejectsOtherTypes) {
  EXPECT_EQ(drain_error("1.5"), R"(expected a duration string such as "10s", got a )"
                                R"(floating-point number; e.g. drain_timeout = "30s")");
  EXPECT_EQ(drain_error("true"), R"(expected a duration string such as "10s", got a boolean )"
                                 R"((true); e.g. drain_timeout = "30s")");
}

TEST(ConfigDurations, RejectsZeroWhereATimeoutMustRun) {
  for (const char* key : {"header_timeout", "idle_timeout"}) {
    const LoadResult r = load_with("[server]\n" + std::string(key) + " = \"0ms\"");
    ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
    EXPECT_EQ(r.diagnostics[0].message.substr(0, 26), "must be greater than 0; e.") << key;
  }
  const LoadResult r = load(R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
connect_timeout = "0"
response_timeout = "0s"
keepalive_timeout = "0h"
[[routes]]
upstream = "app"
)");
  ASSERT_EQ(r.diagnostics.size(), 3u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].message, R"(must be greater than 0; e.g. connect_timeout = "2s")");
}

// Loads one upstream whose only server is `address`.
LoadResult with_server(std::string_view address) {
  return load("[[upstreams]]\nname = \"app\"\nservers = [\"" + std::string(address) +
              "\"]\n[[routes]]\nupstream = \"app\"\n");
}

std::string server_error(std::string_view address) {
  const LoadResult r = with_server(address);
  if (r.diagnostics.size() != 1 || r.diagnostics[0].path != "upstreams[0].servers[0]") {
    return "unexpected diagnostics:\n" + dump(r);
  }
  return r.diagnostics[0].message;
}

TEST(ConfigEndpoints, AcceptsIpv4Ipv6AndLocalhostKeepingTheSpelling) {
  const std::pair<const char*, Endpoint> cases[] = {
      {"10.0.0.1:80", {"10.0.0.1", 80, "10.0.0.1:80"}},
      {"[::1]:9000", {"::1", 9000, "[::1]:9000"}},
      {"[2001:db8::7]:65535", {"2001:db8::7", 65535, "[2001:db8::7]:65535"}},
      {"localhost:9000", {"127.0.0.1", 9000, "localhost:9000"}},
      {"LocalHost:1", {"127.0.0.1", 1, "LocalHost:1"}}};
  for (const auto& [text, expected] : cases) {
    const LoadResult r = with_server(text);
    ASSERT_TRUE(r.ok()) << text << "\n" << dump(r);
    EXPECT_EQ(r.config->upstreams[0].servers[0].address, expected) << text;
  }
}

// A backend may be a host name (resolved at load: tests/integration/test_backends_by_name.py);
// what is neither an IP address nor a name is refused before any lookup.
TEST(ConfigEndpoints, RejectsABackendHostThatIsNeitherAnIpAddressNorAName) {
  for (const char* bad : {"back*end:80", "a..b:80", ".a:80", "a.:80", "-?:80"}) {
    const std::string host = std::string(bad).substr(0, std::string(bad).rfind(':'));
    EXPECT_EQ(server_error(bad), R"(")" + std::string(bad) + R"(" is not a valid address: ')" +
                                     host +
                                     "' is neither an IP address nor a host name (dot-separated "
                                     "labels of letters, digits, '-' and '_', each at most 63 "
                                     "characters)")
        << bad;
  }
  EXPECT_NE(server_error(std::string(64, 'a') + ".test:80").find("is neither an IP address"),
            std::string::npos);
}

TEST(ConfigEndpoints, RejectsDnsNamesWhereOnlyAnAddressCanBeListenedOn) {
  const LoadResult r = load(
      "[server]\nlisten = [\"proxy.internal:80\"]\n[[upstreams]]\nname = \"app\"\nservers = "
      "[\"127.0.0.1:9000\"]\n[[routes]]\nupstream = \"app\"\n");
  ASSERT_EQ(r.diagnostics.size(), 1U) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.listen[0]");
  EXPECT_EQ(r.diagnostics[0].message,
            R"("proxy.internal:80" is not a valid address: 'proxy.internal' is not an IP )"
            R"(address; use an IP address; DNS names are not resolved)");
}

TEST(ConfigEndpoints, RequiresBracketsAroundIpv6) {
  EXPECT_EQ(server_error("::1:80"), R"("::1:80" is not a valid address: IPv6 addresses need )"
                                    R"(brackets; write e.g. "[::1]:8080")");
}

TEST(ConfigEndpoints, RejectsMalformedAddresses) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1", "the port is missing"},
      {"[::1]", "the port is missing"},
      {"[::1]80", "the port is missing"},
      {"[::1:80", "the ']' after the IPv6 address is missing"},
      {"[127.0.0.1]:80", "is not an IPv6 address"},
      {":80", "the host is missing"},
      {"256.0.0.1:80", "is not an IPv4 address"},
      {"127.1:80", "is not an IPv4 address"},
      {"127.0.0.1:", "the port must be a number from 1 to 65535"},
      {"127.0.0.1:65536", "the port must be a number from 1 to 65535"},
      {"127.0.0.1:http", "the port must be a number from 1 to 65535"},
      {"127.0.0.1:+80", "the port must be a number from 1 to 65535"},
      {"", "it is empty"}};
  for (const auto& [text, why] : cases) {
    EXPECT_NE(server_error(text).find(why), std::string::npos)
        << text << ": " << server_error(text);
  }
}

TEST(ConfigEndpoints, RejectsPortZeroForBackendsAndAdmin) {
  EXPECT_NE(server_error("127.0.0.1:0").find("port 0 is only allowed for listen addresses"),
            std::string::npos);
  const LoadResult r = load_with("[admin]\nlisten = \"127.0.0.1:0\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "admin.listen");
}

TEST(ConfigEndpoints, AllowsPortZeroForDataPlaneListeners) {
  const LoadResult r = load_with("[server]\nlisten = [\"127.0.0.1:0\", \"[::1]:0\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.listen[0].port, 0);
  EXPECT_EQ(r.config->server.listen[1].host, "::1");
}

TEST(ConfigEndpoints, RejectsANonStringAdminListener) {
  const LoadResult r = load_with("[admin]\nlisten = 9901");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].message, R"(expected a "host:port" string, got an integer (9901); )"
                                      R"(e.g. listen = "127.0.0.1:9901")");
}

}  // namespace
}  // namespace floodgate::config
