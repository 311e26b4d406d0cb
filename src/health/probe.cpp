#include "floodgate/health/probe.h"

namespace floodgate::health {

bool status_expected(int status, std::span<const StatusRange> ranges) {
  for (const StatusRange& r : ranges) {
    if (status >= r.lo && status <= r.hi) return true;
  }
  return false;
}

ProbeHead::ProbeHead(const HealthParams& params)
    : params_(params),
      buffer_(params.max_response_header_bytes),
      fields_(std::make_unique<http::HeaderField[]>(kMaxFields)) {
  parser_.begin(buffer_.data(), fields_.get(), http::HeadLimits{0, 0, kMaxFields});
}

ProbeHead::Verdict ProbeHead::received(std::size_t n) {
  size_ += n;
  switch (parser_.parse_head(size_)) {
    case http::Parser::Result::need_more:
      // The whole head must fit: a head that fills the buffer without ending is oversized.
      return size_ == buffer_.size() ? finish(ProbeResult::malformed) : Verdict::need_more;
    case http::Parser::Result::error:
      return finish(ProbeResult::malformed);
    default:
      status_ = parser_.status();
      return finish(status_expected(status_, params_.expect_status) ? ProbeResult::success
                                                                    : ProbeResult::failure);
  }
}

ProbeHead::Verdict ProbeHead::closed() {
  // Nothing at all is a refusal of sorts (the peer accepted and closed): a failure. A partial
  // head is a truncated one: malformed.
  return finish(size_ == 0 ? ProbeResult::failure : ProbeResult::malformed);
}

}  // namespace floodgate::health
