// [resilience.adaptive_admission], [resilience.brownout], [resilience.route_queue] and
// [resilience.watchdog]: the configuration of issue 14's local runtime protection. The
// defaults, every key, every validation rule with the message the operator sees, the upstream
// names that core_routes and caps refer to, the rules against the front in-flight cap and
// server.drain_timeout, unknown keys, and the warnings.
#include <gtest/gtest.h>

#include <map>
#include <optional>
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
using Caps = std::map<std::string, uint32_t, std::less<>>;

using testing::kTwoPools;  // "app" and "billing", after the tables under test

// `header` on line 1 ("[resilience.brownout]"), `body` from line 2 on, then the two pools.
LoadResult load_in(std::string_view header, std::string_view body) {
  return testing::load_table(header, body, kTwoPools);
}
LoadResult adaptive(std::string_view body) {
  return load_in("[resilience.adaptive_admission]", body);
}
LoadResult brownout(std::string_view body) {
  return load_in("[resilience.brownout]", body);
}
LoadResult route_queue(std::string_view body) {
  return load_in("[resilience.route_queue]", body);
}
LoadResult watchdog(std::string_view body) {
  return load_in("[resilience.watchdog]", body);
}

// An environment with FLOODGATE_MAX_INFLIGHT = `value` only.
Environment max_inflight_env(const std::string& value) {
  return [value](std::string_view name) -> std::optional<std::string> {
    if (name == "FLOODGATE_MAX_INFLIGHT") return value;
    return std::nullopt;
  };
}

// --- defaults and every key ------------------------------------------------------------------

TEST(ConfigLocalProtection, DefaultsToTheIssuesValuesWhenTheTablesAreAbsent) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  const resilience::Params& p = r.config->resilience;
  EXPECT_TRUE(p.adaptive_admission.enabled);
  EXPECT_EQ(p.adaptive_admission.min_limit, 64u);
  EXPECT_EQ(p.adaptive_admission.max_limit, 0u);
  EXPECT_EQ(p.adaptive_admission.decrease_step, 16u);
  EXPECT_EQ(p.adaptive_admission.increase_step, 16u);
  EXPECT_EQ(p.adaptive_admission.high_latency, 500ms);
  EXPECT_EQ(p.adaptive_admission.window, 100ms);
  EXPECT_EQ(p.adaptive_admission.mode, Mode::enforce);
  EXPECT_TRUE(p.brownout.enabled);
  EXPECT_EQ(p.brownout.trigger_inflight_percent, 90u);
  EXPECT_EQ(p.brownout.recover_inflight_percent, 60u);
  EXPECT_EQ(p.brownout.core_routes, Strings{});
  EXPECT_EQ(p.brownout.mode, Mode::enforce);
  EXPECT_EQ(p.route_queue.default_cap, 512u);
  EXPECT_EQ(p.route_queue.global_cap, 2048u);
  EXPECT_TRUE(p.route_queue.caps.empty());
  EXPECT_EQ(p.route_queue.retry_after, 1s);
  EXPECT_EQ(p.route_queue.mode, Mode::enforce);
  EXPECT_FALSE(p.watchdog.enabled);
  EXPECT_EQ(p.watchdog.check_interval, 1s);
  EXPECT_EQ(p.watchdog.poll_stall_timeout, 5s);
  EXPECT_EQ(p.watchdog.timeout_error_rate_percent, 60u);
  EXPECT_EQ(p.watchdog.min_requests_per_window, 20u);
  EXPECT_EQ(p.watchdog.min_timeout_spread, 2u);
  EXPECT_EQ(p.watchdog.overload_inflight_percent, 95u);
  EXPECT_EQ(p.watchdog.unhealthy_consecutive_windows, 3u);
  EXPECT_EQ(p.watchdog.drain_grace, 8s);
  EXPECT_EQ(p.watchdog.restart_cooldown, 120s);
  EXPECT_EQ(p.watchdog.restart_command, Strings{});
  EXPECT_EQ(p, resilience::Params{});
}

TEST(ConfigLocalProtection, KeepsTheDefaultsForEmptyTables) {
  const LoadResult r = load(
      "[resilience.adaptive_admission]\n[resilience.brownout]\n[resilience.route_queue]\n"
      "[resilience.watchdog]\n" +
      std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience, resilience::Params{});
}

TEST(ConfigLocalProtection, ReadsEveryAdaptiveAdmissionKey) {
  const LoadResult r = adaptive(
      "enabled = false\nmin_limit = 8\nmax_limit = 200\ndecrease_step = 4\nincrease_step = 2\n"
      "high_latency = \"250ms\"\nwindow = \"1s\"\nmode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.adaptive_admission,
            (resilience::AdaptiveAdmissionParams{.enabled = false,
                                                 .min_limit = 8,
                                                 .max_limit = 200,
                                                 .decrease_step = 4,
                                                 .increase_step = 2,
                                                 .high_latency = 250ms,
                                                 .window = 1s,
                                                 .mode = Mode::shadow}));
}

TEST(ConfigLocalProtection, ReadsEveryBrownoutKey) {
  const LoadResult r = brownout(
      "enabled = false\ntrigger_inflight_percent = 100\nrecover_inflight_percent = 0\n"
      "core_routes = [\"billing\"]\nmode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.brownout,
            (resilience::BrownoutParams{.enabled = false,
                                        .trigger_inflight_percent = 100,
                                        .recover_inflight_percent = 0,
                                        .core_routes = {"billing"},
                                        .mode = Mode::shadow}));
}

TEST(ConfigLocalProtection, ReadsEveryRouteQueueKey) {
  const LoadResult r = route_queue(
      "default_cap = 100\nglobal_cap = 300\ncaps = { app = 200, billing = 1 }\n"
      "retry_after = \"3s\"\nmode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.route_queue,
            (resilience::RouteQueueParams{.default_cap = 100,
                                          .global_cap = 300,
                                          .caps = {{"app", 200}, {"billing", 1}},
                                          .retry_after = 3s,
                                          .mode = Mode::shadow}));
}

TEST(ConfigLocalProtection, ReadsEveryWatchdogKey) {
  const LoadResult r = load(
      "[server]\ndrain_timeout = \"10s\"\n[resilience.watchdog]\nenabled = true\n"
      "check_interval = \"2s\"\npoll_stall_timeout = \"3s\"\ntimeout_error_rate_percent = 100\n"
      "min_requests_per_window = 1\nmin_timeout_spread = 1\n"
      "overload_inflight_percent = 50\n"
      "unhealthy_consecutive_windows = 1000000\ndrain_grace = \"10s\"\n"
      "restart_cooldown = \"1h\"\n"
      "restart_command = [\"/usr/bin/systemctl\", \"restart\", \"\", \"restart\"]\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.watchdog,
            (resilience::WatchdogParams{
                .enabled = true,
                .check_interval = 2s,
                .poll_stall_timeout = 3s,
                .timeout_error_rate_percent = 100,
                .min_requests_per_window = 1,
                .min_timeout_spread = 1,
                .overload_inflight_percent = 50,
                .unhealthy_consecutive_windows = 1'000'000,
                .drain_grace = 10s,
                .restart_cooldown = 1h,
                .restart_command = {"/usr/bin/systemctl", "restart", "", "restart"}}));
}

