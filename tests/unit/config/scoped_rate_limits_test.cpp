// [[resilience.scoped_rate_limits]]: the configuration of issue 15's scoped rate limits. The
// defaults the loader fills in, every key, every
// request-key source, every validation rule with the message the operator sees, the tiers, the
// upstream names route_allowlist refers to, unknown keys, the warnings, and missing_key with the
// note `floodgate check` prints about it.
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
using resilience::KeySource;
using resilience::MissingKey;
using resilience::Mode;
using resilience::OnTableFull;
using resilience::RateScope;
using resilience::RateTier;
using resilience::ScopedRateLimitParams;
using testing::dump;
using testing::load;
using testing::only;
using Kind = KeySource::Kind;

using testing::kTwoPools;  // "app" and "billing", after the tables under test

constexpr std::string_view kRule = "[[resilience.scoped_rate_limits]]";

// One rule: its header on line 1, `body` from line 2 on, then the two pools.
LoadResult rule(std::string_view body) {
  return testing::load_table(kRule, body, kTwoPools);
}

// A valid client rule on lines 2..5; `extra` starts on line 6.
std::string client_rule(std::string_view extra = "") {
  return "name = \"r\"\nscope = \"client\"\nrequests_per_sec = 10\nburst = 20\n" +
         std::string(extra);
}

// A valid tenant rule on lines 2..6; `extra` starts on line 7.
std::string tenant_rule(std::string_view extra = "") {
  return "name = \"r\"\nscope = \"tenant\"\nkey = \"header:x-tenant-id\"\n"
         "requests_per_sec = 10\nburst = 20\n" +
         std::string(extra);
}

// The one rule a valid document holds.
ScopedRateLimitParams only_rule(const LoadResult& r) {
  if (!r.ok() || r.config->resilience.scoped_rate_limits.size() != 1) {
    ADD_FAILURE() << "expected one valid rule:\n" << dump(r);
    return {};
  }
  return r.config->resilience.scoped_rate_limits[0];
}

// --- defaults and every key ------------------------------------------------------------------

TEST(ConfigScopedRateLimits, HasNoRulesWhenTheArrayIsAbsent) {
  const LoadResult r = load(testing::kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.config->resilience.scoped_rate_limits.empty());
  EXPECT_TRUE(r.config->server.trusted_proxies.empty());
}

TEST(ConfigScopedRateLimits, FillsTheDefaultsOfTheOptionalKeys) {
  const LoadResult r = rule(client_rule());
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(only_rule(r), (ScopedRateLimitParams{.name = "r",
                                                 .scope = RateScope::client,
                                                 .key = {.kind = Kind::peer_ip},
                                                 .requests_per_sec = 10,
                                                 .burst = 20,
                                                 .route_allowlist = {},
                                                 .idle_ttl = 300s,
                                                 .max_keys = 1024,
                                                 .on_table_full = OnTableFull::overflow_bucket,
                                                 .mode = Mode::enforce,
                                                 .tier_key = {},
                                                 .tiers = {}}));
}

TEST(ConfigScopedRateLimits, DefaultsTheKeyOfAClientRuleToThePeerAddress) {
  EXPECT_EQ(only_rule(rule(client_rule())).key, KeySource{.kind = Kind::peer_ip});
}

TEST(ConfigScopedRateLimits, DefaultsTheKeyOfATokenRuleToTheBearerToken) {
  const LoadResult r = rule("name = \"t\"\nscope = \"token\"\nrequests_per_sec = 1\nburst = 1");
  EXPECT_EQ(only_rule(r).key, KeySource{.kind = Kind::bearer_token});
}

TEST(ConfigScopedRateLimits, GivesARouteRuleNoKey) {
  const LoadResult r = rule("name = \"t\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1");
  EXPECT_EQ(only_rule(r).key, KeySource{});
}

TEST(ConfigScopedRateLimits, KeepsAWrittenKeyOverTheScopesDefault) {
  EXPECT_EQ(only_rule(rule(client_rule("key = \"cookie:visitor\""))).key,
            (KeySource{.kind = Kind::cookie, .name = "visitor"}));
  const LoadResult token = rule(
      "name = \"t\"\nscope = \"token\"\nkey = \"header:x-api-key\"\nrequests_per_sec = 1\n"
      "burst = 1");
  EXPECT_EQ(only_rule(token).key, (KeySource{.kind = Kind::header, .name = "x-api-key"}));
}

