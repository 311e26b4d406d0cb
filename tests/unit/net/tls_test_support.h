// The TLS side of the Stream tests' harness (stream_test_support.h): floodgate's own
// TlsServerConfig and TlsClientConfig around a self-signed certificate made in-process, streams
// under a client or a server session as Attempt and ClientConn make them, and the plain-bytes
// targets the TLS scenarios put beside them.
//
// Thread-safety: the test thread only (it is the loop's thread).
#pragma once

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "floodgate/core/endpoint.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/stream.h"
#include "floodgate/net/tls.h"
#include "floodgate/net/tls_params.h"
#include "stream_test_support.h"

namespace floodgate::net::testing {

inline constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
inline constexpr std::string_view kResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

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

inline bool write_pem(const std::filesystem::path& path, const std::function<int(FILE*)>& write) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const bool written = write(f) == 1;
  return std::fclose(f) == 0 && written;
}

inline bool add_extension(X509* cert, int nid, const char* value) {
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
inline std::string write_self_signed(const std::filesystem::path& cert_path,
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

// LoopTest with the TLS configurations of both sides: a listener's certificates and a pool's
// client context that trusts them.
class TlsLoopTest : public LoopTest {
 protected:
  void SetUp() override {
    LoopTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
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
    for (const auto& raw : raws_) raw->close();  // io_uring: their registrations
    LoopTest::TearDown();
  }

  // A stream on `fd` under a client session for "localhost", as Attempt makes one.
  Peer& tls_client(int fd) {
    return with_session(fd, std::make_unique<TlsSession>(client_config_, "localhost"));
  }
  // A stream on `fd` under a server session of the listener, as ClientConn makes one.
  Peer& tls_server(int fd) {
    return with_session(fd, std::make_unique<TlsSession>(server_config_, *listener_));
  }
  RawPeer& raw_peer(int fd) { return *raws_.emplace_back(std::make_unique<RawPeer>(poller(), fd)); }
  Busy& busy_work() { return busy_.emplace(poller()); }

 private:
  Peer& with_session(int fd, std::unique_ptr<TlsSession> session) {
    Peer& peer = plain_stream(fd);
    EXPECT_TRUE(session->ok());
    peer.stream.start_tls(std::move(session));
    return peer;
  }

  // Destroyed after the poller (LoopTest::TearDown), whose lists may still name them.
  std::vector<std::unique_ptr<RawPeer>> raws_;
  std::optional<Busy> busy_;
  TempDir dir_;
  std::shared_ptr<const TlsServerConfig> server_config_;
  const TlsListener* listener_ = nullptr;
  std::shared_ptr<const TlsClientConfig> client_config_;
};

}  // namespace floodgate::net::testing
