// What a proxy changes in a message head on its way through (RFC 9110 section 7.6, RFC 9112):
// hop-by-hop fields removed (Connection and every field it names, Keep-Alive,
// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade unless upgrading), the body
// re-framed, and on requests X-Forwarded-For/-Proto/-Host, Via and X-Request-Id added.
//
// Sans-I/O and allocation-free: inputs are a parsed head, outputs are bytes in a Writer.
#pragma once

#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/http/parser.h"
#include "floodgate/http/writer.h"

namespace floodgate::http {

// Facts about a request head that the pipeline needs, gathered in one pass over its fields.
struct RequestFacts {
  std::string_view host;        // Host value (or the authority of an absolute-form target)
  std::string_view path;        // origin-form target forwarded to the backend
  std::string_view request_id;  // the client's X-Request-Id, empty when absent
  bool expect_continue = false;
  bool upgrade = false;  // Connection: upgrade together with an Upgrade field
  bool keep_alive = false;
  bool has_body = false;
};

// Validates what llhttp leaves to the application and fills `facts`. Returns Reason::none or
// the reason to answer with (bad_request: missing or repeated Host on HTTP/1.1, a transfer
// coding other than chunked, CONNECT, an unsupported HTTP version, a malformed target).
Reason inspect_request(const Parser& head, RequestFacts& facts);

struct ForwardInfo {
  std::string_view client_ip;
  std::string_view request_id;  // the id to send: the client's, or a generated one
};

// Writes the request head the backend receives (HTTP/1.1, keep-alive). Returns false when it
// does not fit in `out`.
bool write_request_head(const Parser& head, const RequestFacts& facts, const ForwardInfo& fwd,
                        Writer& out);

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

// Chunked framing around `n` bytes of data (RFC 9112 section 7.1).
inline void write_chunk_header(std::size_t n, Writer& out) {
  out.hex(n).put("\r\n");
}
inline constexpr std::string_view kChunkEnd = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The complete response floodgate sends when it answers `reason` itself. Built once; the
// returned view stays valid for the life of the process. `close` adds Connection: close.
std::string_view generated_response(Reason reason, bool close);
// The same response with `Retry-After: retry_after_seconds` (0 = no Retry-After), built anew:
// for responses prebuilt per configuration generation (a pool's admission rejections).
std::string build_generated_response(Reason reason, bool close, uint32_t retry_after_seconds);

// Whether floodgate closes the client connection after answering `reason` itself.
constexpr bool closes_connection(Reason r) {
  return r == Reason::bad_request || r == Reason::header_timeout || r == Reason::body_too_large ||
         r == Reason::uri_too_long || r == Reason::header_too_large;
}

inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace floodgate::http
