// An HTTP/1.x client's output: the backend's head rewritten, the body passed through,
// re-chunked or close-delimited as plan_response() decided.
#include "response_output.h"

#include "floodgate/proxy/attempt.h"

namespace floodgate::proxy {

bool ResponseOutput::acquire() noexcept {
  if (data_ == nullptr) data_ = pool_.acquire();
  return data_ != nullptr;
}

void ResponseOutput::release() noexcept {
  pool_.release(std::exchange(data_, nullptr));
  len_ = sent_ = 0;
  plan_ = {};
}

Reason ResponseOutput::put_head(const http::Parser* head, int minor, uint64_t& head_bytes,
                                const http::ResponsePlan* final_plan) {
  static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";
  if (!acquire()) return Reason::buffers_exhausted;
  http::Writer w(end(), room());
  if (head == nullptr) {
    w.put(kEstablished);
  } else if (!http::write_response_head(
                 *head, final_plan != nullptr ? *final_plan : http::ResponsePlan{}, minor, w)) {
    return Reason::upstream_bad_response;
  }
  if (final_plan != nullptr) plan_ = *final_plan;
  len_ += w.size();
  head_bytes += w.size();
  return Reason::none;
}

std::size_t ResponseOutput::body_room() const noexcept {
  const std::size_t r = room();
  return r >= 2 * kFramingSlack ? r - kFramingSlack : 0;
}

void ResponseOutput::put_body(const char* data, std::size_t n) {
  http::Writer w(end(), room());
  const bool chunked = plan_.framing == http::Framing::chunked;
  if (chunked) http::write_chunk_header(n, w);
  w.put({data, n});
  if (chunked) w.put(http::kChunkEnd);
  len_ += w.size();
}

void ResponseOutput::end_body() {
  if (plan_.framing != http::Framing::chunked) return;
  http::Writer w(end(), room());
  w.put(http::kLastChunk);
  len_ += w.size();
}

}  // namespace floodgate::proxy
