#include "floodgate/core/outcome.h"

#include <gtest/gtest.h>

#include <chrono>

namespace floodgate {
namespace {

using std::chrono::milliseconds;

TEST(Outcome, ARequestTheClientGotWrongIsTheClientsAndNeverRetryable) {
  for (Reason r : {Reason::bad_request, Reason::header_timeout, Reason::body_too_large,
                   Reason::uri_too_long, Reason::header_too_large}) {
    const Outcome o = Outcome::generated(r);
    EXPECT_EQ(o.source, OutcomeSource::client) << info(r).name;
    EXPECT_EQ(o.kind, OutcomeKind::client_error) << info(r).name;
    EXPECT_FALSE(o.retryable) << info(r).name;
  }
}

TEST(Outcome, TransportFailuresAndTimeoutsBeforeAResponseAreRetryable) {
  EXPECT_EQ(Outcome::generated(Reason::upstream_connect_failed).kind, OutcomeKind::connect_refused);
  EXPECT_EQ(Outcome::generated(Reason::upstream_connect_timeout).kind,
            OutcomeKind::connect_timeout);
  EXPECT_EQ(Outcome::generated(Reason::upstream_reset).kind, OutcomeKind::reset_before_response);
  EXPECT_EQ(Outcome::generated(Reason::upstream_timeout).kind, OutcomeKind::response_timeout);
  for (Reason r : {Reason::upstream_connect_failed, Reason::upstream_connect_timeout,
                   Reason::upstream_reset, Reason::upstream_timeout}) {
    EXPECT_TRUE(Outcome::generated(r).retryable) << info(r).name;
    EXPECT_EQ(Outcome::generated(r).source, OutcomeSource::upstream) << info(r).name;
  }
}

TEST(Outcome, AMalformedResponseIsAProtocolFailureAndTerminal) {
  const Outcome o = Outcome::generated(Reason::upstream_bad_response);
  EXPECT_EQ(o.source, OutcomeSource::upstream);
  EXPECT_EQ(o.kind, OutcomeKind::bad_response);
  EXPECT_FALSE(o.retryable);
}

TEST(Outcome, AFailedBackendTlsHandshakeIsTheBackendsAndTerminal) {
  const Outcome o = Outcome::generated(Reason::upstream_tls_failed);
  EXPECT_EQ(o.source, OutcomeSource::upstream);
  EXPECT_EQ(o.kind, OutcomeKind::tls_failed);
  EXPECT_EQ(o.status, 502);
  EXPECT_FALSE(o.retryable);
}

TEST(Outcome, FloodgatesOwnRejectionsAreFloodgatesAndNotRetryable) {
  for (Reason r : {Reason::no_route, Reason::proxy_overloaded, Reason::pending_timeout,
                   Reason::generation_retired, Reason::no_eligible_backend,
                   Reason::no_healthy_backend, Reason::buffers_exhausted}) {
    const Outcome o = Outcome::generated(r);
    EXPECT_EQ(o.source, OutcomeSource::floodgate) << info(r).name;
    EXPECT_EQ(o.kind, OutcomeKind::rejection) << info(r).name;
    EXPECT_FALSE(o.retryable) << info(r).name;
  }
}

TEST(Outcome, AGeneratedResponseCarriesItsReasonAndStatus) {
  for (std::size_t i = 1; i < kReasonCount; ++i) {
    const auto r = static_cast<Reason>(i);
    EXPECT_EQ(Outcome::generated(r).reason, r);
    EXPECT_EQ(Outcome::generated(r).status, info(r).status) << info(r).name;
    EXPECT_FALSE(Outcome::generated(r).client_saw_bytes);
  }
}

TEST(Outcome, ARelayedResponseIsTheBackendsWithItsStatusAndTimeToHead) {
  const Outcome o = Outcome::relayed(503, milliseconds(12));
  EXPECT_EQ(o.reason, Reason::none);
  EXPECT_EQ(o.source, OutcomeSource::upstream);
  EXPECT_EQ(o.kind, OutcomeKind::response);
  EXPECT_EQ(o.status, 503);
  EXPECT_EQ(o.time_to_head, milliseconds(12));
  EXPECT_FALSE(o.retryable);
}

TEST(Outcome, WithoutAResponseHeadThereIsNoTimeToHead) {
  EXPECT_LT(Outcome::generated(Reason::upstream_timeout).time_to_head.count(), 0);
  EXPECT_LT(Outcome{}.time_to_head.count(), 0);
}

TEST(Outcome, AClientThatGoesAwayMidResponseAbortsItAndKeepsWhatWasSent) {
  Outcome o = Outcome::relayed(200, milliseconds(3));
  o.client_saw_bytes = true;
  o.cut_short(OutcomeSource::client);
  EXPECT_EQ(o.kind, OutcomeKind::client_aborted);
  EXPECT_EQ(o.source, OutcomeSource::client);
  EXPECT_EQ(o.status, 200);
  EXPECT_EQ(o.time_to_head, milliseconds(3));
  EXPECT_TRUE(o.client_saw_bytes);
}

TEST(Outcome, ABackendThatFailsMidResponseCutsItAndNothingIsRetryableAnyMore) {
  Outcome o = Outcome::relayed(200, milliseconds(3));
  o.cut_short(OutcomeSource::upstream);
  EXPECT_EQ(o.kind, OutcomeKind::cut);
  EXPECT_EQ(o.source, OutcomeSource::upstream);
  EXPECT_FALSE(o.retryable);
}

TEST(Outcome, AnAnswerFloodgateGivesItselfIsNeitherAFailureNorARejection) {
  const Outcome o = Outcome::answered(200);
  EXPECT_EQ(o.kind, OutcomeKind::answered);
  EXPECT_EQ(o.source, OutcomeSource::floodgate);
  EXPECT_EQ(o.status, 200);
  EXPECT_EQ(o.reason, Reason::none);
}

}  // namespace
}  // namespace floodgate
