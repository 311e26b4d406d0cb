// [resilience.quota]: the configuration of issue 16's distributed quota. The defaults, every
// key, the Redis url and its resolution, the selector source matrix, every validation rule of
// seed 004 with the message the operator sees (also when the quota is not enabled), unknown
// keys, the warning of a client_ip selector, and missing_key with the note `floodgate check`
// prints about it.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using resilience::BackendFailurePolicy;
using resilience::KeySource;
using resilience::MissingKey;
using resilience::Mode;
using resilience::QuotaBackendKind;
using resilience::QuotaLocalFallbackParams;
using resilience::QuotaParams;
using resilience::QuotaPolicyParams;
using resilience::QuotaSelector;
using resilience::QuotaWindow;
using resilience::RedisTarget;
using testing::dump;
using testing::load;
using testing::only;
using Kind = KeySource::Kind;

using testing::kTwoPools;  // "app" and "billing", after the tables under test

constexpr std::string_view kPolicy = "[[resilience.quota.policies]]";

LoadResult quota(std::string_view body) {
  return testing::load_table("[resilience.quota]", body, kTwoPools);
}
LoadResult backend(std::string_view body) {
  return testing::load_table("[resilience.quota.backend]", body, kTwoPools);
}
LoadResult policy(std::string_view body) {
  return testing::load_table(kPolicy, body, kTwoPools);
}

// A valid policy's keys on lines 2..4 of its table; `extra` from line 5.
std::string valid_policy(std::string_view extra = "", std::string_view name = "p") {
  return "name = \"" + std::string(name) +
         "\"\nselector = { tenant = { key = \"header:x-tenant-id\" } }\n"
         "burst = { requests = 10, window = \"1s\" }\n" +
         std::string(extra);
}

// A policy with its name on line 2, its burst on line 3 and `selector` from line 4 on.
std::string policy_with_selector(std::string_view selector) {
  return "name = \"p\"\nburst = { requests = 10, window = \"1s\" }\n" + std::string(selector);
}

std::string error_at(int line, int column, std::string_view path, std::string_view message) {
  return "test.toml:" + std::to_string(line) + ":" + std::to_string(column) +
         ": error: " + std::string(path) + ": " + std::string(message);
}

// The quota of a document that must be valid and without diagnostics.
QuotaParams only_quota(const LoadResult& r) {
  if (!r.ok() || !r.diagnostics.empty()) {
    ADD_FAILURE() << "expected a valid document without diagnostics:\n" << dump(r);
    return {};
  }
  return r.config->resilience.quota;
}

// The redis target of a backend table whose only keys are kind = "redis" and this url.
RedisTarget target(std::string_view url) {
  return only_quota(backend("kind = \"redis\"\nurl = \"" + std::string(url) + "\"")).backend.redis;
}

// --- defaults and every key ------------------------------------------------------------------

TEST(ConfigQuota, IsOffWithAnInMemoryBackendByDefault) {
  const QuotaParams q = only_quota(load(testing::kMinimal));
  EXPECT_EQ(q, QuotaParams{});
  EXPECT_FALSE(q.enabled);
  EXPECT_EQ(q.enforcement, Mode::enforce);
  EXPECT_EQ(q.backend_failure_policy, BackendFailurePolicy::fail_closed);
  EXPECT_EQ(q.backend.kind, QuotaBackendKind::in_memory);
  EXPECT_EQ(q.backend.key_prefix, "floodgate:quota");
  EXPECT_EQ(q.backend.connect_timeout, 250ms);
  EXPECT_EQ(q.backend.command_timeout, 100ms);
  EXPECT_EQ(q.backend.max_inflight, 1024u);
  EXPECT_FALSE(q.local_fallback.has_value());
  EXPECT_TRUE(q.policies.empty());
}

TEST(ConfigQuota, KeepsTheDefaultsForAnEmptyTable) {
  EXPECT_EQ(only_quota(quota("")), QuotaParams{});
}

