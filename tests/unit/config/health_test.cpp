// [upstreams.health]: a pool's active health checks. Absent and empty tables, each key's
// parsing and range, the syntaxes of path, host and expect_status, the interval-versus-timeout
// warning, and where its keys go when written elsewhere.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;
using Severity = Diagnostic::Severity;

// An upstream "app" whose [upstreams.health] (line 4) holds `body` from line 5 on, then a route.
std::string pool_with(std::string_view body) {
  return "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n[upstreams.health]\n" +
         std::string(body) + "\n[[routes]]\nupstream = \"app\"\n";
}

LoadResult load_pool(std::string_view body) {
  return load(pool_with(body));
}

// The pool's health checks; fails the test (and returns the defaults) when there are none.
HealthParams health_of(const LoadResult& r) {
  const auto& health = r.config->upstreams.at(0).health;
  EXPECT_TRUE(health.has_value());
  return health.value_or(HealthParams{});
}

TEST(ConfigHealth, IsAbsentWithoutTheTableSoEveryServerCountsAsUp) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_FALSE(r.config->upstreams.at(0).health.has_value());
}

TEST(ConfigHealth, TakesTheDefaultsForAnEmptyTable) {
  const LoadResult r = load_pool("");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  const HealthParams p = health_of(r);
  EXPECT_EQ(p, HealthParams{});
  EXPECT_EQ(p.path, "/healthz");
  EXPECT_EQ(p.host, "");
  EXPECT_EQ(p.interval, 2s);
  EXPECT_EQ(p.timeout, 1s);
  EXPECT_EQ(p.fall, 3u);
  EXPECT_EQ(p.rise, 2u);
  EXPECT_EQ(p.expect_status, (std::vector<StatusRange>{{200, 399}}));
  EXPECT_EQ(p.max_response_header_bytes, 8192u);
}

TEST(ConfigHealth, ReadsEveryKey) {
  const LoadResult r = load_pool(
      "path = \"/ready?full=1\"\nhost = \"app.internal:8080\"\ninterval = \"5s\"\n"
      "timeout = \"500ms\"\nfall = 5\nrise = 1\nexpect_status = \"200,204\"\n"
      "max_response_header_bytes = 1024");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(health_of(r), (HealthParams{.path = "/ready?full=1",
                                        .host = "app.internal:8080",
                                        .interval = 5s,
                                        .timeout = 500ms,
                                        .fall = 5,
                                        .rise = 1,
                                        .expect_status = {{200, 200}, {204, 204}},
                                        .max_response_header_bytes = 1024}));
}

TEST(ConfigHealth, ReadsTheInlineTableForm) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "health = { path = \"/ping\", interval = \"10s\", fall = 2 }\n[[routes]]\nupstream = "
      "\"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  HealthParams want;
  want.path = "/ping";
  want.interval = 10s;
  want.fall = 2;
  EXPECT_EQ(health_of(r), want);
}

