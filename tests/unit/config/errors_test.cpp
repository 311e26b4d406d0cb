// One test per class of configuration error: the exact text the operator sees, which pins the
// key path, the line:column and a message that says how to fix it.
#include <gtest/gtest.h>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::load;
using testing::load_with;
using testing::only;

TEST(ConfigErrors, RejectsAnUnknownKeyListingTheKnownOnes) {
  EXPECT_EQ(only(load_with("[server]\nthreads = 4")),
            "test.toml:2:1: error: server.threads: unknown key 'threads' in [server]; expected "
            "one of: listen, workers, io, max_header_bytes, max_headers, max_uri_bytes, "
            "max_body_bytes, max_buffers_per_reactor, header_timeout, idle_timeout, "
            "send_timeout, max_unsent_bytes, handshake_timeout, max_opening_connections, "
            "max_requests_per_connection, drain_timeout, retirement_grace, trusted_proxies, tls, "
            "http2");
}

TEST(ConfigErrors, SuggestsTheClosestKeyForATypo) {
  EXPECT_EQ(only(load_with("[log]\nlevle = \"info\"")),
            "test.toml:2:1: error: log.levle: unknown key 'levle' in [log] (did you mean "
            "'level'?); expected one of: level, access_log, access_log_format, "
            "shed_summary_interval");
}

TEST(ConfigErrors, TellsWhereAMisplacedKeyBelongs) {
  EXPECT_EQ(only(load_with("[server]\nkeepalive = 8")),
            "test.toml:2:1: error: server.keepalive: unknown key 'keepalive' in [server]; "
            "'keepalive' belongs in an [[upstreams]] entry");
}

TEST(ConfigErrors, RejectsAnUnknownTopLevelKey) {
  EXPECT_EQ(only(load_with("[metrics]\nport = 1")),
            "test.toml:1:1: error: metrics: unknown key 'metrics' in the root table; expected "
            "one of: server, admin, log, upstreams, routes, resilience");
}

TEST(ConfigErrors, RejectsAnUnknownKeyInAServerEntry) {
  const LoadResult r = load(R"([[upstreams]]
name = "app"
servers = [{ address = "127.0.0.1:9000", weigth = 2 }]
[[routes]]
upstream = "app"
)");
  EXPECT_EQ(only(r),
            "test.toml:3:42: error: upstreams[0].servers[0].weigth: unknown key 'weigth' in "
            "server entry (did you mean 'weight'?); expected one of: address, weight");
}

TEST(ConfigErrors, NamesTheExpectedTypeAndGivesAnExample) {
  EXPECT_EQ(only(load_with("[server]\nworkers = \"4\"")),
            "test.toml:2:1: error: server.workers: expected an integer, got a string (\"4\"); "
            "e.g. workers = 0");
}

TEST(ConfigErrors, RejectsASectionThatIsNotATable) {
  EXPECT_EQ(only(load_with("log = \"debug\"")),
            "test.toml:1:1: error: log: expected a table, got a string (\"debug\"); e.g. [log]");
}

TEST(ConfigErrors, RejectsUpstreamsWrittenWithSingleBrackets) {
  const LoadResult r = load("[upstreams]\nname = \"app\"\n[[routes]]\nupstream = \"app\"\n");
  ASSERT_GE(r.diagnostics.size(), 1u);
  EXPECT_EQ(format(r.diagnostics[0]),
            "test.toml:1:1: error: upstreams: expected an array of tables, got a table; e.g. "
            "[[upstreams]] (double brackets) for each entry");
}

TEST(ConfigErrors, RejectsAListenAddressThatIsNotAnArray) {
  EXPECT_EQ(only(load_with("[server]\nlisten = \"0.0.0.0:80\"")),
            "test.toml:2:1: error: server.listen: expected an array of \"host:port\" strings, "
            "got a string (\"0.0.0.0:80\"); e.g. listen = [\"0.0.0.0:80\"]");
}

struct RangeCase {
  std::string_view section;
  std::string_view key;
  int64_t lowest;
  int64_t highest;
};

class ConfigRanges : public ::testing::TestWithParam<RangeCase> {
 protected:
  static LoadResult with(const RangeCase& c, int64_t value) {
    const std::string line = std::string(c.key) + " = " + std::to_string(value);
    if (c.section == "upstream") {
      return load("[[upstreams]]\nname = \"app\"\n" + line +
                  "\nservers = [\"127.0.0.1:9000\"]\n[[routes]]\nupstream = \"app\"\n");
    }
    return load_with("[server]\n" + line);
  }
};