TEST(ConfigLocalProtection, ReadsTheInlineTableFormsAndTheCapsAsASubTable) {
  const LoadResult r = load(
      "[resilience]\nadaptive_admission = { min_limit = 10 }\nbrownout = { enabled = false }\n"
      "watchdog = { restart_cooldown = \"5m\" }\n[resilience.route_queue.caps]\napp = 7\n"
      "\"billing\" = 9\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.adaptive_admission.min_limit, 10u);
  EXPECT_FALSE(r.config->resilience.brownout.enabled);
  EXPECT_EQ(r.config->resilience.watchdog.restart_cooldown, 5min);
  EXPECT_EQ(r.config->resilience.route_queue.caps, (Caps{{"app", 7}, {"billing", 9}}));
}

TEST(ConfigLocalProtection, KnowsTheUpstreamsWrittenAfterTheResilienceTable) {
  const LoadResult r = load(
      "[resilience.brownout]\ncore_routes = [\"app\"]\n[resilience.route_queue]\n"
      "caps = { app = 5 }\n\n" +
      std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.brownout.core_routes, Strings{"app"});
  EXPECT_EQ(r.config->resilience.route_queue.caps, (Caps{{"app", 5}}));
}

TEST(ConfigLocalProtection, ReadsTheHighestLimitsAndCaps) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 2147483646\n[resilience.adaptive_admission]\n"
      "min_limit = 2147483646\nmax_limit = 2147483646\ndecrease_step = 2147483646\n"
      "[resilience.route_queue]\ndefault_cap = 2147483646\nglobal_cap = 2147483646\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.adaptive_admission.max_limit, 2'147'483'646u);
  EXPECT_EQ(r.config->resilience.route_queue.global_cap, 2'147'483'646u);
}

// --- every rule of one table refused, with the message the operator sees -------------------

using KeyError = testing::TableKeyError;

class ConfigLocalProtectionErrors : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigLocalProtectionErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(load_in(GetParam().header, GetParam().body)), GetParam().expected);
}

constexpr std::string_view kAdaptive = "[resilience.adaptive_admission]";
constexpr std::string_view kBrownout = "[resilience.brownout]";
constexpr std::string_view kRouteQueue = "[resilience.route_queue]";
constexpr std::string_view kWatchdog = "[resilience.watchdog]";

