// Fuzz target: health::ProbeHead, the judgement of a health probe's response head.
//
// The first two input bytes choose max_response_header_bytes (16..4111) and the split seed;
// the rest arrives in random pieces through space()/received(), then the peer closes.
// Properties: no crash; space() is never empty while the verdict is need_more; a success has
// a status in expect_status.
#include <algorithm>
#include <cstring>

#include "floodgate/health/probe.h"
#include "fuzz_support.h"

using floodgate::fuzz::check;
using floodgate::health::ProbeHead;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  floodgate::HealthParams params;
  params.max_response_header_bytes = 16 + ((data[0] & 0x0f) << 8 | data[1]);
  params.expect_status = {{200, 299}, {418, 418}};
  floodgate::fuzz::Splits splits(data[0] >> 4);
  data += 2;
  size -= 2;
  ProbeHead probe(params);
  ProbeHead::Verdict v = ProbeHead::Verdict::need_more;
  std::size_t pos = 0;
  while (v == ProbeHead::Verdict::need_more && pos < size) {
    const auto space = probe.space();
    check(!space.empty(), "no space while the verdict is need_more");
    const std::size_t n = std::min(splits.next(size - pos), space.size());
    std::memcpy(space.data(), data + pos, n);
    pos += n;
    v = probe.received(n);
  }
  if (v == ProbeHead::Verdict::need_more) v = probe.closed();
  check(v == ProbeHead::Verdict::done, "no verdict after the peer closed");
  if (probe.result() == floodgate::ProbeResult::success) {
    check(floodgate::health::status_expected(probe.status(), params.expect_status),
          "a success with an unexpected status");
  }
  return 0;
}