TEST_P(ConfigRanges, AcceptsBothEndsOfTheRange) {
  EXPECT_TRUE(with(GetParam(), GetParam().lowest).ok())
      << dump(with(GetParam(), GetParam().lowest));
  EXPECT_TRUE(with(GetParam(), GetParam().highest).ok());
}

TEST_P(ConfigRanges, RejectsOneBelowAndOneAboveTheRange) {
  const RangeCase& c = GetParam();
  const std::string range = "is out of range; use an integer from " + std::to_string(c.lowest) +
                            " to " + std::to_string(c.highest);
  for (const int64_t bad : {c.lowest - 1, c.highest + 1}) {
    const LoadResult r = with(c, bad);
    ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
    EXPECT_EQ(r.diagnostics[0].message, std::to_string(bad) + " " + range);
    EXPECT_EQ(r.diagnostics[0].line, c.section == "upstream" ? 3 : 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Keys, ConfigRanges,
                         ::testing::Values(RangeCase{"server", "workers", 0, 256},
                                           RangeCase{"server", "max_header_bytes", 256, 1'048'576},
                                           RangeCase{"server", "max_headers", 1, 10'000},
                                           RangeCase{"server", "max_uri_bytes", 16, 1'048'576},
                                           RangeCase{"server", "max_requests_per_connection", 0,
                                                     1'000'000'000},
                                           RangeCase{"upstream", "keepalive", 0, 100'000}),
                         [](const auto& info) { return std::string(info.param.key); });

TEST(ConfigErrors, RejectsANegativeBodyLimit) {
  EXPECT_EQ(only(load_with("[server]\nmax_body_bytes = -1")),
            "test.toml:2:1: error: server.max_body_bytes: -1 is out of range; use an integer of "
            "at least 0");
}

TEST(ConfigErrors, RejectsAnUnknownEnumValueListingTheChoices) {
  const LoadResult r = load(R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
balance = "rr"
[[routes]]
upstream = "app"
)");
  EXPECT_EQ(only(r),
            "test.toml:4:1: error: upstreams[0].balance: unknown value \"rr\"; expected "
            "round_robin, least_active or p2c");
}

TEST(ConfigErrors, RejectsUnknownLogLevelAndFormat) {
  const LoadResult r = load_with("[log]\nlevel = \"verbose\"\naccess_log_format = \"text\"");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].message,
            "unknown value \"verbose\"; expected trace, debug, info, warn, error, critical or off");
  EXPECT_EQ(r.diagnostics[1].message,
            "unknown value \"text\"; expected json, combined or combined_floodgate");
}

TEST(ConfigErrors, RejectsAShedSummaryIntervalUnderASecond) {
  EXPECT_EQ(only(load_with("[log]\nshed_summary_interval = \"500ms\"")),
            "test.toml:2:1: error: log.shed_summary_interval: must be \"0s\" (no shedding "
            "summary) or at least \"1s\", e.g. \"10s\"");
}

TEST(ConfigErrors, RejectsAnUnknownEventLoopInterface) {
  EXPECT_EQ(only(load_with("[server]\nio = \"uring\"")),
            "test.toml:2:1: error: server.io: unknown value \"uring\"; expected auto, io_uring "
            "or epoll");
}

TEST(ConfigErrors, RejectsAnEmptyAccessLog) {
  EXPECT_EQ(only(load_with("[log]\naccess_log = \"\"")),
            "test.toml:2:1: error: log.access_log: must not be empty; use \"stderr\", \"off\" or "
            "a file path");
}

TEST(ConfigErrors, RefusesAnAccessLogInADirectoryThatDoesNotExist) {
  EXPECT_EQ(only(load_with("[log]\naccess_log = \"/nonexistent-floodgate-dir/access.log\"")),
            "test.toml:2:1: error: log.access_log: the directory \"/nonexistent-floodgate-dir\" "
            "does not exist; create it first (floodgate never creates directories; under "
            "systemd, LogsDirectory=floodgate provides /var/log/floodgate)");
}

TEST(ConfigErrors, RefusesAnAccessLogThatIsADirectoryOrUnderAFile) {
  EXPECT_EQ(only(load_with("[log]\naccess_log = \"/tmp\"")),
            "test.toml:2:1: error: log.access_log: \"/tmp\" is a directory; name a file in it");
  EXPECT_EQ(only(load_with("[log]\naccess_log = \"/dev/null/access.log\"")),
            "test.toml:2:1: error: log.access_log: \"/dev/null\" is not a directory");
}

TEST(ConfigErrors, AcceptsAnAccessLogInAWritableDirectory) {
  EXPECT_TRUE(load_with("[log]\naccess_log = \"/tmp/floodgate-errors-test-access.log\"").ok());
}

TEST(ConfigErrors, ReportsAMissingUpstreamNameAtItsTable) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n\n"
      "[[upstreams]]\nservers = [\"127.0.0.1:9001\"]\n[[routes]]\nupstream = \"app\"\n");
  EXPECT_EQ(only(r),
            "test.toml:5:1: error: upstreams[1].name: missing required key 'name'; add "
            "name = \"app\" to this [[upstreams]]");
}

TEST(ConfigErrors, RejectsADuplicateUpstreamNameCitingTheFirst) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9001\"]\n[[routes]]\nupstream = "
      "\"app\"\n");
  EXPECT_EQ(only(r),
            "test.toml:5:1: error: upstreams[1].name: duplicate upstream name 'app' "
            "(first defined at line 2); give each [[upstreams]] its own name");
}

