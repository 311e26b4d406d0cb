// A Stream in the clear (include/floodgate/net/stream.h, src/net/stream.cpp) over a Unix socket
// pair whose far end the test drives with plain system calls: reads that take what is there,
// writes that outlast the socket's buffers, and each side closing while an operation waits.
// The harness (stream_test_support.h) runs every scenario inside one Poller::run() on the test
// thread, ended from a completion, with a deadline so that a bug fails the test instead of
// hanging the suite; each test runs on both kernel interfaces (where the kernel refuses
// io_uring, its cases are skipped).
//
// What stream.h promises: a read completes with what is available (at most its buffer), EOF is
// asio::error::eof, a write completes with its whole length once every byte is taken, and
// close() drops what is pending, which then never completes. Where the header is silent, these
// tests pin what stream.cpp does: a failed write completes with the socket's errno (system
// category) and the bytes the kernel took before it failed.
#include "floodgate/net/stream.h"

#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/net/io_mode.h"
#include "floodgate/net/poller.h"
#include "stream_test_support.h"

namespace floodgate::net {
namespace {

using boost::system::error_code;
using testing::kUntilTheEnd;
using testing::pattern;
using testing::Peer;
using testing::send_plain;
using testing::shrink_buffers;
using testing::socket_buffer;
using testing::socket_pair;

// The far end of a stream's socket pair, driven by the test with plain system calls.
class RawEnd {
 public:
  explicit RawEnd(int fd) : fd_(fd) {}
  ~RawEnd() { close(); }
  RawEnd(const RawEnd&) = delete;
  RawEnd& operator=(const RawEnd&) = delete;

  int fd() const { return fd_; }
  void send(std::string_view bytes) const { send_plain(fd_, bytes); }
  void shutdown_send() const { EXPECT_EQ(::shutdown(fd_, SHUT_WR), 0); }
  void close() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
  // What has arrived so far, without waiting; `ended` once the stream's side has closed.
  std::string take() {
    std::string bytes;
    std::array<char, 4096> buf{};
    for (;;) {
      const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n <= 0) {
        ended = ended || n == 0;
        return bytes;
      }
      bytes.append(buf.data(), static_cast<std::size_t>(n));
    }
  }
  // Bytes the stream sent that have not been read here yet (SIOCINQ).
  std::size_t unread() const {
    int queued = 0;
    EXPECT_EQ(::ioctl(fd_, SIOCINQ, &queued), 0);
    return queued > 0 ? static_cast<std::size_t>(queued) : 0;
  }
  bool ended = false;

 private:
  int fd_;
};

// Runs `what` on its turn on the ready list, `turns` turns of the loop after the one it was
// made in. Made before run(), it runs after the streams queued before it have had their first
// turn: a read or write started then is pending by the time `what` runs.
class Later final : public PollTarget {
 public:
  Later(Poller& poller, int turns, std::function<void()> what)
      : poller_(poller), turns_(turns), what_(std::move(what)) {
    poller_.defer(*this);
  }
  void on_poll(uint32_t /*events*/) override {}
  void on_ready() override {
    if (turns_-- > 0) return poller_.defer(*this);
    if (std::function<void()> what = std::exchange(what_, nullptr)) what();
  }

 private:
  Poller& poller_;
  int turns_;
  std::function<void()> what_;
};

// The far end of a stream's socket reading slowly: one small chunk per turn of the loop (it
// queues itself on the ready list again), until `total` bytes have come or the socket ends;
// then `then`.
class SlowReader final : public PollTarget {
 public:
  static constexpr std::size_t kChunk = 4096;

  SlowReader(Poller& poller, int fd, std::size_t total, std::function<void()> then)
      : poller_(poller), fd_(fd), total_(total), then_(std::move(then)) {
    poller_.defer(*this);
  }
  void on_poll(uint32_t /*events*/) override {}
  void on_ready() override {
    std::array<char, kChunk> buf{};
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    const int e = errno;
    if (n > 0) received.append(buf.data(), static_cast<std::size_t>(n));
    const bool ended = n == 0 || (n < 0 && e != EAGAIN && e != EWOULDBLOCK && e != EINTR);
    if (received.size() < total_ && !ended) return poller_.defer(*this);
    finished = true;
    if (std::function<void()> then = std::exchange(then_, nullptr)) then();
  }
  std::string received;
  bool finished = false;

