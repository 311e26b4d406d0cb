// Why floodgate answered a request itself. Every generated response carries its reason in the
// X-Floodgate-Reason header, counts in floodgate_responses_generated_total{reason}, and appears
// in the access log. docs/http.md ("Generated responses and reasons") keeps the whole list;
// a new reason is appended to the enum, before count_.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace floodgate {

enum class Reason : unsigned char {
  none = 0,  // the response came from a backend
  bad_request,
  header_timeout,
  body_too_large,
  uri_too_long,
  header_too_large,
  no_route,
  upstream_connect_failed,
  upstream_reset,
  upstream_bad_response,
  upstream_connect_timeout,
  upstream_timeout,
  proxy_overloaded,
  pending_timeout,
  generation_retired,
  no_eligible_backend,
  no_healthy_backend,
  buffers_exhausted,
  inflight_cap,        // [resilience.inflight]
  memory_pressure,     // [resilience.memory_guard]
  method_not_allowed,  // [resilience.protocol]
  denied_path,
  authority_mismatch,
  connect_denied,
  circuit_open,    // [resilience.circuit_breaker]
  brownout,        // [resilience.brownout]
  adaptive_limit,  // [resilience.adaptive_admission]
  route_cap,       // [resilience.route_queue]
  global_cap,
  rate_limited,           // [[resilience.scoped_rate_limits]]
  burst_quota_exhausted,  // [resilience.quota]
  sustained_quota_exhausted,
  selector_identity_missing,
  selector_identity_invalid,
  backend_timeout,
  backend_unavailable,
  backend_error,
  upstream_tls_failed,  // [upstreams.tls]
  too_early,            // resilience.protocol.allow_0rtt
  plain_http_to_tls,    // [[server.tls]]: a plain HTTP request on a TLS listener
  count_                // number of reasons; keep last
};

inline constexpr std::size_t kReasonCount = static_cast<std::size_t>(Reason::count_);

struct ReasonInfo {
  std::string_view name;    // X-Floodgate-Reason value and metric label
  int status;               // HTTP status floodgate answers with
  std::string_view phrase;  // status line reason phrase
  std::string_view body;    // short human-readable body (one line, no trailing newline)
};

