// The front of the chain as a generation builds it (build_front_chain): the in-flight cap, the
// memory guard and the protocol policy, what each answers, what it holds, and shadow mode.
#include "floodgate/proxy/front_stages.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/resilience/memory_guard.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/request_view.h"

namespace floodgate::proxy {
namespace {

using resilience::Mode;
using resilience::RequestView;
using Verdict = Decision::Verdict;

constexpr uint64_t kMiB = 1024;  // in KiB, as /proc/meminfo counts

// --- Requests, as the caller fills the view from a parsed head (paths already normalised) ---

RequestView request(std::string_view method, std::string_view path = "/x") {
  return RequestView{.method = method, .target = path, .path = path, .host = "example.com"};
}

RequestView upgrade_offer() {
  RequestView r = request("GET", "/socket");
  r.upgrade = true;
  return r;
}

RequestView preflight() {
  RequestView r = request("OPTIONS", "/api");
  r.origin_present = true;
  r.access_control_request_method_present = true;
  return r;
}

RequestView connect(std::string_view authority) {
  return RequestView{.method = "CONNECT", .target = authority, .is_connect = true};
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The status the client gets for a decision: its own, or its reason's.
int status_of(const Decision& d) {
  return d.status != 0 ? d.status : info(d.reason).status;
}

// Whether `bytes` is one whole response whose Content-Length is the length of its body.
bool well_formed(std::string_view bytes) {
  const std::size_t head_end = bytes.find("\r\n\r\n");
  const std::size_t cl = bytes.find("Content-Length: ");
  if (head_end == std::string_view::npos || cl == std::string_view::npos || cl > head_end) {
    return false;
  }
  const std::size_t length = std::stoul(std::string(bytes.substr(cl + 16, head_end - cl - 16)));
  return bytes.size() - (head_end + 4) == length;
}

// A generation's front chain with its process-wide state, and the reactor's metrics shard. The
// cap's limit is set as Generations::apply_limits() sets it when the generation becomes active:
// building a chain (which a config preview also does) leaves the live limit alone.
class FrontChain : public ::testing::Test {
 protected:
  void build(uint32_t max_inflight) {
    chain = build_front_chain(params, max_inflight, state);
    state->inflight.set_limit(max_inflight);
  }

  Decision run(Exchange& ex, const RequestView& r) {
    ex.request = r;
    ex.inflight_exempt = -1;
    return chain.run(ex, metrics);
  }

  void press_memory() {
    // 10 MiB available and no swap, under a 64 MiB floor.
    state->memory.publish({.mem_total_kib = 8192 * kMiB, .mem_available_kib = 10 * kMiB}, 64);
    ASSERT_TRUE(state->memory.under_pressure());
  }

  uint64_t shadow_count(StageId stage, Reason reason) const {
    return metrics.shadow_rejections(stage_reason_index(stage, reason)).value();
  }

  // Members are destroyed in reverse: every exchange of a test body before the chain whose
  // stages settle it, the chain before the state its stages share.
  resilience::Params params;
  std::shared_ptr<FrontState> state = std::make_shared<FrontState>();
  Chain chain;
  ReactorMetrics metrics{0};
};

// --- The shape of the chain ---

TEST_F(FrontChain, HoldsTheCapThenTheMemoryGuardThenTheProtocolPolicy) {
  build(2);
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain.stage(0).id(), StageId::inflight);
  EXPECT_EQ(chain.stage(1).id(), StageId::memory_guard);
  EXPECT_EQ(chain.stage(2).id(), StageId::protocol);
}

TEST_F(FrontChain, MaxInflightZeroPutsNoCapInTheChain) {
  build(0);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain.stage(0).id(), StageId::memory_guard);
}

TEST_F(FrontChain, MemoryFloorZeroWithoutAutoLeavesTheGuardOut) {
  params.memory_guard = {.automatic = false, .min_available_mib = 0};
  build(0);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain.stage(0).id(), StageId::protocol);
}

TEST_F(FrontChain, SetMemoryFloorPutsTheGuardInTheChain) {
  params.memory_guard = {.automatic = false, .min_available_mib = 64};
  build(0);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain.stage(0).id(), StageId::memory_guard);
}

