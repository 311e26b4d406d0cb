// A client connection and the request in progress on it: the request pipeline
//   accept -> read head -> parse -> route -> [resilience stages, later] -> admit (pool) ->
//   select backend -> forward request -> stream response -> log
// as explicit steps. Each async step is a do_x() that starts an operation and an on_x() that
// handles its completion (Boost.Beast style). docs/architecture.md describes the pipeline.
//
// Buffers: an idle connection holds none. While a request is in progress it borrows from the
// reactor's pools: `in_` (client bytes: head, then body), `bout_` (bytes to the backend),
// `bin_` (backend bytes) and `cout_` (bytes to the client). Each block starts with the
// header-field slots its parser needs.
//
// Concurrency: the request body is pumped client -> backend while the response is read
// backend -> client, so a backend may answer before it has read the whole body.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted; an open session holds
// itself, and whoever runs its code (a completion, a timer, the poller) holds a Ref meanwhile.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>

#include "backend_conn.h"
#include "floodgate/core/outcome.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/http/writer.h"
#include "floodgate/net/stream.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/routing/route_table.h"
#include "floodgate/upstream/admission.h"
#include "floodgate/upstream/backend_load.h"

namespace floodgate::proxy {

class Reactor;

class Session final : public RefCounted<Session>, public net::StreamOwner {
 public:
  // Takes the accepted socket `fd`; `peer` is the client's address.
  Session(Reactor& reactor, int fd, const sockaddr* peer);
  ~Session();

  void start();
  // Drain: close now if no request is in progress, else after the current response.
  void drain();
  // Shutdown deadline: close now. Returns true when a request was cut.
  bool force_close();
  // Generation `retired` is being forced out (server.retirement_grace passed) and `current`
  // serves: a request still on `retired` whose pool `current` no longer has is ended.
  void on_generation_retired(uint64_t retired, const Snapshot& current);

  // net::StreamOwner: the client stream's and the backend connection's completions.
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  static Session& from(net::StreamOwner& owner) { return static_cast<Session&>(owner); }

  // Reactor's intrusive session list.
  Session* list_prev = nullptr;
  Session* list_next = nullptr;

 private:
  // queued: routed, waiting in its pool's admission queue (no backend yet).
  enum class Phase { idle, head, queued, forwarding, generated, tunnel, closing };

  // -- client side (session.cpp)
  void do_client_read();
  void on_client_read(const boost::system::error_code& ec, std::size_t n, bool landing);
  void start_request();
  void begin_request();
  void parse_head();
  void on_head();
  // Answers with floodgate's response for `reason` (or a stage's prebuilt `answer`, sent with
  // `status`), then finishes the request.
  void respond(Reason reason, const PrebuiltAnswer* answer = nullptr, int status = 0);
  void answer_options();
  void write_generated(std::string_view bytes, bool close);
  // No request buffer for the bytes in landing_: 503 buffers_exhausted, then close.
  void refuse_without_buffer(std::size_t n);
  // Turns the request away for a pool reason (kPoolRejections): frees its pool slot at once.
  void reject(Reason reason);
  void on_generated_written(const boost::system::error_code& ec, bool close);
  void finish_request(bool close_client);
  void log_request();
  void close();
  // Ends a request in progress before its response is complete, by `by` (the outcome says
  // so), then closes.
  void cut(OutcomeSource by);
  // Records how the request ends, keeping whether response bytes (a forwarded 1xx) already
  // reached the client.
  void decide(const Outcome& o) {
    const bool saw = outcome_.client_saw_bytes;
    outcome_ = o;
    outcome_.client_saw_bytes = saw;
  }
  void linger_close();
  void on_client_timeout();
  void arm_client_timer(std::chrono::milliseconds d);

  // -- pool admission (admit.cpp)
  void admit();
  void park();
  void leave_queue(Reason reason, CancelReason cancel);
  void on_admission(AdmitStatus status);
  void watch_client_while_queued();
  void count_queue_wait();  // the request leaves the queue now
  static void on_admission_complete(void* context, AdmitStatus status) noexcept;
  static void on_admission_handoff(net::RemoteTask& task);

  // -- backend side (forward.cpp)
  void select_backend();
  void connect_backend(uint32_t backend);
  void on_connected(const boost::system::error_code& ec);
  void send_request_head();
  void pump_request_body();
  void do_backend_read();
  void on_backend_read(const boost::system::error_code& ec, std::size_t n);
  void do_backend_write();
  void on_backend_written(const boost::system::error_code& ec);
  void process_response();
  void on_response_head(bool message_done);
  void pump_response_body();
  void do_client_write();
  void on_client_written(const boost::system::error_code& ec, std::size_t n);
  void on_backend_eof();
  void fail_backend(Reason reason);
  void release_backend(bool reusable);
  void finish_response();
  bool retry_stale_connection();
  void on_interim_response();
  void on_backend_timeout();
  void arm_backend_timer(std::chrono::milliseconds d);

