// The HTTP/2 client connection (h2_conn.h): the socket's bytes through the codec, each stream an
// exchange, responses and floodgate's own answers back as HEADERS and DATA under the client's
// flow control.
#include "h2_conn.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>

#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/front_stages.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

namespace h2 = http::h2;
using boost::system::error_code;

namespace {

// The response buffer's layout (BufferLayout): field slots first, then bytes.
constexpr std::size_t kOutFieldBytes = BufferLayout::kResponseFields * sizeof(http::HeaderField);
char* out_data(char* block) {
  return block + kOutFieldBytes;
}

}  // namespace

// -- The connection.

h2::Limits H2Conn::limits_of(const Snapshot& snap, std::size_t request_data) {
  const ServerParams& s = snap.server;
  h2::Limits l;
  l.max_concurrent_streams = s.http2.max_concurrent_streams;
  // A stream's window is what its request buffer keeps after the head (buffers are sized at
  // start: a reload that raises stream_window applies up to that).
  const std::size_t head = std::size_t{s.max_uri_bytes} + s.max_header_bytes;
  l.stream_window = static_cast<uint32_t>(
      std::min<std::size_t>(s.http2.stream_window, request_data > head ? request_data - head : 0));
  l.connection_window = s.http2.connection_window;
  l.max_header_list_bytes = s.http2.max_header_list_bytes;
  l.max_continuations = s.http2.max_continuations;
  l.glitch_threshold = s.http2.glitch_threshold;
  l.max_frames_per_turn = s.http2.max_frames_per_turn;
  l.max_header_bytes = s.max_header_bytes;
  l.max_headers = s.max_headers;
  l.max_uri_bytes = s.max_uri_bytes;
  return l;
}

H2Conn::H2Conn(ClientConnection& from, const char* bytes, std::size_t n, std::size_t early)
    : ClientConnection(HandOver{}, from),
      session_(limits_of(reactor_.snapshot(), reactor_.request_data()), *this),
      max_requests_(reactor_.snapshot().server.max_requests_per_connection) {
  reactor_.exchanges().reserve(1);  // its first stream's exchange, as an HTTP/1.1 connection's
  reactor_.metrics().h2_connections[client_.tls() != nullptr ? 0 : 1].add();
  if (n > 0 && (in_ = reactor_.request_buffers().acquire()) != nullptr) {
    std::memcpy(in_, bytes, n);
    in_len_ = n;
    early_left_ = std::min(early, n);
  }
}

H2Conn::~H2Conn() {
  for (H2Stream* s = streams_; s != nullptr;) {
    H2Stream* next = s->next_;
    s->release_buffers();
    delete s;
    s = next;
  }
  while (free_streams_ != nullptr) delete std::exchange(free_streams_, free_streams_->next_free_);
  reactor_.exchanges().unreserve(1);
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  reactor_.response_buffers().release(std::exchange(out_, nullptr));
}

void H2Conn::begin() {
  if (!session_.ok()) return close();
  idle_since_ = reactor_.now();
  arm_timer(reactor_.snapshot().server.header_timeout);
  process();
}

void H2Conn::do_read() {
  if (client_.reading() || closed_ || peer_closed_) return;
  const std::size_t cap =
      reactor_.request_fields() * sizeof(http::HeaderField) + reactor_.request_data();
  reading_into_landing_ = in_len_ == 0;
  if (!reading_into_landing_ && in_len_ == cap) return;  // full: the codec takes some first
  char* const data = reading_into_landing_ ? landing_ : in_ + in_len_;
  client_.read_some(data, reading_into_landing_ ? sizeof(landing_) : cap - in_len_,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      H2Conn& c = H2Conn::from(o);
                      c.on_read(ec, n, c.reading_into_landing_);
                    });
}

