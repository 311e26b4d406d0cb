// The parameters of TLS on the listeners ([[server.tls]] in the configuration) and to a pool's
// backends ([upstreams.tls]): plain values, filled by config/ and turned into OpenSSL contexts
// by TlsServerConfig and TlsClientConfig (tls.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/endpoint.h"

namespace floodgate::net {

enum class TlsVersion : uint8_t { tls1_2, tls1_3 };

// The TLS 1.2 cipher suites offered when `ciphers` is empty: Mozilla's "intermediate" list
// (ECDHE with AES-GCM or ChaCha20-Poly1305, ECDSA certificates first). TLS 1.3 suites are
// OpenSSL's defaults (AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305).
inline constexpr std::string_view kDefaultTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// One [[server.tls]] entry: a certificate and its key, offered on some listeners.
struct TlsCertParams {
  std::vector<Endpoint> listen;           // the listeners that speak TLS with it
  std::string certificate;                // PEM chain, leaf first
  std::string private_key;                // PEM
  std::vector<std::string> server_names;  // lower case; "*.a.b" matches one label; empty = default
  TlsVersion min_version = TlsVersion::tls1_2;
  std::string ciphers;  // TLS 1.2 suites in OpenSSL's syntax; empty = kDefaultTls12Ciphers
  bool session_tickets = true;
  // The protocols offered by ALPN, in order of preference: "h2" and "http/1.1", each at most
  // once, at least one.
  std::vector<std::string> alpn{"h2", "http/1.1"};
  bool operator==(const TlsCertParams&) const = default;
};

// [upstreams.tls]: TLS to the backends of one pool (docs/configuration.md, "[upstreams.tls]").
struct TlsClientParams {
  bool enabled = false;
  std::string ca_file;      // PEM bundle; empty = the system's store (OpenSSL's default paths)
  bool verify = true;       // the chain against ca_file and the name against server_name
  std::string server_name;  // SNI and the name verified; empty = each server's own host
  std::string certificate;  // a client certificate (PEM chain) for mutual TLS; empty = none
  std::string private_key;  // its key; set exactly when certificate is
  TlsVersion min_version = TlsVersion::tls1_2;
  bool operator==(const TlsClientParams&) const = default;
};

}  // namespace floodgate::net
