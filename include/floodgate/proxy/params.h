// Server-wide parameters of the data plane ([server] with [server.http2], [admin] and [log] in
// the configuration). Plain immutable values, filled by config/ and read by reactors through
// the active snapshot.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/core/endpoint.h"
#include "floodgate/core/ip_range.h"
#include "floodgate/net/io_mode.h"
#include "floodgate/net/tls_params.h"

namespace floodgate {

using Millis = std::chrono::milliseconds;

// HTTP/2 from clients ([server.http2]): what floodgate advertises in its SETTINGS and the
// limits it enforces on each connection (http/h2_session.h). A connection takes the values of
// the generation it was accepted under; a reload applies to connections accepted after it.
struct Http2Params {
  // SETTINGS_MAX_CONCURRENT_STREAMS: a stream counts until its exchange has ended (its backend
  // attempt included), even after a reset.
  uint32_t max_concurrent_streams = 100;
  // The floor the advertised limit shrinks to while the reactor is under pressure (the front
  // cap, the adaptive ceiling or loop lag); at most max_concurrent_streams.
  uint32_t min_concurrent_streams = 10;
  uint32_t stream_window = 65536;          // SETTINGS_INITIAL_WINDOW_SIZE: a request body's window
  uint32_t connection_window = 1048576;    // all request bodies of a connection; >= stream_window
  uint32_t max_header_list_bytes = 65536;  // decoded, name + value + 32 per field -> 431
  uint32_t max_continuations = 8;          // CONTINUATION frames after one HEADERS; more ends it
  // Misbehaviour points a connection may collect within a minute: at 75 % a graceful GOAWAY,
  // at 100 % GOAWAY ENHANCE_YOUR_CALM. 0 = no bound.
  uint32_t glitch_threshold = 200;
  uint32_t max_frames_per_turn = 64;  // frames one connection has processed per loop turn
  // The plain listeners (each one of server.listen, as written there) that accept HTTP/2 with
  // prior knowledge (h2c). A TLS listener offers h2 by ALPN instead (TlsCertParams::alpn).
  std::vector<Endpoint> h2c_listen{};
  bool operator==(const Http2Params&) const = default;
};

struct ServerParams {
  // Every listener, plain (server.listen) and TLS (the [[server.tls]] entries' listen, once
  // each): the process binds them all; `tls` says which speak TLS.
  std::vector<Endpoint> listen{Endpoint{"127.0.0.1", 8080, "127.0.0.1:8080"}};
  std::vector<net::TlsCertParams> tls{};  // [[server.tls]]: certificates by listener and SNI
  unsigned workers = 0;                   // 0 = one reactor per core
  uint32_t max_header_bytes = 16384;      // header section (field lines + final CRLF) -> 431
  uint32_t max_headers = 128;             // header field count -> 431
  uint32_t max_uri_bytes = 8192;          // request-target bytes -> 414
  uint64_t max_body_bytes = 0;            // 0 = unlimited -> 413
  Millis header_timeout{10'000};          // first byte of a head until the head is complete -> 408
  Millis idle_timeout{60'000};            // idle keep-alive client connection
  Millis send_timeout{60'000};            // a response the client takes no byte of -> closed
  // Unsent response bytes the kernel holds for one client (TCP_NOTSENT_LOWAT on each client
  // connection): floodgate writes more only below it. 0 = the kernel's own bound (the send
  // buffer, up to net.ipv4.tcp_wmem's maximum).
  uint32_t max_unsent_bytes = 131072;
  // A new connection's opening: a TLS handshake from accept to its end, or a plain
  // connection's first byte; not done in time -> closed without an answer.
  Millis handshake_timeout{5'000};
  // Connections that have not completed their first request head, for the whole process (each
  // reactor keeps its share): at the bound a new one closes the oldest.
  uint32_t max_opening_connections = 1024;
  // Requests one client connection may carry, then it ends gracefully (HTTP/1.1: Connection:
  // close on the last response; HTTP/2: GOAWAY), so that clients spread over new connections
  // as the load balancer in front rebalances. 0 = no bound.
  uint32_t max_requests_per_connection = 0;
  Millis drain_timeout{30'000};     // SIGTERM: finish in-flight requests for at most this long
  Millis retirement_grace{30'000};  // reload: how long the old generation's requests may run
  IoMode io = IoMode::automatic;    // event loop interface; fixed while floodgate runs
  // Request buffers and response buffers (each pool) a reactor lends out at once -> 503
  // buffers_exhausted. Read at start (like the buffer sizes); bounds buffer memory per reactor.
  uint32_t max_buffers_per_reactor = 16384;
  // Peers whose X-Forwarded-For is believed: from these peers the client_ip key source of the
  // scoped rate limits (and the access log's client) is the right-most X-Forwarded-For address
  // that is not one of them (request_key.h), from any other the peer's own address.
  std::vector<IpRange> trusted_proxies{};
  Http2Params http2{};  // [server.http2]
  bool operator==(const ServerParams&) const = default;
};

struct AdminParams {
  // A TCP address; or, with listen = "unix:/path", `listen.text` is that string, `unix_path`
  // the path and `socket_mode` the socket file's mode.
  Endpoint listen{"127.0.0.1", 9901, "127.0.0.1:9901"};
  std::string unix_path;
  uint32_t socket_mode = 0660;
  std::string token;  // when not empty, every POST needs "Authorization: Bearer <token>"
  bool operator==(const AdminParams&) const = default;
};

enum class LogLevel { trace, debug, info, warn, error, critical, off };
enum class AccessLogFormat { json, combined, combined_floodgate };

struct LogParams {
  LogLevel level = LogLevel::info;
  std::string access_log = "stderr";  // "stderr", a file path, or "off"
  AccessLogFormat access_log_format = AccessLogFormat::json;
  // How often the process log summarises the refusals of the interval, per upstream and reason
  // (docs/operations.md, "The process log"); 0 = no summary. At least a second otherwise.
  Millis shed_summary_interval{10'000};
  bool operator==(const LogParams&) const = default;
};

}  // namespace floodgate
