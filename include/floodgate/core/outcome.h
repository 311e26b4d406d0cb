// Outcome: how one request ended, classified once, where it happened. The metrics, the access
// log, the retry rules (a failed attempt's outcome, proxy::retry_rule) and adaptive admission
// (its samples, resilience::sample_of) read this record; none of them re-derives it from the
// request path's flags. A circuit breaker is given each attempt's verdict instead
// (Attempt::judge), from the same reason or status.
//
// `retryable` follows seed 004's retry rule for the failure itself: a connect failure, a
// connect or response timeout, or a connection reset before a response head could succeed on
// another backend; a malformed response or a failed TLS handshake (protocol failures), floodgate's
// own rejections and client errors could not. Whether a retry is then allowed (method, body,
// budget, another backend) is the retry policy's question, not the outcome's.
//
// Thread-safety: a value type, written by the reactor that runs the request.
#pragma once

#include <chrono>
#include <cstdint>

#include "floodgate/core/reason.h"

namespace floodgate {

// Whose doing the outcome is.
enum class OutcomeSource : uint8_t { upstream, client, floodgate };

enum class OutcomeKind : uint8_t {
  response,               // a backend's response went to the client, whatever its status
  answered,               // floodgate answered the request itself (OPTIONS *)
  client_error,           // malformed, over a limit or too slow to send its head: a 4xx
  client_aborted,         // the client closed, reset or stalled before its response was done
  rejection,              // floodgate turned it away: no route, a pool, a stage, no buffer
  connect_refused,        // the backend refused or reset the connection attempt
  connect_timeout,        // no connection within connect_timeout
  reset_before_response,  // the backend closed or reset before a response head
  response_timeout,       // no response head within response_timeout
  bad_response,           // a malformed response head: a protocol failure
  tls_failed,  // the TLS handshake with the backend failed: terminal, like a protocol failure
  cut,         // the backend failed mid-response: the client got a short one
};

struct Outcome {
  Reason reason = Reason::none;  // why floodgate answered itself, none for a relayed response
  OutcomeSource source = OutcomeSource::upstream;
  OutcomeKind kind = OutcomeKind::response;
  bool retryable = false;
  bool client_saw_bytes = false;  // bytes of a response reached the client
  int status = 0;                 // the status the client got; 0 when it got none
  // What the backend took to answer: from the whole request reaching it to its response head
  // (Attempt::backend_latency); negative when there was no head.
  std::chrono::nanoseconds time_to_head{-1};

  // A response floodgate generates for `reason` (not none).
  static constexpr Outcome generated(Reason reason) noexcept {
    Outcome o;
    o.reason = reason;
    o.status = info(reason).status;
    switch (reason) {
      case Reason::bad_request:
      case Reason::header_timeout:
      case Reason::body_too_large:
      case Reason::uri_too_long:
      case Reason::header_too_large:
      case Reason::plain_http_to_tls:
        o.source = OutcomeSource::client;
        o.kind = OutcomeKind::client_error;
        break;
      case Reason::upstream_connect_failed:
        o.kind = OutcomeKind::connect_refused;
        o.retryable = true;
        break;
      case Reason::upstream_connect_timeout:
        o.kind = OutcomeKind::connect_timeout;
        o.retryable = true;
        break;
      case Reason::upstream_reset:
        o.kind = OutcomeKind::reset_before_response;
        o.retryable = true;
        break;
      case Reason::upstream_timeout:
        o.kind = OutcomeKind::response_timeout;
        o.retryable = true;
        break;
      case Reason::upstream_bad_response:
        o.kind = OutcomeKind::bad_response;
        break;
      case Reason::upstream_tls_failed:  // seed 004: TLS failures are terminal for retries
        o.kind = OutcomeKind::tls_failed;
        break;
      case Reason::none:
      case Reason::no_route:
      case Reason::proxy_overloaded:
      case Reason::pending_timeout:
      case Reason::generation_retired:
      case Reason::no_eligible_backend:
      case Reason::no_healthy_backend:
      case Reason::buffers_exhausted:
      case Reason::inflight_cap:
      case Reason::memory_pressure:
      case Reason::method_not_allowed:
      case Reason::denied_path:
      case Reason::authority_mismatch:
      case Reason::connect_denied:
      case Reason::too_early:
      case Reason::circuit_open:
      case Reason::brownout:
      case Reason::adaptive_limit:
      case Reason::route_cap:
      case Reason::global_cap:
      case Reason::rate_limited:
      case Reason::burst_quota_exhausted:
      case Reason::sustained_quota_exhausted:
      case Reason::selector_identity_missing:
      case Reason::selector_identity_invalid:
      case Reason::backend_timeout:
      case Reason::backend_unavailable:
      case Reason::backend_error:
      case Reason::count_:
        o.source = OutcomeSource::floodgate;
        o.kind = OutcomeKind::rejection;
        break;
    }
    return o;
  }

  // A backend's response head with `status`, `time_to_head` after the request began.
  static constexpr Outcome relayed(int status, std::chrono::nanoseconds time_to_head) noexcept {
    Outcome o;
    o.status = status;
    o.time_to_head = time_to_head;
    return o;
  }

  // floodgate answered with `status` itself, not for a failure (OPTIONS *).
  static constexpr Outcome answered(int status) noexcept {
    Outcome o;
    o.source = OutcomeSource::floodgate;
    o.kind = OutcomeKind::answered;
    o.status = status;
    return o;
  }

  // The request ends before its response is complete, by `source`: the client went away or
  // stalled (client), or the backend failed mid-response (upstream). What was already decided
  // (the status sent, the time to head) stays; nothing of it is retryable any more.
  constexpr void cut_short(OutcomeSource by) noexcept {
    source = by;
    kind = by == OutcomeSource::client ? OutcomeKind::client_aborted : OutcomeKind::cut;
    retryable = false;
  }
};

}  // namespace floodgate
