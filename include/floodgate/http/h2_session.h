// The server side of an HTTP/2 connection's framing (RFC 9113), sans I/O: bytes the client
// sent go in (feed), bytes for the client come out (produce), and what they mean reaches the
// connection through a Handler: a stream opens, its request head is complete, body bytes, the
// end of the request, the stream closes. The connection answers with response heads, body
// bytes (pulled under the client's flow-control windows), resets and GOAWAY.
//
// The framing and HPACK are Debian's libnghttp2 (1.52, with its Rapid Reset and CONTINUATION
// backports on). What floodgate owns on top of it, because overload control needs it:
//   - a frame budget: one feed() processes at most Limits::max_frames_per_turn frames, so one
//     connection cannot hold its reactor; the rest waits for the next turn;
//   - new streams at the caller's pace: feed() stops before the HEADERS frame that would open a
//     new stream the caller does not take now (its streams count until their exchanges end,
//     even after a reset), so a client at the limit is simply not read further;
//   - the decoded head's caps: SETTINGS_MAX_HEADER_LIST_SIZE enforced on what HPACK decodes
//     (every field, cookies included, name + value + 32 each), and the same per-field limits as
//     HTTP/1.1 (max_header_bytes, max_headers, max_uri_bytes), each answered with its status;
//     a block decoding to more than twice the list cap is an attack, not a request, and ends
//     the connection;
//   - the glitch counter: misbehaviour points per connection over the last minute (resets of
//     unanswered streams, tiny CONTINUATION fragments, empty DATA frames, control frames
//     beyond their allowance, frames on closed streams, frames that make floodgate reset a
//     stream); at 75 % of Limits::glitch_threshold a graceful GOAWAY, at 100 % GOAWAY
//     ENHANCE_YOUR_CALM and the end of the connection;
//   - flow control by the caller: WINDOW_UPDATE only for request bytes the caller says it
//     passed on (consume), so a slow backend slows the client.
//
// A stream's head is decoded into storage the caller lends (a request buffer: field slots and
// bytes), and reaches the caller as an http::RequestHead, the same view an HTTP/1.1 head is:
// the pseudo-header fields in method, target, scheme and authority, the rest in its field
// table, Cookie fields joined into one (RFC 9113 section 8.2.3), trailers dropped.
//
// Thread-safety: one thread (the connection's reactor). Allocation: libnghttp2 allocates per
// stream and per frame queued, through the session's allocator.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/http/request_head.h"

struct nghttp2_session;

