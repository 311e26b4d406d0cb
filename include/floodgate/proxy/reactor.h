// A reactor: one thread running one single-threaded io_context, with its own SO_REUSEPORT
// listening sockets, its own client connections, its own keep-alive pools of backend
// connections, its own buffers, timers and metrics shard. A request never changes thread.
//
// Thread-safety: the constructor, listen() and start() run on the main thread before the
// reactor thread exists. post(), drain(), force_close(), pause_accepting() and join() may be
// called from any thread (they post to the reactor), and ping() from the watchdog's. metrics() may
// be read from any thread (relaxed atomics). All other state is touched only on the reactor thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/core/buffer_pool.h"
#include "floodgate/core/clock.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::net {
class Poller;
}  // namespace floodgate::net

namespace floodgate::proxy {

using net::Poller;

class ClientConnection;
class BackendConn;
class ExchangePool;
class Resolver;

// A generation as one reactor holds it. A request pins the one it started on (a Ref; the
// count is not atomic, the reactor's thread alone touches it) and the reactor drops its own
// reference when it installs the next one, so the snapshot is released when the last request
// on it ends.
struct ReactorGeneration : RefCounted<ReactorGeneration> {
  explicit ReactorGeneration(std::shared_ptr<const Snapshot> s) : snapshot(std::move(s)) {
    snapshot->reactor_holds.fetch_add(1, std::memory_order_relaxed);
  }
  ~ReactorGeneration() { snapshot->reactor_holds.fetch_sub(1, std::memory_order_release); }
  ReactorGeneration(const ReactorGeneration&) = delete;
  ReactorGeneration& operator=(const ReactorGeneration&) = delete;
  const std::shared_ptr<const Snapshot> snapshot;
};

class Reactor {
 public:
  // `clock` is the loop's time (now(), the timer wheel); it must outlive the reactor.
  Reactor(unsigned index, std::shared_ptr<const Snapshot> snapshot, AccessLog& access_log,
          const Clock& clock = Clock::steady());
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Binds and listens (SO_REUSEPORT; before start()). Returns the bound endpoint (port 0
  // resolved). `key` names the listener (the address as configured) for remove_listener().
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& at, std::string key);
  // Throws when another socket is bound to `at` already (a port other than 0): every reactor
  // binds with SO_REUSEPORT, which would otherwise share the port with another process of the
  // same user (a second floodgate) and split its connections between them silently. Called
  // once per address before the first reactor binds it; a probe bind without SO_REUSEPORT.
  static void ensure_unused(const boost::asio::ip::tcp::endpoint& at);
  // Opens a listening socket for some reactor (any thread); throws boost::system::system_error.
  static int open_listener(const boost::asio::ip::tcp::endpoint& at,
                           boost::asio::ip::tcp::endpoint& bound);
  // After start(), from any thread: starts accepting on an opened socket, or closes the
  // listener named `key`. Established connections are not affected.
  void add_listener(int fd, std::string key);
  void remove_listener(std::string key);
  void start();
  // Stops accepting, closes idle connections, lets in-flight requests finish.
  void drain();
  // Closes everything now; in-flight requests are cut and counted.
  void force_close();
  // Marks the reactor as being cut, at once (any thread): from here a request that a slot
  // freed elsewhere wakes from a pool's queue is cut instead of going on. The process marks
  // every reactor before it posts any force_close(), so a slot that one reactor's cut frees
  // cannot start a waiter on another before that one's own cut arrives.
  void begin_cut() noexcept { cutting_.store(true, std::memory_order_release); }
  bool cutting() const noexcept { return cutting_.load(std::memory_order_acquire); }
  // A request cut outside force_close()'s walk (reactor thread).
  void count_cut() noexcept { cut_requests_.fetch_add(1, std::memory_order_relaxed); }
  // Installs the next generation (posted; requests in progress keep theirs), then calls
  // `installed` on the reactor thread.
  void activate(std::shared_ptr<const Snapshot> next, std::function<void()> installed);
  // The retirement hook: after server.retirement_grace, requests still on `generation` that
  // wait in a pool's queue are woken and turned away (503 generation_retired), and those whose
  // pool the current generation no longer has are ended (posted).
  void retire(uint64_t generation);
  void join();
  // Runs `f` on the reactor thread soon (any thread).
  void post(std::function<void()> f);

