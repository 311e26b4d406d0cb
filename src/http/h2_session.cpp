// The HTTP/2 server session (h2_session.h): libnghttp2 driven through mem_recv / mem_send on
// the caller's buffers, with floodgate's frame budget, stream pacing, head caps and glitch
// counter on top.
#include "floodgate/http/h2_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "floodgate/core/ascii.h"
#include "floodgate/http/field.h"

namespace floodgate::http::h2 {

namespace {

constexpr std::size_t kPrefaceBytes = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr std::size_t kFrameHeaderBytes = 9;
// A header block fragment smaller than this that is not the block's last is a glitch: a
// client fills its frames before it splits a block.
constexpr std::size_t kTinyFragment = 1024;
// RFC 9113 section 6.5.2: each field's entry in the header list size.
constexpr uint64_t kFieldOverhead = 32;

constexpr std::chrono::seconds kGlitchWindow{60};
constexpr std::chrono::seconds kAllowancePeriod{1};

// Control frames a client may send per second before each costs a glitch: PING, SETTINGS,
// PRIORITY (with PRIORITY_UPDATE) and WINDOW_UPDATE (which also earns one per DATA frame
// floodgate sent: a client acknowledges what it reads).
enum Allowance : std::size_t { kPing, kSettings, kPriority, kWindowUpdate };
constexpr std::array<uint32_t, 4> kAllowed{10, 10, 100, 100};

// The method's code in llhttp's table (HTTP methods only: the RTSP ones and PRI are not
// methods of an HTTP/2 request); an unknown one is HTTP_POST, as for HTTP/1.1 (request_head.h).
llhttp_method_t method_code(std::string_view name) noexcept {
  if (name == "GET") return HTTP_GET;
  if (name == "POST") return HTTP_POST;
  for (int m = HTTP_DELETE; m < HTTP_PRI; ++m) {
    if (name == llhttp_method_name(static_cast<llhttp_method_t>(m))) {
      return static_cast<llhttp_method_t>(m);
    }
  }
  return HTTP_POST;
}

uint32_t frame_length(const uint8_t* p) noexcept {
  return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
}

int32_t frame_stream(const uint8_t* p) noexcept {
  return static_cast<int32_t>(
      ((uint32_t{p[5]} << 24) | (uint32_t{p[6]} << 16) | (uint32_t{p[7]} << 8) | p[8]) &
      0x7fffffffU);
}

}  // namespace

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::no_error:
      return "NO_ERROR";
    case ErrorCode::protocol_error:
      return "PROTOCOL_ERROR";
    case ErrorCode::internal_error:
      return "INTERNAL_ERROR";
    case ErrorCode::flow_control_error:
      return "FLOW_CONTROL_ERROR";
    case ErrorCode::settings_timeout:
      return "SETTINGS_TIMEOUT";
    case ErrorCode::stream_closed:
      return "STREAM_CLOSED";
    case ErrorCode::frame_size_error:
      return "FRAME_SIZE_ERROR";
    case ErrorCode::refused_stream:
      return "REFUSED_STREAM";
    case ErrorCode::cancel:
      return "CANCEL";
    case ErrorCode::compression_error:
      return "COMPRESSION_ERROR";
    case ErrorCode::connect_error:
      return "CONNECT_ERROR";
    case ErrorCode::enhance_your_calm:
      return "ENHANCE_YOUR_CALM";
    case ErrorCode::inadequate_security:
      return "INADEQUATE_SECURITY";
    case ErrorCode::http_1_1_required:
      return "HTTP_1_1_REQUIRED";
  }
  return "UNKNOWN";
}

