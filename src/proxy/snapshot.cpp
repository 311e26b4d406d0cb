#include "floodgate/proxy/snapshot.h"

#include <cstddef>

#include "floodgate/http/rewrite.h"

namespace floodgate::proxy {

Policy Policy::of(const ResilienceParams& r) {
  Policy p;
  p.limits = AdmissionLimits{r.max_active_requests, r.max_pending_requests};
  p.max_active_per_backend = r.max_active_per_backend;
  p.pending_timeout = r.pending_timeout;
  p.retry_after_seconds = http::retry_after_seconds(r.retry_after);
  return p;
}

void Upstream::apply_policy() {
  policy = Policy::of(params.resilience);
  for (std::size_t r = 0; r < kPoolRejections.size(); ++r) {
    for (const bool close : {false, true}) {
      rejections[r][close ? 1 : 0] =
          http::build_generated_response(kPoolRejections[r], close, policy.retry_after_seconds);
    }
  }
}

}  // namespace floodgate::proxy
