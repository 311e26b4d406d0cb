// What a proxy changes in a message head on its way through (RFC 9110 section 7.6, RFC 9112):
// hop-by-hop fields removed (Connection and every field it names, Keep-Alive,
// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade unless upgrading), the body
// re-framed, and on requests X-Forwarded-For/-Proto/-Host, Via and X-Request-Id added.
//
// Sans-I/O and allocation-free: inputs are a parsed head, outputs are bytes in a Writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/http/h2_session.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/request_head.h"
#include "floodgate/http/writer.h"

namespace floodgate::http {

// Facts about a request head that the pipeline needs, gathered in one pass over its fields.
struct RequestFacts {
  std::string_view host;             // Host value (or the authority of an absolute-form target)
  std::string_view path;             // origin-form target forwarded to the backend ("*": see below)
  std::string_view request_id;       // the client's X-Request-Id when acceptable, else empty
  std::string_view host_header;      // the Host field value, trimmed (empty when absent or empty)
  std::string_view authority;        // an absolute-form target's authority; for CONNECT, the target
  bool connect = false;              // CONNECT host:port (authority-form target)
  bool origin = false;               // OPTIONS with an Origin field (a CORS preflight's half)
  bool cors_request_method = false;  // OPTIONS with Access-Control-Request-Method
  bool expect_continue = false;
  bool upgrade = false;  // forwarded as an upgrade: Connection: upgrade and an Upgrade offer
  bool keep_alive = false;
  bool has_body = false;
  bool asterisk = false;      // OPTIONS * (path is "*"): floodgate answers it itself
  bool offers_h2c = false;    // the Upgrade offer names HTTP/2 (h2c, h2, HTTP/2.x)
  bool offers_other = false;  // the Upgrade offer names another protocol (websocket, ...)
  bool allow_h2c = false;     // the route forwards an HTTP/2 offer (apply_h2c_policy)
};

// The longest client X-Request-Id floodgate adopts; longer ones are replaced.
inline constexpr std::size_t kMaxRequestIdBytes = 200;

// Validates what llhttp leaves to the application and fills `facts`. Returns Reason::none or
// the reason to answer with: bad_request for a missing or repeated Host on HTTP/1.1; a Host or
// absolute-form authority that is not `host [":" port]` (valid_authority); a transfer coding
// other than chunked, or any Transfer-Encoding on HTTP/1.0 (RFC 9112 section 6.1); a CONNECT
// whose target is not `host ":" port` with a port (whether CONNECT is allowed at all is the
// protocol policy's decision); an unsupported HTTP version; a malformed target or one with a
// #fragment. A client X-Request-Id
// is adopted only when it is 1 to kMaxRequestIdBytes visible ASCII characters (0x21-0x7E).
Reason inspect_request(const RequestHead& head, RequestFacts& facts);

// Whether `authority` is `uri-host [":" port]` as floodgate accepts it (RFC 9110 section 7.2,
// RFC 3986 section 3.2.2): a name of letters, digits, '-', '.', '_' and '~', or a bracketed IPv6
// literal; then an optional ':' and a port of at most 65535 (empty allowed). No userinfo ('@'),
// no spaces, '/', ',' or percent-encoding. The empty string is not an authority.
bool valid_authority(std::string_view authority);

// The route's h2c policy. An upgrade to cleartext HTTP/2 would let the client speak HTTP/2
// straight to the backend, past floodgate's routing (h2c smuggling): unless `allow`, the
// HTTP/2 tokens are removed from the Upgrade offer (and HTTP2-Settings dropped), so a request
// offering nothing else is forwarded as a plain request, after which the client connection
// closes (keep_alive = false), as after a declined upgrade.
void apply_h2c_policy(RequestFacts& facts, bool allow);

struct ForwardInfo {
  std::string_view client_ip;
  std::string_view request_id;  // the id to send: the client's, or a generated one
  // Host for a request that has none (HTTP/1.0) or an empty one: the backend's address as
  // configured, as nginx's $proxy_host.
  std::string_view backend_host = {};
  bool https = false;  // the client spoke TLS: X-Forwarded-Proto: https
  // The request's head began in TLS early data: Early-Data: 1 (RFC 8470 section 5.1), unless
  // the client's request has that field already (it is forwarded, never removed).
  bool early_data = false;
};

// Writes the request head the backend receives (HTTP/1.1, keep-alive). Returns false when it
// does not fit in `out`.
bool write_request_head(const RequestHead& head, const RequestFacts& facts, const ForwardInfo& fwd,
                        Writer& out);

// floodgate's answer to OPTIONS * (RFC 9110 section 9.3.7): 200 with Allow and an empty body.
// `close` adds Connection: close.
std::string_view options_response(bool close);

// How a response body travels to the client.
enum class Framing {
  none,     // no body (HEAD, 1xx, 204, 304)
  length,   // Content-Length, passed through byte for byte
  chunked,  // re-chunked (backend chunked or close-delimited, HTTP/1.1 client)
  close,    // close-delimited (HTTP/1.0 client): the client connection closes after the body
};

struct ResponsePlan {
  Framing framing = Framing::none;
  bool close_client = false;  // the client connection closes after this response
};

// Decides framing for a backend response head. `head_request`: the request was HEAD;
// `client_minor`: the client's HTTP/1.x minor version; `client_keep_alive`: the client
// connection may stay open as far as the request is concerned.
ResponsePlan plan_response(const Parser& response, bool head_request, int client_minor,
                           bool client_keep_alive);

// Writes the response head the client receives.
bool write_response_head(const Parser& response, const ResponsePlan& plan, int client_minor,
                         Writer& out);

// The response head an HTTP/2 client receives (RFC 9113 section 8.2.2), as fields for
// h2::Session::submit_response: the backend's fields without the connection-specific ones
// (Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade), Content-Length kept where it gives the body's length (not in a
// 1xx or 204), names in lower case (HTTP/2 requires it) copied into `names`. Values view the
// parser's bytes. Returns the number of fields, or -1 when `out` or `names` is too small.
int h2_response_fields(const Parser& response, h2::ResponseField* out, std::size_t max, char* names,
                       std::size_t names_capacity);

// Chunked framing around `n` bytes of data (RFC 9112 section 7.1).
inline void write_chunk_header(std::size_t n, Writer& out) {
  out.hex(n).put("\r\n");
}
inline constexpr std::string_view kChunkEnd = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The complete response floodgate sends when it answers `reason` itself. Built once; the
// returned view stays valid for the life of the process. `close` adds Connection: close.
std::string_view generated_response(Reason reason, bool close);

// What a generated response built anew says beyond its reason: for responses prebuilt per
// configuration generation (a pool's admission rejections, the front stages' refusals).
struct GeneratedResponseParams {
  Reason reason = Reason::bad_request;
  bool close = false;                // adds Connection: close
  uint32_t retry_after_seconds = 0;  // Retry-After value; 0 = no Retry-After
  int status = 0;                    // 0 = the reason's own status
  std::string_view extra_headers{};  // "Name: value\r\n" lines, right after the status line
};
// The response generated_response() gives, shaped by `p`. An overridden status takes its
// phrase from the first reason in kReasons with that status (none there: an empty phrase).
std::string build_generated_response(const GeneratedResponseParams& p);
// The same, written into `out` (a response with a Retry-After known only when it is sent);
// false when it did not fit. kGeneratedResponseMax bytes always fit, extra_headers aside.
bool write_generated_response(const GeneratedResponseParams& p, Writer& out);
inline constexpr std::size_t kGeneratedResponseMax = 512;
// The same as build_generated_response({reason, close, retry_after_seconds}).
inline std::string build_generated_response(Reason reason, bool close,
                                            uint32_t retry_after_seconds) {
  return build_generated_response(GeneratedResponseParams{reason, close, retry_after_seconds});
}

// A Retry-After value from a configured duration: whole seconds (RFC 9110 section 10.2.3),
// rounded up, at least 1.
constexpr uint32_t retry_after_seconds(std::chrono::milliseconds d) {
  const int64_t seconds = (d.count() + 999) / 1000;
  return static_cast<uint32_t>(seconds < 1 ? 1 : seconds);
}

// Whether floodgate closes the client connection after answering `reason` itself.
constexpr bool closes_connection(Reason r) {
  return r == Reason::bad_request || r == Reason::header_timeout || r == Reason::body_too_large ||
         r == Reason::uri_too_long || r == Reason::header_too_large;
}

inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace floodgate::http
