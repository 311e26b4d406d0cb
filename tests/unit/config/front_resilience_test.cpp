// [resilience]: the front of the stage chain. The defaults, every key, the keys of
// [resilience.inflight] and [resilience.memory_guard] with their syntaxes and errors, the mode
// of each sub-table, and unknown keys and sub-tables. [resilience.protocol] has
// front_protocol_test.cpp, the environment overrides front_environment_test.cpp.
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
using resilience::Mode;
using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;
using Strings = std::vector<std::string>;

// `header` on line 1 ("[resilience.inflight]"), `body` from line 2 on, then the minimal
// upstream and route.
std::string in_table(std::string_view header, std::string_view body) {
  return std::string(header) + "\n" + std::string(body) + "\n\n" + std::string(kMinimal);
}

LoadResult load_in(std::string_view header, std::string_view body) {
  return load(in_table(header, body));
}
LoadResult inflight(std::string_view body) {
  return load(in_table("[resilience.inflight]", body));
}
LoadResult memory_guard(std::string_view body) {
  return load(in_table("[resilience.memory_guard]", body));
}

// --- defaults and every key ------------------------------------------------------------------

TEST(ConfigFrontResilience, DefaultsToAnAutomaticCapAnAutomaticFloorAndAClosedConnect) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  const resilience::Params& p = r.config->resilience;
  EXPECT_EQ(p, resilience::Params{});
  EXPECT_TRUE(p.inflight.automatic);
  EXPECT_EQ(p.inflight.retry_after, 1s);
  EXPECT_TRUE(p.inflight.exempt_preflight);
  EXPECT_EQ(p.inflight.exempt_methods, Strings{});
  EXPECT_EQ(p.inflight.exempt_path_prefixes, Strings{});
  EXPECT_EQ(p.inflight.exempt_path_suffixes, Strings{"/events"});
  EXPECT_TRUE(p.inflight.exempt_upgrades);
  EXPECT_EQ(p.inflight.mode, Mode::enforce);
  EXPECT_TRUE(p.memory_guard.automatic);
  EXPECT_EQ(p.memory_guard.meminfo, "/proc/meminfo");
  EXPECT_EQ(p.memory_guard.mode, Mode::enforce);
  EXPECT_EQ(p.protocol.allowed_methods, Strings{});
  EXPECT_EQ(p.protocol.denied_path_prefixes, Strings{});
  EXPECT_TRUE(p.protocol.enforce_authority_host_match);
  EXPECT_FALSE(p.protocol.allow_connect);
  EXPECT_TRUE(p.protocol.connect_allowed_ports.empty());
  EXPECT_EQ(p.protocol.connect_allowed_authorities, Strings{});
  EXPECT_FALSE(p.protocol.allow_0rtt);
  EXPECT_EQ(p.protocol.early_data_safe_methods, (Strings{"GET", "HEAD"}));
  EXPECT_EQ(p.protocol.mode, Mode::enforce);
}

TEST(ConfigFrontResilience, KeepsTheDefaultsForEmptyTables) {
  const LoadResult r = load(
      "[resilience]\n[resilience.inflight]\n[resilience.memory_guard]\n[resilience.protocol]\n" +
      std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience, resilience::Params{});
}

TEST(ConfigFrontResilience, ReadsEveryInflightKey) {
  const LoadResult r = inflight(
      "max_inflight = 64\nretry_after = \"2s\"\nexempt_preflight = false\n"
      "exempt_methods = [\"OPTIONS\", \"PROPFIND\"]\nexempt_path_prefixes = [\"/downloads/\"]\n"
      "exempt_path_suffixes = [\"/events\", \".mp4\"]\nexempt_upgrades = false\n"
      "mode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.inflight,
            (resilience::InflightParams{.automatic = false,
                                        .max_inflight = 64,
                                        .retry_after = 2s,
                                        .exempt_preflight = false,
                                        .exempt_methods = {"OPTIONS", "PROPFIND"},
                                        .exempt_path_prefixes = {"/downloads/"},
                                        .exempt_path_suffixes = {"/events", ".mp4"},
                                        .exempt_upgrades = false,
                                        .mode = Mode::shadow}));
}

TEST(ConfigFrontResilience, ReadsEveryMemoryGuardKey) {
  const LoadResult r =
      memory_guard("min_available = 512\nmeminfo = \"/tmp/meminfo\"\nmode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.memory_guard,
            (resilience::MemoryGuardParams{.automatic = false,
                                           .min_available_mib = 512,
                                           .meminfo = "/tmp/meminfo",
                                           .mode = Mode::shadow}));
}

