// TLS contexts and sessions (tls.h).
#include "floodgate/net/tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstring>
#include <optional>

#include "floodgate/net/ticket_keys.h"

namespace floodgate::net {

namespace {

// Each direction of a connection's BIO pair: a little more than one full TLS record.
constexpr std::size_t kPairBytes = std::size_t{17} * 1024;
// Session tickets per full TLS 1.3 handshake (OpenSSL sends two by default; browsers use one).
constexpr std::size_t kTicketsPerHandshake = 1;
// The most early data a client may send (one full TLS record), as nginx and HAProxy allow.
constexpr uint32_t kMaxEarlyData = 16384;

// OpenSSL's reason for the most recent failure on this thread, and the queue cleared (the
// queue is per thread: a reason left behind would be read by the next connection).
std::string openssl_reason() {
  unsigned long last = 0;
  while (const unsigned long e = ERR_get_error()) last = e;
  if (last == 0) return "unknown OpenSSL error";
  if (ERR_GET_LIB(last) == ERR_LIB_SYS) {
    char text[128];
    return ::strerror_r(ERR_GET_REASON(last), text, sizeof(text));
  }
  const char* reason = ERR_reason_error_string(last);
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

class TlsCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "tls"; }
  std::string message(int value) const override {
    const char* reason = ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, value));
    return reason != nullptr ? reason : "TLS failure";
  }
};

// ALPN: the first of the certificate entry's protocols (its `alpn`, in its order) that the
// client offers. A client offering none of them gets no ALPN answer and decides itself (most
// fall back to HTTP/1.1), as nginx does. The entry's list is one of four (two names, each at
// most once), kept here in ALPN's wire format so that every context, the listeners' starting
// ones included, can point to it for as long as the process runs.
constexpr std::string_view kAlpnH2Http11{"\x02h2\x08http/1.1", 12};
constexpr std::string_view kAlpnHttp11H2{"\x08http/1.1\x02h2", 12};
constexpr std::string_view kAlpnH2{"\x02h2", 3};
constexpr std::string_view kAlpnHttp11{"\x08http/1.1", 9};

const std::string_view* alpn_wire(const std::vector<std::string>& protocols) {
  const bool h2_first = !protocols.empty() && protocols.front() == "h2";
  const bool both = protocols.size() == 2;
  if (both) return h2_first ? &kAlpnH2Http11 : &kAlpnHttp11H2;
  return h2_first ? &kAlpnH2 : &kAlpnHttp11;
}

