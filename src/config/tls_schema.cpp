// [[server.tls]] (tls_schema.h): the certificates the listeners offer, and [upstreams.tls]. The
// files are read and the OpenSSL contexts built when a generation is built
// (net::TlsServerConfig::build), so that `check`, start-up and a reload all report an unusable
// certificate the same way; here the keys are read and the listeners merged into server.listen.
#include "tls_schema.h"

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/net/tls.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

constexpr std::array<Choice<net::TlsVersion>, 2> kTlsVersions{{
    {"1.2", net::TlsVersion::tls1_2},
    {"1.3", net::TlsVersion::tls1_3},
}};

Parsed<std::string> parse_absolute_file(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return Parsed<std::string>::fail(
        "must be an absolute path, e.g. \"/etc/floodgate/example.com.pem\" (floodgate runs "
        "from / under systemd, so a relative path would not mean what it seems)");
  }
  return Parsed<std::string>::ok(std::string(path));
}

// The name a backend's certificate is verified against: a host name or an IP address.
Parsed<std::string> parse_backend_name(std::string_view text) {
  if (!is_hostname(text) || text.find(':') != std::string_view::npos) {
    boost::system::error_code ec;
    boost::asio::ip::make_address(text, ec);
    if (ec) {
      return Parsed<std::string>::fail(quoted(text) +
                                       " is not a host name or an IP address; write the name the "
                                       "backends' certificates carry, without a port, e.g. "
                                       "\"app.internal\"");
    }
  }
  return Parsed<std::string>::ok(std::string(text));
}

// An SNI name: an exact host name or "*.example.com" (one label); lower-cased.
Parsed<std::string> parse_server_name(std::string_view text) {
  using P = Parsed<std::string>;
  const auto fail = [&](std::string_view why) {
    return P::fail(quoted(text) + " is not a server name: " + std::string(why));
  };
  if (text == "*") {
    return fail("leave server_names empty (or out) to make this the default certificate");
  }
  const bool wildcard = text.starts_with("*.");
  const std::string_view name = wildcard ? text.substr(2) : text;
  if (name.find('*') != std::string_view::npos) {
    return fail("'*' is allowed only as a leading \"*.\" (one label), e.g. \"*.example.com\"");
  }
  if (!is_hostname(name) || name.find(':') != std::string_view::npos) {
    return fail(
        "use dot-separated labels of letters, digits and '-', without a port, e.g. "
        "\"www.example.com\"");
  }
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return P::ok(std::move(out));
}

// An ALPN protocol ID floodgate speaks. IDs are compared byte for byte (RFC 7301), so "H2" is
// not "h2"; "h2c" is HTTP/2 without TLS, which no TLS handshake offers.
Parsed<std::string> parse_alpn_protocol(std::string_view text) {
  using P = Parsed<std::string>;
  if (text == "h2" || text == "http/1.1") return P::ok(std::string(text));
  std::string why =
      quoted(text) + " is not a protocol floodgate offers by ALPN; use \"h2\" " + "or \"http/1.1\"";
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "h2c") {
    why += " (h2c is HTTP/2 without TLS: list the plain listener in server.http2.h2c_listen)";
  } else if (lower == "h2" || lower == "http/1.1") {
    why += " (ALPN names are case-sensitive)";
  }
  return P::fail(std::move(why));
}

// alpn: the protocols this certificate's handshakes offer, in order of preference; at least
// one, each once (a duplicate is texts()'s error).
void read_alpn(TableReader& t, net::TlsCertParams& p) {
  constexpr std::string_view kExample = R"(alpn = ["h2", "http/1.1"])";
  const toml::node* n = t.peek("alpn");
  if (n != nullptr && n->is_array() && n->as_array()->empty()) {
    t.find("alpn");
    return t.error("alpn", "is empty; offer at least one protocol, e.g. " + std::string(kExample) +
                               " (the default), or [\"http/1.1\"] to " +
                               "keep this certificate's clients on HTTP/1.1");
  }
  t.texts("alpn", "\"h2\"", parse_alpn_protocol, p.alpn);
}

// Returns whether `listen` was read valid (the entry's listeners are known).
bool read_entry(TableReader& t, net::TlsCertParams& p) {
  bool listen_ok = false;
  if (t.require("listen", R"(listen = ["0.0.0.0:443"])")) {
    listen_ok = t.endpoints("listen", PortRule::zero_allowed, p.listen);
    if (p.listen.empty() && t.peek("listen") != nullptr && t.peek("listen")->is_array()) {
      t.error("listen",
              "is empty; list the addresses that speak TLS with this certificate, "
              "e.g. listen = [\"0.0.0.0:443\"]");
      listen_ok = false;
    }
  }
  if (t.require("certificate", R"(certificate = "/etc/floodgate/example.com.pem")")) {
    t.text("certificate", R"(certificate = "/etc/floodgate/example.com.pem")", parse_absolute_file,
           p.certificate);
  }
  if (t.require("private_key", R"(private_key = "/etc/floodgate/example.com.key")")) {
    t.text("private_key", R"(private_key = "/etc/floodgate/example.com.key")", parse_absolute_file,
           p.private_key);
  }
  t.texts("server_names", "\"example.com\"", parse_server_name, p.server_names);
  t.choice("min_version", kTlsVersions, p.min_version);
  if (auto ciphers = t.string("ciphers", R"(ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256")")) {
    p.ciphers = *ciphers;
  }
  t.boolean("session_tickets", "session_tickets = true", p.session_tickets);
  read_alpn(t, p);
  return listen_ok;
}

}  // namespace