namespace floodgate::http::h2 {

// RFC 9113 section 7.
enum class ErrorCode : uint32_t {
  no_error = 0x0,
  protocol_error = 0x1,
  internal_error = 0x2,
  flow_control_error = 0x3,
  settings_timeout = 0x4,
  stream_closed = 0x5,
  frame_size_error = 0x6,
  refused_stream = 0x7,
  cancel = 0x8,
  compression_error = 0x9,
  connect_error = 0xa,
  enhance_your_calm = 0xb,
  inadequate_security = 0xc,
  http_1_1_required = 0xd,
};
std::string_view error_code_name(ErrorCode code) noexcept;

// What counts against a connection's glitch threshold, one point each (the metric's label).
enum class Glitch : uint8_t {
  reset_unanswered,     // the client reset a stream before its response began (Rapid Reset)
  tiny_continuation,    // a header block fragment under 1 KiB that is not its last
  empty_data,           // a DATA frame with no payload that does not end the stream
  ping_flood,           // PING beyond its allowance
  settings_flood,       // SETTINGS beyond its allowance
  priority_flood,       // PRIORITY (or PRIORITY_UPDATE) beyond its allowance
  window_update_flood,  // WINDOW_UPDATE beyond its allowance (it grows with the DATA sent)
  closed_stream,        // DATA or HEADERS on a stream already closed
  stream_error,         // a frame that made floodgate reset its stream (MadeYouReset)
  header_overflow,      // a header block over the caps
  count_
};
inline constexpr std::size_t kGlitchKinds = static_cast<std::size_t>(Glitch::count_);
inline constexpr std::array<std::string_view, kGlitchKinds> kGlitchNames{
    "reset_unanswered", "tiny_continuation",   "empty_data",    "ping_flood",   "settings_flood",
    "priority_flood",   "window_update_flood", "closed_stream", "stream_error", "header_overflow"};
constexpr std::string_view glitch_name(Glitch g) noexcept {
  return kGlitchNames[static_cast<std::size_t>(g)];
}

// What floodgate advertises and enforces ([server.http2], and [server]'s per-field limits).
struct Limits {
  uint32_t max_concurrent_streams = 100;
  uint32_t stream_window = 65536;
  uint32_t connection_window = 1048576;
  uint32_t max_header_list_bytes = 65536;
  uint32_t max_continuations = 8;
  uint32_t glitch_threshold = 200;  // points within a minute; 0 = no bound
  uint32_t max_frames_per_turn = 64;
  uint32_t max_header_bytes = 16384;  // the head as HTTP/1.1 field lines would carry it -> 431
  uint32_t max_headers = 128;         // -> 431
  uint32_t max_uri_bytes = 8192;      // :path -> 414
};

// Where a stream's decoded head goes: storage the caller lends until the stream ends.
struct HeadStorage {
  char* data = nullptr;
  std::size_t capacity = 0;
  HeaderField* fields = nullptr;
  uint32_t max_fields = 0;
};

// A stream's handle for the caller: whatever it returned from on_stream_open.
using StreamHandle = void*;

class Handler {
 public:
  // The client's next frame opens a stream: whether the caller takes one now. False: feed()
  // stops before that HEADERS frame (awaiting_stream_room), and the caller feeds again once it
  // takes one (its streams count until their exchanges end, even after a reset).
  virtual bool accepts_stream() noexcept = 0;
  // The client opens stream `id` with a request's HEADERS: lend `storage` and return the
  // stream's handle, given back with each event of the stream; nullptr refuses the stream
  // (RST_STREAM REFUSED_STREAM: the client may retry it, nothing of it was processed).
  virtual StreamHandle on_stream_open(int32_t id, HeadStorage& storage) = 0;
  // The request head is complete: `error` is Reason::none, or the reason it is over a limit
  // (header_too_large, uri_too_long) and answered so. `end_stream`: no body follows.
  virtual void on_request_head(StreamHandle s, const RequestHead& head, Reason error,
                               bool end_stream) = 0;
  // Request body bytes; the caller calls Session::consume() once they are passed on.
  virtual void on_request_data(StreamHandle s, const char* data, std::size_t n) = 0;
  // The request's last byte came (END_STREAM).
  virtual void on_request_end(StreamHandle s) = 0;
  // The client reset the stream with `code` (on_stream_close follows).
  virtual void on_stream_reset(StreamHandle s, ErrorCode code) = 0;
  // The stream is closed, whoever closed it; its handle is not used again.
  virtual void on_stream_close(StreamHandle s, ErrorCode code) = 0;
  // The response body: up to `max` bytes into `out`. Returns how many; `eof` once the last
  // byte is given. 0 without eof: none now (Session::resume_body when there is).
  virtual std::size_t read_body(StreamHandle s, char* out, std::size_t max, bool& eof) = 0;
  // A glitch was counted (the metrics), and floodgate sent GOAWAY `code`.
  virtual void on_glitch(Glitch /*g*/) noexcept {}
  virtual void on_goaway_sent(ErrorCode /*code*/) noexcept {}
  // Stream `id` was refused with REFUSED_STREAM.
  virtual void on_stream_refused(int32_t /*id*/) noexcept {}

 protected:
  ~Handler() = default;
};

// One response header field; names lower case (HTTP/2 requires it).
struct ResponseField {
  std::string_view name;
  std::string_view value;
};

class Session {
 public:
  using Clock = std::chrono::steady_clock;

  // A server session: its SETTINGS are queued for produce().
  Session(const Limits& limits, Handler& handler);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // False when libnghttp2 could not make the session (out of memory).
  bool ok() const noexcept { return session_ != nullptr; }

  struct Fed {
    std::size_t consumed = 0;           // bytes processed; the rest is fed again later
    bool budget_spent = false;          // stopped at max_frames_per_turn: feed the rest next turn
    bool awaiting_stream_room = false;  // stopped before a new stream's HEADERS
    bool failed = false;  // a connection error: GOAWAY is queued, nothing more is read
  };
  // Processes the client's bytes at `now`, frame by frame: at most max_frames_per_turn
  // frames, and none from a new stream's HEADERS on that the handler does not accept
  // (Handler::accepts_stream). A frame whose 9-byte header is not all in is left for a later
  // feed.
  Fed feed(const char* data, std::size_t n, Clock::time_point now);

  // Copies what is queued for the client into `out` (up to `capacity` bytes); 0 when
  // nothing is.
  // Never from inside the codec's own calls (busy()): libnghttp2 may still use a stream
  // that sending would free (nghttp2 issue #1244); it returns 0 then.
  std::size_t produce(char* out, std::size_t capacity);
  // Inside feed() or produce(), where the handler's callbacks run: nothing is produced then.
  bool busy() const noexcept { return feeding_ || producing_; }
  // A GOAWAY is queued or sent: no new stream is taken.
  bool goaway_submitted() const noexcept { return goaway_submitted_; }
  // Something is queued for the client (frames, or body a stream can send).
  bool wants_write() const noexcept;
  // The session is over: GOAWAY was sent or received and no stream is left, or a connection
  // error. The caller closes once produce() has nothing more.
  bool finished() const noexcept;