int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* arg) {
  const std::string_view ours = *static_cast<const std::string_view*>(arg);
  unsigned char* chosen = nullptr;
  unsigned char chosen_len = 0;
  if (SSL_select_next_proto(
          &chosen, &chosen_len, reinterpret_cast<const unsigned char*>(ours.data()),
          static_cast<unsigned int>(ours.size()), in, inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  // SSL_select_next_proto points into our list on a match; the client's bytes are what
  // OpenSSL expects `out` to point into, so the same protocol is found there.
  for (unsigned int i = 0; i < inlen;) {
    const unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == chosen_len && std::memcmp(in + i + 1, chosen, len) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

int client_hello(SSL* ssl, int* alert, void* arg);

}  // namespace

struct TlsServerConfig::Cert {
  SSL_CTX* ctx = nullptr;
  TlsCertParams params;
  std::size_t index = 0;  // in [[server.tls]]
  ~Cert() { SSL_CTX_free(ctx); }
};

struct TlsListener {
  std::string key;                                  // the listen address as configured
  const TlsServerConfig::Cert* fallback = nullptr;  // the default certificate
  // Where this listener's handshakes start: the default certificate's settings, with the
  // ClientHello callback that knows this listener.
  SSL_CTX* ctx = nullptr;
  ~TlsListener() { SSL_CTX_free(ctx); }
  // Exact names and wildcard suffixes ("*.example.com" as "example.com"), sorted by name.
  std::vector<std::pair<std::string, const TlsServerConfig::Cert*>> exact;
  std::vector<std::pair<std::string, const TlsServerConfig::Cert*>> wildcard;

  static const TlsServerConfig::Cert* find(
      const std::vector<std::pair<std::string, const TlsServerConfig::Cert*>>& names,
      std::string_view name) {
    const auto it = std::lower_bound(names.begin(), names.end(), name,
                                     [](const auto& e, std::string_view n) { return e.first < n; });
    return it != names.end() && it->first == name ? it->second : nullptr;
  }
  // The certificate for an SNI name (any case, one trailing dot ignored as routes ignore it: a
  // fully qualified "a.test." is "a.test"), or the default.
  const TlsServerConfig::Cert* choose(std::string_view sni) const {
    std::array<char, 256> buf{};
    if (sni.ends_with('.')) sni.remove_suffix(1);
    if (sni.empty() || sni.size() >= buf.size()) return fallback;
    for (std::size_t i = 0; i < sni.size(); ++i) {
      buf[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(sni[i])));
    }
    const std::string_view name(buf.data(), sni.size());
    if (const auto* c = find(exact, name)) return c;
    if (const std::size_t dot = name.find('.'); dot != std::string_view::npos && dot > 0) {
      if (const auto* c = find(wildcard, name.substr(dot + 1))) return c;
    }
    return fallback;
  }
};

namespace {

// The ClientHello callback runs before the version is chosen: the certificate for the client's
// SNI is switched in here, with its entry's versions, suites and ticket setting (HAProxy
// switches its contexts at this point too).
int client_hello(SSL* ssl, int* alert, void* arg) {
  // The whole ClientHello is in, nothing costly has run yet: the stream's owner decides first
  // whether this handshake may take the CPU it costs (Stream::tls_hello).
  if (auto* session = static_cast<TlsSession*>(SSL_get_app_data(ssl)); session != nullptr) {
    if (session->hello == TlsSession::Hello::unasked) return SSL_CLIENT_HELLO_RETRY;
    if (session->hello == TlsSession::Hello::refused) {
      *alert = SSL_AD_INTERNAL_ERROR;
      return SSL_CLIENT_HELLO_ERROR;
    }
  }
  const auto& listener = *static_cast<const TlsListener*>(arg);
  std::string_view sni;
  const unsigned char* p = nullptr;
  std::size_t len = 0;
  // server_name extension: list length (2), then entries of type (1), length (2), name.
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) == 1 && len > 5 &&
      p[2] == TLSEXT_NAMETYPE_host_name) {
    const std::size_t list = (std::size_t{p[0]} << 8) | p[1];
    const std::size_t name = (std::size_t{p[3]} << 8) | p[4];
    if (list + 2 <= len && name + 3 <= list) sni = {reinterpret_cast<const char*>(p + 5), name};
  }
  const TlsServerConfig::Cert* cert = listener.choose(sni);
  if (cert != listener.fallback) {
    SSL_set_SSL_CTX(ssl, cert->ctx);
    // SSL_set_SSL_CTX takes the certificate, not the settings: these follow the entry.
    SSL_set_min_proto_version(
        ssl, cert->params.min_version == TlsVersion::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_set_options(ssl, SSL_CTX_get_options(cert->ctx));
    SSL_clear_options(ssl, ~SSL_CTX_get_options(cert->ctx));
    SSL_set_num_tickets(ssl, SSL_CTX_get_num_tickets(cert->ctx));
    const std::string& ciphers = cert->params.ciphers;
    SSL_set_cipher_list(ssl, ciphers.empty() ? kDefaultTls12Ciphers.data() : ciphers.c_str());
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

// Why a file cannot be read, in the words of the system ("No such file or directory").
std::string unreadable(const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return {};
  char text[128];
  return ::strerror_r(errno, text, sizeof(text));
}

// Loads a certificate chain and its key into `ctx`; when one is unusable, the key that names it
// ("certificate" or "private_key") and why, naming the file and OpenSSL's reason.
std::optional<std::pair<std::string, std::string>> use_key_pair(SSL_CTX* ctx,
                                                                const std::string& certificate,
                                                                const std::string& private_key) {
  const auto bad = [](std::string key, std::string message) {
    return std::make_optional(std::make_pair(std::move(key), std::move(message)));
  };
  if (const std::string why = unreadable(certificate); !why.empty()) {
    return bad("certificate", "cannot read " + certificate + ": " + why);
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, certificate.c_str()) != 1) {
    return bad("certificate",
               certificate + " is not a usable PEM certificate chain: " + openssl_reason());
  }
  if (const std::string why = unreadable(private_key); !why.empty()) {
    return bad("private_key", "cannot read " + private_key + ": " + why);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, private_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return bad("private_key", private_key + " does not belong to the certificate in " +
                                    certificate + " (key values mismatch)");
    }
    return bad("private_key",
               private_key + " is not a usable PEM private key: " + openssl_reason());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return bad("private_key", private_key + " does not belong to the certificate in " +
                                  certificate + ": " + openssl_reason());
  }
  return std::nullopt;
}

std::unique_ptr<TlsServerConfig::Cert> load_cert(const TlsCertParams& p, std::size_t index,
                                                 bool early_data, TlsServerConfig::Error& error) {
  const auto fail = [&](std::string key, std::string message) {
    error = {index, std::move(key), std::move(message)};
    return nullptr;
  };
  auto cert = std::make_unique<TlsServerConfig::Cert>();
  cert->params = p;
  ERR_clear_error();
  SSL_CTX* ctx = cert->ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) {
    return fail("certificate", "cannot make a TLS context: " + openssl_reason());
  }
  SSL_CTX_set_min_proto_version(
      ctx, p.min_version == TlsVersion::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // No renegotiation (a client-driven CPU cost with no use for a proxy), truncation by the
  // peer read as EOF (HTTP frames its messages itself), the server's suite order.
  uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                     SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION;
  if (!p.session_tickets) options |= SSL_OP_NO_TICKET;
  // 0-RTT (resilience.protocol.allow_0rtt): OpenSSL's replay protection needs its session
  // cache, which locks; floodgate takes early data only for the safe methods and marks what
  // it forwards Early-Data: 1 instead, as HAProxy's allow-0rtt does (docs/resilience.md).
  if (early_data) options |= SSL_OP_NO_ANTI_REPLAY;
  SSL_CTX_set_options(ctx, options);
  SSL_CTX_set_max_early_data(ctx, early_data && p.session_tickets ? kMaxEarlyData : 0);
  SSL_CTX_set_num_tickets(ctx, p.session_tickets ? kTicketsPerHandshake : 0);
  // The process's rotating keys instead of the context's own (ticket_keys.h): tickets then
  // outlive a reload, and no key serves longer than two rotation periods.
  if (p.session_tickets) SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, TicketKeys::callback);
  // Stateless tickets only: OpenSSL's server session cache takes a lock per handshake.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  const std::string ciphers = p.ciphers.empty() ? std::string(kDefaultTls12Ciphers) : p.ciphers;
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) {
    return fail("ciphers", "no cipher suite usable in \"" + ciphers + "\": " + openssl_reason() +
                               "; write suites in OpenSSL's syntax, e.g. "
                               "\"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256\"");
  }
  if (auto bad = use_key_pair(ctx, p.certificate, p.private_key)) {
    return fail(std::move(bad->first), std::move(bad->second));
  }
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, const_cast<std::string_view*>(alpn_wire(p.alpn)));
  return cert;
}

}  // namespace