TEST(ConfigFrontResilience, ReadsEveryProtocolKey) {
  const LoadResult r = load_in(
      "[resilience.protocol]",
      "allowed_methods = [\"GET\", \"HEAD\", \"CONNECT\"]\n"
      "denied_path_prefixes = [\"/admin\", \"/.git\"]\nenforce_authority_host_match = false\n"
      "allow_connect = true\nconnect_allowed_ports = [443, 993]\n"
      "connect_allowed_authorities = [\"DB.internal:5432\", \"[2001:DB8::1]:8443\"]\n"
      "allow_0rtt = true\nearly_data_safe_methods = [\"GET\"]\nmode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.protocol,
            (resilience::ProtocolParams{
                .allowed_methods = {"GET", "HEAD", "CONNECT"},
                .denied_path_prefixes = {"/admin", "/.git"},
                .enforce_authority_host_match = false,
                .allow_connect = true,
                .connect_allowed_ports = {443, 993},
                .connect_allowed_authorities = {"db.internal:5432", "[2001:db8::1]:8443"},
                .allow_0rtt = true,
                .early_data_safe_methods = {"GET"},
                .mode = Mode::shadow}));
}

TEST(ConfigFrontResilience, ReadsTheInlineTableForms) {
  const LoadResult r =
      load("[resilience]\ninflight = { max_inflight = 8 }\nmemory_guard = { min_available = 0 }\n" +
           std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.inflight.max_inflight, 8u);
  EXPECT_FALSE(r.config->resilience.memory_guard.automatic);
  EXPECT_EQ(r.config->resilience.memory_guard.min_available_mib, 0u);
}

TEST(ConfigFrontResilience, ReadsAutoAndZeroAndTheHighestCap) {
  const LoadResult automatic = inflight("max_inflight = \"auto\"");
  ASSERT_TRUE(automatic.ok()) << dump(automatic);
  EXPECT_TRUE(automatic.config->resilience.inflight.automatic);
  const LoadResult off = inflight("max_inflight = 0");
  ASSERT_TRUE(off.ok()) << dump(off);
  EXPECT_FALSE(off.config->resilience.inflight.automatic);
  EXPECT_EQ(off.config->resilience.inflight.max_inflight, 0u);
  const LoadResult highest = inflight("max_inflight = 2147483646");
  ASSERT_TRUE(highest.ok()) << dump(highest);
  EXPECT_EQ(highest.config->resilience.inflight.max_inflight, 2147483646u);
}

TEST(ConfigFrontResilience, ReadsAutoAndTheHighestFloor) {
  const LoadResult automatic = memory_guard("min_available = \"auto\"");
  ASSERT_TRUE(automatic.ok()) << dump(automatic);
  EXPECT_TRUE(automatic.config->resilience.memory_guard.automatic);
  const LoadResult highest = memory_guard("min_available = 1073741824");
  ASSERT_TRUE(highest.ok()) << dump(highest);
  EXPECT_EQ(highest.config->resilience.memory_guard.min_available_mib, 1073741824u);
}

// --- [resilience.inflight] errors ------------------------------------------------------------

struct KeyError {
  std::string_view name;
  std::string_view body;      // on line 2 of its table
  std::string_view expected;  // the formatted diagnostic
};