TEST(ConfigScopedRateLimits, ReadsEveryKeyOfATenantRuleWithTiers) {
  const LoadResult r = rule(
      "name = \"tenant-api\"\nscope = \"tenant\"\nkey = \"header:x-tenant-id\"\n"
      "requests_per_sec = 50\nburst = 100\nroute_allowlist = [\"app\", \"billing\"]\n"
      "idle_ttl = \"10m\"\nmax_keys = 4096\non_table_full = \"fail_open\"\nmode = \"shadow\"\n"
      "tier_key = \"header:x-plan\"\n"
      "tiers = { free = { requests_per_sec = 100, burst = 100 }, pro = { requests_per_sec = "
      "1000, burst = 2000 } }");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(only_rule(r),
            (ScopedRateLimitParams{
                .name = "tenant-api",
                .scope = RateScope::tenant,
                .key = {.kind = Kind::header, .name = "x-tenant-id"},
                .requests_per_sec = 50,
                .burst = 100,
                .route_allowlist = {"app", "billing"},
                .idle_ttl = 10min,
                .max_keys = 4096,
                .on_table_full = OnTableFull::fail_open,
                .mode = Mode::shadow,
                .tier_key = {.kind = Kind::header, .name = "x-plan"},
                .tiers = {{"free", RateTier{100, 100}}, {"pro", RateTier{1000, 2000}}}}));
}

TEST(ConfigScopedRateLimits, KeepsTheRulesInFileOrder) {
  const LoadResult r = load(std::string(kRule) + "\n" + client_rule() + std::string(kRule) +
                            "\nname = \"a\"\nscope = \"route\"\nrequests_per_sec = 1\n"
                            "burst = 1\n\n" +
                            std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  const auto& rules = r.config->resilience.scoped_rate_limits;
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].name, "r");
  EXPECT_EQ(rules[1].name, "a");
}

TEST(ConfigScopedRateLimits, ReadsTheInlineArrayFormAndTiersAsASubTable) {
  const LoadResult inline_form = load(
      "[resilience]\nscoped_rate_limits = [{ name = \"a\", scope = \"route\", "
      "requests_per_sec = 1, burst = 2 }]\n\n" +
      std::string(kTwoPools));
  EXPECT_EQ(only_rule(inline_form).burst, 2u);
  const LoadResult sub_table =
      rule(tenant_rule("tier_key = \"header:x-plan\"\n[resilience.scoped_rate_limits.tiers.gold]\n"
                       "requests_per_sec = 7\nburst = 8"));
  EXPECT_EQ(only_rule(sub_table).tiers,
            (std::map<std::string, RateTier, std::less<>>{{"gold", RateTier{7, 8}}}));
}

TEST(ConfigScopedRateLimits, AcceptsTheLowestAndHighestRates) {
  const LoadResult low = rule("name = \"r\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1");
  EXPECT_EQ(only_rule(low).requests_per_sec, 1u);
  const LoadResult high =
      rule("name = \"r\"\nscope = \"route\"\nrequests_per_sec = 10000000\nburst = 10000000");
  EXPECT_EQ(only_rule(high).requests_per_sec, 10'000'000u);
  EXPECT_EQ(only_rule(high).burst, 10'000'000u);
}

TEST(ConfigScopedRateLimits, AcceptsAShadowRuleWithoutAWarning) {
  const LoadResult r = rule(client_rule("mode = \"shadow\""));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->resilience.scoped_rate_limits[0].mode, Mode::shadow);
}

TEST(ConfigScopedRateLimits, KnowsTheUpstreamsWrittenAfterTheRules) {
  EXPECT_EQ(only_rule(rule(client_rule("route_allowlist = [\"billing\"]"))).route_allowlist,
            std::vector<std::string>{"billing"});
}

// --- request-key sources ---------------------------------------------------------------------

struct SourceCase {
  std::string_view text;
  KeySource expected;
};

void PrintTo(const SourceCase& c, std::ostream* os) {
  *os << c.text;
}

class ConfigKeySources : public ::testing::TestWithParam<SourceCase> {};

