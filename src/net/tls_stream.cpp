// The TLS engine of a Stream (stream.h, tls.h): plaintext reads and writes through the
// session's SSL object, whose ciphertext goes through a BIO pair that the stream fills from the
// socket and empties into it with its ordinary (raw) operations.
//
// tls_pump() runs whenever something changed (a plaintext operation started, a socket read or
// write completed) and does every step that can make progress: the handshake (a server's on
// the poller's heavy list when the client's bytes arrived, on_heavy()), SSL_write of
// the pending plaintext, SSL_read into the pending read, the ciphertext out to the socket, and
// a socket read when the engine needs bytes. A plaintext write completes once its ciphertext
// is on the socket (the same back-pressure as in the clear); a failure is delivered after the
// alert that says so has gone out.
#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <climits>
#include <utility>

#include "floodgate/net/stream.h"

namespace floodgate::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::size_t kMaxStep = INT_MAX;  // OpenSSL takes int lengths
// Rounds of the engine per run: each one made progress; the bound keeps a run finite.
constexpr int kMaxRounds = 64;
}  // namespace

void Stream::start_tls(std::unique_ptr<TlsSession> session) {
  tls_ = std::move(session);
  tls_->started = poller_.clock().now();
  tls_kick_ = true;  // the handshake starts with the first read
}

void Stream::tls_read_some(char* data, std::size_t cap, Done done) {
  app_read_ = ReadOp{data, cap, done};
  tls_kick_ = true;
  poller_.defer(*this);
}

void Stream::tls_write(const char* data, std::size_t len, Done done) {
  app_write_ = WriteOp{data, len, 0, done};
  tls_kick_ = true;
  poller_.defer(*this);
}

void Stream::tls_shutdown_send() {
  if (fd_ < 0) return;
  if (tls_->established && !tls_->failed) {
    SSL_shutdown(tls_->ssl());  // close_notify into the pair
    ERR_clear_error();
  }
  // The socket half-closes once the pair's ciphertext is out (a handshake flight, an alert).
  tls_shutdown_ = true;
  tls_kick_ = true;
  poller_.defer(*this);
}

void Stream::tls_pump() {
  for (int round = 0; round < kMaxRounds && fd_ >= 0 && tls_ != nullptr; ++round) {
    bool progress = false;
    bool want_read = false;
    if (!tls_->failed && !tls_->established) {
      if (tls_fresh_ && !tls_heavy_ && tls_->client() == nullptr) {
        poller_.defer_heavy(*this);  // on_heavy() goes on from here
      } else if (!tls_->early_phase) {
        tls_fresh_ = false;
        progress |= tls_handshake();
      } else if (app_read_.done != nullptr) {  // the early-data step needs a plaintext read
        tls_fresh_ = false;
        progress |= tls_early_read_step();
      }
    }
    if (!tls_->failed && !tls_->established) {
      want_read = true;  // the handshake waits for the peer (or for room, flushed below)
      // A response to a request read from early data goes out as 0.5-RTT data.
      if (tls_->early_phase && tls_->early_data) progress |= tls_write_step();
      if (fd_ < 0) return;
    } else if (!tls_->failed) {
      progress |= tls_write_step();
      if (fd_ < 0) return;
      progress |= tls_read_step(want_read);
      if (fd_ < 0) return;
    }
    tls_flush();
    if (fd_ < 0) return;
    if (tls_->failed) {
      progress |= tls_deliver_failure();
    } else if (app_write_.done != nullptr && app_write_.sent == app_write_.len && !tls_writing_ &&
               BIO_ctrl_pending(tls_->net()) == 0) {
      const WriteOp op = std::exchange(app_write_, WriteOp{});
      complete(op.done, {}, op.len);
      progress = true;
    }
    if (fd_ < 0) return;
    if (want_read && !tls_->failed) tls_fill();
    if (!progress) return;
  }
  // Still work after the bound: go on after the other targets had their turn.
  if (fd_ >= 0) {
    tls_kick_ = true;
    poller_.defer(*this);
  }
}

// A server handshake's step with the client's new bytes: the signature and key exchange of a
// full handshake cost a few hundred microseconds, so they take their turn on the heavy list
// rather than running inside the batch of events that brought the bytes (poller.h).
void Stream::on_heavy() {
  if (fd_ < 0 || tls_ == nullptr) return;
  tls_heavy_ = true;
  tls_pump();
  tls_heavy_ = false;
}