// libnghttp2's callbacks, each handing over to the session.
struct Session::Callbacks {
  static Session& of(void* user_data) { return *static_cast<Session*>(user_data); }

  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    Session& s = of(ud);
    const int32_t id = frame->hd.stream_id;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    s.build_ = HeadBuild{};
    s.build_id_ = id;
    s.highest_stream_ = std::max(s.highest_stream_, id);
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      s.build_.trailers = true;  // decoded (HPACK needs it) and counted, then dropped
      return 0;
    }
    const StreamHandle handle = s.handler_.on_stream_open(id, s.build_.storage);
    if (handle == nullptr) {
      s.build_id_ = 0;
      s.handler_.on_stream_refused(id);
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    nghttp2_session_set_stream_user_data(session, id, handle);
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t /*flags*/,
                       void* ud) {
    return of(ud).on_header(frame->hd.stream_id, {reinterpret_cast<const char*>(name), namelen},
                            {reinterpret_cast<const char*>(value), valuelen});
  }

  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    Session& s = of(ud);
    const int32_t id = frame->hd.stream_id;
    auto* const handle = id == 0 ? nullptr : nghttp2_session_get_stream_user_data(session, id);
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (s.build_id_ == id) {
          s.build_id_ = 0;
          if (!s.build_.trailers && handle != nullptr) {
            s.finish_head(s.build_, end_stream);
            s.handler_.on_request_head(handle, s.build_.head, s.build_.error, end_stream);
          }
        }
        if (end_stream && handle != nullptr) s.handler_.on_request_end(handle);
        return 0;
      case NGHTTP2_DATA:
        if (end_stream && handle != nullptr) s.handler_.on_request_end(handle);
        return 0;
      case NGHTTP2_RST_STREAM:
        if (handle != nullptr && s.peer_reset_ == id) {
          s.peer_reset_ = 0;
          s.handler_.on_stream_reset(handle, static_cast<ErrorCode>(frame->rst_stream.error_code));
        }
        return 0;
      default:
        return 0;
    }
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t /*flags*/, int32_t id,
                           const uint8_t* data, size_t len, void* ud) {
    Session& s = of(ud);
    if (void* handle = nghttp2_session_get_stream_user_data(session, id); handle != nullptr) {
      s.handler_.on_request_data(handle, reinterpret_cast<const char*>(data), len);
    } else {
      // Nobody takes it (the stream was reset or refused): the connection's window reopens.
      nghttp2_session_consume_connection(session, len);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* session, int32_t id, uint32_t code, void* ud) {
    Session& s = of(ud);
    if (s.build_id_ == id) s.build_id_ = 0;
    if (void* handle = nghttp2_session_get_stream_user_data(session, id); handle != nullptr) {
      nghttp2_session_set_stream_user_data(session, id, nullptr);
      if (s.peer_reset_ == id) {  // the client's RST_STREAM closes it (before on_frame_recv)
        s.peer_reset_ = 0;
        s.handler_.on_stream_reset(handle, static_cast<ErrorCode>(code));
      }
      s.handler_.on_stream_close(handle, static_cast<ErrorCode>(code));
    }
    return 0;
  }

  // A frame that is a stream error (DATA on a half-closed stream, a WINDOW_UPDATE of 0, a
  // malformed request): libnghttp2 resets the stream, which is what MadeYouReset provokes.
  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame*, int, void* ud) {
    Session& s = of(ud);
    s.glitch(Glitch::stream_error, s.now_);
    return 0;
  }

  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    Session& s = of(ud);
    const int32_t id = frame->hd.stream_id;
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
        nghttp2_session_get_stream_remote_close(session, id) == 0) {
      // The response is whole before the request (RFC 9113 section 8.1): the client may stop
      // sending, without error.
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
    }
    if (frame->hd.type == NGHTTP2_DATA) {
      ++s.data_frames_sent_;
    } else if (frame->hd.type == NGHTTP2_GOAWAY) {
      s.goaway_sent_ = true;
      s.goaway_code_ = static_cast<ErrorCode>(frame->goaway.error_code);
      s.handler_.on_goaway_sent(s.goaway_code_);
    }
    return 0;
  }

  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void* ud) {
    Session& s = of(ud);
    bool eof = false;
    const std::size_t n =
        s.handler_.read_body(source->ptr, reinterpret_cast<char*>(buf), length, eof);
    if (eof) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (n == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }
};

Session::Session(const Limits& limits, Handler& handler)
    : handler_(handler),
      limits_(limits),
      preface_left_(kPrefaceBytes),
      advertised_streams_(limits.max_concurrent_streams) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, &Callbacks::on_invalid_frame);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &Callbacks::on_frame_send);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    return;
  }
  // floodgate decides when the client may send more (consume()).
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_continuations(opt, limits.max_continuations);
  nghttp2_option_set_no_closed_streams(opt, 1);
  if (nghttp2_session_server_new2(&session_, cbs, this, opt) != 0) session_ = nullptr;
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (session_ == nullptr) return;
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits.max_header_list_bytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0 ||
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            static_cast<int32_t>(limits.connection_window)) != 0) {
    nghttp2_session_del(std::exchange(session_, nullptr));
  }
}

