// The TLS engine of a Stream (src/net/tls_stream.cpp): a client and a server session driven
// through real Streams over a socket pair, with floodgate's own TlsServerConfig and
// TlsClientConfig around a certificate made in-process. Every scenario runs inside one
// Poller::run() on the test thread, ends by stopping the loop from a completion, and has a
// deadline (a timerfd on the loop) so that a bug fails the test instead of hanging the suite.
// Run on both kernel interfaces (where the kernel refuses io_uring, its cases are skipped).
#include "floodgate/net/stream.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "floodgate/core/endpoint.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/tls.h"
#include "floodgate/net/tls_params.h"

namespace floodgate::net {
namespace {

using boost::system::error_code;
using Handshake = StreamOwner::Handshake;
using namespace std::string_view_literals;

// A directory of its own under the system's temporary directory, removed with its files.
class TempDir {
 public:
  TempDir() {
    std::string name = (std::filesystem::temp_directory_path() / "floodgate-tls-XXXXXX").string();
    if (::mkdtemp(name.data()) != nullptr) path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

bool write_pem(const std::filesystem::path& path, const std::function<int(FILE*)>& write) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const bool written = write(f) == 1;
  return std::fclose(f) == 0 && written;
}

bool add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);  // self-signed: its own issuer
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  const bool added = ext != nullptr && X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

// A self-signed certificate for "localhost" (subjectAltName DNS:localhost) with an EC P-256
// key, as PEM files; it is also the client's trust anchor. An empty string, or what failed.
std::string write_self_signed(const std::filesystem::path& cert_path,
                              const std::filesystem::path& key_path) {
  const std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), &EVP_PKEY_free);
  if (!key) return "EVP_PKEY_Q_keygen";
  const std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
  X509* x = cert.get();
  if (x == nullptr || X509_set_version(x, X509_VERSION_3) != 1 ||
      ASN1_INTEGER_set(X509_get_serialNumber(x), 1) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(x), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(x), 24L * 3600) == nullptr ||
      X509_set_pubkey(x, key.get()) != 1) {
    return "X509 fields";
  }
  X509_NAME* name = X509_get_subject_name(x);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("localhost"), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(x, name) != 1) {
    return "X509 name";
  }
  // What `openssl req -x509` writes, plus the name the client verifies.
  if (!add_extension(x, NID_basic_constraints, "critical,CA:TRUE") ||
      !add_extension(x, NID_subject_key_identifier, "hash") ||
      !add_extension(x, NID_subject_alt_name, "DNS:localhost")) {
    return "X509 extensions";
  }
  if (X509_sign(x, key.get(), EVP_sha256()) <= 0) return "X509_sign";
  if (!write_pem(cert_path, [x](FILE* f) { return PEM_write_X509(f, x); })) return "cert PEM";
  if (!write_pem(key_path, [&key](FILE* f) {
        return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
      })) {
    return "key PEM";
  }
  return {};
}

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
constexpr std::size_t kUntilTheEnd = std::numeric_limits<std::size_t>::max();

