// The harness of the Stream tests (include/floodgate/net/stream.h), in the clear and under
// TLS: streams over socket pairs on one Poller, and the owners that record what their
// completions reported. Every scenario runs inside one Poller::run() on the test thread, ends
// by stopping the loop from a completion, and has a deadline (a timerfd on the loop) so that a
// bug fails the test instead of hanging the suite. LoopTest is instantiated on both kernel
// interfaces; where the kernel refuses io_uring, its cases are skipped.
//
// Thread-safety: the test thread only (it is the loop's thread).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "floodgate/net/io_mode.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/stream.h"

namespace floodgate::net::testing {

using boost::system::error_code;

// Stops the loop when `after` has passed since it was made, and says so.
class Deadline final : public PollTarget {
 public:
  Deadline(Poller& poller, std::chrono::seconds after)
      : poller_(poller), fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {
    itimerspec spec{};
    spec.it_value.tv_sec = after.count();
    if (fd_ >= 0 &&
        (::timerfd_settime(fd_, 0, &spec, nullptr) != 0 || poller_.add(fd_, *this) != 0)) {
      disarm();
    }
  }
  ~Deadline() { disarm(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  bool armed() const { return fd_ >= 0; }
  void disarm() {
    if (fd_ < 0) return;
    poller_.remove(*this);
    ::close(std::exchange(fd_, -1));
  }
  void on_poll(uint32_t /*events*/) override {
    uint64_t expirations = 0;
    if (fd_ >= 0 && ::read(fd_, &expirations, sizeof(expirations)) > 0 && expirations > 0) {
      expired = true;
      poller_.stop();
    }
  }
  void on_ready() override {}
  bool expired = false;

 private:
  Poller& poller_;
  int fd_;
};

// A Stream whose completions go to `owner`, counting the steps the loop's heavy list gave it.
class TestStream final : public Stream {
 public:
  TestStream(Poller& poller, StreamOwner& owner) : Stream(poller), owner_(owner) {}
  ~TestStream() = default;
  void on_heavy() override {
    ++heavy_steps;
    in_heavy_step = true;
    Stream::on_heavy();
    in_heavy_step = false;
  }
  int heavy_steps = 0;
  bool in_heavy_step = false;

 private:
  StreamOwner* stream_owner() override { return &owner_; }
  StreamOwner& owner_;
};

class Peer;
using Step = std::function<void(Peer&)>;  // what a scenario does after a completion
inline constexpr std::size_t kUntilTheEnd = std::numeric_limits<std::size_t>::max();

// One end of a connection: a stream and the owner of its completions, recording what they
// reported.
class Peer final : public StreamOwner {
 public:
  static constexpr std::size_t kBufferBytes = std::size_t{64} * 1024;

  explicit Peer(Poller& poller) : stream(poller, *this) {}
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  void hold() noexcept override {}
  void release() noexcept override {}
  void on_tls_handshake(StreamOwner::Handshake result) noexcept override {
    handshake = result;
    handshake_in_heavy_step = stream.in_heavy_step;
  }

  // Reads until `total` bytes in all have arrived, or until a read fails or meets EOF
  // (kUntilTheEnd reads only until then); then `then`.
  void read_until(std::size_t total, Step then) {
    read_total_ = total;
    after_read_ = std::move(then);
    read_next();
  }
  void write(std::string bytes, Step then) {
    out_ = std::move(bytes);
    after_write_ = std::move(then);
    stream.write(out_.data(), out_.size(), &Peer::on_written);
  }

  TestStream stream;
  // The most one read asks for (its buffer's size: 1 to kBufferBytes).
  std::size_t read_cap = kBufferBytes;
  // Runs after each read that delivered bytes, before the next one starts.
  Step after_each_read;
  std::string received;
  std::vector<std::size_t> reads;  // the bytes each read delivered, in order
  bool read_done = false;
  error_code read_error;             // what ended the reading early (EOF or a failure)
  std::size_t read_error_bytes = 0;  // the byte count that read reported
  std::optional<std::size_t> written;
  error_code write_error;
  std::optional<StreamOwner::Handshake> handshake;
  bool handshake_in_heavy_step = false;  // the handshake ended inside Stream::on_heavy()

 private:
  void read_next() {
    stream.read_some(buffer_.data(), std::min(read_cap, buffer_.size()), &Peer::on_read);
  }
  static void on_read(StreamOwner& owner, const error_code& ec, std::size_t n) {
    auto& self = static_cast<Peer&>(owner);
    if (ec) {
      self.read_error = ec;
      self.read_error_bytes = n;
    } else {
      self.received.append(self.buffer_.data(), n);
      self.reads.push_back(n);
      if (self.after_each_read) self.after_each_read(self);
      if (self.received.size() < self.read_total_) return self.read_next();
    }
    self.read_done = true;
    if (Step then = std::exchange(self.after_read_, nullptr)) then(self);
  }
  static void on_written(StreamOwner& owner, const error_code& ec, std::size_t n) {
    auto& self = static_cast<Peer&>(owner);
    self.write_error = ec;
    self.written = n;
    if (Step then = std::exchange(self.after_write_, nullptr)) then(self);
  }

  std::array<char, kBufferBytes> buffer_{};
  std::size_t read_total_ = 0;
  Step after_read_;
  std::string out_;
  Step after_write_;
};

// A connected pair of non-blocking Unix stream sockets.
inline std::array<int, 2> socket_pair() {
  std::array<int, 2> fds{-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds.data()), 0);
  return fds;
}

inline void send_plain(int fd, std::string_view bytes) {
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// The size of a socket's buffer (SO_SNDBUF or SO_RCVBUF), as the kernel counts it.
inline int socket_buffer(int fd, int option) {
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, option, &bytes, &len), 0);
  return bytes;
}

// Asks for 4 KiB socket buffers (the kernel doubles the figure), so that a write of a few tens
// of KiB meets a full socket.
inline void shrink_buffers(int fd) {
  const int bytes = 4096;
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)), 0);
  EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)), 0);
}