TEST_F(FrontChain, BuildingAChainLeavesTheLiveLimitToActivation) {
  state->inflight.set_limit(5);
  chain = build_front_chain(params, 2, state);
  EXPECT_EQ(state->inflight.limit(), 5u);
}

// --- The in-flight cap ---

TEST_F(FrontChain, AdmittedExchangesHoldASlotEachUntilTheyEnd) {
  build(2);
  std::array<Exchange, 2> ex;
  EXPECT_EQ(run(ex[0], request("GET")).verdict, Verdict::go);
  EXPECT_EQ(run(ex[1], request("GET")).verdict, Verdict::go);
  EXPECT_EQ(state->inflight.in_flight(), 2);
  EXPECT_EQ(ex[0].tickets.size(), 1u);
}

TEST_F(FrontChain, ExchangeBeyondTheCapIsRefused503InflightCap) {
  build(2);
  std::array<Exchange, 3> ex;
  run(ex[0], request("GET"));
  run(ex[1], request("GET"));
  const Decision d = run(ex[2], request("GET"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::inflight_cap);
  EXPECT_EQ(status_of(d), 503);
  EXPECT_EQ(state->inflight.in_flight(), 2);  // the refused one holds nothing
  EXPECT_EQ(ex[2].tickets.size(), 0u);
}

TEST_F(FrontChain, CapAnswerCarriesRetryAfterAndItsReasonInBothConnectionVariants) {
  params.inflight.retry_after = std::chrono::seconds(3);
  build(1);
  std::array<Exchange, 2> ex;
  run(ex[0], request("GET"));
  const Decision d = run(ex[1], request("GET"));
  ASSERT_NE(d.answer, nullptr);
  for (const bool close : {false, true}) {
    SCOPED_TRACE(close ? "close" : "keep-alive");
    const std::string_view bytes = d.answer->bytes(close);
    EXPECT_TRUE(bytes.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << bytes;
    EXPECT_TRUE(contains(bytes, "\r\nRetry-After: 3\r\n")) << bytes;
    EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: inflight_cap\r\n")) << bytes;
    EXPECT_EQ(contains(bytes, "\r\nConnection: close\r\n"), close) << bytes;
    EXPECT_TRUE(well_formed(bytes)) << bytes;
  }
}

TEST_F(FrontChain, CapRetryAfterIsRoundedUpToWholeSeconds) {
  params.inflight.retry_after = std::chrono::milliseconds(1'500);
  build(1);
  std::array<Exchange, 2> ex;
  run(ex[0], request("GET"));
  const Decision d = run(ex[1], request("GET"));
  ASSERT_NE(d.answer, nullptr);
  EXPECT_TRUE(contains(d.answer->bytes(false), "\r\nRetry-After: 2\r\n")) << d.answer->bytes(false);
}

TEST_F(FrontChain, EndingAnExchangeFreesItsSlotForTheNext) {
  build(2);
  std::array<Exchange, 3> ex;
  run(ex[0], request("GET"));
  run(ex[1], request("GET"));
  const Decision refused = run(ex[2], request("GET"));
  ex[2].outcome = Outcome::generated(refused.reason);
  ex[2].end();
  ex[0].outcome = Outcome::relayed(200, std::chrono::milliseconds(3));
  ex[0].end();
  EXPECT_EQ(state->inflight.in_flight(), 1);
  EXPECT_EQ(run(ex[2], request("GET")).verdict, Verdict::go);
  EXPECT_EQ(state->inflight.in_flight(), 2);
}

TEST_F(FrontChain, DestroyedExchangeGivesItsSlotBack) {
  build(1);
  {
    Exchange ex;
    run(ex, request("GET"));
    EXPECT_EQ(state->inflight.in_flight(), 1);
  }
  EXPECT_EQ(state->inflight.in_flight(), 0);
}

TEST_F(FrontChain, ExemptRequestsPassWithoutASlotEvenAtTheCap) {
  params.inflight.exempt_methods = {"OPTIONS"};
  build(2);
  std::array<Exchange, 2> held;
  run(held[0], request("GET"));
  run(held[1], request("GET"));
  const std::array<std::pair<const char*, RequestView>, 3> exempt{{
      {"CORS preflight", preflight()},
      {"/events suffix", request("GET", "/feed/events")},
      {"listed method", request("OPTIONS", "/api")},  // no Origin: not a preflight
  }};
  for (const auto& [what, r] : exempt) {
    SCOPED_TRACE(what);
    Exchange ex;
    EXPECT_EQ(run(ex, r).verdict, Verdict::go);
    EXPECT_EQ(ex.tickets.size(), 0u);
    EXPECT_EQ(state->inflight.in_flight(), 2);
  }
}

TEST_F(FrontChain, AnUpgradeOfferTakesASlotUntilItBecomesATunnel) {
  build(1);
  Exchange offer;
  EXPECT_EQ(run(offer, upgrade_offer()).verdict, Verdict::go);
  EXPECT_EQ(state->inflight.in_flight(), 1);
  Exchange next;
  EXPECT_EQ(run(next, request("GET")).verdict, Verdict::stop);
  offer.release_tickets();  // its 101 came (the proxy's begin_tunnel)
  EXPECT_EQ(state->inflight.in_flight(), 0);
}

TEST_F(FrontChain, PreflightWithoutAccessControlRequestMethodTakesASlot) {
  build(1);
  Exchange held;
  run(held, request("GET"));
  RequestView r = preflight();
  r.access_control_request_method_present = false;
  Exchange ex;
  EXPECT_EQ(run(ex, r).reason, Reason::inflight_cap);
}

TEST_F(FrontChain, ShadowCapAdmitsWithoutASlotAndCountsTheWouldBeRefusal) {
  params.inflight.mode = Mode::shadow;
  build(1);
  std::array<Exchange, 2> ex;
  run(ex[0], request("GET"));
  EXPECT_EQ(run(ex[1], request("GET")).verdict, Verdict::go);
  EXPECT_EQ(state->inflight.in_flight(), 1);
  EXPECT_EQ(ex[1].tickets.size(), 0u);
  EXPECT_EQ(shadow_count(StageId::inflight, Reason::inflight_cap), 1u);
  EXPECT_EQ(ex[1].would_reject, Reason::inflight_cap);
  EXPECT_EQ(ex[1].would_reject_stage, StageId::inflight);
  EXPECT_EQ(ex[0].would_reject, Reason::none);
}

// --- The memory guard ---

TEST_F(FrontChain, UnderMemoryPressureAWriteIsRefused503MemoryPressure) {
  build(0);
  press_memory();
  Exchange ex;
  const Decision d = run(ex, request("POST"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::memory_pressure);
  EXPECT_EQ(status_of(d), 503);
}

TEST_F(FrontChain, UnderMemoryPressureReadsPass) {
  build(0);
  press_memory();
  for (const std::string_view method : {"GET", "HEAD", "OPTIONS"}) {
    SCOPED_TRACE(method);
    Exchange ex;
    EXPECT_EQ(run(ex, request(method)).verdict, Verdict::go);
  }
}

TEST_F(FrontChain, WriteAboveTheMemoryFloorPasses) {
  build(0);
  state->memory.publish({.mem_total_kib = 8192 * kMiB, .mem_available_kib = 4096 * kMiB}, 64);
  Exchange ex;
  EXPECT_EQ(run(ex, request("POST")).verdict, Verdict::go);
}

TEST_F(FrontChain, WithoutTheGuardAWritePassesUnderPressure) {
  params.memory_guard = {.automatic = false, .min_available_mib = 0};
  build(0);
  press_memory();
  Exchange ex;
  EXPECT_EQ(run(ex, request("POST")).verdict, Verdict::go);
}

TEST_F(FrontChain, ShadowMemoryGuardAdmitsTheWriteAndCountsIt) {
  params.memory_guard.mode = Mode::shadow;
  build(0);
  press_memory();
  Exchange ex;
  EXPECT_EQ(run(ex, request("POST")).verdict, Verdict::go);
  EXPECT_EQ(shadow_count(StageId::memory_guard, Reason::memory_pressure), 1u);
  EXPECT_EQ(ex.would_reject, Reason::memory_pressure);
  EXPECT_EQ(ex.would_reject_stage, StageId::memory_guard);
}

TEST_F(FrontChain, RefusedWriteGivesBackTheSlotTheCapGaveIt) {
  build(1);
  press_memory();
  Exchange ex;
  EXPECT_EQ(run(ex, request("POST")).reason, Reason::memory_pressure);
  EXPECT_EQ(state->inflight.in_flight(), 1);  // held until the exchange ends
  ex.outcome = Outcome::generated(Reason::memory_pressure);
  ex.end();
  EXPECT_EQ(state->inflight.in_flight(), 0);
}

// --- The protocol policy ---

TEST_F(FrontChain, MethodNotAllowedIsRefused405WithAllow) {
  params.protocol.allowed_methods = {"GET", "HEAD"};
  build(0);
  Exchange ex;
  const Decision d = run(ex, request("POST"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::method_not_allowed);
  EXPECT_EQ(status_of(d), 405);
  ASSERT_NE(d.answer, nullptr);
  for (const bool close : {false, true}) {
    SCOPED_TRACE(close ? "close" : "keep-alive");
    const std::string_view bytes = d.answer->bytes(close);
    EXPECT_TRUE(bytes.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << bytes;
    EXPECT_TRUE(contains(bytes, "\r\nAllow: GET, HEAD\r\n")) << bytes;
    EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: method_not_allowed\r\n")) << bytes;
    EXPECT_EQ(contains(bytes, "\r\nConnection: close\r\n"), close) << bytes;
    EXPECT_TRUE(well_formed(bytes)) << bytes;
  }
}

TEST_F(FrontChain, ConnectWhenNotAllowedIsRefused405ConnectDeniedWithAllow) {
  build(0);
  Exchange ex;
  const Decision d = run(ex, connect("db.internal:5432"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::connect_denied);
  EXPECT_EQ(status_of(d), 405);
  ASSERT_NE(d.answer, nullptr);
  const std::string_view bytes = d.answer->bytes(false);
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nAllow: ")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: connect_denied\r\n")) << bytes;
  EXPECT_TRUE(well_formed(bytes)) << bytes;
}

TEST_F(FrontChain, ConnectOutsideTheAllowlistsIsRefused403ConnectDenied) {
  params.protocol.allow_connect = true;
  params.protocol.connect_allowed_ports = {443};
  params.protocol.connect_allowed_authorities = {"db.internal:5433"};
  build(0);
  Exchange ex;
  const Decision d = run(ex, connect("db.internal:5432"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::connect_denied);
  EXPECT_EQ(status_of(d), 403);
  ASSERT_NE(d.answer, nullptr);
  for (const bool close : {false, true}) {
    SCOPED_TRACE(close ? "close" : "keep-alive");
    const std::string_view bytes = d.answer->bytes(close);
    EXPECT_TRUE(bytes.starts_with("HTTP/1.1 403 Forbidden\r\n")) << bytes;
    EXPECT_FALSE(contains(bytes, "\r\nAllow: ")) << bytes;
    EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: connect_denied\r\n")) << bytes;
    EXPECT_TRUE(well_formed(bytes)) << bytes;
  }
}

TEST_F(FrontChain, ConnectInTheAllowlistsPasses) {
  params.protocol.allow_connect = true;
  params.protocol.connect_allowed_ports = {443};
  params.protocol.connect_allowed_authorities = {"db.internal:5433"};
  build(0);
  Exchange by_port;
  EXPECT_EQ(run(by_port, connect("example.com:443")).verdict, Verdict::go);
  Exchange by_authority;
  EXPECT_EQ(run(by_authority, connect("db.internal:5433")).verdict, Verdict::go);
}

TEST_F(FrontChain, DeniedPathIsRefused403DeniedPath) {
  params.protocol.denied_path_prefixes = {"/admin"};
  build(0);
  Exchange ex;
  const Decision d = run(ex, request("GET", "/admin/users"));
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::denied_path);
  EXPECT_EQ(status_of(d), 403);
  ASSERT_NE(d.answer, nullptr);
  const std::string_view bytes = d.answer->bytes(true);
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 403 Forbidden\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: denied_path\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nConnection: close\r\n")) << bytes;
}

TEST_F(FrontChain, AuthorityDifferentFromHostIsRefused400AuthorityMismatch) {
  build(0);
  Exchange ex;
  RequestView r = request("GET", "/x");
  r.target = "http://a.example/x";
  r.authority = "a.example";
  r.host = "b.example";
  const Decision d = run(ex, r);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::authority_mismatch);
  EXPECT_EQ(status_of(d), 400);
  ASSERT_NE(d.answer, nullptr);
  const std::string_view bytes = d.answer->bytes(false);
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 400 Bad Request\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: authority_mismatch\r\n")) << bytes;
}

TEST_F(FrontChain, APostFromEarlyDataIsRefused425TooEarly) {
  build(0);
  Exchange ex;
  RequestView r = request("POST", "/orders");
  r.early_data = true;
  const Decision d = run(ex, r);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::too_early);
  EXPECT_EQ(status_of(d), 425);
  ASSERT_NE(d.answer, nullptr);
  const std::string_view bytes = d.answer->bytes(false);
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 425 Too Early\r\n")) << bytes;
  EXPECT_TRUE(contains(bytes, "\r\nX-Floodgate-Reason: too_early\r\n")) << bytes;
  EXPECT_TRUE(well_formed(bytes)) << bytes;
  Exchange get;
  RequestView g = request("GET", "/orders");
  g.early_data = true;
  EXPECT_EQ(run(get, g).verdict, Verdict::go);
}

TEST_F(FrontChain, ShadowProtocolPolicyStillRefusesAnEarlyPost) {
  // Early data's method check is replay protection, not traffic policy: shadow mode does not
  // lift it (a replayed POST would reach the backend twice).
  params.protocol.mode = Mode::shadow;
  build(0);
  Exchange ex;
  RequestView r = request("POST", "/orders");
  r.early_data = true;
  const Decision d = run(ex, r);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::too_early);
  EXPECT_EQ(shadow_count(StageId::protocol, Reason::too_early), 0u);
}

TEST_F(FrontChain, ShadowProtocolPolicyAdmitsAndCountsEachReason) {
  params.protocol.mode = Mode::shadow;
  params.protocol.allowed_methods = {"GET"};
  params.protocol.denied_path_prefixes = {"/admin"};
  build(0);
  Exchange wrong_method;
  EXPECT_EQ(run(wrong_method, request("POST")).verdict, Verdict::go);
  EXPECT_EQ(wrong_method.would_reject, Reason::method_not_allowed);
  EXPECT_EQ(wrong_method.would_reject_stage, StageId::protocol);
  Exchange denied;
  EXPECT_EQ(run(denied, request("GET", "/admin")).verdict, Verdict::go);
  EXPECT_EQ(denied.would_reject, Reason::denied_path);
  Exchange tunnel;
  EXPECT_EQ(run(tunnel, connect("example.com:443")).verdict, Verdict::go);
  EXPECT_EQ(tunnel.would_reject, Reason::connect_denied);
  EXPECT_EQ(shadow_count(StageId::protocol, Reason::method_not_allowed), 1u);
  EXPECT_EQ(shadow_count(StageId::protocol, Reason::denied_path), 1u);
  EXPECT_EQ(shadow_count(StageId::protocol, Reason::connect_denied), 1u);
}

TEST_F(FrontChain, ShadowRefusalIsRememberedWhenAnEnforcedStageStopsLater) {
  params.memory_guard.mode = Mode::shadow;
  params.protocol.allowed_methods = {"GET"};
  build(0);
  press_memory();
  Exchange ex;
  const Decision d = run(ex, request("POST"));
  EXPECT_EQ(d.reason, Reason::method_not_allowed);
  EXPECT_EQ(ex.would_reject, Reason::memory_pressure);
}

}  // namespace
}  // namespace floodgate::proxy
