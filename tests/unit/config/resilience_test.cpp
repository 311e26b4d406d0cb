// [upstreams.resilience]: the pool's admission policy. Each key's parsing and range, the rules
// between its keys (and against server.retirement_grace), and where its keys may not go.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using namespace std::chrono_literals;
using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;

// An upstream "app" of two servers whose [upstreams.resilience] holds `body` from line 5 on,
// then a route to it.
std::string pool_with(std::string_view body, std::string_view head = "") {
  return std::string(head) +
         "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\", \"127.0.0.1:9001\"]\n"
         "[upstreams.resilience]\n" +
         std::string(body) + "\n[[routes]]\nupstream = \"app\"\n";
}

LoadResult load_pool(std::string_view body) {
  return load(pool_with(body));
}

const ResilienceParams& resilience_of(const LoadResult& r) {
  return r.config->upstreams.at(0).resilience;
}

TEST(ConfigResilience, DefaultsToNoLimitsNoQueueAndRetryAfterOneSecond) {
  const LoadResult r = load(kMinimal);
  ASSERT_TRUE(r.ok()) << dump(r);
  const ResilienceParams& p = resilience_of(r);
  EXPECT_EQ(p.max_active_requests, 0u);
  EXPECT_EQ(p.max_active_per_backend, 0u);
  EXPECT_EQ(p.max_pending_requests, 0u);
  EXPECT_EQ(p.pending_timeout, 0ms);
  EXPECT_EQ(p.retry_after, 1s);
}

TEST(ConfigResilience, KeepsTheDefaultsForAnEmptyTable) {
  const LoadResult r = load_pool("");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(resilience_of(r), ResilienceParams{});
}

TEST(ConfigResilience, ReadsEveryKey) {
  const LoadResult r = load_pool(
      "max_active_requests = 100\nmax_active_per_backend = 60\nmax_pending_requests = 500\n"
      "pending_timeout = \"5s\"\nretry_after = \"2s\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(resilience_of(r), (ResilienceParams{.max_active_requests = 100,
                                                .max_active_per_backend = 60,
                                                .max_pending_requests = 500,
                                                .pending_timeout = 5s,
                                                .retry_after = 2s}));
}

TEST(ConfigResilience, ReadsTheInlineTableForm) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "resilience = { max_active_requests = 8, max_pending_requests = 16, pending_timeout = "
      "\"250ms\" }\n[[routes]]\nupstream = \"app\"\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(resilience_of(r),
            (ResilienceParams{
                .max_active_requests = 8, .max_pending_requests = 16, .pending_timeout = 250ms}));
}

