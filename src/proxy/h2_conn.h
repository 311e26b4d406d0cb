// A client connection speaking HTTP/2 (RFC 9113): the frame layer is http::h2::Session (the
// codec, with floodgate's frame budget, stream pacing, head caps and glitch counter), and each
// stream is one Exchange (exchange.h) with an H2Stream as its Downstream, so a stream goes
// through the whole chain as an HTTP/1.1 request does, to an HTTP/1.1 backend.
//
// A connection becomes HTTP/2 by hand-over: the HTTP/1.1 ClientConn reads the first bytes
// (after the TLS handshake), and when ALPN chose h2, or a listener of server.http2.h2c_listen
// sees the HTTP/2 preface, an H2Conn takes its socket (ClientConnection's hand-over).
//
// Buffers: an idle connection holds none (reads land in `landing_`); bytes the codec has not
// taken yet (the frame budget, a stream limit reached) wait in a request buffer, the output in
// a response buffer while a write is on its way. Each stream borrows a request buffer for its
// head and up to a window of request body, and a response buffer for the response's body on
// its way to the codec.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted (ClientConnection); a stream
// holds its connection while its exchange holds it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "client_connection.h"
#include "floodgate/http/h2_session.h"
#include "floodgate/net/poller.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/exchange.h"

namespace floodgate::proxy {

class H2Conn;

// One stream: the Downstream of its exchange.
class H2Stream final : public Downstream {
 public:
  explicit H2Stream(H2Conn& conn) : conn_(conn) {}
  ~H2Stream() = default;

  // Downstream (downstream.h).
  void hold() noexcept override;
  void release() noexcept override;
  bool gone() const noexcept override;
  std::string_view client_ip() const noexcept override;
  const net::TlsSession* tls() const noexcept override;
  uint32_t stream_id() const noexcept override { return static_cast<uint32_t>(id_); }
  void respond(const Decision& d) override;
  void answer_options() override;
  void cut(OutcomeSource by) override;
  void watch_while_waiting(bool /*on*/) override {}
  void on_request_head_sent(Attempt& a) override { pump_request_body(a); }
  void pump_request_body(Attempt& a) override;
  Reason response_head(const http::Parser& head, bool interim) override;
  Reason tunnel_head(const http::Parser* head) override;
  std::size_t body_room() const noexcept override;
  void put_body(const char* data, std::size_t n) override;
  void end_body() override;
  bool response_pending() const noexcept override { return out_len_ > out_pos_ || drained_due_; }
  bool writing() const noexcept override { return false; }
  void flush() override;
  void discard_response() noexcept override { out_pos_ = out_len_ = 0; }
  void response_done() override;
  void run_tunnel() override;

 private:
  friend class H2Conn;
  // A stream from the connection's free list begins as stream `id`.
  void reset_for(int32_t id) noexcept;
  // A head for the client: `status`, the fields of `head` (nullptr: none) as HTTP/2 fields,
  // and whether a body follows. Reason::none or buffers_exhausted.
  Reason submit(int status, const http::Parser* head, bool has_body);
  // The exchange is over (logged, ended): its stream lets go of it.
  void finish_exchange();
  // The client reset the stream, or the connection is closing: the exchange is given up.
  void abandon(OutcomeSource by);
  std::size_t read_body(char* out, std::size_t max, bool& eof);
  void release_buffers();
  void give_back_stage();
  // Where the request body is staged: after the field slots and the head's storage in in_.
  char* stage() const noexcept;
  void let_go();

  H2Conn& conn_;
  int32_t id_ = 0;
  Exchange* ex_ = nullptr;
  H2Stream* next_free_ = nullptr;
  // The connection's list of its streams (open, or with their exchange still live).
  H2Stream* prev_ = nullptr;
  H2Stream* next_ = nullptr;
  uint32_t holds_ = 0;
  // The request buffer: field slots, the head's bytes, then the body waiting for the attempt.
  char* in_ = nullptr;
  std::size_t stage_pos_ = 0;  // of the body area: the first byte not passed on
  std::size_t stage_len_ = 0;
  // The response buffer: the body on its way to the codec ([out_pos_, out_len_) of its data).
  char* out_ = nullptr;
  std::size_t out_pos_ = 0;
  std::size_t out_len_ = 0;
  bool open_ = false;           // the codec has the stream (until on_stream_close)
  bool exchange_live_ = false;  // its exchange has not ended
  bool request_ended_ = false;  // END_STREAM came
  bool head_submitted_ = false;
  bool body_ended_ = false;   // the response's body is complete
  bool drained_due_ = false;  // the attempt waits for on_client_drained()
  // When the codec last took body bytes of this stream, or its staged body began to wait:
  // a stream whose client opens no window for server.send_timeout is cut.
  std::chrono::steady_clock::time_point progress_at_{};
  bool reset_ = false;        // the client reset it, or floodgate did
  bool abandon_due_ = false;  // reset while its backend answers: ended on the next turn
  // Where its request body is staged in in_ (after the head's storage), fixed at its opening.
  std::size_t stage_off_ = 0;
  std::size_t stage_cap_ = 0;
  // When the client last sent something of this stream's request (its head, body bytes):
  // a request that stalls for server.idle_timeout is ended.
  std::chrono::steady_clock::time_point request_at_{};
};

class H2Conn final : public ClientConnection, public http::h2::Handler, public net::PollTarget {
 public:
  // Takes over `from`'s socket with the first `n` bytes its client sent (`bytes`), the first
  // `early` of them in TLS early data.
  H2Conn(ClientConnection& from, const char* bytes, std::size_t n, std::size_t early);
  ~H2Conn() override;

