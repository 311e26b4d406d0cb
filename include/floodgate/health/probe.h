// ProbeHead: judges the response head of one health probe, sans I/O.
//
// The caller reads the probe's response into space() and reports each read with received(),
// and the end of the connection with closed(). A probe succeeds only when a complete,
// well-formed status line and header block (strict llhttp) arrive within
// max_response_header_bytes and the status is one of expect_status; a successful prefix is not
// a success. A malformed head, a head cut short by the peer and a head that outgrows the limit
// are `malformed`; a complete head with another status is `failure`. The body is never read.
//
// Thread-safety: one thread. Allocates its buffer once, in the constructor.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "floodgate/http/parser.h"
#include "floodgate/upstream/params.h"
#include "floodgate/upstream/peer_health.h"

namespace floodgate::health {

// Whether `status` is in one of `ranges` (inclusive).
bool status_expected(int status, std::span<const StatusRange> ranges);

class ProbeHead {
 public:
  enum class Verdict { need_more, done };

  explicit ProbeHead(const HealthParams& params);
  ProbeHead(const ProbeHead&) = delete;
  ProbeHead& operator=(const ProbeHead&) = delete;

  // Where the next bytes go (never empty while need_more).
  std::span<char> space() { return {buffer_.data() + size_, buffer_.size() - size_}; }
  // `n` bytes were written into space().
  Verdict received(std::size_t n);
  // The peer closed the connection (or the read failed) before the verdict.
  Verdict closed();

  // After done.
  ProbeResult result() const { return result_; }
  int status() const { return status_; }

 private:
  Verdict finish(ProbeResult r) {
    result_ = r;
    return Verdict::done;
  }

  static constexpr uint32_t kMaxFields = 128;
  const HealthParams& params_;
  std::vector<char> buffer_;
  std::unique_ptr<http::HeaderField[]> fields_;
  http::Parser parser_{http::Parser::Kind::response};
  std::size_t size_ = 0;
  ProbeResult result_ = ProbeResult::malformed;
  int status_ = 0;
};

}  // namespace floodgate::health
