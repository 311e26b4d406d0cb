// [resilience.circuit_breaker], [resilience.retry_budget] and [resilience.hedging]: the
// configuration of issue 13's failure handling. The defaults, every key, every validation rule
// with the message the operator sees, the names of upstreams that the budget and the hedging
// allowlist refer to, unknown keys, and the warnings.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using resilience::WhenAllOpen;
using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;
using Strings = std::vector<std::string>;
using Ratios = std::map<std::string, uint32_t, std::less<>>;

// Two pools after the tables under test: "app" (response_timeout 30s, the default) and
// "billing" (response_timeout 2s).
constexpr std::string_view kTwoPools = R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]

[[upstreams]]
name = "billing"
servers = ["127.0.0.1:9001"]
response_timeout = "2s"

[[routes]]
upstream = "app"
)";

// `header` on line 1 ("[resilience.hedging]"), `body` from line 2 on, then the two pools.
LoadResult load_in(std::string_view header, std::string_view body) {
  return testing::load_table(header, body, kTwoPools);
}
LoadResult breaker(std::string_view body) {
  return load_in("[resilience.circuit_breaker]", body);
}
LoadResult budget(std::string_view body) {
  return load_in("[resilience.retry_budget]", body);
}
LoadResult hedging(std::string_view body) {
  return load_in("[resilience.hedging]", body);
}

// --- defaults and every key ------------------------------------------------------------------

TEST(ConfigFailureHandling, DefaultsToTheIssuesValuesWhenTheTablesAreAbsent) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  const resilience::Params& p = r.config->resilience;
  EXPECT_TRUE(p.circuit_breaker.enabled);
  EXPECT_EQ(p.circuit_breaker.failure_threshold, 5u);
  EXPECT_EQ(p.circuit_breaker.min_requests, 10u);
  EXPECT_EQ(p.circuit_breaker.failure_rate_percent, 50u);
  EXPECT_EQ(p.circuit_breaker.window, 10s);
  EXPECT_EQ(p.circuit_breaker.open, 30s);
  EXPECT_EQ(p.circuit_breaker.half_open_max_probes, 1u);
  EXPECT_EQ(p.circuit_breaker.failure_statuses, (std::vector<uint16_t>{}));
  EXPECT_EQ(p.circuit_breaker.when_all_open, WhenAllOpen::least_recently_failed);
  EXPECT_EQ(p.circuit_breaker.mode, resilience::Mode::enforce);
  EXPECT_TRUE(p.retry_budget.enabled);
  EXPECT_EQ(p.retry_budget.ratio_percent, 10u);
  EXPECT_EQ(p.retry_budget.window, 10s);
  EXPECT_EQ(p.retry_budget.min_retries, 3u);
  EXPECT_TRUE(p.retry_budget.per_route_ratio_percent.empty());
  EXPECT_FALSE(p.hedging.enabled);
  EXPECT_EQ(p.hedging.delay, 100ms);
  EXPECT_EQ(p.hedging.safe_methods, (Strings{"GET", "HEAD"}));
  EXPECT_EQ(p.hedging.route_allowlist, Strings{});
  EXPECT_EQ(p, resilience::Params{});
}

TEST(ConfigFailureHandling, KeepsTheDefaultsForEmptyTables) {
  const LoadResult r =
      load("[resilience.circuit_breaker]\n[resilience.retry_budget]\n[resilience.hedging]\n" +
           std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience, resilience::Params{});
}

TEST(ConfigFailureHandling, ReadsEveryCircuitBreakerKey) {
  const LoadResult r = breaker(
      "enabled = false\nfailure_threshold = 3\nmin_requests = 1\nfailure_rate_percent = 0\n"
      "window = \"30s\"\nopen = \"1m\"\nhalf_open_max_probes = 4\n"
      "failure_statuses = [500, 503]\nwhen_all_open = \"reject\"\n"
      "mode = \"shadow\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.circuit_breaker,
            (resilience::CircuitBreakerParams{.enabled = false,
                                              .failure_threshold = 3,
                                              .min_requests = 1,
                                              .failure_rate_percent = 0,
                                              .window = 30s,
                                              .open = 1min,
                                              .half_open_max_probes = 4,
                                              .failure_statuses = {500, 503},
                                              .when_all_open = WhenAllOpen::reject,
                                              .mode = resilience::Mode::shadow}));
}