  // The response head for stream `id`: `status` and `fields`; `has_body`: DATA follows,
  // pulled through Handler::read_body. False when the stream is gone. A response that ends
  // before its request has (the client still sending a body) is followed by RST_STREAM
  // NO_ERROR, which tells the client to stop (RFC 9113 section 8.1).
  bool submit_response(int32_t id, int status, const ResponseField* fields, std::size_t count,
                       bool has_body);
  // Whether the client's flow control lets stream `id` send body now (its window and the
  // connection's both open).
  bool can_send_body(int32_t id) const noexcept;
  // Body bytes for stream `id` are ready again (read_body returned 0 without eof).
  void resume_body(int32_t id);
  // Resets stream `id` with `code`.
  void reset(int32_t id, ErrorCode code);
  // `n` request bytes of stream `id` were passed on: the client may send that much more.
  void consume(int32_t id, std::size_t n);
  // Graceful end: GOAWAY with the last stream processed; the streams in progress finish.
  void shutdown();
  // Ends the connection now with GOAWAY `code`.
  void terminate(ErrorCode code);
  // Advertises a new concurrent-stream limit (SETTINGS_MAX_CONCURRENT_STREAMS).
  void advertise_max_streams(uint32_t n);
  uint32_t advertised_max_streams() const noexcept { return advertised_streams_; }

  // A glitch at `now` (the caller counts what only it knows: resets of unanswered streams).
  void glitch(Glitch g, Clock::time_point now);
  // The glitches counted so far, by kind (never decays: the metrics).
  const std::array<uint32_t, kGlitchKinds>& glitches() const noexcept { return glitch_counts_; }
  // The GOAWAY this session sent: ENHANCE_YOUR_CALM when the threshold was reached,
  // no_error for a graceful one (75 %, or shutdown()).
  bool goaway_sent() const noexcept { return goaway_sent_; }
  ErrorCode goaway_code() const noexcept { return goaway_code_; }

 private:
  struct Callbacks;
  friend struct Callbacks;

  // A stream's head in the making.
  struct HeadBuild {
    HeadStorage storage;
    RequestHead head;
    std::size_t used = 0;     // bytes of storage.data used
    uint64_t list_bytes = 0;  // decoded list size (name + value + 32 per field)
    uint64_t line_bytes = 0;  // the same fields as HTTP/1.1 field lines
    uint32_t fields = 0;
    uint32_t cookies = 0;
    Reason error = Reason::none;  // the first limit it went over
    bool trailers = false;        // a trailer block: decoded, counted, dropped
  };
  HeadBuild* build_for(int32_t id) noexcept;
  int on_header(int32_t id, std::string_view name, std::string_view value);
  void finish_head(HeadBuild& b, bool end_stream);
  bool in_feed() const noexcept { return feeding_; }
  std::size_t produce_some(char* out, std::size_t capacity);
  void count_frame(uint8_t type, uint8_t flags, int32_t id, std::size_t length,
                   Clock::time_point now);
  bool spend_allowance(std::size_t kind, Clock::time_point now) noexcept;

  Handler& handler_;
  const Limits limits_;
  nghttp2_session* session_ = nullptr;

  // Where the feed is in the client's byte stream: the preface's bytes still to come, the
  // current frame's payload bytes still to come, the highest stream the client opened.
  std::size_t preface_left_;
  std::size_t payload_left_ = 0;
  int32_t highest_stream_ = 0;
  int32_t peer_reset_ = 0;  // the stream of the client's RST_STREAM being processed

  // Heads being decoded: one at a time (a header block is contiguous on the connection).
  HeadBuild build_;
  int32_t build_id_ = 0;

  // A produced frame that did not fit the caller's buffer: copied first next time.
  const uint8_t* leftover_ = nullptr;
  std::size_t leftover_len_ = 0;

  // Glitches: the sliding minute (the previous minute's count weighted by what is left of it)
  // and the allowances of control frames (refilled each second; WINDOW_UPDATE's also by DATA
  // frames sent).
  Clock::time_point now_{};
  Clock::time_point window_start_{};
  uint32_t window_prev_ = 0;
  uint32_t window_cur_ = 0;
  std::array<uint32_t, kGlitchKinds> glitch_counts_{};
  std::array<uint32_t, 4> allowance_{};
  Clock::time_point allowance_at_{};
  uint32_t data_frames_sent_ = 0;
  uint32_t data_frames_seen_ = 0;  // of them, those the WINDOW_UPDATE allowance has counted
  bool feeding_ = false;           // inside libnghttp2's mem_recv
  bool producing_ = false;         // inside libnghttp2's mem_send
  bool goaway_submitted_ = false;
  bool terminating_ = false;  // GOAWAY with an error: nothing more is processed
  bool goaway_sent_ = false;
  ErrorCode goaway_code_ = ErrorCode::no_error;
  bool failed_ = false;
  uint32_t advertised_streams_;
};

}  // namespace floodgate::http::h2