TEST(ConfigQuota, AnEnabledQuotaIsCheckedWithoutAWarning) {
  const LoadResult r = load("[resilience.quota]\nenabled = true\n" + std::string(kPolicy) +
                            "\nname = \"p\"\nselector = { route = true }\n"
                            "burst = { requests = 10, window = \"1s\" }\n\n" +
                            std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigQuota, ReadsEveryKey) {
  const LoadResult r = load(
      "[server]\ntrusted_proxies = [\"10.0.0.0/8\"]\n"
      "[resilience.quota]\nenabled = true\nenforcement = \"shadow\"\n"
      "backend_failure_policy = \"fail_open\"\n"
      "[resilience.quota.backend]\nkind = \"redis\"\nkey_prefix = \"floodgate:quota:prod\"\n"
      "url = \"redis://app:s3cret@127.0.0.1:6380/2\"\nconnect_timeout = \"500ms\"\n"
      "command_timeout = \"50ms\"\nmax_inflight = 64\n"
      "[resilience.quota.local_fallback]\nkey_prefix = \"floodgate:quota:fallback:prod\"\n"
      "max_entries = 50000\n"
      "[[resilience.quota.policies]]\nname = \"payments-by-tenant\"\n"
      "route_allowlist = [\"billing\"]\n"
      "selector = { route = true, tenant = { key = \"header:X-Tenant-Id\" } }\n"
      "burst = { requests = 100, window = \"1s\" }\n"
      "sustained = { requests = 5000, window = \"1m\" }\n"
      "[[resilience.quota.policies]]\nname = \"per-client\"\n"
      "selector = { token = { key = \"bearer_token\" }, client = { key = \"client_ip\" } }\n"
      "sustained = { requests = 10, window = \"1h\" }\n\n" +
      std::string(kTwoPools));
  QuotaParams expected;
  expected.enabled = true;
  expected.enforcement = Mode::shadow;
  expected.backend_failure_policy = BackendFailurePolicy::fail_open;
  expected.backend = {.kind = QuotaBackendKind::redis,
                      .key_prefix = "floodgate:quota:prod",
                      .redis = {.host = "127.0.0.1",
                                .address = "127.0.0.1",
                                .port = 6380,
                                .db = 2,
                                .username = "app",
                                .password = "s3cret"},
                      .connect_timeout = 500ms,
                      .command_timeout = 50ms,
                      .max_inflight = 64};
  expected.local_fallback =
      QuotaLocalFallbackParams{.key_prefix = "floodgate:quota:fallback:prod", .max_entries = 50000};
  expected.policies = {
      QuotaPolicyParams{.name = "payments-by-tenant",
                        .route_allowlist = {"billing"},
                        .selector = {.route = true, .tenant = {Kind::header, "x-tenant-id"}},
                        .burst = QuotaWindow{100, 1s},
                        .sustained = QuotaWindow{5000, 1min}},
      QuotaPolicyParams{
          .name = "per-client",
          .route_allowlist = {},
          .selector = {.token = {Kind::bearer_token, ""}, .client = {Kind::client_ip, ""}},
          .burst = std::nullopt,
          .sustained = QuotaWindow{10, 1h}},
  };
  EXPECT_EQ(only_quota(r), expected);
}

TEST(ConfigQuota, ReadsTheWindowsAndTheSelectorAsSubTables) {
  const LoadResult r = policy(
      "name = \"p\"\n[resilience.quota.policies.selector]\nroute = true\n"
      "[resilience.quota.policies.selector.client]\nkey = \"peer_ip\"\n"
      "[resilience.quota.policies.burst]\nrequests = 3\nwindow = \"250ms\"\n"
      "[resilience.quota.policies.sustained]\nrequests = 30\nwindow = \"10s\"");
  const QuotaParams q = only_quota(r);
  ASSERT_EQ(q.policies.size(), 1u);
  EXPECT_EQ(q.policies[0].selector, (QuotaSelector{.route = true, .client = {Kind::peer_ip, ""}}));
  EXPECT_EQ(q.policies[0].burst, (QuotaWindow{3, 250ms}));
  EXPECT_EQ(q.policies[0].sustained, (QuotaWindow{30, 10s}));
}

TEST(ConfigQuota, KeepsThePoliciesInFileOrder) {
  const LoadResult r =
      load(std::string(kPolicy) + "\n" + valid_policy("", "b") + std::string(kPolicy) + "\n" +
           valid_policy("sustained = { requests = 100, window = \"1m\" }", "a") + "\n\n" +
           std::string(kTwoPools));
  const QuotaParams q = only_quota(r);
  ASSERT_EQ(q.policies.size(), 2u);
  EXPECT_EQ(q.policies[0].name, "b");
  EXPECT_EQ(q.policies[1].name, "a");
}

TEST(ConfigQuota, AcceptsTheBoundsOfAWindow) {
  const QuotaParams q =
      only_quota(policy("name = \"p\"\nselector = { route = true }\n"
                        "burst = { requests = 1, window = \"1ms\" }\n"
                        "sustained = { requests = 1000000000, window = \"8760h\" }"));
  ASSERT_EQ(q.policies.size(), 1u);
  EXPECT_EQ(q.policies[0].burst, (QuotaWindow{1, 1ms}));
  EXPECT_EQ(q.policies[0].sustained, (QuotaWindow{1'000'000'000, 8760h}));
}

TEST(ConfigQuota, AcceptsAnInMemoryBackendWithItsPrefix) {
  const QuotaParams q = only_quota(backend("kind = \"in_memory\"\nkey_prefix = \"fg:q\""));
  EXPECT_EQ(q.backend.kind, QuotaBackendKind::in_memory);
  EXPECT_EQ(q.backend.key_prefix, "fg:q");
}

TEST(ConfigQuota, AcceptsALocalFallbackWithTheDefaultPrefix) {
  const LoadResult r = load(
      "[resilience.quota.backend]\nkind = \"redis\"\nurl = \"redis://127.0.0.1\"\n"
      "[resilience.quota.local_fallback]\nmax_entries = 1\n\n" +
      std::string(kTwoPools));
  EXPECT_EQ(only_quota(r).local_fallback,
            (QuotaLocalFallbackParams{.key_prefix = "floodgate:quota:fallback", .max_entries = 1}));
}

// --- the url ---------------------------------------------------------------------------------

struct UrlCase {
  std::string_view name;
  std::string_view url;
  RedisTarget expected;
};

void PrintTo(const UrlCase& c, std::ostream* os) {
  *os << c.url;
}

class ConfigQuotaUrls : public ::testing::TestWithParam<UrlCase> {};

TEST_P(ConfigQuotaUrls, AreParsedIntoTheTarget) {
  EXPECT_EQ(target(GetParam().url), GetParam().expected);
}

RedisTarget v4(uint16_t port = 6379, uint32_t db = 0, std::string_view user = "",
               std::string_view password = "") {
  return {.host = "127.0.0.1",
          .address = "127.0.0.1",
          .port = port,
          .db = db,
          .username = std::string(user),
          .password = std::string(password)};
}

INSTANTIATE_TEST_SUITE_P(
    EveryForm, ConfigQuotaUrls,
    ::testing::Values(
        UrlCase{"host_only", "redis://127.0.0.1", v4()},
        UrlCase{"host_and_port", "redis://127.0.0.1:6380", v4(6380)},
        UrlCase{"host_port_and_db", "redis://127.0.0.1:6379/3", v4(6379, 3)},
        UrlCase{"db_without_port", "redis://127.0.0.1/2", v4(6379, 2)},
        UrlCase{"trailing_slash", "redis://127.0.0.1:6379/", v4()},
        UrlCase{"password", "redis://:s3cret@127.0.0.1:6379/0", v4(6379, 0, "", "s3cret")},
        UrlCase{"user_and_password", "redis://app:s3cret@127.0.0.1:6379/1",
                v4(6379, 1, "app", "s3cret")},
        UrlCase{"percent_encoded_password", "redis://:p%40ss%3aword@127.0.0.1",
                v4(6379, 0, "", "p@ss:word")},
        UrlCase{"raw_at_in_password", "redis://:p@ss@127.0.0.1", v4(6379, 0, "", "p@ss")},
        UrlCase{"upper_case_scheme", "REDIS://127.0.0.1", v4()},
        UrlCase{"largest_port_and_db", "redis://127.0.0.1:65535/2147483647", v4(65535, 2147483647)},
        UrlCase{"ipv6",
                "redis://[::1]:6379/0",
                {.host = "::1", .address = "::1", .port = 6379, .db = 0}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigQuota, ResolvesAHostNameWhenTheConfigurationIsLoaded) {
  const RedisTarget t = target("redis://LocalHost:6379/0");
  EXPECT_EQ(t.host, "localhost");
  EXPECT_TRUE(t.address == "127.0.0.1" || t.address == "::1") << t.address;
  EXPECT_EQ(t.port, 6379);
}

TEST(ConfigQuota, RefusesAHostNameThatDoesNotResolve) {
  const LoadResult r = backend("kind = \"redis\"\nurl = \"redis://no-such-host.invalid:6379/0\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_EQ(d.path, "resilience.quota.backend.url");
  EXPECT_EQ(d.line, 3);
  EXPECT_TRUE(
      d.message.starts_with("url = \"redis://no-such-host.invalid:6379/0\": cannot resolve "
                            "'no-such-host.invalid' ("))
      << d.message;
  EXPECT_TRUE(d.message.ends_with(
      "); fix the name, or write the server's IP address: floodgate resolves the name when it "
      "loads the configuration, and again at each reload"))
      << d.message;
}

struct UrlError {
  std::string_view name;
  std::string_view url;
  std::string_view message;  // after "url = "
};

void PrintTo(const UrlError& c, std::ostream* os) {
  *os << c.url;
}

class ConfigQuotaUrlErrors : public ::testing::TestWithParam<UrlError> {};

TEST_P(ConfigQuotaUrlErrors, NameTheUrlWithoutItsPasswordAndTheFix) {
  EXPECT_EQ(
      only(backend("kind = \"redis\"\nurl = \"" + std::string(GetParam().url) + "\"")),
      error_at(3, 1, "resilience.quota.backend.url", "url = " + std::string(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, ConfigQuotaUrlErrors,
    ::testing::Values(
        UrlError{"no_scheme", "cache:6379",
                 "\"cache:6379\" is not a Redis URL; write redis://[:password@]host[:port][/db], "
                 "e.g. \"redis://127.0.0.1:6379/0\""},
        UrlError{"empty", "",
                 "\"\" is not a Redis URL; write redis://[:password@]host[:port][/db], e.g. "
                 "\"redis://127.0.0.1:6379/0\""},
        UrlError{"other_scheme", "http://127.0.0.1:6379",
                 "\"http://127.0.0.1:6379\" is not a Redis URL: its scheme is \"http\"; write "
                 "redis://[:password@]host[:port][/db], e.g. \"redis://127.0.0.1:6379/0\""},
        UrlError{"tls", "rediss://127.0.0.1:6379",
                 "\"rediss://127.0.0.1:6379\" asks for TLS (rediss://), which floodgate's Redis "
                 "client does not speak; write redis:// and reach Redis over a trusted network"},
        UrlError{"port_zero", "redis://127.0.0.1:0",
                 "\"redis://127.0.0.1:0\": the port must be a number from 1 to 65535 (6379 when "
                 "left out)"},
        UrlError{"port_too_large", "redis://127.0.0.1:65536",
                 "\"redis://127.0.0.1:65536\": the port must be a number from 1 to 65535 (6379 "
                 "when left out)"},
        UrlError{"port_not_a_number", "redis://127.0.0.1:redis",
                 "\"redis://127.0.0.1:redis\": the port must be a number from 1 to 65535 (6379 "
                 "when left out)"},
        UrlError{"port_empty", "redis://127.0.0.1:",
                 "\"redis://127.0.0.1:\": the port must be a number from 1 to 65535 (6379 when "
                 "left out)"},
        UrlError{"db_not_a_number", "redis://127.0.0.1:6379/zero",
                 "\"redis://127.0.0.1:6379/zero\": the database after the '/' must be a number "
                 "from 0 to 2147483647 (0 when left out)"},
        UrlError{"db_too_large", "redis://127.0.0.1/2147483648",
                 "\"redis://127.0.0.1/2147483648\": the database after the '/' must be a number "
                 "from 0 to 2147483647 (0 when left out)"},
        UrlError{"path_after_db", "redis://127.0.0.1/0/1",
                 "\"redis://127.0.0.1/0/1\": the database after the '/' must be a number from 0 "
                 "to 2147483647 (0 when left out)"},
        UrlError{"query", "redis://127.0.0.1:6379/0?timeout=1",
                 "\"redis://127.0.0.1:6379/0?timeout=1\": a query or fragment ('?', '#') is not "
                 "read; remove it (the timeouts are the keys connect_timeout and "
                 "command_timeout)"},
        UrlError{"password_without_colon", "redis://s3cret@127.0.0.1",
                 "\"redis://***@127.0.0.1\" has user information without a ':'; write a "
                 "password as redis://:<password>@host, or an ACL user and its password as "
                 "redis://<user>:<password>@host"},
        UrlError{"empty_password", "redis://app:@127.0.0.1",
                 "\"redis://app:@127.0.0.1\" has an empty password; write it after the ':', or "
                 "remove the user information for a Redis without AUTH"},
        UrlError{"bad_percent", "redis://:s3cret%zz@127.0.0.1",
                 "\"redis://:***@127.0.0.1\" has a '%' in its user information that is not "
                 "followed by two hex digits; write a '%' itself as %25"},
        UrlError{"no_host", "redis://:6379",
                 "\"redis://:6379\" names no host; write e.g. \"redis://127.0.0.1:6379/0\""},
        UrlError{"no_host_after_password", "redis://:s3cret@/0",
                 "\"redis://:***@/0\" names no host; write e.g. \"redis://127.0.0.1:6379/0\""},
        UrlError{"ipv6_without_brackets", "redis://::1:6379",
                 "\"redis://::1:6379\": an IPv6 address needs brackets; write e.g. "
                 "\"redis://[::1]:6379/0\""},
        UrlError{"unclosed_bracket", "redis://[::1:6379",
                 "\"redis://[::1:6379\": '[' without ']'; write e.g. \"redis://[::1]:6379/0\""},
        UrlError{"not_ipv6", "redis://[cache]:6379",
                 "\"redis://[cache]:6379\": 'cache' is not an IPv6 address; write e.g. "
                 "\"redis://[::1]:6379/0\""},
        UrlError{"junk_after_bracket", "redis://[::1]6379",
                 "\"redis://[::1]6379\": only \":port\" may follow ']'; write e.g. "
                 "\"redis://[::1]:6379/0\""},
        UrlError{"bad_ipv4", "redis://127.0.0.256",
                 "\"redis://127.0.0.256\": '127.0.0.256' is not an IPv4 address; write four "
                 "numbers 0..255, e.g. 127.0.0.1"},
        UrlError{"bad_host_name", "redis://cache_1:6379",
                 "\"redis://cache_1:6379\": 'cache_1' is neither a host name (letters, digits, "
                 "'-' and '.') nor an IP address"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigQuota, NeverQuotesThePasswordOfAUrl) {
  const LoadResult r =
      backend("kind = \"redis\"\nurl = \"redis://app:hunter2@no-such-host.invalid\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].message.find("hunter2"), std::string::npos) << dump(r);
  EXPECT_NE(r.diagnostics[0].message.find("redis://app:***@no-such-host.invalid"),
            std::string::npos)
      << dump(r);
}

// --- the selector source matrix ----------------------------------------------------------------

struct MatrixCase {
  std::string_view dimension;
  std::string_view source;
  KeySource parsed;          // Kind::none: refused
  std::string_view because;  // the reason a refused source gives
};

void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << c.dimension << " " << c.source;
}

class ConfigQuotaSelectorMatrix : public ::testing::TestWithParam<MatrixCase> {};

// The dimension as a sub-table: its key on line 5, column 1.
LoadResult dimension(std::string_view dim, std::string_view source) {
  return policy(policy_with_selector("[resilience.quota.policies.selector." + std::string(dim) +
                                     "]\nkey = \"" + std::string(source) + "\""));
}

KeySource selected(const QuotaSelector& s, std::string_view dim) {
  return dim == "tenant" ? s.tenant : dim == "token" ? s.token : s.client;
}

TEST_P(ConfigQuotaSelectorMatrix, AcceptsExactlyTheSeedsSources) {
  const MatrixCase& c = GetParam();
  LoadResult r = dimension(c.dimension, c.source);
  if (c.parsed.kind != Kind::none) {
    // client_ip without a trusted proxy is worth a warning, not an error.
    ASSERT_TRUE(r.ok()) << dump(r);
    EXPECT_EQ(selected(r.config->resilience.quota.policies.at(0).selector, c.dimension), c.parsed);
    return;
  }
  const std::string dim(c.dimension);
  const std::string accepts =
      dim == "client" ? "header:<name>, cookie:<name>, query:<name>, peer_ip or client_ip"
                      : "header:<name>, cookie:<name>, query:<name> or bearer_token";
  const std::string example = dim == "tenant"  ? "\"header:x-tenant-id\""
                              : dim == "token" ? "\"bearer_token\""
                                               : "\"peer_ip\"";
  EXPECT_EQ(only(r), error_at(5, 1, "resilience.quota.policies[0].selector." + dim + ".key",
                              "key = \"" + std::string(c.source) + "\" cannot identify the " + dim +
                                  " of a quota selector: " + dim + " takes " + accepts + " (" +
                                  std::string(c.because) + "); e.g. key = " + example));
}

std::vector<MatrixCase> matrix() {
  std::vector<MatrixCase> out;
  for (const std::string_view dim : {"tenant", "token", "client"}) {
    const bool client = dim == "client";
    const std::string_view not_a = dim == "tenant" ? "path, authority, method and cid describe a "
                                                     "request or its connection, not a tenant"
                                   : dim == "token"
                                       ? "path, authority, method and cid describe a request or "
                                         "its connection, not a token"
                                       : "path, authority, method and cid describe a request or "
                                         "its connection, not a client";
    out.push_back({dim, "header:X-Id", {Kind::header, "x-id"}, ""});
    out.push_back({dim, "cookie:sid", {Kind::cookie, "sid"}, ""});
    out.push_back({dim, "query:api_key", {Kind::query, "api_key"}, ""});
    for (const std::string_view refused : {"path", "authority", "method", "cid", "sticky-cid"}) {
      out.push_back({dim, refused, {}, not_a});
    }
    if (client) {
      out.push_back({dim, "peer_ip", {Kind::peer_ip, ""}, ""});
      out.push_back({dim, "client_ip", {Kind::client_ip, ""}, ""});
      out.push_back({dim,
                     "bearer_token",
                     {},
                     "a bearer token identifies a token: select it as token = { key = "
                     "\"bearer_token\" }"});
    } else {
      out.push_back({dim,
                     "peer_ip",
                     {},
                     "an address identifies a client: select it as client = { key = "
                     "\"peer_ip\" }"});
      out.push_back({dim,
                     "client_ip",
                     {},
                     "an address identifies a client: select it as client = { key = "
                     "\"client_ip\" }"});
      out.push_back({dim, "bearer_token", {Kind::bearer_token, ""}, ""});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryDimensionAndSource, ConfigQuotaSelectorMatrix,
                         ::testing::ValuesIn(matrix()), [](const auto& info) {
                           std::string name = std::string(info.param.dimension) + "_";
                           for (const char c : info.param.source) {
                             const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
                             name += alnum ? c : '_';
                           }
                           return name;
                         });

TEST(ConfigQuota, AcceptsDifferentSourcesInEveryDimension) {
  const QuotaParams q = only_quota(policy(policy_with_selector(
      "selector = { route = true, tenant = { key = \"header:x-tenant\" }, token = { key = "
      "\"header:x-token\" }, client = { key = \"header:x-client\" } }")));
  ASSERT_EQ(q.policies.size(), 1u);
  EXPECT_EQ(q.policies[0].selector, (QuotaSelector{.route = true,
                                                   .tenant = {Kind::header, "x-tenant"},
                                                   .token = {Kind::header, "x-token"},
                                                   .client = {Kind::header, "x-client"}}));
}

struct ReuseCase {
  std::string_view name;
  std::string_view first_dim;
  std::string_view first;
  std::string_view second_dim;
  std::string_view second;
};

void PrintTo(const ReuseCase& c, std::ostream* os) {
  *os << c.name;
}

class ConfigQuotaSourceReuse : public ::testing::TestWithParam<ReuseCase> {};

TEST_P(ConfigQuotaSourceReuse, IsRefusedAtTheLaterDimension) {
  const ReuseCase& c = GetParam();
  const LoadResult r = policy(policy_with_selector(
      "[resilience.quota.policies.selector." + std::string(c.first_dim) + "]\nkey = \"" +
      std::string(c.first) + "\"\n[resilience.quota.policies.selector." +
      std::string(c.second_dim) + "]\nkey = \"" + std::string(c.second) + "\""));
  EXPECT_EQ(
      only(r),
      error_at(7, 1, "resilience.quota.policies[0].selector." + std::string(c.second_dim) + ".key",
               "key = \"" + std::string(c.second) +
                   "\" is the same request-key source as selector." + std::string(c.first_dim) +
                   ".key = \"" + std::string(c.first) +
                   "\", so both dimensions would hold the same value; a source keys one "
                   "dimension of a selector: take the " +
                   std::string(c.second_dim) + " from another source, or remove one of the two"));
}

INSTANTIATE_TEST_SUITE_P(
    NormalisedSources, ConfigQuotaSourceReuse,
    ::testing::Values(ReuseCase{"header_in_another_case", "tenant", "header:X-Id", "token",
                                "header:x-id"},
                      ReuseCase{"cookie", "tenant", "cookie:sid", "client", "cookie:sid"},
                      ReuseCase{"query", "token", "query:key", "client", "query:key"},
                      ReuseCase{"bearer_token", "tenant", "bearer_token", "token", "bearer_token"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigQuota, TellsCookiesAndQueryParametersOfTheSameNameApart) {
  const LoadResult r = policy(policy_with_selector(
      "selector = { tenant = { key = \"cookie:id\" }, client = { key = \"query:id\" } }"));
  EXPECT_TRUE(r.ok()) << dump(r);
}

// --- every other rule, with the message the operator sees ---------------------------------------

struct QuotaError {
  std::string name;
  std::string header;    // line 1
  std::string body;      // from line 2
  std::string expected;  // the one diagnostic, formatted
};

void PrintTo(const QuotaError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigQuotaErrors : public ::testing::TestWithParam<QuotaError> {};

TEST_P(ConfigQuotaErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(testing::load_table(GetParam().header, GetParam().body, kTwoPools)),
            GetParam().expected);
}

const std::string kQuotaTable = "[resilience.quota]";
const std::string kBackend = "[resilience.quota.backend]";
const std::string kFallback = "[resilience.quota.local_fallback]";
const std::string kPolicies(kPolicy);

INSTANTIATE_TEST_SUITE_P(
    PolicySet, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"enabled_without_policies", kQuotaTable, "enabled = true",
                   error_at(2, 1, "resilience.quota.enabled",
                            "enabled = true, but [resilience.quota] has no policy, so it would "
                            "count nothing; add a [[resilience.quota.policies]] entry (a name, a "
                            "selector and a burst or sustained window), or set enabled = false")},
        QuotaError{"enabled_with_an_empty_array", kQuotaTable, "enabled = true\npolicies = []",
                   error_at(2, 1, "resilience.quota.enabled",
                            "enabled = true, but [resilience.quota] has no policy, so it would "
                            "count nothing; add a [[resilience.quota.policies]] entry (a name, a "
                            "selector and a burst or sustained window), or set enabled = false")},
        QuotaError{"enabled_not_a_boolean", kQuotaTable, "enabled = \"yes\"",
                   error_at(2, 1, "resilience.quota.enabled",
                            "expected a boolean, got a string (\"yes\"); e.g. enabled = true")},
        QuotaError{"enforcement_unknown", kQuotaTable, "enforcement = \"dry_run\"",
                   error_at(2, 1, "resilience.quota.enforcement",
                            "unknown value \"dry_run\"; expected enforce or shadow")},
        QuotaError{"failure_policy_unknown", kQuotaTable, "backend_failure_policy = \"fail_closd\"",
                   error_at(2, 1, "resilience.quota.backend_failure_policy",
                            "unknown value \"fail_closd\"; expected fail_open or fail_closed")},
        QuotaError{"seed_mode_key", kQuotaTable, "mode = \"shadow\"",
                   error_at(2, 1, "resilience.quota.mode",
                            "unknown key 'mode' in [resilience.quota]; 'mode' belongs in "
                            "[resilience.inflight], [resilience.memory_guard], "
                            "[resilience.protocol], [resilience.circuit_breaker], "
                            "[resilience.adaptive_admission], [resilience.brownout], "
                            "[resilience.route_queue] or a [[resilience.scoped_rate_limits]] "
                            "rule ([resilience.quota] has enforcement instead)")},
        QuotaError{"backend_key_in_the_quota_table", kQuotaTable, "url = \"redis://127.0.0.1\"",
                   error_at(2, 1, "resilience.quota.url",
                            "unknown key 'url' in [resilience.quota]; 'url' belongs in "
                            "[resilience.quota.backend]")},
        QuotaError{"policies_as_a_single_table", "[resilience.quota.policies]", valid_policy(),
                   error_at(1, 1, "resilience.quota.policies",
                            "expected an array of tables, got a table; e.g. "
                            "[[resilience.quota.policies]] (double brackets) for each entry")}),
    [](const auto& info) { return info.param.name; });

std::string redis_only(std::string_view key) {
  return std::string(key) +
         " is only for kind = \"redis\": the in-memory backend keeps its counters in this "
         "process and talks to no server; remove " +
         std::string(key) + ", or set kind = \"redis\"";
}

INSTANTIATE_TEST_SUITE_P(
    Backend, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"kind_missing", kBackend, "key_prefix = \"q\"",
                   error_at(1, 1, "resilience.quota.backend.kind",
                            "missing required key 'kind'; add kind = \"redis\" to this "
                            "[resilience.quota.backend]")},
        QuotaError{"kind_unknown", kBackend, "kind = \"memcached\"",
                   error_at(2, 1, "resilience.quota.backend.kind",
                            "unknown value \"memcached\"; expected in_memory or redis")},
        QuotaError{"redis_without_url", kBackend, "kind = \"redis\"",
                   error_at(1, 1, "resilience.quota.backend.url",
                            "missing required key 'url'; add url = \"redis://127.0.0.1:6379/0\" "
                            "to this [resilience.quota.backend]")},
        QuotaError{"url_not_a_string", kBackend, "kind = \"redis\"\nurl = 6379",
                   error_at(3, 1, "resilience.quota.backend.url",
                            "expected a string, got an integer (6379); e.g. url = "
                            "\"redis://127.0.0.1:6379/0\"")},
        QuotaError{"in_memory_with_url", kBackend,
                   "kind = \"in_memory\"\nurl = \"redis://127.0.0.1\"",
                   error_at(3, 1, "resilience.quota.backend.url", redis_only("url"))},
        QuotaError{"in_memory_with_connect_timeout", kBackend,
                   "kind = \"in_memory\"\nconnect_timeout = \"1s\"",
                   error_at(3, 1, "resilience.quota.backend.connect_timeout",
                            redis_only("connect_timeout"))},
        QuotaError{"in_memory_with_command_timeout", kBackend,
                   "kind = \"in_memory\"\ncommand_timeout = \"1s\"",
                   error_at(3, 1, "resilience.quota.backend.command_timeout",
                            redis_only("command_timeout"))},
        QuotaError{
            "in_memory_with_max_inflight", kBackend, "kind = \"in_memory\"\nmax_inflight = 8",
            error_at(3, 1, "resilience.quota.backend.max_inflight", redis_only("max_inflight"))},
        QuotaError{"connect_timeout_zero", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\nconnect_timeout = \"0ms\"",
                   error_at(4, 1, "resilience.quota.backend.connect_timeout",
                            "must be greater than 0; e.g. connect_timeout = \"250ms\"")},
        QuotaError{"command_timeout_zero", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\ncommand_timeout = \"0s\"",
                   error_at(4, 1, "resilience.quota.backend.command_timeout",
                            "must be greater than 0; e.g. command_timeout = \"100ms\"")},
        QuotaError{"command_timeout_integer", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\ncommand_timeout = 100",
                   error_at(4, 1, "resilience.quota.backend.command_timeout",
                            "expected a duration string with a unit, got an integer (100); "
                            "write command_timeout = \"100s\" or \"100ms\"")},
        QuotaError{"seed_connect_timeout_ms", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\nconnect_timeout_ms = 250",
                   error_at(4, 1, "resilience.quota.backend.connect_timeout_ms",
                            "unknown key 'connect_timeout_ms' in [resilience.quota.backend]; "
                            "'connect_timeout_ms' belongs in [resilience.quota.backend], as "
                            "connect_timeout (a duration: connect_timeout = \"250ms\")")},
        QuotaError{"seed_command_timeout_ms", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\ncommand_timeout_ms = 100",
                   error_at(4, 1, "resilience.quota.backend.command_timeout_ms",
                            "unknown key 'command_timeout_ms' in [resilience.quota.backend]; "
                            "'command_timeout_ms' belongs in [resilience.quota.backend], as "
                            "command_timeout (a duration: command_timeout = \"100ms\")")},
        QuotaError{"max_inflight_zero", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\nmax_inflight = 0",
                   error_at(4, 1, "resilience.quota.backend.max_inflight",
                            "0 is out of range; use an integer from 1 to 1000000")},
        QuotaError{"max_inflight_above_bound", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\nmax_inflight = 1000001",
                   error_at(4, 1, "resilience.quota.backend.max_inflight",
                            "1000001 is out of range; use an integer from 1 to 1000000")},
        QuotaError{"key_prefix_empty", kBackend, "kind = \"in_memory\"\nkey_prefix = \"\"",
                   error_at(3, 1, "resilience.quota.backend.key_prefix",
                            "key_prefix cannot be empty: it keeps the quota's counters apart "
                            "from the other keys of the store; e.g. key_prefix = "
                            "\"floodgate:quota:prod\"")},
        QuotaError{"key_prefix_with_a_hash_tag", kBackend,
                   "kind = \"in_memory\"\nkey_prefix = \"{quota}\"",
                   error_at(3, 1, "resilience.quota.backend.key_prefix",
                            "key_prefix = \"{quota}\" holds '{' or '}', which floodgate keeps "
                            "for the hash tag of each decision's keys (Redis Cluster hashes the "
                            "first {...} of a key); remove them, e.g. key_prefix = "
                            "\"floodgate:quota:prod\"")},
        QuotaError{"key_prefix_with_a_space", kBackend,
                   "kind = \"in_memory\"\nkey_prefix = \"my quota\"",
                   error_at(3, 1, "resilience.quota.backend.key_prefix",
                            "key_prefix = \"my quota\" holds a space or a control character; "
                            "e.g. key_prefix = \"floodgate:quota:prod\"")},
        QuotaError{"key_prefix_too_long", kBackend,
                   "kind = \"in_memory\"\nkey_prefix = \"" + std::string(129, 'q') + "\"",
                   error_at(3, 1, "resilience.quota.backend.key_prefix",
                            "key_prefix is 129 bytes long; at most 128 (it starts every counter "
                            "key), e.g. key_prefix = \"floodgate:quota:prod\"")},
        QuotaError{"unknown_key", kBackend,
                   "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\nhost = \"x\"",
                   error_at(4, 1, "resilience.quota.backend.host",
                            "unknown key 'host' in [resilience.quota.backend]; 'host' belongs "
                            "in a [[routes]] entry (or [upstreams.health] for the probe's Host "
                            "header)")}),
    [](const auto& info) { return info.param.name; });

// A redis backend on lines 2..3, then `fallback` from line 4 (its header) on.
std::string with_redis(std::string_view fallback) {
  return "kind = \"redis\"\nurl = \"redis://127.0.0.1\"\n" + std::string(fallback);
}

INSTANTIATE_TEST_SUITE_P(
    LocalFallback, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"with_the_default_backend", kFallback, "max_entries = 10",
                   error_at(1, 1, "resilience.quota.local_fallback",
                            "local_fallback is only for a redis backend: it decides when Redis "
                            "times out or is unavailable, and the in-memory backend has no "
                            "server to lose; remove [resilience.quota.local_fallback], or set "
                            "[resilience.quota.backend] kind = \"redis\"")},
        QuotaError{"max_entries_missing", kBackend, with_redis(kFallback + "\nkey_prefix = \"f\""),
                   error_at(4, 1, "resilience.quota.local_fallback.max_entries",
                            "missing required key 'max_entries'; add max_entries = 50000 to this "
                            "[resilience.quota.local_fallback]")},
        QuotaError{"max_entries_zero", kBackend, with_redis(kFallback + "\nmax_entries = 0"),
                   error_at(5, 1, "resilience.quota.local_fallback.max_entries",
                            "0 is out of range; use an integer from 1 to 1000000")},
        QuotaError{"max_entries_not_an_integer", kBackend,
                   with_redis(kFallback + "\nmax_entries = \"50000\""),
                   error_at(5, 1, "resilience.quota.local_fallback.max_entries",
                            "expected an integer, got a string (\"50000\"); e.g. max_entries = "
                            "50000")},
        QuotaError{"key_prefix_empty", kBackend,
                   with_redis(kFallback + "\nkey_prefix = \"\"\nmax_entries = 1"),
                   error_at(5, 1, "resilience.quota.local_fallback.key_prefix",
                            "key_prefix cannot be empty: it keeps the quota's counters apart "
                            "from the other keys of the store; e.g. key_prefix = "
                            "\"floodgate:quota:prod\"")},
        QuotaError{"backend_key_in_the_fallback", kBackend,
                   with_redis(kFallback + "\nmax_entries = 1\nkind = \"redis\""),
                   error_at(6, 1, "resilience.quota.local_fallback.kind",
                            "unknown key 'kind' in [resilience.quota.local_fallback]; 'kind' "
                            "belongs in [resilience.quota.backend]")}),
    [](const auto& info) { return info.param.name; });

std::string policy_error(int line, int column, std::string_view key, std::string_view message) {
  return error_at(line, column, "resilience.quota.policies[0]" + std::string(key), message);
}

INSTANTIATE_TEST_SUITE_P(
    NamesAndAllowlists, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"name_missing", kPolicies,
                   "selector = { route = true }\nburst = { requests = 1, window = \"1s\" }",
                   policy_error(1, 1, ".name",
                                "missing required key 'name'; add name = \"per-tenant\" to this "
                                "[[resilience.quota.policies]]")},
        QuotaError{"name_empty", kPolicies,
                   "name = \"\"\nselector = { route = true }\n"
                   "burst = { requests = 1, window = \"1s\" }",
                   policy_error(2, 1, ".name",
                                "a policy name cannot be empty: it names the policy in its "
                                "metrics and is the first part of its counters' keys; e.g. name "
                                "= \"per-tenant\"")},
        QuotaError{"name_with_a_colon", kPolicies,
                   "name = \"per:tenant\"\nselector = { route = true }\n"
                   "burst = { requests = 1, window = \"1s\" }",
                   policy_error(2, 1, ".name",
                                "\"per:tenant\" is not a valid policy name; use one or more "
                                "letters, digits, '_', '.' or '-' (it is a metric label and the "
                                "first part of its counters' keys), e.g. \"per-tenant\"")},
        QuotaError{"name_not_a_string", kPolicies,
                   "name = 1\nselector = { route = true }\n"
                   "burst = { requests = 1, window = \"1s\" }",
                   policy_error(2, 1, ".name",
                                "expected a string, got an integer (1); e.g. name = "
                                "\"per-tenant\"")},
        QuotaError{"allowlist_undefined", kPolicies, valid_policy("route_allowlist = [\"biling\"]"),
                   policy_error(5, 20, ".route_allowlist[0]",
                                "upstream 'biling' is not defined (did you mean 'billing'?); "
                                "route_allowlist takes the names of [[upstreams]] entries: fix "
                                "the name, or define [[upstreams]] name = \"biling\"")},
        QuotaError{"allowlist_empty_name", kPolicies, valid_policy("route_allowlist = [\"\"]"),
                   policy_error(5, 20, ".route_allowlist[0]",
                                "an upstream name cannot be empty; write the name of an "
                                "[[upstreams]] entry, e.g. \"app\"")},
        QuotaError{"unknown_key", kPolicies, valid_policy("limit = 5"),
                   policy_error(
                       5, 1, ".limit",
                       "unknown key 'limit' in [[resilience.quota.policies]]; expected "
                       "one of: name, route_allowlist, selector, missing_key, burst, sustained")}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Selectors, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"selector_missing", kPolicies,
                   "name = \"p\"\nburst = { requests = 1, window = \"1s\" }",
                   policy_error(1, 1, ".selector",
                                "missing required key 'selector': a policy's counters are keyed "
                                "by at least one of route, tenant, token and client; add e.g. "
                                "selector = { tenant = { key = \"header:x-tenant-id\" } } to "
                                "this [[resilience.quota.policies]]")},
        QuotaError{"selector_empty", kPolicies, policy_with_selector("selector = {}"),
                   policy_error(4, 1, ".selector",
                                "the selector has no dimension, so nothing keys the policy's "
                                "counters; select at least one: route = true (the upstream), or "
                                "tenant, token or client = { key = \"...\" }, e.g. selector = { "
                                "tenant = { key = \"header:x-tenant-id\" } }")},
        QuotaError{"selector_route_false", kPolicies,
                   policy_with_selector("selector = { route = false }"),
                   policy_error(4, 1, ".selector",
                                "the selector has no dimension, so nothing keys the policy's "
                                "counters; select at least one: route = true (the upstream), or "
                                "tenant, token or client = { key = \"...\" }, e.g. selector = { "
                                "tenant = { key = \"header:x-tenant-id\" } }")},
        QuotaError{"selector_not_a_table", kPolicies, policy_with_selector("selector = \"tenant\""),
                   policy_error(4, 1, ".selector",
                                "expected a table of route, tenant, token and client, got a "
                                "string (\"tenant\"); e.g. selector = { tenant = { key = "
                                "\"header:x-tenant-id\" } }")},
        QuotaError{"route_not_a_boolean", kPolicies,
                   policy_with_selector("selector = { route = \"app\" }"),
                   policy_error(4, 14, ".selector.route",
                                "expected a boolean, got a string (\"app\"); e.g. route = true")},
        QuotaError{"dimension_as_a_string", kPolicies,
                   policy_with_selector("selector = { tenant = \"header:x-tenant-id\" }"),
                   policy_error(4, 14, ".selector.tenant",
                                "expected a table { key = \"...\" }, got a string "
                                "(\"header:x-tenant-id\"); e.g. tenant = { key = "
                                "\"header:x-tenant-id\" }")},
        QuotaError{"dimension_without_key", kPolicies,
                   policy_with_selector("[resilience.quota.policies.selector.client]"),
                   policy_error(4, 1, ".selector.client.key",
                                "missing required key 'key'; add key = \"peer_ip\" to this "
                                "client selector")},
        QuotaError{"dimension_key_not_a_source", kPolicies,
                   policy_with_selector("[resilience.quota.policies.selector.token]\n"
                                        "key = \"Bearer_Token\""),
                   policy_error(5, 1, ".selector.token.key",
                                "key = \"Bearer_Token\" is not a request-key source (did you "
                                "mean 'bearer_token'?); write one of header:<name>, "
                                "cookie:<name>, query:<name>, path, authority, method, cid, "
                                "sticky-cid, peer_ip, client_ip or bearer_token")},
        QuotaError{"dimension_key_empty", kPolicies,
                   policy_with_selector("[resilience.quota.policies.selector.tenant]\n"
                                        "key = \"\""),
                   policy_error(5, 1, ".selector.tenant.key",
                                "key = \"\" is not a request-key source; write one of "
                                "header:<name>, cookie:<name>, query:<name>, path, authority, "
                                "method, cid, sticky-cid, peer_ip, client_ip or bearer_token")},
        QuotaError{"dimension_unknown_key", kPolicies,
                   policy_with_selector("[resilience.quota.policies.selector.tenant]\n"
                                        "key = \"header:x-tenant-id\"\nheader = \"x\""),
                   policy_error(6, 1, ".selector.tenant.header",
                                "unknown key 'header' in tenant selector; expected one of: key")},
        QuotaError{"unknown_dimension", kPolicies,
                   policy_with_selector("[resilience.quota.policies.selector]\nroute = true\n"
                                        "user = { key = \"header:x-user\" }"),
                   policy_error(6, 1, ".selector.user",
                                "unknown key 'user' in quota selector; expected one of: route, "
                                "tenant, token, client")}),
    [](const auto& info) { return info.param.name; });

// A policy with its name and selector on lines 2..3 and `windows` from line 4.
std::string with_windows(std::string_view windows) {
  return "name = \"p\"\nselector = { route = true }\n" + std::string(windows);
}

INSTANTIATE_TEST_SUITE_P(
    Windows, ConfigQuotaErrors,
    ::testing::Values(
        QuotaError{"no_window", kPolicies, with_windows(""),
                   error_at(1, 1, "resilience.quota.policies[0]",
                            "a policy needs at least one window, burst or sustained: without one "
                            "it limits nothing; add e.g. burst = { requests = 100, window = "
                            "\"1s\" } or sustained = { requests = 5000, window = \"1m\" }")},
        QuotaError{"burst_not_shorter", kPolicies,
                   with_windows("burst = { requests = 10, window = \"1m\" }\n"
                                "sustained = { requests = 100, window = \"60s\" }"),
                   policy_error(4, 1, ".burst.window",
                                "burst.window = \"1m\" is not shorter than sustained.window = "
                                "\"1m\": burst is a policy's short window and sustained its "
                                "long one; shorten burst.window or lengthen sustained.window")},
        QuotaError{"burst_longer", kPolicies,
                   with_windows("burst = { requests = 10, window = \"1h\" }\n"
                                "sustained = { requests = 100, window = \"1m\" }"),
                   policy_error(4, 1, ".burst.window",
                                "burst.window = \"1h\" is not shorter than sustained.window = "
                                "\"1m\": burst is a policy's short window and sustained its "
                                "long one; shorten burst.window or lengthen sustained.window")},
        QuotaError{"requests_missing", kPolicies, with_windows("burst = { window = \"1s\" }"),
                   policy_error(4, 9, ".burst.requests",
                                "missing required key 'requests'; add requests = 100 to this "
                                "burst window")},
        QuotaError{"window_missing", kPolicies, with_windows("sustained = { requests = 5 }"),
                   policy_error(4, 13, ".sustained.window",
                                "missing required key 'window'; add window = \"1m\" to this "
                                "sustained window")},
        QuotaError{"requests_zero", kPolicies,
                   with_windows("burst = { requests = 0, window = \"1s\" }"),
                   policy_error(4, 11, ".burst.requests",
                                "0 is out of range; use an integer from 1 to 1000000000")},
        QuotaError{"requests_above_bound", kPolicies,
                   with_windows("burst = { requests = 1000000001, window = \"1s\" }"),
                   policy_error(4, 11, ".burst.requests",
                                "1000000001 is out of range; use an integer from 1 to "
                                "1000000000")},
        QuotaError{"window_zero", kPolicies,
                   with_windows("sustained = { requests = 5, window = \"0s\" }"),
                   policy_error(4, 29, ".sustained.window",
                                "must be greater than 0; e.g. window = \"1m\"")},
        QuotaError{"window_integer", kPolicies,
                   with_windows("burst = { requests = 5, window = 1 }"),
                   policy_error(4, 25, ".burst.window",
                                "expected a duration string with a unit, got an integer (1); "
                                "write window = \"1s\" or \"1ms\"")},
        QuotaError{"window_not_a_table", kPolicies, with_windows("burst = 100"),
                   policy_error(4, 1, ".burst",
                                "expected a table { requests = N, window = \"...\" }, got an "
                                "integer (100); e.g. burst = { requests = 100, window = \"1s\" "
                                "}")}),
    [](const auto& info) { return info.param.name; });

TEST(ConfigQuota, TellsTheSeedsWindowSecsToWriteAWindow) {
  const LoadResult r = policy(with_windows("burst = { requests = 5, window_secs = 1 }"));
  EXPECT_EQ(dump(r),
            policy_error(4, 9, ".burst.window",
                         "missing required key 'window'; add window = \"1s\" to this burst "
                         "window") +
                "\n" +
                policy_error(4, 25, ".burst.window_secs",
                             "unknown key 'window_secs' in burst window; 'window_secs' belongs "
                             "in a quota window (the burst or sustained of a "
                             "[[resilience.quota.policies]] entry), as window (a duration: "
                             "window = \"1s\")") +
                "\n");
}

// --- the rules between the policies, and between the tables ------------------------------------

TEST(ConfigQuota, RejectsADuplicateNameNamingTheFirstOnesLine) {
  const LoadResult r =
      load(std::string(kPolicy) + "\n" + valid_policy() + std::string(kPolicy) + "\n" +
           valid_policy("route_allowlist = [\"app\"]") + "\n" + std::string(kTwoPools));
  EXPECT_EQ(only(r), error_at(6, 1, "resilience.quota.policies[1].name",
                              "duplicate policy name 'p' (first defined at line 2); give each "
                              "[[resilience.quota.policies]] entry its own name"));
}

TEST(ConfigQuota, RejectsTwoPoliciesWithTheSameContract) {
  // The same allowlist in another order, the same selector and the same window.
  const LoadResult r =
      load(std::string(kPolicy) + "\n" +
           valid_policy("route_allowlist = [\"app\", \"billing\"]\n", "a") + std::string(kPolicy) +
           "\n" + valid_policy("route_allowlist = [\"billing\", \"app\"]", "b") + "\n" +
           std::string(kTwoPools));
  EXPECT_EQ(only(r), error_at(6, 1, "resilience.quota.policies[1]",
                              "this policy has the same route_allowlist, selector and windows as "
                              "resilience.quota.policies[0] (\"a\", line 1), so it would count "
                              "the same requests against the same limits a second time; remove "
                              "one of them, or change its selector or windows"));
}

TEST(ConfigQuota, AcceptsPoliciesThatDifferInOnePartOfTheirContract) {
  const std::string first = std::string(kPolicy) + "\n" + valid_policy("", "a");
  for (const std::string& second :
       {valid_policy("route_allowlist = [\"app\"]", "b"),
        valid_policy("sustained = { requests = 100, window = \"1m\" }", "b"),
        std::string("name = \"b\"\nselector = { route = true, tenant = { key = "
                    "\"header:x-tenant-id\" } }\nburst = { requests = 10, window = \"1s\" }\n"),
        std::string("name = \"b\"\nselector = { tenant = { key = \"header:x-tenant-id\" } }\n"
                    "burst = { requests = 11, window = \"1s\" }\n")}) {
    const LoadResult r =
        load(first + std::string(kPolicy) + "\n" + second + "\n" + std::string(kTwoPools));
    EXPECT_TRUE(r.ok() && r.diagnostics.empty()) << second << dump(r);
  }
}

TEST(ConfigQuota, RefusesMoreThan32Policies) {
  std::string text;  // four lines a policy, each its own contract
  for (int i = 0; i <= 32; ++i) {
    text += std::string(kPolicy) + "\nname = \"p" + std::to_string(i) +
            "\"\nselector = { route = true }\nburst = { requests = " + std::to_string(i + 1) +
            ", window = \"1s\" }\n";
  }
  const LoadResult r = load(text + "\n" + std::string(kTwoPools));
  EXPECT_EQ(only(r), error_at(130, 1, "resilience.quota.policies[32].name",
                              "more than 32 quota policies; merge policies (a request waits for "
                              "one backend decision per policy it matches, and one policy holds "
                              "both a burst and a sustained window)"));
}

TEST(ConfigQuota, ValidatesEverythingWhenNotEnabled) {
  const LoadResult r = load(
      "[resilience.quota]\nenabled = false\n[resilience.quota.backend]\nkind = \"in_memory\"\n"
      "url = \"redis://127.0.0.1\"\n" +
      std::string(kPolicy) + "\nname = \"p\"\nselector = {}\n\n" + std::string(kTwoPools));
  EXPECT_FALSE(r.ok());
  std::vector<std::string> paths;
  for (const Diagnostic& d : r.diagnostics) paths.push_back(d.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"resilience.quota.backend.url",
                                             "resilience.quota.policies[0]",
                                             "resilience.quota.policies[0].selector"}))
      << dump(r);
}

TEST(ConfigQuota, ReportsEveryProblemOfEveryTableInOnePass) {
  const LoadResult r = load(
      "[resilience.quota]\nenabled = true\nenforcement = \"x\"\n"
      "[resilience.quota.backend]\nkind = \"redis\"\nmax_inflight = 0\n"
      "[resilience.quota.local_fallback]\nmax_entries = 0\n" +
      std::string(kPolicy) +
      "\nname = \"p\"\nselector = { tenant = { key = \"path\" } }\n"
      "burst = { requests = 0, window = \"1s\" }\n" +
      std::string(kPolicy) + "\nname = \"p\"\nselector = { route = true }\n\n" +
      std::string(kTwoPools));
  std::vector<std::string> paths;
  for (const Diagnostic& d : r.diagnostics) paths.push_back(d.path);
  EXPECT_EQ(paths, (std::vector<std::string>{
                       "resilience.quota.enforcement", "resilience.quota.backend.url",
                       "resilience.quota.backend.max_inflight",
                       "resilience.quota.local_fallback.max_entries",
                       "resilience.quota.policies[0].selector.tenant.key",
                       "resilience.quota.policies[0].burst.requests",
                       "resilience.quota.policies[1]", "resilience.quota.policies[1].name"}))
      << dump(r);
}

TEST(ConfigQuota, TellsWhereAQuotaKeyWrittenElsewhereBelongs) {
  EXPECT_EQ(only(load("[resilience]\nquota = 1\n\n" + std::string(kTwoPools))),
            "test.toml:2:1: error: resilience.quota: expected a table, got an integer (1); e.g. "
            "[resilience.quota]");
  EXPECT_EQ(
      only(load("[server]\nbackend_failure_policy = \"fail_open\"\n\n" + std::string(kTwoPools))),
      "test.toml:2:1: error: server.backend_failure_policy: unknown key "
      "'backend_failure_policy' in [server]; 'backend_failure_policy' belongs in "
      "[resilience.quota]");
  EXPECT_EQ(only(quota("max_entries = 5")),
            "test.toml:2:1: error: resilience.quota.max_entries: unknown key 'max_entries' in "
            "[resilience.quota]; 'max_entries' belongs in [resilience.quota.local_fallback]");
}

// --- warnings ----------------------------------------------------------------------------------

TEST(ConfigQuota, WarnsThatAClientIpSelectorWithoutATrustedProxyIsThePeerAddress) {
  const LoadResult r = dimension("client", "client_ip");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:5:1: warning: resilience.quota.policies[0].selector.client.key: client_ip "
            "reads X-Forwarded-For only for a connection from a proxy listed in "
            "server.trusted_proxies, and that list is empty, so this is the address of the "
            "peer (peer_ip) for every request; list the proxies in front of floodgate, e.g. "
            "[server] trusted_proxies = [\"10.0.0.0/8\"], or write key = \"peer_ip\"\n");
}

TEST(ConfigQuota, DoesNotWarnOfClientIpBehindATrustedProxy) {
  const LoadResult r =
      load("[server]\ntrusted_proxies = [\"10.0.0.0/8\"]\n" + std::string(kPolicy) + "\n" +
           policy_with_selector("selector = { client = { key = \"client_ip\" } }") + "\n\n" +
           std::string(kTwoPools));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

// --- missing_key -----------------------------------------------------------------------------

// An enabled quota whose one policy is valid_policy(extra): the policy's table on line 3, its
// selector on line 5, `extra` from line 7.
LoadResult enabled_policy(std::string_view extra) {
  return load("[resilience.quota]\nenabled = true\n" + std::string(kPolicy) + "\n" +
              valid_policy(extra) + "\n" + std::string(kTwoPools));
}

std::string notes(const LoadResult& r) {
  std::string out;
  for (const Diagnostic& d : r.notes) out += format(d) + "\n";
  return out;
}

TEST(ConfigQuota, RefusesARequestWithoutAnIdentityByDefault) {
  EXPECT_EQ(only_quota(policy(valid_policy())).policies.at(0).missing_key, MissingKey::refuse);
}

TEST(ConfigQuota, ReadsMissingKeySkipAndPeer) {
  EXPECT_EQ(only_quota(policy(valid_policy("missing_key = \"skip\""))).policies.at(0).missing_key,
            MissingKey::skip);
  EXPECT_EQ(only_quota(policy(valid_policy("missing_key = \"peer\""))).policies.at(0).missing_key,
            MissingKey::peer);
}

TEST(ConfigQuota, TellsAPolicyWithMissingKeyRouteWhatItTakes) {
  EXPECT_EQ(only(policy(valid_policy("missing_key = \"route\""))),
            error_at(5, 1, "resilience.quota.policies[0].missing_key",
                     "missing_key = \"route\" is for the scoped rate limits only; a quota policy "
                     "takes \"refuse\" (429 selector_identity_missing, the default), \"skip\" "
                     "(the policy does not count the request) or \"peer\" (the client's address "
                     "stands in for the missing identity)"));
  EXPECT_EQ(only(policy(valid_policy("missing_key = \"drop\""))),
            error_at(5, 1, "resilience.quota.policies[0].missing_key",
                     "unknown value \"drop\"; expected refuse, skip or peer"));
}

TEST(ConfigQuota, WarnsThatMissingKeyIsPointlessWhenEveryDimensionIsAlwaysThere) {
  const LoadResult r = policy(
      "name = \"p\"\nselector = { route = true, client = { key = \"peer_ip\" } }\n"
      "burst = { requests = 10, window = \"1s\" }\nmissing_key = \"skip\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:5:1: warning: resilience.quota.policies[0].missing_key: missing_key has "
            "no effect: every request has what this selector selects (the route, or the "
            "client's address), so none lacks an identity; remove missing_key\n");
}

TEST(ConfigQuota, NotesWhatAnEnabledPolicyDoesWithARequestWithoutAnIdentity) {
  EXPECT_EQ(notes(enabled_policy("")),
            "test.toml:5:1: note: resilience.quota.policies[0].missing_key: a request without "
            "selector.tenant.key = \"header:x-tenant-id\" is refused with 429 "
            "selector_identity_missing (missing_key = \"refuse\", the default)\n");
  EXPECT_EQ(notes(enabled_policy("missing_key = \"skip\"")),
            "test.toml:7:1: note: resilience.quota.policies[0].missing_key: a request without "
            "selector.tenant.key = \"header:x-tenant-id\" is not counted by this policy and "
            "passes it (missing_key = \"skip\"); "
            "floodgate_quota_decisions_total{outcome=\"skipped\"} counts such requests\n");
  EXPECT_EQ(notes(enabled_policy("missing_key = \"peer\"")),
            "test.toml:7:1: note: resilience.quota.policies[0].missing_key: a request without "
            "selector.tenant.key = \"header:x-tenant-id\" is counted with its client's address "
            "in place of the missing identity (as client_ip gives it, server.trusted_proxies "
            "honoured), one count per client (missing_key = \"peer\")\n");
}

TEST(ConfigQuota, NotesNothingForAQuotaThatIsNotEnabled) {
  const LoadResult r = policy(valid_policy("missing_key = \"skip\""));
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(notes(r), "");
}

}  // namespace
}  // namespace floodgate::config