  // The watchdog's heartbeat (app/watchdog.h), from one pinging thread at a time. Sends the
  // reactor's one embedded ping task through its inbox and returns true, unless the previous
  // ping is still unanswered: then it sends nothing and returns false. The loop answers a ping
  // on its next turn, so an idle reactor (waiting in the kernel) answers at once, and only a
  // loop that does not turn leaves one unanswered. No allocation, no lock.
  bool ping() noexcept;
  // The watchdog's drain, which is not a shutdown (posted): with `paused`, stops accepting on
  // every listener (the kernel refuses new connections; the listeners stay bound) and on those
  // added later, while connections and requests carry on; without, accepts again. No effect
  // once drain() or force_close() ran.
  void pause_accepting(bool paused);

  const ReactorMetrics& metrics() const { return metrics_; }
  uint64_t cut_requests() const { return cut_requests_.load(std::memory_order_relaxed); }
  // True once the reactor thread has ended (after drain or force_close).
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  unsigned index() const { return index_; }

  // --- reactor thread only ---
  Poller& poller() { return *poller_; }
  // The kernel interface this reactor's loop runs on, and why server.io = "auto" fell back to
  // epoll (empty when it did not).
  IoEngine io_engine() const;
  std::string io_fallback_reason() const;
  // The generation new requests start on.
  const Snapshot& snapshot() const { return *current_->snapshot; }
  const Ref<ReactorGeneration>& current() const { return current_; }
  // Request buffer layout, fixed at start (a reload may lower the limits, not raise them).
  std::size_t request_fields() const { return layout_.request_fields; }
  std::size_t request_data() const { return layout_.request_data; }
  TimerWheel& wheel() { return wheel_; }
  BufferPool& request_buffers() { return request_buffers_; }
  // The exchanges of this reactor's requests in progress (exchange.h).
  ExchangePool& exchanges() { return *exchanges_; }
  BufferPool& response_buffers() { return response_buffers_; }
  ReactorMetrics& metrics() { return metrics_; }
  // Names of CONNECT targets, resolved off this reactor (resolver.h).
  Resolver& resolver();
  AccessLog& access_log() { return access_log_; }
  // This reactor's links to Redis (the quota's backend).
  QuotaLinks& quota_links() { return *quota_links_; }
  // What they did, for the scrape (any thread: relaxed atomics).
  const redis::LinkStats& redis_stats() const { return quota_links_->stats(); }
  bool draining() const { return draining_; }
  // The time the event loop last woke up: what timers are armed from (a turn is short next to
  // any timeout), one clock read per turn instead of several per request.
  std::chrono::steady_clock::time_point now() const;
  // Writes a new 32-hex-digit request id into `out` (32 bytes).
  void next_request_id(char* out);
  // A client connection id unique in the process: the reactor's index in the top byte.
  uint64_t next_connection_id() noexcept {
    return (uint64_t{index_} << 56) | (++connections_accepted_ & ((uint64_t{1} << 56) - 1));
  }

  // Client connection registry (for draining and forced close).
  void add_client(ClientConnection& s);
  void remove_client(ClientConnection& s);
  // Connections in their opening (accepted, first request head not complete; on a TLS
  // listener the handshake comes first), oldest first. This reactor keeps its share of
  // server.max_opening_connections: at it, a new connection closes the oldest, so that silent
  // or dribbling connections can never keep new clients out.
  void opening_begin(ClientConnection& s);
  void opening_end(ClientConnection& s);
  // The process runs `reactors` reactors: each keeps 1/reactors of the process-wide bounds.
  void share_bounds(unsigned reactors) { reactors_ = reactors == 0 ? 1 : reactors; }

