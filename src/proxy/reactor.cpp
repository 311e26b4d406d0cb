#include "floodgate/proxy/reactor.h"

#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>

#include <boost/asio/post.hpp>
#include <cstring>
#include <random>
#include <system_error>

#include "backend_conn.h"
#include "client_connection.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/core/log_throttle.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/tls.h"
#include "floodgate/proxy/exchange.h"
#include "resolver.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// Housekeeping (the buffer pool gauges) runs once a second, and every kTrimEvery-th run first
// trims the buffer pools: a free block idle for 10 s goes back to the allocator.
constexpr auto kHousekeeping = std::chrono::seconds(1);
constexpr unsigned kTrimEvery = 10;
// Returned buffers a pool keeps for reuse (fewer when server.max_buffers_per_reactor is lower).
constexpr std::size_t kMaxFreeBuffers = 1024;
// Exchanges kept for reuse beyond the ones the connections reserve (exchange.h).
constexpr std::size_t kSpareExchanges = 256;
// Connections accepted per listener wakeup before the others get their turn.
constexpr int kAcceptBatch = 64;
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

std::size_t block_size(std::size_t fields, std::size_t data) {
  return fields * sizeof(http::HeaderField) + data;
}
}  // namespace

// The watchdog's ping. `outstanding` is set by ping() when it sends the node and cleared by the
// loop when it runs it (the inbox has already unlinked it then: Poller::run_inbox reads `next`
// before it runs a task). Atomic because the pinging thread and the reactor both write it;
// release (loop) / acquire (ping) so that the next send follows the run that freed the node.
struct Reactor::Heartbeat final : net::RemoteTask {
  Heartbeat() noexcept
      : RemoteTask([](RemoteTask& t) {
          static_cast<Heartbeat&>(t).outstanding.store(false, std::memory_order_release);
        }) {}
  std::atomic<bool> outstanding{false};
};

Reactor::Reactor(unsigned index, std::shared_ptr<const Snapshot> snapshot, AccessLog& access_log,
                 const Clock& clock)
    : index_(index),
      poller_(std::make_unique<Poller>(io_, snapshot->server.io, clock)),
      access_log_(access_log),
      housekeeping_([](void* self) { static_cast<Reactor*>(self)->on_housekeeping(); }, this),
      layout_{BufferLayout::request_fields(snapshot->server),
              BufferLayout::request_data(snapshot->server)},
      request_buffers_(block_size(layout_.request_fields, layout_.request_data), kMaxFreeBuffers,
                       snapshot->server.max_buffers_per_reactor),
      response_buffers_(block_size(BufferLayout::kResponseFields, BufferLayout::kResponseData),
                        kMaxFreeBuffers, snapshot->server.max_buffers_per_reactor),
      metrics_(kMaxPools),
      quota_links_(std::make_unique<QuotaLinks>(*poller_, wheel_, clock)),
      exchanges_(std::make_unique<ExchangePool>(*this, kSpareExchanges)),
      heartbeat_(std::make_unique<Heartbeat>()) {
  poller_->set_timers(wheel_);
  std::random_device rd;
  const uint64_t prefix =
      (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (static_cast<uint64_t>(index) << 56);
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) next_id_[i] = kHex[(prefix >> (60 - 4 * i)) & 0xf];
  std::fill(next_id_ + 16, next_id_ + 32, '0');
  install(std::move(snapshot));
}

Reactor::~Reactor() {
  join();
  // The resolver's worker posts into io_: stop it, then run (on this thread, the reactor's
  // being over) what it posted, so no completion outlives the client connections and pools it uses.
  if (resolver_) {
    resolver_.reset();
    io_.restart();
    try {
      io_.poll();
    } catch (...) {
      // A completion that throws here (none does: they only drop a closed connection) would
      // leave connections the members below still serve: nothing can be released safely.
      std::terminate();
    }
  }
  // Pooled connections hold a reference on themselves through the pool: drop them.
  close_idle_connections(nullptr);
}

void Reactor::activate(std::shared_ptr<const Snapshot> next, std::function<void()> installed) {
  post([this, next = std::move(next), installed = std::move(installed)]() mutable {
    install(std::move(next));
    installed();
  });
}

