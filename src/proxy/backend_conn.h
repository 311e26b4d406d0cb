// One connection to a backend, owned by a reactor. It is either in use by exactly one Session
// (`owner` set) or idle in the reactor's keep-alive pool. A pooled connection keeps one read
// pending into its small landing buffer: while idle, that read is the watch for the backend
// closing the connection; once the connection is reused, the same read receives the start of
// the response and hands it to the owner. So reuse needs no cancellation and no syscall.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted; pending operations hold a Ref.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include "floodgate/core/handler_slot.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"

namespace floodgate::proxy {

class Reactor;
class Session;

class BackendConn : public RefCounted<BackendConn> {
 public:
  BackendConn(Reactor& reactor, uint32_t upstream, uint32_t backend);
  ~BackendConn();

  static constexpr std::size_t kLandingBytes = 2048;

  // Starts a read into `landing` unless a read is pending. The result goes to the owner, or,
  // while pooled, closes the idle connection (EOF or unexpected bytes).
  void read_into_landing();
  bool read_pending() const { return read_pending_; }
  void set_read_pending(bool p) { read_pending_ = p; }
  void close();

  Reactor& reactor;
  boost::asio::ip::tcp::socket socket;
  http::Parser parser{http::Parser::Kind::response};
  const uint32_t upstream;
  const uint32_t backend;
  // The session using this connection. A counted reference: a pending read on the backend may
  // be the only thing keeping the session alive. Cleared on release, which breaks the cycle.
  Ref<Session> owner;
  bool reused = false;  // served an earlier request (a failure may be a stale keep-alive)

  // Idle pool links and keep-alive expiry (managed by Reactor::put_idle/take_idle).
  BackendConn* idle_next = nullptr;
  BackendConn* idle_prev = nullptr;
  bool pooled = false;
  TimerWheel::Entry idle_timer;

 private:
  void on_landing_read(const boost::system::error_code& ec, std::size_t n);
  bool read_pending_ = false;
  HandlerSlot landing_slot_;

 public:
  char landing[kLandingBytes];
};

}  // namespace floodgate::proxy