  // Idle keep-alive pool.
  Ref<BackendConn> take_idle(Backend& backend);
  void put_idle(BackendConn& c, const UpstreamParams& pool);
  void remove_idle(BackendConn& c);

 private:
  class Listener;
  struct Heartbeat;  // the ping task (reactor.cpp)
  struct Layout {
    std::size_t request_fields;
    std::size_t request_data;
  };
  void install(std::shared_ptr<const Snapshot> next);
  void adopt_listener(int fd, std::string key);
  void close_idle_connections(const Snapshot* keep);
  void close_idle_clients();
  void maybe_finish();
  // Once a second while the reactor has connections or buffers: refreshes the buffer pool
  // gauges; with `trim`, first gives back the free buffer blocks that stayed idle since the
  // last trim (BufferPool::trim).
  void housekeep(bool trim);
  void on_housekeeping();

  unsigned index_;
  uint64_t connections_accepted_ = 0;  // for next_connection_id()
  // Carries work posted from other threads (post()); the Poller runs it on every turn. It owns
  // no I/O objects: sockets and the tick belong to the Poller.
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::unique_ptr<Poller> poller_;  // client and backend sockets (after io_)
  Ref<ReactorGeneration> current_;
  AccessLog& access_log_;
  // Every deadline of the reactor; the poller advances it and sleeps until its next due entry.
  TimerWheel wheel_;
  TimerWheel::Entry housekeeping_;  // housekeep(), once a second while there is anything to keep
  uint64_t housekeeping_runs_ = 0;
  std::vector<std::unique_ptr<Listener>> listeners_;
  Layout layout_;
  BufferPool request_buffers_;
  BufferPool response_buffers_;
  ReactorMetrics metrics_;
  ClientConnection* clients_ = nullptr;  // intrusive list of open client connections
  std::size_t client_count_ = 0;
  ClientConnection* opening_oldest_ = nullptr;  // the opening connections, oldest first
  ClientConnection* opening_newest_ = nullptr;
  std::size_t opening_count_ = 0;
  unsigned reactors_ = 1;  // share_bounds()
  bool draining_ = false;
  bool accept_paused_ = false;  // pause_accepting(true) is in force
  bool stopped_ = false;
  char next_id_[32] = {};  // the last request id handed out (hex digits, no terminator)
  std::atomic<uint64_t> cut_requests_{0};  // read by the main thread after join
  std::atomic<bool> cutting_{false};       // begin_cut()
  std::atomic<bool> finished_{false};
  std::unique_ptr<QuotaLinks> quota_links_;  // after the poller and the wheel it uses
  // After everything an exchange's parts use (the wheel, the buffers, the quota's links).
  std::unique_ptr<ExchangePool> exchanges_;
  std::unique_ptr<Resolver> resolver_;  // made on first use; posts into io_, so it ends first
  // The watchdog's ping. It outlives the loop: a ping sent after the loop ended is never run.
  std::unique_ptr<Heartbeat> heartbeat_;
  std::thread thread_;
};

// The block layout of a request or response buffer: header-field slots, then bytes.
struct BufferLayout {
  static constexpr std::size_t kResponseFields = 256;
  static std::size_t request_fields(const ServerParams& p) { return p.max_headers; }
  static std::size_t request_data(const ServerParams& p) {
    // The whole head must fit (request line + header section), plus room to stream a body: at
    // least an HTTP/2 stream's window of it (server.http2.stream_window).
    return p.max_uri_bytes + p.max_header_bytes +
           std::max<std::size_t>(std::size_t{64} * 1024, p.http2.stream_window);
  }
  static constexpr std::size_t kResponseData = std::size_t{64} * 1024;
};

}  // namespace floodgate::proxy