Session::~Session() {
  if (session_ != nullptr) nghttp2_session_del(session_);
}

Session::Fed Session::feed(const char* data, std::size_t n, Clock::time_point now) {
  Fed fed;
  if (session_ == nullptr || failed_ || terminating_) {
    fed.failed = true;
    return fed;
  }
  now_ = now;
  // Frame by frame, so that each frame is judged (count_frame) on the streams' state as the
  // frames before it left it. Stops after the budget's frames, before a new stream's HEADERS
  // the caller takes no stream for, and before a frame header that is not all in.
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  std::size_t pos = 0;
  uint32_t frames = 0;
  while (pos < n && !terminating_) {
    std::size_t take = 0;
    if (preface_left_ > 0 || payload_left_ > 0) {
      std::size_t& left = preface_left_ > 0 ? preface_left_ : payload_left_;
      take = std::min(left, n - pos);
      left -= take;
    } else {
      if (frames == limits_.max_frames_per_turn) {
        fed.budget_spent = true;
        break;
      }
      if (n - pos < kFrameHeaderBytes) break;
      const uint8_t* h = p + pos;
      const uint8_t type = h[3];
      const int32_t id = frame_stream(h);
      if (type == NGHTTP2_HEADERS && id > highest_stream_ && !goaway_submitted_ &&
          !handler_.accepts_stream()) {
        fed.awaiting_stream_room = true;
        break;
      }
      ++frames;
      const uint32_t length = frame_length(h);
      count_frame(type, h[4], id, length, now);
      if (terminating_) break;  // the threshold: this frame is not processed
      payload_left_ = length;
      take = kFrameHeaderBytes + std::min<std::size_t>(length, n - pos - kFrameHeaderBytes);
      payload_left_ -= take - kFrameHeaderBytes;
    }
    feeding_ = true;
    const ssize_t rv = nghttp2_session_mem_recv(session_, p + pos, take);
    feeding_ = false;
    if (rv < 0) {
      failed_ = true;
      fed.failed = true;
      // A header block far over its cap (on_header), a flood libnghttp2 detected:
      // ENHANCE_YOUR_CALM; the preface missing: PROTOCOL_ERROR.
      const ErrorCode code = rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC ? ErrorCode::protocol_error
                             : rv == NGHTTP2_ERR_CALLBACK_FAILURE || rv == NGHTTP2_ERR_FLOODED
                                 ? ErrorCode::enhance_your_calm
                                 : ErrorCode::internal_error;
      nghttp2_session_terminate_session(session_, static_cast<uint32_t>(code));
      fed.consumed = pos;
      return fed;
    }
    pos += take;
  }
  fed.consumed = pos;
  if (terminating_) {
    fed.failed = true;
    nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
  }
  return fed;
}

std::size_t Session::produce(char* out, std::size_t capacity) {
  if (busy()) return 0;
  producing_ = true;
  const std::size_t n = produce_some(out, capacity);
  producing_ = false;
  return n;
}

std::size_t Session::produce_some(char* out, std::size_t capacity) {
  std::size_t n = 0;
  if (leftover_len_ > 0) {
    const std::size_t take = std::min(leftover_len_, capacity);
    std::memcpy(out, leftover_, take);
    leftover_ += take;
    leftover_len_ -= take;
    n = take;
    if (leftover_len_ > 0) return n;
  }
  while (session_ != nullptr && n < capacity) {
    const uint8_t* chunk = nullptr;
    const ssize_t len = nghttp2_session_mem_send(session_, &chunk);
    if (len <= 0) {
      if (len < 0) failed_ = true;  // out of memory: nothing more can be framed
      break;
    }
    const auto size = static_cast<std::size_t>(len);
    const std::size_t take = std::min(size, capacity - n);
    std::memcpy(out + n, chunk, take);
    n += take;
    if (take < size) {  // valid until the next mem_send: copied first next time
      leftover_ = chunk + take;
      leftover_len_ = size - take;
      break;
    }
  }
  return n;
}

bool Session::wants_write() const noexcept {
  return leftover_len_ > 0 || (session_ != nullptr && nghttp2_session_want_write(session_) != 0);
}

