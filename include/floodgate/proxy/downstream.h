// What an exchange needs from whatever its request came from, and nothing more: a client
// connection's protocol. HTTP/1.1 is ClientConn (src/proxy/client_conn.h), one exchange at a
// time per connection; an HTTP/2 stream is another Downstream of the same exchange.
//
// The exchange (exchange.h) runs the request through the stages, the pool's queue, backend
// selection, the retry and the hedge, and keeps the access record; its attempts (attempt.h)
// talk to the backend. Both reach the client only through this:
//   - the response sink: a backend's response head, framed for the client's protocol (HTTP/1:
//     the head rewritten, the body passed through, re-chunked or close-delimited), body bytes
//     as the attempt parses them, the end; flush() writes what is buffered and the attempt
//     hears on_client_drained() once the client has taken it all;
//   - the request body source: the attempt asks for body once its head is on its way
//     (on_request_head_sent: HTTP/1 invites it with 100 Continue) and whenever it has room;
//   - floodgate's own answer (respond), cutting a request short (cut), the end of the response
//     (response_done: HTTP/1 goes on to the next request or closes);
//   - while the exchange waits for a stage, the downstream notices its client going away
//     (Exchange::on_downstream_gone) without reading requests ahead;
//   - a tunnel (an upgrade's 101, a CONNECT's 200): the downstream relays bytes both ways.
//
// Thread-safety: reactor thread only. Lifetime: the downstream outlives its exchange's
// pending work: hold() and release() keep it (and the exchange it owns) alive while a
// completion, a timer or a resolution may still come.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/http/parser.h"

namespace floodgate::net {
class TlsSession;
}

namespace floodgate::proxy {

class Attempt;
struct Decision;

class Downstream {
 public:
  virtual void hold() noexcept = 0;
  virtual void release() noexcept = 0;
  // The client went away or the connection is closing: nothing more is read or written.
  virtual bool gone() const noexcept = 0;

  // -- Who sent the request (the forwarded head's X-Forwarded-For and -Proto, the access log).
  virtual std::string_view client_ip() const noexcept = 0;
  // The client's TLS session, or nullptr in the clear.
  virtual const net::TlsSession* tls() const noexcept = 0;
  // The HTTP/2 stream the request came on (the access log), 0 for HTTP/1.x.
  virtual uint32_t stream_id() const noexcept { return 0; }

  // -- floodgate's answer for a stop decision (its prebuilt bytes, or one built now with its
  // Retry-After and header lines); the exchange's outcome is decided already. The downstream
  // writes it, then the exchange finishes.
  virtual void respond(const Decision& d) = 0;
  // floodgate's answer to OPTIONS * (RFC 9110 section 9.3.7): what it forwards.
  virtual void answer_options() = 0;
  // Ends a request in progress before its response is complete, by `by` (the outcome says
  // so): the client must not take a short response for a whole one.
  virtual void cut(OutcomeSource by) = 0;
  // The exchange begins (true) or stops (false) waiting for a stage: meanwhile the downstream
  // watches for its client going away and reads nothing of what follows.
  virtual void watch_while_waiting(bool on) = 0;

  // -- The request body source.
  // Attempt `a`'s request head is on its way: invite the body (HTTP/1's 100 Continue) and pump.
  virtual void on_request_head_sent(Attempt& a) = 0;
  // Forwards buffered request body into attempt `a`, or reads more of it.
  virtual void pump_request_body(Attempt& a) = 0;

  // -- The response sink.
  // A backend's response head for the client: interim (1xx but 101; the downstream may drop
  // it) or final. The downstream frames it for its protocol and decides how the body travels.
  // Reason::none, buffers_exhausted, or upstream_bad_response when the head cannot be written.
  virtual Reason response_head(const http::Parser& head, bool interim) = 0;
  // A tunnel's head: the backend's 101 (nullptr: a CONNECT's 200 Connection Established).
  virtual Reason tunnel_head(const http::Parser* head) = 0;
  // Body bytes put_body() takes now (0: the output is full until the client takes some).
  virtual std::size_t body_room() const noexcept = 0;
  virtual void put_body(const char* data, std::size_t n) = 0;
  // The body is complete (HTTP/1 chunked: the last chunk).
  virtual void end_body() = 0;
  // Bytes of the response the client has not taken yet (buffered or being written).
  virtual bool response_pending() const noexcept = 0;
  // A write to the client is on its way.
  virtual bool writing() const noexcept = 0;
  // Writes what is buffered; the exchange's attempt hears on_client_drained() once it is out.
  virtual void flush() = 0;
  // Only before the first flush() of the response: nothing of it reached the client.
  virtual void discard_response() noexcept = 0;
  // The response is complete: the exchange ends, then the downstream goes on or closes.
  virtual void response_done() = 0;
  // The tunnel's first bytes are ready (tunnel_head): relay both ways until either side ends.
  virtual void run_tunnel() = 0;

 protected:
  ~Downstream() = default;
};

}  // namespace floodgate::proxy
