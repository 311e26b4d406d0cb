// Pool admission (docs/configuration.md, [upstreams.resilience]), the innermost stage of
// every route's chain: a routed request takes a slot of its pool (upstream/admission.h), waits
// for one in the pool's FIFO, or is turned away with 503 and the pool's Retry-After.
//
// A request that waits is parked through the exchange's one waiting mechanism (Wait,
// exchange.h) with the pool's pending_timeout as its deadline. The grant (or a rejection when
// a reload shrank the queue) comes from whichever thread released a slot; the exchange gives
// up for its deadline, its client going away or its generation retiring, and a cancel that
// loses to a grant already on its way hands that grant to the next waiter.
//
// The slot is the exchange's (Exchange::permit), not a ticket: backend selection gives it back
// at once when no backend can take the request, and the exchange gives it back after its
// backend's in-flight count and before the stages' tickets.
//
// Thread-safety: immutable once built; the admission is the pool's, shared by every reactor.
#pragma once

#include <cstdint>

#include "floodgate/proxy/snapshot.h"
#include "floodgate/proxy/stage.h"

namespace floodgate::proxy {

class PoolStage final : public Stage {
 public:
  // `up` outlives the stage (both belong to one snapshot).
  explicit PoolStage(const Upstream& up) noexcept;

  Decision check(Exchange& ex, Ticket& ticket) const noexcept override;
  bool cancel(Exchange& ex, CancelReason why) const noexcept override;
  Decision resume(Exchange& ex, Ticket& ticket, uint32_t result) const noexcept override;

 private:
  void count_wait(Exchange& ex) const noexcept;

  const Upstream& up_;
};

// A route's chain, built with its generation: the stages configured for the route (the scoped
// rate limits first, rate_limit_stage.h; then the quota, quota_stage.h), the local protection
// (protection_stages.h), pool admission last. `route` is the [[routes]] entry the chain serves
// (the bucket of its requests that lack a rule's key, missing_key = "route").
Chain build_route_chain(const Upstream& up, const LocalProtection& protection,
                        std::shared_ptr<const RateLimits> rate_limits = nullptr,
                        std::shared_ptr<const Quota> quota = nullptr,
                        const RouteParams& route = RouteParams{});

}  // namespace floodgate::proxy