bool Session::finished() const noexcept {
  if (session_ == nullptr) return true;
  if (leftover_len_ > 0) return false;
  return nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0;
}

bool Session::submit_response(int32_t id, int status, const ResponseField* fields,
                              std::size_t count, bool has_body) {
  if (session_ == nullptr) return false;
  // The status and the fields as libnghttp2's name-value pairs, which it copies: a bounded
  // array on the stack (a response has at most max_headers fields from an HTTP/1.1 backend).
  constexpr std::size_t kMaxFields = 256;
  std::array<nghttp2_nv, kMaxFields + 1> nva;
  char status_text[4] = {static_cast<char>('0' + status / 100 % 10),
                         static_cast<char>('0' + status / 10 % 10),
                         static_cast<char>('0' + status % 10), 0};
  const auto nv = [](std::string_view name, std::string_view value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE};
  };
  std::size_t n = 0;
  nva[n++] = nv(":status", {status_text, 3});
  for (std::size_t i = 0; i < count && n < nva.size(); ++i) {
    nva[n++] = nv(fields[i].name, fields[i].value);
  }
  void* handle = nghttp2_session_get_stream_user_data(session_, id);
  nghttp2_data_provider body{};
  body.source.ptr = handle;
  body.read_callback = &Callbacks::read_body;
  return nghttp2_submit_response(session_, id, nva.data(), n, has_body ? &body : nullptr) == 0;
}

bool Session::can_send_body(int32_t id) const noexcept {
  if (session_ == nullptr) return false;
  return nghttp2_session_get_stream_remote_window_size(session_, id) > 0 &&
         nghttp2_session_get_remote_window_size(session_) > 0;
}

void Session::resume_body(int32_t id) {
  if (session_ != nullptr) nghttp2_session_resume_data(session_, id);
}

void Session::reset(int32_t id, ErrorCode code) {
  if (session_ != nullptr) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, static_cast<uint32_t>(code));
  }
}

void Session::consume(int32_t id, std::size_t n) {
  if (session_ == nullptr || n == 0) return;
  if (nghttp2_session_consume(session_, id, n) != 0) {
    nghttp2_session_consume_connection(session_, n);  // the stream is gone meanwhile
  }
}

void Session::shutdown() {
  if (session_ == nullptr || goaway_submitted_) return;
  goaway_submitted_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void Session::terminate(ErrorCode code) {
  if (session_ == nullptr) return;
  terminating_ = true;
  nghttp2_session_terminate_session(session_, static_cast<uint32_t>(code));
}

void Session::advertise_max_streams(uint32_t n) {
  if (session_ == nullptr || n == advertised_streams_) return;
  advertised_streams_ = n;
  const nghttp2_settings_entry entry{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, n};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &entry, 1);
}

void Session::glitch(Glitch g, Clock::time_point now) {
  ++glitch_counts_[static_cast<std::size_t>(g)];
  handler_.on_glitch(g);
  if (limits_.glitch_threshold == 0) return;
  // The sliding minute: this minute's points plus the last minute's, weighted by the part of
  // it still inside the last sixty seconds.
  const auto since = now - window_start_;
  if (since >= kGlitchWindow) {
    window_prev_ = since >= 2 * kGlitchWindow ? 0 : window_cur_;
    window_cur_ = 0;
    window_start_ = since >= 2 * kGlitchWindow ? now : window_start_ + kGlitchWindow;
  }
  ++window_cur_;
  const auto into = std::chrono::duration_cast<std::chrono::milliseconds>(now - window_start_);
  const auto window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(kGlitchWindow);
  const uint64_t weighted = uint64_t{window_prev_} *
                                static_cast<uint64_t>((window_ms - into).count()) /
                                static_cast<uint64_t>(window_ms.count()) +
                            window_cur_;
  if (weighted >= limits_.glitch_threshold) {
    // During a feed, feed() ends the connection before the next frame.
    if (in_feed()) {
      terminating_ = true;
    } else if (!terminating_) {
      terminate(ErrorCode::enhance_your_calm);
    }
  } else if (weighted * 4 >= uint64_t{limits_.glitch_threshold} * 3) {
    shutdown();  // once: later calls do nothing
  }
}