  void drain() override;
  bool force_close() override;
  void on_generation_retired(uint64_t retired, const Snapshot& current) override;

  // StreamOwner and PollTarget (and the streams' holds).
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  void on_poll(uint32_t /*events*/) override {}
  void on_ready() override;  // the next turn after the frame budget was spent

  static H2Conn& from(net::StreamOwner& owner) { return static_cast<H2Conn&>(owner); }

 private:
  friend class H2Stream;

  // ClientConnection.
  void begin() override;
  void close() override;
  void on_timer() override;

  // http::h2::Handler.
  bool accepts_stream() noexcept override { return stream_room() && !reactor_.draining(); }
  void on_glitch(http::h2::Glitch g) noexcept override;
  void on_goaway_sent(http::h2::ErrorCode code) noexcept override;
  void on_stream_refused(int32_t /*id*/) noexcept override {
    reactor_.metrics().h2_refused_streams.add();
  }
  http::h2::StreamHandle on_stream_open(int32_t id, http::h2::HeadStorage& storage) override;
  void on_request_head(http::h2::StreamHandle s, const http::RequestHead& head, Reason error,
                       bool end_stream) override;
  void on_request_data(http::h2::StreamHandle s, const char* data, std::size_t n) override;
  void on_request_end(http::h2::StreamHandle s) override;
  void on_stream_reset(http::h2::StreamHandle s, http::h2::ErrorCode code) override;
  void on_stream_close(http::h2::StreamHandle s, http::h2::ErrorCode code) override;
  std::size_t read_body(http::h2::StreamHandle s, char* out, std::size_t max, bool& eof) override;

  // Work that may not run where it is asked for (inside the codec's calls, inside an attempt's
  // own call): done on the poller's ready list (on_ready), this turn.
  void schedule();
  void do_read();
  void on_read(const boost::system::error_code& ec, std::size_t n, bool landing);
  // Feeds what is buffered to the codec (one frame budget), then writes what it has.
  void process();
  void do_write();
  void on_written(const boost::system::error_code& ec);
  // After a write, or once the codec has taken a stream's body: attempts waiting for their
  // output to drain go on.
  void run_drained();
  // Whether the connection is over: the codec is done and nothing is being written.
  void maybe_finish();
  // The connection's timer: idle_timeout with no stream (from `idle_since_`), send_timeout's
  // checks while a write is on its way or a stream's body waits for the client's window.
  void arm_checks();
  std::chrono::steady_clock::time_point idle_since_{};
  static http::h2::Limits limits_of(const Snapshot& snap, std::size_t request_data);
  // Streams whose exchange has not ended: what the concurrent-stream limit counts.
  bool stream_room() const noexcept { return live_ < session_.advertised_max_streams(); }
  void free_stream(H2Stream& s) noexcept;
  // Calls f(stream) for each stream in use, holding it meanwhile (so that it stays in the list
  // and its successor is read after f, whatever f ends).
  template <class F>
  void for_each_stream(F&& f) {
    for (H2Stream* s = streams_; s != nullptr;) {
      s->hold();
      f(*s);
      H2Stream* const next = s->next_;
      s->release();
      s = next;
    }
  }
  http::h2::StreamHandle open_stream(int32_t id, http::h2::HeadStorage& storage);
  // Under pressure (the front in-flight cap three quarters full) the connection advertises
  // server.http2.min_concurrent_streams, and max_concurrent_streams again once the cap is
  // below half full.
  void adapt_stream_limit();

  http::h2::Session session_;
  // The client's bytes the codec has not taken: landing_ while a read lands there, in_ (a
  // request buffer) while any are kept.
  char landing_[1024];
  char* in_ = nullptr;
  std::size_t in_len_ = 0;
  bool reading_into_landing_ = false;
  // Of in_, the bytes that came in TLS early data (0-RTT): a request whose head is read while
  // any are being fed is an early one (resilience.protocol.early_data_safe_methods).
  std::size_t early_left_ = 0;
  bool feeding_early_ = false;
  // The output: a response buffer while a write is on its way.
  char* out_ = nullptr;
  bool writing_ = false;
  bool budget_spent_ = false;   // a turn's frames were processed: on_ready() goes on
  bool close_due_ = false;      // no buffer to write with: closed on the next turn
  bool drain_due_ = false;      // an attempt waits for its output to be taken
  bool awaiting_room_ = false;  // a new stream waits for one to end
  bool peer_closed_ = false;    // the client closed its side
  uint32_t live_ = 0;           // streams whose exchange has not ended
  uint32_t streams_seen_ = 0;   // streams opened (max_requests_per_connection)
  uint32_t max_requests_ = 0;
  H2Stream* free_streams_ = nullptr;
  H2Stream* streams_ = nullptr;  // the list of streams in use
};

}  // namespace floodgate::proxy