TEST(ConfigFailureHandling, ReadsEveryRetryBudgetKey) {
  const LoadResult r = budget(
      "enabled = false\nratio_percent = 0\nwindow = \"30s\"\nmin_retries = 0\n"
      "per_route_ratio_percent = { app = 100, billing = 0 }");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(
      r.config->resilience.retry_budget,
      (resilience::RetryBudgetParams{.enabled = false,
                                     .ratio_percent = 0,
                                     .window = 30s,
                                     .min_retries = 0,
                                     .per_route_ratio_percent = {{"app", 100}, {"billing", 0}}}));
}

TEST(ConfigFailureHandling, ReadsEveryHedgingKey) {
  const LoadResult r = hedging(
      "enabled = true\ndelay = \"50ms\"\nsafe_methods = [\"GET\", \"HEAD\", \"OPTIONS\"]\n"
      "route_allowlist = [\"app\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.hedging,
            (resilience::HedgingParams{.enabled = true,
                                       .delay = 50ms,
                                       .safe_methods = {"GET", "HEAD", "OPTIONS"},
                                       .route_allowlist = {"app"}}));
}

TEST(ConfigFailureHandling, ReadsThePerRouteRatiosAsASubTableToo) {
  const LoadResult r =
      load("[resilience.retry_budget.per_route_ratio_percent]\napp = 25\n\"billing\" = 50\n\n" +
           std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.retry_budget.per_route_ratio_percent,
            (Ratios{{"app", 25}, {"billing", 50}}));
}

TEST(ConfigFailureHandling, KnowsTheUpstreamsWrittenAfterTheResilienceTable) {
  const LoadResult r = load(
      "[resilience.retry_budget]\nper_route_ratio_percent = { app = 20 }\n"
      "[resilience.hedging]\nroute_allowlist = [\"app\"]\n\n" +
      std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.hedging.route_allowlist, Strings{"app"});
}

TEST(ConfigFailureHandling, ReadsTheHighestCountsAndTheEdgePercentages) {
  const LoadResult r = breaker(
      "failure_threshold = 1000000\nhalf_open_max_probes = 1000000\n"
      "min_requests = 1000000\nfailure_rate_percent = 100\nfailure_statuses = [500, 599]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.circuit_breaker.failure_threshold, 1'000'000u);
  EXPECT_EQ(r.config->resilience.circuit_breaker.half_open_max_probes, 1'000'000u);
  EXPECT_EQ(r.config->resilience.circuit_breaker.min_requests, 1'000'000u);
  EXPECT_EQ(r.config->resilience.circuit_breaker.failure_rate_percent, 100u);
  const LoadResult full = budget("ratio_percent = 100");
  ASSERT_TRUE(full.ok()) << dump(full);
  EXPECT_EQ(full.config->resilience.retry_budget.ratio_percent, 100u);
}

TEST(ConfigFailureHandling, ReadsAnEmptyFailureStatusListAsTransportFailuresOnly) {
  const LoadResult r = breaker("failure_statuses = []");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_TRUE(r.config->resilience.circuit_breaker.failure_statuses.empty());
}

TEST(ConfigFailureHandling, ReadsTheInlineTableForms) {
  const LoadResult r = load(
      "[resilience]\ncircuit_breaker = { failure_threshold = 7 }\n"
      "retry_budget = { ratio_percent = 20 }\nhedging = { enabled = true }\n" +
      std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.circuit_breaker.failure_threshold, 7u);
  EXPECT_EQ(r.config->resilience.retry_budget.ratio_percent, 20u);
  EXPECT_TRUE(r.config->resilience.hedging.enabled);
}

// --- every rule refused, with the message the operator sees ----------------------------------

using KeyError = testing::TableKeyError;

class ConfigFailureHandlingErrors : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigFailureHandlingErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(load_in(GetParam().header, GetParam().body)), GetParam().expected);
}

constexpr std::string_view kBreaker = "[resilience.circuit_breaker]";
constexpr std::string_view kBudget = "[resilience.retry_budget]";
constexpr std::string_view kHedging = "[resilience.hedging]";

