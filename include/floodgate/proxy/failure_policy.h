// FailurePolicy: what a generation's [resilience.circuit_breaker], [resilience.retry_budget] and
// [resilience.hedging] resolve to on the request path (issue 13; docs/resilience.md), and the
// retry eligibility rules as a pure function.
//
// The breakers themselves belong to the backends (Backend::breaker, one per resolved address,
// kept across reloads); the budgets are long-lived objects the generation holds (a reload that
// keeps a budget's ratio and window keeps its counts, app/generations.cpp). This is the part
// that is only configuration: read-only once the generation is built.
//
// Thread-safety: immutable after build; every reactor reads it.
#pragma once

#include <llhttp.h>

#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "floodgate/core/outcome.h"
#include "floodgate/resilience/circuit_breaker.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/retry_budget.h"

namespace floodgate::proxy {

// A bit per llhttp method (llhttp_method_t is below 64).
using MethodMask = uint64_t;
constexpr MethodMask method_bit(llhttp_method_t m) noexcept {
  return static_cast<unsigned>(m) < 64 ? MethodMask{1} << static_cast<unsigned>(m) : 0;
}
// The methods that may be retried (seed 004): GET, HEAD, PUT, DELETE, OPTIONS, TRACE.
inline constexpr MethodMask kIdempotentMethods = method_bit(HTTP_GET) | method_bit(HTTP_HEAD) |
                                                 method_bit(HTTP_PUT) | method_bit(HTTP_DELETE) |
                                                 method_bit(HTTP_OPTIONS) | method_bit(HTTP_TRACE);
constexpr bool idempotent(llhttp_method_t m) noexcept {
  return (kIdempotentMethods & method_bit(m)) != 0;
}

struct FailurePolicy {
  // -- Circuit breakers.
  bool breakers = true;  // circuit_breaker.enabled: selection consults them, attempts record
  // mode = "shadow": attempts record, selection ignores the breakers (would_reject instead).
  bool breakers_shadow = false;
  resilience::CircuitLimits limits{};
  resilience::WhenAllOpen when_all_open = resilience::WhenAllOpen::least_recently_failed;
  std::bitset<100> failure_statuses{};  // status - 500; none by default (issue 35)

  // -- The global retry budget, set by the generation's builder; null when
  // retry_budget.enabled is false (no limit). The per-upstream one is Upstream::retry_budget.
  std::shared_ptr<resilience::RetryBudget> global_budget;

  // -- Hedging (the per-upstream allowlist is Upstream::hedge).
  bool hedging = false;
  std::chrono::milliseconds hedge_delay{100};
  MethodMask hedge_methods = 0;

  // A backend response with `status` counts as a failure of its backend.
  bool failure_status(int status) const noexcept {
    return status >= 500 && status < 600 &&
           failure_statuses[static_cast<std::size_t>(status - 500)];
  }

  // Everything but the budgets, from the configuration.
  static FailurePolicy of(const resilience::Params& params);
};

// How a backend's attempt counts for its breaker: a failure (issue 13's list: connect refused or
// timed out, reset before a response, response timeout, bad response, a status in
// failure_statuses), a success (any other backend response), or nothing (floodgate's own doing,
// the client's, a cancelled attempt).
resilience::CircuitVerdict circuit_verdict_of_status(const FailurePolicy& policy, int status);
// For an attempt that failed before a response with `reason`; false when it is not the
// backend's failure (nothing is recorded).
bool backend_failure(Reason reason) noexcept;
// The five backend failures (connect failed, connect timeout, reset, response timeout, bad
// response), numbered 0..4 for per-kind state such as the process log's throttles; a reason
// that is not a backend failure gets kBackendFailureKinds.
inline constexpr std::size_t kBackendFailureKinds = 6;
std::size_t backend_failure_kind(Reason reason) noexcept;
// The four transitions of a circuit (closed -> open, open -> half_open, half_open -> closed,
// half_open -> open), for per-transition state such as the process log's throttles
// (circuit_log.h).
inline constexpr std::size_t kCircuitTransitions = 4;

// What the retry rules see of a failed attempt and its exchange.
struct RetryCandidate {
  Outcome failure;  // the failed attempt's outcome (Outcome::generated)
  llhttp_method_t method = HTTP_GET;
  bool has_body = false;
  bool tunnel = false;            // an upgrade offer or CONNECT
  bool client_saw_bytes = false;  // a byte of a response reached the client
  unsigned attempts = 1;          // attempts the exchange has made, this one included
  // Nothing of the request left floodgate: the attempt failed before its connection was
  // established (connect refused or timed out, a failed TLS handshake) and no byte of the body
  // was taken from the client. Such a request is retried whatever its method and body, and a
  // failed TLS handshake is then retryable too: no backend can have acted on it.
  bool unsent = false;
};

// Why a failed attempt may not be retried, in the seed's order; none when it may be (then the
// budget and an alternate backend decide, on the request path).
enum class NoRetry : uint8_t {
  none,
  not_retryable,     // not a timeout or a transport failure (a bad response, floodgate's own)
  method,            // not idempotent
  body,              // the request has a body: it cannot be replayed
  tunnel,            // an upgrade or CONNECT
  response_started,  // the client has bytes of a response already
  attempts_used,     // the exchange has made its one retry (or a hedge)
};
NoRetry retry_rule(const RetryCandidate& c) noexcept;

}  // namespace floodgate::proxy