TEST(ConfigHealth, ReadsTheTableOfEachUpstreamOnItsOwn) {
  const LoadResult r = load(std::string(kMinimal) +
                            "[[upstreams]]\nname = \"b\"\nservers = [\"127.0.0.1:9001\"]\n"
                            "[upstreams.health]\nrise = 7\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_FALSE(r.config->upstreams.at(0).health.has_value());
  ASSERT_TRUE(r.config->upstreams.at(1).health.has_value());
  EXPECT_EQ(r.config->upstreams.at(1).health->rise, 7u);
}

TEST(ConfigHealth, AcceptsTheBoundsOfEachRange) {
  const LoadResult r = load_pool(
      "fall = 1\nrise = 1000\nmax_response_header_bytes = 64\ninterval = \"1ms\"\n"
      "timeout = \"1ms\"");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_TRUE(
      load_pool("fall = 1000\nrise = 1\nmax_response_header_bytes = 1048576").diagnostics.empty());
}

TEST(ConfigHealth, AcceptsAnEmptyHostForTheServersAddress) {
  const LoadResult r = load_pool("host = \"\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(health_of(r).host, "");
}

TEST(ConfigHealth, AcceptsAPathOf2048Bytes) {
  const std::string path = "/" + std::string(2047, 'a');
  const LoadResult r = load_pool("path = \"" + path + "\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(health_of(r).path, path);
}

TEST(ConfigHealth, AcceptsAHostOf255Bytes) {
  const std::string host = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                           std::string(63, 'c') + "." + std::string(58, 'd') + ":8080";
  ASSERT_EQ(host.size(), 255u);
  const LoadResult r = load_pool("host = \"" + host + "\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(health_of(r).host, host);
}

// A value the operator writes and what it becomes.
struct Accepted {
  std::string_view name;
  std::string_view toml;  // one `key = value` line
  HealthParams want;
};

// ctest lists a case by its name, not by its bytes.
void PrintTo(const Accepted& c, std::ostream* os) {
  *os << c.name;
}

// The defaults with one key changed. Not designated initializers: GCC 12 warns
// (-Wmissing-field-initializers) when one skips `host`, the member without an initializer.
HealthParams with_status(std::vector<StatusRange> ranges) {
  HealthParams p;
  p.expect_status = std::move(ranges);
  return p;
}
HealthParams with_host(std::string host) {
  HealthParams p;
  p.host = std::move(host);
  return p;
}
HealthParams with_path(std::string path) {
  HealthParams p;
  p.path = std::move(path);
  return p;
}

class ConfigHealthAccepts : public ::testing::TestWithParam<Accepted> {};

TEST_P(ConfigHealthAccepts, ParsesTheValueAsWritten) {
  const LoadResult r = load_pool(GetParam().toml);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(health_of(r), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Values, ConfigHealthAccepts,
    ::testing::Values(
        Accepted{"single_code", "expect_status = \"200\"", with_status({{200, 200}})},
        Accepted{"range", "expect_status = \"200-299\"", with_status({{200, 299}})},
        Accepted{"one_code_range", "expect_status = \"204-204\"", with_status({{204, 204}})},
        Accepted{"whole_range", "expect_status = \"100-599\"", with_status({{100, 599}})},
        Accepted{"list", "expect_status = \"200,204,300-399\"",
                 with_status({{200, 200}, {204, 204}, {300, 399}})},
        Accepted{"list_with_spaces", "expect_status = \" 200 , 204,\t300-399 \"",
                 with_status({{200, 200}, {204, 204}, {300, 399}})},
        Accepted{"integer", "expect_status = 204", with_status({{204, 204}})},
        Accepted{"host_name", "host = \"App.Internal\"", with_host("App.Internal")},
        Accepted{"host_name_and_port", "host = \"app:8080\"", with_host("app:8080")},
        Accepted{"host_ipv4_and_port", "host = \"10.0.0.1:80\"", with_host("10.0.0.1:80")},
        Accepted{"host_ipv6", "host = \"[::1]\"", with_host("[::1]")},
        Accepted{"host_ipv6_and_port", "host = \"[::1]:8080\"", with_host("[::1]:8080")},
        Accepted{"path_root", "path = \"/\"", with_path("/")},
        Accepted{"path_with_percent_encoding", "path = \"/a%20b\"", with_path("/a%20b")}),
    [](const auto& info) { return std::string(info.param.name); });

// One bad value on line 5 (column 1) and its exact message.
struct Rejected {
  std::string_view name;
  std::string toml;
  std::string_view key;
  std::string message;
};

void PrintTo(const Rejected& c, std::ostream* os) {
  *os << c.name;
}

class ConfigHealthRejects : public ::testing::TestWithParam<Rejected> {};

TEST_P(ConfigHealthRejects, WithItsPathPositionAndAMessageThatNamesTheFix) {
  const Rejected& c = GetParam();
  EXPECT_EQ(only(load_pool(c.toml)),
            "test.toml:5:1: error: upstreams[0].health." + std::string(c.key) + ": " + c.message);
}

constexpr std::string_view kForms =
    R"(write a code ("200"), a range ("200-399") or a comma-separated list of both )"
    R"(("200,204,300-399"))";

std::string status_error(std::string_view written, std::string_view why) {
  return "\"" + std::string(written) + "\" is not a valid expect_status: " + std::string(why);
}

const Rejected kRejected[] = {
    {"interval_zero", "interval = \"0s\"", "interval",
     "must be greater than 0; e.g. interval = \"2s\""},
    {"timeout_zero", "timeout = \"0\"", "timeout", "must be greater than 0; e.g. timeout = \"1s\""},
    {"interval_without_unit", "interval = 5", "interval",
     "expected a duration string with a unit, got an integer (5); write interval = \"5s\" or "
     "\"5ms\""},
    {"timeout_negative", "timeout = \"-1s\"", "timeout",
     "\"-1s\" is not a valid duration: durations cannot be negative"},
    {"fall_zero", "fall = 0", "fall", "0 is out of range; use an integer from 1 to 1000"},
    {"rise_zero", "rise = 0", "rise", "0 is out of range; use an integer from 1 to 1000"},
    {"fall_too_high", "fall = 1001", "fall", "1001 is out of range; use an integer from 1 to 1000"},
    {"rise_too_high", "rise = 1001", "rise", "1001 is out of range; use an integer from 1 to 1000"},
    {"rise_as_string", "rise = \"2\"", "rise",
     "expected an integer, got a string (\"2\"); e.g. rise = 2"},
    {"head_bytes_too_small", "max_response_header_bytes = 63", "max_response_header_bytes",
     "63 is out of range; use an integer from 64 (room for a status line and a few headers) to "
     "1048576 (a bound on what a probe reads from a server)"},
    {"head_bytes_too_large", "max_response_header_bytes = 1048577", "max_response_header_bytes",
     "1048577 is out of range; use an integer from 64 (room for a status line and a few "
     "headers) to 1048576 (a bound on what a probe reads from a server)"},
    {"head_bytes_as_string", "max_response_header_bytes = \"8k\"", "max_response_header_bytes",
     "expected an integer, got a string (\"8k\"); e.g. max_response_header_bytes = 8192"},
    {"path_relative", "path = \"healthz\"", "path",
     "\"healthz\" must start with \"/\" (the probe sends only the path); e.g. path = "
     "\"/healthz\""},
    {"path_empty", "path = \"\"", "path",
     "\"\" must start with \"/\" (the probe sends only the path); e.g. path = \"/healthz\""},
    {"path_url", "path = \"http://app/ready\"", "path",
     "\"http://app/ready\" must start with \"/\" (the probe sends only the path); e.g. path = "
     "\"/healthz\""},
    {"path_with_space", "path = \"/health z\"", "path",
     "\"/health z\" contains a space, a control character or a non-ASCII byte, which cannot go "
     "on the probe's request line; percent-encode it (a space is %20)"},
    {"path_with_control_character", "path = \"/a\\tb\"", "path",
     "\"/a\tb\" contains a space, a control character or a non-ASCII byte, which cannot go on "
     "the probe's request line; percent-encode it (a space is %20)"},
    {"path_non_ascii", "path = \"/caf\u00e9\"", "path",
     "\"/caf\u00e9\" contains a space, a control character or a non-ASCII byte, which cannot go "
     "on the probe's request line; percent-encode it (a space is %20)"},
    {"path_too_long", "path = \"/" + std::string(2048, 'a') + "\"", "path",
     "the path is 2049 bytes long; use at most 2048 (it goes on the probe's request line)"},
    {"path_not_a_string", "path = 1", "path",
     "expected a string, got an integer (1); e.g. path = \"/healthz\""},
    {"host_with_space", "host = \"app internal\"", "host",
     "\"app internal\" is not a valid probe host: it contains a space, a control character or a "
     "non-ASCII byte, which cannot go in a Host header"},
    {"host_with_scheme", "host = \"http://app\"", "host",
     "\"http://app\" is not a valid probe host: write only host[:port], without a scheme or a "
     "path, e.g. \"app.internal\""},
    {"host_with_path", "host = \"app/x\"", "host",
     "\"app/x\" is not a valid probe host: write only host[:port], without a scheme or a path, "
     "e.g. \"app.internal\""},
    {"host_bad_name", "host = \"app..internal\"", "host",
     "\"app..internal\" is not a valid probe host: use a name of dot-separated labels of "
     "letters, digits and '-', or an IP address, with an optional port, e.g. "
     "\"app.internal:8080\""},
    {"host_with_underscore", "host = \"my_app\"", "host",
     "\"my_app\" is not a valid probe host: use a name of dot-separated labels of letters, "
     "digits and '-', or an IP address, with an optional port, e.g. \"app.internal:8080\""},
    {"host_port_zero", "host = \"app:0\"", "host",
     "\"app:0\" is not a valid probe host: the port must follow a ':' and be a number from 1 to "
     "65535"},
    {"host_port_too_high", "host = \"app:65536\"", "host",
     "\"app:65536\" is not a valid probe host: the port must follow a ':' and be a number from 1 "
     "to 65535"},
    {"host_empty_port", "host = \"app:\"", "host",
     "\"app:\" is not a valid probe host: the port must follow a ':' and be a number from 1 to "
     "65535"},
    {"host_ipv6_without_brackets", "host = \"::1\"", "host",
     "\"::1\" is not a valid probe host: IPv6 addresses need brackets, e.g. \"[::1]:8080\""},
    {"host_ipv6_without_closing_bracket", "host = \"[::1\"", "host",
     "\"[::1\" is not a valid probe host: the ']' after the IPv6 address is missing"},
    {"host_bad_ipv6", "host = \"[fe80::zz]\"", "host",
     "\"[fe80::zz]\" is not a valid probe host: 'fe80::zz' is not an IPv6 address"},
    {"host_junk_after_ipv6", "host = \"[::1]8080\"", "host",
     "\"[::1]8080\" is not a valid probe host: the port must follow a ':' and be a number from "
     "1 to 65535"},
    {"host_too_long", "host = \"" + std::string(256, 'a') + "\"", "host",
     "the host is 256 bytes long; use at most 255, or \"\" for the server's address"},
    {"host_not_a_string", "host = 8080", "host",
     "expected a string, got an integer (8080); e.g. host = \"app.internal\""},
    {"status_word", "expect_status = \"abc\"", "expect_status",
     status_error("abc", "'abc' is not a status code or a range of them; " + std::string(kForms))},
    {"status_below_100", "expect_status = \"99\"", "expect_status",
     status_error("99", "99 is not an HTTP status code; use codes from 100 to 599")},
    {"status_above_599", "expect_status = \"600\"", "expect_status",
     status_error("600", "600 is not an HTTP status code; use codes from 100 to 599")},
    {"status_of_four_digits", "expect_status = \"2000\"", "expect_status",
     status_error("2000", "2000 is not an HTTP status code; use codes from 100 to 599")},
    {"status_range_above_599", "expect_status = \"500-600\"", "expect_status",
     status_error("500-600", "600 is not an HTTP status code; use codes from 100 to 599")},
    {"status_backwards_range", "expect_status = \"300-200\"", "expect_status",
     status_error("300-200",
                  "the range 300-200 is backwards; write the lower code first, \"200-300\"")},
    {"status_open_range", "expect_status = \"200-\"", "expect_status",
     status_error("200-",
                  "'200-' is not a status code or a range of them; " + std::string(kForms))},
    {"status_spaced_range", "expect_status = \"200 - 299\"", "expect_status",
     status_error("200 - 299",
                  "'200 - 299' is not a status code or a range of them; " + std::string(kForms))},
    {"status_empty", "expect_status = \"\"", "expect_status",
     status_error("", "it is empty; " + std::string(kForms))},
    {"status_blank", "expect_status = \"  \"", "expect_status",
     status_error("  ", "it is empty; " + std::string(kForms))},
    {"status_empty_item", "expect_status = \"200,,300\"", "expect_status",
     status_error("200,,300", "item 2 is empty; " + std::string(kForms))},
    {"status_trailing_comma", "expect_status = \"200, 204,\"", "expect_status",
     status_error("200, 204,", "item 3 is empty; " + std::string(kForms))},
    {"status_bad_item_in_list", "expect_status = \"200,2xx\"", "expect_status",
     status_error("200,2xx",
                  "'2xx' is not a status code or a range of them; " + std::string(kForms))},
    {"status_integer_below_100", "expect_status = 99", "expect_status",
     "99 is not an HTTP status code; use codes from 100 to 599, e.g. expect_status = 200"},
    {"status_integer_above_599", "expect_status = 600", "expect_status",
     "600 is not an HTTP status code; use codes from 100 to 599, e.g. expect_status = 200"},
    {"status_array", "expect_status = [200, 204]", "expect_status",
     "expected a status code or a string of codes and ranges, got an array; e.g. expect_status "
     "= \"200,204,300-399\""},
    {"status_float", "expect_status = 200.0", "expect_status",
     "expected a status code or a string of codes and ranges, got a floating-point number; e.g. "
     "expect_status = \"200,204,300-399\""},
    {"typo", "intervall = \"5s\"", "intervall",
     "unknown key 'intervall' in [upstreams.health] (did you mean 'interval'?); expected one "
     "of: path, host, interval, timeout, fall, rise, expect_status, max_response_header_bytes"},
    {"upstream_key", "keepalive = 8", "keepalive",
     "unknown key 'keepalive' in [upstreams.health]; 'keepalive' belongs in an [[upstreams]] "
     "entry"},
};

INSTANTIATE_TEST_SUITE_P(Values, ConfigHealthRejects, ::testing::ValuesIn(kRejected),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigHealth, ReportsEveryBadKeyOfTheTable) {
  const LoadResult r = load_pool("fall = 0\nrise = 0\nexpect_status = \"\"\npath = \"x\"");
  ASSERT_EQ(r.diagnostics.size(), 4u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].health.fall");
  EXPECT_EQ(r.diagnostics[3].path, "upstreams[0].health.path");
  EXPECT_EQ(r.diagnostics[3].line, 8);
}

TEST(ConfigHealth, PointsIntoTheInlineTableForItsErrors) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "health = { rise = 2, fall = 0 }\n[[routes]]\nupstream = \"app\"\n");
  EXPECT_EQ(only(r),
            "test.toml:4:22: error: upstreams[0].health.fall: 0 is out of range; use an integer "
            "from 1 to 1000");
}

TEST(ConfigHealth, NamesTheIndexOfTheUpstreamWhoseTableHasTheError) {
  const LoadResult r = load(std::string(kMinimal) +
                            "[[upstreams]]\nname = \"b\"\nservers = [\"127.0.0.1:9001\"]\n"
                            "[upstreams.health]\nexpect_status = \"abc\"\n");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[1].health.expect_status");
  EXPECT_EQ(r.diagnostics[0].line, 11);
  EXPECT_EQ(r.diagnostics[0].column, 1);
}

TEST(ConfigHealth, RejectsAHealthThatIsNotATable) {
  EXPECT_EQ(only(load("[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "health = true\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:4:1: error: upstreams[0].health: expected a table, got a boolean (true); "
            "e.g. [upstreams.health]");
}

TEST(ConfigHealth, WarnsWhenTheIntervalIsShorterThanTheTimeout) {
  const LoadResult r = load_pool("interval = \"1s\"\ntimeout = \"1500ms\"");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:5:1: warning: upstreams[0].health.interval: interval = \"1s\" is shorter "
            "than timeout = \"1500ms\", but probes never overlap: a server whose probe is still "
            "running when its interval comes is skipped that round, so it is probed at most "
            "once every \"1500ms\"; set interval to at least \"1500ms\" or lower timeout");
}

TEST(ConfigHealth, WarnsAtTheTableWhenOnlyTheTimeoutOutlastsTheDefaultInterval) {
  const LoadResult r = load_pool("timeout = \"5s\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].severity, Severity::warning);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].health.interval");
  EXPECT_EQ(r.diagnostics[0].line, 4);
  EXPECT_EQ(r.diagnostics[0].column, 1);
}

TEST(ConfigHealth, DoesNotWarnWhenTheIntervalEqualsTheTimeout) {
  EXPECT_TRUE(load_pool("interval = \"1s\"\ntimeout = \"1s\"").diagnostics.empty());
}

TEST(ConfigHealth, DoesNotWarnOfTheIntervalWhenTheTimeoutHasItsOwnError) {
  const LoadResult r = load_pool("interval = \"1s\"\ntimeout = \"1.5s\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].health.timeout");
}

TEST(ConfigHealth, TellsThatAKeyWrittenInTheUpstreamItselfBelongsInItsHealthTable) {
  EXPECT_EQ(only(load("[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "fall = 3\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:4:1: error: upstreams[0].fall: unknown key 'fall' in [[upstreams]]; "
            "'fall' belongs in [upstreams.health]");
}

TEST(ConfigHealth, TellsThatATimeoutInTheUpstreamIsAHealthKeyOrOneOfThePoolsTimeouts) {
  EXPECT_EQ(only(load("[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "timeout = \"1s\"\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:4:1: error: upstreams[0].timeout: unknown key 'timeout' in [[upstreams]]; "
            "'timeout' belongs in [upstreams.health] (a pool's request timeouts are "
            "connect_timeout and response_timeout)");
}

TEST(ConfigHealth, TellsThatAPathInARouteIsAHealthKeyAndARouteMatchesByPathPrefix) {
  EXPECT_EQ(only(load(std::string(kMinimal) + "path = \"/api\"\n")),
            "test.toml:7:1: error: routes[0].path: unknown key 'path' in [[routes]]; 'path' "
            "belongs in [upstreams.health] (a route matches requests by path_prefix)");
}

TEST(ConfigHealth, TellsThatAHostInAnotherTableBelongsInARouteOrTheHealthTable) {
  EXPECT_EQ(only(testing::load_with("[server]\nhost = \"a.b\"")),
            "test.toml:2:1: error: server.host: unknown key 'host' in [server]; 'host' belongs "
            "in a [[routes]] entry (or [upstreams.health] for the probe's Host header)");
}

TEST(ConfigHealth, TellsThatAHealthTableInARouteBelongsToItsUpstream) {
  EXPECT_EQ(only(load(std::string(kMinimal) + "[routes.health]\nfall = 3\n")),
            "test.toml:7:1: error: routes[0].health: unknown key 'health' in [[routes]]; "
            "'health' belongs in an [[upstreams]] entry, as [upstreams.health]");
}

}  // namespace
}  // namespace floodgate::config
