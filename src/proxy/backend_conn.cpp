#include "backend_conn.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>

#include "floodgate/proxy/reactor.h"
#include "poller.h"
#include "session.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
error_code errno_code(int e) {
  return {e, boost::system::system_category()};
}
bool would_block(int e) {
  return e == EAGAIN || e == EWOULDBLOCK;
}
}  // namespace

BackendConn::BackendConn(Reactor& r, uint32_t upstream_id, uint32_t backend_index)
    : reactor(r),
      upstream(upstream_id),
      backend(backend_index),
      idle_timer(
          [](void* self) {  // keep-alive expiry of a pooled connection
            Ref<BackendConn> c(static_cast<BackendConn*>(self));
            c->reactor.remove_idle(*c);
            c->close();
          },
          this) {}

BackendConn::~BackendConn() {
  close();
}

void BackendConn::connect(const asio::ip::tcp::endpoint& to, Done done) {
  write_ = WriteOp{nullptr, 0, 0, done};
  connecting_ = true;
  fd_ = ::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    connect_error_ = errno_code(errno);
    return schedule();
  }
  if (::connect(fd_, to.data(), static_cast<socklen_t>(to.size())) == 0) {
    writable_ = true;  // connected at once; the completion still runs from the io_context
  } else if (errno != EINPROGRESS && errno != EINTR) {  // EINTR: it goes on asynchronously
    connect_error_ = errno_code(errno);
    return schedule();
  }
  if (const int e = reactor.poller().add(fd_, *this); e != 0) {
    connect_error_ = errno_code(e);
    return schedule();
  }
  if (writable_) schedule();
}

void BackendConn::read_some(char* data, std::size_t cap, Done done) {
  read_ = ReadOp{data, cap, done};
  if (readable_) schedule();  // otherwise the poller reports when data is there
}

void BackendConn::write(const char* data, std::size_t len, Done done) {
  write_ = WriteOp{data, len, 0, done};
  if (writable_) schedule();
}

void BackendConn::shutdown_send() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void BackendConn::drop_pending() {
  read_ = ReadOp{};
  write_ = WriteOp{};
  connecting_ = false;
}

void BackendConn::close() {
  drop_pending();
  if (fd_ >= 0) {
    ::close(fd_);  // also leaves the poller's epoll set
    fd_ = -1;
  }
  idle_timer.cancel();
}

bool BackendConn::quiet() {
  if (fd_ < 0 || peer_closed_) return false;
  if (!readable_) return true;
  char byte = 0;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && would_block(errno)) {
    readable_ = false;
    return true;
  }
  return false;
}

void BackendConn::on_poll(uint32_t events) {
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) peer_closed_ = true;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) readable_ = true;
  if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) writable_ = true;
  if (pooled) {
    // An idle connection that became readable was closed by the backend (or got bytes
    // nobody asked for): either way it cannot carry another request.
    if (readable_) {
      reactor.remove_idle(*this);
      close();
    }
    return;
  }
  perform();
}

void BackendConn::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  asio::post(reactor.io(),
             asio::bind_allocator(SlotAllocator<void>(post_slot_), [c = Ref<BackendConn>(this)] {
               c->scheduled_ = false;
               c->perform();
             }));
}

void BackendConn::perform() {
  // A completion may start, drop or close anything: every step re-checks.
  if (connecting_) {
    perform_connect();
  } else if (write_.done != nullptr && writable_ && fd_ >= 0) {
    perform_write();
  }
  if (read_.done != nullptr && readable_ && fd_ >= 0) perform_read();
}

void BackendConn::perform_connect() {
  error_code ec = connect_error_;
  if (!ec) {
    if (!writable_ || fd_ < 0) return;  // still connecting
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      ec = errno_code(err);
    } else {
      const int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
  }
  connecting_ = false;
  connect_error_.clear();
  complete(std::exchange(write_, WriteOp{}).done, ec, 0);
}

void BackendConn::perform_write() {
  while (write_.sent < write_.len) {
    const ssize_t n =
        ::send(fd_, write_.data + write_.sent, write_.len - write_.sent, MSG_NOSIGNAL);
    if (n >= 0) {
      write_.sent += static_cast<std::size_t>(n);
    } else if (errno == EINTR) {
      continue;
    } else if (would_block(errno)) {
      writable_ = false;  // the poller reports when there is room again
      return;
    } else {
      const WriteOp op = std::exchange(write_, WriteOp{});
      return complete(op.done, errno_code(errno), op.sent);
    }
  }
  const WriteOp op = std::exchange(write_, WriteOp{});
  complete(op.done, {}, op.len);
}

void BackendConn::perform_read() {
  ssize_t n = 0;
  do {
    n = ::recv(fd_, read_.data, read_.cap, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && would_block(errno)) {
    readable_ = false;
    return;
  }
  const ReadOp op = std::exchange(read_, ReadOp{});
  if (n > 0) {
    // A short read emptied the socket: the next data is reported by the poller. A full one
    // may have left bytes behind, and once the peer closed, reads answer at once.
    if (static_cast<std::size_t>(n) < op.cap && !peer_closed_) readable_ = false;
    return complete(op.done, {}, static_cast<std::size_t>(n));
  }
  complete(op.done, n == 0 ? error_code(asio::error::eof) : errno_code(errno), 0);
}

void BackendConn::complete(Done done, const error_code& ec, std::size_t n) {
  if (done == nullptr) return;
  const Ref<Session> s = owner;  // the completion may release this connection
  if (s) done(*s, ec, n);
}

}  // namespace floodgate::proxy
