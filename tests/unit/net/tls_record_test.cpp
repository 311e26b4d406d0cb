// The TLS engine of a Stream (src/net/tls_stream.cpp) when the socket does not line up with
// the records: records that reach the engine a few bytes per socket read, a large write the
// peer takes in small pieces, and a peer that closes its socket without a close_notify. The
// harness (tls_test_support.h) runs every scenario inside one Poller::run() on the test thread,
// ended from a completion, with a deadline so that a bug fails the test instead of hanging the
// suite; each test runs on both kernel interfaces (where the kernel refuses io_uring, its cases
// are skipped).
#include "floodgate/net/stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "floodgate/net/io_mode.h"
#include "floodgate/net/poller.h"
#include "stream_test_support.h"
#include "tls_test_support.h"

namespace floodgate::net {
namespace {

using boost::system::error_code;
using Handshake = StreamOwner::Handshake;
using testing::kRequest;
using testing::kResponse;
using testing::kUntilTheEnd;
using testing::pattern;
using testing::Peer;
using testing::shrink_buffers;
using testing::socket_buffer;
using testing::socket_pair;
using testing::Step;

// A connection cut in two, with a relay between the halves that passes each side's bytes on a
// few at a time, and the next few only once the receiving stream has read the last ones: every
// record, its 5-byte header included, reaches the engine over several socket reads. The relay
// runs on every turn of the loop (it queues itself on the ready list again) and never waits.
class Dribbler final : public PollTarget {
 public:
  static constexpr std::size_t kPiece = 3;

  // One direction: what the relay takes from `from` goes out on `to`, towards the stream on
  // `receiver` (whose socket the relay only looks at).
  struct Lane {
    int from = -1;
    int to = -1;
    int receiver = -1;
    std::string held;        // taken from the sender, not passed on yet
    std::size_t pieces = 0;  // passed on, each read on its own
  };

  // `client_fd` and `server_fd`: the streams' sockets; `relay_client` and `relay_server`: the
  // other ends of their pairs, which the relay owns from now on.
  Dribbler(Poller& poller, int client_fd, int relay_client, int server_fd, int relay_server)
      : to_server{.from = relay_client, .to = relay_server, .receiver = server_fd, .held = {}},
        to_client{.from = relay_server, .to = relay_client, .receiver = client_fd, .held = {}},
        poller_(poller) {
    poller_.defer(*this);
  }
  ~Dribbler() {
    ::close(to_server.from);
    ::close(to_client.from);
  }
  Dribbler(const Dribbler&) = delete;
  Dribbler& operator=(const Dribbler&) = delete;

  void on_poll(uint32_t /*events*/) override {}
  void on_ready() override {
    step(to_server);
    step(to_client);
    poller_.defer(*this);
  }

  Lane to_server;
  Lane to_client;

 private:
  // Bytes waiting in `fd`'s socket (SIOCINQ); SIZE_MAX when the kernel will not say.
  static std::size_t unread(int fd) {
    int queued = 0;
    if (::ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) return SIZE_MAX;
    return static_cast<std::size_t>(queued);
  }
  static void step(Lane& lane) {
    std::array<char, 4096> buf{};
    const ssize_t n = ::recv(lane.from, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) lane.held.append(buf.data(), static_cast<std::size_t>(n));
    if (lane.held.empty() || unread(lane.receiver) != 0) return;
    const std::size_t len = std::min(kPiece, lane.held.size());
    const ssize_t sent = ::send(lane.to, lane.held.data(), len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent <= 0) return;
    lane.held.erase(0, static_cast<std::size_t>(sent));
    ++lane.pieces;
  }

  Poller& poller_;
};

class TlsRecordTest : public testing::TlsLoopTest {
 protected:
  // A client and a server stream with a Dribbler between them.
  struct Relayed {
    Peer& client;
    Peer& server;
    const Dribbler& relay;
  };
  Relayed relayed() {
    const auto [client_fd, relay_client] = socket_pair();
    const auto [server_fd, relay_server] = socket_pair();
    const Dribbler& relay =
        relay_.emplace(poller(), client_fd, relay_client, server_fd, relay_server);
    return {tls_client(client_fd), tls_server(server_fd), relay};
  }

