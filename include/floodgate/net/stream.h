// A non-blocking TCP socket driven by a reactor's Poller: the client side of a connection,
// every backend connection, and later the Redis link and the transport under TLS.
//
// The stream remembers what the kernel last reported (`readable_`, `writable_`) and performs
// an operation only when it can make progress, so a read started before the peer has sent
// anything costs no system call (poller.h says why that matters). At most one read and one
// write (or the connect) are pending at a time. An operation never completes inside the call
// that started it: a stream with work it can do now is queued on the poller's ready list,
// which runs before the reactor waits again. Completion calls a plain function with the
// StreamOwner the stream works for (kept alive for the call); closing or detaching drops what
// is pending, since nobody waits for it any more.
//
// Thread-safety: reactor thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>

#include "floodgate/net/poller.h"

namespace floodgate::net {

// Whom a stream's completions go to. hold() and release() keep the owner alive while a
// completion runs (the completion may drop the last other reference to it).
class StreamOwner {
 public:
  virtual void hold() noexcept = 0;
  virtual void release() noexcept = 0;

 protected:
  ~StreamOwner() = default;
};

class Stream : public PollTarget {
 public:
  // Completion of an operation: the owner, the result, and the bytes transferred.
  using Done = void (*)(StreamOwner& owner, const boost::system::error_code& ec, std::size_t n);

  explicit Stream(Poller& poller) : poller_(poller) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Takes a connected socket (accepted). Returns 0 or an errno value.
  int adopt(int fd);
  // Opens a socket and connects it (TCP_NODELAY set once connected).
  void connect(const boost::asio::ip::tcp::endpoint& to, Done done);
  // Reads what is available into [data, data + cap) (cap > 0); EOF is asio::error::eof.
  void read_some(char* data, std::size_t cap, Done done);
  // Writes all of [data, data + len), then completes with len.
  void write(const char* data, std::size_t len, Done done);
  bool reading() const { return read_.done != nullptr; }
  bool writing() const { return write_.done != nullptr; }
  void shutdown_send();
  // Closes the socket (it leaves the epoll set) and drops pending operations.
  void close();
  void drop_pending();
  // Drops a pending read. No bytes are lost: what it already took (io_uring) is handed to
  // the next read, whose buffer must not overlap a different live use of the old one.
  void cancel_read();
  bool is_open() const { return fd_ >= 0; }
  int native_handle() const { return fd_; }
  // True when nothing unread is waiting (costs a syscall only when readiness was reported
  // since the last read).
  bool quiet();

  // PollTarget.
  void on_poll(uint32_t events) override;
  void on_ready() override;
  void on_polled(uint32_t events) override;
  void on_io(bool is_send, int result) override;
  void submit_io() override;

 protected:
  ~Stream();
  // Where completions go (nullptr: nowhere, e.g. a pooled backend connection).
  virtual StreamOwner* stream_owner() = 0;
  bool readable() const { return readable_; }

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

  void note_events(uint32_t events);
  void perform_connect();
  void perform_write();
  void perform_read();
  void ready_uring();
  void complete(Done done, const boost::system::error_code& ec, std::size_t n);

  Poller& poller_;
  int fd_ = -1;
  bool readable_ = true;  // unknown at first: the first read is tried at once
  bool writable_ = false;
  bool peer_closed_ = false;  // EOF or an error is pending: reads answer at once
  bool connecting_ = false;
  boost::system::error_code connect_error_;  // a connect that failed at once
  ReadOp read_;
  WriteOp write_;  // also holds the connect completion while connecting_
  // io_uring: a result recorded when the ring reported it, waiting for delivery from the
  // ready list.
  bool read_done_ = false;
  bool write_done_ = false;
  int read_result_ = 0;  // bytes, 0 for EOF, or -errno
  int write_error_ = 0;  // errno of a failed send
  // Bytes (or the EOF or error) a cancelled read had already taken, for the next read.
  const char* carry_data_ = nullptr;
  int carry_result_ = 0;
  bool carry_ = false;
};

}  // namespace floodgate::net
