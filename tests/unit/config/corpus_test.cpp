// A corpus of bad files, one per class of problem an operator makes: each file must produce
// exactly one diagnostic, with its severity, key path, line:column and the part of the message
// that names the problem. The exact wording of each class is pinned in errors_test.cpp,
// scope_test.cpp, admin_test.cpp, resilience_test.cpp, health_test.cpp and the front_*_test.cpp
// files; this list is the checklist that no class goes unreported.
#include <gtest/gtest.h>

#include <ostream>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::kMinimal;
using testing::load;
using Severity = Diagnostic::Severity;

struct BadFile {
  std::string_view name;
  std::string text;
  Severity severity;
  std::string_view path;
  int line;
  int column;
  std::string_view message_part;
};

// `head` on lines 1.., then a blank line and the minimal upstream and route.
std::string before_minimal(std::string_view head) {
  return std::string(head) + "\n\n" + std::string(kMinimal);
}

const BadFile kCorpus[] = {
    {"unknown_key", before_minimal("[server]\nthreads = 4"), Severity::error, "server.threads", 2,
     1, "unknown key 'threads' in [server]"},
    {"wrong_type", before_minimal("[server]\nworkers = \"4\""), Severity::error, "server.workers",
     2, 1, "expected an integer, got a string (\"4\")"},
    {"out_of_range", before_minimal("[server]\nmax_headers = 0"), Severity::error,
     "server.max_headers", 2, 1, "0 is out of range; use an integer from 1 to 10000"},
    {"duration_without_unit", before_minimal("[server]\nidle_timeout = \"60\""), Severity::error,
     "server.idle_timeout", 2, 1, "the unit is missing"},
    {"duration_with_fraction", before_minimal("[server]\nheader_timeout = \"1.5s\""),
     Severity::error, "server.header_timeout", 2, 1, "fractions are not supported"},
    {"duration_as_integer", before_minimal("[server]\ndrain_timeout = 30"), Severity::error,
     "server.drain_timeout", 2, 1, "expected a duration string with a unit"},
    {"address_with_dns_name",
     R"([[upstreams]]
name = "app"
servers = ["backend!.local:9000"]
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].servers[0]", 3, 12, "is neither an IP address nor a host name"},
    {"address_without_port", before_minimal("[admin]\nlisten = \"127.0.0.1\""), Severity::error,
     "admin.listen", 2, 1, "the port is missing"},
    {"duplicate_upstream_name",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9001"]
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[1].name", 5, 1, "duplicate upstream name 'app'"},
    {"route_to_missing_upstream",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[[routes]]
upstream = "api"
)",
     Severity::error, "routes[0].upstream", 5, 1,
     "route names upstream 'api', which is not defined"},
    {"misplaced_key", before_minimal("[server]\nkeepalive = 8"), Severity::error,
     "server.keepalive", 2, 1, "'keepalive' belongs in an [[upstreams]] entry"},
    {"pool_scoped_key_in_route", std::string(kMinimal) + "max_active_requests = 100\n",
     Severity::error, "routes[0].max_active_requests", 7, 1,
     "max_active_requests is pool-scoped: set it under [upstreams.resilience] of upstream 'app'"},
    {"pool_scoped_key_in_route_resilience",
     std::string(kMinimal) + "\n[routes.resilience]\npending_timeout = \"1s\"\n", Severity::error,
     "routes[0].resilience.pending_timeout", 9, 1,
     "pending_timeout is pool-scoped: set it under [upstreams.resilience] of upstream 'app'"},
    {"pool_scoped_key_in_inline_route_resilience",
     std::string(kMinimal) + "resilience = { max_active_per_backend = 8 }\n", Severity::error,
     "routes[0].resilience.max_active_per_backend", 7, 16,
     "max_active_per_backend is pool-scoped: set it under [upstreams.resilience]"},
    {"retry_after_in_route", std::string(kMinimal) + "retry_after = \"2s\"\n", Severity::error,
     "routes[0].retry_after", 7, 1,
     "retry_after is pool-scoped: set it under [upstreams.resilience] of upstream 'app'"},
    {"pool_scoped_key_in_upstream",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
max_pending_requests = 8
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].max_pending_requests", 4, 1,
     "'max_pending_requests' belongs in [upstreams.resilience]"},
    {"retry_after_zero",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.resilience]
retry_after = "0s"
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].resilience.retry_after", 5, 1, "must be greater than 0"},
    {"queue_without_limit",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.resilience]
