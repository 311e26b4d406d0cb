// ProbeHead: only a complete, well-formed head within the byte limit with an expected status is
// a success.
#include "floodgate/health/probe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

namespace floodgate::health {
namespace {

HealthParams params(uint32_t max_bytes = 8192) {
  HealthParams p;
  p.max_response_header_bytes = max_bytes;
  return p;
}

// Feeds `bytes` in pieces of `piece` bytes; returns the verdict after the last one.
ProbeHead::Verdict feed(ProbeHead& head, std::string_view bytes, std::size_t piece = 1 << 20) {
  ProbeHead::Verdict v = ProbeHead::Verdict::need_more;
  while (!bytes.empty() && v == ProbeHead::Verdict::need_more) {
    const std::size_t n = std::min({piece, bytes.size(), head.space().size()});
    std::memcpy(head.space().data(), bytes.data(), n);
    bytes.remove_prefix(n);
    v = head.received(n);
  }
  return v;
}

TEST(ProbeHead, ACompleteHeadWithAnExpectedStatusIsASuccess) {
  const HealthParams p = params();
  ProbeHead head(p);
  ASSERT_EQ(feed(head, "HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n"), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::success);
  EXPECT_EQ(head.status(), 204);
}

TEST(ProbeHead, AnUnexpectedStatusIsAFailure) {
  const HealthParams p = params();
  ProbeHead head(p);
  ASSERT_EQ(feed(head, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"),
            ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::failure);
  EXPECT_EQ(head.status(), 503);
}

TEST(ProbeHead, ASuccessfulPrefixIsNotASuccess) {
  const HealthParams p = params();
  ProbeHead head(p);
  const std::string_view full = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  const std::size_t head_len = full.find("\r\n\r\n") + 4;
  for (std::size_t i = 0; i + 1 < head_len; ++i) {
    std::memcpy(head.space().data(), full.data() + i, 1);
    ASSERT_EQ(head.received(1), ProbeHead::Verdict::need_more) << "after " << i + 1 << " bytes";
  }
  std::memcpy(head.space().data(), full.data() + head_len - 1, 1);
  EXPECT_EQ(head.received(1), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::success);
}

TEST(ProbeHead, AMalformedStatusLineIsMalformed) {
  for (const std::string_view bad :
       {"HTTP/1.1 2OO OK\r\n\r\n", "HTTP/9 200 OK\r\n\r\n", "garbage\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"}) {
    const HealthParams p = params();
    ProbeHead head(p);
    ASSERT_EQ(feed(head, bad), ProbeHead::Verdict::done) << bad;
    EXPECT_EQ(head.result(), ProbeResult::malformed) << bad;
  }
}

TEST(ProbeHead, AHeadCutShortByThePeerIsMalformed) {
  const HealthParams p = params();
  ProbeHead head(p);
  ASSERT_EQ(feed(head, "HTTP/1.1 200 OK\r\nContent-Le"), ProbeHead::Verdict::need_more);
  EXPECT_EQ(head.closed(), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::malformed);
}

TEST(ProbeHead, APeerThatClosesWithoutAByteIsAFailure) {
  const HealthParams p = params();
  ProbeHead head(p);
  EXPECT_EQ(head.closed(), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::failure);
}

TEST(ProbeHead, AHeadLargerThanTheLimitIsMalformed) {
  const HealthParams p = params(64);
  ProbeHead head(p);
  const std::string big = "HTTP/1.1 200 OK\r\nX-Pad: " + std::string(100, 'a') + "\r\n\r\n";
  ASSERT_EQ(feed(head, big, 7), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::malformed);
}

TEST(ProbeHead, AHeadOfExactlyTheLimitSucceeds) {
  const std::string exact = "HTTP/1.1 200 OK\r\nX: " + std::string(40, 'a') + "\r\n\r\n";
  const HealthParams p = params(static_cast<uint32_t>(exact.size()));
  ProbeHead head(p);
  ASSERT_EQ(feed(head, exact), ProbeHead::Verdict::done);
  EXPECT_EQ(head.result(), ProbeResult::success);
}

TEST(ProbeHead, ChecksTheStatusAgainstEveryRange) {
  const StatusRange ranges[] = {{200, 200}, {204, 204}, {300, 399}};
  EXPECT_TRUE(status_expected(200, ranges));
  EXPECT_TRUE(status_expected(204, ranges));
  EXPECT_TRUE(status_expected(399, ranges));
  EXPECT_FALSE(status_expected(201, ranges));
  EXPECT_FALSE(status_expected(400, ranges));
}

}  // namespace
}  // namespace floodgate::health
