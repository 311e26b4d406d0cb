#include "floodgate/net/stream.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

namespace floodgate::net {

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

Stream::~Stream() {
  close();
}

int Stream::adopt(int fd) {
  fd_ = fd;
  writable_ = true;
  return poller_.add(fd_, *this);
}

void Stream::connect(const asio::ip::tcp::endpoint& to, Done done) {
  write_ = WriteOp{nullptr, 0, 0, done};
  connecting_ = true;
  readable_ = false;  // nothing can arrive before the request is sent
  fd_ = ::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    connect_error_ = errno_code(errno);
    return poller_.defer(*this);
  }
  if (::connect(fd_, to.data(), static_cast<socklen_t>(to.size())) == 0) {
    writable_ = true;  // connected at once; the completion still comes from the ready list
  } else if (errno != EINPROGRESS && errno != EINTR) {  // EINTR: it goes on asynchronously
    connect_error_ = errno_code(errno);
    return poller_.defer(*this);
  }
  if (const int e = poller_.add(fd_, *this); e != 0) {
    connect_error_ = errno_code(e);
    return poller_.defer(*this);
  }
  if (writable_) poller_.defer(*this);
}

void Stream::read_some(char* data, std::size_t cap, Done done) {
  if (tls_ != nullptr) return tls_read_some(data, cap, done);
  raw_read(data, cap, done);
}

void Stream::write(const char* data, std::size_t len, Done done) {
  if (tls_ != nullptr) return tls_write(data, len, done);
  raw_write(data, len, done);
}

void Stream::cancel_read() {
  if (tls_ != nullptr) {
    app_read_ = ReadOp{};  // the engine delivers plaintext as soon as it has it: none is lost
    return;
  }
  raw_cancel_read();
}

