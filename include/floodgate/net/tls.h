// TLS on floodgate's own transport (OpenSSL 3). The contexts are built on the main thread from
// the configuration, once per generation, and shared read-only by every reactor: one SSL_CTX
// per certificate, chosen by SNI when the ClientHello arrives. A connection's session runs
// through a BIO pair, so the SSL engine never touches the socket: the Stream (stream.h) moves
// ciphertext between the socket and the pair with its usual reads and writes, and the
// reactor's io_uring / epoll loop still does all socket I/O. Nothing here blocks and nothing
// on the request path takes a lock of floodgate's (OpenSSL's own reference counts are atomic).
//
// Thread-safety: TlsServerConfig is immutable once built (any thread); a TlsSession belongs to
// one stream on one reactor.
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/net/tls_params.h"

namespace floodgate::net {

// The certificates one listener offers, by the name the client asks for (SNI).
struct TlsListener;

// The server side of a generation: every TLS listener's certificates.
class TlsServerConfig {
 public:
  // Why an entry cannot be used: its index in [[server.tls]], the key ("certificate",
  // "private_key", "ciphers", "server_names") and a message naming the file and OpenSSL's
  // reason.
  struct Error {
    std::size_t entry = 0;
    std::string key;
    std::string message;
    std::string text() const;  // "server.tls[0].certificate: ..."
  };
  // Reads every certificate and key and builds the contexts; nullptr and `error` when an entry
  // cannot be used. `early_data`: accept TLS 1.3 early data (resilience.protocol.allow_0rtt) on
  // the entries with session tickets.
  static std::shared_ptr<const TlsServerConfig> build(const std::vector<TlsCertParams>& entries,
                                                      Error& error, bool early_data = false);
  ~TlsServerConfig();
  TlsServerConfig(const TlsServerConfig&) = delete;
  TlsServerConfig& operator=(const TlsServerConfig&) = delete;

  // The listener whose address was configured as `key`, or nullptr (a plain listener).
  const TlsListener* listener(std::string_view key) const noexcept;

  struct Cert;

 private:
  TlsServerConfig() = default;
  std::vector<std::unique_ptr<Cert>> certs_;
  std::vector<std::unique_ptr<TlsListener>> listeners_;
};

// The client side of one pool of one generation ([upstreams.tls]): one SSL_CTX with the CA
// store, the verification mode and the optional client certificate, shared by every reactor's
// connections to that pool's backends.
class TlsClientConfig {
 public:
  // Why the table cannot be used: the key ("ca_file", "certificate", "private_key") and a
  // message naming the file and OpenSSL's reason.
  struct Error {
    std::string key;
    std::string message;
  };
  static std::shared_ptr<const TlsClientConfig> build(const TlsClientParams& params, Error& error);
  ~TlsClientConfig();
  TlsClientConfig(const TlsClientConfig&) = delete;
  TlsClientConfig& operator=(const TlsClientConfig&) = delete;

  const TlsClientParams& params() const noexcept { return params_; }
  SSL_CTX* ctx() const noexcept { return ctx_; }

 private:
  TlsClientConfig() = default;
  TlsClientParams params_;
  SSL_CTX* ctx_ = nullptr;
};

// A client SSL object for a connection to a backend whose host is `host`, in connect state and
// without a BIO: SNI and the verified name are config.params().server_name, else `host` (an IP
// literal is verified against the certificate's IP addresses and sends no SNI). TlsSession
// puts it on a BIO pair; the health checker hands it to Boost.Asio's ssl::stream, which owns
// it from then on. nullptr when OpenSSL is out of memory.
SSL* new_client_ssl(const TlsClientConfig& config, std::string_view host);

// The category of a TLS failure's error_code: the value is OpenSSL's reason code (SSL library),
// the message its text ("wrong version number", "http request", "certificate verify failed").
const boost::system::error_category& tls_category() noexcept;

// What a finished handshake agreed on, for the access log and the metrics.
struct TlsFacts {
  std::string_view version;  // "TLSv1.2", "TLSv1.3"
  std::string_view cipher;   // "TLS_AES_128_GCM_SHA256"
  bool resumed = false;      // an abbreviated handshake (a session ticket)
};

// One connection's TLS state: the SSL object and the BIO pair between it and the stream.
class TlsSession {
 public:
  // The server end of a connection accepted on `listener` of `config` (kept alive while the
  // session lives: the SNI callback reads it during the handshake).
  TlsSession(std::shared_ptr<const TlsServerConfig> config, const TlsListener& listener);
  // The client end of a connection to a backend whose host is `host` (a name or an IP
  // literal): SNI and the verified name are params().server_name, else `host`; an IP literal
  // is verified against the certificate's IP addresses and sends no SNI.
  TlsSession(std::shared_ptr<const TlsClientConfig> config, std::string_view host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  bool ok() const noexcept { return ssl_ != nullptr; }
  SSL* ssl() const noexcept { return ssl_; }
  BIO* net() const noexcept { return net_; }  // floodgate's end of the pair
  TlsFacts facts() const noexcept;
  // "1.2" or "1.3" once the handshake finished, else "unknown" (a metric label).
  std::string_view version_label() const noexcept;
  // ALPN settled on "h2": the client speaks HTTP/2.
  bool alpn_h2() const noexcept;
  // A client session's configuration (nullptr on the server side): a pooled connection is
  // reused only under the configuration it was made with.
  const TlsClientConfig* client() const noexcept { return client_.get(); }
  // Why the peer's certificate was refused ("certificate has expired", "hostname mismatch"),
  // or empty when verification did not fail.
  std::string_view verify_failure() const noexcept;

  // Ciphertext read from the socket lands here, then goes into the pair.
  static constexpr std::size_t kInputBytes = std::size_t{16} * 1024;
  std::array<char, kInputBytes> input;  // NOLINT(cppcoreguidelines-pro-type-member-init)

  bool established = false;  // the handshake finished
  // TLS 1.3 early data (server side, resilience.protocol.allow_0rtt): `early_phase` while the
  // engine reads the client's early data (SSL_read_early_data) and answers it as 0.5-RTT data
  // (SSL_write_early_data), until the client's EndOfEarlyData; `read_early` for the read just
  // delivered when its bytes came from early data; `early_data` once any did.
  bool early_phase = false;
  bool read_early = false;
  bool early_data = false;
  bool failed = false;  // a fatal error: nothing more is read or written
  // The peer's close_notify arrived. Under SSL_OP_IGNORE_UNEXPECTED_EOF OpenSSL reports the end
  // of the socket as one too; the stream tells a reset from the end of the data with this.
  bool close_notify_received = false;
  bool handshake_reported = false;
  // The server's ClientHello gate: the ClientHello callback pauses the handshake once the
  // whole ClientHello is in (before any signature or key exchange), the stream asks its owner
  // (StreamOwner::on_tls_hello) and sets `hello` to what it said; a refused hello fails the
  // handshake with an internal_error alert.
  enum class Hello : uint8_t { unasked, admitted, refused };
  Hello hello = Hello::unasked;
  std::chrono::steady_clock::time_point started{};

 private:
  std::shared_ptr<const TlsServerConfig> config_;
  std::shared_ptr<const TlsClientConfig> client_;
  SSL* ssl_ = nullptr;
  BIO* net_ = nullptr;
};

}  // namespace floodgate::net