bool Stream::tls_handshake() {
  const int r = SSL_do_handshake(tls_->ssl());
  if (r == 1) {
    tls_->established = true;
    tls_report(StreamOwner::Handshake::ok);
    return true;
  }
  const int e = SSL_get_error(tls_->ssl(), r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return false;
  if (e == SSL_ERROR_WANT_CLIENT_HELLO_CB) return tls_hello();
  tls_fail(e);
  return true;
}

// The ClientHello callback paused the handshake (tls.cpp): the owner says whether it goes on,
// and the next step runs it (the callback then lets it through, or fails it with an alert).
bool Stream::tls_hello() {
  ERR_clear_error();
  StreamOwner* owner = stream_owner();
  const bool admitted = owner == nullptr || owner->on_tls_hello();
  tls_->hello = admitted ? TlsSession::Hello::admitted : TlsSession::Hello::refused;
  return true;
}

// Early data (server side): the client's first flight of application data, read before the
// handshake is complete. The ClientHello is processed by the first call, so the engine runs
// only with a plaintext read pending (ClientConn reads as soon as it starts). FINISH (the
// client's EndOfEarlyData, or no early data at all, or early data the server refused) hands
// over to SSL_do_handshake.
bool Stream::tls_early_read_step() {
  if (app_read_.done == nullptr) return false;
  std::size_t n = 0;
  const int r =
      SSL_read_early_data(tls_->ssl(), app_read_.data, std::min(app_read_.cap, kMaxStep), &n);
  if (r == SSL_READ_EARLY_DATA_ERROR) {
    const int e = SSL_get_error(tls_->ssl(), r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return false;
    if (e == SSL_ERROR_WANT_CLIENT_HELLO_CB) return tls_hello();
    tls_fail(e);
    return true;
  }
  if (r == SSL_READ_EARLY_DATA_FINISH) tls_->early_phase = false;
  if (n > 0) {
    tls_->early_data = tls_->read_early = true;
    const ReadOp op = std::exchange(app_read_, ReadOp{});
    complete(op.done, {}, n);
  }
  return true;
}

bool Stream::tls_write_step() {
  if (app_write_.done == nullptr || app_write_.sent == app_write_.len) return false;
  const std::size_t rest = std::min(app_write_.len - app_write_.sent, kMaxStep);
  int r = 0;
  if (tls_->early_phase) {
    std::size_t written = 0;
    r = SSL_write_early_data(tls_->ssl(), app_write_.data + app_write_.sent, rest, &written);
    if (r == 1) {
      app_write_.sent += written;
      return true;
    }
  } else {
    r = SSL_write(tls_->ssl(), app_write_.data + app_write_.sent, static_cast<int>(rest));
    if (r > 0) {
      app_write_.sent += static_cast<std::size_t>(r);
      return true;
    }
  }
  const int e = SSL_get_error(tls_->ssl(), r);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) return false;  // room comes
  tls_fail(e);
  return true;
}

bool Stream::tls_read_step(bool& want_read) {
  if (app_read_.done == nullptr) return false;
  const int r =
      SSL_read(tls_->ssl(), app_read_.data, static_cast<int>(std::min(app_read_.cap, kMaxStep)));
  if (r > 0) {
    tls_->read_early = false;
    const ReadOp op = std::exchange(app_read_, ReadOp{});
    complete(op.done, {}, static_cast<std::size_t>(r));
    return true;
  }
  const int e = SSL_get_error(tls_->ssl(), r);
  if (e == SSL_ERROR_WANT_READ) {
    want_read = true;
    return false;
  }
  if (e == SSL_ERROR_WANT_WRITE) return false;
  if (e == SSL_ERROR_ZERO_RETURN && !tls_->close_notify_received && tls_error_) {
    // SSL_OP_IGNORE_UNEXPECTED_EOF makes the end of the socket look like close_notify, but the
    // socket was reset, not closed: the read fails with the reset (HTTP must not take a
    // close-delimited body cut by it for a whole one).
    ERR_clear_error();
    const ReadOp op = std::exchange(app_read_, ReadOp{});
    complete(op.done, tls_error_, 0);
    return true;
  }
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && tls_eof_ && !tls_error_)) {
    // close_notify, or the peer closed the socket (truncation is EOF: HTTP frames itself).
    ERR_clear_error();
    const ReadOp op = std::exchange(app_read_, ReadOp{});
    complete(op.done, asio::error::eof, 0);
    return true;
  }
  tls_fail(e);
  return true;
}