std::shared_ptr<const TlsClientConfig> TlsClientConfig::build(const TlsClientParams& p,
                                                              Error& error) {
  const auto fail = [&](std::string key, std::string message) {
    error = {std::move(key), std::move(message)};
    return nullptr;
  };
  std::shared_ptr<TlsClientConfig> cfg(new TlsClientConfig());
  cfg->params_ = p;
  ERR_clear_error();
  SSL_CTX* ctx = cfg->ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return fail("enabled", "cannot make a TLS context: " + openssl_reason());
  SSL_CTX_set_min_proto_version(
      ctx, p.min_version == TlsVersion::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION);
  // No client session cache: every new backend connection makes a full handshake, and pooled
  // keep-alive connections make new ones rare (docs/configuration.md, "[upstreams.tls]").
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx, kHttp11, sizeof(kHttp11));  // 0 is success here
  SSL_CTX_set_verify(ctx, p.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (p.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return fail("ca_file", "cannot load the system's CA store: " + openssl_reason() +
                                 "; name a PEM bundle, e.g. ca_file = "
                                 "\"/etc/ssl/certs/ca-certificates.crt\"");
    }
  } else {
    if (const std::string why = unreadable(p.ca_file); !why.empty()) {
      return fail("ca_file", "cannot read " + p.ca_file + ": " + why);
    }
    if (SSL_CTX_load_verify_locations(ctx, p.ca_file.c_str(), nullptr) != 1) {
      return fail("ca_file",
                  p.ca_file + " is not a usable PEM certificate bundle: " + openssl_reason());
    }
  }
  if (!p.certificate.empty()) {
    if (auto bad = use_key_pair(ctx, p.certificate, p.private_key)) {
      return fail(std::move(bad->first), std::move(bad->second));
    }
  }
  return cfg;
}