TEST_P(ConfigKeySources, AreReadFromTheirTextForm) {
  const LoadResult r = rule(client_rule("key = \"" + std::string(GetParam().text) + "\""));
  EXPECT_EQ(only_rule(r).key, GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    EveryForm, ConfigKeySources,
    ::testing::Values(SourceCase{"header:x-tenant-id", {Kind::header, "x-tenant-id"}},
                      SourceCase{"header:X-Tenant-ID", {Kind::header, "x-tenant-id"}},
                      SourceCase{"header:x_odd!token~", {Kind::header, "x_odd!token~"}},
                      SourceCase{"cookie:Session", {Kind::cookie, "Session"}},
                      SourceCase{"query:api_key", {Kind::query, "api_key"}},
                      SourceCase{"query:Page.Size", {Kind::query, "Page.Size"}},
                      SourceCase{"path", {Kind::path, ""}},
                      SourceCase{"authority", {Kind::authority, ""}},
                      SourceCase{"method", {Kind::method, ""}}, SourceCase{"cid", {Kind::cid, ""}},
                      SourceCase{"sticky-cid", {Kind::cid, ""}},
                      SourceCase{"peer_ip", {Kind::peer_ip, ""}},
                      SourceCase{"client_ip", {Kind::client_ip, ""}},
                      SourceCase{"bearer_token", {Kind::bearer_token, ""}}),
    [](const auto& info) {
      std::string name;
      for (const char c : info.param.text) {
        const bool alnum =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        name += alnum ? c : '_';
      }
      return name;
    });

// --- every rule refused, with the message the operator sees ---------------------------------

struct RuleError {
  std::string name;
  std::string body;      // from line 2
  std::string expected;  // the one diagnostic, formatted
};

void PrintTo(const RuleError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigScopedRateLimitErrors : public ::testing::TestWithParam<RuleError> {};

TEST_P(ConfigScopedRateLimitErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(rule(GetParam().body)), GetParam().expected);
}

constexpr std::string_view kForms =
    "write one of header:<name>, cookie:<name>, query:<name>, path, authority, method, cid, "
    "sticky-cid, peer_ip, client_ip or bearer_token";

std::string key_error(std::string_view message) {
  return "test.toml:6:1: error: resilience.scoped_rate_limits[0].key: key = " +
         std::string(message);
}

INSTANTIATE_TEST_SUITE_P(
    KeySources, ConfigScopedRateLimitErrors,
    ::testing::Values(
        RuleError{"unknown", client_rule("key = \"remote_addr\""),
                  key_error("\"remote_addr\" is not a request-key source; " + std::string(kForms))},
        RuleError{"empty", client_rule("key = \"\""),
                  key_error("\"\" is not a request-key source; " + std::string(kForms))},
        RuleError{"upper_case", client_rule("key = \"PEER_IP\""),
                  key_error("\"PEER_IP\" is not a request-key source (did you mean "
                            "'peer_ip'?); " +
                            std::string(kForms))},
        RuleError{"upper_case_prefix", client_rule("key = \"Header:X-Id\""),
                  key_error("\"Header:X-Id\" is not a request-key source (did you mean "
                            "'header:x-id'?); " +
                            std::string(kForms))},
        RuleError{"misspelt_prefix", client_rule("key = \"headers:x-id\""),
                  key_error("\"headers:x-id\" is not a request-key source (did you mean "
                            "'header:x-id'?); " +
                            std::string(kForms))},
        RuleError{"misspelt_bare", client_rule("key = \"sticky_cid\""),
                  key_error("\"sticky_cid\" is not a request-key source (did you mean "
                            "'sticky-cid'?); " +
                            std::string(kForms))},
        RuleError{"header_without_name", client_rule("key = \"header\""),
                  key_error("\"header\" needs a name: write \"header:<name>\", e.g. "
                            "\"header:x-tenant-id\"")},
        RuleError{"header_empty_name", client_rule("key = \"header:\""),
                  key_error("\"header:\" names no header; write its name after the colon, e.g. "
                            "\"header:x-tenant-id\"")},
        RuleError{"header_not_a_token", client_rule("key = \"header:x tenant\""),
                  key_error("\"header:x tenant\": \"x tenant\" is not a header name, which is a "
                            "token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 section "
                            "5.6.2); e.g. \"header:x-tenant-id\"")},
        RuleError{"cookie_empty_name", client_rule("key = \"cookie:\""),
                  key_error("\"cookie:\" names no cookie; write its name after the colon, e.g. "
                            "\"cookie:session\"")},
        RuleError{"cookie_with_separator", client_rule("key = \"cookie:a;b\""),
                  key_error("\"cookie:a;b\": a cookie name cannot hold ';', ',', '=', a space "
                            "or a control character, so this one would never match; e.g. "
                            "\"cookie:session\"")},
        RuleError{"query_empty_name", client_rule("key = \"query:\""),
                  key_error("\"query:\" names no query parameter; write its name after the "
                            "colon, e.g. \"query:api_key\"")},
        RuleError{"query_with_separator", client_rule("key = \"query:a=b\""),
                  key_error("\"query:a=b\": a query parameter name cannot hold '&', '=', '#', a "
                            "space or a control character, so this one would never match; e.g. "
                            "\"query:api_key\"")},
        RuleError{"not_a_string", client_rule("key = 5"),
                  "test.toml:6:1: error: resilience.scoped_rate_limits[0].key: expected a "
                  "string, got an integer (5); e.g. key = \"header:x-tenant-id\""},
        RuleError{"tier_key_unknown", tenant_rule("tier_key = \"plan\""),
                  "test.toml:7:1: error: resilience.scoped_rate_limits[0].tier_key: tier_key = "
                  "\"plan\" is not a request-key source; " +
                      std::string(kForms)}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    ScopeAndKey, ConfigScopedRateLimitErrors,
    ::testing::Values(
        RuleError{"scope_missing", "name = \"r\"\nrequests_per_sec = 1\nburst = 1",
                  "test.toml:1:1: error: resilience.scoped_rate_limits[0].scope: missing "
                  "required key 'scope'; add scope = \"client\" to this "
                  "[[resilience.scoped_rate_limits]]"},
        RuleError{"scope_unknown",
                  "name = \"r\"\nscope = \"user\"\nrequests_per_sec = 1\nburst = 1",
                  "test.toml:3:1: error: resilience.scoped_rate_limits[0].scope: unknown value "
                  "\"user\"; expected route, client, tenant or token"},
        RuleError{"route_with_key",
                  "name = \"r\"\nscope = \"route\"\nkey = \"path\"\nrequests_per_sec = 1\n"
                  "burst = 1",
                  "test.toml:4:1: error: resilience.scoped_rate_limits[0].key: key is not "
                  "allowed with scope = \"route\": a route rule has one bucket per upstream, "
                  "which every request to it takes from; remove key, or set scope = "
                  "\"client\", \"tenant\" or \"token\" to count by it"},
        RuleError{"tenant_without_key",
                  "name = \"r\"\nscope = \"tenant\"\nrequests_per_sec = 1\nburst = 1",
                  "test.toml:1:1: error: resilience.scoped_rate_limits[0].key: missing required "
                  "key 'key': scope = \"tenant\" counts by the tenant a request names, and no "
                  "source names it by default; add key = \"header:x-tenant-id\" (or the "
                  "cookie, query parameter or token that names the tenant) to this "
                  "[[resilience.scoped_rate_limits]]"}),
    [](const auto& info) { return info.param.name; });

std::string rate_error(int line, std::string_view key, std::string_view message) {
  return "test.toml:" + std::to_string(line) + ":1: error: resilience.scoped_rate_limits[0]." +
         std::string(key) + ": " + std::string(message);
}

INSTANTIATE_TEST_SUITE_P(
    Rates, ConfigScopedRateLimitErrors,
    ::testing::Values(
        RuleError{"rate_missing", "name = \"r\"\nscope = \"route\"\nburst = 1",
                  "test.toml:1:1: error: resilience.scoped_rate_limits[0].requests_per_sec: "
                  "missing required key 'requests_per_sec'; add requests_per_sec = 100 to this "
                  "[[resilience.scoped_rate_limits]]"},
        RuleError{"burst_missing", "name = \"r\"\nscope = \"route\"\nrequests_per_sec = 1",
                  "test.toml:1:1: error: resilience.scoped_rate_limits[0].burst: missing "
                  "required key 'burst'; add burst = 100 to this "
                  "[[resilience.scoped_rate_limits]]"},
        RuleError{"rate_zero", "name = \"r\"\nscope = \"route\"\nrequests_per_sec = 0\nburst = 1",
                  rate_error(4, "requests_per_sec",
                             "0 is out of range; use an integer from 1 to 10000000")},
        RuleError{"rate_above_bound",
                  "name = \"r\"\nscope = \"route\"\nrequests_per_sec = 10000001\nburst = 1",
                  rate_error(4, "requests_per_sec",
                             "10000001 is out of range; use an integer from 1 to 10000000")},
        RuleError{"rate_fraction",
                  "name = \"r\"\nscope = \"route\"\nrequests_per_sec = 0.5\nburst = 1",
                  rate_error(4, "requests_per_sec",
                             "expected an integer, got a floating-point number; e.g. "
                             "requests_per_sec = 100")},
        RuleError{"rate_quoted",
                  "name = \"r\"\nscope = \"route\"\nrequests_per_sec = \"10\"\nburst = 1",
                  rate_error(4, "requests_per_sec",
                             "expected an integer, got a string (\"10\"); e.g. "
                             "requests_per_sec = 100")},
        RuleError{"burst_negative",
                  "name = \"r\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = -1",
                  rate_error(5, "burst", "-1 is out of range; use an integer from 1 to 10000000")},
        RuleError{"idle_ttl_zero", client_rule("idle_ttl = \"0s\""),
                  rate_error(6, "idle_ttl", "must be greater than 0; e.g. idle_ttl = \"5m\"")},
        RuleError{"idle_ttl_integer", client_rule("idle_ttl = 300"),
                  rate_error(6, "idle_ttl",
                             "expected a duration string with a unit, got an integer (300); "
                             "write idle_ttl = \"300s\" or \"300ms\"")},
        RuleError{"seed_idle_ttl_secs", client_rule("idle_ttl_secs = 300"),
                  rate_error(6, "idle_ttl_secs",
                             "unknown key 'idle_ttl_secs' in [[resilience.scoped_rate_limits]]; "
                             "'idle_ttl_secs' belongs in a [[resilience.scoped_rate_limits]] "
                             "rule, as idle_ttl (a duration: idle_ttl = \"300s\")")},
        RuleError{
            "max_keys_below_bound", client_rule("max_keys = 15"),
            rate_error(6, "max_keys", "15 is out of range; use an integer from 16 to 1000000")},
        RuleError{"max_keys_above_bound", client_rule("max_keys = 1000001"),
                  rate_error(6, "max_keys",
                             "1000001 is out of range; use an integer from 16 to 1000000")},
        RuleError{"max_keys_quoted", client_rule("max_keys = \"1024\""),
                  rate_error(6, "max_keys",
                             "expected an integer, got a string (\"1024\"); e.g. max_keys = 1024")},
        RuleError{"on_table_full_unknown", client_rule("on_table_full = \"drop\""),
                  rate_error(6, "on_table_full",
                             "unknown value \"drop\"; expected overflow_bucket or fail_open")},
        RuleError{"mode_unknown", client_rule("mode = \"dry_run\""),
                  rate_error(6, "mode", "unknown value \"dry_run\"; expected enforce or shadow")}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    NamesAndUpstreams, ConfigScopedRateLimitErrors,
    ::testing::Values(
        RuleError{"name_missing", "scope = \"route\"\nrequests_per_sec = 1\nburst = 1",
                  "test.toml:1:1: error: resilience.scoped_rate_limits[0].name: missing "
                  "required key 'name'; add name = \"tenant-api\" to this "
                  "[[resilience.scoped_rate_limits]]"},
        RuleError{"name_empty", "name = \"\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1",
                  rate_error(2, "name",
                             "a rule name cannot be empty: it names the rule in the "
                             "X-Floodgate-Limit header of its 429 responses and in its metrics; "
                             "e.g. name = \"tenant-api\"")},
        RuleError{"name_with_space",
                  "name = \"tenant api\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1",
                  rate_error(2, "name",
                             "\"tenant api\" is not a valid rule name; use one or more letters, "
                             "digits, '_', '.' or '-' (it is sent in the X-Floodgate-Limit "
                             "header and is a metric label), e.g. \"tenant-api\"")},
        RuleError{"name_not_a_string",
                  "name = 7\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1",
                  rate_error(2, "name",
                             "expected a string, got an integer (7); e.g. name = \"tenant-api\"")},
        RuleError{"allowlist_undefined", client_rule("route_allowlist = [\"app\", \"biling\"]"),
                  "test.toml:6:27: error: resilience.scoped_rate_limits[0].route_allowlist[1]: "
                  "upstream 'biling' is not defined (did you mean 'billing'?); route_allowlist "
                  "takes the names of [[upstreams]] entries: fix the name, or define "
                  "[[upstreams]] name = \"biling\""},
        RuleError{"allowlist_empty_name", client_rule("route_allowlist = [\"\"]"),
                  "test.toml:6:20: error: resilience.scoped_rate_limits[0].route_allowlist[0]: "
                  "an upstream name cannot be empty; write the name of an [[upstreams]] entry, "
                  "e.g. \"app\""},
        RuleError{"allowlist_duplicate", client_rule("route_allowlist = [\"app\", \"app\"]"),
                  "test.toml:6:27: error: resilience.scoped_rate_limits[0].route_allowlist[1]: "
                  "duplicate \"app\" (same as resilience.scoped_rate_limits[0]."
                  "route_allowlist[0]); remove one of them"},
        RuleError{"allowlist_not_an_array", client_rule("route_allowlist = \"app\""),
                  rate_error(6, "route_allowlist",
                             "expected an array of strings, got a string (\"app\"); e.g. "
                             "route_allowlist = [\"app\"]")},
        RuleError{"typo", client_rule("burts = 5"),
                  rate_error(6, "burts",
                             "unknown key 'burts' in [[resilience.scoped_rate_limits]] (did you "
                             "mean 'burst'?); expected one of: name, scope, key, missing_key, "
                             "requests_per_sec, burst, route_allowlist, idle_ttl, max_keys, "
                             "on_table_full, mode, tier_key, tiers")}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Tiers, ConfigScopedRateLimitErrors,
    ::testing::Values(
        RuleError{"tier_key_with_client_scope", client_rule("tier_key = \"header:x-plan\""),
                  rate_error(6, "tier_key",
                             "tier_key is only for scope = \"tenant\" (a tenant's plan picks its "
                             "rates), and this rule has scope = \"client\"; remove tier_key, or "
                             "set scope = \"tenant\"")},
        RuleError{"tiers_with_token_scope",
                  "name = \"r\"\nscope = \"token\"\nrequests_per_sec = 1\nburst = 1\n"
                  "tiers = { free = { requests_per_sec = 1, burst = 1 } }",
                  rate_error(6, "tiers",
                             "tiers is only for scope = \"tenant\" (a tenant's plan picks its "
                             "rates), and this rule has scope = \"token\"; remove tiers, or set "
                             "scope = \"tenant\"")},
        RuleError{"tiers_without_tier_key",
                  tenant_rule("tiers = { free = { requests_per_sec = 1, burst = 1 } }"),
                  rate_error(7, "tiers",
                             "tiers needs tier_key, the request-key source that names a "
                             "request's plan, e.g. tier_key = \"header:x-plan\": without it no "
                             "request picks a tier")},
        RuleError{"tier_key_same_header_as_key",
                  tenant_rule("tier_key = \"header:X-Tenant-Id\"\n"
                              "tiers = { free = { requests_per_sec = 1, burst = 1 } }"),
                  rate_error(7, "tier_key",
                             "tier_key = \"header:X-Tenant-Id\" is the same request-key source "
                             "as key = \"header:x-tenant-id\", so every tenant's plan would be "
                             "its own id; take the plan from another source, e.g. tier_key = "
                             "\"header:x-plan\"")},
        RuleError{"tier_key_other_spelling_of_the_connection_id",
                  "name = \"r\"\nscope = \"tenant\"\nkey = \"cid\"\nrequests_per_sec = 1\n"
                  "burst = 1\ntier_key = \"sticky-cid\"\n"
                  "tiers = { free = { requests_per_sec = 1, burst = 1 } }",
                  rate_error(7, "tier_key",
                             "tier_key = \"sticky-cid\" is the same request-key source as key = "
                             "\"cid\", so every tenant's plan would be its own id; take the plan "
                             "from another source, e.g. tier_key = \"header:x-plan\"")},
        RuleError{"tiers_not_a_table",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = [\"free\"]"),
                  rate_error(8, "tiers",
                             "expected a table of plan names and rates, got an array; e.g. "
                             "tiers = { free = { requests_per_sec = 100, burst = 100 } }")},
        RuleError{"tier_not_a_table",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = { free = 100 }"),
                  "test.toml:8:18: error: resilience.scoped_rate_limits[0].tiers.free: expected "
                  "a table { requests_per_sec = N, burst = N }, got an integer (100); e.g. "
                  "free = { requests_per_sec = 100, burst = 100 }"},
        RuleError{"tier_without_burst",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = { free = { "
                              "requests_per_sec = 1 } }"),
                  "test.toml:8:18: error: resilience.scoped_rate_limits[0].tiers.free.burst: "
                  "missing required key 'burst'; add burst = 100 to this tier \"free\""},
        RuleError{"tier_rate_zero",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = { free = { "
                              "requests_per_sec = 0, burst = 1 } }"),
                  "test.toml:8:20: error: resilience.scoped_rate_limits[0].tiers.free."
                  "requests_per_sec: 0 is out of range; use an integer from 1 to 10000000"},
        RuleError{"tier_unknown_key",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = { free = { "
                              "requests_per_sec = 1, burst = 1, rps = 2 } }"),
                  "test.toml:8:53: error: resilience.scoped_rate_limits[0].tiers.free.rps: "
                  "unknown key 'rps' in tier \"free\"; expected one of: requests_per_sec, "
                  "burst"},
        RuleError{"tier_name_empty",
                  tenant_rule("tier_key = \"header:x-plan\"\ntiers = { \"\" = { "
                              "requests_per_sec = 1, burst = 1 } }"),
                  "test.toml:8:11: error: resilience.scoped_rate_limits[0].tiers.\"\": a tier "
                  "name cannot be empty: it is the plan that tier_key names in a request, e.g. "
                  "tiers = { free = { requests_per_sec = 100, burst = 100 } }"}),
    [](const auto& info) { return info.param.name; });

TEST(ConfigScopedRateLimits, RejectsADuplicateNameNamingTheFirstOnesLine) {
  const LoadResult r = load(std::string(kRule) + "\n" + client_rule() + std::string(kRule) + "\n" +
                            client_rule() + "\n" + std::string(kTwoPools));
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: resilience.scoped_rate_limits[1].name: duplicate rule name "
            "'r' (first defined at line 2); give each [[resilience.scoped_rate_limits]] rule its "
            "own name");
}

TEST(ConfigScopedRateLimits, RefusesMoreThan32Rules) {
  std::string text;
  for (int i = 0; i <= 32; ++i) {
    text += std::string(kRule) + "\nname = \"r" + std::to_string(i) +
            "\"\nscope = \"client\"\nrequests_per_sec = 1\nburst = 1\n";
  }
  const LoadResult r = load(text + std::string(kTwoPools));
  EXPECT_EQ(only(r),
            "test.toml:162:1: error: resilience.scoped_rate_limits[32].name: more than 32 scoped "
            "rate limits; merge rules (one rule with tiers can give plans different rates)");
}

TEST(ConfigScopedRateLimits, ReportsEveryProblemOfEveryRuleInOnePass) {
  const LoadResult r = load(std::string(kRule) +
                            "\nname = \"a\"\nscope = \"route\"\nkey = \"path\"\n"
                            "requests_per_sec = 0\nburst = 1\n" +
                            std::string(kRule) +
                            "\nname = \"b\"\nscope = \"tenant\"\nrequests_per_sec = 1\n"
                            "burst = 0\nidle_ttl = \"0s\"\n\n" +
                            std::string(kTwoPools));
  EXPECT_EQ(dump(r),
            "test.toml:4:1: error: resilience.scoped_rate_limits[0].key: key is not allowed with "
            "scope = \"route\": a route rule has one bucket per upstream, which every request to "
            "it takes from; remove key, or set scope = \"client\", \"tenant\" or \"token\" to "
            "count by it\n"
            "test.toml:5:1: error: resilience.scoped_rate_limits[0].requests_per_sec: 0 is out "
            "of range; use an integer from 1 to 10000000\n"
            "test.toml:7:1: error: resilience.scoped_rate_limits[1].key: missing required key "
            "'key': scope = \"tenant\" counts by the tenant a request names, and no source names "
            "it by default; add key = \"header:x-tenant-id\" (or the cookie, query parameter or "
            "token that names the tenant) to this [[resilience.scoped_rate_limits]]\n"
            "test.toml:11:1: error: resilience.scoped_rate_limits[1].burst: 0 is out of range; "
            "use an integer from 1 to 10000000\n"
            "test.toml:12:1: error: resilience.scoped_rate_limits[1].idle_ttl: must be greater "
            "than 0; e.g. idle_ttl = \"5m\"\n");
}

TEST(ConfigScopedRateLimits, RejectsASingleTableTellingToDoubleTheBrackets) {
  EXPECT_EQ(only(testing::load_table("[resilience.scoped_rate_limits]", client_rule(), kTwoPools)),
            "test.toml:1:1: error: resilience.scoped_rate_limits: expected an array of tables, "
            "got a table; e.g. [[resilience.scoped_rate_limits]] (double brackets) for each "
            "entry");
}

TEST(ConfigScopedRateLimits, RejectsAnElementThatIsNotATable) {
  EXPECT_EQ(only(load("[resilience]\nscoped_rate_limits = [\"api\"]\n\n" + std::string(kTwoPools))),
            "test.toml:2:23: error: resilience.scoped_rate_limits[0]: expected a table, got a "
            "string (\"api\"); e.g. [[resilience.scoped_rate_limits]]");
}

TEST(ConfigScopedRateLimits, TellsWhereARuleKeyWrittenElsewhereBelongs) {
  EXPECT_EQ(only(load("[resilience.brownout]\nrequests_per_sec = 5\n\n" + std::string(kTwoPools))),
            "test.toml:2:1: error: resilience.brownout.requests_per_sec: unknown key "
            "'requests_per_sec' in [resilience.brownout]; 'requests_per_sec' belongs in a "
            "[[resilience.scoped_rate_limits]] rule");
  EXPECT_EQ(only(load("[server]\nscoped_rate_limits = []\n\n" + std::string(kTwoPools))),
            "test.toml:2:1: error: server.scoped_rate_limits: unknown key 'scoped_rate_limits' "
            "in [server]; 'scoped_rate_limits' belongs in [resilience], as "
            "[[resilience.scoped_rate_limits]]");
}

// --- warnings --------------------------------------------------------------------------------

TEST(ConfigScopedRateLimits, WarnsThatClientIpWithoutATrustedProxyIsThePeerAddress) {
  const LoadResult r = rule(client_rule("key = \"client_ip\""));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:6:1: warning: resilience.scoped_rate_limits[0].key: client_ip reads "
            "X-Forwarded-For only for a connection from a proxy listed in "
            "server.trusted_proxies, and that list is empty, so this is the address of the peer "
            "(peer_ip) for every request; list the proxies in front of floodgate, e.g. [server] "
            "trusted_proxies = [\"10.0.0.0/8\"], or write key = \"peer_ip\"\n");
}

TEST(ConfigScopedRateLimits, WarnsOfAClientIpTierKeyToo) {
  const LoadResult r =
      rule(tenant_rule("tier_key = \"client_ip\"\ntiers = { a = { requests_per_sec = 1, burst "
                       "= 1 } }"));
  ASSERT_TRUE(r.ok()) << dump(r);
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.scoped_rate_limits[0].tier_key");
  EXPECT_EQ(r.diagnostics[0].line, 7);
}

TEST(ConfigScopedRateLimits, DoesNotWarnOfClientIpBehindATrustedProxy) {
  const LoadResult r =
      load("[server]\ntrusted_proxies = [\"10.0.0.0/8\"]\n" + std::string(kRule) + "\n" +
           client_rule("key = \"client_ip\"") + "\n" + std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigScopedRateLimits, DoesNotWarnOfClientIpWhenTheProxyListHasAnError) {
  const LoadResult r =
      load("[server]\ntrusted_proxies = [\"proxy\"]\n" + std::string(kRule) + "\n" +
           client_rule("key = \"client_ip\"") + "\n" + std::string(kTwoPools));
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.trusted_proxies[0]");
}

TEST(ConfigScopedRateLimits, WarnsOfATierKeyWithoutTiers) {
  const std::string expected =
      "test.toml:7:1: warning: resilience.scoped_rate_limits[0].tier_key: tier_key is set, but "
      "tiers lists no plan, so every request gets this rule's own requests_per_sec and burst; "
      "add the plans, e.g. tiers = { free = { requests_per_sec = 100, burst = 100 } }, or "
      "remove tier_key\n";
  const LoadResult absent = rule(tenant_rule("tier_key = \"header:x-plan\""));
  ASSERT_TRUE(absent.ok()) << dump(absent);
  EXPECT_EQ(dump(absent), expected);
  const LoadResult empty = rule(tenant_rule("tier_key = \"header:x-plan\"\ntiers = {}"));
  ASSERT_TRUE(empty.ok()) << dump(empty);
  EXPECT_EQ(dump(empty), expected);
}

// --- missing_key -----------------------------------------------------------------------------

// Every note, formatted, one per line.
std::string notes(const LoadResult& r) {
  std::string out;
  for (const Diagnostic& d : r.notes) out += format(d) + "\n";
  return out;
}

TEST(ConfigScopedRateLimits, CountsARequestWithoutTheKeyByItsClientByDefault) {
  EXPECT_EQ(only_rule(rule(tenant_rule())).missing_key, MissingKey::peer);
}

TEST(ConfigScopedRateLimits, ReadsEveryValueOfMissingKey) {
  for (const auto& [text, value] : std::map<std::string, MissingKey>{
           {"peer", MissingKey::peer}, {"route", MissingKey::route}, {"skip", MissingKey::skip}}) {
    const LoadResult r = rule(tenant_rule("missing_key = \"" + text + "\""));
    EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
    EXPECT_EQ(only_rule(r).missing_key, value) << text;
  }
}

TEST(ConfigScopedRateLimits, RejectsAnUnknownMissingKeyListingTheValues) {
  EXPECT_EQ(only(rule(tenant_rule("missing_key = \"host\""))),
            "test.toml:7:1: error: resilience.scoped_rate_limits[0].missing_key: unknown value "
            "\"host\"; expected peer, route or skip");
}

TEST(ConfigScopedRateLimits, RejectsMissingKeyOnARouteRuleWhichHasNoKey) {
  EXPECT_EQ(only(rule("name = \"t\"\nscope = \"route\"\nrequests_per_sec = 1\nburst = 1\n"
                      "missing_key = \"skip\"")),
            "test.toml:6:1: error: resilience.scoped_rate_limits[0].missing_key: missing_key is "
            "not allowed with scope = \"route\": a route rule counts every request to its "
            "upstream in one bucket and has no key a request could lack; remove missing_key, or "
            "set scope = \"client\", \"tenant\" or \"token\" with a key");
}

TEST(ConfigScopedRateLimits, WarnsThatMissingKeyIsPointlessWithAKeyEveryRequestHas) {
  const LoadResult r = rule(client_rule("missing_key = \"route\""));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:6:1: warning: resilience.scoped_rate_limits[0].missing_key: missing_key "
            "has no effect: every request has the identity key = \"peer_ip\" gives, so no "
            "request is counted as missing_key says; remove missing_key, or key the rule by a "
            "header, cookie, query parameter or bearer token that a request may lack\n");
  EXPECT_EQ(notes(r), "");
}

TEST(ConfigScopedRateLimits, SaysNothingOfMissingKeyForAKeyEveryRequestHas) {
  const LoadResult r = rule(client_rule("key = \"method\""));
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(notes(r), "");
}

TEST(ConfigScopedRateLimits, NotesAtTheKeyThatARequestWithoutItIsCountedByItsClient) {
  const LoadResult r = rule(tenant_rule());
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(notes(r),
            "test.toml:4:1: note: resilience.scoped_rate_limits[0].missing_key: a request "
            "without key = \"header:x-tenant-id\" is counted by its client's address (as "
            "client_ip gives it, server.trusted_proxies honoured), one bucket per client "
            "(missing_key = \"peer\", the default)\n");
}

TEST(ConfigScopedRateLimits, NotesAtMissingKeyWhatARouteOrSkipRuleDoes) {
  EXPECT_EQ(notes(rule(tenant_rule("missing_key = \"route\""))),
            "test.toml:7:1: note: resilience.scoped_rate_limits[0].missing_key: a request "
            "without key = \"header:x-tenant-id\" is counted in one bucket for the route it "
            "takes (its [[routes]] entry: the host, lower-case without port or trailing dot, and "
            "the path_prefix), shared by every client without the key (missing_key = "
            "\"route\")\n");
  EXPECT_EQ(notes(rule(tenant_rule("missing_key = \"skip\""))),
            "test.toml:7:1: note: resilience.scoped_rate_limits[0].missing_key: a request "
            "without key = \"header:x-tenant-id\" is not counted by this rule and passes it "
            "unlimited (missing_key = \"skip\"); "
            "floodgate_rate_limit_requests_total{result=\"skipped\"} counts such requests\n");
}

TEST(ConfigScopedRateLimits, NotesATokenRulesDefaultKeyAtTheRule) {
  const LoadResult r = rule("name = \"t\"\nscope = \"token\"\nrequests_per_sec = 1\nburst = 1");
  ASSERT_EQ(r.notes.size(), 1u) << notes(r);
  EXPECT_EQ(r.notes[0].line, 1);
  EXPECT_EQ(r.notes[0].path, "resilience.scoped_rate_limits[0].missing_key");
  EXPECT_NE(r.notes[0].message.find("without key = \"bearer_token\""), std::string::npos);
}

TEST(ConfigScopedRateLimits, NotesNothingForAnInvalidKey) {
  const LoadResult r = rule(
      "name = \"r\"\nscope = \"tenant\"\nkey = \"header:\"\nrequests_per_sec = 10\n"
      "burst = 20\nmissing_key = \"skip\"");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(notes(r), "");
}

}  // namespace
}  // namespace floodgate::config