// Bytes that look random, so that a lost, doubled or reordered piece cannot go unseen.
inline std::string pattern(std::size_t size) {
  std::string bytes(size, '\0');
  uint32_t x = 2463534242U;  // xorshift32
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return bytes;
}

inline std::string interface_name(const ::testing::TestParamInfo<IoMode>& info) {
  return info.param == IoMode::epoll ? "epoll" : "io_uring";
}

// One scenario's loop on the interface the test is instantiated with, and the streams on it.
class LoopTest : public ::testing::TestWithParam<IoMode> {
 protected:
  static constexpr std::chrono::seconds kDeadline{20};

  void SetUp() override {
    try {
      poller_.emplace(io_, GetParam());
    } catch (const std::system_error&) {
      GTEST_SKIP() << "io_uring is not available on this kernel";
    }
    deadline_.emplace(*poller_, kDeadline);
    ASSERT_TRUE(deadline_->armed());
  }

  // A derived fixture closes its own sockets first. The poller goes here, before any member is
  // destroyed: the objects on its lists (streams, targets a test queued) must outlive it.
  void TearDown() override {
    for (const auto& peer : peers_) peer->stream.close();  // io_uring: their registrations
    if (deadline_) deadline_->disarm();
    poller_.reset();
  }

  // Runs the scenario until a completion stops the loop.
  void run() {
    poller_->run();
    EXPECT_FALSE(deadline_->expired)
        << "the scenario did not end within " << kDeadline.count() << " s";
  }
  void stop() { poller_->stop(); }
  Step stop_step() {
    return [this](Peer& /*peer*/) { stop(); };
  }
  Poller& poller() { return *poller_; }

  // A stream on `fd` (connected), in the clear until a TLS session is started on it.
  Peer& plain_stream(int fd) {
    Peer& peer = *peers_.emplace_back(std::make_unique<Peer>(*poller_));
    EXPECT_EQ(peer.stream.adopt(fd), 0);
    return peer;
  }

 private:
  std::vector<std::unique_ptr<Peer>> peers_;
  std::optional<Deadline> deadline_;
  boost::asio::io_context io_;
  std::optional<Poller> poller_;
};

}  // namespace floodgate::net::testing