void H2Conn::on_read(const error_code& ec, std::size_t n, bool landing) {
  if (closed_) return;
  if (ec) {
    // The client closed or reset the connection: every stream goes with it.
    peer_closed_ = true;
    return close();
  }
  if (landing) {
    if (in_ == nullptr) in_ = reactor_.request_buffers().acquire();
    if (in_ == nullptr) return close();  // no buffer: the client retries elsewhere
    std::memcpy(in_ + in_len_, landing_, n);
  }
  in_len_ += n;
  if (const net::TlsSession* tls = client_.tls(); tls != nullptr && tls->read_early) {
    early_left_ = in_len_;  // early data comes before everything else on the connection
  }
  process();
}

// Feeds the kept bytes to the codec (at most one frame budget), writes what it answers, and
// reads on unless the codec waits for the next turn or for a stream to end.
void H2Conn::process() {
  if (closed_) return;
  const Ref<H2Conn> keep(this);
  budget_spent_ = awaiting_room_ = false;
  adapt_stream_limit();
  if (in_len_ > 0) {
    feeding_early_ = early_left_ > 0;
    const h2::Session::Fed fed = session_.feed(in_, in_len_, reactor_.now());
    feeding_early_ = false;
    if (closed_) return;
    early_left_ -= std::min(early_left_, fed.consumed);
    if (fed.consumed > 0) {
      std::memmove(in_, in_ + fed.consumed, in_len_ - fed.consumed);
      in_len_ -= fed.consumed;
    }
    budget_spent_ = fed.budget_spent;
    awaiting_room_ = fed.awaiting_stream_room;
    if (fed.failed) {
      peer_closed_ = true;  // nothing more is read; the GOAWAY goes out, then the end
      in_len_ = 0;
    }
  }
  if (in_len_ == 0) reactor_.request_buffers().release(std::exchange(in_, nullptr));
  if (closed_) return;
  if (budget_spent_) reactor_.poller().defer(*this);  // the rest on the next turn
  do_write();
  if (!budget_spent_) do_read();
  maybe_finish();
}

void H2Conn::adapt_stream_limit() {
  const Snapshot& snap = reactor_.snapshot();
  const resilience::InflightCap& cap = snap.front_state->inflight;
  const uint32_t limit = cap.limit();
  if (limit == 0) return;  // no front cap: no pressure it can tell
  const Http2Params& h2 = snap.server.http2;
  const int64_t in_flight = cap.in_flight();
  const bool shrunk = session_.advertised_max_streams() < h2.max_concurrent_streams;
  if (!shrunk && in_flight * 4 >= int64_t{limit} * 3) {
    session_.advertise_max_streams(h2.min_concurrent_streams);
  } else if (shrunk && in_flight * 2 < int64_t{limit}) {
    session_.advertise_max_streams(h2.max_concurrent_streams);
  }
}

void H2Conn::schedule() {
  if (!closed_) reactor_.poller().defer(*this);
}

void H2Conn::on_ready() {
  if (closed_) return;
  const Ref<H2Conn> keep(this);
  if (close_due_) return close();
  if (budget_spent_ || (awaiting_room_ && stream_room())) process();
  // Streams reset while their backend answered: the answer is not wanted, the backend
  // connection goes.
  for_each_stream([&](H2Stream& s) {
    if (!closed_ && std::exchange(s.abandon_due_, false)) s.abandon(OutcomeSource::client);
  });
  run_drained();
  do_write();
  maybe_finish();
}

void H2Conn::do_write() {
  if (writing_ || closed_) return;
  if (session_.busy()) return schedule();  // never from inside the codec: on_ready() writes
  if (!session_.wants_write()) return;
  if (out_ == nullptr) out_ = reactor_.response_buffers().acquire();
  if (out_ == nullptr) {
    // No buffer to write with (server.max_buffers_per_reactor): the connection ends, on the
    // next turn, not under the code that asked for the write.
    close_due_ = true;
    return schedule();
  }
  const std::size_t n = session_.produce(out_, kOutFieldBytes + BufferLayout::kResponseData);
  if (n == 0) return;
  writing_ = true;
  arm_send_timer(reactor_.snapshot().server.send_timeout);
  client_.write(out_, n, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    H2Conn::from(o).on_written(ec);
  });
  if (drain_due_) schedule();  // attempts whose output the codec took go on
}

