#include "floodgate/metrics/reactor_metrics.h"

#include <gtest/gtest.h>

#include <chrono>

namespace floodgate {
namespace {

using std::chrono::milliseconds;

TEST(StatusClass, MapsHundredsToClassIndex) {
  EXPECT_EQ(status_class(100), 0u);
  EXPECT_EQ(status_class(204), 1u);
  EXPECT_EQ(status_class(304), 2u);
  EXPECT_EQ(status_class(404), 3u);
  EXPECT_EQ(status_class(599), 4u);
}

TEST(StatusClass, ClampsOutOfRangeStatuses) {
  EXPECT_EQ(status_class(0), 0u);
  EXPECT_EQ(status_class(999), 4u);
}

TEST(ReactorMetrics, HasOneSlotPerUpstreamPlusTheUnroutedSlot) {
  const ReactorMetrics m(3);
  EXPECT_EQ(m.upstreams(), 3u);
  EXPECT_EQ(m.slots(), 4u);
  EXPECT_EQ(ReactorMetrics::slot_for(0), 1u);
  EXPECT_EQ(ReactorMetrics::kUnroutedSlot, 0u);
}

TEST(ReactorMetrics, CountRequestCountsClassAndDurationInItsSlotOnly) {
  ReactorMetrics m(2);
  m.count_request(ReactorMetrics::slot_for(1), 503, milliseconds(2));
  EXPECT_EQ(m.requests(2, 4).value(), 1u);
  EXPECT_EQ(m.duration(2).count(), 1u);
  EXPECT_EQ(m.duration(2).sum_ns(), 2'000'000u);
  EXPECT_EQ(m.requests(1, 4).value(), 0u);
  EXPECT_EQ(m.duration(0).count(), 0u);
}

TEST(ReactorMetrics, UnroutedRequestsCountInSlotZero) {
  ReactorMetrics m(1);
  m.count_request(ReactorMetrics::kUnroutedSlot, 404, milliseconds(0));
  EXPECT_EQ(m.requests(0, 3).value(), 1u);
}

TEST(ReactorMetrics, UpstreamFaultsCountPerUpstream) {
  ReactorMetrics m(2);
  m.connect_failure(1);
  m.connect_failure(1);
  m.timeout(0);
  EXPECT_EQ(m.connect_failures(1).value(), 2u);
  EXPECT_EQ(m.connect_failures(0).value(), 0u);
  EXPECT_EQ(m.timeouts(0).value(), 1u);
}

TEST(ReactorMetrics, GeneratedResponsesCountPerReason) {
  ReactorMetrics m(0);
  m.generated(Reason::no_route);
  m.generated(Reason::no_route);
  EXPECT_EQ(m.responses_generated(Reason::no_route).value(), 2u);
  EXPECT_EQ(m.responses_generated(Reason::bad_request).value(), 0u);
}

TEST(ReactorMetrics, RefusalsCountPerSlotAndShedReasonOnly) {
  ReactorMetrics m(2);
  m.refused(ReactorMetrics::slot_for(1), Reason::rate_limited);
  m.refused(ReactorMetrics::kUnroutedSlot, Reason::inflight_cap);
  m.refused(ReactorMetrics::slot_for(1), Reason::bad_request);  // not a shed reason
  m.refused(ReactorMetrics::slot_for(1), Reason::none);
  EXPECT_EQ(m.refused(2, shed_reason_index(Reason::rate_limited)).value(), 1u);
  EXPECT_EQ(m.refused(1, shed_reason_index(Reason::rate_limited)).value(), 0u);
  EXPECT_EQ(m.refused(0, shed_reason_index(Reason::inflight_cap)).value(), 1u);
  EXPECT_EQ(shed_reason_index(Reason::bad_request), kShedReasons.size());
}

TEST(ShedReasons, IndexEveryShedReasonAtItsPlace) {
  for (std::size_t i = 0; i < kShedReasons.size(); ++i) {
    EXPECT_EQ(shed_reason_index(kShedReasons[i]), i);
  }
  EXPECT_EQ(shed_reason_index(Reason::none), kShedReasons.size());
}

TEST(ReactorMetrics, ClientConnectionsGaugeTracksOpenAndClose) {
  ReactorMetrics m(0);
  m.client_connections.add(1);
  m.client_connections.add(1);
  m.client_connections.add(-1);
  EXPECT_EQ(m.client_connections.value(), 1);
}

}  // namespace
}  // namespace floodgate