 private:
  std::optional<Dribbler> relay_;  // destroyed after the poller (LoopTest::TearDown)
};

TEST_P(TlsRecordTest, RecordsReadAFewBytesAtATimeStillCarryTheHandshakeAndTheExchangeIntact) {
  const Relayed ends = relayed();
  Peer& client = ends.client;
  Peer& server = ends.server;
  const Dribbler& relay = ends.relay;
  const Step over = [&](Peer& /*peer*/) {
    if (client.read_done && server.written) stop();
  };
  server.read_until(kRequest.size(), [&](Peer& s) { s.write(std::string(kResponse), over); });
  client.write(std::string(kRequest), [&](Peer& c) { c.read_until(kResponse.size(), over); });
  run();
  EXPECT_EQ(client.handshake, Handshake::ok);
  EXPECT_EQ(server.handshake, Handshake::ok);
  EXPECT_FALSE(client.write_error) << client.write_error.message();
  EXPECT_EQ(client.written, kRequest.size());
  EXPECT_FALSE(server.read_error) << server.read_error.message();
  EXPECT_EQ(server.received, kRequest);
  EXPECT_FALSE(server.write_error) << server.write_error.message();
  EXPECT_EQ(server.written, kResponse.size());
  EXPECT_FALSE(client.read_error) << client.read_error.message();
  EXPECT_EQ(client.received, kResponse);
  // Both directions went through the relay, a few bytes per socket read: more reads than the
  // request's (or the response's) record alone would have taken.
  EXPECT_GT(relay.to_server.pieces, kRequest.size() / Dribbler::kPiece);
  EXPECT_GT(relay.to_client.pieces, kResponse.size() / Dribbler::kPiece);
}

TEST_P(TlsRecordTest, AWriteThePeerTakesInSmallPiecesCompletesWithItsFullLength) {
  const auto [client_fd, server_fd] = socket_pair();
  shrink_buffers(client_fd);
  shrink_buffers(server_fd);
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  // A response to a client that reads 1000 bytes at a time; each 16 KiB record is more than
  // the server's socket holds, so the kernel takes its ciphertext over several sends.
  const std::string payload = pattern(std::size_t{256} * 1024);
  ASSERT_LT(socket_buffer(server_fd, SO_SNDBUF), 16 * 1024);
  client.read_cap = 1000;
  const Step over = [&](Peer& /*peer*/) {
    if (server.write_error || client.read_error || (server.written && client.read_done)) stop();
  };
  server.read_until(kRequest.size(), [&](Peer& s) { s.write(payload, over); });
  client.write(std::string(kRequest), [&](Peer& c) { c.read_until(payload.size(), over); });
  run();
  EXPECT_FALSE(server.write_error) << server.write_error.message();
  EXPECT_EQ(server.written, payload.size());
  EXPECT_FALSE(client.read_error) << client.read_error.message();
  EXPECT_EQ(client.received.size(), payload.size());
  EXPECT_TRUE(client.received == payload) << "the bytes arrived changed or out of order";
  EXPECT_GE(client.reads.size(), payload.size() / client.read_cap);
  EXPECT_TRUE(std::all_of(client.reads.begin(), client.reads.end(),
                          [&](std::size_t n) { return n <= client.read_cap; }));
}

// tls_stream.cpp reads a peer that closes its socket without a close_notify (truncation) as
// EOF, the same as a close_notify: HTTP frames its own messages, so the layer above tells a
// cut message from a whole one.
TEST_P(TlsRecordTest, APeerClosingWithoutCloseNotifyEndsTheReadWithEofAfterItsData) {
  const auto [client_fd, server_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  // The server answers, then closes its socket at once: no close_notify goes out.
  server.read_until(kRequest.size(), [](Peer& s) {
    s.write(std::string(kResponse), [](Peer& done) { done.stream.close(); });
  });
  client.write(std::string(kRequest), [this](Peer& c) { c.read_until(kUntilTheEnd, stop_step()); });
  run();
  EXPECT_EQ(client.handshake, Handshake::ok);
  EXPECT_EQ(server.written, kResponse.size());
  EXPECT_FALSE(server.stream.is_open());
  EXPECT_EQ(client.received, kResponse);
  const error_code eof = boost::asio::error::eof;
  EXPECT_EQ(client.read_error, eof) << client.read_error.message();
  EXPECT_EQ(client.read_error_bytes, 0U);
}

// A connected pair of non-blocking TCP sockets on 127.0.0.1 (a reset needs TCP).
std::array<int, 2> tcp_pair() {
  std::array<int, 2> fds{-1, -1};
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(listener, 1), 0);
  EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  fds[0] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(::connect(fds[0], reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
  fds[1] = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  for (const int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fds;
}

// A reset is not an end: a body delimited by the connection's close must not be taken as
// whole when the peer's TCP connection was reset instead (with SSL_OP_IGNORE_UNEXPECTED_EOF,
// OpenSSL reports both as the end of the stream; the engine knows which it saw).
TEST_P(TlsRecordTest, APeerWhoseConnectionIsResetEndsTheReadWithTheResetNotEof) {
  const auto [client_fd, server_fd] = tcp_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  server.read_until(kRequest.size(), [](Peer& s) { s.write(std::string(kResponse), nullptr); });
  client.write(std::string(kRequest), [this, &server, fd = server_fd](Peer& c) {
    c.read_until(kResponse.size(), [this, &server, fd](Peer& has_it) {
      // The client has the whole response; now the server's socket is reset (no close_notify,
      // no FIN: SO_LINGER with a zero timeout).
      const linger reset{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      server.stream.close();
      has_it.read_until(kUntilTheEnd, stop_step());
    });
  });
  run();
  EXPECT_EQ(client.handshake, Handshake::ok);
  EXPECT_EQ(client.received, kResponse);
  const error_code eof = boost::asio::error::eof;
  EXPECT_TRUE(client.read_error);
  EXPECT_NE(client.read_error, eof) << client.read_error.message();
}

INSTANTIATE_TEST_SUITE_P(BothInterfaces, TlsRecordTest,
                         ::testing::Values(IoMode::epoll, IoMode::io_uring),
                         testing::interface_name);

}  // namespace
}  // namespace floodgate::net
