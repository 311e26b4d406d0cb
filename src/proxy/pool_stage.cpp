#include "floodgate/proxy/pool_stage.h"

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "floodgate/proxy/exchange.h"

namespace floodgate::proxy {

PoolStage::PoolStage(const Upstream& up) noexcept
    : Stage(StageId::pool, resilience::Mode::enforce), up_(up) {}

Decision PoolStage::check(Exchange& ex, Ticket&) const noexcept {
  Admission::Result r = up_.pool->admission.admit(ex.wait.pool_node);
  switch (r.status) {
    case AdmitStatus::admitted:
      ex.permit = std::move(r.permit);
      ex.metrics->pool_admitted(up_.id);
      return Decision::go();
    case AdmitStatus::queued:
      return Decision::wait(up_.policy.pending_timeout, Reason::pending_timeout);
    case AdmitStatus::rejected:
      break;
  }
  ex.metrics->pool_rejected(up_.id, Reason::proxy_overloaded);
  // No prebuilt answer here: ClientConn::respond() sends the pool's own (with its Retry-After)
  // for every pool reason.
  return Decision::stop(Reason::proxy_overloaded);
}

void PoolStage::count_wait(Exchange& ex) const noexcept {
  ex.metrics->pool_queue_wait(up_.id, ex.now() - ex.wait.since);
}

// The wait ends for `why` here. A client that went away is counted as abandoned whatever the
// cancel finds; a timed-out or retired waiter that loses to a grant is counted when the grant
// arrives (resume()).
bool PoolStage::cancel(Exchange& ex, CancelReason why) const noexcept {
  if (why == CancelReason::client_gone) {
    ex.metrics->pool_abandoned(up_.id);
    count_wait(ex);
    return ex.wait.pool_node.cancel(why);
  }
  if (!ex.wait.pool_node.cancel(why)) return false;
  count_wait(ex);
  ex.metrics->pool_rejected(
      up_.id, why == CancelReason::retired ? Reason::generation_retired : Reason::pending_timeout);
  return true;
}

Decision PoolStage::resume(Exchange& ex, Ticket&, uint32_t result) const noexcept {
  Permit permit = ex.wait.pool_node.take_permit();             // empty unless granted
  if (ex.wait.abandoned) return Decision::stop(Reason::none);  // the grant goes on
  count_wait(ex);
  Reason refused = ex.wait.gave_up;  // the exchange gave up as the grant came: drop it
  if (refused == Reason::none && static_cast<AdmitStatus>(result) != AdmitStatus::admitted) {
    refused = Reason::proxy_overloaded;  // a reload shrank the queue
  }
  if (refused != Reason::none) {
    permit.release();
    ex.metrics->pool_rejected(up_.id, refused);
    return Decision::stop(refused);
  }
  ex.permit = std::move(permit);
  ex.metrics->pool_admitted(up_.id);
  return Decision::go();
}

Chain build_route_chain(const Upstream& up, const LocalProtection& protection,
                        std::shared_ptr<const RateLimits> rate_limits,
                        std::shared_ptr<const Quota> quota, const RouteParams& route) {
  std::vector<std::unique_ptr<const Stage>> stages;
  add_rate_limit_stage(stages, up, route, std::move(rate_limits));
  add_quota_stage(stages, up, std::move(quota));
  add_protection_stages(stages, up, protection);
  stages.push_back(std::make_unique<PoolStage>(up));
  return Chain(std::move(stages));
}

}  // namespace floodgate::proxy