// Makes `next` the generation new requests start on. Requests in progress keep theirs (a
// an exchange holds a Ref to its ReactorGeneration). Idle connections to backends that `next`
// does not list are closed; the others stay pooled, because their pool lives on by name.
void Reactor::install(std::shared_ptr<const Snapshot> next) {
  for (const auto& up : next->upstreams) {
    for (const auto& b : up->backends) b->idle[index_].generation = next->generation;
  }
  if (current_) close_idle_connections(next.get());
  current_ = Ref<ReactorGeneration>(new ReactorGeneration(std::move(next)));
  // An idle reactor's housekeeping sleeps; a new generation may move the quota's Redis link.
  if (!housekeeping_.armed()) wheel_.schedule(housekeeping_, now());
}

// Closes this reactor's idle connections to every backend of the current generation that
// `keep` does not list (all of them when `keep` is null).
void Reactor::close_idle_connections(const Snapshot* keep) {
  if (!current_) return;
  for (const auto& up : current_->snapshot->upstreams) {
    for (const auto& b : up->backends) {
      Backend::Idle& list = b->idle[index_];
      if (keep != nullptr && list.generation == keep->generation) continue;
      while (list.head != nullptr) {
        Ref<BackendConn> c(list.head);
        remove_idle(*c);
        c->close();
      }
    }
  }
}

void Reactor::retire(uint64_t generation) {
  post([this, generation] {
    for (ClientConnection* s = clients_; s != nullptr;) {
      Ref<ClientConnection> keep(s);
      ClientConnection* next = s->list_next;
      s->on_generation_retired(generation, *current_->snapshot);
      s = next;
    }
  });
}

// A listening socket in the poller. Edge-triggered, so a wakeup accepts until the queue is
// empty, in bounded batches so that one listener cannot starve the other work.
class Reactor::Listener final : public net::PollTarget {
 public:
  Listener(Reactor& reactor, int fd, std::string key)
      : reactor_(reactor),
        key_(std::move(key)),
        fd_(fd),
        retry_([](void* self) { static_cast<Listener*>(self)->accept(); }, this) {
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound_), &bound_len_);
  }
  ~Listener() { close(); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int fd() const { return fd_; }
  const std::string& key() const { return key_; }
  void close() {
    retry_.cancel();
    if (fd_ >= 0) {
      reactor_.poller_->remove(*this);
      ::close(fd_);
    }
    fd_ = -1;
  }
  // The watchdog's drain (pause_accepting): a listening socket that is shut down refuses new
  // connections and resets those in its queue, yet keeps its address (HAProxy pauses its
  // listeners so), and listen() makes it accept again. One bound to port 0 gives its port back
  // when it is shut down: it is bound to the port it had again first (bind fails with EINVAL,
  // harmlessly, on one that kept its address).
  void pause() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  void resume() {
    if (fd_ < 0) return;
    // listen() on a socket without an address would pick an ephemeral port: never that.
    const bool bound =
        ::bind(fd_, reinterpret_cast<const sockaddr*>(&bound_), bound_len_) == 0 || errno == EINVAL;
    if (!bound || ::listen(fd_, SOMAXCONN) != 0) {
      char text[128];
      spdlog::error("listener {}: cannot accept again after the watchdog's drain: {}", key_,
                    ::strerror_r(errno, text, sizeof(text)));
      return;
    }
    reactor_.poller_->defer(*this);  // connections that queued since
  }
  // While backing off, a wakeup waits for the retry: the queue is drained then.
  void on_poll(uint32_t) override {
    if (!retry_.armed()) accept();
  }
  void on_ready() override {
    if (!retry_.armed()) accept();
  }

 private:
  void accept() {
    if (fd_ < 0 || reactor_.draining_ || reactor_.accept_paused_) return;
    for (int n = 0; n < kAcceptBatch; ++n) {
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      const int fd =
          ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // the next edge wakes us
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        return back_off(errno);
      }
      if (failing_) recovered();
      const net::TlsListener* const certificates = tls();
      ClientConnection::accept(reactor_, fd, reinterpret_cast<const sockaddr*>(&peer), certificates,
                               certificates == nullptr && h2c_)
          ->start();
    }
    reactor_.poller_->defer(*this);  // more may be waiting: continue after the other work
  }

  // This listener's certificates in the current generation (nullptr: plain), looked up again
  // only when the generation changed (a reload may turn an address to TLS or back).
  const net::TlsListener* tls() {
    const Snapshot& snap = reactor_.snapshot();
    if (snap.generation != tls_seen_) {
      tls_seen_ = snap.generation;
      tls_ = snap.tls ? snap.tls->listener(key_) : nullptr;
      const std::vector<Endpoint>& h2c = snap.server.http2.h2c_listen;
      h2c_ = std::any_of(h2c.begin(), h2c.end(), [&](const Endpoint& e) { return e.text == key_; });
    }
    return tls_;
  }

  // Out of descriptors or memory: count it, say so (at most once a second), and retry
  // after a pause instead of spinning on the error. No allocation, no lock but the process
  // log's queue (asynchronous: the reactor never waits for the line to be written).
  void back_off(int error) {
    const AcceptError reason = classify(error);
    reactor_.metrics_.accept_failed(reason);
    failing_ = true;
    const auto now = reactor_.now();
    if (log_.occurred(now)) {
      char text[128];
      spdlog::warn(
          "accept on {} failed: {} ({}; {} more since the last line); retrying every {} ms", key_,
          ::strerror_r(error, text, sizeof(text)),
          kAcceptErrorLabels[static_cast<std::size_t>(reason)], log_.take() - 1,
          kAcceptRetry.count());
    }
    reactor_.wheel_.schedule(retry_, now + kAcceptRetry);
  }

  void recovered() {
    if (!log_.ready(reactor_.now())) return;  // said at the next chance
    spdlog::info("accept on {} works again ({} failures since the last line)", key_, log_.take());
    failing_ = false;
  }

  static AcceptError classify(int error) {
    switch (error) {
      case EMFILE:
        return AcceptError::emfile;
      case ENFILE:
        return AcceptError::enfile;
      case ENOBUFS:
        return AcceptError::enobufs;
      case ENOMEM:
        return AcceptError::enomem;
      default:
        return AcceptError::other;
    }
  }

  Reactor& reactor_;
  const std::string key_;  // the listen address as configured
  int fd_;
  sockaddr_storage bound_{};  // the address it was bound to, port 0 resolved
  socklen_t bound_len_ = sizeof(bound_);
  TimerWheel::Entry retry_;
  LogThrottle log_{std::chrono::seconds(1)};  // accept failures: one line a second at most
  bool failing_ = false;                      // from a failure until a line says it is over
  uint64_t tls_seen_ = ~uint64_t{0};          // the generation tls_ was looked up in
  const net::TlsListener* tls_ = nullptr;
  bool h2c_ = false;  // in server.http2.h2c_listen (looked up with tls_)
};