// The pair's ciphertext out to the socket, one contiguous run at a time.
void Stream::tls_flush() {
  if (tls_writing_) return;
  char* data = nullptr;
  const int n = BIO_nread0(tls_->net(), &data);
  if (n > 0) {
    tls_writing_ = true;
    tls_out_len_ = static_cast<std::size_t>(n);
    return raw_write(data, tls_out_len_, &Stream::tls_raw_write_done);
  }
  if (!tls_plain_answer_.empty()) {
    // Not TLS data: written as it is (the pair is empty), then the write side is shut.
    const std::string_view answer = std::exchange(tls_plain_answer_, {});
    tls_writing_ = tls_plain_writing_ = true;
    tls_shutdown_ = true;
    return raw_write(answer.data(), answer.size(), &Stream::tls_raw_write_done);
  }
  if (tls_shutdown_) {
    tls_shutdown_ = false;
    ::shutdown(fd_, SHUT_WR);
  }
}

// A socket read for the engine, into the session's buffer, as much as the pair can take.
void Stream::tls_fill() {
  if (tls_reading_ || tls_eof_) return;
  const std::size_t room =
      std::min(BIO_ctrl_get_write_guarantee(tls_->net()), TlsSession::kInputBytes);
  if (room == 0) return;  // the engine has not taken what is there yet
  tls_reading_ = true;
  raw_read(tls_->input.data(), room, &Stream::tls_raw_read_done);
}

void Stream::tls_on_raw_read(const error_code& ec, std::size_t n) {
  tls_reading_ = false;
  if (!ec) {
    // Room for n was guaranteed when the read started, and only this stream writes the pair.
    BIO_write(tls_->net(), tls_->input.data(), static_cast<int>(n));
    tls_fresh_ = true;
  } else {
    tls_eof_ = true;
    if (ec != asio::error::eof) tls_error_ = ec;  // a reset: the session fails with it
    BIO_shutdown_wr(tls_->net());                 // the engine reads EOF after the bytes it has
  }
  tls_pump();
}

void Stream::tls_on_raw_written(const error_code& ec, std::size_t n) {
  tls_writing_ = false;
  const bool plain = std::exchange(tls_plain_writing_, false);  // not the pair's bytes
  if (ec) {
    tls_error_ = ec;
    tls_eof_ = true;
    if (!tls_->failed) {
      tls_->failed = true;
      if (!tls_->established) tls_report(StreamOwner::Handshake::closed);
    }
    // What the socket would not take is dropped with the session.
  } else if (!plain) {
    char* data = nullptr;
    BIO_nread(tls_->net(), &data, static_cast<int>(n));  // consumed
  }
  tls_pump();
}

void Stream::tls_fail(int ssl_error) {
  tls_->failed = true;
  const bool closed = tls_eof_ && ssl_error != SSL_ERROR_SSL;
  if (!tls_error_) {
    if (closed) {
      tls_error_ = asio::error::eof;
    } else {
      const unsigned long e = ERR_peek_last_error();
      const int reason = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;
      tls_error_ = error_code(reason != 0 ? reason : SSL_R_UNEXPECTED_MESSAGE, tls_category());
      // A plain HTTP request to a TLS listener (OpenSSL recognises its first bytes): answered
      // in the clear, as nginx does, so that the client learns why (a 400 from the owner).
      if ((reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST) &&
          tls_->client() == nullptr) {
        if (StreamOwner* owner = stream_owner()) tls_plain_answer_ = owner->tls_plain_http_answer();
      }
    }
  }
  ERR_clear_error();  // the queue is the thread's: the next connection must not read this
  if (!tls_->established) {
    tls_report(closed || tls_error_.category() != tls_category() ? StreamOwner::Handshake::closed
                                                                 : StreamOwner::Handshake::failed);
  }
}

// A failed session answers its pending operations with the failure, once the alert is out.
bool Stream::tls_deliver_failure() {
  if (tls_writing_) return false;
  bool delivered = false;
  if (app_write_.done != nullptr) {
    const WriteOp op = std::exchange(app_write_, WriteOp{});
    complete(op.done, tls_error_, op.sent);
    delivered = true;
  }
  if (fd_ >= 0 && app_read_.done != nullptr) {
    const ReadOp op = std::exchange(app_read_, ReadOp{});
    complete(op.done, tls_error_, 0);
    delivered = true;
  }
  return delivered;
}

void Stream::tls_report(StreamOwner::Handshake result) {
  if (tls_->handshake_reported) return;
  tls_->handshake_reported = true;
  if (StreamOwner* owner = stream_owner()) owner->on_tls_handshake(result);
}

}  // namespace floodgate::net