void H2Conn::on_written(const error_code& ec) {
  writing_ = false;
  if (closed_) return;
  if (ec) return close();
  if (live_ == 0) {
    arm_timer(reactor_.snapshot().server.idle_timeout);
  } else {
    arm_checks();  // streams may wait for the client's window
  }
  run_drained();
  do_write();
  if (!writing_) reactor_.response_buffers().release(std::exchange(out_, nullptr));
  if (awaiting_room_ && stream_room()) process();
  maybe_finish();
}

// Streams whose attempt waits for its output to go: once the codec has taken a stream's
// staged body, its attempt goes on (it parses more of the response into the room).
void H2Conn::run_drained() {
  drain_due_ = false;
  for_each_stream([&](H2Stream& s) {
    if (!closed_ && s.drained_due_ && (s.out_pos_ == s.out_len_ || s.reset_) && s.ex_ != nullptr) {
      s.drained_due_ = false;
      s.ex_->attempt().on_client_drained();
    }
  });
}

void H2Conn::maybe_finish() {
  if (closed_ || writing_) return;
  if (session_.finished() || (peer_closed_ && !session_.wants_write())) close();
}

void H2Conn::on_timer() {
  const Ref<H2Conn> keep(this);
  const ServerParams& server = reactor_.snapshot().server;
  // The whole connection: a write the client takes nothing of (send_progressing re-arms).
  if (writing_ && !send_progressing(server.send_timeout)) return close();
  // No first stream within header_timeout: the opening is over.
  if (opening && live_ == 0) return close();
  // Each stream: a response body the client opens no window for (after kClientPacedAfter the
  // client sets its pace and what admitted it goes back; after send_timeout it is cut), a
  // request that stalls (no byte of its head or body for idle_timeout).
  const auto now = reactor_.now();
  bool watching = false;
  for_each_stream([&](H2Stream& stream) {
    if (closed_) return;
    H2Stream* const s = &stream;
    if (s->out_len_ > s->out_pos_ && !s->reset_) {
      // Only the client's shut windows count: a stream that waits its turn on a slow but
      // reading connection is not stalled by its client (the connection's write has
      // send_timeout).
      if (session_.can_send_body(s->id_)) s->progress_at_ = now;
      const auto stalled = now - s->progress_at_;
      if (stalled >= server.send_timeout) {
        reactor_.metrics().send_timeouts.add();
        s->cut(OutcomeSource::client);
      } else {
        if (stalled >= kClientPacedAfter && s->ex_ != nullptr) s->ex_->release_tickets();
        watching = true;
      }
    } else if (s->exchange_live_ && !s->request_ended_) {
      if (now - s->request_at_ >= server.idle_timeout) {
        s->cut(OutcomeSource::client);
      } else {
        watching = true;
      }
    } else if (s->exchange_live_) {
      watching = true;  // its backend's own timeouts run
    }
  });
  if (closed_ || writing_) return;
  if (watching) return arm_checks();
  if (live_ == 0) {
    const auto idle = server.idle_timeout;
    if (now - idle_since_ < idle) {
      return reactor_.wheel().schedule(client_timer_, idle_since_ + idle);
    }
    // Idle: a graceful end, then the close.
    session_.shutdown();
    peer_closed_ = true;
    do_write();
    maybe_finish();
  }
}

void H2Conn::arm_checks() {
  const auto send_timeout = reactor_.snapshot().server.send_timeout;
  arm_timer(std::clamp(send_timeout / 4, std::chrono::milliseconds(1), kClientPacedAfter));
}

void H2Conn::drain() {
  session_.shutdown();  // GOAWAY: the streams in progress finish, no new one is taken
  do_write();
  maybe_finish();
}

bool H2Conn::force_close() {
  const bool cut = live_ > 0;
  const Ref<H2Conn> keep(this);
  close();
  return cut;
}

void H2Conn::on_generation_retired(uint64_t retired, const Snapshot& current) {
  const Ref<H2Conn> keep(this);
  for_each_stream([&](H2Stream& s) {
    if (s.ex_ != nullptr && s.exchange_live_) s.ex_->on_generation_retired(retired, current);
  });
}

