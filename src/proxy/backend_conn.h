// One TCP connection to a backend, owned by a reactor. It is either in use by exactly one
// Session (`owner` set) or idle in the reactor's keep-alive pool.
//
// The socket is driven by the reactor's Poller, not by Asio (poller.h says
// why). The connection remembers what the kernel last reported (`readable_`, `writable_`)
// and performs an operation only when it can make progress, so a read started before the
// backend has answered costs no system call. At most one read and one write (or the connect)
// are pending at a time; each completes by calling a plain function with the owner Session,
// never inline from the call that started it. Detaching the owner (release to the pool or
// close) drops whatever is pending: nobody is waiting for it any more.
//
// A pooled connection has nothing pending: an event that says it became readable means the
// backend closed it (or sent bytes nobody asked for), and it leaves the pool.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted; a posted completion holds
// a Ref.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>

#include "floodgate/core/handler_slot.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"
#include "poller.h"

namespace floodgate::proxy {

class Reactor;
class Session;

class BackendConn final : public RefCounted<BackendConn>, public PollTarget {
 public:
  // Completion of an operation: the owner, the result, and the bytes transferred.
  using Done = void (*)(Session& owner, const boost::system::error_code& ec, std::size_t n);

  BackendConn(Reactor& reactor, uint32_t upstream, uint32_t backend);
  ~BackendConn();
  BackendConn(const BackendConn&) = delete;
  BackendConn& operator=(const BackendConn&) = delete;

  // Opens a socket and connects it (TCP_NODELAY set once connected). Completes with the
  // connect error, if any.
  void connect(const boost::asio::ip::tcp::endpoint& to, Done done);
  // Reads what is available into [data, data + cap) (cap > 0). EOF completes with
  // asio::error::eof.
  void read_some(char* data, std::size_t cap, Done done);
  // Writes all of [data, data + len), then completes with len.
  void write(const char* data, std::size_t len, Done done);
  bool reading() const { return read_.done != nullptr; }
  void shutdown_send();
  // Closes the socket and drops pending operations.
  void close();
  // Drops pending operations (the owner no longer waits for them).
  void drop_pending();
  bool is_open() const { return fd_ >= 0; }
  // For the pool: true when the idle connection has nothing unread (costs a syscall only when
  // readiness was reported since the last read).
  bool quiet();

  // PollTarget: readiness reported by the poller.
  void on_poll(uint32_t events) override;
  void hold() override { add_ref(); }
  void release() override { release_ref(); }

  Reactor& reactor;
  http::Parser parser{http::Parser::Kind::response};
  const uint32_t upstream;
  const uint32_t backend;
  // The session using this connection. A counted reference: a pending operation on the
  // backend may be the only thing keeping the session alive. Cleared on release, which breaks
  // the cycle.
  Ref<Session> owner;
  bool reused = false;  // served an earlier request (a failure may be a stale keep-alive)

  // Idle pool links and keep-alive expiry (managed by Reactor::put_idle/take_idle).
  BackendConn* idle_next = nullptr;
  BackendConn* idle_prev = nullptr;
  bool pooled = false;
  TimerWheel::Entry idle_timer;

 private:
  struct ReadOp {
    char* data = nullptr;
    std::size_t cap = 0;
    Done done = nullptr;
  };
  struct WriteOp {
    const char* data = nullptr;
    std::size_t len = 0;
    std::size_t sent = 0;
    Done done = nullptr;
  };

  // Runs whatever pending operation can make progress now.
  void perform();
  // Runs perform() from the io_context soon (completions never run inside the starting call).
  void schedule();
  void perform_connect();
  void perform_write();
  void perform_read();
  void complete(Done done, const boost::system::error_code& ec, std::size_t n);

  int fd_ = -1;
  bool readable_ = false;
  bool writable_ = false;
  bool peer_closed_ = false;  // the peer closed or reset: reads answer at once from now on
  bool connecting_ = false;
  bool scheduled_ = false;
  boost::system::error_code connect_error_;  // a connect that failed at once
  ReadOp read_;
  WriteOp write_;  // also holds the connect completion while connecting_
  HandlerSlot post_slot_;
};

}  // namespace floodgate::proxy
