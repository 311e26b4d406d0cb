#include "floodgate/proxy/failure_policy.h"

#include <string_view>

namespace floodgate::proxy {
namespace {

// The llhttp method named `name` exactly (methods are case-sensitive, RFC 9110 section 9.1), as
// a mask bit; 0 for a token llhttp does not know (its parser refuses such requests anyway).
MethodMask method_named(std::string_view name) {
#define FLOODGATE_METHOD_BIT(NUM, NAME, STRING) \
  if (name == #STRING) return method_bit(static_cast<llhttp_method_t>(NUM));
  HTTP_METHOD_MAP(FLOODGATE_METHOD_BIT)
#undef FLOODGATE_METHOD_BIT
  return 0;
}

}  // namespace

FailurePolicy FailurePolicy::of(const resilience::Params& params) {
  FailurePolicy p;
  const resilience::CircuitBreakerParams& cb = params.circuit_breaker;
  p.breakers = cb.enabled;
  p.breakers_shadow = cb.enabled && cb.mode == resilience::Mode::shadow;
  p.limits = resilience::circuit_limits(cb);
  p.when_all_open = cb.when_all_open;
  for (const uint16_t status : cb.failure_statuses) {
    if (status >= 500 && status < 600) p.failure_statuses.set(status - 500U);
  }
  const resilience::HedgingParams& h = params.hedging;
  p.hedging = h.enabled;
  p.hedge_delay = h.delay;
  for (const std::string& m : h.safe_methods) p.hedge_methods |= method_named(m);
  return p;
}

resilience::CircuitVerdict circuit_verdict_of_status(const FailurePolicy& policy, int status) {
  return policy.failure_status(status) ? resilience::CircuitVerdict::failure
                                       : resilience::CircuitVerdict::success;
}

bool backend_failure(Reason reason) noexcept {
  switch (reason) {
    case Reason::upstream_connect_failed:
    case Reason::upstream_connect_timeout:
    case Reason::upstream_reset:
    case Reason::upstream_timeout:
    case Reason::upstream_bad_response:
    case Reason::upstream_tls_failed:
      return true;
    default:
      return false;
  }
}

std::size_t backend_failure_kind(Reason reason) noexcept {
  switch (reason) {
    case Reason::upstream_connect_failed:
      return 0;
    case Reason::upstream_connect_timeout:
      return 1;
    case Reason::upstream_reset:
      return 2;
    case Reason::upstream_timeout:
      return 3;
    case Reason::upstream_bad_response:
      return 4;
    case Reason::upstream_tls_failed:
      return 5;
    default:
      return kBackendFailureKinds;
  }
}

NoRetry retry_rule(const RetryCandidate& c) noexcept {
  const bool unsent_handshake = c.unsent && c.failure.kind == OutcomeKind::tls_failed;
  if (!c.failure.retryable && !unsent_handshake) return NoRetry::not_retryable;
  if (!c.unsent && !idempotent(c.method)) return NoRetry::method;
  if (!c.unsent && c.has_body) return NoRetry::body;
  if (c.tunnel) return NoRetry::tunnel;
  if (c.client_saw_bytes) return NoRetry::response_started;
  if (c.attempts >= 2) return NoRetry::attempts_used;
  return NoRetry::none;
}

}  // namespace floodgate::proxy