void H2Conn::close() {
  if (closed_) return;
  const Ref<H2Conn> keep(this);
  closed_ = true;
  begin_close();
  for_each_stream([&](H2Stream& s) {
    s.open_ = false;
    s.abandon(peer_closed_ ? OutcomeSource::client : OutcomeSource::floodgate);
  });
  reactor_.request_buffers().release(std::exchange(in_, nullptr));
  in_len_ = 0;
  if (!writing_) reactor_.response_buffers().release(std::exchange(out_, nullptr));
  finish_close();  // may be the last reference: nothing follows
}

// -- The codec's events.

// The metric's labels are the codec's names, in its order.
static_assert(kH2GlitchLabels == h2::kGlitchNames);

void H2Conn::on_glitch(h2::Glitch g) noexcept {
  reactor_.metrics().h2_glitches[static_cast<std::size_t>(g)].add();
}

void H2Conn::on_goaway_sent(h2::ErrorCode code) noexcept {
  const std::size_t label = code == h2::ErrorCode::no_error            ? 0
                            : code == h2::ErrorCode::enhance_your_calm ? 1
                                                                       : 2;
  reactor_.metrics().h2_goaways[label].add();
}

h2::StreamHandle H2Conn::on_stream_open(int32_t id, h2::HeadStorage& storage) {
  // Called from libnghttp2 (C): nothing may throw through it. Out of memory for a stream or
  // its exchange, the stream is refused (REFUSED_STREAM) and the connection goes on.
  try {
    return open_stream(id, storage);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

h2::StreamHandle H2Conn::open_stream(int32_t id, h2::HeadStorage& storage) {
  // After floodgate's GOAWAY (drain, max_requests_per_connection, the glitch threshold's 75 %)
  // libnghttp2 still takes streams until the frame is out; they would run, and the client
  // would send them again on a new connection: refused instead (REFUSED_STREAM).
  if (closed_ || reactor_.draining() || session_.goaway_submitted()) return nullptr;
  // What may fail (a stream object, an exchange beyond the pool's, a buffer) first, then the
  // stream is linked: a refusal leaves nothing behind.
  H2Stream* s = free_streams_ != nullptr ? free_streams_ : new H2Stream(*this);
  if (s == free_streams_) free_streams_ = s->next_free_;
  s->reset_for(id);
  try {
    s->ex_ = &reactor_.exchanges().acquire(*s, facts_);
  } catch (const std::bad_alloc&) {
    s->next_free_ = free_streams_;
    free_streams_ = s;
    throw;
  }
  char* const buffer = reactor_.request_buffers().acquire();
  if (buffer == nullptr) {  // REFUSED_STREAM: the client may retry it
    std::exchange(s->ex_, nullptr)->detach();
    s->next_free_ = free_streams_;
    free_streams_ = s;
    return nullptr;
  }
  reactor_.metrics().h2_streams.add();
  s->in_ = buffer;
  s->open_ = s->exchange_live_ = true;
  s->next_ = streams_;
  if (streams_ != nullptr) streams_->prev_ = s;
  streams_ = s;
  ++live_;
  if (!writing_) arm_checks();
  const Snapshot& snap = reactor_.snapshot();
  s->ex_->begin(reactor_.current(), reactor_.poller().clock().now(), 0);
  const std::size_t head_bytes =
      std::size_t{snap.server.max_uri_bytes} + snap.server.max_header_bytes;
  storage.data = buffer + reactor_.request_fields() * sizeof(http::HeaderField);
  storage.capacity = std::min(head_bytes, reactor_.request_data());
  s->stage_off_ = storage.capacity;
  s->stage_cap_ = reactor_.request_data() - storage.capacity;
  s->request_at_ = reactor_.now();
  storage.fields = reinterpret_cast<http::HeaderField*>(buffer);
  storage.max_fields = static_cast<uint32_t>(reactor_.request_fields());
  if (max_requests_ != 0 && ++streams_seen_ >= max_requests_) session_.shutdown();
  return s;
}

void H2Conn::on_request_head(h2::StreamHandle handle, const http::RequestHead& head, Reason error,
                             bool end_stream) {
  H2Stream& s = *static_cast<H2Stream*>(handle);
  if (closed_ || s.ex_ == nullptr) return;
  reactor_.opening_end(*this);
  s.request_at_ = reactor_.now();
  Exchange& ex = *s.ex_;
  ex.head = head;
  s.request_ended_ = end_stream;
  ex.request_parsed = end_stream;
  if (error != Reason::none) return ex.answer(error);
  if (!ex.take_head(reactor_.current())) return;                   // refused: answered
  if (ex.facts.connect) return ex.answer(Reason::connect_denied);  // not over HTTP/2 (yet)
  ex.route(feeding_early_);
}

void H2Conn::on_request_data(h2::StreamHandle handle, const char* data, std::size_t n) {
  H2Stream& s = *static_cast<H2Stream*>(handle);
  if (s.ex_ == nullptr || s.ex_->phase == Exchange::Phase::answered || s.reset_) {
    session_.consume(s.id_, n);  // nobody takes it: the window reopens
    return;
  }
  char* const area = s.stage();
  const std::size_t cap = s.stage_cap_;
  s.request_at_ = reactor_.now();
  if (s.stage_len_ + n > cap) {
    std::memmove(area, area + s.stage_pos_, s.stage_len_ - s.stage_pos_);
    s.stage_len_ -= s.stage_pos_;
    s.stage_pos_ = 0;
  }
  if (s.stage_len_ + n > cap) {  // more than its window: the client ignores flow control
    session_.consume(s.id_, n);
    session_.reset(s.id_, h2::ErrorCode::flow_control_error);
    return s.abandon(OutcomeSource::client);
  }
  std::memcpy(area + s.stage_len_, data, n);
  s.stage_len_ += n;
  s.ex_->bytes_in += n;
  if (s.ex_->phase == Exchange::Phase::forwarding) s.pump_request_body(s.ex_->attempt());
}

void H2Conn::on_request_end(h2::StreamHandle handle) {
  H2Stream& s = *static_cast<H2Stream*>(handle);
  s.request_ended_ = true;
  if (s.ex_ != nullptr && s.ex_->phase == Exchange::Phase::forwarding) {
    s.pump_request_body(s.ex_->attempt());
  }
}

void H2Conn::on_stream_reset(h2::StreamHandle handle, h2::ErrorCode /*code*/) {
  H2Stream& s = *static_cast<H2Stream*>(handle);
  s.reset_ = true;
  if (!s.head_submitted_) session_.glitch(h2::Glitch::reset_unanswered, reactor_.now());
  // A request whose backend already works on it whole keeps its stream's slot until the
  // backend has answered (the answer is dropped): resetting streams frees no room. Anything
  // else ends now.
  if (s.ex_ != nullptr && s.ex_->phase == Exchange::Phase::forwarding && s.ex_->request_parsed &&
      !s.ex_->attempt().response_started()) {
    return;
  }
  s.abandon(OutcomeSource::client);
}

void H2Conn::on_stream_close(h2::StreamHandle handle, h2::ErrorCode code) {
  H2Stream& s = *static_cast<H2Stream*>(handle);
  if (!s.open_) return;  // the connection's close() has ended it
  s.open_ = false;
  s.hold();
  if (s.exchange_live_ && code != h2::ErrorCode::no_error && !s.reset_) {
    s.reset_ = true;
    s.abandon(OutcomeSource::client);
  }
  s.release();
}

std::size_t H2Conn::read_body(h2::StreamHandle handle, char* out, std::size_t max, bool& eof) {
  return static_cast<H2Stream*>(handle)->read_body(out, max, eof);
}

void H2Conn::free_stream(H2Stream& s) noexcept {
  if (s.prev_ != nullptr) {
    s.prev_->next_ = s.next_;
  } else {
    streams_ = s.next_;
  }
  if (s.next_ != nullptr) s.next_->prev_ = s.prev_;
  s.release_buffers();
  s.next_free_ = free_streams_;
  free_streams_ = &s;
}

// -- A stream.

void H2Stream::reset_for(int32_t id) noexcept {
  id_ = id;
  ex_ = nullptr;
  next_free_ = prev_ = next_ = nullptr;
  holds_ = 0;
  stage_pos_ = stage_len_ = out_pos_ = out_len_ = 0;
  open_ = exchange_live_ = request_ended_ = head_submitted_ = body_ended_ = false;
  drained_due_ = reset_ = abandon_due_ = false;
  stage_off_ = stage_cap_ = 0;
}

void H2Stream::hold() noexcept {
  ++holds_;
  conn_.add_ref();
}

void H2Stream::release() noexcept {
  H2Conn& conn = conn_;
  if (--holds_ == 0 && !open_ && !exchange_live_) conn.free_stream(*this);
  conn.release_ref();  // last: it may let go of the connection
}

// A stream the client reset while its backend works on the whole request is not gone: the
// exchange goes on to the backend's answer, which the sink drops (reset_).
bool H2Stream::gone() const noexcept {
  return conn_.closed_ || !exchange_live_;
}

std::string_view H2Stream::client_ip() const noexcept {
  return conn_.peer_ip();
}

const net::TlsSession* H2Stream::tls() const noexcept {
  return conn_.client_.tls();
}

char* H2Stream::stage() const noexcept {
  return in_ + conn_.reactor_.request_fields() * sizeof(http::HeaderField) + stage_off_;
}

// Request body staged and never passed on (the exchange ended first): the client's windows
// open again for it, so the connection's other uploads do not stall.
void H2Stream::give_back_stage() {
  if (stage_len_ > stage_pos_ && open_ && !conn_.closed_) {
    conn_.session_.consume(id_, stage_len_ - stage_pos_);
  }
  stage_pos_ = stage_len_ = 0;
}

void H2Stream::release_buffers() {
  conn_.reactor_.request_buffers().release(std::exchange(in_, nullptr));
  conn_.reactor_.response_buffers().release(std::exchange(out_, nullptr));
  stage_pos_ = stage_len_ = out_pos_ = out_len_ = 0;
}

Reason H2Stream::submit(int status, const http::Parser* head, bool has_body) {
  if (out_ == nullptr) out_ = conn_.reactor_.response_buffers().acquire();
  if (out_ == nullptr) return Reason::buffers_exhausted;
  std::array<h2::ResponseField, BufferLayout::kResponseFields> fields;
  int n = 0;
  if (head != nullptr) {
    // The names, lower-cased, go where the body will be staged: the codec copies them now.
    n = http::h2_response_fields(*head, fields.data(), fields.size(), out_data(out_),
                                 BufferLayout::kResponseData);
    if (n < 0) return Reason::upstream_bad_response;
  }
  if (!conn_.session_.submit_response(id_, status, fields.data(), static_cast<std::size_t>(n),
                                      has_body)) {
    return Reason::upstream_bad_response;
  }
  head_submitted_ = true;
  body_ended_ = !has_body;
  out_pos_ = out_len_ = 0;
  return Reason::none;
}

Reason H2Stream::response_head(const http::Parser& head, bool interim) {
  if (reset_) {
    // The client reset the stream while the backend worked on it: the backend has answered,
    // its slot goes back now (the backend connection with it).
    abandon_due_ = true;
    conn_.schedule();
    return Reason::none;
  }
  if (interim) return Reason::none;  // 1xx: not forwarded over HTTP/2 (docs)
  const int status = head.status();
  const bool has_body = !ex_->head_request && status != 204 && status != 304;
  const Reason r = submit(status, &head, has_body);
  if (r == Reason::none) {
    ex_->outcome.client_saw_bytes = true;
    conn_.do_write();
  }
  return r;
}

Reason H2Stream::tunnel_head(const http::Parser* /*head*/) {
  return Reason::upstream_bad_response;  // no tunnel over HTTP/2: CONNECT is refused before
}

void H2Stream::run_tunnel() {
  cut(OutcomeSource::floodgate);
}

std::size_t H2Stream::body_room() const noexcept {
  if (reset_) return BufferLayout::kResponseData;  // dropped as it comes
  if (out_ == nullptr) return 0;
  return BufferLayout::kResponseData - (out_len_ - out_pos_);
}

void H2Stream::put_body(const char* data, std::size_t n) {
  if (reset_ || n == 0) return;
  if (out_len_ == out_pos_) progress_at_ = conn_.reactor_.now();  // its wait for the client starts
  char* const area = out_data(out_);
  if (out_len_ + n > BufferLayout::kResponseData) {
    std::memmove(area, area + out_pos_, out_len_ - out_pos_);
    out_len_ -= out_pos_;
    out_pos_ = 0;
  }
  std::memcpy(area + out_len_, data, n);
  out_len_ += n;
  ex_->bytes_out += n;
}

void H2Stream::end_body() {
  body_ended_ = true;
  if (!reset_ && head_submitted_) conn_.session_.resume_body(id_);
}

void H2Stream::flush() {
  drained_due_ = true;
  conn_.drain_due_ = true;
  if (!reset_ && head_submitted_) conn_.session_.resume_body(id_);
  conn_.do_write();
  conn_.schedule();  // the attempt hears on_client_drained() there, never inside this call
  if (!conn_.client_timer_.armed() && !conn_.closed_ && !conn_.writing_) conn_.arm_checks();
}

std::size_t H2Stream::read_body(char* out, std::size_t max, bool& eof) {
  const std::size_t n = std::min(max, out_len_ - out_pos_);
  if (n > 0) progress_at_ = conn_.reactor_.now();
  if (n > 0) std::memcpy(out, out_data(out_) + out_pos_, n);
  out_pos_ += n;
  if (out_pos_ == out_len_) out_pos_ = out_len_ = 0;
  eof = body_ended_ && out_len_ == 0;
  return n;
}

void H2Stream::pump_request_body(Attempt& a) {
  if (a.sending() || gone() || !a.head_ready() || ex_ == nullptr) return;
  Exchange& ex = *ex_;
  const ServerParams& server = ex.gen->snapshot->server;
  const bool chunked = ex.head.body == http::BodyFraming::stream;
  const char* const area = stage();
  std::size_t passed = 0;
  while (stage_pos_ < stage_len_ && a.request_room() >= 2 * kFramingSlack) {
    const std::size_t n = std::min(stage_len_ - stage_pos_, a.request_room() - kFramingSlack);
    http::Writer w(a.request_end(), a.request_room());
    if (chunked) http::write_chunk_header(n, w);
    w.put({area + stage_pos_, n});
    if (chunked) w.put(http::kChunkEnd);
    a.commit_request(w.size());
    stage_pos_ += n;
    passed += n;
    ex.body_bytes += n;
    ex.body_taken = true;
  }
  if (stage_pos_ == stage_len_) stage_pos_ = stage_len_ = 0;
  if (passed > 0) {
    conn_.session_.consume(id_, passed);  // WINDOW_UPDATE: the client may send that much more
    conn_.do_write();
  }
  if (server.max_body_bytes != 0 && ex.body_bytes > server.max_body_bytes) {
    a.end(false);
    if (ex.outcome.client_saw_bytes) return cut(OutcomeSource::client);
    return ex.answer(Reason::body_too_large);
  }
  if (request_ended_ && stage_len_ == 0 && !ex.request_parsed &&
      a.request_room() >= http::kLastChunk.size()) {
    if (chunked) {
      http::Writer last(a.request_end(), a.request_room());
      last.put(http::kLastChunk);
      a.commit_request(last.size());
    }
    ex.request_parsed = true;
  }
  if (a.request_buffered()) return a.send_request();
  if (ex.request_parsed) return a.request_done();
}

void H2Stream::respond(const Decision& d) {
  Exchange& ex = *ex_;
  // floodgate's answer as HTTP/1.1 would carry it, parsed back into a status, fields and a
  // body for HTTP/2.
  std::array<char, 4096> built;
  const std::string_view bytes = ex.answer_bytes(d, false, built.data(), built.size());
  if (reset_ || conn_.closed_) return finish_exchange();
  if (out_ == nullptr) out_ = conn_.reactor_.response_buffers().acquire();
  if (out_ == nullptr) {
    conn_.session_.reset(id_, h2::ErrorCode::refused_stream);
    return finish_exchange();
  }
  http::Parser parser(http::Parser::Kind::response);
  parser.begin(bytes.data(), reinterpret_cast<http::HeaderField*>(out_),
               http::HeadLimits{0, 0, BufferLayout::kResponseFields});
  if (parser.parse_head(bytes.size()) == http::Parser::Result::error) {
    conn_.session_.reset(id_, h2::ErrorCode::internal_error);
    return finish_exchange();
  }
  const std::string_view body =
      ex.head_request ? std::string_view{} : bytes.substr(parser.head_end());
  ex.head_bytes_out += parser.head_end();
  if (submit(parser.status(), &parser, !body.empty()) != Reason::none) {
    conn_.session_.reset(id_, h2::ErrorCode::internal_error);
    return finish_exchange();
  }
  put_body(body.data(), body.size());
  body_ended_ = true;
  ex.outcome.client_saw_bytes = true;
  finish_exchange();
  conn_.do_write();
}

void H2Stream::answer_options() {
  // What floodgate forwards, as the HTTP/1.1 answer says it (OPTIONS * cannot come over
  // HTTP/2, whose :path is never "*" but for OPTIONS, where libnghttp2 lets it through).
  Decision d = Decision::stop(Reason::none);
  static const PrebuiltAnswer kOptions{std::string(http::options_response(false)),
                                       std::string(http::options_response(true))};
  d.answer = &kOptions;
  respond(d);
}

void H2Stream::cut(OutcomeSource by) {
  const bool send_reset = !reset_ && open_;
  reset_ = true;
  out_pos_ = out_len_ = 0;  // nothing more of its response goes
  if (send_reset) {
    conn_.session_.reset(
        id_, by == OutcomeSource::upstream ? h2::ErrorCode::internal_error : h2::ErrorCode::cancel);
  }
  abandon(by);
  conn_.do_write();
}

void H2Stream::abandon(OutcomeSource by) {
  if (!exchange_live_ || ex_ == nullptr) return;
  const Ref<H2Conn> keep(&conn_);
  Exchange& ex = *ex_;
  if (ex.phase != Exchange::Phase::none || ex.head.complete()) {
    ex.outcome.cut_short(by);
    ex.log();
  }
  ex.abandon();
  let_go();
}

void H2Stream::response_done() {
  finish_exchange();
  conn_.do_write();
}

// The exchange is over (its answer or the backend's response handed to the codec): logged,
// ended, and let go of; the stream stays until the codec has sent the rest and closed it.
void H2Stream::finish_exchange() {
  if (!exchange_live_ || ex_ == nullptr) return;
  const Ref<H2Conn> keep(&conn_);
  Exchange& ex = *ex_;
  ex.log();
  ex.end_attempts();
  ex.end();
  for (Attempt& a : ex.attempts) a.release_buffers();
  conn_.reactor_.request_buffers().release(std::exchange(in_, nullptr));
  let_go();
}

// The stream lets go of its exchange (ended or abandoned): its slot of the concurrent-stream
// limit is free, a new stream waiting for one is read, and an idle connection's timer runs.
void H2Stream::let_go() {
  exchange_live_ = false;
  give_back_stage();
  if (--conn_.live_ == 0) {
    conn_.idle_since_ = conn_.reactor_.now();
    if (!conn_.writing_ && !conn_.closed_) conn_.arm_checks();
  }
  std::exchange(ex_, nullptr)->detach();
  if (conn_.awaiting_room_ && !conn_.closed_) conn_.reactor_.poller().defer(conn_);
  if (holds_ == 0 && !open_) conn_.free_stream(*this);
}

}  // namespace floodgate::proxy