TlsClientConfig::~TlsClientConfig() {
  SSL_CTX_free(ctx_);
}

std::string TlsServerConfig::Error::text() const {
  return "server.tls[" + std::to_string(entry) + "]." + key + ": " + message;
}

std::shared_ptr<const TlsServerConfig> TlsServerConfig::build(
    const std::vector<TlsCertParams>& entries, Error& error, bool early_data) {
  std::shared_ptr<TlsServerConfig> cfg(new TlsServerConfig());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto cert = load_cert(entries[i], i, early_data, error);
    if (!cert) return nullptr;
    cert->index = i;
    cfg->certs_.push_back(std::move(cert));
  }
  // Each listener: the certificates that list it, the default being the first without names
  // (else the first).
  for (const auto& cert : cfg->certs_) {
    for (const Endpoint& at : cert->params.listen) {
      auto it = std::find_if(cfg->listeners_.begin(), cfg->listeners_.end(),
                             [&](const auto& l) { return l->key == at.text; });
      if (it == cfg->listeners_.end()) {
        cfg->listeners_.push_back(std::make_unique<TlsListener>());
        cfg->listeners_.back()->key = at.text;
        it = std::prev(cfg->listeners_.end());
      }
      TlsListener& l = **it;
      if (l.fallback == nullptr ||
          (!l.fallback->params.server_names.empty() && cert->params.server_names.empty())) {
        l.fallback = cert.get();
      }
      for (const std::string& name : cert->params.server_names) {
        const std::string n = lower(name);
        if (n.starts_with("*.")) {
          l.wildcard.emplace_back(n.substr(2), cert.get());
        } else {
          l.exact.emplace_back(n, cert.get());
        }
      }
    }
  }
  for (const auto& l : cfg->listeners_) {
    auto start = load_cert(l->fallback->params, l->fallback->index, early_data, error);
    if (!start) return nullptr;
    l->ctx = std::exchange(start->ctx, nullptr);
    SSL_CTX_set_client_hello_cb(l->ctx, client_hello, l.get());
    std::stable_sort(l->exact.begin(), l->exact.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::stable_sort(l->wildcard.begin(), l->wildcard.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto* names : {&l->exact, &l->wildcard}) {
      const auto same =
          std::adjacent_find(names->begin(), names->end(),
                             [](const auto& a, const auto& b) { return a.first == b.first; });
      if (same == names->end()) continue;
      const std::string name = (names == &l->wildcard ? "*." : "") + same->first;
      error = {std::next(same)->second->index, "server_names",
               "\"" + name + "\" is already served on " + l->key + " by server.tls[" +
                   std::to_string(same->second->index) +
                   "]; a name picks one certificate per listener"};
      return nullptr;
    }
  }
  return cfg;
}

TlsServerConfig::~TlsServerConfig() = default;

const TlsListener* TlsServerConfig::listener(std::string_view key) const noexcept {
  for (const auto& l : listeners_) {
    if (l->key == key) return l.get();
  }
  return nullptr;
}

const boost::system::error_category& tls_category() noexcept {
  static const TlsCategory category;
  return category;
}