bool read_server_tls(TableReader& r, ServerParams& p, bool listen_written) {
  struct Where {
    std::string path;  // "server.tls[0]"
    Position certificate, private_key, ciphers, server_names;
  };
  std::vector<Where> where;
  const int errors_before = r.out().error_count();
  bool listen_ok = true;
  r.tables("tls", "[[server.tls]]", "", [&](TableReader& t, size_t i) {
    listen_ok = read_entry(t, p.tls.emplace_back()) && listen_ok;
    where.push_back({"server.tls[" + std::to_string(i) + "]", t.position("certificate"),
                     t.position("private_key"), t.position("ciphers"), t.position("server_names")});
  });
  // An element that is not a table was never read: its listeners are unknown too.
  const toml::node* written = r.peek("tls");
  const toml::array* entries = written != nullptr ? written->as_array() : nullptr;
  listen_ok = listen_ok && (written == nullptr || (entries && entries->size() == p.tls.size()));
  if (p.tls.empty()) return listen_ok;
  // The files, as a generation will read them: an unusable one is an error at its key.
  if (r.out().error_count() == errors_before && where.size() == p.tls.size()) {
    net::TlsServerConfig::Error e;
    if (!net::TlsServerConfig::build(p.tls, e)) {
      const Where& w = where[e.entry];
      const Position at = e.key == "private_key"    ? w.private_key
                          : e.key == "ciphers"      ? w.ciphers
                          : e.key == "server_names" ? w.server_names
                                                    : w.certificate;
      r.out().error(at, w.path + "." + e.key, e.message);
    }
  }
  // TLS only: the plain default (127.0.0.1:8080) is not wanted unless written.
  if (!listen_written) p.listen.clear();
  const auto plain_end = static_cast<std::ptrdiff_t>(p.listen.size());
  for (size_t i = 0; i < p.tls.size(); ++i) {
    for (const Endpoint& at : p.tls[i].listen) {
      const bool plain = std::any_of(p.listen.begin(), p.listen.begin() + plain_end,
                                     [&](const Endpoint& e) { return e.text == at.text; });
      bool tls_before = false;
      for (size_t j = 0; j < i && !tls_before; ++j) {
        tls_before = std::any_of(p.tls[j].listen.begin(), p.tls[j].listen.end(),
                                 [&](const Endpoint& e) { return e.text == at.text; });
      }
      if (plain) {
        r.error("tls", "server.tls[" + std::to_string(i) + "].listen: " + quoted(at.text) +
                           " is also in server.listen; an address speaks TLS or plain HTTP, "
                           "never both: give TLS its own port (e.g. 443) or remove it from "
                           "server.listen");
      } else if (!tls_before) {
        p.listen.push_back(at);
      }
    }
  }
  return listen_ok;
}

void read_upstream_tls(TableReader& r, net::TlsClientParams& p) {
  const int errors_before = r.out().error_count();
  r.boolean("enabled", "enabled = true", p.enabled);
  r.boolean("verify", "verify = true", p.verify);
  r.text("ca_file", R"(ca_file = "/etc/ssl/certs/ca-certificates.crt")", parse_absolute_file,
         p.ca_file);
  r.text("server_name", R"(server_name = "app.internal")", parse_backend_name, p.server_name);
  r.text("certificate", R"(certificate = "/etc/floodgate/client.pem")", parse_absolute_file,
         p.certificate);
  r.text("private_key", R"(private_key = "/etc/floodgate/client.key")", parse_absolute_file,
         p.private_key);
  r.choice("min_version", kTlsVersions, p.min_version);
  if (p.certificate.empty() != p.private_key.empty()) {
    const std::string_view missing = p.certificate.empty() ? "certificate" : "private_key";
    r.error(p.certificate.empty() ? "private_key" : "certificate",
            "a client certificate needs both certificate and private_key; add " +
                std::string(missing) + " or remove the other");
  }
  if (!p.enabled) return;
  if (!p.verify) {
    r.warning("verify",
              "is false: floodgate accepts any certificate from these backends, so anyone on "
              "the path can read and change the traffic; give the backends' CA in ca_file "
              "instead");
  }
  if (r.out().error_count() != errors_before) return;
  net::TlsClientConfig::Error e;
  if (!net::TlsClientConfig::build(p, e)) r.error(e.key, e.message);
}

}  // namespace floodgate::config::detail