inline constexpr std::array<ReasonInfo, kReasonCount> kReasons{{
    {"", 0, "", ""},
    {"bad_request", 400, "Bad Request", "malformed or ambiguous request"},
    {"header_timeout", 408, "Request Timeout", "request head not received in time"},
    {"body_too_large", 413, "Content Too Large", "request body exceeds server.max_body_bytes"},
    {"uri_too_long", 414, "URI Too Long", "request-target exceeds server.max_uri_bytes"},
    {"header_too_large", 431, "Request Header Fields Too Large",
     "request header fields exceed server.max_header_bytes or server.max_headers"},
    {"no_route", 404, "Not Found", "no route matches this host and path"},
    {"upstream_connect_failed", 502, "Bad Gateway", "could not connect to the backend"},
    {"upstream_reset", 502, "Bad Gateway", "the backend closed the connection before responding"},
    {"upstream_bad_response", 502, "Bad Gateway", "the backend sent a malformed response"},
    {"upstream_connect_timeout", 504, "Gateway Timeout", "timed out connecting to the backend"},
    {"upstream_timeout", 504, "Gateway Timeout", "the backend did not respond in time"},
    {"proxy_overloaded", 503, "Service Unavailable",
     "the upstream is at its concurrency limit and its queue is full"},
    {"pending_timeout", 503, "Service Unavailable",
     "waited the upstream's pending_timeout for a free slot"},
    {"generation_retired", 503, "Service Unavailable",
     "the configuration this request waited under was retired"},
    {"no_eligible_backend", 503, "Service Unavailable",
     "every backend of the upstream is at its max_active_per_backend"},
    {"no_healthy_backend", 503, "Service Unavailable",
     "active health checks marked every backend of the upstream down"},
    {"buffers_exhausted", 503, "Service Unavailable",
     "the proxy's buffer memory is at server.max_buffers_per_reactor"},
    {"inflight_cap", 503, "Service Unavailable",
     "the proxy is at resilience.inflight.max_inflight requests in flight"},
    {"memory_pressure", 503, "Service Unavailable",
     "the host's available memory is below resilience.memory_guard.min_available"},
    {"method_not_allowed", 405, "Method Not Allowed",
     "the method is not in resilience.protocol.allowed_methods"},
    {"denied_path", 403, "Forbidden", "the path is in resilience.protocol.denied_path_prefixes"},
    {"authority_mismatch", 400, "Bad Request",
     "the absolute-form authority differs from the Host header"},
    // 403 for a CONNECT to an authority outside the allowlists; 405 (with Allow) when
    // resilience.protocol.allow_connect is false.
    {"connect_denied", 403, "Forbidden", "CONNECT to this authority is not allowed"},
    {"circuit_open", 503, "Service Unavailable",
     "every backend of the upstream has an open circuit breaker"},
    {"brownout", 503, "Service Unavailable",
     "the proxy is in brownout and this upstream is not in resilience.brownout.core_routes"},
    {"adaptive_limit", 503, "Service Unavailable",
     "the proxy is at its adaptive concurrency limit (resilience.adaptive_admission)"},
    {"route_cap", 503, "Service Unavailable",
     "the upstream is at its resilience.route_queue cap of concurrent requests"},
    {"global_cap", 503, "Service Unavailable",
     "the proxy is at resilience.route_queue.global_cap concurrent routed requests"},
    {"rate_limited", 429, "Too Many Requests",
     "a scoped rate limit is exhausted (X-Floodgate-Limit names it); retry after Retry-After"},
    {"burst_quota_exhausted", 429, "Too Many Requests",
     "the burst window of a quota policy is exhausted (X-Floodgate-Quota names it); retry "
     "after Retry-After"},
    {"sustained_quota_exhausted", 429, "Too Many Requests",
     "the sustained window of a quota policy is exhausted (X-Floodgate-Quota names it); retry "
     "after Retry-After"},
    {"selector_identity_missing", 429, "Too Many Requests",
     "the request lacks an identity a quota policy's selector needs (X-Floodgate-Quota names "
     "it)"},
    {"selector_identity_invalid", 429, "Too Many Requests",
     "an identity a quota policy's selector reads is longer than 256 bytes (X-Floodgate-Quota "
     "names it)"},
    {"backend_timeout", 503, "Service Unavailable",
     "the quota backend did not answer within resilience.quota.backend.command_timeout"},
    {"backend_unavailable", 503, "Service Unavailable",
     "the quota backend is unreachable or full and the request cannot be counted"},
    {"backend_error", 503, "Service Unavailable",
     "the quota backend answered with an error and the request cannot be counted"},
    {"upstream_tls_failed", 502, "Bad Gateway",
     "the TLS handshake with the backend failed or its certificate was refused"},
    {"too_early", 425, "Too Early",
     "the request arrived in TLS early data (0-RTT) and its method is not in "
     "resilience.protocol.early_data_safe_methods; send it again once the handshake is done"},
    {"plain_http_to_tls", 400, "Bad Request",
     "this port speaks HTTPS: send the request with TLS (an https:// URL)"},
}};

constexpr const ReasonInfo& info(Reason r) {
  return kReasons[static_cast<std::size_t>(r)];
}

// A pool's admission rejections: 503s that carry the pool's Retry-After and count in
// floodgate_pool_rejected_total{reason}.
inline constexpr std::array<Reason, 4> kPoolRejections{
    Reason::proxy_overloaded, Reason::pending_timeout, Reason::generation_retired,
    Reason::no_eligible_backend};

// The index of `r` in kPoolRejections, or kPoolRejections.size() when it is not one.
constexpr std::size_t pool_rejection_index(Reason r) {
  std::size_t i = 0;
  while (i < kPoolRejections.size() && kPoolRejections[i] != r) ++i;
  return i;
}

// The local protection's rejections (issue 14), counted per upstream.
inline constexpr std::array<Reason, 4> kProtectionRejections{
    Reason::brownout, Reason::adaptive_limit, Reason::route_cap, Reason::global_cap};

constexpr std::size_t protection_rejection_index(Reason r) {
  std::size_t i = 0;
  while (i < kProtectionRejections.size() && kProtectionRejections[i] != r) ++i;
  return i;
}

}  // namespace floodgate