TEST(ConfigErrors, RejectsUpstreamNamesOutsideTheAllowedCharacters) {
  for (const char* name : {"", "my app", "app/1", "ü"}) {
    const LoadResult r =
        load("[[upstreams]]\nname = \"" + std::string(name) +
             "\"\nservers = [\"127.0.0.1:9000\"]\n[[routes]]\nupstream = \"" + name + "\"\n");
    ASSERT_EQ(r.diagnostics.size(), 1u) << name << "\n" << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].name");
  }
}

TEST(ConfigErrors, RequiresServersAndAtLeastOneOfThem) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"a\"\n[[upstreams]]\nname = \"b\"\nservers = []\n"
      "[[routes]]\nupstream = \"a\"\n");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(format(r.diagnostics[0]),
            "test.toml:1:1: error: upstreams[0].servers: missing required key 'servers'; add "
            "servers = [\"127.0.0.1:9000\", { address = \"127.0.0.1:9001\", weight = 2 }] to "
            "this [[upstreams]]");
  EXPECT_EQ(r.diagnostics[1].path, "upstreams[1].servers");
  EXPECT_EQ(r.diagnostics[1].line, 5);
}

TEST(ConfigErrors, PointsAtTheBadWeightInsideAnInlineTable) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"a\"\nservers = [\"127.0.0.1:9000\"]\n[[upstreams]]\nname = "
      "\"b\"\nservers = [{ address = \"127.0.0.1:9001\", weight = 1001 }]\n"
      "[[routes]]\nupstream = \"a\"\n");
  EXPECT_EQ(only(r),
            "test.toml:6:42: error: upstreams[1].servers[0].weight: 1001 is out of "
            "range; use an integer from 1 to 1000");
}

TEST(ConfigErrors, RequiresAnAddressInAServerTable) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"a\"\nservers = [{ weight = 2 }]\n[[routes]]\nupstream = \"a\"\n");
  EXPECT_EQ(only(r),
            "test.toml:3:12: error: upstreams[0].servers[0].address: missing required "
            "key 'address'; add address = \"127.0.0.1:9000\" to this server entry");
}

TEST(ConfigErrors, RejectsAServerThatIsNeitherStringNorTable) {
  const LoadResult r =
      load("[[upstreams]]\nname = \"a\"\nservers = [9000]\n[[routes]]\nupstream = \"a\"\n");
  EXPECT_EQ(only(r),
            "test.toml:3:12: error: upstreams[0].servers[0]: expected a \"host:port\" "
            "string or a table { address = \"...\", weight = N }, got an integer "
            "(9000); e.g. \"127.0.0.1:9000\"");
}

TEST(ConfigErrors, RejectsARouteToAnUndefinedUpstream) {
  const LoadResult r =
      load(std::string(testing::kMinimal) + "[[routes]]\nupstream = \"x\"\npath_prefix = \"/x\"\n");
  EXPECT_EQ(only(r),
            "test.toml:8:1: error: routes[1].upstream: route names upstream 'x', which "
            "is not defined; define [[upstreams]] name = \"x\" or fix the name");
}