  // -- CONNECT tunnel (connect.cpp)
  void open_connect_tunnel();
  void connect_tunnel_to(const boost::asio::ip::tcp::endpoint& to);
  void on_tunnel_connected(const boost::system::error_code& ec);

  // -- upgrade tunnel (tunnel.cpp)
  void start_tunnel();
  // Both directions of an opaque tunnel, once the first bytes for the client are in cout_.
  void run_tunnel();
  void tunnel_client_to_backend();
  void tunnel_backend_to_client();
  void tunnel_half_closed();

  // Buffer helpers.
  char* in_data() const;
  char* bin_data() const;
  http::HeaderField* in_fields() const { return reinterpret_cast<http::HeaderField*>(in_); }
  http::HeaderField* bin_fields() const { return reinterpret_cast<http::HeaderField*>(bin_); }
  void release_buffers();

  // The client socket; its completions come to this session.
  class ClientStream final : public net::Stream {
   public:
    ClientStream(Poller& poller, Session& session) : Stream(poller), session_(session) {}
    ~ClientStream() = default;
    void hold() override { session_.add_ref(); }
    void release() override { session_.release_ref(); }

   private:
    net::StreamOwner* stream_owner() override { return &session_; }
    Session& session_;
  };

  // An admission grant (or rejection) on its way from the thread that decided it to this
  // session's reactor, through the poller's inbox: no allocation, no lock.
  struct AdmissionHandoff final : net::RemoteTask {
    AdmissionHandoff(Session& s, Poller& p)
        : RemoteTask(&Session::on_admission_handoff), session(s), poller(p) {}
    Session& session;
    Poller& poller;
    AdmitStatus status = AdmitStatus::rejected;  // written by the sender before send()
  };

  Reactor& reactor_;
  ClientStream client_;
  // An open connection holds itself: no pending operation holds a reference (stream.h).
  // close() lets go.
  Ref<Session> self_;
  int adopt_error_ = 0;  // the poller refused the socket (errno)
  http::Parser parser_{http::Parser::Kind::request};
  TimerWheel::Entry client_timer_;
  TimerWheel::Entry backend_timer_;
  Phase phase_ = Phase::idle;
  bool read_into_landing_ = false;  // the pending client read goes to landing_
  bool generated_close_ = false;    // close after the generated response being written
  bool client_writing_ = false;
  bool backend_writing_ = false;
  bool closed_ = false;
  bool lingering_ = false;

  // Client address, formatted once at accept.
  char client_ip_[48] = {};
  uint8_t client_ip_len_ = 0;

  // Where an idle connection's next bytes land, so that it holds no pooled buffer.
  char landing_[1024];

  // Buffers (borrowed from the reactor's pools while a request is in progress).
  char* in_ = nullptr;
  std::size_t in_len_ = 0;  // bytes in in_data()
  std::size_t in_pos_ = 0;  // bytes consumed by the parser
  char* bout_ = nullptr;
  std::size_t bout_len_ = 0;
  char* bin_ = nullptr;
  std::size_t bin_len_ = 0;
  std::size_t bin_pos_ = 0;
  char* cout_ = nullptr;
  std::size_t cout_len_ = 0;

  // The request in progress.
  http::RequestFacts facts_;
  Exchange ex_;                   // its state in the stage chain (stage.h): tickets, shadow verdict
  Ref<ReactorGeneration> gen_;    // the request's generation: pinned once its head is complete
  const Upstream* up_ = nullptr;  // its pool, once routed (part of gen_)
  Ref<BackendConn> conn_;
  // Pool admission. The permit is the request's pool slot, held from admission to the end of
  // the request (tunnels included); parked_ holds the session while its waiter is queued or a
  // completion is on its way; leave_reason_ is why the session gave up on a waiter whose
  // completion was already on its way (it then drops the grant and answers with that reason).
  AdmissionHandoff handoff_;
  AdmissionWaiter waiter_;
  Permit permit_;
  Ref<Session> parked_;
  Reason leave_reason_ = Reason::none;
  std::chrono::steady_clock::time_point queued_at_{};
  InFlight in_flight_;    // this request's count in its backend's process-wide load
  int32_t backend_ = -1;  // index in the upstream, -1 before selection
  http::ResponsePlan plan_;
  Outcome outcome_;             // how the request ended, set where it is decided (core/outcome.h)
  bool connecting_ = false;     // a new backend connection is being established
  bool response_head_ = false;  // the final response head has been parsed
  bool backend_eof_ = false;    // the backend closed its side
  bool last_chunk_written_ = false;
  bool stale_retried_ = false;   // a stale pooled connection was already replaced once
  bool request_sent_ = false;    // the whole request reached the backend
  bool request_parsed_ = false;  // the parser saw the end of the request message
  bool response_done_ = false;
  bool head_request_ = false;
  uint64_t body_bytes_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  std::chrono::steady_clock::time_point started_{};
  char request_id_[32] = {};
  std::string_view request_id_view_;
  int tunnel_open_ = 0;  // directions of an upgrade tunnel still open
};

}  // namespace floodgate::proxy
