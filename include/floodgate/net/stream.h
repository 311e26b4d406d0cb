// A non-blocking TCP socket driven by a reactor's Poller: the client side of a connection,
// every backend connection and the Redis link, in the clear or under TLS (start_tls()).
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
// Under TLS (tls_stream.cpp) the same reads and writes carry plaintext: the stream runs the
// session's SSL engine against a BIO pair and moves the ciphertext with its own socket reads
// and writes, so the handshake, records and alerts cost no thread and no blocking call.
//
// Thread-safety: reactor thread only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string_view>

#include "floodgate/net/poller.h"
#include "floodgate/net/tls.h"

namespace floodgate::net {

// Whom a stream's completions go to. hold() and release() keep the owner alive while a
// completion runs (the completion may drop the last other reference to it).
class StreamOwner {
 public:
  virtual void hold() noexcept = 0;
  virtual void release() noexcept = 0;
  // A TLS stream's handshake ended: finished, failed (a protocol error, said by the next
  // read's error), or cut short by the peer closing. Once per stream.
  enum class Handshake : uint8_t { ok, failed, closed };
  virtual void on_tls_handshake(Handshake /*result*/) noexcept {}
  // A TLS server stream has the client's whole ClientHello, before the handshake's costly
  // steps run: true lets the handshake go on, false ends it with an alert. Once per stream.
  virtual bool on_tls_hello() noexcept { return true; }
  // A TLS server stream received a plain HTTP request instead of a ClientHello: the bytes to
  // answer it with, in the clear, before the connection closes (empty: none, only the close).
  virtual std::string_view tls_plain_http_answer() noexcept { return {}; }

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
  // From now on the stream speaks TLS through `session` (before its first read or write):
  // reads and writes carry plaintext, the first read also runs the handshake.
  void start_tls(std::unique_ptr<TlsSession> session);
  const TlsSession* tls() const noexcept { return tls_.get(); }
  // Opens a socket and connects it (TCP_NODELAY set once connected).
  void connect(const boost::asio::ip::tcp::endpoint& to, Done done);
  // Reads what is available into [data, data + cap) (cap > 0); EOF is asio::error::eof.
  void read_some(char* data, std::size_t cap, Done done);
  // Writes all of [data, data + len), then completes with len.
  void write(const char* data, std::size_t len, Done done);
  // Whether a read_some() / write() of the owner's is pending (under TLS the session's own
  // socket reads and writes are not: the engine may be reading while nobody asked it to).
  bool reading() const { return (tls_ != nullptr ? app_read_ : read_).done != nullptr; }
  bool writing() const { return (tls_ != nullptr ? app_write_ : write_).done != nullptr; }
  // When the kernel last took bytes of a write from this stream (the loop's time; the epoch
  // before the first): a stalled peer is one that has taken nothing for a while. Under TLS the
  // ciphertext counts.
  Clock::time_point last_sent_at() const noexcept { return sent_at_; }
  // Bytes the kernel holds for the peer, not yet acknowledged (SIOCOUTQ; one system call, 0
  // when closed): when it shrinks, the peer is taking bytes even while the socket's send
  // buffer is too full for the poller to call it writable.
  std::size_t unsent_bytes() const noexcept;
  // Bytes the kernel has received from the peer that no read has taken yet (SIOCINQ; one
  // system call, 0 when closed). In the clear only: under TLS they are ciphertext.
  std::size_t unread_bytes() const noexcept;
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
  void on_heavy() override;  // a server handshake's step (tls_stream.cpp)

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

  void raw_read(char* data, std::size_t cap, Done done);
  void raw_write(const char* data, std::size_t len, Done done);
  void raw_cancel_read();
  void raw_drop_pending();
  void note_events(uint32_t events);
  void perform_connect();
  void perform_write();
  void perform_read();
  void ready_uring();
  void complete(Done done, const boost::system::error_code& ec, std::size_t n);

  // TLS (tls_stream.cpp): the plaintext operations, and the engine between them and the
  // socket's ciphertext.
  void tls_read_some(char* data, std::size_t cap, Done done);
  void tls_write(const char* data, std::size_t len, Done done);
  void tls_shutdown_send();
  void tls_pump();
  bool tls_handshake();
  bool tls_early_read_step();
  bool tls_hello();
  bool tls_write_step();
  bool tls_read_step(bool& want_read);
  void tls_flush();
  void tls_fill();
  bool tls_deliver_failure();
  void tls_fail(int ssl_error);
  void tls_report(StreamOwner::Handshake result);
  void tls_on_raw_read(const boost::system::error_code& ec, std::size_t n);
  void tls_on_raw_written(const boost::system::error_code& ec, std::size_t n);
  // Markers for the engine's socket operations, recognised by complete() and never called
  // (their bodies differ so that no linker folds them into one address).
  static void tls_raw_read_done(StreamOwner&, const boost::system::error_code&, std::size_t) {
    std::abort();
  }
  static void tls_raw_write_done(StreamOwner&, const boost::system::error_code&, std::size_t) {
    std::terminate();
  }

  Poller& poller_;
  int fd_ = -1;
  bool readable_ = true;  // unknown at first: the first read is tried at once
  bool writable_ = false;
  bool peer_closed_ = false;  // EOF or an error is pending: reads answer at once
  bool connecting_ = false;
  Clock::time_point sent_at_{};              // last_sent_at()
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

  // TLS: the session, the application's operations on it, and the engine's state.
  std::unique_ptr<TlsSession> tls_;
  ReadOp app_read_;
  WriteOp app_write_;
  boost::system::error_code tls_error_;  // why the session failed (delivered to both ops)
  std::size_t tls_out_len_ = 0;          // ciphertext bytes the pending socket write sends
  bool tls_kick_ = false;                // an operation started: the engine runs in on_ready()
  bool tls_reading_ = false;             // a socket read into the session's buffer is pending
  bool tls_writing_ = false;             // a socket write of the pair's ciphertext is pending
  bool tls_eof_ = false;                 // the peer closed (or the socket failed)
  bool tls_shutdown_ = false;            // close_notify, then shutdown(SHUT_WR), once flushed
  // A plain HTTP request came instead of a ClientHello: the owner's answer, written in the
  // clear once the pair is empty (`tls_plain_answer_`), then pending (`tls_plain_writing_`).
  std::string_view tls_plain_answer_;
  bool tls_plain_writing_ = false;
  // A server handshake's steps run on the poller's heavy list (Poller::defer_heavy): when the
  // client's bytes arrived since the handshake last ran (`tls_fresh_`), the engine waits for
  // the list's turn (`tls_heavy_` while it runs there).
  bool tls_fresh_ = false;
  bool tls_heavy_ = false;
};

}  // namespace floodgate::net