void Reactor::on_housekeeping() {
  housekeep(++housekeeping_runs_ % kTrimEvery == 0);
  // An idle reactor (no connection, no buffer held or kept) has nothing to refresh until a
  // connection comes (add_client arms it again): it sleeps instead of waking every second.
  const bool idle = client_count_ == 0 && request_buffers_.outstanding() == 0 &&
                    request_buffers_.free_blocks() == 0 && response_buffers_.outstanding() == 0 &&
                    response_buffers_.free_blocks() == 0;
  if (!idle) wheel_.schedule(housekeeping_, now() + kHousekeeping);
}

void Reactor::housekeep(bool trim) {
  const auto refresh = [&](BufferPool& pool, BufferPoolKind kind) {
    ReactorMetrics::BufferPoolShard& m = metrics_.buffer_pool(kind);
    if (trim) m.trimmed_bytes.add(pool.trim() * pool.block_size());
    m.in_use_blocks.set(static_cast<int64_t>(pool.outstanding()));
    m.free_blocks.set(static_cast<int64_t>(pool.free_blocks()));
    m.bytes.set(static_cast<int64_t>(pool.bytes()));
  };
  refresh(request_buffers_, BufferPoolKind::request);
  refresh(response_buffers_, BufferPoolKind::response);
  exchanges_->trim();  // what a burst of HTTP/2 streams left beyond the spare ones
  // The quota's Redis link: connected before the first request needs it, and an old backend's
  // dropped once no request uses it.
  const Quota* quota = current_->snapshot->quota.get();
  const bool redis = quota != nullptr && quota->redis() && !draining_;
  quota_links_->prune(redis ? quota->link_key : 0);
  if (redis) quota_links_->link(*quota);
}

void Reactor::ensure_unused(const asio::ip::tcp::endpoint& at) {
  if (at.port() == 0) return;  // the kernel picks a free one
  asio::io_context setup;
  asio::ip::tcp::acceptor probe(setup);
  probe.open(at.protocol());
  probe.set_option(asio::socket_base::reuse_address(true));  // TIME_WAIT does not count
  error_code ec;
  probe.bind(at, ec);
  if (ec == asio::error::address_in_use) throw boost::system::system_error(ec);
}