TEST(ConfigErrors, RequiresAnUpstreamInEveryRoute) {
  const LoadResult r = load(std::string(testing::kMinimal) + "[[routes]]\nhost = \"a.b\"\n");
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: routes[1].upstream: missing required key "
            "'upstream'; add upstream = \"app\" to this [[routes]]");
}

TEST(ConfigErrors, RequiresAtLeastOneUpstreamAndOneRoute) {
  const LoadResult r = load("# nothing here\n");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(format(r.diagnostics[0]),
            "test.toml:1:1: error: upstreams: at least one [[upstreams]] is required; add one "
            "with name = \"app\" and servers = [\"127.0.0.1:9000\"]");
  EXPECT_EQ(format(r.diagnostics[1]),
            "test.toml:1:1: error: routes: at least one [[routes]] is required; add one with "
            "upstream = \"app\"");
}

TEST(ConfigErrors, RejectsMalformedRouteHosts) {
  for (const char* host : {"", "*foo", "a.*", "*.", "a..b", ".a", "a_b", "a b", "a.com:80"}) {
    const LoadResult r = load(std::string(testing::kMinimal) + "host = \"" + host + "\"\n");
    ASSERT_EQ(r.diagnostics.size(), 1u) << host << "\n" << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "routes[0].host") << host;
    EXPECT_EQ(r.diagnostics[0].line, 7) << host;
  }
}

TEST(ConfigErrors, ExplainsThatRouteHostsHaveNoPort) {
  const LoadResult r = load(std::string(testing::kMinimal) + "host = \"a.com:80\"\n");
  EXPECT_EQ(r.diagnostics.at(0).message,
            "\"a.com:80\" is not a valid host: hosts are matched without a port; remove \":80\"");
}

TEST(ConfigErrors, RequiresPathPrefixToStartWithASlash) {
  const LoadResult r = load(std::string(testing::kMinimal) + "path_prefix = \"api\"\n");
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: routes[0].path_prefix: \"api\" must start with "
            "\"/\"; e.g. path_prefix = \"/api\"");
}

TEST(ConfigErrors, RejectsAnEmptyListenList) {
  EXPECT_EQ(only(load_with("[server]\nlisten = []")),
            "test.toml:2:1: error: server.listen: at least one address is required; e.g. listen "
            "= [\"127.0.0.1:8080\"]");
}

TEST(ConfigErrors, RejectsTheSameListenAddressTwiceEvenWhenSpelledDifferently) {
  EXPECT_EQ(only(load_with("[server]\nlisten = [\"127.0.0.1:8080\", \"localhost:8080\"]")),
            "test.toml:2:29: error: server.listen[1]: duplicate address \"localhost:8080\" (same "
            "as server.listen[0]); remove one of them");
}

TEST(ConfigErrors, RejectsAnAdminListenerOnADataPlanePort) {
  EXPECT_EQ(only(load_with("[server]\nlisten = [\"127.0.0.1:9000\"]\n[admin]\nlisten = "
                           "\"localhost:9000\"")),
            "test.toml:4:1: error: admin.listen: \"localhost:9000\" is also a server.listen "
            "address; give the admin listener its own port");
}

TEST(ConfigErrors, KeepsGoingInsideOneArrayToReportEveryBadElement) {
  const LoadResult r = load_with("[server]\nlisten = [\"a:1\", \"127.0.0.1:1\", \"b:2\"]");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.listen[0]");
  EXPECT_EQ(r.diagnostics[1].path, "server.listen[2]");
  EXPECT_EQ(r.diagnostics[1].column, 33);
}

TEST(ConfigErrors, RejectsABufferCapTooSmallForOneRequest) {
  EXPECT_NE(only(load_with("[server]\nmax_buffers_per_reactor = 1"))
                .find("error: server.max_buffers_per_reactor:"),
            std::string::npos);
}

TEST(ConfigErrors, AcceptsABufferCapAndDefaultsTo16384) {
  EXPECT_EQ(load_with("").config->server.max_buffers_per_reactor, 16384u);
  const LoadResult r = load_with("[server]\nmax_buffers_per_reactor = 64");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.max_buffers_per_reactor, 64u);
}

}  // namespace
}  // namespace floodgate::config
