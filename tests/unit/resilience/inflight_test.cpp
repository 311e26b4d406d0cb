#include "floodgate/resilience/inflight.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/routing/match_path.h"

namespace floodgate::resilience {
namespace {

constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();

InflightParams automatic() {
  return InflightParams{};
}

InflightParams fixed(uint32_t n) {
  return InflightParams{.automatic = false, .max_inflight = n};
}

TEST(ResolveMaxInflight, AutoIsFourTimesReactorsPlusEveryPoolsCapacity) {
  const std::array<uint32_t, 2> pools{10, 64};
  EXPECT_EQ(resolve_max_inflight(automatic(), 2, pools), 4u * (2 + 10 + 64));
}

TEST(ResolveMaxInflight, AutoIsTheSeedsFortyEightOnTwoCoresAndTenConnections) {
  const std::array<uint32_t, 1> pools{10};
  EXPECT_EQ(resolve_max_inflight(automatic(), 2, pools), 48u);
}

TEST(ResolveMaxInflight, AutoNeverGoesBelowThirtyTwo) {
  EXPECT_EQ(resolve_max_inflight(automatic(), 1, {}), 32u);
  const std::array<uint32_t, 1> pools{0};
  EXPECT_EQ(resolve_max_inflight(automatic(), 4, pools), 32u);
}

TEST(ResolveMaxInflight, AutoSaturatesAtTheLargestLimitTheCapHolds) {
  const std::array<uint32_t, 3> pools{kMax, kMax, kMax};
  EXPECT_EQ(resolve_max_inflight(automatic(), kMax, pools), Admission::kMaxActive);
  const std::array<uint32_t, 1> one{Admission::kMaxActive / 4 + 1};
  EXPECT_EQ(resolve_max_inflight(automatic(), 0, one), Admission::kMaxActive);
}

TEST(ResolveMaxInflight, ASetValueIsUsedAsIs) {
  const std::array<uint32_t, 1> pools{1000};
  EXPECT_EQ(resolve_max_inflight(fixed(7), 8, pools), 7u);
}

TEST(ResolveMaxInflight, ZeroDisablesTheCap) {
  EXPECT_EQ(resolve_max_inflight(fixed(0), 8, {}), 0u);
}

UpstreamParams pool(std::size_t servers, uint32_t keepalive, uint32_t max_active) {
  UpstreamParams p;
  p.servers.resize(servers);
  p.keepalive = keepalive;
  p.resilience.max_active_requests = max_active;
  return p;
}

TEST(PoolCapacity, IsMaxActiveRequestsWhenSet) {
  EXPECT_EQ(pool_capacity(pool(3, 32, 50)), 50u);
}

TEST(PoolCapacity, IsServersTimesKeepaliveOtherwise) {
  EXPECT_EQ(pool_capacity(pool(3, 32, 0)), 96u);
  EXPECT_EQ(pool_capacity(pool(3, 0, 0)), 0u);
}

TEST(PoolCapacity, SaturatesInsteadOfWrapping) {
  EXPECT_EQ(pool_capacity(pool(3, kMax, 0)), kMax);
}

// A request as the caller fills the view: the path normalised by MatchPath.
struct Request {
  explicit Request(std::string_view method, std::string_view target) {
    view.method = method;
    view.target = target;
    EXPECT_EQ(path.assign(target), PathVerdict::ok);
    view.path = path.view();
  }
  MatchPath path;
  RequestView view;
};

RequestView preflight() {
  return {.method = "OPTIONS",
          .target = "/api",
          .path = "/api",
          .origin_present = true,
          .access_control_request_method_present = true};
}

TEST(InflightExemptions, ACorsPreflightIsExemptByDefault) {
  EXPECT_TRUE(InflightExemptions(InflightParams{}).exempt(preflight()));
}

TEST(InflightExemptions, OptionsWithoutBothCorsFieldsIsNotAPreflight) {
  const InflightExemptions exemptions{InflightParams{}};
  RequestView no_method = preflight();
  no_method.access_control_request_method_present = false;
  RequestView no_origin = preflight();
  no_origin.origin_present = false;
  EXPECT_FALSE(exemptions.exempt(no_method));
  EXPECT_FALSE(exemptions.exempt(no_origin));
}

TEST(InflightExemptions, APreflightTakesASlotWhenExemptPreflightIsOff) {
  EXPECT_FALSE(InflightExemptions(InflightParams{.exempt_preflight = false}).exempt(preflight()));
}

TEST(InflightExemptions, ListedMethodsAreExemptByExactToken) {
  const InflightExemptions exemptions(InflightParams{.exempt_methods = {"OPTIONS"}});
  EXPECT_TRUE(exemptions.exempt({.method = "OPTIONS", .path = "/"}));
  EXPECT_FALSE(exemptions.exempt({.method = "options", .path = "/"}));
  EXPECT_FALSE(exemptions.exempt({.method = "GET", .path = "/"}));
}

TEST(InflightExemptions, ThePathSuffixEventsIsExemptByDefault) {
  const InflightExemptions exemptions{InflightParams{}};
  EXPECT_TRUE(exemptions.exempt(Request("GET", "/app/events").view));
  EXPECT_TRUE(exemptions.exempt(Request("GET", "/app/events?since=4").view));
  EXPECT_FALSE(exemptions.exempt(Request("GET", "/app/myevents").view));
  EXPECT_FALSE(exemptions.exempt(Request("GET", "/app/events/1").view));
}

TEST(InflightExemptions, PrefixesAndSuffixesMatchTheNormalisedPath) {
  const InflightExemptions exemptions(InflightParams{.exempt_path_prefixes = {"/downloads/"}});
  EXPECT_TRUE(exemptions.exempt(Request("GET", "/downloads/a.iso").view));
  EXPECT_TRUE(exemptions.exempt(Request("GET", "/x/../downloads/a.iso").view));
  EXPECT_TRUE(exemptions.exempt(Request("GET", "//%64ownloads/a.iso").view));
  EXPECT_TRUE(exemptions.exempt(Request("GET", "/app/%65vents").view));
  EXPECT_FALSE(exemptions.exempt(Request("GET", "/downloads").view));
  EXPECT_FALSE(exemptions.exempt(Request("GET", "/app/events/../report").view));
}

TEST(InflightExemptions, ASuffixNeverExemptsAPathMatchPathMayHaveTruncated) {
  const InflightExemptions exemptions{InflightParams{}};
  // Rewritten ("//"), so MatchPath keeps only its first kMaxPathPrefixBytes bytes.
  std::string target = "//" + std::string(kMaxPathPrefixBytes, 'a') + "/events";
  std::string kept = "/" + std::string(kMaxPathPrefixBytes - 8, 'a') + "/events";  // fills it
  EXPECT_FALSE(exemptions.exempt(Request("GET", target).view));
  EXPECT_EQ(kept.size(), kMaxPathPrefixBytes);
  EXPECT_FALSE(exemptions.exempt({.method = "GET", .path = kept}));
  EXPECT_TRUE(exemptions.exempt({.method = "GET", .path = std::string_view(kept).substr(1)}));
}

TEST(InflightExemptions, TunnelsAreExemptWhenConfiguredAndUpgradeOffersNever) {
  const InflightExemptions on{InflightParams{}};
  const InflightExemptions off(InflightParams{.exempt_upgrades = false});
  // An offer is not a tunnel until its 101: the proxy gives its slot back then.
  const RequestView websocket{.method = "GET", .path = "/ws", .upgrade = true};
  const RequestView tunnel{.method = "CONNECT", .target = "db:5432", .is_connect = true};
  EXPECT_FALSE(on.exempt(websocket));
  EXPECT_TRUE(on.exempt(tunnel));
  EXPECT_FALSE(off.exempt(websocket));
  EXPECT_FALSE(off.exempt(tunnel));
}

TEST(InflightExemptions, ADefaultConstructedSetExemptsNothing) {
  const InflightExemptions none;
  EXPECT_FALSE(none.exempt(preflight()));
  EXPECT_FALSE(none.exempt({.method = "GET", .path = "/events", .upgrade = true}));
  EXPECT_FALSE(none.needs_path());
}

TEST(InflightExemptions, NeedsThePathOnlyWhenAPathIsListed) {
  EXPECT_TRUE(InflightExemptions(InflightParams{}).needs_path());  // "/events"
  EXPECT_FALSE(InflightExemptions(InflightParams{.exempt_path_suffixes = {}}).needs_path());
}

TEST(InflightCap, RefusesTheArrivalAtCapPlusOne) {
  InflightCap cap(2);
  Permit a = cap.try_enter();
  Permit b = cap.try_enter();
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(cap.try_enter());
  EXPECT_EQ(cap.in_flight(), 2);
}

TEST(InflightCap, ReleasingAPermitLetsTheNextIn) {
  InflightCap cap(1);
  Permit held = cap.try_enter();
  ASSERT_FALSE(cap.try_enter());
  held.release();
  EXPECT_TRUE(cap.try_enter());
}

TEST(InflightCap, ARefusalAtTheCapLeavesTheCountAndTheAdmittedTotalAlone) {
  InflightCap cap(1);
  Permit held = cap.try_enter();
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(cap.try_enter());
  EXPECT_EQ(cap.in_flight(), 1);
  EXPECT_EQ(cap.admitted(), 1u);
}

TEST(InflightCap, ALimitOfZeroIsUnlimited) {
  InflightCap cap(0);
  std::vector<Permit> held;
  for (int i = 0; i < 1000; ++i) held.push_back(cap.try_enter());
  EXPECT_TRUE(std::all_of(held.begin(), held.end(), [](const Permit& p) { return bool(p); }));
  EXPECT_EQ(cap.in_flight(), 1000);
  EXPECT_EQ(cap.limit(), 0u);
}

TEST(InflightCap, LoweringTheLimitBelowInFlightDrainsMonotonically) {
  InflightCap cap(4);
  std::vector<Permit> held;
  for (int i = 0; i < 4; ++i) held.push_back(cap.try_enter());
  cap.set_limit(2);
  EXPECT_EQ(cap.in_flight(), 4);  // nothing is revoked
  EXPECT_EQ(cap.limit(), 2u);
  for (int64_t expected = 3; expected >= 2; --expected) {
    held.pop_back();
    EXPECT_FALSE(cap.try_enter());  // still at or above the new limit
    EXPECT_EQ(cap.in_flight(), expected);
  }
  held.pop_back();
  EXPECT_EQ(cap.in_flight(), 1);
  EXPECT_TRUE(cap.try_enter());
}

TEST(InflightCap, RaisingTheLimitAdmitsAtOnce) {
  InflightCap cap(1);
  Permit held = cap.try_enter();
  ASSERT_FALSE(cap.try_enter());
  cap.set_limit(2);
  EXPECT_TRUE(cap.try_enter());
}

TEST(InflightCap, APermitReleasesItsSlotExactlyOnce) {
  InflightCap cap(1);
  Permit first = cap.try_enter();
  Permit moved = std::move(first);
  EXPECT_FALSE(first);  // NOLINT(bugprone-use-after-move): the moved-from permit is empty
  first.release();
  EXPECT_EQ(cap.in_flight(), 1);
  moved.release();
  moved.release();
  EXPECT_EQ(cap.in_flight(), 0);
}

TEST(InflightCap, CountsWhatItAdmitted) {
  InflightCap cap(1);
  { Permit p = cap.try_enter(); }
  { Permit p = cap.try_enter(); }
  Permit held = cap.try_enter();
  EXPECT_FALSE(cap.try_enter());
  EXPECT_EQ(cap.admitted(), 3u);
}

}  // namespace
}  // namespace floodgate::resilience