max_pending_requests = 8
pending_timeout = "1s"
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].resilience.max_pending_requests", 5, 1,
     "needs a limit to queue behind"},
    {"pending_timeout_past_retirement_grace",
     R"([server]
retirement_grace = "5s"
header_timeout = "5s"
[[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
resilience = { pending_timeout = "10s" }
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].resilience.pending_timeout", 7, 16,
     "is longer than server.retirement_grace"},
    {"non_loopback_admin_without_token", before_minimal("[admin]\nlisten = \"0.0.0.0:9901\""),
     Severity::error, "admin.listen", 2, 1, "is not a loopback address and admin.token is not set"},
    {"non_loopback_ipv6_admin_without_token", before_minimal("[admin]\nlisten = \"[::]:9901\""),
     Severity::error, "admin.listen", 2, 1, "is not a loopback address and admin.token is not set"},
    {"short_token", before_minimal("[admin]\ntoken = \"s3cr3t\""), Severity::error, "admin.token",
     2, 1, "the token is shorter than 16 characters"},
    {"token_with_whitespace", before_minimal("[admin]\ntoken = \"0123456789 abcdef0123\""),
     Severity::error, "admin.token", 2, 1, "the token contains a space"},
    {"token_not_a_string", before_minimal("[admin]\ntoken = 1234567890123456789"), Severity::error,
     "admin.token", 2, 1, "expected a string, got an integer;"},
    {"retirement_grace_shorter_than_header_timeout",
     before_minimal("[server]\nheader_timeout = \"10s\"\nretirement_grace = \"2s\""),
     Severity::warning, "server.retirement_grace", 3, 1,
     "retirement_grace = \"2s\" is shorter than server.header_timeout = \"10s\""},
    {"shadowed_route", std::string(kMinimal) + "\n[[routes]]\nhost = \"*\"\nupstream = \"app\"\n",
     Severity::warning, "routes[1]", 8, 1, "this route never matches: routes[0] (line 5)"},
    {"weight_ignored_by_balance",
     R"([[upstreams]]
name = "app"
balance = "p2c"
servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 3 }]
[[routes]]
upstream = "app"
)",
     Severity::warning, "upstreams[0].servers[1].weight", 4, 60,
     "weight 3 is ignored by balance = \"p2c\""},
    {"queue_without_pending_timeout",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.resilience]
max_active_requests = 10
max_pending_requests = 8
[[routes]]
upstream = "app"
)",
     Severity::warning, "upstreams[0].resilience.max_pending_requests", 6, 1,
     "set pending_timeout"},
    {"per_backend_caps_below_pool_limit",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000", "127.0.0.1:9001"]
[upstreams.resilience]
max_active_requests = 100
max_active_per_backend = 40
[[routes]]
upstream = "app"
)",
     Severity::warning, "upstreams[0].resilience.max_active_per_backend", 6, 1,
     "the pool limit is never reached"},
    {"health_fall_zero",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.health]
fall = 0
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].health.fall", 5, 1,
     "0 is out of range; use an integer from 1 to 1000"},
    {"health_backwards_status_range",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
health = { expect_status = "200,399-300" }
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].health.expect_status", 4, 12, "the range 399-300 is backwards"},
    {"health_path_without_slash",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.health]
path = "healthz"
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].health.path", 5, 1, "must start with \"/\""},
    {"health_key_in_upstream",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
interval = "5s"
[[routes]]
upstream = "app"
)",
     Severity::error, "upstreams[0].interval", 4, 1, "'interval' belongs in [upstreams.health]"},
    {"health_interval_shorter_than_timeout",
     R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]