int Reactor::open_listener(const asio::ip::tcp::endpoint& at, asio::ip::tcp::endpoint& bound) {
  asio::io_context setup;  // Asio for the set-up calls; the socket then goes to a poller
  asio::ip::tcp::acceptor acceptor(setup);
  acceptor.open(at.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  const int one = 1;
  if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    throw boost::system::system_error(error_code(errno, boost::system::system_category()),
                                      "setsockopt(SO_REUSEPORT)");
  }
  acceptor.bind(at);
  acceptor.listen(asio::socket_base::max_listen_connections);
  acceptor.native_non_blocking(true);
  bound = acceptor.local_endpoint();
  return acceptor.release();
}

asio::ip::tcp::endpoint Reactor::listen(const asio::ip::tcp::endpoint& at, std::string key) {
  asio::ip::tcp::endpoint bound;
  const int fd = open_listener(at, bound);
  adopt_listener(fd, std::move(key));
  return bound;
}

void Reactor::adopt_listener(int fd, std::string key) {
  listeners_.push_back(std::make_unique<Listener>(*this, fd, std::move(key)));
  if (const int e = poller_->add(fd, *listeners_.back()); e != 0) {
    throw boost::system::system_error(error_code(e, boost::system::system_category()),
                                      "epoll_ctl(listener)");
  }
}

void Reactor::add_listener(int fd, std::string key) {
  post([this, fd, key = std::move(key)]() mutable {
    if (draining_) {
      ::close(fd);
      return;
    }
    try {
      adopt_listener(fd, std::move(key));
      if (accept_paused_) {
        listeners_.back()->pause();
      } else {
        poller_->defer(*listeners_.back());  // connections that queued meanwhile
      }
    } catch (const std::exception&) {
      listeners_.pop_back();  // closes it; the main thread logged the address already
    }
  });
}

void Reactor::remove_listener(std::string key) {
  post([this, key = std::move(key)] {
    std::erase_if(listeners_, [&key](const auto& l) { return l->key() == key; });
  });
}

void Reactor::start() {
  wheel_.schedule(housekeeping_, now());  // the gauges, and the quota's link before a request
  for (auto& l : listeners_) poller_->defer(*l);  // connections that queued before the start
  thread_ = std::thread([this] {
    count_heap_allocations_on_this_thread();
    poller_->run();
    finished_.store(true, std::memory_order_release);
  });
}

std::chrono::steady_clock::time_point Reactor::now() const {
  return poller_->now();
}

IoEngine Reactor::io_engine() const {
  return poller_->engine();
}

std::string Reactor::io_fallback_reason() const {
  return poller_->fallback_reason();
}

Resolver& Reactor::resolver() {
  if (!resolver_) resolver_ = std::make_unique<Resolver>(*this);
  return *resolver_;
}

void Reactor::join() {
  if (thread_.joinable()) thread_.join();
}

void Reactor::post(std::function<void()> f) {
  asio::post(io_, std::move(f));
  poller_->wake();
}

bool Reactor::ping() noexcept {
  if (heartbeat_->outstanding.load(std::memory_order_acquire)) return false;
  heartbeat_->outstanding.store(true, std::memory_order_relaxed);  // this thread alone sets it
  poller_->send(*heartbeat_);
  return true;
}

void Reactor::pause_accepting(bool paused) {
  post([this, paused] {
    if (draining_ || accept_paused_ == paused) return;
    accept_paused_ = paused;
    for (auto& l : listeners_) {
      if (paused) {
        l->pause();
      } else {
        l->resume();
      }
    }
  });
}

void Reactor::next_request_id(char* out) {
  // The id is a random per-reactor prefix and a counter, both 16 hex digits. The counter is
  // kept as text and counted up in place: usually one digit changes.
  for (int i = 31; i >= 16; --i) {
    char& d = next_id_[i];
    if (d == 'f') {
      d = '0';  // carry into the next digit
      continue;
    }
    d = d == '9' ? 'a' : static_cast<char>(d + 1);
    break;
  }
  std::memcpy(out, next_id_, sizeof(next_id_));
}

void Reactor::add_client(ClientConnection& s) {
  s.list_next = clients_;
  s.list_prev = nullptr;
  if (clients_ != nullptr) clients_->list_prev = &s;
  clients_ = &s;
  ++client_count_;
  if (!housekeeping_.armed()) wheel_.schedule(housekeeping_, now() + kHousekeeping);
}

