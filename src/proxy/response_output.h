// The bytes on their way to an HTTP/1.x client: an output buffer borrowed from the reactor's
// response pool while a response is in progress (an idle connection holds none), the plan for
// how the response's body travels (plan_response: passed through with its Content-Length,
// re-chunked, or delimited by the close) and the framing that carries it out: a backend's head
// rewritten for the client, body bytes as the attempt parses them, the last chunk.
//
// The writing side hands the buffered bytes to one write at a time (next_write); what the
// attempt adds while a write is pending goes with the next.
//
// Thread-safety: the client connection's reactor thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "floodgate/core/buffer_pool.h"
#include "floodgate/core/reason.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"

namespace floodgate::proxy {

class ResponseOutput {
 public:
  // `capacity`: the bytes of a block of `pool`.
  ResponseOutput(BufferPool& pool, std::size_t capacity) noexcept
      : pool_(pool), capacity_(capacity) {}
  ~ResponseOutput() { release(); }
  ResponseOutput(const ResponseOutput&) = delete;
  ResponseOutput& operator=(const ResponseOutput&) = delete;

  // The buffer, borrowed now if not yet; false when the pool has none to lend.
  bool acquire() noexcept;
  // The buffer goes back to its pool (nothing of it may be being written), and the plan with
  // it.
  void release() noexcept;
  // The whole buffer, for floodgate's own answer built now (acquire() first).
  char* data() const noexcept { return data_; }
  std::size_t capacity() const noexcept { return capacity_; }

  // -- The response (the exchange's Downstream sink).
  // A backend's response head for an HTTP/1.`minor` client: the final one rewritten as
  // `final_plan` says, which then frames the body; an interim one (1xx) or a tunnel's as it
  // is (final_plan nullptr). `head` nullptr: a CONNECT's 200 Connection Established. Adds the
  // bytes to `head_bytes`. Reason::none, buffers_exhausted or upstream_bad_response.
  Reason put_head(const http::Parser* head, int minor, uint64_t& head_bytes,
                  const http::ResponsePlan* final_plan = nullptr);
  const http::ResponsePlan& plan() const noexcept { return plan_; }
  // Body bytes put_body() takes now: kFramingSlack stays free for the chunk framing around
  // what one parse yields, and nothing is taken below twice that.
  std::size_t body_room() const noexcept;
  void put_body(const char* data, std::size_t n);
  // The body is complete: re-chunked, its last chunk.
  void end_body();

  // -- The writing side.
  // Bytes the client has not taken yet (buffered, or handed to a write).
  bool pending() const noexcept { return len_ > 0; }
  // Bytes added since the last next_write().
  bool unsent() const noexcept { return sent_ < len_; }
  // What the next write carries: everything added since the last one.
  std::string_view next_write() noexcept {
    const std::size_t from = std::exchange(sent_, len_);
    return {data_ + from, len_ - from};
  }
  // The client took everything written (or nothing of the response is to go: discard).
  void clear() noexcept { len_ = sent_ = 0; }

 private:
  char* end() const noexcept { return data_ + len_; }
  std::size_t room() const noexcept { return capacity_ - len_; }

  BufferPool& pool_;
  const std::size_t capacity_;
  char* data_ = nullptr;
  std::size_t len_ = 0;
  std::size_t sent_ = 0;  // of len_, the bytes handed to a write (done or pending)
  http::ResponsePlan plan_;
};

}  // namespace floodgate::proxy