[upstreams.health]
interval = "1s"
timeout = "3s"
[[routes]]
upstream = "app"
)",
     Severity::warning, "upstreams[0].health.interval", 5, 1,
     "so it is probed at most once every \"3s\""},
    {"inflight_cap_quoted", before_minimal("[resilience.inflight]\nmax_inflight = \"64\""),
     Severity::error, "resilience.inflight.max_inflight", 2, 1,
     "write the number without quotes, e.g. max_inflight = 64"},
    {"inflight_cap_negative", before_minimal("[resilience.inflight]\nmax_inflight = -1"),
     Severity::error, "resilience.inflight.max_inflight", 2, 1,
     "use \"auto\" or an integer from 0 (no cap) to 2147483646"},
    {"exempt_prefix_without_slash",
     before_minimal("[resilience.inflight]\nexempt_path_prefixes = [\"downloads\"]"),
     Severity::error, "resilience.inflight.exempt_path_prefixes[0]", 2, 25,
     "must start with \"/\""},
    {"memory_floor_with_unit", before_minimal("[resilience.memory_guard]\nmin_available = \"1G\""),
     Severity::error, "resilience.memory_guard.min_available", 2, 1, "unknown value \"1G\""},
    {"relative_meminfo", before_minimal("[resilience.memory_guard]\nmeminfo = \"meminfo\""),
     Severity::error, "resilience.memory_guard.meminfo", 2, 1, "is not an absolute path"},
    {"unknown_resilience_table", before_minimal("[resilience.limits]\nmax = 1"), Severity::error,
     "resilience.limits", 1, 1,
     "[resilience] has the sub-tables inflight, memory_guard, protocol, circuit_breaker, "
     "retry_budget, hedging, adaptive_admission, brownout, route_queue, watchdog, "
     "scoped_rate_limits and quota"},
    {"quota_enabled_without_policies", before_minimal("[resilience.quota]\nenabled = true"),
     Severity::error, "resilience.quota.enabled", 2, 1,
     "enabled = true, but [resilience.quota] has no policy"},
    {"unknown_key_in_resilience_table",
     before_minimal("[resilience.protocol]\nallow_connnect = true"), Severity::error,
     "resilience.protocol.allow_connnect", 2, 1, "(did you mean 'allow_connect'?)"},
    {"shadow_misspelt", before_minimal("[resilience.memory_guard]\nmode = \"shadowed\""),
     Severity::error, "resilience.memory_guard.mode", 2, 1, "expected enforce or shadow"},
    {"method_not_a_token",
     before_minimal("[resilience.protocol]\nallowed_methods = [\"GET,HEAD\"]"), Severity::error,
     "resilience.protocol.allowed_methods[0]", 2, 20, "is not a method"},
    {"open_connect_proxy", before_minimal("[resilience.protocol]\nallow_connect = true"),
     Severity::error, "resilience.protocol.allow_connect", 2, 1, "(an open proxy)"},
    {"connect_ports_without_connect",
     before_minimal("[resilience.protocol]\nconnect_allowed_ports = [443]"), Severity::error,
     "resilience.protocol.connect_allowed_ports", 2, 1,
     "connect_allowed_ports is set, but allow_connect = false"},
    {"connect_authority_without_port",
     before_minimal("[resilience.protocol]\nallow_connect = true\n"
                    "connect_allowed_authorities = [\"db.internal\"]"),
     Severity::error, "resilience.protocol.connect_allowed_authorities[0]", 3, 32,
     "the port is missing"},
    {"unsafe_early_data_method",
     before_minimal("[resilience.protocol]\nallow_0rtt = true\n"
                    "early_data_safe_methods = [\"POST\"]"),
     Severity::error, "resilience.protocol.early_data_safe_methods[0]", 3, 28,
     "only \"GET\" and \"HEAD\" may be listed"},
    {"lower_case_method", before_minimal("[resilience.protocol]\nallowed_methods = [\"get\"]"),
     Severity::warning, "resilience.protocol.allowed_methods[0]", 2, 20,
     "methods are case-sensitive"},
    {"deny_everything", before_minimal("[resilience.protocol]\ndenied_path_prefixes = [\"/\"]"),
     Severity::warning, "resilience.protocol.denied_path_prefixes[0]", 2, 25,
     "every request is refused with 403 denied_path"},
    {"breaker_threshold_zero",
     before_minimal("[resilience.circuit_breaker]\nfailure_threshold = 0"), Severity::error,
     "resilience.circuit_breaker.failure_threshold", 2, 1,
     "0 is out of range; use an integer from 1 to 1000000"},
    {"client_error_as_failure",
     before_minimal("[resilience.circuit_breaker]\nfailure_statuses = [502, 404]"), Severity::error,
     "resilience.circuit_breaker.failure_statuses[1]", 2, 26, "404 is not a server error"},
    {"budget_over_100_percent", before_minimal("[resilience.retry_budget]\nratio_percent = 150"),
     Severity::error, "resilience.retry_budget.ratio_percent", 2, 1,
     "use an integer from 0 to 100"},
    {"budget_floor_over_1000", before_minimal("[resilience.retry_budget]\nmin_retries = 5000"),
     Severity::error, "resilience.retry_budget.min_retries", 2, 1, "use an integer from 0 to 1000"},
    {"budget_for_undefined_upstream",
     before_minimal("[resilience.retry_budget]\nper_route_ratio_percent = { ap = 20 }"),
     Severity::error, "resilience.retry_budget.per_route_ratio_percent.ap", 2, 29,
     "upstream 'ap' is not defined (did you mean 'app'?)"},
    {"hedge_for_undefined_upstream",
     before_minimal("[resilience.hedging]\nroute_allowlist = [\"api\"]"), Severity::error,
     "resilience.hedging.route_allowlist[0]", 2, 20, "upstream 'api' is not defined"},
    {"hedge_a_post", before_minimal("[resilience.hedging]\nsafe_methods = [\"GET\", \"POST\"]"),
     Severity::warning, "resilience.hedging.safe_methods[1]", 2, 24, "is not idempotent"},
};

// ctest lists a file by its name, not by its bytes.
void PrintTo(const BadFile& f, std::ostream* os) {
  *os << f.name;
}

class ConfigCorpus : public ::testing::TestWithParam<BadFile> {};

TEST_P(ConfigCorpus, ReportsItsOneProblemWithPathPositionAndMessage) {
  const BadFile& f = GetParam();
  const LoadResult r = load(f.text);
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.severity, f.severity) << dump(r);
  EXPECT_EQ(d.path, f.path);
  EXPECT_EQ(d.line, f.line);
  EXPECT_EQ(d.column, f.column);
  EXPECT_NE(d.message.find(f.message_part), std::string::npos) << d.message;
  EXPECT_EQ(r.ok(), f.severity == Severity::warning);
}

INSTANTIATE_TEST_SUITE_P(BadFiles, ConfigCorpus, ::testing::ValuesIn(kCorpus),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace floodgate::config