bool Session::spend_allowance(std::size_t kind, Clock::time_point now) noexcept {
  if (now - allowance_at_ >= kAllowancePeriod) {
    allowance_at_ = now;
    allowance_ = kAllowed;
    data_frames_seen_ = data_frames_sent_;
  }
  if (kind == kWindowUpdate && data_frames_sent_ != data_frames_seen_) {
    allowance_[kind] += data_frames_sent_ - data_frames_seen_;  // acknowledgements of DATA
    data_frames_seen_ = data_frames_sent_;
  }
  if (allowance_[kind] == 0) return false;
  --allowance_[kind];
  return true;
}

void Session::count_frame(uint8_t type, uint8_t flags, int32_t id, std::size_t length,
                          Clock::time_point now) {
  const bool closed = id != 0 && id <= highest_stream_ &&
                      nghttp2_session_get_stream_user_data(session_, id) == nullptr;
  switch (type) {
    case NGHTTP2_DATA:
      if (length == 0 && (flags & NGHTTP2_FLAG_END_STREAM) == 0) glitch(Glitch::empty_data, now);
      if (closed) glitch(Glitch::closed_stream, now);
      return;
    case NGHTTP2_HEADERS:
      if ((flags & NGHTTP2_FLAG_END_HEADERS) == 0 && length < kTinyFragment) {
        glitch(Glitch::tiny_continuation, now);
      }
      // A new stream after floodgate's GOAWAY is ignored (the client was told to stop):
      // one that comes anyway counts as a frame on a closed stream.
      if (closed || (goaway_submitted_ && id > highest_stream_)) {
        glitch(Glitch::closed_stream, now);
      }
      return;
    case NGHTTP2_CONTINUATION:
      if ((flags & NGHTTP2_FLAG_END_HEADERS) == 0 && length < kTinyFragment) {
        glitch(Glitch::tiny_continuation, now);
      }
      return;
    case NGHTTP2_RST_STREAM:
      peer_reset_ = id;  // reported to the handler as the client's (on_stream_reset)
      return;
    case NGHTTP2_PING:
      if ((flags & NGHTTP2_FLAG_ACK) == 0 && !spend_allowance(kPing, now)) {
        glitch(Glitch::ping_flood, now);
      }
      return;
    case NGHTTP2_SETTINGS:
      if ((flags & NGHTTP2_FLAG_ACK) == 0 && !spend_allowance(kSettings, now)) {
        glitch(Glitch::settings_flood, now);
      }
      return;
    case NGHTTP2_PRIORITY:
    case NGHTTP2_PRIORITY_UPDATE:
      if (!spend_allowance(kPriority, now)) glitch(Glitch::priority_flood, now);
      return;
    case NGHTTP2_WINDOW_UPDATE:
      if (!spend_allowance(kWindowUpdate, now)) glitch(Glitch::window_update_flood, now);
      return;
    default:
      return;
  }
}

