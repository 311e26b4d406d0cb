// One TCP connection to a backend, owned by a reactor. It is either in use by exactly one
// attempt (its owner, where its completions go) or idle in the reactor's keep-alive pool.
//
// An idle connection has nothing pending: an event that says it became readable means the
// backend closed it (or sent bytes nobody asked for), and it leaves the pool. So keeping a
// connection costs no system call while it waits, and reusing it needs no cancellation.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted (owner, pool, poller).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/parser.h"
#include "floodgate/net/stream.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::proxy {

class Reactor;

class BackendConn final : public RefCounted<BackendConn>, public net::Stream {
 public:
  BackendConn(Reactor& reactor, uint32_t upstream, std::shared_ptr<Backend> backend);
  ~BackendConn();
  BackendConn(const BackendConn&) = delete;
  BackendConn& operator=(const BackendConn&) = delete;

  // Closes the socket, drops pending operations and stops the keep-alive timer.
  void close();

  // PollTarget.
  void on_ready() override;
  void hold() override { add_ref(); }
  void release() override { release_ref(); }

  Reactor& reactor;
  http::Parser parser{http::Parser::Kind::response};
  const uint32_t upstream;                 // the pool's id
  const std::shared_ptr<Backend> backend;  // its idle list lives there
  // The attempt using this connection, where its completions go; held while set (hold()):
  // a pending operation on the backend may be the only thing keeping the client connection
  // alive. Cleared when the attempt lets the connection go, which breaks the cycle.
  void set_owner(net::StreamOwner* attempt) noexcept {
    net::StreamOwner* const previous = std::exchange(owner_, attempt);
    if (attempt != nullptr) attempt->hold();
    if (previous != nullptr) previous->release();
  }
  bool reused = false;  // served an earlier request (a failure may be a stale keep-alive)

  // Idle pool links and keep-alive expiry (managed by Reactor::put_idle/take_idle).
  BackendConn* idle_next = nullptr;
  BackendConn* idle_prev = nullptr;
  bool pooled = false;
  TimerWheel::Entry idle_timer;

 private:
  net::StreamOwner* stream_owner() override;
  net::StreamOwner* owner_ = nullptr;
};

}  // namespace floodgate::proxy