namespace {

// A new SSL object of `ctx` on a BIO pair; nullptr (and `net` untouched) when OpenSSL is out of
// memory.
// Gives `ssl` a BIO pair whose other end becomes `net`; false (and nothing attached) when
// OpenSSL is out of memory.
bool attach_pair(SSL* ssl, BIO*& net) {
  BIO* inner = nullptr;
  if (BIO_new_bio_pair(&inner, kPairBytes, &net, kPairBytes) != 1) {
    ERR_clear_error();
    return false;
  }
  SSL_set_bio(ssl, inner, inner);
  return true;
}

SSL* new_on_pair(SSL_CTX* ctx, BIO*& net) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr || !attach_pair(ssl, net)) {
    SSL_free(ssl);
    ERR_clear_error();
    return nullptr;
  }
  return ssl;
}

}  // namespace

SSL* new_client_ssl(const TlsClientConfig& config, std::string_view host) {
  SSL* ssl = SSL_new(config.ctx());
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  const TlsClientParams& p = config.params();
  const std::string name(p.server_name.empty() ? host : std::string_view(p.server_name));
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  const bool ip = !ec;
  bool ok = ip || SSL_set_tlsext_host_name(ssl, name.c_str()) == 1;
  if (ok && p.verify) {
    ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1
            : SSL_set1_host(ssl, name.c_str()) == 1;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  }
  if (!ok) {
    SSL_free(ssl);
    ERR_clear_error();
    return nullptr;
  }
  return ssl;
}

namespace {
// OpenSSL's info callback, for every session: notes the peer's close_notify alert.
void note_close_notify(const SSL* ssl, int where, int ret) {
  if ((where & SSL_CB_READ_ALERT) == 0 || (ret & 0xff) != SSL_AD_CLOSE_NOTIFY) return;
  if (auto* session = static_cast<TlsSession*>(SSL_get_app_data(ssl)); session != nullptr) {
    session->close_notify_received = true;
  }
}
}  // namespace

TlsSession::TlsSession(std::shared_ptr<const TlsServerConfig> config, const TlsListener& listener)
    : config_(std::move(config)) {
  ssl_ = new_on_pair(listener.ctx, net_);
  if (ssl_ == nullptr) return;
  SSL_set_accept_state(ssl_);
  SSL_set_app_data(ssl_, this);  // the ClientHello callback's gate, note_close_notify
  SSL_set_info_callback(ssl_, &note_close_notify);
  early_phase = SSL_get_max_early_data(ssl_) > 0;
}

TlsSession::TlsSession(std::shared_ptr<const TlsClientConfig> config, std::string_view host)
    : client_(std::move(config)) {
  SSL* ssl = new_client_ssl(*client_, host);
  if (ssl == nullptr) return;
  if (!attach_pair(ssl, net_)) {
    SSL_free(ssl);
    return;
  }
  ssl_ = ssl;
  SSL_set_app_data(ssl_, this);
  SSL_set_info_callback(ssl_, &note_close_notify);
}

std::string_view TlsSession::verify_failure() const noexcept {
  if (ssl_ == nullptr || client_ == nullptr) return {};
  const long result = SSL_get_verify_result(ssl_);
  if (result == X509_V_OK) return {};
  const char* text = X509_verify_cert_error_string(result);
  return text != nullptr ? text : "certificate verification failed";
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);  // frees the inner end of the pair too
  BIO_free(net_);
}

TlsFacts TlsSession::facts() const noexcept {
  if (ssl_ == nullptr || !established) return {};
  const char* cipher = SSL_get_cipher_name(ssl_);
  return {SSL_get_version(ssl_), cipher != nullptr ? cipher : "", SSL_session_reused(ssl_) == 1};
}

bool TlsSession::alpn_h2() const noexcept {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &data, &len);
  return len == 2 && data[0] == 'h' && data[1] == '2';
}

std::string_view TlsSession::version_label() const noexcept {
  // Before the handshake finished OpenSSL reports the highest version it would accept.
  if (ssl_ == nullptr || !established) return "unknown";
  switch (SSL_version(ssl_)) {
    case TLS1_2_VERSION:
      return "1.2";
    case TLS1_3_VERSION:
      return "1.3";
    default:
      return "unknown";
  }
}

}  // namespace floodgate::net