// One decoded field of stream `id`'s header block. Returns 0, or NGHTTP2_ERR_CALLBACK_FAILURE
// for a block decoding to more than twice the list cap (the connection ends: an HPACK or
// cookie bomb is not a request).
int Session::on_header(int32_t id, std::string_view name, std::string_view value) {
  if (id != build_id_) return 0;
  HeadBuild& b = build_;
  b.list_bytes += name.size() + value.size() + kFieldOverhead;
  if (b.list_bytes > 2 * uint64_t{limits_.max_header_list_bytes}) {
    glitch(Glitch::header_overflow, now_);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (b.trailers || b.error != Reason::none) return 0;
  const auto over = [&](Reason r) {
    b.error = r;
    glitch(Glitch::header_overflow, now_);
    return 0;
  };
  if (b.list_bytes > limits_.max_header_list_bytes) return over(Reason::header_too_large);
  // The bytes go into the caller's storage, where the head's views will point.
  const auto keep = [&](std::string_view s, std::string_view& kept) {
    if (s.size() > b.storage.capacity - b.used) return false;
    if (!s.empty()) std::memcpy(b.storage.data + b.used, s.data(), s.size());
    kept = {b.storage.data + b.used, s.size()};
    b.used += s.size();
    return true;
  };
  RequestHead& h = b.head;
  if (!name.empty() && name.front() == ':') {
    // libnghttp2 has checked the pseudo-header fields: known, once each, before the others.
    std::string_view* slot = nullptr;
    if (name == ":method") slot = &h.method_name;
    if (name == ":path") {
      if (value.size() > limits_.max_uri_bytes) return over(Reason::uri_too_long);
      slot = &h.target;
    }
    if (name == ":scheme") slot = &h.scheme;
    if (name == ":authority") slot = &h.authority;
    if (slot != nullptr && !keep(value, *slot)) return over(Reason::header_too_large);
    return 0;
  }
  // The same bounds as an HTTP/1.1 head's: its field lines ("name: value\r\n") and count.
  b.line_bytes += name.size() + value.size() + 4;
  if (b.line_bytes > limits_.max_header_bytes || b.fields >= limits_.max_headers ||
      b.fields >= b.storage.max_fields) {
    return over(Reason::header_too_large);
  }
  std::string_view kept_name, kept_value;
  if (!keep(name, kept_name) || !keep(value, kept_value)) return over(Reason::header_too_large);
  HeaderField& f = b.storage.fields[b.fields++];
  f.name_off = static_cast<uint32_t>(kept_name.data() - b.storage.data);
  f.name_len = static_cast<uint32_t>(kept_name.size());
  f.value_off = static_cast<uint32_t>(kept_value.data() - b.storage.data);
  f.value_len = static_cast<uint32_t>(kept_value.size());
  f.kind = classify(kept_name);
  h.fields.kinds |= bit(f.kind);
  if (name == "cookie") ++b.cookies;
  return 0;
}

// The block is complete: Cookie fields joined, the method's code, the body's framing.
void Session::finish_head(HeadBuild& b, bool end_stream) {
  RequestHead& h = b.head;
  h.fields.base = b.storage.data;
  h.fields.entries = b.storage.fields;
  h.version_major = 2;
  h.version_minor = 0;
  h.h2 = true;
  h.keep_alive = true;
  h.method = method_code(h.method_name);
  if (h.method == HTTP_CONNECT) h.target = h.authority;  // host:port, as HTTP/1.1's target
  const auto is_cookie = [&](const HeaderField& f) {
    return std::string_view(b.storage.data + f.name_off, f.name_len) == "cookie";
  };
  if (b.error == Reason::none && b.cookies > 1) {
    // RFC 9113 section 8.2.3: an HTTP/1.1 backend gets one Cookie field, its crumbs joined by
    // "; ", where the first one was.
    std::size_t joined = 0;
    for (uint32_t i = 0; i < b.fields; ++i) {
      if (is_cookie(b.storage.fields[i])) joined += b.storage.fields[i].value_len + 2;
    }
    joined -= 2;
    if (joined > b.storage.capacity - b.used) {
      b.error = Reason::header_too_large;
    } else {
      char* const out = b.storage.data + b.used;
      std::size_t len = 0;
      uint32_t first = b.fields;  // where the joined field is, once placed
      uint32_t kept = 0;
      for (uint32_t i = 0; i < b.fields; ++i) {
        const HeaderField f = b.storage.fields[i];
        if (is_cookie(f)) {
          if (len > 0) {
            out[len++] = ';';
            out[len++] = ' ';
          }
          std::memcpy(out + len, b.storage.data + f.value_off, f.value_len);
          len += f.value_len;
          if (first != b.fields) continue;  // dropped: its crumb is in the first one
          first = kept;
        }
        b.storage.fields[kept++] = f;
      }
      b.storage.fields[first].value_off = static_cast<uint32_t>(out - b.storage.data);
      b.storage.fields[first].value_len = static_cast<uint32_t>(len);
      b.used += len;
      b.fields = kept;
    }
  }
  h.fields.count = b.fields;
  // The body: none after END_STREAM (the caller hears end_stream), else Content-Length's
  // bytes (libnghttp2 holds the DATA frames to it), else DATA frames up to END_STREAM.
  h.body = end_stream ? BodyFraming::none : BodyFraming::stream;
  for (uint32_t i = 0; i < b.fields && !end_stream; ++i) {
    if (b.storage.fields[i].kind != Field::content_length) continue;
    const std::string_view v = h.fields.value(i);
    uint64_t length = 0;
    for (const char c : v) length = length * 10 + static_cast<uint64_t>(c - '0');
    h.body = BodyFraming::length;
    h.content_length = length;
  }
}

}  // namespace floodgate::http::h2
