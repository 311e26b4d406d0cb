// [server.http2] (http2_schema.h): the HTTP/2 limits, the rules between them, and h2c_listen
// checked against the listeners [server] and [[server.tls]] declare.
#include "http2_schema.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "values.h"

namespace floodgate::config::detail {
namespace {

// Every stream holds an exchange and, while its head or body moves, buffers of the reactor's
// pools: 10000 at once on one connection is already far more than one client has reason to
// keep open, yet still a bound.
constexpr int64_t kMaxStreams = 10'000;
// A connection's own window starts at 65535 bytes and only a WINDOW_UPDATE can raise it (RFC
// 9113 section 6.9.2), so nothing smaller can be offered; a stream's is held to the same floor,
// the window every HTTP/2 client expects before any SETTINGS. 2^31 - 1 is the largest window
// the protocol allows (section 6.9.1).
constexpr int64_t kMinWindow = 65'535;
constexpr int64_t kMaxWindow = 2'147'483'647;
// The decoded header list as [server]'s max_header_bytes bounds an HTTP/1.1 head: under 1 KiB
// a browser's cookies alone do not fit; over 1 MiB a head costs more to decode than any request
// has reason to carry.
constexpr int64_t kMinHeaderList = 1024;
constexpr int64_t kMaxHeaderList = 1'048'576;
constexpr int64_t kMaxContinuations = 1000;
constexpr int64_t kMaxGlitches = 1'000'000;
constexpr int64_t kMaxFramesPerTurn = 100'000;

// "key = value", or "key = value (the default)" when the key is not written.
std::string setting(const TableReader& r, std::string_view key, uint32_t value) {
  std::string out = std::string(key) + " = " + std::to_string(value);
  return r.peek(key) == nullptr ? out + " (the default)" : out;
}

// min_concurrent_streams is the floor the advertised limit shrinks to under pressure: above the
// limit itself it would raise what floodgate advertises when it should lower it.
void check_stream_limits(TableReader& r, const Http2Params& p) {
  if (p.min_concurrent_streams <= p.max_concurrent_streams) return;
  const std::string min = std::to_string(p.min_concurrent_streams);
  const std::string max = std::to_string(p.max_concurrent_streams);
  r.error("min_concurrent_streams",
          setting(r, "min_concurrent_streams", p.min_concurrent_streams) + " is above " +
              setting(r, "max_concurrent_streams", p.max_concurrent_streams) +
              ": under pressure the advertised limit would rise instead of shrinking; set " +
              "min_concurrent_streams to at most " + max +
              " or raise max_concurrent_streams to at least " + min);
}

// Every stream's request body flows under the connection's window as well as its own: a
// connection window smaller than one stream's would stall a single upload before its own
// window is used up.
void check_windows(TableReader& r, const Http2Params& p) {
  if (p.connection_window >= p.stream_window) return;
  r.error("connection_window",
          setting(r, "connection_window", p.connection_window) + " is smaller than " +
              setting(r, "stream_window", p.stream_window) +
              ": one request body could never use its whole window; raise connection_window "
              "to at least " +
              std::to_string(p.stream_window) + " or lower stream_window to at most " +
              std::to_string(p.connection_window));
}

// Addresses are compared by host and port, as server.listen compares its own: "localhost:8080"
// and "127.0.0.1:8080" are one listener.
bool same_address(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

bool is_tls_listener(const ServerParams& p, const Endpoint& e) {
  return std::any_of(p.tls.begin(), p.tls.end(), [&](const net::TlsCertParams& t) {
    return std::any_of(t.listen.begin(), t.listen.end(),
                       [&](const Endpoint& l) { return same_address(l, e); });
  });
}

// The plain listener `e` names (p.listen holds the TLS ones too), or nullptr.
const Endpoint* plain_listener(const ServerParams& p, const Endpoint& e) {
  if (is_tls_listener(p, e)) return nullptr;
  const auto it = std::find_if(p.listen.begin(), p.listen.end(),
                               [&](const Endpoint& l) { return same_address(l, e); });
  return it == p.listen.end() ? nullptr : &*it;
}

// Why address `e` of h2c_listen is refused, or "" when it names a plain listener.
std::string h2c_refusal(const ServerParams& p, const Endpoint& e) {
  if (is_tls_listener(p, e)) {
    return quoted(e.text) +
           " is a TLS listener (a [[server.tls]] entry lists it); HTTP/2 on TLS is chosen by "
           "ALPN (the entry's alpn, which offers \"h2\" by default): remove it from h2c_listen";
  }
  if (plain_listener(p, e) != nullptr) return {};
  const bool any_plain = std::any_of(p.listen.begin(), p.listen.end(),
                                     [&](const Endpoint& l) { return !is_tls_listener(p, l); });
  return quoted(e.text) + " is not one of server.listen" +
         (any_plain ? ""
                    : " (with [[server.tls]] entries and no server.listen written, "
                      "floodgate has no plain listener)") +
         "; add it to server.listen or remove it from h2c_listen";
}

// h2c_listen: each address one of the plain listeners, stored as server.listen writes it (the
// name the reactors know the listener by). Written empty, it is the default: no h2c listener.
void read_h2c_listen(TableReader& r, ServerParams& p, bool listeners_known) {
  constexpr std::string_view kKey = "h2c_listen";
  const toml::node* n = r.peek(kKey);
  if (n != nullptr && n->is_array() && n->as_array()->empty()) {
    r.find(kKey);  // endpoints() asks for at least one address; here none is a choice
    return;
  }
  std::vector<Endpoint> written;
  if (!r.endpoints(kKey, PortRule::zero_allowed, written) || written.empty() || !listeners_known) {
    return;
  }
  std::vector<Endpoint> listeners;
  for (size_t i = 0; i < written.size(); ++i) {
    if (std::string why = h2c_refusal(p, written[i]); !why.empty()) {
      r.out().error(position_of(r.element(kKey, i).source()), r.element_path(kKey, i),
                    std::move(why));
    } else {
      listeners.push_back(*plain_listener(p, written[i]));
    }
  }
  if (listeners.size() == written.size()) p.http2.h2c_listen = std::move(listeners);
}

}  // namespace

void read_http2(TableReader& r, ServerParams& p, bool listeners_known) {
  Http2Params& h = p.http2;
  const bool max_ok = r.integer("max_concurrent_streams", 1, kMaxStreams, h.max_concurrent_streams);
  const bool min_ok = r.integer("min_concurrent_streams", 1, kMaxStreams, h.min_concurrent_streams);
  const bool stream_ok = r.integer("stream_window", kMinWindow, kMaxWindow, h.stream_window);
  const bool connection_ok =
      r.integer("connection_window", kMinWindow, kMaxWindow, h.connection_window);
  r.integer("max_header_list_bytes", kMinHeaderList, kMaxHeaderList, h.max_header_list_bytes);
  r.integer("max_continuations", 0, kMaxContinuations, h.max_continuations);
  r.integer("glitch_threshold", 0, kMaxGlitches, h.glitch_threshold);
  r.integer("max_frames_per_turn", 1, kMaxFramesPerTurn, h.max_frames_per_turn);
  read_h2c_listen(r, p, listeners_known);
  // A value that had an error keeps its default, which must not be compared as if written.
  if (max_ok && min_ok) check_stream_limits(r, h);
  if (stream_ok && connection_ok) check_windows(r, h);
}

}  // namespace floodgate::config::detail