void PrintTo(const KeyError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigFrontInflightErrors : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigFrontInflightErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(inflight(GetParam().body)), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigFrontInflightErrors,
    ::testing::Values(
        KeyError{"negative_cap", "max_inflight = -1",
                 "test.toml:2:1: error: resilience.inflight.max_inflight: -1 is out of range; use "
                 "\"auto\" or an integer from 0 (no cap) to 2147483646"},
        KeyError{"cap_above_admission", "max_inflight = 2147483647",
                 "test.toml:2:1: error: resilience.inflight.max_inflight: 2147483647 is out of "
                 "range; use \"auto\" or an integer from 0 (no cap) to 2147483646"},
        KeyError{"quoted_cap", "max_inflight = \"100\"",
                 "test.toml:2:1: error: resilience.inflight.max_inflight: \"100\" is a string; "
                 "write the number without quotes, e.g. max_inflight = 100"},
        KeyError{"unknown_word", "max_inflight = \"automatic\"",
                 "test.toml:2:1: error: resilience.inflight.max_inflight: unknown value "
                 "\"automatic\"; use \"auto\" or an integer from 0 (no cap) to 2147483646"},
        KeyError{"boolean_cap", "max_inflight = true",
                 "test.toml:2:1: error: resilience.inflight.max_inflight: expected \"auto\" or an "
                 "integer, got a boolean (true); e.g. max_inflight = \"auto\""},
        KeyError{"zero_retry_after", "retry_after = \"0s\"",
                 "test.toml:2:1: error: resilience.inflight.retry_after: must be greater than 0; "
                 "e.g. retry_after = \"1s\""},
        KeyError{"retry_after_without_unit", "retry_after = 2",
                 "test.toml:2:1: error: resilience.inflight.retry_after: expected a duration "
                 "string with a unit, got an integer (2); write retry_after = \"2s\" or \"2ms\""},
        KeyError{"string_boolean", "exempt_preflight = \"yes\"",
                 "test.toml:2:1: error: resilience.inflight.exempt_preflight: expected a boolean, "
                 "got a string (\"yes\"); e.g. exempt_preflight = false"},
        KeyError{"methods_not_an_array", "exempt_methods = \"OPTIONS\"",
                 "test.toml:2:1: error: resilience.inflight.exempt_methods: expected an array of "
                 "strings, got a string (\"OPTIONS\"); e.g. exempt_methods = [\"OPTIONS\"]"},
        KeyError{"method_not_a_token", "exempt_methods = [\"GET POST\"]",
                 "test.toml:2:19: error: resilience.inflight.exempt_methods[0]: \"GET POST\" is "
                 "not a method: a method is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC "
                 "9110 section 5.6.2), e.g. \"GET\""},
        KeyError{"empty_method", "exempt_methods = [\"\"]",
                 "test.toml:2:19: error: resilience.inflight.exempt_methods[0]: a method cannot "
                 "be empty; write a method name, e.g. \"GET\""},
        KeyError{"method_not_a_string", "exempt_methods = [1]",
                 "test.toml:2:19: error: resilience.inflight.exempt_methods[0]: expected a "
                 "string, got an integer (1); e.g. \"GET\""},
        KeyError{"duplicate_method", "exempt_methods = [\"OPTIONS\", \"OPTIONS\"]",
                 "test.toml:2:30: error: resilience.inflight.exempt_methods[1]: duplicate "
                 "\"OPTIONS\" (same as resilience.inflight.exempt_methods[0]); remove one of "
                 "them"},
        KeyError{"relative_prefix", "exempt_path_prefixes = [\"downloads/\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_prefixes[0]: "
                 "\"downloads/\" must start with \"/\"; e.g. \"/downloads/\""},
        KeyError{"empty_prefix", "exempt_path_prefixes = [\"\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_prefixes[0]: \"\" must "
                 "start with \"/\"; e.g. \"/downloads/\""},
        KeyError{"prefix_with_query", "exempt_path_prefixes = [\"/dl?x=1\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_prefixes[0]: "
                 "\"/dl?x=1\" contains '?'; paths are matched without the query, e.g. \"/dl\""},
        KeyError{"prefix_with_space", "exempt_path_prefixes = [\"/a b\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_prefixes[0]: \"/a b\" "
                 "contains a space or control character; percent-encode it"},
        KeyError{"empty_suffix", "exempt_path_suffixes = [\"\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_suffixes[0]: a suffix "
                 "cannot be empty (it would match every path); e.g. \"/events\""},
        KeyError{"suffix_with_fragment", "exempt_path_suffixes = [\"/events#x\"]",
                 "test.toml:2:25: error: resilience.inflight.exempt_path_suffixes[0]: "
                 "\"/events#x\" contains '#'; paths are matched without the query, e.g. "
                 "\"/events\""},
        KeyError{"duplicate_suffix", "exempt_path_suffixes = [\"/events\", \"/events\"]",
                 "test.toml:2:36: error: resilience.inflight.exempt_path_suffixes[1]: duplicate "
                 "\"/events\" (same as resilience.inflight.exempt_path_suffixes[0]); remove one "
                 "of them"},
        KeyError{"unknown_mode", "mode = \"dry_run\"",
                 "test.toml:2:1: error: resilience.inflight.mode: unknown value \"dry_run\"; "
                 "expected enforce or shadow"},
        KeyError{"typo", "max_inflght = 8",
                 "test.toml:2:1: error: resilience.inflight.max_inflght: unknown key "
                 "'max_inflght' in [resilience.inflight] (did you mean 'max_inflight'?); expected "
                 "one of: max_inflight, retry_after, exempt_preflight, exempt_methods, "
                 "exempt_path_prefixes, exempt_path_suffixes, exempt_upgrades, mode"},
        KeyError{"memory_key", "min_available = 64",
                 "test.toml:2:1: error: resilience.inflight.min_available: unknown key "
                 "'min_available' in [resilience.inflight]; 'min_available' belongs in "
                 "[resilience.memory_guard]"},
        KeyError{"pool_key", "max_pending_requests = 8",
                 "test.toml:2:1: error: resilience.inflight.max_pending_requests: unknown key "
                 "'max_pending_requests' in [resilience.inflight]; 'max_pending_requests' "
                 "belongs in [upstreams.resilience]"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigFrontResilience, RejectsAPrefixLongerThanARoutePrefixMayBe) {
  const std::string longest = "/" + std::string(1023, 'a');
  EXPECT_TRUE(inflight("exempt_path_prefixes = [\"" + longest + "\"]").diagnostics.empty());
  EXPECT_EQ(only(inflight("exempt_path_prefixes = [\"" + longest + "a\"]")),
            "test.toml:2:25: error: resilience.inflight.exempt_path_prefixes[0]: a path of 1025 "
            "bytes is too long; at most 1024 are allowed");
}

TEST(ConfigFrontResilience, WarnsThatAMethodInTheWrongCaseNeverMatches) {
  const LoadResult r = inflight("exempt_methods = [\"options\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:19: warning: resilience.inflight.exempt_methods[0]: \"options\" never "
            "matches: methods are case-sensitive (RFC 9110 section 9.1), and \"options\" is not "
            "\"OPTIONS\"; write \"OPTIONS\"");
}

TEST(ConfigFrontResilience, WarnsThatExemptingTheRootLeavesTheCapNothingToCap) {
  const LoadResult r = inflight("exempt_path_prefixes = [\"/api\", \"/\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:33: warning: resilience.inflight.exempt_path_prefixes[1]: \"/\" matches "
            "every request, so the in-flight cap never applies; list the paths to exempt, e.g. "
            "\"/downloads/\", or set max_inflight = 0 to turn the cap off");
}

TEST(ConfigFrontResilience, KeepsTheDefaultListWhenAnElementIsInvalid) {
  const LoadResult r = inflight("exempt_path_suffixes = [\"/sse\", \"\"]");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_FALSE(r.ok());
}

TEST(ConfigFrontResilience, ReadsAnEmptyListAsNoExemption) {
  const LoadResult r = inflight("exempt_path_suffixes = []");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.inflight.exempt_path_suffixes, Strings{});
}

// --- [resilience.memory_guard] errors --------------------------------------------------------

class ConfigFrontMemoryGuardErrors : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigFrontMemoryGuardErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(memory_guard(GetParam().body)), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigFrontMemoryGuardErrors,
    ::testing::Values(
        KeyError{"negative_floor", "min_available = -1",
                 "test.toml:2:1: error: resilience.memory_guard.min_available: -1 is out of "
                 "range; use \"auto\" or a number of MiB from 0 (the guard is off) to 1073741824"},
        KeyError{"floor_above_a_pebibyte", "min_available = 1073741825",
                 "test.toml:2:1: error: resilience.memory_guard.min_available: 1073741825 is out "
                 "of range; use \"auto\" or a number of MiB from 0 (the guard is off) to "
                 "1073741824"},
        KeyError{"quoted_floor", "min_available = \"512\"",
                 "test.toml:2:1: error: resilience.memory_guard.min_available: \"512\" is a "
                 "string; write the number without quotes, e.g. min_available = 512"},
        KeyError{"floor_with_unit", "min_available = \"512MiB\"",
                 "test.toml:2:1: error: resilience.memory_guard.min_available: unknown value "
                 "\"512MiB\"; use \"auto\" or a number of MiB from 0 (the guard is off) to "
                 "1073741824"},
        KeyError{"fractional_floor", "min_available = 1.5",
                 "test.toml:2:1: error: resilience.memory_guard.min_available: expected \"auto\" "
                 "or an integer, got a floating-point number; e.g. min_available = \"auto\""},
        KeyError{"empty_meminfo", "meminfo = \"\"",
                 "test.toml:2:1: error: resilience.memory_guard.meminfo: the path is empty; "
                 "write an absolute path, e.g. \"/proc/meminfo\""},
        KeyError{"relative_meminfo", "meminfo = \"proc/meminfo\"",
                 "test.toml:2:1: error: resilience.memory_guard.meminfo: \"proc/meminfo\" is not "
                 "an absolute path (floodgate may run from any directory); e.g. "
                 "\"/proc/meminfo\""},
        KeyError{"meminfo_with_control", "meminfo = \"/proc/mem\\u0000info\"",
                 "test.toml:2:1: error: resilience.memory_guard.meminfo: the path contains a "
                 "control character; no file can be named so"},
        KeyError{"meminfo_not_a_string", "meminfo = 5",
                 "test.toml:2:1: error: resilience.memory_guard.meminfo: expected a string, got "
                 "an integer (5); e.g. meminfo = \"/proc/meminfo\""},
        KeyError{"typo", "min_availble = 64",
                 "test.toml:2:1: error: resilience.memory_guard.min_availble: unknown key "
                 "'min_availble' in [resilience.memory_guard] (did you mean 'min_available'?); "
                 "expected one of: min_available, meminfo, mode"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigFrontResilience, RejectsAMeminfoPathLongerThanAFileCanHave) {
  EXPECT_TRUE(memory_guard("meminfo = \"/" + std::string(4094, 'm') + "\"").diagnostics.empty());
  EXPECT_EQ(only(memory_guard("meminfo = \"/" + std::string(4095, 'm') + "\"")),
            "test.toml:2:1: error: resilience.memory_guard.meminfo: the path is 4096 bytes long; "
            "at most 4095 can be opened");
}

// --- unknown keys and sub-tables -------------------------------------------------------------

TEST(ConfigFrontResilience, RejectsAnUnknownSubTableNamingTheOnesThatExist) {
  EXPECT_EQ(only(load_in("[resilience.limits]", "max = 1")),
            "test.toml:1:1: error: resilience.limits: unknown table [resilience.limits]; "
            "[resilience] has the sub-tables inflight, memory_guard, protocol, "
            "circuit_breaker, retry_budget, hedging, adaptive_admission, brownout, route_queue, "
            "watchdog, scoped_rate_limits and quota");
}

TEST(ConfigFrontResilience, SuggestsTheClosestSubTableForATypo) {
  EXPECT_EQ(only(load_in("[resilience.inflght]", "max_inflight = 1")),
            "test.toml:1:1: error: resilience.inflght: unknown table [resilience.inflght] (did "
            "you mean 'inflight'?); [resilience] has the sub-tables inflight, memory_guard, "
            "protocol, circuit_breaker, retry_budget, hedging, adaptive_admission, brownout, "
            "route_queue, watchdog, scoped_rate_limits and quota");
}

TEST(ConfigFrontResilience, ReadsTheQuotaTable) {
  // Its keys and rules: quota_test.cpp.
  EXPECT_EQ(only(load_in("[resilience.quota]", "enabled = true")),
            "test.toml:2:1: error: resilience.quota.enabled: enabled = true, but "
            "[resilience.quota] has no policy, so it would count nothing; add a "
            "[[resilience.quota.policies]] entry (a name, a selector and a burst or sustained "
            "window), or set enabled = false");
}

TEST(ConfigFrontResilience, RejectsTheQuotaAsAnArrayOfTables) {
  EXPECT_EQ(only(load_in("[[resilience.quota]]", "enabled = false")),
            "test.toml:1:1: error: resilience.quota: expected a table, got an array; e.g. "
            "[resilience.quota]");
}

TEST(ConfigFrontResilience, RejectsAnUnknownKeyInTheResilienceTable) {
  EXPECT_EQ(only(load_in("[resilience]", "enabled = true")),
            "test.toml:2:1: error: resilience.enabled: unknown key 'enabled' in [resilience]; "
            "expected one of: inflight, memory_guard, protocol, circuit_breaker, retry_budget, "
            "hedging, adaptive_admission, brownout, route_queue, watchdog, scoped_rate_limits, "
            "quota");
}

TEST(ConfigFrontResilience, TellsWhichSubTableAKeyWrittenInTheResilienceTableBelongsIn) {
  EXPECT_EQ(only(load_in("[resilience]", "max_inflight = 100")),
            "test.toml:2:1: error: resilience.max_inflight: unknown key 'max_inflight' in "
            "[resilience]; 'max_inflight' belongs in [resilience.inflight] (or "
            "[resilience.quota.backend] for the Redis decisions in flight)");
  EXPECT_EQ(only(load_in("[resilience]", "mode = \"shadow\"")),
            "test.toml:2:1: error: resilience.mode: unknown key 'mode' in [resilience]; 'mode' "
            "belongs in [resilience.inflight], [resilience.memory_guard], "
            "[resilience.protocol], [resilience.circuit_breaker], "
            "[resilience.adaptive_admission], [resilience.brownout], [resilience.route_queue] "
            "or a [[resilience.scoped_rate_limits]] rule ([resilience.quota] has enforcement "
            "instead)");
}

TEST(ConfigFrontResilience, TellsWhereAKeyWrittenInServerBelongs) {
  EXPECT_EQ(only(load_in("[server]", "max_inflight = 100")),
            "test.toml:2:1: error: server.max_inflight: unknown key 'max_inflight' in [server]; "
            "'max_inflight' belongs in [resilience.inflight] (or [resilience.quota.backend] for "
            "the Redis decisions in flight)");
  EXPECT_EQ(only(load_in("[server]", "allow_connect = true")),
            "test.toml:2:1: error: server.allow_connect: unknown key 'allow_connect' in "
            "[server]; 'allow_connect' belongs in [resilience.protocol]");
  EXPECT_EQ(only(load_in("[server.inflight]", "max_inflight = 100")),
            "test.toml:1:1: error: server.inflight: unknown key 'inflight' in [server]; "
            "'inflight' belongs in [resilience], as [resilience.inflight]");
}

TEST(ConfigFrontResilience, TellsThatAPoolsRetryAfterAlsoHasAFrontCounterpart) {
  EXPECT_EQ(only(load_in("[server]", "retry_after = \"1s\"")),
            "test.toml:2:1: error: server.retry_after: unknown key 'retry_after' in [server]; "
            "'retry_after' belongs in [upstreams.resilience] (or [resilience.inflight] for the "
            "process-wide in-flight cap, [resilience.route_queue] for the route caps and "
            "brownout)");
}

TEST(ConfigFrontResilience, RejectsATableThatIsNotOne) {
  EXPECT_EQ(only(load("resilience = 3\n" + std::string(kMinimal))),
            "test.toml:1:1: error: resilience: expected a table, got an integer (3); e.g. "
            "[resilience]");
  EXPECT_EQ(only(load_in("[resilience]", "inflight = 3")),
            "test.toml:2:1: error: resilience.inflight: expected a table, got an integer (3); "
            "e.g. [resilience.inflight]");
}

TEST(ConfigFrontResilience, ReportsEveryProblemOfEverySubTableInOnePass) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = -1\nmode = \"x\"\n[resilience.memory_guard]\n"
      "meminfo = \"\"\n[resilience.protocol]\nallow_connect = true\n[resilience.quota]\n"
      "enabled = true\n" +
      std::string(kMinimal));
  EXPECT_FALSE(r.ok());
  std::vector<std::string> paths;
  for (const Diagnostic& d : r.diagnostics) paths.push_back(d.path);
  EXPECT_EQ(paths, (Strings{"resilience.inflight.max_inflight", "resilience.inflight.mode",
                            "resilience.memory_guard.meminfo", "resilience.protocol.allow_connect",
                            "resilience.quota.enabled"}))
      << dump(r);
}

// --- every sub-table takes a mode -------------------------------------------------------------

class ConfigFrontModes : public ::testing::TestWithParam<std::string_view> {};

TEST_P(ConfigFrontModes, ReadsShadowAndRejectsOtherWords) {
  const std::string header = "[resilience." + std::string(GetParam()) + "]";
  const LoadResult r = load(in_table(header, "mode = \"shadow\""));
  ASSERT_TRUE(r.ok()) << dump(r);
  const resilience::Params& p = r.config->resilience;
  const Mode mode = GetParam() == "inflight"       ? p.inflight.mode
                    : GetParam() == "memory_guard" ? p.memory_guard.mode
                                                   : p.protocol.mode;
  EXPECT_EQ(mode, Mode::shadow);
  EXPECT_EQ(only(load(in_table(header, "mode = \"Shadow\""))),
            "test.toml:2:1: error: resilience." + std::string(GetParam()) +
                ".mode: unknown value \"Shadow\"; expected enforce or shadow");
}

INSTANTIATE_TEST_SUITE_P(Tables, ConfigFrontModes,
                         ::testing::Values("inflight", "memory_guard", "protocol"));

}  // namespace
}  // namespace floodgate::config