INSTANTIATE_TEST_SUITE_P(
    AdaptiveAdmission, ConfigLocalProtectionErrors,
    ::testing::Values(
        KeyError{"enabled_not_a_boolean", kAdaptive, "enabled = \"no\"",
                 "test.toml:2:1: error: resilience.adaptive_admission.enabled: expected a "
                 "boolean, got a string (\"no\"); e.g. enabled = false"},
        KeyError{"zero_min_limit", kAdaptive, "min_limit = 0",
                 "test.toml:2:1: error: resilience.adaptive_admission.min_limit: 0 is out of "
                 "range; use an integer from 1 to 2147483646"},
        KeyError{"negative_max_limit", kAdaptive, "max_limit = -1",
                 "test.toml:2:1: error: resilience.adaptive_admission.max_limit: -1 is out of "
                 "range; use an integer from 0 to 2147483646"},
        KeyError{"max_limit_above_admission", kAdaptive, "max_limit = 2147483647",
                 "test.toml:2:1: error: resilience.adaptive_admission.max_limit: 2147483647 is "
                 "out of range; use an integer from 0 to 2147483646"},
        KeyError{"zero_decrease_step", kAdaptive, "decrease_step = 0",
                 "test.toml:2:1: error: resilience.adaptive_admission.decrease_step: 0 is out of "
                 "range; use an integer from 1 to 2147483646"},
        KeyError{"zero_increase_step", kAdaptive, "increase_step = 0",
                 "test.toml:2:1: error: resilience.adaptive_admission.increase_step: 0 is out of "
                 "range; use an integer from 1 to 2147483646"},
        KeyError{"quoted_step", kAdaptive, "increase_step = \"16\"",
                 "test.toml:2:1: error: resilience.adaptive_admission.increase_step: expected "
                 "an integer, got a string (\"16\"); e.g. increase_step = 16"},
        KeyError{"zero_high_latency", kAdaptive, "high_latency = \"0ms\"",
                 "test.toml:2:1: error: resilience.adaptive_admission.high_latency: must be "
                 "greater than 0; e.g. high_latency = \"500ms\""},
        KeyError{"high_latency_without_unit", kAdaptive, "high_latency = 500",
                 "test.toml:2:1: error: resilience.adaptive_admission.high_latency: expected a "
                 "duration string with a unit, got an integer (500); write high_latency = "
                 "\"500s\" or \"500ms\""},
        KeyError{"zero_window", kAdaptive, "window = \"0\"",
                 "test.toml:2:1: error: resilience.adaptive_admission.window: must be greater "
                 "than 0; e.g. window = \"100ms\""},
        KeyError{"unknown_mode", kAdaptive, "mode = \"log\"",
                 "test.toml:2:1: error: resilience.adaptive_admission.mode: unknown value "
                 "\"log\"; expected enforce or shadow"},
        KeyError{"max_below_min", kAdaptive, "max_limit = 32",
                 "test.toml:2:1: error: resilience.adaptive_admission.max_limit: max_limit = 32 "
                 "is below min_limit = 64 (the default): the adaptive ceiling moves between the "
                 "two; set max_limit to at least 64, or lower min_limit"},
        KeyError{"typo", kAdaptive, "min_limt = 8",
                 "test.toml:2:1: error: resilience.adaptive_admission.min_limt: unknown key "
                 "'min_limt' in [resilience.adaptive_admission] (did you mean 'min_limit'?); "
                 "expected one of: enabled, min_limit, max_limit, decrease_step, increase_step, "
                 "high_latency, window, mode"},
        KeyError{"seed_milliseconds", kAdaptive, "high_latency_ms = 500",
                 "test.toml:2:1: error: resilience.adaptive_admission.high_latency_ms: unknown "
                 "key 'high_latency_ms' in [resilience.adaptive_admission]; 'high_latency_ms' "
                 "belongs in [resilience.adaptive_admission], as high_latency (a duration: "
                 "high_latency = \"500ms\")"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Brownout, ConfigLocalProtectionErrors,
    ::testing::Values(
        KeyError{"percent_above_100", kBrownout, "trigger_inflight_percent = 101",
                 "test.toml:2:1: error: resilience.brownout.trigger_inflight_percent: 101 is out "
                 "of range; use an integer from 0 to 100"},
        KeyError{"negative_percent", kBrownout, "recover_inflight_percent = -5",
                 "test.toml:2:1: error: resilience.brownout.recover_inflight_percent: -5 is out "
                 "of range; use an integer from 0 to 100"},
        KeyError{"recover_equal_to_trigger", kBrownout,
                 "trigger_inflight_percent = 90\nrecover_inflight_percent = 90",
                 "test.toml:3:1: error: resilience.brownout.recover_inflight_percent: "
                 "recover_inflight_percent = 90 is not below trigger_inflight_percent = 90: "
                 "brownout starts when the adaptive in-flight count reaches the trigger's share "
                 "of the ceiling and ends at or below recover's, and the gap between them keeps "
                 "it from flapping; set recover_inflight_percent below 90, e.g. "
                 "recover_inflight_percent = 60, or set trigger_inflight_percent above 90"},
        KeyError{"trigger_below_the_default_recover", kBrownout, "trigger_inflight_percent = 50",
                 "test.toml:2:1: error: resilience.brownout.trigger_inflight_percent: "
                 "recover_inflight_percent = 60 (the default) is not below "
                 "trigger_inflight_percent = 50: brownout starts when the adaptive in-flight "
                 "count reaches the trigger's share of the ceiling and ends at or below "
                 "recover's, and the gap between them keeps it from flapping; set "
                 "recover_inflight_percent below 50, e.g. recover_inflight_percent = 33, or set "
                 "trigger_inflight_percent above 60"},
        KeyError{"zero_trigger", kBrownout,
                 "trigger_inflight_percent = 0\nrecover_inflight_percent = 0",
                 "test.toml:3:1: error: resilience.brownout.recover_inflight_percent: "
                 "recover_inflight_percent = 0 is not below trigger_inflight_percent = 0: "
                 "brownout starts when the adaptive in-flight count reaches the trigger's share "
                 "of the ceiling and ends at or below recover's, and the gap between them keeps "
                 "it from flapping; set trigger_inflight_percent above 0"},
        KeyError{"undefined_core_route", kBrownout, "core_routes = [\"app\", \"biling\"]",
                 "test.toml:2:23: error: resilience.brownout.core_routes[1]: upstream 'biling' "
                 "is not defined (did you mean 'billing'?); core_routes takes the names of "
                 "[[upstreams]] entries: fix the name, or define [[upstreams]] name = "
                 "\"biling\""},
        KeyError{"duplicate_core_route", kBrownout, "core_routes = [\"app\", \"app\"]",
                 "test.toml:2:23: error: resilience.brownout.core_routes[1]: duplicate \"app\" "
                 "(same as resilience.brownout.core_routes[0]); remove one of them"},
        KeyError{"empty_core_route", kBrownout, "core_routes = [\"\"]",
                 "test.toml:2:16: error: resilience.brownout.core_routes[0]: an upstream name "
                 "cannot be empty; write the name of an [[upstreams]] entry, e.g. \"app\""},
        KeyError{"core_routes_not_an_array", kBrownout, "core_routes = \"app\"",
                 "test.toml:2:1: error: resilience.brownout.core_routes: expected an array of "
                 "strings, got a string (\"app\"); e.g. core_routes = [\"app\"]"},
        KeyError{"typo", kBrownout, "trigger_percent = 90",
                 "test.toml:2:1: error: resilience.brownout.trigger_percent: unknown key "
                 "'trigger_percent' in [resilience.brownout]; expected one of: enabled, "
                 "trigger_inflight_percent, recover_inflight_percent, core_routes, mode"},
        KeyError{"key_of_another_table", kBrownout, "default_cap = 5",
                 "test.toml:2:1: error: resilience.brownout.default_cap: unknown key "
                 "'default_cap' in [resilience.brownout]; 'default_cap' belongs in "
                 "[resilience.route_queue]"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    RouteQueue, ConfigLocalProtectionErrors,
    ::testing::Values(
        KeyError{"zero_default_cap", kRouteQueue, "default_cap = 0",
                 "test.toml:2:1: error: resilience.route_queue.default_cap: 0 is out of range; "
                 "use an integer from 1 to 2147483646"},
        KeyError{"zero_global_cap", kRouteQueue, "global_cap = 0",
                 "test.toml:2:1: error: resilience.route_queue.global_cap: 0 is out of range; "
                 "use an integer from 1 to 2147483646"},
        KeyError{"zero_route_cap", kRouteQueue, "caps = { app = 0 }",
                 "test.toml:2:16: error: resilience.route_queue.caps.app: 0 is out of range; use "
                 "an integer from 1 to 2147483646"},
        KeyError{"quoted_route_cap", kRouteQueue, "caps = { app = \"10\" }",
                 "test.toml:2:16: error: resilience.route_queue.caps.app: expected an integer "
                 "from 1 to 2147483646, got a string (\"10\"); e.g. app = 256"},
        KeyError{"undefined_cap_name", kRouteQueue, "caps = { biling = 10 }",
                 "test.toml:2:10: error: resilience.route_queue.caps.biling: upstream 'biling' "
                 "is not defined (did you mean 'billing'?); caps takes the names of "
                 "[[upstreams]] entries: fix the name, or define [[upstreams]] name = "
                 "\"biling\""},
        KeyError{"caps_not_a_table", kRouteQueue, "caps = 10",
                 "test.toml:2:1: error: resilience.route_queue.caps: expected a table of "
                 "upstream names and caps, got an integer (10); e.g. caps = { app = 256 }"},
        KeyError{"zero_retry_after", kRouteQueue, "retry_after = \"0s\"",
                 "test.toml:2:1: error: resilience.route_queue.retry_after: must be greater than "
                 "0; e.g. retry_after = \"1s\""},
        KeyError{"seed_seconds", kRouteQueue, "shed_retry_after_seconds = 1",
                 "test.toml:2:1: error: resilience.route_queue.shed_retry_after_seconds: unknown "
                 "key 'shed_retry_after_seconds' in [resilience.route_queue]; "
                 "'shed_retry_after_seconds' belongs in [resilience.route_queue], as retry_after "
                 "(a duration: retry_after = \"1s\")"},
        KeyError{"no_enabled_key", kRouteQueue, "enabled = false",
                 "test.toml:2:1: error: resilience.route_queue.enabled: unknown key 'enabled' in "
                 "[resilience.route_queue]; expected one of: default_cap, global_cap, caps, "
                 "retry_after, mode"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Watchdog, ConfigLocalProtectionErrors,
    ::testing::Values(
        KeyError{"zero_check_interval", kWatchdog, "check_interval = \"0s\"",
                 "test.toml:2:1: error: resilience.watchdog.check_interval: must be greater than "
                 "0; e.g. check_interval = \"1s\""},
        KeyError{"zero_poll_stall_timeout", kWatchdog, "poll_stall_timeout = \"0\"",
                 "test.toml:2:1: error: resilience.watchdog.poll_stall_timeout: must be greater "
                 "than 0; e.g. poll_stall_timeout = \"5s\""},
        KeyError{"zero_drain_grace", kWatchdog, "drain_grace = \"0s\"",
                 "test.toml:2:1: error: resilience.watchdog.drain_grace: must be greater than 0; "
                 "e.g. drain_grace = \"8s\""},
        KeyError{"zero_restart_cooldown", kWatchdog, "restart_cooldown = \"0s\"",
                 "test.toml:2:1: error: resilience.watchdog.restart_cooldown: must be greater "
                 "than 0; e.g. restart_cooldown = \"2m\""},
        KeyError{"percent_above_100", kWatchdog, "overload_inflight_percent = 101",
                 "test.toml:2:1: error: resilience.watchdog.overload_inflight_percent: 101 is "
                 "out of range; use an integer from 0 to 100"},
        KeyError{"rate_above_100", kWatchdog, "timeout_error_rate_percent = 150",
                 "test.toml:2:1: error: resilience.watchdog.timeout_error_rate_percent: 150 is "
                 "out of range; use an integer from 0 to 100"},
        KeyError{"zero_min_requests", kWatchdog, "min_requests_per_window = 0",
                 "test.toml:2:1: error: resilience.watchdog.min_requests_per_window: 0 is out of "
                 "range; use an integer from 1 to 1000000"},
        KeyError{"zero_spread", kWatchdog, "min_timeout_spread = 0",
                 "test.toml:2:1: error: resilience.watchdog.min_timeout_spread: 0 is out of "
                 "range; use an integer from 1 to 1000000"},
        KeyError{"zero_windows", kWatchdog, "unhealthy_consecutive_windows = 0",
                 "test.toml:2:1: error: resilience.watchdog.unhealthy_consecutive_windows: 0 is "
                 "out of range; use an integer from 1 to 1000000"},
        KeyError{"relative_command", kWatchdog, "restart_command = [\"systemctl\", \"restart\"]",
                 "test.toml:2:20: error: resilience.watchdog.restart_command[0]: \"systemctl\" "
                 "is not an absolute path: restart_command is run without a shell and without a "
                 "PATH search; write the program's full path (`command -v systemctl` prints "
                 "it), e.g. \"/usr/bin/systemctl\""},
        KeyError{"relative_command_with_a_directory", kWatchdog,
                 "restart_command = [\"bin/restart\"]",
                 "test.toml:2:20: error: resilience.watchdog.restart_command[0]: \"bin/restart\" "
                 "is not an absolute path: restart_command is run without a shell and without a "
                 "PATH search; write the program's full path, e.g. \"/usr/bin/systemctl\""},
        KeyError{"empty_executable", kWatchdog, "restart_command = [\"\", \"restart\"]",
                 "test.toml:2:20: error: resilience.watchdog.restart_command[0]: the executable "
                 "path is empty; write the absolute path of the program to run, e.g. "
                 "restart_command = [\"/usr/bin/systemctl\", \"restart\", \"floodgate\"]"},
        KeyError{"nul_in_an_argument", kWatchdog,
                 "restart_command = [\"/usr/bin/kill\", \"-HUP\\u0000\"]",
                 "test.toml:2:37: error: resilience.watchdog.restart_command[1]: contains a NUL "
                 "character, which no program name or argument can hold; remove it"},
        KeyError{"argument_not_a_string", kWatchdog, "restart_command = [\"/usr/bin/kill\", 1]",
                 "test.toml:2:37: error: resilience.watchdog.restart_command[1]: expected a "
                 "string, got an integer (1); e.g. \"restart\""},
        KeyError{"command_as_a_string", kWatchdog,
                 "restart_command = \"/usr/bin/systemctl restart floodgate\"",
                 "test.toml:2:1: error: resilience.watchdog.restart_command: expected an array "
                 "of strings (the executable's absolute path, then its arguments; no shell), got "
                 "a string (\"/usr/bin/systemctl restart floodgate\"); e.g. restart_command = "
                 "[\"/usr/bin/systemctl\", \"restart\", \"floodgate\"]"},
        KeyError{"restart_hook", kWatchdog, "restart_hook = \"/usr/local/bin/fg-restart --now\"",
                 "test.toml:2:1: error: resilience.watchdog.restart_hook: restart_hook is not "
                 "accepted: a hook is a command line, which "
                 "would need a shell; write the command as restart_command, the executable's "
                 "absolute path and then its arguments, run without a shell: restart_command = "
                 "[\"/usr/local/bin/fg-restart\", \"--now\"]"},
        KeyError{"restart_hook_of_a_shell_line", kWatchdog,
                 "restart_hook = \"systemctl restart floodgate && echo done\"",
                 "test.toml:2:1: error: resilience.watchdog.restart_hook: restart_hook is not "
                 "accepted: a hook is a command line, which "
                 "would need a shell; write the command as restart_command, the executable's "
                 "absolute path and then its arguments, run without a shell: restart_command = "
                 "[\"/usr/bin/systemctl\", \"restart\", \"floodgate\"]"},
        KeyError{"empty_restart_hook", kWatchdog, "restart_hook = \"\"",
                 "test.toml:2:1: error: resilience.watchdog.restart_hook: restart_hook is not "
                 "accepted: a hook is a command line, which "
                 "would need a shell; write the command as restart_command, the executable's "
                 "absolute path and then its arguments, run without a shell: restart_command = "
                 "[\"/usr/bin/systemctl\", \"restart\", \"floodgate\"]"},
        KeyError{"typo", kWatchdog, "restart_comand = []",
                 "test.toml:2:1: error: resilience.watchdog.restart_comand: unknown key "
                 "'restart_comand' in [resilience.watchdog] (did you mean 'restart_command'?); "
                 "expected one of: enabled, check_interval, poll_stall_timeout, "
                 "timeout_error_rate_percent, min_requests_per_window, min_timeout_spread, "
                 "overload_inflight_percent, unhealthy_consecutive_windows, drain_grace, "
                 "restart_cooldown, restart_command"},
        KeyError{"no_mode", kWatchdog, "mode = \"shadow\"",
                 "test.toml:2:1: error: resilience.watchdog.mode: unknown key 'mode' in "
                 "[resilience.watchdog]; 'mode' belongs in [resilience.inflight], "
                 "[resilience.memory_guard], [resilience.protocol], "
                 "[resilience.circuit_breaker], [resilience.adaptive_admission], "
                 "[resilience.brownout], [resilience.route_queue] or a "
                 "[[resilience.scoped_rate_limits]] rule ([resilience.quota] has enforcement "
                 "instead)"}),
    [](const auto& info) { return std::string(info.param.name); });

class ConfigLocalProtectionSeedKeys : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigLocalProtectionSeedKeys, SayWhatToWriteInstead) {
  EXPECT_EQ(only(load_in(GetParam().header, GetParam().body)), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Watchdog, ConfigLocalProtectionSeedKeys,
    ::testing::Values(
        KeyError{"check_interval_ms", kWatchdog, "check_interval_ms = 1000",
                 "test.toml:2:1: error: resilience.watchdog.check_interval_ms: unknown key "
                 "'check_interval_ms' in [resilience.watchdog]; 'check_interval_ms' belongs in "
                 "[resilience.watchdog], as check_interval (a duration: check_interval = "
                 "\"1s\")"},
        KeyError{"poll_stall_timeout_ms", kWatchdog, "poll_stall_timeout_ms = 5000",
                 "test.toml:2:1: error: resilience.watchdog.poll_stall_timeout_ms: unknown key "
                 "'poll_stall_timeout_ms' in [resilience.watchdog]; 'poll_stall_timeout_ms' "
                 "belongs in [resilience.watchdog], as poll_stall_timeout (a duration: "
                 "poll_stall_timeout = \"5s\")"},
        KeyError{"drain_grace_ms", kWatchdog, "drain_grace_ms = 8000",
                 "test.toml:2:1: error: resilience.watchdog.drain_grace_ms: unknown key "
                 "'drain_grace_ms' in [resilience.watchdog]; 'drain_grace_ms' belongs in "
                 "[resilience.watchdog], as drain_grace (a duration: drain_grace = \"8s\")"},
        KeyError{"restart_cooldown_ms", kWatchdog, "restart_cooldown_ms = 120000",
                 "test.toml:2:1: error: resilience.watchdog.restart_cooldown_ms: unknown key "
                 "'restart_cooldown_ms' in [resilience.watchdog]; 'restart_cooldown_ms' belongs "
                 "in [resilience.watchdog], as restart_cooldown (a duration: restart_cooldown = "
                 "\"120s\")"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigLocalProtection, ValidatesEveryKeyOfADisabledTable) {
  EXPECT_EQ(only(adaptive("enabled = false\nwindow = \"0s\"")),
            "test.toml:3:1: error: resilience.adaptive_admission.window: must be greater than "
            "0; e.g. window = \"100ms\"");
  EXPECT_EQ(only(adaptive("enabled = false\nmin_limit = 100\nmax_limit = 50")),
            "test.toml:4:1: error: resilience.adaptive_admission.max_limit: max_limit = 50 is "
            "below min_limit = 100: the adaptive ceiling moves between the two; set max_limit to "
            "at least 100, or lower min_limit");
  EXPECT_EQ(only(brownout("enabled = false\ncore_routes = [\"nope\"]")),
            "test.toml:3:16: error: resilience.brownout.core_routes[0]: upstream 'nope' is not "
            "defined; core_routes takes the names of [[upstreams]] entries: fix the name, or "
            "define [[upstreams]] name = \"nope\"");
  EXPECT_EQ(only(brownout("enabled = false\nrecover_inflight_percent = 95")),
            "test.toml:3:1: error: resilience.brownout.recover_inflight_percent: "
            "recover_inflight_percent = 95 is not below trigger_inflight_percent = 90 (the "
            "default): brownout starts when the adaptive in-flight count reaches the trigger's "
            "share of the ceiling and ends at or below recover's, and the gap between them keeps "
            "it from flapping; set recover_inflight_percent below 90, e.g. "
            "recover_inflight_percent = 60, or set trigger_inflight_percent above 95");
  EXPECT_EQ(only(watchdog("enabled = false\nrestart_command = [\"restart.sh\"]")),
            "test.toml:3:20: error: resilience.watchdog.restart_command[0]: \"restart.sh\" is not "
            "an absolute path: restart_command is run without a shell and without a PATH "
            "search; write the program's full path (`command -v restart.sh` prints it), e.g. "
            "\"/usr/bin/systemctl\"");
  EXPECT_EQ(only(watchdog("restart_hook = \"/bin/true\"")),
            "test.toml:2:1: error: resilience.watchdog.restart_hook: restart_hook is not "
            "accepted: a hook is a command line, which would need a "
            "shell; write the command as restart_command, the executable's absolute path and "
            "then its arguments, run without a shell: restart_command = [\"/bin/true\"]");
}

TEST(ConfigLocalProtection, AcceptsAnEmptyRestartCommandAsReportOnly) {
  const LoadResult r = load(
      "[server]\ndrain_timeout = \"5s\"\n[resilience.watchdog]\nenabled = true\n"
      "restart_command = []\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigLocalProtection, ReportsAnUndefinedNameAndABadCapOfOneEntryBoth) {
  const LoadResult r = route_queue("caps = { nope = 0 }");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(dump(r),
            "test.toml:2:10: error: resilience.route_queue.caps.nope: upstream 'nope' is not "
            "defined; caps takes the names of [[upstreams]] entries: fix the name, or define "
            "[[upstreams]] name = \"nope\"\n"
            "test.toml:2:17: error: resilience.route_queue.caps.nope: 0 is out of range; use an "
            "integer from 1 to 2147483646\n");
}

TEST(ConfigLocalProtection, SaysToQuoteACapNameWithADotWrittenAsADottedKey) {
  const LoadResult r = load(
      "[resilience.route_queue]\ncaps = { api.v2 = 30 }\n\n"
      "[[upstreams]]\nname = \"api.v2\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[[routes]]\nupstream = \"api.v2\"\n");
  EXPECT_EQ(only(r),
            "test.toml:2:10: error: resilience.route_queue.caps.api: upstream names with a '.' "
            "must be quoted: unquoted, \"api.v2\" is read as nested keys; write \"api.v2\" = 30");
}

TEST(ConfigLocalProtection, ReportsEveryProblemOfEveryTableInOnePass) {
  const LoadResult r = load(
      "[resilience.adaptive_admission]\nmin_limit = 0\nwindow = \"0s\"\n"
      "[resilience.brownout]\ncore_routes = [\"nope\"]\n[resilience.route_queue]\n"
      "global_cap = 0\n[resilience.watchdog]\nrestart_hook = \"x\"\nextra = 1\n\n" +
      std::string(kMinimal));
  EXPECT_FALSE(r.ok());
  std::vector<std::string> paths;
  for (const Diagnostic& d : r.diagnostics) paths.push_back(d.path);
  EXPECT_EQ(
      paths,
      (Strings{"resilience.adaptive_admission.min_limit", "resilience.adaptive_admission.window",
               "resilience.brownout.core_routes[0]", "resilience.route_queue.global_cap",
               "resilience.watchdog.restart_hook", "resilience.watchdog.extra"}))
      << dump(r);
}

// --- adaptive_admission against the front in-flight cap ------------------------------------

TEST(ConfigLocalProtection, RefusesAMaxLimitAboveANumericFrontCap) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 500\n[resilience.adaptive_admission]\n"
      "max_limit = 600\n\n" +
      std::string(kTwoPools));
  EXPECT_EQ(only(r),
            "test.toml:4:1: error: resilience.adaptive_admission.max_limit: max_limit = 600 is "
            "above the front in-flight cap, resilience.inflight.max_inflight = 500, past which "
            "no request is admitted, so the adaptive ceiling could never reach it; set "
            "max_limit to at most 500, or to 0 to follow the cap, or raise max_inflight to at "
            "least 600");
  const LoadResult equal = load(
      "[resilience.inflight]\nmax_inflight = 600\n[resilience.adaptive_admission]\n"
      "max_limit = 600\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(equal.ok()) << dump(equal);
  EXPECT_TRUE(equal.diagnostics.empty()) << dump(equal);
}

TEST(ConfigLocalProtection, RefusesAMaxLimitAboveTheFrontCapOfTheEnvironment) {
  const LoadResult r =
      load("[resilience.adaptive_admission]\nmax_limit = 600\n\n" + std::string(kTwoPools),
           max_inflight_env("100"));
  EXPECT_EQ(only(r),
            "test.toml:2:1: error: resilience.adaptive_admission.max_limit: max_limit = 600 is "
            "above the front in-flight cap, FLOODGATE_MAX_INFLIGHT = 100, past which no request "
            "is admitted, so the adaptive ceiling could never reach it; set max_limit to at most "
            "100, or to 0 to follow the cap, or raise FLOODGATE_MAX_INFLIGHT to at least 600");
}

TEST(ConfigLocalProtection, RefusesAMaxLimitAboveAnAutoCapWithAFixedReactorCount) {
  const LoadResult r =
      load("[server]\nworkers = 4\n[resilience.adaptive_admission]\nmax_limit = 300\n\n" +
           std::string(kTwoPools));
  EXPECT_EQ(only(r),
            "test.toml:4:1: error: resilience.adaptive_admission.max_limit: max_limit = 300 is "
            "above the front in-flight cap, resilience.inflight.max_inflight = \"auto\" = "
            "max(32, 4 x (4 reactors + 64 of pool capacity)) = 272, past which no request is "
            "admitted, so the adaptive ceiling could never reach it; set max_limit to at most "
            "272, or to 0 to follow the cap, or set max_inflight to a number of at least 300");
}

TEST(ConfigLocalProtection, WarnsOfAMaxLimitAboveWhatAutoIsOnSmallHosts) {
  const LoadResult r = adaptive("max_limit = 300");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.adaptive_admission.max_limit: max_limit = 300 is "
            "above the front in-flight cap on a host with fewer than 11 cores: "
            "resilience.inflight.max_inflight = \"auto\" = max(32, 4 x (reactors + 64 of pool "
            "capacity)), with one reactor per core (server.workers = 0), is 260 on one core; "
            "where the cap is lower, the adaptive ceiling stops at the cap; set max_limit to at "
            "most 260, or to 0 to follow the cap, or set server.workers, or set max_inflight to "
            "a number, so that this is checked here");
  EXPECT_TRUE(adaptive("max_limit = 260").diagnostics.empty());
}

TEST(ConfigLocalProtection, ChecksASetMaxLimitAgainstTheCapWhenDisabledToo) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 100\n[resilience.adaptive_admission]\n"
      "enabled = false\nmin_limit = 10\nmax_limit = 200\n\n" +
      std::string(kTwoPools));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.adaptive_admission.max_limit");
}

TEST(ConfigLocalProtection, AcceptsAMaxLimitWithNoFrontCap) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 0\n[resilience.adaptive_admission]\n"
      "max_limit = 5000\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigLocalProtection, WarnsThatASmallFrontCapFixesTheDerivedCeiling) {
  const LoadResult r =
      load("[resilience.inflight]\nmax_inflight = 10\n\n" + std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.inflight.max_inflight: min_limit = 64 (the "
            "default) is above the front in-flight cap, resilience.inflight.max_inflight = 10, "
            "which max_limit = 0 (the default) follows, so min_limit is taken as 10 and the "
            "adaptive ceiling stays at 10: adaptive admission never moves it; lower min_limit "
            "below 10, or raise max_inflight above 64, or set enabled = false");
}

TEST(ConfigLocalProtection, WarnsOfTheSmallCapAtMinLimitWhenItIsWritten) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 1\n[resilience.adaptive_admission]\n"
      "min_limit = 8\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:4:1: warning: resilience.adaptive_admission.min_limit: min_limit = 8 is "
            "above the front in-flight cap, resilience.inflight.max_inflight = 1, which "
            "max_limit = 0 (the default) follows, so min_limit is taken as 1 and the adaptive "
            "ceiling stays at 1: adaptive admission never moves it; raise max_inflight above 8, "
            "or set enabled = false");
}

TEST(ConfigLocalProtection, WarnsOfASmallCapFromTheEnvironmentWithoutAPosition) {
  const LoadResult r = load(kMinimal, max_inflight_env("16"));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml: warning: resilience.adaptive_admission.min_limit: min_limit = 64 (the "
            "default) is above the front in-flight cap, FLOODGATE_MAX_INFLIGHT = 16, which "
            "max_limit = 0 (the default) follows, so min_limit is taken as 16 and the adaptive "
            "ceiling stays at 16: adaptive admission never moves it; lower min_limit below 16, "
            "or raise FLOODGATE_MAX_INFLIGHT above 64, or set enabled = false");
}

TEST(ConfigLocalProtection, WarnsOfASmallAutoCapWithAFixedReactorCount) {
  const LoadResult r = load(
      "[server]\nworkers = 2\n[resilience.adaptive_admission]\n\n[[upstreams]]\nname = \"app\"\n"
      "servers = [\"127.0.0.1:9000\"]\n[upstreams.resilience]\nmax_active_requests = 8\n"
      "[[routes]]\nupstream = \"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:3:1: warning: resilience.adaptive_admission.min_limit: min_limit = 64 "
            "(the default) is above the front in-flight cap, resilience.inflight.max_inflight = "
            "\"auto\" = max(32, 4 x (2 reactors + 8 of pool capacity)) = 40, which max_limit = "
            "0 (the default) follows, so min_limit is taken as 40 and the adaptive ceiling stays "
            "at 40: adaptive admission never moves it; lower min_limit below 40, or set "
            "max_inflight to a number above 64, or set enabled = false");
}

// The issue's case: workers = 2 and a pool capped at 1 make "auto" 32, below the default
// min_limit of 64. Nothing of adaptive admission or of the front cap is written, so nothing is
// said: a warning about defaults would come at every check, start and reload, and point at
// nothing in the file. The start and reload log the ceiling's range instead.
TEST(ConfigLocalProtection,
     SaysNothingOfTheDefaultMinLimitWhenNeitherTheCeilingNorTheCapIsWritten) {
  for (const char* pool :
       {"[upstreams.resilience]\nmax_active_requests = 1\n",
        "[upstreams.resilience]\nmax_active_requests = 8\n", "keepalive = 0\n"}) {
    for (const char* workers : {"1", "2", "4"}) {
      const LoadResult r =
          load(std::string("[server]\nworkers = ") + workers +
               "\n\n[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n" + pool +
               "[[routes]]\nupstream = \"app\"\n");
      ASSERT_TRUE(r.ok()) << dump(r);
      EXPECT_TRUE(r.diagnostics.empty()) << workers << " workers, " << pool << dump(r);
    }
  }
}

TEST(ConfigLocalProtection, WarnsOfTheDefaultMinLimitWhenTheFileWritesTheAutoCap) {
  const LoadResult r = load(
      "[server]\nworkers = 2\n[resilience.inflight]\nmax_inflight = \"auto\"\n\n"
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[upstreams.resilience]\nmax_active_requests = 1\n[[routes]]\nupstream = \"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].line, 4) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.inflight.max_inflight");
}

TEST(ConfigLocalProtection, WarnsOfAWrittenMinLimitAboveWhatAutoIsOnSmallHosts) {
  const std::string pool =
      "\n[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[upstreams.resilience]\nmax_active_requests = 8\n[[routes]]\nupstream = \"app\"\n";
  const LoadResult r = load("[resilience.adaptive_admission]\nmin_limit = 50\n" + pool);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.adaptive_admission.min_limit: min_limit = 50 is "
            "above the front in-flight cap on a host with fewer than 5 cores: "
            "resilience.inflight.max_inflight = \"auto\" = max(32, 4 x (reactors + 8 of pool "
            "capacity)), which max_limit = 0 (the default) follows, is 36 on one core "
            "(server.workers = 0 runs one reactor per core); there min_limit is taken as the cap "
            "and the adaptive ceiling stays at it; lower min_limit below 36, or set "
            "server.workers, or set max_inflight to a number, so that this is checked here");
  const LoadResult defaults = load(pool);  // the default min_limit: the build says it, per host
  ASSERT_TRUE(defaults.ok()) << dump(defaults);
  EXPECT_TRUE(defaults.diagnostics.empty()) << dump(defaults);
}

TEST(ConfigLocalProtection, WarnsThatNoFrontCapLeavesNoDerivedCeiling) {
  const LoadResult r = load("[resilience.inflight]\nmax_inflight = 0\n\n" + std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.inflight.max_inflight: max_limit = 0 (the "
            "default) follows the front in-flight cap, but resilience.inflight.max_inflight = 0 "
            "(no cap), so adaptive admission has no ceiling and refuses nothing; set max_limit, "
            "e.g. max_limit = 1024, or set enabled = false");
}

TEST(ConfigLocalProtection, DoesNotWarnOfTheDerivedCeilingWhenDisabled) {
  const LoadResult r = load(
      "[resilience.inflight]\nmax_inflight = 10\n[resilience.adaptive_admission]\n"
      "enabled = false\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigLocalProtection, DoesNotCompareWithACapThatHasAnErrorOfItsOwn) {
  EXPECT_EQ(only(load("[resilience.inflight]\nmax_inflight = \"lots\"\n"
                      "[resilience.adaptive_admission]\nmax_limit = 5000\n\n" +
                      std::string(kTwoPools))),
            "test.toml:2:1: error: resilience.inflight.max_inflight: unknown value \"lots\"; use "
            "\"auto\" or an integer from 0 (no cap) to 2147483646");
  EXPECT_EQ(only(load("[server]\nworkers = 4\n[resilience.adaptive_admission]\nmax_limit = "
                      "5000\n\n[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "keepalive = -1\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:9:1: error: upstreams[0].keepalive: -1 is out of range; use an integer "
            "from 0 to 100000");
  const LoadResult env =
      load("[resilience.adaptive_admission]\nmax_limit = 5000\n\n" + std::string(kTwoPools),
           max_inflight_env("x"));
  ASSERT_EQ(env.diagnostics.size(), 1u) << dump(env);
  EXPECT_EQ(env.diagnostics[0].path, "resilience.inflight.max_inflight");
}

// --- warnings of one table --------------------------------------------------------------------

TEST(ConfigLocalProtection, WarnsThatCoreRoutesListingEveryUpstreamShedNothing) {
  EXPECT_EQ(only(brownout("core_routes = [\"billing\", \"app\"]")),
            "test.toml:2:1: warning: resilience.brownout.core_routes: core_routes lists every "
            "upstream, so brownout never sheds a request; list only the upstreams that must keep "
            "being served under pressure, or set enabled = false");
  EXPECT_TRUE(
      brownout("enabled = false\ncore_routes = [\"billing\", \"app\"]").diagnostics.empty());
  EXPECT_TRUE(brownout("core_routes = [\"app\"]").diagnostics.empty());
}

TEST(ConfigLocalProtection, WarnsOfRouteCapsAboveTheGlobalCap) {
  const LoadResult r =
      route_queue("default_cap = 600\nglobal_cap = 500\ncaps = { app = 100, billing = 501 }");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:2:1: warning: resilience.route_queue.default_cap: default_cap = 600 is "
            "above global_cap = 500, so it is never reached: the global cap, shared by every "
            "upstream, refuses first; lower it to at most 500, or raise global_cap\n"
            "test.toml:4:31: warning: resilience.route_queue.caps.billing: the cap of upstream "
            "'billing', 501, is above global_cap = 500, so it is never reached: the global cap, "
            "shared by every upstream, refuses first; lower it to at most 500, or raise "
            "global_cap\n");
}

TEST(ConfigLocalProtection, WarnsThatAZeroPercentMakesEveryWatchdogCheckUnhealthy) {
  const LoadResult r = load(
      "[server]\ndrain_timeout = \"5s\"\n[resilience.watchdog]\nenabled = true\n"
      "timeout_error_rate_percent = 0\noverload_inflight_percent = 0\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:5:1: warning: resilience.watchdog.timeout_error_rate_percent: "
            "timeout_error_rate_percent = 0 makes every check in which min_timeout_spread "
            "backends had min_requests_per_window attempts each unhealthy, timeouts or not, so "
            "floodgate drains (and runs restart_command) after unhealthy_consecutive_windows "
            "checks whatever its health; use the share that means trouble, e.g. "
            "timeout_error_rate_percent = 60\n"
            "test.toml:6:1: warning: resilience.watchdog.overload_inflight_percent: "
            "overload_inflight_percent = 0 makes every check unhealthy (the in-flight count is "
            "always at least 0% of the ceiling), so floodgate drains (and runs restart_command) "
            "after unhealthy_consecutive_windows checks whatever its health; use the share that "
            "means trouble, e.g. overload_inflight_percent = 95\n");
  EXPECT_TRUE(watchdog("overload_inflight_percent = 0").diagnostics.empty());
}

// --- watchdog.drain_grace against server.drain_timeout --------------------------------------

TEST(ConfigLocalProtection, RefusesADrainGraceShorterThanTheDrainTimeoutWhenEnabled) {
  EXPECT_EQ(only(watchdog("enabled = true")),
            "test.toml:1:1: error: resilience.watchdog.drain_grace: drain_grace = \"8s\" (the "
            "default) is shorter than server.drain_timeout = \"30s\": with the watchdog enabled, "
            "the requests in flight when it drains must get at least the time a shutdown gives "
            "them before restart_command runs; set drain_grace = \"30s\" or more, or lower "
            "server.drain_timeout");
  EXPECT_EQ(only(watchdog("enabled = true\ndrain_grace = \"29s\"")),
            "test.toml:3:1: error: resilience.watchdog.drain_grace: drain_grace = \"29s\" is "
            "shorter than server.drain_timeout = \"30s\": with the watchdog enabled, the "
            "requests in flight when it drains must get at least the time a shutdown gives them "
            "before restart_command runs; set drain_grace = \"30s\" or more, or lower "
            "server.drain_timeout");
}

TEST(ConfigLocalProtection, AcceptsADrainGraceOfAtLeastTheDrainTimeout) {
  EXPECT_TRUE(watchdog("enabled = true\ndrain_grace = \"30s\"").ok());
  const LoadResult r =
      load("[server]\ndrain_timeout = \"0\"\n[resilience.watchdog]\nenabled = true\n\n" +
           std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_TRUE(watchdog("enabled = false\ndrain_grace = \"1s\"").diagnostics.empty());
}

TEST(ConfigLocalProtection, DoesNotCompareWithADrainTimeoutThatHasAnErrorOfItsOwn) {
  EXPECT_EQ(only(load("[server]\ndrain_timeout = \"1 minute\"\n[resilience.watchdog]\n"
                      "enabled = true\n\n" +
                      std::string(kTwoPools))),
            "test.toml:2:1: error: server.drain_timeout: \"1 minute\" is not a valid duration: "
            "unknown unit ' minute'; use ms, s, m or h");
}

// --- where a key written elsewhere belongs ---------------------------------------------------

TEST(ConfigLocalProtection, TellsWhichSubTableAKeyWrittenInTheResilienceTableBelongsIn) {
  EXPECT_EQ(only(load_in("[resilience]", "min_limit = 8")),
            "test.toml:2:1: error: resilience.min_limit: unknown key 'min_limit' in "
            "[resilience]; 'min_limit' belongs in [resilience.adaptive_admission]");
  EXPECT_EQ(only(load_in("[resilience]", "core_routes = []")),
            "test.toml:2:1: error: resilience.core_routes: unknown key 'core_routes' in "
            "[resilience]; 'core_routes' belongs in [resilience.brownout]");
  EXPECT_EQ(only(load_in("[resilience]", "global_cap = 8")),
            "test.toml:2:1: error: resilience.global_cap: unknown key 'global_cap' in "
            "[resilience]; 'global_cap' belongs in [resilience.route_queue]");
  EXPECT_EQ(only(load_in("[resilience]", "restart_command = []")),
            "test.toml:2:1: error: resilience.restart_command: unknown key 'restart_command' in "
            "[resilience]; 'restart_command' belongs in [resilience.watchdog]");
  EXPECT_EQ(only(load_in("[resilience]", "restart_hook = \"x\"")),
            "test.toml:2:1: error: resilience.restart_hook: unknown key 'restart_hook' in "
            "[resilience]; 'restart_hook' belongs in [resilience.watchdog], as restart_command "
            "(restart_hook itself is no longer accepted)");
}

TEST(ConfigLocalProtection, TellsThatTheTablesBelongInTheResilienceTable) {
  EXPECT_EQ(only(load_in("[server.watchdog]", "enabled = true")),
            "test.toml:1:1: error: server.watchdog: unknown key 'watchdog' in [server]; "
            "'watchdog' belongs in [resilience], as [resilience.watchdog]");
  EXPECT_EQ(only(load_in("[log]", "brownout = { enabled = true }")),
            "test.toml:2:1: error: log.brownout: unknown key 'brownout' in [log]; 'brownout' "
            "belongs in [resilience], as [resilience.brownout]");
}

TEST(ConfigLocalProtection, WarnsThatBrownoutNeverStartsWithoutAdaptiveAdmission) {
  const LoadResult r = load(
      "[resilience.adaptive_admission]\nenabled = false\n[resilience.brownout]\n"
      "core_routes = [\"app\"]\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(only(r),
            "test.toml:3:1: warning: resilience.brownout: brownout starts at "
            "trigger_inflight_percent of the adaptive ceiling, but "
            "[resilience.adaptive_admission] enabled = false, so there is no ceiling and "
            "brownout never starts; enable adaptive admission, or set enabled = false here");
}

TEST(ConfigLocalProtection, SaysNothingOfBrownoutWhenBothAreSwitchedOff) {
  const LoadResult r = load(
      "[resilience.adaptive_admission]\nenabled = false\n[resilience.brownout]\n"
      "enabled = false\n\n" +
      std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigLocalProtection, WarnsOfAPoolThatAdmitsMoreThanItsRouteCap) {
  const LoadResult r = load(
      "[resilience.route_queue]\ncaps = { app = 100 }\n\n[[upstreams]]\nname = \"app\"\n"
      "servers = [\"127.0.0.1:9000\"]\n[upstreams.resilience]\nmax_active_requests = 600\n"
      "[[upstreams]]\nname = \"big\"\nservers = [\"127.0.0.1:9001\"]\n"
      "[upstreams.resilience]\nmax_active_requests = 1000\n"
      "[[routes]]\nupstream = \"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].resilience.max_active_requests");
  EXPECT_EQ(r.diagnostics[0].line, 8);  // at the key the operator wrote, not the caps' table
  EXPECT_EQ(r.diagnostics[1].line, 13);
  EXPECT_NE(r.diagnostics[0].message.find("its route cap is 100 (resilience.route_queue.caps.app)"),
            std::string::npos)
      << dump(r);
  EXPECT_NE(r.diagnostics[1].message.find("its route cap is 512 (resilience.route_queue."
                                          "default_cap), which refuses the rest first with 503 "
                                          "route_cap; set [resilience.route_queue] caps.big = "
                                          "1000 or more, or lower max_active_requests"),
            std::string::npos)
      << dump(r);
}

TEST(ConfigLocalProtection, PutsTheRouteCapWarningAtMaxActiveRequestsWhenTheCapIsTheDefault) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[upstreams.resilience]\nmax_active_requests = 600\n[[routes]]\nupstream = \"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].line, 5) << dump(r);
  EXPECT_EQ(r.diagnostics[0].column, 1);
}

}  // namespace
}  // namespace floodgate::config