void Reactor::opening_begin(ClientConnection& s) {
  const uint32_t bound = snapshot().server.max_opening_connections;
  const std::size_t share = std::max<std::size_t>(1, (bound + reactors_ - 1) / reactors_);
  while (opening_count_ >= share && opening_oldest_ != nullptr) {
    const Ref<ClientConnection> oldest(opening_oldest_);
    metrics_.opening_evictions.add();
    oldest->evict();  // leaves the list (opening_end)
  }
  s.opening = true;
  s.opening_prev = opening_newest_;
  s.opening_next = nullptr;
  if (opening_newest_ != nullptr) {
    opening_newest_->opening_next = &s;
  } else {
    opening_oldest_ = &s;
  }
  opening_newest_ = &s;
  ++opening_count_;
  metrics_.opening_connections.add(1);
}

void Reactor::opening_end(ClientConnection& s) {
  if (!s.opening) return;
  s.opening = false;
  if (s.opening_prev != nullptr) {
    s.opening_prev->opening_next = s.opening_next;
  } else {
    opening_oldest_ = s.opening_next;
  }
  if (s.opening_next != nullptr) {
    s.opening_next->opening_prev = s.opening_prev;
  } else {
    opening_newest_ = s.opening_prev;
  }
  s.opening_prev = s.opening_next = nullptr;
  --opening_count_;
  metrics_.opening_connections.add(-1);
}

void Reactor::remove_client(ClientConnection& s) {
  if (s.list_prev != nullptr) {
    s.list_prev->list_next = s.list_next;
  } else {
    clients_ = s.list_next;
  }
  if (s.list_next != nullptr) s.list_next->list_prev = s.list_prev;
  --client_count_;
  if (draining_) maybe_finish();
}

Ref<BackendConn> Reactor::take_idle(Backend& backend) {
  Ref<BackendConn> c(backend.idle[index_].head);
  if (c) remove_idle(*c);
  return c;
}

void Reactor::put_idle(BackendConn& c, const UpstreamParams& pool) {
  Backend::Idle& list = c.backend->idle[index_];
  // A backend the current generation does not list is not pooled: its pool changed.
  const uint32_t pooled = list.count.load(std::memory_order_relaxed);
  if (pooled >= pool.keepalive || draining_ || !c.quiet() ||
      list.generation != current_->snapshot->generation) {
    c.close();
    return;
  }
  c.add_ref();  // the pool holds one reference
  c.pooled = true;
  c.idle_prev = nullptr;
  c.idle_next = list.head;
  if (list.head != nullptr) list.head->idle_prev = &c;
  list.head = &c;
  list.count.store(pooled + 1, std::memory_order_relaxed);
  wheel_.schedule(c.idle_timer, now() + pool.keepalive_timeout);
}

void Reactor::remove_idle(BackendConn& c) {
  if (!c.pooled) return;
  Backend::Idle& list = c.backend->idle[index_];
  if (c.idle_prev != nullptr) {
    c.idle_prev->idle_next = c.idle_next;
  } else {
    list.head = c.idle_next;
  }
  if (c.idle_next != nullptr) c.idle_next->idle_prev = c.idle_prev;
  c.idle_prev = c.idle_next = nullptr;
  c.pooled = false;
  list.count.store(list.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  c.idle_timer.cancel();
  c.release_ref();  // the pool's reference
}

void Reactor::drain() {
  post([this] {
    draining_ = true;
    for (auto& l : listeners_) l->close();
    close_idle_clients();
    close_idle_connections(nullptr);
    maybe_finish();
  });
}

void Reactor::close_idle_clients() {
  // ClientConnection::drain() may unlink the connection: walk with a saved next pointer and a Ref.
  for (ClientConnection* s = clients_; s != nullptr;) {
    Ref<ClientConnection> keep(s);
    ClientConnection* next = s->list_next;
    s->drain();
    s = next;
  }
}

void Reactor::force_close() {
  post([this] {
    draining_ = true;
    uint64_t cut = 0;
    for (ClientConnection* s = clients_; s != nullptr;) {
      Ref<ClientConnection> keep(s);
      ClientConnection* next = s->list_next;
      if (s->force_close()) ++cut;
      s = next;
    }
    cut_requests_.fetch_add(cut, std::memory_order_relaxed);
    maybe_finish();
  });
}

// Once draining and no connection is left, stop the tick so the io_context runs out of work
// and the thread ends.
void Reactor::maybe_finish() {
  if (!draining_ || client_count_ != 0 || stopped_) return;
  stopped_ = true;
  quota_links_->close();
  poller_->stop();
}

}  // namespace floodgate::proxy
