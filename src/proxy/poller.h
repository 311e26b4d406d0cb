// A reactor's readiness poller: an edge-triggered epoll set of its own that remembers, for
// each socket, what the kernel last reported.
//
// Why: Asio's epoll reactor either tries a read at once when one is started (a `recv` that
// finds nothing when the peer cannot have sent yet) or, for a plain wait, re-arms its
// registration with an `epoll_ctl` per wait. Either way a proxied request paid a system call
// more than HAProxy, whose poller remembers readiness and reads only once a socket has
// reported data. With this poller a socket is registered once; its owner reads only when data
// can be there. The epoll set is itself one descriptor in the reactor's io_context, so a whole
// batch of events costs one `epoll_wait` and one re-arm, whatever its size.
//
// Backend connections do all their I/O through it (backend_conn.h). Client connections keep
// Asio for their I/O and use it only to start a read when the client has sent something.
//
// Thread-safety: reactor thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>

#include "floodgate/core/handler_slot.h"

namespace floodgate::proxy {

// Something registered with the poller. hold()/release() keep it alive while a batch of
// events that names it is being handled (a handler may close and release another target).
class PollTarget {
 public:
  virtual void on_poll(uint32_t events) = 0;
  virtual void hold() = 0;
  virtual void release() = 0;

 protected:
  ~PollTarget() = default;
};

class Poller {
 public:
  explicit Poller(boost::asio::io_context& io);
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Registers a socket (edge-triggered: readable, writable, peer closed). The registration
  // ends by itself when the socket is closed. Returns 0 or an errno value.
  int add(int fd, PollTarget& target);
  // Stops waiting, so that the io_context can run out of work at shutdown.
  void stop();

 private:
  void arm();
  void on_ready(const boost::system::error_code& ec);

  boost::asio::posix::stream_descriptor set_;  // owns the epoll descriptor
  HandlerSlot wait_slot_;
  bool armed_ = false;
  bool stopped_ = false;
};

}  // namespace floodgate::proxy