TEST(ConfigResilience, AcceptsAPendingTimeoutOfZero) {
  const LoadResult r = load_pool("pending_timeout = \"0s\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(resilience_of(r).pending_timeout, 0ms);
}

TEST(ConfigResilience, AcceptsARetryAfterBelowOneSecond) {
  const LoadResult r = load_pool("retry_after = \"500ms\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(resilience_of(r).retry_after, 500ms);
}

TEST(ConfigResilience, RejectsARetryAfterOfZero) {
  EXPECT_EQ(only(load_pool("retry_after = \"0s\"")),
            "test.toml:5:1: error: upstreams[0].resilience.retry_after: must be greater than 0; "
            "e.g. retry_after = \"1s\"");
}

TEST(ConfigResilience, RejectsAPendingTimeoutWithoutAUnit) {
  EXPECT_EQ(only(load_pool("pending_timeout = 5")),
            "test.toml:5:1: error: upstreams[0].resilience.pending_timeout: expected a duration "
            "string with a unit, got an integer (5); write pending_timeout = \"5s\" or \"5ms\"");
}

struct LimitCase {
  std::string_view key;
  int64_t highest;
  std::string_view others;  // what makes the highest value valid on its own
};

// ctest lists a case by its key, not by its bytes.
void PrintTo(const LimitCase& c, std::ostream* os) {
  *os << c.key;
}

class ConfigResilienceLimits : public ::testing::TestWithParam<LimitCase> {
 protected:
  static LoadResult with(int64_t value) {
    return load_pool(std::string(GetParam().key) + " = " + std::to_string(value) + "\n" +
                     std::string(GetParam().others));
  }
};

TEST_P(ConfigResilienceLimits, AcceptsZeroAndTheHighestValue) {
  EXPECT_TRUE(with(0).diagnostics.empty()) << dump(with(0));
  const LoadResult highest = with(GetParam().highest);
  ASSERT_TRUE(highest.ok()) << dump(highest);
  // The one warning: a pool admitting more at once than its route cap (512 by default).
  for (const Diagnostic& d : highest.diagnostics) {
    EXPECT_EQ(GetParam().key, "max_active_requests") << dump(highest);
    EXPECT_NE(d.message.find("route cap"), std::string::npos) << dump(highest);
  }
}

TEST_P(ConfigResilienceLimits, RejectsANegativeValueAndOneAboveTheHighest) {
  const LimitCase& c = GetParam();
  for (const int64_t bad : {int64_t{-1}, c.highest + 1}) {
    EXPECT_EQ(only(with(bad)), "test.toml:5:1: error: upstreams[0].resilience." +
                                   std::string(c.key) + ": " + std::to_string(bad) +
                                   " is out of range; use an integer from 0 to " +
                                   std::to_string(c.highest));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigResilienceLimits,
    ::testing::Values(LimitCase{"max_active_requests", 2'147'483'646, ""},
                      LimitCase{"max_active_per_backend", 2'147'483'646, ""},
                      LimitCase{"max_pending_requests", 1'000'000,
                                "max_active_requests = 1\npending_timeout = \"1s\""}),
    [](const auto& info) { return std::string(info.param.key); });

TEST(ConfigResilience, SuggestsTheClosestOfItsKeysForATypo) {
  EXPECT_EQ(
      only(load_pool("max_pendng_requests = 8")),
      "test.toml:5:1: error: upstreams[0].resilience.max_pendng_requests: unknown key "
      "'max_pendng_requests' in [upstreams.resilience] (did you mean 'max_pending_requests'?); "
      "expected one of: max_active_requests, max_active_per_backend, "
      "max_pending_requests, pending_timeout, retry_after");
}

TEST(ConfigResilience, TellsWhereAnUpstreamKeyInItBelongs) {
  EXPECT_EQ(only(load_pool("keepalive = 8")),
            "test.toml:5:1: error: upstreams[0].resilience.keepalive: unknown key 'keepalive' in "
            "[upstreams.resilience]; 'keepalive' belongs in an [[upstreams]] entry");
}

TEST(ConfigResilience, TellsThatAKeyWrittenInTheUpstreamItselfBelongsInItsResilienceTable) {
  EXPECT_EQ(only(load("[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "max_active_requests = 100\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:4:1: error: upstreams[0].max_active_requests: unknown key "
            "'max_active_requests' in [[upstreams]]; 'max_active_requests' belongs in "
            "[upstreams.resilience]");
}

TEST(ConfigResilience, RejectsAResilienceThatIsNotATable) {
  EXPECT_EQ(only(load("[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
                      "resilience = 3\n[[routes]]\nupstream = \"app\"\n")),
            "test.toml:4:1: error: upstreams[0].resilience: expected a table, got an integer "
            "(3); e.g. [upstreams.resilience]");
}

TEST(ConfigResilience, RejectsAQueueWithoutALimitToQueueBehind) {
  EXPECT_EQ(only(load_pool("max_pending_requests = 8\npending_timeout = \"1s\"")),
            "test.toml:5:1: error: upstreams[0].resilience.max_pending_requests: "
            "max_pending_requests = 8 needs a limit to queue behind, but max_active_requests is "
            "0 (unlimited), so no request ever waits; set max_active_requests, e.g. "
            "max_active_requests = 100, or remove max_pending_requests");
}

TEST(ConfigResilience, DoesNotBlameTheQueueForALimitThatHasItsOwnError) {
  const LoadResult r = load_pool(
      "max_active_requests = -1\nmax_pending_requests = 8\n"
      "pending_timeout = \"1s\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].resilience.max_active_requests");
}

TEST(ConfigResilience, WarnsOfAQueueWithoutAPendingTimeout) {
  const LoadResult r = load_pool("max_active_requests = 10\nmax_pending_requests = 8");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:6:1: warning: upstreams[0].resilience.max_pending_requests: "
            "max_pending_requests = 8 with pending_timeout = \"0s\": a waiter is bounded only by "
            "its client going away and by retirement; set pending_timeout, e.g. "
            "pending_timeout = \"5s\"");
}

TEST(ConfigResilience, DoesNotWarnOfTheTimeoutWhenThePendingTimeoutHasItsOwnError) {
  const LoadResult r =
      load_pool("max_active_requests = 10\nmax_pending_requests = 8\npending_timeout = \"1.5s\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].resilience.pending_timeout");
}

TEST(ConfigResilience, WarnsWhenThePerBackendCapsCannotReachThePoolLimit) {
  const LoadResult r = load_pool("max_active_requests = 50\nmax_active_per_backend = 10");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:6:1: warning: upstreams[0].resilience.max_active_per_backend: "
            "max_active_per_backend = 10 times 2 servers admits at most 20 active requests, "
            "fewer than max_active_requests = 50, so the pool limit is never reached: requests "
            "get 503 no_eligible_backend instead of queueing while the pool has room; raise "
            "max_active_per_backend to 25 or lower max_active_requests to 20");
}

TEST(ConfigResilience, AcceptsPerBackendCapsThatAddUpToThePoolLimit) {
  const LoadResult r = load_pool("max_active_requests = 20\nmax_active_per_backend = 10");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigResilience, AcceptsAPerBackendCapWithoutAPoolLimit) {
  const LoadResult r = load_pool("max_active_per_backend = 1");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigResilience, PointsIntoTheInlineTableForItsWarnings) {
  const LoadResult r = load(
      "[[upstreams]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n"
      "resilience = { max_active_requests = 8, max_pending_requests = 16 }\n"
      "[[routes]]\nupstream = \"app\"\n");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].severity, Diagnostic::Severity::warning);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[0].resilience.max_pending_requests");
  EXPECT_EQ(r.diagnostics[0].line, 4);
  EXPECT_EQ(r.diagnostics[0].column, 41);
}

TEST(ConfigResilience, RejectsAPendingTimeoutLongerThanTheRetirementGrace) {
  const LoadResult r =
      load(pool_with("pending_timeout = \"11s\"", "[server]\nretirement_grace = \"10s\"\n"));
  EXPECT_EQ(only(r),
            "test.toml:7:1: error: upstreams[0].resilience.pending_timeout: pending_timeout = "
            "\"11s\" is longer than server.retirement_grace = \"10s\": a request that waits "
            "through a reload is rejected with generation_retired once retirement_grace has "
            "passed, whatever its pending_timeout; set pending_timeout to at most \"10s\" or "
            "raise server.retirement_grace");
}

TEST(ConfigResilience, AcceptsAPendingTimeoutEqualToTheRetirementGrace) {
  const LoadResult r =
      load(pool_with("pending_timeout = \"10s\"", "[server]\nretirement_grace = \"10s\"\n"));
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigResilience, ComparesThePendingTimeoutWithTheDefaultRetirementGrace) {
  const LoadResult r = load_pool("pending_timeout = \"31s\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_NE(r.diagnostics[0].message.find("longer than server.retirement_grace = \"30s\""),
            std::string::npos)
      << dump(r);
}

TEST(ConfigResilience, DoesNotCompareWithARetirementGraceThatHasItsOwnError) {
  const LoadResult r =
      load(pool_with("pending_timeout = \"1s\"", "[server]\nretirement_grace = \"-1s\"\n"));
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.retirement_grace");
}

TEST(ConfigResilience, NamesTheIndexOfTheUpstreamWhosePendingTimeoutOutlastsTheGrace) {
  const LoadResult r = load("[server]\nretirement_grace = \"10s\"\n" + std::string(kMinimal) +
                            "[[upstreams]]\nname = \"b\"\nservers = [\"127.0.0.1:9002\"]\n"
                            "resilience = { pending_timeout = \"11s\" }\n");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "upstreams[1].resilience.pending_timeout");
  EXPECT_EQ(r.diagnostics[0].line, 12);
  EXPECT_EQ(r.diagnostics[0].column, 16);
}

TEST(ConfigResilience, RejectsRetryAfterInARouteWithWhereItGoes) {
  EXPECT_EQ(only(load(std::string(kMinimal) + "retry_after = \"2s\"\n")),
            "test.toml:7:1: error: routes[0].retry_after: retry_after is pool-scoped: set it "
            "under [upstreams.resilience] of upstream 'app'");
}

TEST(ConfigResilience, RejectsRetryAfterInRoutesResilienceWithWhereItGoes) {
  EXPECT_EQ(only(load(std::string(kMinimal) + "[routes.resilience]\nretry_after = \"2s\"\n")),
            "test.toml:8:1: error: routes[0].resilience.retry_after: retry_after is pool-scoped: "
            "set it under [upstreams.resilience] of upstream 'app'");
}

}  // namespace
}  // namespace floodgate::config