// One end of a connection: a stream and the owner of its completions, recording what they
// reported.
class Peer final : public StreamOwner {
 public:
  explicit Peer(Poller& poller) : stream(poller, *this) {}
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  void hold() noexcept override {}
  void release() noexcept override {}
  void on_tls_handshake(Handshake result) noexcept override {
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
  std::string received;
  bool read_done = false;
  error_code read_error;             // what ended the reading early (EOF or a failure)
  std::size_t read_error_bytes = 0;  // the byte count that read reported
  std::optional<std::size_t> written;
  error_code write_error;
  std::optional<Handshake> handshake;
  bool handshake_in_heavy_step = false;  // the handshake ended inside Stream::on_heavy()

 private:
  void read_next() { stream.read_some(buffer_.data(), buffer_.size(), &Peer::on_read); }
  static void on_read(StreamOwner& owner, const error_code& ec, std::size_t n) {
    auto& self = static_cast<Peer&>(owner);
    if (ec) {
      self.read_error = ec;
      self.read_error_bytes = n;
    } else {
      self.received.append(self.buffer_.data(), n);
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

  std::array<char, std::size_t{64} * 1024> buffer_{};
  std::size_t read_total_ = 0;
  Step after_read_;
  std::string out_;
  Step after_write_;
};

// The far end of a stream's socket in plain bytes: it collects what arrives whenever the loop
// reports it readable, and may hang up as soon as anything came.
class RawPeer final : public PollTarget {
 public:
  RawPeer(Poller& poller, int fd) : poller_(poller), fd_(fd) {
    EXPECT_EQ(poller_.add(fd_, *this), 0);
  }
  ~RawPeer() { close(); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  void close() {
    if (fd_ < 0) return;
    poller_.remove(*this);
    ::close(std::exchange(fd_, -1));
  }
  // Takes what has arrived so far (also after the loop ended).
  void drain() {
    std::array<char, 4096> buf{};
    ssize_t n = 0;
    while (fd_ >= 0 && (n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT)) > 0) {
      received.append(buf.data(), static_cast<std::size_t>(n));
    }
  }
  void on_poll(uint32_t /*events*/) override {
    drain();
    if (hang_up_on_first_bytes && !received.empty()) close();
  }
  void on_ready() override {}

  std::string received;
  bool hang_up_on_first_bytes = false;

 private:
  Poller& poller_;
  int fd_;
};

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

// Ordinary work on every turn of the loop: a target that queues itself on the ready list again
// each time it runs, as busy established connections keep the loop doing. Stops the loop after
// `kBound` runs, when the scenario it runs beside has failed to end.
class Busy final : public PollTarget {
 public:
  static constexpr int kBound = 100'000;
  explicit Busy(Poller& poller) : poller_(poller) { poller_.defer(*this); }
  void on_poll(uint32_t /*events*/) override {}
  void on_ready() override {
    if (++runs < kBound) return poller_.defer(*this);
    poller_.stop();
  }
  int runs = 0;

 private:
  Poller& poller_;
};

class TlsStreamTest : public ::testing::TestWithParam<IoMode> {
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
    ASSERT_FALSE(dir_.path().empty()) << "no temporary directory";
    const std::filesystem::path cert = dir_.path() / "localhost.pem";
    const std::filesystem::path key = dir_.path() / "localhost.key";
    const std::string failed = write_self_signed(cert, key);
    ASSERT_EQ(failed, "") << "making the test certificate failed at " << failed;
    const Endpoint at{.host = "127.0.0.1", .port = 8443, .text = "127.0.0.1:8443"};
    TlsServerConfig::Error server_error;
    TlsCertParams entry;
    entry.listen = {at};
    entry.certificate = cert.string();
    entry.private_key = key.string();
    server_config_ = TlsServerConfig::build({entry}, server_error);
    ASSERT_NE(server_config_, nullptr) << server_error.text();
    listener_ = server_config_->listener(at.text);
    ASSERT_NE(listener_, nullptr);
    TlsClientConfig::Error client_error;
    TlsClientParams upstream;
    upstream.enabled = true;
    upstream.ca_file = cert.string();
    client_config_ = TlsClientConfig::build(upstream, client_error);
    ASSERT_NE(client_config_, nullptr) << client_error.key << ": " << client_error.message;
    ERR_clear_error();  // SSL_get_error() reads the thread's queue: nothing may be left in it
  }

  void TearDown() override {
    // The sockets leave the loop before it goes (io_uring: their registrations); the objects
    // outlive it, since its lists may still name them.
    for (const auto& peer : peers_) peer->stream.close();
    for (const auto& raw : raws_) raw->close();
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

  // A connected pair of non-blocking sockets.
  static std::array<int, 2> socket_pair() {
    std::array<int, 2> fds{-1, -1};
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds.data()), 0);
    return fds;
  }
  static void send_plain(int fd, std::string_view bytes) {
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // A stream on `fd` under a client session for "localhost", as Attempt makes one.
  Peer& tls_client(int fd) {
    return with_session(fd, std::make_unique<TlsSession>(client_config_, "localhost"));
  }
  // A stream on `fd` under a server session of the listener, as ClientConn makes one.
  Peer& tls_server(int fd) {
    return with_session(fd, std::make_unique<TlsSession>(server_config_, *listener_));
  }
  RawPeer& raw_peer(int fd) { return *raws_.emplace_back(std::make_unique<RawPeer>(*poller_, fd)); }
  Busy& busy_work() { return busy_.emplace(*poller_); }

 private:
  Peer& with_session(int fd, std::unique_ptr<TlsSession> session) {
    Peer& peer = *peers_.emplace_back(std::make_unique<Peer>(*poller_));
    EXPECT_EQ(peer.stream.adopt(fd), 0);
    EXPECT_TRUE(session->ok());
    peer.stream.start_tls(std::move(session));
    return peer;
  }

  // Declared before the poller, so destroyed after it: its lists may still name them.
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<RawPeer>> raws_;
  std::optional<Deadline> deadline_;
  std::optional<Busy> busy_;
  boost::asio::io_context io_;
  std::optional<Poller> poller_;
  TempDir dir_;
  std::shared_ptr<const TlsServerConfig> server_config_;
  const TlsListener* listener_ = nullptr;
  std::shared_ptr<const TlsClientConfig> client_config_;
};

constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
constexpr std::string_view kResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

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

// Bytes that look random, so that a lost, doubled or reordered record cannot go unseen.
std::string pattern(std::size_t size) {
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

int socket_buffer(int fd, int option) {
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, option, &bytes, &len), 0);
  return bytes;
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
                         [](const ::testing::TestParamInfo<IoMode>& info) {
                           return std::string(info.param == IoMode::epoll ? "epoll" : "io_uring");
                         });

}  // namespace
}  // namespace floodgate::net
