#include "floodgate/proxy/reactor.h"

#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <random>

#include "backend_conn.h"
#include "poller.h"
#include "session.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr auto kTick = std::chrono::milliseconds(10);

std::size_t block_size(std::size_t fields, std::size_t data) {
  return fields * sizeof(http::HeaderField) + data;
}
}  // namespace

Reactor::Reactor(unsigned index, std::shared_ptr<const Snapshot> snapshot, AccessLog& access_log)
    : index_(index),
      poller_(std::make_unique<Poller>(io_)),
      snapshot_(std::move(snapshot)),
      access_log_(access_log),
      tick_(io_),
      accept_retry_(io_),
      wheel_(kTick),
      request_buffers_(block_size(BufferLayout::request_fields(snapshot_->server),
                                  BufferLayout::request_data(snapshot_->server))),
      response_buffers_(block_size(BufferLayout::kResponseFields, BufferLayout::kResponseData)),
      metrics_(snapshot_->upstreams.size()) {
  std::random_device rd;
  id_prefix_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (static_cast<uint64_t>(index) << 56);
  upstreams_.reserve(snapshot_->upstreams.size());
  for (const auto& up : snapshot_->upstreams) {
    upstreams_.push_back(
        ReactorUpstream{up.get(), Balancer(up->params.balance, up->weights, id_prefix_ + up->id),
                        std::vector<ReactorUpstream::IdleList>(up->backends.size())});
  }
}

Reactor::~Reactor() {
  join();
  // Pooled connections hold a reference on themselves through the pool: drop them.
  for (auto& ru : upstreams_) {
    for (auto& list : ru.idle) {
      while (list.head != nullptr) {
        BackendConn* c = list.head;
        remove_idle(*c);
      }
    }
  }
}

asio::ip::tcp::endpoint Reactor::listen(const asio::ip::tcp::endpoint& at) {
  asio::ip::tcp::acceptor acceptor(io_);
  acceptor.open(at.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  const int one = 1;
  if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    throw boost::system::system_error(error_code(errno, boost::system::system_category()),
                                      "setsockopt(SO_REUSEPORT)");
  }
  acceptor.bind(at);
  acceptor.listen(asio::socket_base::max_listen_connections);
  auto bound = acceptor.local_endpoint();
  acceptors_.push_back(std::move(acceptor));
  return bound;
}

void Reactor::start() {
  for (std::size_t i = 0; i < acceptors_.size(); ++i) do_accept(i);
  do_tick();
  thread_ = std::thread([this] {
    io_.run();
    finished_.store(true, std::memory_order_release);
  });
}

void Reactor::join() {
  if (thread_.joinable()) thread_.join();
}

void Reactor::do_accept(std::size_t i) {
  acceptors_[i].async_accept(io_, [this, i](const error_code& ec, asio::ip::tcp::socket s) {
    on_accept(i, ec, std::move(s));
  });
}

void Reactor::on_accept(std::size_t i, const error_code& ec, asio::ip::tcp::socket socket) {
  if (draining_ || !acceptors_[i].is_open()) return;
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    // Out of descriptors or memory: back off briefly instead of spinning on the error.
    accept_retry_.expires_after(std::chrono::milliseconds(100));
    accept_retry_.async_wait([this, i](const error_code& e) {
      if (!e && !draining_) do_accept(i);
    });
    return;
  }
  Ref<Session> s(new Session(*this, std::move(socket)));
  s->start();
  do_accept(i);
}

void Reactor::do_tick() {
  tick_.expires_after(kTick);
  tick_.async_wait([this](const error_code& ec) {
    if (ec || stopped_) return;
    wheel_.advance(std::chrono::steady_clock::now());
    do_tick();
  });
}

void Reactor::next_request_id(char* out) {
  const uint64_t parts[2] = {id_prefix_, ++id_counter_};
  static constexpr char kHex[] = "0123456789abcdef";
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 16; ++i) out[p * 16 + i] = kHex[(parts[p] >> (60 - 4 * i)) & 0xf];
  }
}

void Reactor::add_session(Session& s) {
  s.list_next = sessions_;
  s.list_prev = nullptr;
  if (sessions_ != nullptr) sessions_->list_prev = &s;
  sessions_ = &s;
  ++session_count_;
}

void Reactor::remove_session(Session& s) {
  if (s.list_prev != nullptr) {
    s.list_prev->list_next = s.list_next;
  } else {
    sessions_ = s.list_next;
  }
  if (s.list_next != nullptr) s.list_next->list_prev = s.list_prev;
  --session_count_;
  if (draining_) maybe_finish();
}

Ref<BackendConn> Reactor::take_idle(uint32_t upstream, uint32_t backend) {
  ReactorUpstream::IdleList& list = upstreams_[upstream].idle[backend];
  Ref<BackendConn> c(list.head);
  if (c) remove_idle(*c);
  return c;
}

void Reactor::put_idle(BackendConn& c) {
  ReactorUpstream& ru = upstreams_[c.upstream];
  ReactorUpstream::IdleList& list = ru.idle[c.backend];
  if (list.count >= ru.upstream->params.keepalive || draining_ || !c.quiet()) {
    c.close();
    return;
  }
  c.add_ref();  // the pool holds one reference
  c.pooled = true;
  c.idle_prev = nullptr;
  c.idle_next = list.head;
  if (list.head != nullptr) list.head->idle_prev = &c;
  list.head = &c;
  ++list.count;
  wheel_.schedule(c.idle_timer,
                  std::chrono::steady_clock::now() + ru.upstream->params.keepalive_timeout);
}

void Reactor::remove_idle(BackendConn& c) {
  if (!c.pooled) return;
  ReactorUpstream::IdleList& list = upstreams_[c.upstream].idle[c.backend];
  if (c.idle_prev != nullptr) {
    c.idle_prev->idle_next = c.idle_next;
  } else {
    list.head = c.idle_next;
  }
  if (c.idle_next != nullptr) c.idle_next->idle_prev = c.idle_prev;
  c.idle_prev = c.idle_next = nullptr;
  c.pooled = false;
  --list.count;
  c.idle_timer.cancel();
  c.release_ref();  // the pool's reference
}

void Reactor::drain() {
  asio::post(io_, [this] {
    draining_ = true;
    error_code ec;
    for (auto& a : acceptors_) a.close(ec);
    accept_retry_.cancel();
    close_idle_sessions();
    for (auto& ru : upstreams_) {
      for (auto& list : ru.idle) {
        while (list.head != nullptr) {
          Ref<BackendConn> c(list.head);
          remove_idle(*c);
          c->close();
        }
      }
    }
    maybe_finish();
  });
}

void Reactor::close_idle_sessions() {
  // Session::drain() may unlink the session: walk with a saved next pointer and a Ref.
  for (Session* s = sessions_; s != nullptr;) {
    Ref<Session> keep(s);
    Session* next = s->list_next;
    s->drain();
    s = next;
  }
}

void Reactor::force_close() {
  asio::post(io_, [this] {
    draining_ = true;
    uint64_t cut = 0;
    for (Session* s = sessions_; s != nullptr;) {
      Ref<Session> keep(s);
      Session* next = s->list_next;
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
  if (!draining_ || session_count_ != 0 || stopped_) return;
  stopped_ = true;
  tick_.cancel();
  poller_->stop();
}

}  // namespace floodgate::proxy