INSTANTIATE_TEST_SUITE_P(
    CircuitBreaker, ConfigFailureHandlingErrors,
    ::testing::Values(
        KeyError{"enabled_not_a_boolean", kBreaker, "enabled = \"yes\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.enabled: expected a boolean, "
                 "got a string (\"yes\"); e.g. enabled = false"},
        KeyError{"zero_threshold", kBreaker, "failure_threshold = 0",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_threshold: 0 is out of "
                 "range; use an integer from 1 to 1000000"},
        KeyError{"threshold_above_the_bound", kBreaker, "failure_threshold = 1000001",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_threshold: 1000001 is "
                 "out of range; use an integer from 1 to 1000000"},
        KeyError{"quoted_threshold", kBreaker, "failure_threshold = \"3\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_threshold: expected "
                 "an integer, got a string (\"3\"); e.g. failure_threshold = 5"},
        KeyError{"zero_open", kBreaker, "open = \"0s\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.open: must be greater than 0; "
                 "e.g. open = \"30s\""},
        KeyError{"open_without_unit", kBreaker, "open = 30",
                 "test.toml:2:1: error: resilience.circuit_breaker.open: expected a duration "
                 "string with a unit, got an integer (30); write open = \"30s\" or \"30ms\""},
        KeyError{"zero_probes", kBreaker, "half_open_max_probes = 0",
                 "test.toml:2:1: error: resilience.circuit_breaker.half_open_max_probes: 0 is "
                 "out of range; use an integer from 1 to 1000000"},
        KeyError{"statuses_not_an_array", kBreaker, "failure_statuses = 503",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_statuses: expected an "
                 "array of HTTP status codes, got an integer (503); e.g. failure_statuses = "
                 "[503]"},
        KeyError{"quoted_status", kBreaker, "failure_statuses = [\"503\"]",
                 "test.toml:2:21: error: resilience.circuit_breaker.failure_statuses[0]: "
                 "expected an HTTP status code, got a string (\"503\"); e.g. 503"},
        KeyError{"not_a_status", kBreaker, "failure_statuses = [502, 600]",
                 "test.toml:2:26: error: resilience.circuit_breaker.failure_statuses[1]: 600 is "
                 "not an HTTP status code; use a server error status from 500 to 599, e.g. 503"},
        KeyError{"status_below_100", kBreaker, "failure_statuses = [99]",
                 "test.toml:2:21: error: resilience.circuit_breaker.failure_statuses[0]: 99 is "
                 "not an HTTP status code; use a server error status from 500 to 599, e.g. 503"},
        KeyError{"client_error_status", kBreaker, "failure_statuses = [429]",
                 "test.toml:2:21: error: resilience.circuit_breaker.failure_statuses[0]: 429 is "
                 "not a server error: only a 5xx status can count as a backend failure (a 4xx "
                 "answers a fault of the request, never of the backend, and 1xx to 3xx are no "
                 "errors at all); use a status from 500 to 599"},
        KeyError{"success_status", kBreaker, "failure_statuses = [200]",
                 "test.toml:2:21: error: resilience.circuit_breaker.failure_statuses[0]: 200 is "
                 "not a server error: only a 5xx status can count as a backend failure (a 4xx "
                 "answers a fault of the request, never of the backend, and 1xx to 3xx are no "
                 "errors at all); use a status from 500 to 599"},
        KeyError{"duplicate_status", kBreaker, "failure_statuses = [503, 502, 503]",
                 "test.toml:2:31: error: resilience.circuit_breaker.failure_statuses[2]: "
                 "duplicate status 503 (same as resilience.circuit_breaker.failure_statuses[0]); "
                 "remove one of them"},
        KeyError{"unknown_policy", kBreaker, "when_all_open = \"fail_open\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.when_all_open: unknown value "
                 "\"fail_open\"; expected reject or least_recently_failed"},
        KeyError{"policy_not_a_string", kBreaker, "when_all_open = true",
                 "test.toml:2:1: error: resilience.circuit_breaker.when_all_open: expected a "
                 "string, got a boolean (true); e.g. when_all_open = \"least_recently_failed\""},
        KeyError{"zero_min_requests", kBreaker, "min_requests = 0",
                 "test.toml:2:1: error: resilience.circuit_breaker.min_requests: 0 is out of "
                 "range; use an integer from 1 to 1000000"},
        KeyError{"rate_above_100", kBreaker, "failure_rate_percent = 101",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_rate_percent: 101 is "
                 "out of range; use an integer from 0 to 100"},
        KeyError{"zero_window", kBreaker, "window = \"0s\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.window: must be greater than "
                 "0; e.g. window = \"10s\""},
        KeyError{"typo", kBreaker, "failure_treshold = 3",
                 "test.toml:2:1: error: resilience.circuit_breaker.failure_treshold: unknown key "
                 "'failure_treshold' in [resilience.circuit_breaker] (did you mean "
                 "'failure_threshold'?); expected one of: enabled, failure_threshold, "
                 "min_requests, failure_rate_percent, window, open, half_open_max_probes, "
                 "failure_statuses, when_all_open, mode"},
        KeyError{"unknown_mode", kBreaker, "mode = \"dry_run\"",
                 "test.toml:2:1: error: resilience.circuit_breaker.mode: unknown value "
                 "\"dry_run\"; expected enforce or shadow"},
        KeyError{"seed_milliseconds", kBreaker, "open_ms = 30000",
                 "test.toml:2:1: error: resilience.circuit_breaker.open_ms: unknown key "
                 "'open_ms' in [resilience.circuit_breaker]; 'open_ms' belongs in "
                 "[resilience.circuit_breaker], as open (a duration: open = \"30s\")"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    RetryBudget, ConfigFailureHandlingErrors,
    ::testing::Values(
        KeyError{"percent_above_100", kBudget, "ratio_percent = 101",
                 "test.toml:2:1: error: resilience.retry_budget.ratio_percent: 101 is out of "
                 "range; use an integer from 0 to 100"},
        KeyError{"negative_percent", kBudget, "ratio_percent = -1",
                 "test.toml:2:1: error: resilience.retry_budget.ratio_percent: -1 is out of "
                 "range; use an integer from 0 to 100"},
        KeyError{"fractional_percent", kBudget, "ratio_percent = 10.5",
                 "test.toml:2:1: error: resilience.retry_budget.ratio_percent: expected an "
                 "integer, got a floating-point number; e.g. ratio_percent = 10"},
        KeyError{"zero_window", kBudget, "window = \"0ms\"",
                 "test.toml:2:1: error: resilience.retry_budget.window: must be greater than 0; "
                 "e.g. window = \"10s\""},
        KeyError{"window_not_a_duration", kBudget, "window = \"10 seconds\"",
                 "test.toml:2:1: error: resilience.retry_budget.window: \"10 seconds\" is not a "
                 "valid duration: unknown unit ' seconds'; use ms, s, m or h"},
        KeyError{"undefined_upstream", kBudget, "per_route_ratio_percent = { apq = 20 }",
                 "test.toml:2:29: error: resilience.retry_budget.per_route_ratio_percent.apq: "
                 "upstream 'apq' is not defined (did you mean 'app'?); per_route_ratio_percent "
                 "takes the names of [[upstreams]] entries: fix the name, or define "
                 "[[upstreams]] name = \"apq\""},
        KeyError{"undefined_upstream_without_a_match", kBudget,
                 "per_route_ratio_percent = { \"search.v2\" = 20 }",
                 "test.toml:2:29: error: resilience.retry_budget.per_route_ratio_percent."
                 "\"search.v2\": upstream 'search.v2' is not defined; per_route_ratio_percent "
                 "takes the names of [[upstreams]] entries: fix the name, or define "
                 "[[upstreams]] name = \"search.v2\""},
        KeyError{"route_percent_above_100", kBudget,
                 "per_route_ratio_percent = { app = 10, billing = 150 }",
                 "test.toml:2:49: error: resilience.retry_budget.per_route_ratio_percent.billing: "
                 "150 is out of range; use an integer from 0 to 100"},
        KeyError{"quoted_route_percent", kBudget, "per_route_ratio_percent = { app = \"20%\" }",
                 "test.toml:2:35: error: resilience.retry_budget.per_route_ratio_percent.app: "
                 "expected an integer from 0 to 100, got a string (\"20%\"); e.g. app = 20"},
        KeyError{"ratios_not_a_table", kBudget, "per_route_ratio_percent = 20",
                 "test.toml:2:1: error: resilience.retry_budget.per_route_ratio_percent: expected "
                 "a table of upstream names and percentages, got an integer (20); e.g. "
                 "per_route_ratio_percent = { app = 20 }"},
        KeyError{"typo", kBudget, "ratio_precent = 10",
                 "test.toml:2:1: error: resilience.retry_budget.ratio_precent: unknown key "
                 "'ratio_precent' in [resilience.retry_budget] (did you mean 'ratio_percent'?); "
                 "expected one of: enabled, ratio_percent, window, min_retries, "
                 "per_route_ratio_percent"}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Hedging, ConfigFailureHandlingErrors,
    ::testing::Values(
        KeyError{"enabled_not_a_boolean", kHedging, "enabled = 1",
                 "test.toml:2:1: error: resilience.hedging.enabled: expected a boolean, got an "
                 "integer (1); e.g. enabled = true"},
        KeyError{"zero_delay", kHedging, "delay = \"0\"",
                 "test.toml:2:1: error: resilience.hedging.delay: must be greater than 0; e.g. "
                 "delay = \"100ms\""},
        KeyError{"seed_milliseconds", kHedging, "delay_ms = 100",
                 "test.toml:2:1: error: resilience.hedging.delay_ms: unknown key 'delay_ms' in "
                 "[resilience.hedging]; 'delay_ms' belongs in [resilience.hedging], as delay (a "
                 "duration: delay = \"100ms\")"},
        KeyError{"method_not_a_token", kHedging, "safe_methods = [\"GET\", \"GET HEAD\"]",
                 "test.toml:2:24: error: resilience.hedging.safe_methods[1]: \"GET HEAD\" is not "
                 "a method: a method is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 "
                 "section 5.6.2), e.g. \"GET\""},
        KeyError{"duplicate_method", kHedging, "safe_methods = [\"GET\", \"GET\"]",
                 "test.toml:2:24: error: resilience.hedging.safe_methods[1]: duplicate \"GET\" "
                 "(same as resilience.hedging.safe_methods[0]); remove one of them"},
        KeyError{"undefined_upstream", kHedging, "route_allowlist = [\"app\", \"biling\"]",
                 "test.toml:2:27: error: resilience.hedging.route_allowlist[1]: upstream "
                 "'biling' is not defined (did you mean 'billing'?); route_allowlist takes the "
                 "names of [[upstreams]] entries: fix the name, or define [[upstreams]] name = "
                 "\"biling\""},
        KeyError{"empty_upstream_name", kHedging, "route_allowlist = [\"\"]",
                 "test.toml:2:20: error: resilience.hedging.route_allowlist[0]: an upstream name "
                 "cannot be empty; write the name of an [[upstreams]] entry, e.g. \"app\""},
        KeyError{"duplicate_upstream", kHedging, "route_allowlist = [\"app\", \"app\"]",
                 "test.toml:2:27: error: resilience.hedging.route_allowlist[1]: duplicate "
                 "\"app\" (same as resilience.hedging.route_allowlist[0]); remove one of them"},
        KeyError{"allowlist_not_an_array", kHedging, "route_allowlist = \"app\"",
                 "test.toml:2:1: error: resilience.hedging.route_allowlist: expected an array of "
                 "strings, got a string (\"app\"); e.g. route_allowlist = [\"app\"]"},
        KeyError{"typo", kHedging, "safe_method = [\"GET\"]",
                 "test.toml:2:1: error: resilience.hedging.safe_method: unknown key "
                 "'safe_method' in [resilience.hedging] (did you mean 'safe_methods'?); expected "
                 "one of: enabled, delay, safe_methods, route_allowlist"},
        KeyError{"key_of_another_table", kHedging, "ratio_percent = 5",
                 "test.toml:2:1: error: resilience.hedging.ratio_percent: unknown key "
                 "'ratio_percent' in [resilience.hedging]; 'ratio_percent' belongs in "
                 "[resilience.retry_budget]"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigFailureHandling, ValidatesEveryKeyOfADisabledTable) {
  EXPECT_EQ(only(breaker("enabled = false\nfailure_threshold = 0")),
            "test.toml:3:1: error: resilience.circuit_breaker.failure_threshold: 0 is out of "
            "range; use an integer from 1 to 1000000");
  EXPECT_EQ(only(budget("enabled = false\nper_route_ratio_percent = { nope = 5 }")),
            "test.toml:3:29: error: resilience.retry_budget.per_route_ratio_percent.nope: "
            "upstream 'nope' is not defined; per_route_ratio_percent takes the names of "
            "[[upstreams]] entries: fix the name, or define [[upstreams]] name = \"nope\"");
  EXPECT_EQ(only(hedging("enabled = false\ndelay = \"0s\"")),
            "test.toml:3:1: error: resilience.hedging.delay: must be greater than 0; e.g. delay "
            "= \"100ms\"");
}

TEST(ConfigFailureHandling, ReportsAnUndefinedNameAndABadPercentageOfOneEntryBoth) {
  const LoadResult r = budget("per_route_ratio_percent = { nope = 101 }");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(dump(r),
            "test.toml:2:29: error: resilience.retry_budget.per_route_ratio_percent.nope: "
            "upstream 'nope' is not defined; per_route_ratio_percent takes the names of "
            "[[upstreams]] entries: fix the name, or define [[upstreams]] name = \"nope\"\n"
            "test.toml:2:36: error: resilience.retry_budget.per_route_ratio_percent.nope: 101 is "
            "out of range; use an integer from 0 to 100\n");
}

TEST(ConfigFailureHandling, ReadsAQuotedUpstreamNameWithADot) {
  const LoadResult r = load(
      "[resilience.retry_budget]\nper_route_ratio_percent = { \"api.v2\" = 20 }\n"
      "[resilience.hedging]\nroute_allowlist = [\"api.v2\"]\n\n"
      "[[upstreams]]\nname = \"api.v2\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[[routes]]\nupstream = \"api.v2\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.retry_budget.per_route_ratio_percent, (Ratios{{"api.v2", 20}}));
  EXPECT_EQ(r.config->resilience.hedging.route_allowlist, Strings{"api.v2"});
}

TEST(ConfigFailureHandling, SaysToQuoteAnUpstreamNameWithADotWrittenAsADottedKey) {
  const LoadResult r = load(
      "[resilience.retry_budget]\nper_route_ratio_percent = { api.v2 = 30 }\n\n"
      "[[upstreams]]\nname = \"api.v2\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[[routes]]\nupstream = \"api.v2\"\n");
  EXPECT_EQ(only(r),
            "test.toml:2:29: error: resilience.retry_budget.per_route_ratio_percent.api: "
            "upstream names with a '.' must be quoted: unquoted, \"api.v2\" is read as nested "
            "keys; write \"api.v2\" = 30");
}

TEST(ConfigFailureHandling, DoesNotReportAnUpstreamNameWithAnErrorOfItsOwnAgain) {
  const LoadResult r = load(
      "[resilience.hedging]\nroute_allowlist = [\"a b\"]\n"
      "[resilience.retry_budget]\nper_route_ratio_percent = { \"a b\" = 5 }\n\n"
      "[[upstreams]]\nname = \"a b\"\nservers = [\"127.0.0.1:9000\"]\n"
      "[[routes]]\nupstream = \"a b\"\n");
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: upstreams[0].name: \"a b\" is not a valid upstream name; use "
            "one or more letters, digits, '_', '.' or '-', e.g. \"app\"");
}

TEST(ConfigFailureHandling, ReportsEveryProblemOfEveryTableInOnePass) {
  const LoadResult r = load(
      "[resilience.circuit_breaker]\nhalf_open_max_probes = 0\nwhen_all_open = \"x\"\n"
      "[resilience.retry_budget]\nwindow = \"0s\"\n[resilience.hedging]\n"
      "route_allowlist = [\"nope\"]\nextra = 1\n\n" +
      std::string(kMinimal));
  EXPECT_FALSE(r.ok());
  std::vector<std::string> paths;
  for (const Diagnostic& d : r.diagnostics) paths.push_back(d.path);
  EXPECT_EQ(paths,
            (Strings{"resilience.circuit_breaker.half_open_max_probes",
                     "resilience.circuit_breaker.when_all_open", "resilience.retry_budget.window",
                     "resilience.hedging.route_allowlist[0]", "resilience.hedging.extra"}))
      << dump(r);
}

// --- where a key written elsewhere belongs ---------------------------------------------------

TEST(ConfigFailureHandling, TellsWhichSubTableAKeyWrittenInTheResilienceTableBelongsIn) {
  EXPECT_EQ(only(load_in("[resilience]", "failure_threshold = 3")),
            "test.toml:2:1: error: resilience.failure_threshold: unknown key 'failure_threshold' "
            "in [resilience]; 'failure_threshold' belongs in [resilience.circuit_breaker]");
  EXPECT_EQ(only(load_in("[resilience]", "ratio_percent = 10")),
            "test.toml:2:1: error: resilience.ratio_percent: unknown key 'ratio_percent' in "
            "[resilience]; 'ratio_percent' belongs in [resilience.retry_budget]");
  EXPECT_EQ(only(load_in("[resilience]", "route_allowlist = []")),
            "test.toml:2:1: error: resilience.route_allowlist: unknown key 'route_allowlist' in "
            "[resilience]; 'route_allowlist' belongs in [resilience.hedging], a "
            "[[resilience.scoped_rate_limits]] rule or a [[resilience.quota.policies]] entry");
}

TEST(ConfigFailureHandling, TellsThatTheTablesBelongInTheResilienceTable) {
  EXPECT_EQ(only(load_in("[server.circuit_breaker]", "enabled = true")),
            "test.toml:1:1: error: server.circuit_breaker: unknown key 'circuit_breaker' in "
            "[server]; 'circuit_breaker' belongs in [resilience], as "
            "[resilience.circuit_breaker]");
  EXPECT_EQ(only(load_in("[log]", "hedging = { enabled = true }")),
            "test.toml:2:1: error: log.hedging: unknown key 'hedging' in [log]; 'hedging' "
            "belongs in [resilience], as [resilience.hedging]");
}

TEST(ConfigFailureHandling, SuggestsTheClosestSubTableForATypo) {
  EXPECT_EQ(only(load_in("[resilience.retry_budgets]", "ratio_percent = 10")),
            "test.toml:1:1: error: resilience.retry_budgets: unknown table "
            "[resilience.retry_budgets] (did you mean 'retry_budget'?); [resilience] has the "
            "sub-tables inflight, memory_guard, protocol, circuit_breaker, retry_budget, "
            "hedging, adaptive_admission, brownout, route_queue, watchdog, "
            "scoped_rate_limits and quota");
}

// --- warnings ----------------------------------------------------------------------------------

TEST(ConfigFailureHandling, WarnsThatAHedgedPostOrPatchMayBeActedOnTwice) {
  const LoadResult r = hedging("safe_methods = [\"GET\", \"POST\", \"PATCH\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->resilience.hedging.safe_methods, (Strings{"GET", "POST", "PATCH"}));
  EXPECT_EQ(dump(r),
            "test.toml:2:24: warning: resilience.hedging.safe_methods[1]: \"POST\" is not "
            "idempotent (RFC 9110 section 9.2.2): a hedge sends the request a second time, to "
            "another backend, while the first attempt may still be processed, so both backends "
            "may act on it; list only methods that are safe to repeat, e.g. \"GET\" and "
            "\"HEAD\"\n"
            "test.toml:2:32: warning: resilience.hedging.safe_methods[2]: \"PATCH\" is not "
            "idempotent (RFC 9110 section 9.2.2): a hedge sends the request a second time, to "
            "another backend, while the first attempt may still be processed, so both backends "
            "may act on it; list only methods that are safe to repeat, e.g. \"GET\" and "
            "\"HEAD\"\n");
}

TEST(ConfigFailureHandling, WarnsThatAConnectIsNeverHedged) {
  EXPECT_EQ(only(hedging("safe_methods = [\"GET\", \"CONNECT\"]")),
            "test.toml:2:24: warning: resilience.hedging.safe_methods[1]: \"CONNECT\" is never "
            "hedged: it opens a tunnel, and only requests that are not tunnels are hedged; "
            "remove it");
}

TEST(ConfigFailureHandling, AcceptsIdempotentAndExtensionMethodsWithoutAWarning) {
  const LoadResult r =
      hedging("safe_methods = [\"GET\", \"HEAD\", \"OPTIONS\", \"PUT\", \"DELETE\", \"PROPFIND\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigFailureHandling, WarnsOfAMethodInTheWrongCase) {
  EXPECT_EQ(only(hedging("safe_methods = [\"get\"]")),
            "test.toml:2:17: warning: resilience.hedging.safe_methods[0]: \"get\" never matches: "
            "methods are case-sensitive (RFC 9110 section 9.1), and \"get\" is not \"GET\"; "
            "write \"GET\"");
}

TEST(ConfigFailureHandling, WarnsThatEnabledHedgingWithoutMethodsHedgesNothing) {
  EXPECT_EQ(only(hedging("enabled = true\nsafe_methods = []")),
            "test.toml:3:1: warning: resilience.hedging.safe_methods: enabled = true with "
            "safe_methods = []: no request is ever hedged; list the methods to hedge, e.g. "
            "safe_methods = [\"GET\", \"HEAD\"], or set enabled = false");
  EXPECT_TRUE(hedging("enabled = false\nsafe_methods = []").diagnostics.empty());
}

TEST(ConfigFailureHandling, WarnsOfADelayThatAPoolsResponseTimeoutEndsFirst) {
  EXPECT_EQ(only(hedging("enabled = true\ndelay = \"2s\"")),
            "test.toml:3:1: warning: resilience.hedging.delay: delay = \"2s\" is not shorter "
            "than the response_timeout of upstream 'billing' (\"2s\"), so no request to it is "
            "ever hedged: the primary attempt times out first; set delay below that "
            "response_timeout");
  EXPECT_EQ(only(hedging("enabled = true\ndelay = \"1m\"")),
            "test.toml:3:1: warning: resilience.hedging.delay: delay = \"1m\" is not shorter "
            "than the response_timeout of upstreams 'app' (\"30s\") and 'billing' (\"2s\"), so "
            "no request to them is ever hedged: the primary attempt times out first; set delay "
            "below those response_timeouts");
  EXPECT_EQ(only(hedging("enabled = true\ndelay = \"5s\"\nroute_allowlist = [\"billing\"]")),
            "test.toml:3:1: warning: resilience.hedging.delay: delay = \"5s\" is not shorter "
            "than the response_timeout of upstream 'billing' (\"2s\"), so no request to it is "
            "ever hedged: the primary attempt times out first; set delay below that "
            "response_timeout, or remove the upstream from route_allowlist");
}

TEST(ConfigFailureHandling, DoesNotWarnOfTheDelayForPoolsOutsideTheAllowlistOrWhenDisabled) {
  const LoadResult listed = hedging("enabled = true\ndelay = \"5s\"\nroute_allowlist = [\"app\"]");
  ASSERT_TRUE(listed.ok()) << dump(listed);
  EXPECT_TRUE(listed.diagnostics.empty()) << dump(listed);
  const LoadResult disabled = hedging("enabled = false\ndelay = \"5s\"");
  ASSERT_TRUE(disabled.ok()) << dump(disabled);
  EXPECT_TRUE(disabled.diagnostics.empty()) << dump(disabled);
}

TEST(ConfigFailureHandling, DoesNotWarnOfTheDelayAgainstAResponseTimeoutWithAnErrorOfItsOwn) {
  const LoadResult r = load(
      "[resilience.hedging]\nenabled = true\n\n[[upstreams]]\nname = \"app\"\n"
      "servers = [\"127.0.0.1:9000\"]\nresponse_timeout = \"0s\"\n[[routes]]\nupstream = "
      "\"app\"\n");
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: upstreams[0].response_timeout: must be greater than 0; e.g. "
            "response_timeout = \"30s\"");
}

}  // namespace
}  // namespace floodgate::config