 private:
  Poller& poller_;
  int fd_;
  std::size_t total_;
  std::function<void()> then_;
};

class StreamTest : public testing::LoopTest {
 protected:
  // `what` on the ready list, `turns` turns from now (Later).
  void later(int turns, std::function<void()> what) {
    laters_.push_back(std::make_unique<Later>(poller(), turns, std::move(what)));
  }
  // `what` in the ready list's pass, after the targets queued before it: made before run(),
  // once the operations started before it are pending.
  void soon(std::function<void()> what) { later(0, std::move(what)); }
  SlowReader& slow_reader(int fd, std::size_t total, std::function<void()> then) {
    return reader_.emplace(poller(), fd, total, std::move(then));
  }

 private:
  // Destroyed after the poller (LoopTest::TearDown), whose ready list may still name them.
  std::vector<std::unique_ptr<Later>> laters_;
  std::optional<SlowReader> reader_;
};

const error_code kEof = boost::asio::error::eof;

TEST_P(StreamTest, AReadCompletesWithTheBytesThereAreThoughItsBufferHoldsMore) {
  const auto [stream_fd, far_fd] = socket_pair();
  RawEnd far(far_fd);
  Peer& reader = plain_stream(stream_fd);
  reader.read_until(1, stop_step());
  soon([&] {
    EXPECT_TRUE(reader.stream.reading()) << "the read did not wait for the bytes";
    far.send("hello");
  });
  run();
  EXPECT_FALSE(reader.read_error) << reader.read_error.message();
  EXPECT_EQ(reader.received, "hello");
  EXPECT_EQ(reader.reads, (std::vector<std::size_t>{5}));
}

TEST_P(StreamTest, AReadTakesNoMoreThanItsBufferAndLeavesTheRestForTheNext) {
  const auto [stream_fd, far_fd] = socket_pair();
  RawEnd far(far_fd);
  far.send("0123456789");
  Peer& reader = plain_stream(stream_fd);
  reader.read_cap = 4;
  reader.read_until(10, stop_step());
  run();
  EXPECT_FALSE(reader.read_error) << reader.read_error.message();
  EXPECT_EQ(reader.received, "0123456789");
  EXPECT_EQ(reader.reads, (std::vector<std::size_t>{4, 4, 2}));
}

TEST_P(StreamTest, SmallWritesOfThePeerArriveInOrderOverSuccessiveReads) {
  constexpr std::array<std::string_view, 4> kPieces{"GET ", "/index.html ", "HTTP/1.1\r\n", "\r\n"};
  std::string whole;
  std::vector<std::size_t> sizes;
  for (const std::string_view piece : kPieces) {
    whole.append(piece);
    sizes.push_back(piece.size());
  }
  const auto [stream_fd, far_fd] = socket_pair();
  RawEnd far(far_fd);
  Peer& reader = plain_stream(stream_fd);
  // Each piece goes once the stream has read the one before, so none can merge with another.
  std::size_t next = 0;
  far.send(kPieces[next++]);
  reader.after_each_read = [&](Peer& /*peer*/) {
    if (next < kPieces.size()) far.send(kPieces[next++]);
  };
  reader.read_until(whole.size(), stop_step());
  run();
  EXPECT_FALSE(reader.read_error) << reader.read_error.message();
  EXPECT_EQ(reader.received, whole);
  EXPECT_EQ(reader.reads, sizes);
}

TEST_P(StreamTest, AWriteLargerThanTheSocketBuffersCompletesWithItsLengthOnlyOnceTheKernelHasAll) {
  const auto [stream_fd, far_fd] = socket_pair();
  shrink_buffers(stream_fd);
  shrink_buffers(far_fd);
  RawEnd far(far_fd);
  Peer& writer = plain_stream(stream_fd);
  const std::string payload = pattern(std::size_t{1} << 20);
  ASSERT_GT(payload.size(), 8 * static_cast<std::size_t>(socket_buffer(stream_fd, SO_SNDBUF)));
  std::size_t read_at_completion = 0;
  std::size_t queued_at_completion = 0;
  SlowReader& reader = slow_reader(far.fd(), payload.size(), [&] {
    if (writer.written) stop();
  });
  writer.write(payload, [&](Peer& w) {
    read_at_completion = reader.received.size();
    queued_at_completion = far.unread();
    if (w.write_error || reader.finished) stop();
  });
  run();
  EXPECT_FALSE(writer.write_error) << writer.write_error.message();
  EXPECT_EQ(writer.written, payload.size());
  // At the completion every byte had left the stream: read by the far end, or waiting in its
  // socket; and the far end had had to read for the rest to fit.
  EXPECT_EQ(read_at_completion + queued_at_completion, payload.size());
  EXPECT_GT(read_at_completion, 0U);
  EXPECT_EQ(reader.received.size(), payload.size());
  EXPECT_TRUE(reader.received == payload) << "the bytes arrived changed or out of order";
}

TEST_P(StreamTest, APeerClosingWhileAReadIsPendingEndsTheReadWithEof) {
  const auto [stream_fd, far_fd] = socket_pair();
  RawEnd far(far_fd);
  Peer& reader = plain_stream(stream_fd);
  reader.read_until(kUntilTheEnd, stop_step());
  soon([&] {
    EXPECT_TRUE(reader.stream.reading()) << "the read was not pending";
    far.close();
  });
  run();
  EXPECT_TRUE(reader.read_done);
  EXPECT_EQ(reader.read_error, kEof) << reader.read_error.message();
  EXPECT_EQ(reader.read_error_bytes, 0U);
  EXPECT_EQ(reader.received, "");
}

TEST_P(StreamTest, APeerThatShutsDownItsSendingSideDeliversItsBytesThenEofAndStillHearsTheStream) {
  const auto [stream_fd, far_fd] = socket_pair();
  RawEnd far(far_fd);
  far.send("last words");
  far.shutdown_send();
  Peer& local = plain_stream(stream_fd);
  local.read_until(kUntilTheEnd, [this](Peer& s) { s.write("answer", stop_step()); });
  run();
  EXPECT_EQ(local.received, "last words");
  EXPECT_EQ(local.reads.size(), 1U);
  EXPECT_EQ(local.read_error, kEof) << local.read_error.message();
  EXPECT_FALSE(local.write_error) << local.write_error.message();
  EXPECT_EQ(local.written, 6U);
  EXPECT_EQ(far.take(), "answer");
  EXPECT_FALSE(far.ended);
}

TEST_P(StreamTest, APeerClosingWhileAWriteIsPendingFailsItWithTheBytesTakenBefore) {
  const auto [stream_fd, far_fd] = socket_pair();
  shrink_buffers(stream_fd);
  shrink_buffers(far_fd);
  RawEnd far(far_fd);
  Peer& writer = plain_stream(stream_fd);
  const std::string payload = pattern(std::size_t{1} << 20);  // far more than the socket holds
  writer.write(payload, stop_step());
  soon([&] {
    EXPECT_TRUE(writer.stream.writing()) << "the write was not pending";
    far.close();
  });
  run();
  ASSERT_TRUE(writer.written.has_value()) << "the write never completed";
  EXPECT_LT(*writer.written, payload.size());
  // EPIPE, or ECONNRESET when the far end closed with the stream's bytes unread (a Unix
  // socket reports that to the writer, as TCP would with a reset).
  const error_code broken_pipe(EPIPE, boost::system::system_category());
  const error_code reset(ECONNRESET, boost::system::system_category());
  EXPECT_TRUE(writer.write_error == broken_pipe || writer.write_error == reset)
      << writer.write_error.message();
}

TEST_P(StreamTest, ClosingTheStreamDropsItsPendingReadAndWriteWhichNeverComplete) {
  const auto [stream_fd, far_fd] = socket_pair();
  shrink_buffers(stream_fd);
  shrink_buffers(far_fd);
  RawEnd far(far_fd);
  Peer& local = plain_stream(stream_fd);
  const std::string payload = pattern(std::size_t{1} << 20);  // far more than the socket holds
  local.read_until(kUntilTheEnd, stop_step());
  local.write(payload, stop_step());
  soon([&] {
    EXPECT_TRUE(local.stream.reading()) << "the read was not pending";
    EXPECT_TRUE(local.stream.writing()) << "the write was not pending";
    local.stream.close();
    EXPECT_FALSE(local.stream.reading());
    EXPECT_FALSE(local.stream.writing());
    // A dropped operation that completed anyway would do so from the ready list, on the next
    // turn at the latest: three turns give it every chance.
    later(3, [this] { stop(); });
  });
  run();
  EXPECT_FALSE(local.read_done) << "the dropped read completed: " << local.read_error.message();
  EXPECT_FALSE(local.written.has_value()) << "the dropped write completed";
  EXPECT_FALSE(local.stream.is_open());
  // The far end sees what the stream had sent, then the end of the connection.
  const std::string sent = far.take();
  EXPECT_TRUE(far.ended);
  EXPECT_EQ(sent, payload.substr(0, sent.size()));
}

INSTANTIATE_TEST_SUITE_P(BothInterfaces, StreamTest,
                         ::testing::Values(IoMode::epoll, IoMode::io_uring),
                         testing::interface_name);

}  // namespace
}  // namespace floodgate::net
