// The TLS engine of a Stream (src/net/tls_stream.cpp): a client and a server session driven
// through real Streams over a socket pair, with floodgate's own TlsServerConfig and
// TlsClientConfig around a certificate made in-process: the handshake and an exchange, a large
// write, plain HTTP to a TLS listener, a peer closing mid-handshake, close_notify, and the
// server's handshake on the loop's heavy list. The harness (tls_test_support.h) runs every
// scenario inside one Poller::run() on the test thread, ended from a completion, with a
// deadline so that a bug fails the test instead of hanging the suite; each test runs on both
// kernel interfaces (where the kernel refuses io_uring, its cases are skipped).
#include "floodgate/net/stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "floodgate/net/io_mode.h"
#include "floodgate/net/tls.h"
#include "stream_test_support.h"
#include "tls_test_support.h"

namespace floodgate::net {
namespace {

using boost::system::error_code;
using Handshake = StreamOwner::Handshake;
using testing::Busy;
using testing::kRequest;
using testing::kResponse;
using testing::kUntilTheEnd;
using testing::pattern;
using testing::Peer;
using testing::RawPeer;
using testing::send_plain;
using testing::socket_buffer;
using testing::socket_pair;
using testing::Step;
using namespace std::string_view_literals;

class TlsStreamTest : public testing::TlsLoopTest {};

TEST_P(TlsStreamTest, AClientAndAServerCompleteTheHandshakeAndExchangeARequestAndAResponse) {
  const auto [client_fd, server_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  const Step over = [&](Peer& /*peer*/) {
    if (client.read_done && server.written) stop();
  };
  server.read_until(kRequest.size(), [&](Peer& s) { s.write(std::string(kResponse), over); });
  client.write(std::string(kRequest), [&](Peer& c) { c.read_until(kResponse.size(), over); });
  run();
  EXPECT_EQ(client.handshake, Handshake::ok);
  EXPECT_EQ(server.handshake, Handshake::ok);
  EXPECT_EQ(client.written, kRequest.size());
  EXPECT_FALSE(client.write_error) << client.write_error.message();
  EXPECT_EQ(server.received, kRequest);
  EXPECT_EQ(server.written, kResponse.size());
  EXPECT_EQ(client.received, kResponse);
  EXPECT_FALSE(client.read_error) << client.read_error.message();
}

TEST_P(TlsStreamTest, ALargeWriteArrivesIntactAcrossManyRecordsAndCompletesWithItsLengthOnceSent) {
  const auto [client_fd, server_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  const std::string payload = pattern(std::size_t{4} << 20);  // 256 records of 16 KiB
  std::size_t received_at_completion = 0;
  const Step over = [&](Peer& /*peer*/) {
    if (client.written && server.read_done) stop();
  };
  server.read_until(payload.size(), over);
  client.write(payload, [&](Peer& c) {
    received_at_completion = server.received.size();
    over(c);
  });
  // What can still be on its way when every ciphertext byte is on the socket: the socket's
  // buffers (a Unix stream socket may go half a send buffer over), the reader's BIO pair and
  // input buffer, and the record OpenSSL is decrypting; generously.
  const std::size_t in_flight = 2 * static_cast<std::size_t>(socket_buffer(client_fd, SO_SNDBUF) +
                                                             socket_buffer(server_fd, SO_RCVBUF)) +
                                std::size_t{256} * 1024;
  ASSERT_LT(in_flight, payload.size());
  run();
  EXPECT_EQ(client.written, payload.size());
  EXPECT_FALSE(client.write_error) << client.write_error.message();
  EXPECT_FALSE(server.read_error) << server.read_error.message();
  EXPECT_EQ(server.received.size(), payload.size());
  EXPECT_TRUE(server.received == payload) << "the bytes arrived changed or out of order";
  // The completion came once the bytes were sent, not when the write was taken.
  EXPECT_GE(received_at_completion, payload.size() - in_flight);
}

TEST_P(TlsStreamTest, PlainHttpToAServerFailsItsHandshakeAndGetsNoPlaintextBack) {
  const auto [server_fd, peer_fd] = socket_pair();
  Peer& server = tls_server(server_fd);
  RawPeer& peer = raw_peer(peer_fd);
  send_plain(peer_fd, kRequest);
  server.read_until(kUntilTheEnd, stop_step());
  run();
  EXPECT_TRUE(server.read_done);
  EXPECT_TRUE(server.read_error) << "a plaintext request read as TLS";
  EXPECT_TRUE(server.read_error.category() == tls_category()) << server.read_error.message();
  EXPECT_EQ(server.read_error_bytes, 0U);
  EXPECT_EQ(server.handshake, Handshake::failed);
  peer.drain();
  // Nothing, or a TLS alert record: never an answer in the clear.
  if (!peer.received.empty()) {
    EXPECT_EQ(peer.received.front(), '\x15');
  }
  EXPECT_EQ(peer.received.find("HTTP"), std::string::npos) << peer.received;
}

TEST_P(TlsStreamTest, APeerClosingMidHandshakeFailsTheServersPendingRead) {
  const auto [server_fd, peer_fd] = socket_pair();
  Peer& server = tls_server(server_fd);
  // A handshake record announcing a 512-byte ClientHello, and only its first bytes.
  send_plain(peer_fd, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"sv);
  ::close(peer_fd);
  server.read_until(kUntilTheEnd, stop_step());
  run();
  EXPECT_TRUE(server.read_done);
  EXPECT_TRUE(server.read_error) << "a cut handshake read as data";
  EXPECT_EQ(server.read_error_bytes, 0U);
  EXPECT_EQ(server.handshake, Handshake::closed);
}

TEST_P(TlsStreamTest, APeerClosingMidHandshakeFailsTheClientsPendingReadAndWrite) {
  const auto [client_fd, peer_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  RawPeer& peer = raw_peer(peer_fd);
  peer.hang_up_on_first_bytes = true;  // takes the ClientHello, then closes
  const Step over = [&](Peer& c) {
    if (c.written && c.read_done) stop();
  };
  client.write(std::string(kRequest), over);
  client.read_until(kUntilTheEnd, over);
  run();
  ASSERT_FALSE(peer.received.empty()) << "the ClientHello never left";
  EXPECT_EQ(peer.received.front(), '\x16');  // a handshake record
  EXPECT_TRUE(client.write_error);
  EXPECT_EQ(client.written, 0U);
  EXPECT_TRUE(client.read_error);
  EXPECT_EQ(client.read_error_bytes, 0U);
  EXPECT_EQ(client.handshake, Handshake::closed);
}

TEST_P(TlsStreamTest, ACloseNotifyEndsThePeersReadWithEofAsInTheClear) {
  const auto [client_fd, server_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  // The client says "bye" and closes its side; the server reads to the end, then closes its
  // own, which ends the client's read.
  server.read_until(kUntilTheEnd, [](Peer& s) { s.stream.shutdown_send(); });
  client.write("bye", [this](Peer& c) {
    c.stream.shutdown_send();
    c.read_until(kUntilTheEnd, stop_step());
  });
  run();
  const error_code eof = boost::asio::error::eof;  // what a plain stream reports (stream.cpp)
  EXPECT_EQ(server.received, "bye");
  EXPECT_EQ(server.read_error, eof);
  EXPECT_EQ(server.read_error_bytes, 0U);
  EXPECT_EQ(client.received, "");
  EXPECT_EQ(client.read_error, eof);
  EXPECT_EQ(client.read_error_bytes, 0U);
}

TEST_P(TlsStreamTest, AServerHandshakeRunsOnTheHeavyListBesideOrdinaryReadyWork) {
  const auto [client_fd, server_fd] = socket_pair();
  Peer& client = tls_client(client_fd);
  Peer& server = tls_server(server_fd);
  const Busy& busy = busy_work();  // on the ready list on every turn
  const Step over = [&](Peer& /*peer*/) {
    if (client.read_done && server.written) stop();
  };
  server.read_until(kRequest.size(), [&](Peer& s) { s.write(std::string(kResponse), over); });
  client.write(std::string(kRequest), [&](Peer& c) { c.read_until(kResponse.size(), over); });
  run();
  EXPECT_LT(busy.runs, Busy::kBound) << "the ordinary work never let the handshake finish";
  EXPECT_GT(busy.runs, 0);
  EXPECT_EQ(server.received, kRequest);
  EXPECT_EQ(client.received, kResponse);
  EXPECT_EQ(server.handshake, Handshake::ok);
  EXPECT_EQ(client.handshake, Handshake::ok);
  // The server's steps with the client's bytes ran as heavy work, and its handshake ended
  // there; the client's (a backend handshake) never go on the list.
  EXPECT_GE(server.stream.heavy_steps, 1);
  EXPECT_TRUE(server.handshake_in_heavy_step);
  EXPECT_EQ(client.stream.heavy_steps, 0);
  EXPECT_FALSE(client.handshake_in_heavy_step);
}

INSTANTIATE_TEST_SUITE_P(BothInterfaces, TlsStreamTest,
                         ::testing::Values(IoMode::epoll, IoMode::io_uring),
                         testing::interface_name);

}  // namespace
}  // namespace floodgate::net