std::size_t Stream::unsent_bytes() const noexcept {
  int queued = 0;
  if (fd_ < 0 || ::ioctl(fd_, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<std::size_t>(queued);
}

std::size_t Stream::unread_bytes() const noexcept {
  int queued = 0;
  if (fd_ < 0 || ::ioctl(fd_, SIOCINQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<std::size_t>(queued);
}

void Stream::shutdown_send() {
  if (tls_ != nullptr) return tls_shutdown_send();
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void Stream::drop_pending() {
  if (tls_ != nullptr) {
    // The application's operations go; the session's own socket operations carry on (a
    // record half sent must not be cut), and close() drops them.
    app_read_ = ReadOp{};
    app_write_ = WriteOp{};
    return;
  }
  raw_drop_pending();
}

void Stream::raw_read(char* data, std::size_t cap, Done done) {
  read_ = ReadOp{data, cap, done};
  if (carry_) {  // a cancelled read had taken these already (io_uring)
    int result = carry_result_;
    if (result > 0) {
      const std::size_t n = std::min(static_cast<std::size_t>(result), cap);
      std::memmove(data, carry_data_, n);
      carry_data_ += n;
      carry_result_ -= static_cast<int>(n);
      result = static_cast<int>(n);
    }
    carry_ = carry_result_ > 0;
    read_result_ = result;
    read_done_ = true;
    return poller_.defer(*this);
  }
  if (readable_) poller_.defer(*this);  // otherwise the poller reports when data is there
}

void Stream::raw_cancel_read() {
  if (read_done_ && read_.done != nullptr) {
    if (!carry_) {
      carry_data_ = read_.data;
      carry_result_ = read_result_;
      carry_ = true;
    } else if (read_result_ > 0 && read_.data + read_result_ == carry_data_) {
      // Part of an earlier carry, not yet delivered, right in front of the rest of it (a
      // connection reads again where it read before, so that is the only case there is).
      carry_data_ = read_.data;
      carry_result_ += read_result_;
    }
  }
  read_done_ = false;
  read_ = ReadOp{};
}

void Stream::raw_write(const char* data, std::size_t len, Done done) {
  write_ = WriteOp{data, len, 0, done};
  if (writable_) poller_.defer(*this);
}

void Stream::raw_drop_pending() {
  // Bytes a dropped read already took (io_uring) belong to nobody: the connection cannot be
  // reused, as if they were still waiting in the socket.
  if (read_done_ || carry_) peer_closed_ = true;
  read_done_ = write_done_ = carry_ = false;
  read_ = ReadOp{};
  write_ = WriteOp{};
  connecting_ = false;
  connect_error_.clear();
}

void Stream::close() {
  raw_drop_pending();
  app_read_ = ReadOp{};
  app_write_ = WriteOp{};
  tls_reading_ = tls_writing_ = tls_kick_ = tls_shutdown_ = tls_plain_writing_ = false;
  tls_plain_answer_ = {};
  if (fd_ >= 0) {
    poller_.remove(*this);
    ::close(fd_);  // with epoll this also leaves the epoll set
    fd_ = -1;
  }
}

bool Stream::quiet() {
  if (fd_ < 0 || peer_closed_ || read_done_ || carry_) return false;
  if (tls_ != nullptr &&
      (tls_->failed || tls_eof_ || tls_reading_ || SSL_has_pending(tls_->ssl()) == 1 ||
       BIO_ctrl_pending(tls_->net()) > 0 || BIO_ctrl_wpending(tls_->net()) > 0)) {
    return false;
  }
  if (!readable_) return true;
  char byte = 0;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && would_block(errno)) {
    readable_ = false;
    return true;
  }
  return false;
}

void Stream::note_events(uint32_t events) {
  // poll(2) and epoll report with the same bits.
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) peer_closed_ = true;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) readable_ = true;
  if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) writable_ = true;
}

void Stream::on_poll(uint32_t events) {
  note_events(events);
  on_ready();
}

void Stream::on_polled(uint32_t events) {
  note_events(events);  // in completion order; on_ready() follows from the ready list
}

void Stream::on_io(bool is_send, int result) {
  if (is_send) {
    if (result == -EAGAIN || result == -EWOULDBLOCK) {
      writable_ = false;  // the poller reports when there is room again
    } else if (result < 0 && result != -EINTR) {
      write_error_ = -result;
      write_done_ = true;
    } else if (result > 0) {
      write_.sent += static_cast<std::size_t>(result);
      sent_at_ = poller_.now();
      write_done_ = write_.sent == write_.len;  // short: the rest goes in the next submission
    }
    return;
  }
  if (result == -EAGAIN || result == -EWOULDBLOCK) {
    readable_ = false;
    return;
  }
  if (result == -EINTR) return;
  read_result_ = result;
  read_done_ = true;
  // As in perform_read(): a short read emptied the socket.
  if (result > 0 && static_cast<std::size_t>(result) < read_.cap && !peer_closed_) {
    readable_ = false;
  }
}

void Stream::submit_io() {
  if (fd_ < 0 || connecting_) return;
  // Called once per turn at most (Poller::want_io), and every operation submitted in a turn
  // completes before the next: nothing of ours can already be in the ring.
  if (write_.done != nullptr && writable_ && !write_done_) {
    poller_.prepare_send(*this, fd_, write_.data + write_.sent, write_.len - write_.sent);
  }
  if (read_.done != nullptr && readable_ && !read_done_) {
    poller_.prepare_recv(*this, fd_, read_.data, read_.cap);
  }
}

void Stream::ready_uring() {
  // A completion may start, drop or close anything: every step re-checks.
  if (write_.done != nullptr && !connecting_ && write_.sent == write_.len) write_done_ = true;
  if (write_done_) {
    write_done_ = false;
    const WriteOp op = std::exchange(write_, WriteOp{});
    const int e = std::exchange(write_error_, 0);
    complete(op.done, e != 0 ? errno_code(e) : error_code{}, e != 0 ? op.sent : op.len);
  }
  if (read_done_ && read_.done != nullptr) {
    read_done_ = false;
    const ReadOp op = std::exchange(read_, ReadOp{});
    const int r = read_result_;
    if (r > 0) {
      complete(op.done, {}, static_cast<std::size_t>(r));
    } else {
      complete(op.done, r == 0 ? error_code(asio::error::eof) : errno_code(-r), 0);
    }
  }
  if (connecting_) perform_connect();  // also reports a connect that failed at once
  if (fd_ < 0 || connecting_) return;
  const bool write_wanted = write_.done != nullptr && writable_;
  const bool read_wanted = read_.done != nullptr && readable_ && !read_done_;
  if (write_wanted || read_wanted) poller_.want_io(*this);
}

void Stream::on_ready() {
  if (poller_.uses_uring()) {
    ready_uring();
  } else {
    // A completion may start, drop or close anything: every step re-checks.
    if (connecting_) {
      perform_connect();
    } else if (write_.done != nullptr && writable_ && fd_ >= 0) {
      perform_write();
    }
    if (read_.done != nullptr && readable_ && fd_ >= 0) perform_read();
  }
  if (tls_kick_ && fd_ >= 0) {  // a plaintext operation started since the engine last ran
    tls_kick_ = false;
    tls_pump();
  }
}

void Stream::perform_connect() {
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

void Stream::perform_write() {
  while (write_.sent < write_.len) {
    const ssize_t n =
        ::send(fd_, write_.data + write_.sent, write_.len - write_.sent, MSG_NOSIGNAL);
    if (n >= 0) {
      write_.sent += static_cast<std::size_t>(n);
      if (n > 0) sent_at_ = poller_.now();
    } else if (errno == EINTR) {
      continue;
    } else if (would_block(errno)) {
      writable_ = false;  // the poller reports when there is room again
      return;
    } else {
      const int e = errno;
      const WriteOp op = std::exchange(write_, WriteOp{});
      return complete(op.done, errno_code(e), op.sent);
    }
  }
  const WriteOp op = std::exchange(write_, WriteOp{});
  complete(op.done, {}, op.len);
}

void Stream::perform_read() {
  ssize_t n = 0;
  do {
    n = ::recv(fd_, read_.data, read_.cap, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && would_block(errno)) {
    readable_ = false;
    return;
  }
  const int e = errno;
  const ReadOp op = std::exchange(read_, ReadOp{});
  if (n > 0) {
    // A short read emptied the socket: the next data is reported by the poller. A full one
    // may have left bytes behind, and once the peer closed, reads answer at once.
    if (static_cast<std::size_t>(n) < op.cap && !peer_closed_) readable_ = false;
    return complete(op.done, {}, static_cast<std::size_t>(n));
  }
  complete(op.done, n == 0 ? error_code(asio::error::eof) : errno_code(e), 0);
}

void Stream::complete(Done done, const error_code& ec, std::size_t n) {
  if (done == nullptr) return;
  // The TLS engine's own socket operations come back to it, owner or not.
  if (done == &Stream::tls_raw_read_done) return tls_on_raw_read(ec, n);
  if (done == &Stream::tls_raw_write_done) return tls_on_raw_written(ec, n);
  StreamOwner* owner = stream_owner();
  if (owner == nullptr) return;
  struct Keep {  // the completion may drop the last other reference to its owner
    StreamOwner& owner;
    explicit Keep(StreamOwner& o) : owner(o) { owner.hold(); }
    Keep(const Keep&) = delete;
    Keep& operator=(const Keep&) = delete;
    ~Keep() { owner.release(); }
  } keep(*owner);
  done(*owner, ec, n);
}

}  // namespace floodgate::net
