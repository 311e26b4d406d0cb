#include "floodgate/metrics/prometheus.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

namespace floodgate {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

bool contains(const std::string& text, std::string_view line) {
  return text.find(std::string(line) + "\n") != std::string::npos;
}

std::string render(std::vector<const ReactorMetrics*> shards, std::vector<std::string> names) {
  std::string out;
  render_prometheus(shards, names, out);
  return out;
}

TEST(PrometheusWriter, HeaderWritesHelpAndType) {
  std::string out;
  PrometheusWriter(out).header("x_total", "Things.", MetricType::counter);
  EXPECT_EQ(out, "# HELP x_total Things.\n# TYPE x_total counter\n");
}

TEST(PrometheusWriter, HelpEscapesBackslashAndNewlineButNotQuotes) {
  std::string out;
  PrometheusWriter(out).header("g", "a\\b\n\"c\"", MetricType::gauge);
  EXPECT_EQ(out, "# HELP g a\\\\b\\n\"c\"\n# TYPE g gauge\n");
}

TEST(PrometheusWriter, SampleWithoutLabelsHasNoBraces) {
  std::string out;
  PrometheusWriter(out).sample("g", {}, int64_t{-3});
  EXPECT_EQ(out, "g -3\n");
}

TEST(PrometheusWriter, SampleWritesLabelsInOrder) {
  std::string out;
  const Label labels[] = {{"a", "1"}, {"b", ""}};
  PrometheusWriter(out).sample("c_total", labels, uint64_t{18446744073709551615U});
  EXPECT_EQ(out, "c_total{a=\"1\",b=\"\"} 18446744073709551615\n");
}

TEST(PrometheusWriter, LabelValuesEscapeBackslashQuoteAndNewline) {
  std::string out;
  const Label labels[] = {{"upstream", "a\\b\"c\nd"}};
  PrometheusWriter(out).sample("c", labels, uint64_t{1});
  EXPECT_EQ(out, "c{upstream=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(PrometheusWriter, DoublesUseShortestFormAndPrometheusSpecialValues) {
  std::string out;
  PrometheusWriter w(out);
  w.sample("a", {}, 0.25);
  w.sample("b", {}, std::numeric_limits<double>::infinity());
  w.sample("c", {}, -std::numeric_limits<double>::infinity());
  w.sample("d", {}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(out, "a 0.25\nb +Inf\nc -Inf\nd NaN\n");
}

TEST(PrometheusWriter, HistogramBucketsAreCumulativeWithSumInSeconds) {
  Histogram h;
  h.observe(microseconds(100));
  h.observe(milliseconds(3));
  h.observe(seconds(11));
  HistogramTotals totals;
  totals.add(h);
  std::string out;
  const Label labels[] = {{"upstream", "app"}};
  PrometheusWriter(out).histogram("d_seconds", labels, totals);
  EXPECT_TRUE(contains(out, "d_seconds_bucket{upstream=\"app\",le=\"0.0005\"} 1"));
  EXPECT_TRUE(contains(out, "d_seconds_bucket{upstream=\"app\",le=\"0.0025\"} 1"));
  EXPECT_TRUE(contains(out, "d_seconds_bucket{upstream=\"app\",le=\"0.005\"} 2"));
  EXPECT_TRUE(contains(out, "d_seconds_bucket{upstream=\"app\",le=\"10\"} 2"));
  EXPECT_TRUE(contains(out, "d_seconds_bucket{upstream=\"app\",le=\"+Inf\"} 3"));
  EXPECT_TRUE(contains(out, "d_seconds_sum{upstream=\"app\"} 11.0031"));
  EXPECT_TRUE(contains(out, "d_seconds_count{upstream=\"app\"} 3"));
}

TEST(RenderPrometheus, SumsCountersAcrossShards) {
  ReactorMetrics a(1);
  ReactorMetrics b(1);
  a.count_request(ReactorMetrics::slot_for(0), 200, milliseconds(1));
  b.count_request(ReactorMetrics::slot_for(0), 201, milliseconds(1));
  b.count_request(ReactorMetrics::kUnroutedSlot, 400, milliseconds(1));
  a.connect_failure(0);
  b.connect_failure(0);
  b.timeout(0);
  a.generated(Reason::bad_request);
  b.generated(Reason::bad_request);
  a.client_connections.add(2);
  b.client_connections.add(3);
  const auto out = render({&a, &b}, {"app"});
  EXPECT_TRUE(contains(out, "floodgate_requests_total{upstream=\"app\",class=\"2xx\"} 2"));
  EXPECT_TRUE(contains(out, "floodgate_requests_total{upstream=\"\",class=\"4xx\"} 1"));
  EXPECT_TRUE(contains(out, "floodgate_request_duration_seconds_count{upstream=\"app\"} 2"));
  EXPECT_TRUE(contains(out, "floodgate_upstream_connect_failures_total{upstream=\"app\"} 2"));
  EXPECT_TRUE(contains(out, "floodgate_upstream_timeouts_total{upstream=\"app\"} 1"));
  EXPECT_TRUE(contains(out, "floodgate_responses_generated_total{reason=\"bad_request\"} 2"));
  EXPECT_TRUE(contains(out, "floodgate_client_connections 5"));
}

TEST(RenderPrometheus, UpstreamNamesAreEscaped) {
  const ReactorMetrics m(1);
  const auto out = render({&m}, {"we\"ird"});
  EXPECT_TRUE(contains(out, "floodgate_upstream_timeouts_total{upstream=\"we\\\"ird\"} 0"));
}

TEST(RenderPrometheus, ShardWithFewerUpstreamsContributesZeros) {
  ReactorMetrics small(0);
  ReactorMetrics full(1);
  full.timeout(0);
  const auto out = render({&small, &full}, {"app"});
  EXPECT_TRUE(contains(out, "floodgate_upstream_timeouts_total{upstream=\"app\"} 1"));
}

TEST(RenderPrometheus, NoShardsRendersEveryFamilyWithZeros) {
  const auto out = render({}, {"app"});
  EXPECT_TRUE(contains(out, "floodgate_client_connections 0"));
  EXPECT_TRUE(contains(out, "floodgate_requests_total{upstream=\"app\",class=\"5xx\"} 0"));
}

TEST(RenderPrometheus, AppendsToExistingText) {
  std::string out = "# earlier\n";
  const ReactorMetrics m(0);
  render_prometheus(std::vector<const ReactorMetrics*>{&m}, std::vector<std::string>{}, out);
  EXPECT_TRUE(out.starts_with("# earlier\n# HELP floodgate_requests_total "));
}

// Every family before floodgate_responses_generated_total, byte for byte. That last family grows
// with the Reason enum, so the next test checks it against kReasons instead.
TEST(RenderPrometheus, RendersTheExactTextFormatForASmallCase) {
  ReactorMetrics m(0);
  m.count_request(ReactorMetrics::kUnroutedSlot, 404, microseconds(1500));
  m.client_connections.add(1);
  m.accepted_connections.add(3);
  ReactorMetrics::BufferPoolShard& request = m.buffer_pool(BufferPoolKind::request);
  request.in_use_blocks.set(2);
  request.free_blocks.set(3);
  request.bytes.set(5120);
  request.trimmed_bytes.add(1024);
  const auto out = render({&m}, {});
  const auto end = out.find("# HELP floodgate_responses_generated_total");
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(out.substr(0, end),
            "# HELP floodgate_requests_total Requests answered, by upstream and status class; "
            "upstream=\"\" counts requests answered before routing.\n"
            "# TYPE floodgate_requests_total counter\n"
            "floodgate_requests_total{upstream=\"\",class=\"1xx\"} 0\n"
            "floodgate_requests_total{upstream=\"\",class=\"2xx\"} 0\n"
            "floodgate_requests_total{upstream=\"\",class=\"3xx\"} 0\n"
            "floodgate_requests_total{upstream=\"\",class=\"4xx\"} 1\n"
            "floodgate_requests_total{upstream=\"\",class=\"5xx\"} 0\n"
            "# HELP floodgate_request_duration_seconds Time from the first byte of a request to "
            "the end of its response, by upstream.\n"
            "# TYPE floodgate_request_duration_seconds histogram\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.0005\"} 0\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.001\"} 0\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.0025\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.005\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.01\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.025\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.05\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.1\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.25\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"0.5\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"1\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"2.5\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"5\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"10\"} 1\n"
            "floodgate_request_duration_seconds_bucket{upstream=\"\",le=\"+Inf\"} 1\n"
            "floodgate_request_duration_seconds_sum{upstream=\"\"} 0.0015\n"
            "floodgate_request_duration_seconds_count{upstream=\"\"} 1\n"
            "# HELP floodgate_client_connections Open client connections.\n"
            "# TYPE floodgate_client_connections gauge\n"
            "floodgate_client_connections 1\n"
            "# HELP floodgate_accepted_connections_total Client connections accepted, on all "
            "listeners.\n"
            "# TYPE floodgate_accepted_connections_total counter\n"
            "floodgate_accepted_connections_total 3\n"
            "# HELP floodgate_client_send_timeouts_total Client connections closed because the "
            "client took no byte of a response for server.send_timeout.\n"
            "# TYPE floodgate_client_send_timeouts_total counter\n"
            "floodgate_client_send_timeouts_total 0\n"
            "# HELP floodgate_client_opening_connections Client connections that have not "
            "completed their first request head (a TLS one: its handshake too), bounded by "
            "server.max_opening_connections.\n"
            "# TYPE floodgate_client_opening_connections gauge\n"
            "floodgate_client_opening_connections 0\n"
            "# HELP floodgate_client_opening_evictions_total Opening client connections closed "
            "to make room for a newer one at server.max_opening_connections.\n"
            "# TYPE floodgate_client_opening_evictions_total counter\n"
            "floodgate_client_opening_evictions_total 0\n"
            "# HELP floodgate_buffer_blocks Request and response buffer blocks the reactors "
            "hold, lent out (in_use) or kept for reuse (free).\n"
            "# TYPE floodgate_buffer_blocks gauge\n"
            "floodgate_buffer_blocks{pool=\"request\",state=\"in_use\"} 2\n"
            "floodgate_buffer_blocks{pool=\"request\",state=\"free\"} 3\n"
            "floodgate_buffer_blocks{pool=\"response\",state=\"in_use\"} 0\n"
            "floodgate_buffer_blocks{pool=\"response\",state=\"free\"} 0\n"
            "# HELP floodgate_buffer_bytes Bytes the reactors' buffer pools hold from the "
            "allocator.\n"
            "# TYPE floodgate_buffer_bytes gauge\n"
            "floodgate_buffer_bytes{pool=\"request\"} 5120\n"
            "floodgate_buffer_bytes{pool=\"response\"} 0\n"
            "# HELP floodgate_buffer_trimmed_bytes_total Bytes of free buffer blocks given back "
            "to the allocator after staying idle for a trim period (10 s).\n"
            "# TYPE floodgate_buffer_trimmed_bytes_total counter\n"
            "floodgate_buffer_trimmed_bytes_total{pool=\"request\"} 1024\n"
            "floodgate_buffer_trimmed_bytes_total{pool=\"response\"} 0\n"
            "# HELP floodgate_upstream_connect_failures_total Failed connection attempts to the "
            "upstream's backends (refused, unreachable, reset or timed out).\n"
            "# TYPE floodgate_upstream_connect_failures_total counter\n"
            "# HELP floodgate_upstream_timeouts_total Connect timeouts and response timeouts on "
            "the upstream's backends.\n"
            "# TYPE floodgate_upstream_timeouts_total counter\n");
}

TEST(RenderPrometheus, BufferPoolFiguresAreTheSumOfAllReactors) {
  ReactorMetrics a(0);
  ReactorMetrics b(0);
  a.buffer_pool(BufferPoolKind::response).in_use_blocks.set(4);
  b.buffer_pool(BufferPoolKind::response).in_use_blocks.set(5);
  a.buffer_pool(BufferPoolKind::response).bytes.set(100);
  b.buffer_pool(BufferPoolKind::response).bytes.set(200);
  const auto out = render({&a, &b}, {});
  EXPECT_TRUE(contains(out, "floodgate_buffer_blocks{pool=\"response\",state=\"in_use\"} 9"));
  EXPECT_TRUE(contains(out, "floodgate_buffer_bytes{pool=\"response\"} 300"));
}

TEST(RenderPrometheus, GeneratedResponsesListEveryReasonExceptNoneIncludingZeros) {
  ReactorMetrics m(0);
  m.generated(Reason::no_route);
  const auto out = render({&m}, {});
  EXPECT_EQ(out.find("reason=\"\""), std::string::npos);
  for (std::size_t r = 1; r < kReasonCount; ++r) {
    const auto reason = static_cast<Reason>(r);
    const std::string line = "floodgate_responses_generated_total{reason=\"" +
                             std::string(info(reason).name) + "\"} " +
                             (reason == Reason::no_route ? "1" : "0");
    EXPECT_TRUE(contains(out, line)) << line;
  }
}

TEST(RenderPrometheus, ShadowRejectionsListEveryStageAndReasonSummedOverShards) {
  ReactorMetrics a(0);
  ReactorMetrics b(0);
  a.shadow_rejected(StageId::inflight, Reason::inflight_cap);
  b.shadow_rejected(StageId::inflight, Reason::inflight_cap);
  b.shadow_rejected(StageId::protocol, Reason::denied_path);
  const auto out = render({&a, &b}, {});
  EXPECT_TRUE(contains(out, "# TYPE floodgate_shadow_rejections_total counter"));
  EXPECT_TRUE(contains(
      out, "floodgate_shadow_rejections_total{stage=\"inflight\",reason=\"inflight_cap\"} 2"));
  EXPECT_TRUE(contains(
      out, "floodgate_shadow_rejections_total{stage=\"protocol\",reason=\"denied_path\"} 1"));
  EXPECT_TRUE(contains(
      out,
      "floodgate_shadow_rejections_total{stage=\"memory_guard\",reason=\"memory_pressure\"} 0"));
  EXPECT_TRUE(contains(
      out, "floodgate_shadow_rejections_total{stage=\"protocol\",reason=\"connect_denied\"} 0"));
}

}  // namespace
}  // namespace floodgate
