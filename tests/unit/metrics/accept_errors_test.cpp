#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/metrics/prometheus.h"

namespace floodgate {
namespace {

TEST(AcceptErrors, AreSummedOverShardsByReason) {
  ReactorMetrics a(0);
  ReactorMetrics b(1);
  a.accept_failed(AcceptError::emfile);
  b.accept_failed(AcceptError::emfile);
  b.accept_failed(AcceptError::other);
  std::string out;
  render_accept_errors(std::vector<const ReactorMetrics*>{&a, &b}, out);
  EXPECT_NE(out.find("floodgate_accept_errors_total{reason=\"emfile\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("floodgate_accept_errors_total{reason=\"other\"} 1\n"), std::string::npos);
}

TEST(AcceptErrors, EveryReasonIsListedIncludingZeros) {
  std::string out;
  render_accept_errors(std::vector<const ReactorMetrics*>{}, out);
  EXPECT_TRUE(out.starts_with("# HELP floodgate_accept_errors_total "));
  EXPECT_NE(out.find("# TYPE floodgate_accept_errors_total counter\n"), std::string::npos);
  for (std::string_view reason : kAcceptErrorLabels) {
    const std::string line =
        "floodgate_accept_errors_total{reason=\"" + std::string(reason) + "\"} 0\n";
    EXPECT_NE(out.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace floodgate
