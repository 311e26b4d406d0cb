// A non-blocking TCP socket driven by the reactor's Poller: the client side of a Session and
// every backend connection.
//
// The stream remembers what the kernel last reported (`readable_`, `writable_`) and performs
// an operation only when it can make progress, so a read started before the peer has sent
// anything costs no system call (poller.h says why that matters). At most one read and one
// write (or the connect) are pending at a time. An operation never completes inside the call
// that started it: a stream with work it can do now is queued on the poller's ready list,
// which runs before the reactor waits again. Completion calls a plain function with the
// Session the stream works for; closing or detaching drops what is pending, since nobody
// waits for it any more.
//
// Thread-safety: reactor thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>

#include "poller.h"

namespace floodgate::proxy {

class Session;

class Stream : public PollTarget {
 public:
  // Completion of an operation: the session, the result, and the bytes transferred.
  using Done = void (*)(Session& session, const boost::system::error_code& ec, std::size_t n);

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
  // Drops a pending read (no bytes are lost: a read takes data only when it completes).
  void cancel_read() { read_ = ReadOp{}; }
  bool is_open() const { return fd_ >= 0; }
  int native_handle() const { return fd_; }
  // True when nothing unread is waiting (costs a syscall only when readiness was reported
  // since the last read).
  bool quiet();

  // PollTarget.
  void on_poll(uint32_t events) override;
  void on_ready() override;

 protected:
  ~Stream();
  // The session completions go to (nullptr: none, e.g. a pooled backend connection).
  virtual Session* session() = 0;
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

  void perform_connect();
  void perform_write();
  void perform_read();
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
};

}  // namespace floodgate::proxy
