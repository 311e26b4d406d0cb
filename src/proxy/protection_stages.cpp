#include "floodgate/proxy/protection_stages.h"

#include <algorithm>
#include <string>
#include <utility>

#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::proxy {

namespace {

class BrownoutStage final : public Stage {
 public:
  BrownoutStage(const Upstream& up, const LocalProtection& p)
      : Stage(StageId::brownout, p.params.brownout.mode),
        up_id_(up.id),
        exemptions_(p.params.inflight),
        front_cap_(p.front_cap),
        core_(p.core(up.params.name)),
        thresholds_(p.brownout_thresholds),
        state_(p.state),
        answer_(prebuild_answer(Reason::brownout,
                                http::retry_after_seconds(p.params.route_queue.retry_after))) {}

  Decision check(Exchange& ex, Ticket&) const noexcept override {
    // Requests outside the in-flight accounting (streams, tunnels, preflights) add nothing to
    // the pressure brownout relieves: they neither judge it nor are shed.
    if (ex.exempt_from_inflight(exemptions_)) return Decision::go();
    const resilience::AdaptiveLimiter& adaptive = state_->adaptive;
    // A ceiling at the front cap is the cap, whose own 503 inflight_cap governs there: brownout
    // measures a ceiling below it (lowered by the controller, or a max_limit of its own).
    const uint32_t ceiling = adaptive.ceiling();
    const uint32_t measured = front_cap_ != 0 && ceiling >= front_cap_ ? 0 : ceiling;
    const bool active =
        state_->brownout.observe(ex.started, adaptive.in_flight(), measured, thresholds_);
    if (!active || core_) return Decision::go();
    if (mode() == resilience::Mode::enforce)
      ex.metrics->protection_rejected(up_id_, Reason::brownout);
    return Decision::stop(Reason::brownout, &answer_);
  }

 private:
  uint32_t up_id_;
  resilience::InflightExemptions exemptions_;
  uint32_t front_cap_;
  bool core_;
  resilience::BrownoutThresholds thresholds_;
  std::shared_ptr<ProtectionState> state_;
  PrebuiltAnswer answer_;
};

class AdaptiveStage final : public Stage {
 public:
  AdaptiveStage(const Upstream& up, const LocalProtection& p)
      : Stage(StageId::adaptive_admission, p.params.adaptive_admission.mode),
        up_id_(up.id),
        exemptions_(p.params.inflight),
        high_latency_(p.params.adaptive_admission.high_latency),
        state_(p.state),
        answer_(prebuild_answer(Reason::adaptive_limit,
                                http::retry_after_seconds(p.params.inflight.retry_after))) {}

  Decision check(Exchange& ex, Ticket& ticket) const noexcept override {
    if (ex.exempt_from_inflight(exemptions_)) return Decision::go();  // streams, tunnels: no sample
    resilience::AdaptiveLimiter& adaptive = state_->adaptive;
    adaptive.tick(ex.started);
    ticket.permit = adaptive.try_enter();
    if (!ticket.permit) {
      adaptive.note_in_flight(ex.reactor_index, adaptive.ceiling());  // the ceiling is in use
      if (mode() == resilience::Mode::enforce) {
        ex.metrics->protection_rejected(up_id_, Reason::adaptive_limit);
      }
      return Decision::stop(Reason::adaptive_limit, &answer_);
    }
    ticket.value = ex.reactor_index;
    adaptive.note_in_flight(ex.reactor_index, static_cast<uint32_t>(adaptive.in_flight()));
    return Decision::go();
  }

  void settle(Ticket& ticket, const Outcome& outcome) const noexcept override {
    state_->adaptive.record(static_cast<unsigned>(ticket.value),
                            resilience::sample_of(outcome, high_latency_));
  }

 private:
  uint32_t up_id_;
  resilience::InflightExemptions exemptions_;
  std::chrono::nanoseconds high_latency_;
  std::shared_ptr<ProtectionState> state_;
  PrebuiltAnswer answer_;
};

// A concurrent cap: the upstream's own (its Pool's route_cap) or the global one.
class CapStage final : public Stage {
 public:
  CapStage(const Upstream& up, const LocalProtection& p, Admission& cap, Reason reason)
      : Stage(StageId::route_queue, p.params.route_queue.mode),
        up_id_(up.id),
        exemptions_(p.params.inflight),
        cap_(cap),
        reason_(reason),
        state_(p.state),
        answer_(
            prebuild_answer(reason, http::retry_after_seconds(p.params.route_queue.retry_after))) {}

  Decision check(Exchange& ex, Ticket& ticket) const noexcept override {
    // WebSockets and event streams held open for hours are not concurrency the caps bound.
    if (ex.exempt_from_inflight(exemptions_)) return Decision::go();
    ticket.permit = cap_.try_admit();
    if (ticket.permit) return Decision::go();
    if (mode() == resilience::Mode::enforce) ex.metrics->protection_rejected(up_id_, reason_);
    return Decision::stop(reason_, &answer_);
  }

 private:
  uint32_t up_id_;
  resilience::InflightExemptions exemptions_;
  Admission& cap_;  // the Pool's or the ProtectionState's, both outliving the stage
  Reason reason_;
  std::shared_ptr<ProtectionState> state_;  // keeps the global cap alive
  PrebuiltAnswer answer_;
};

}  // namespace

LocalProtection LocalProtection::of(const resilience::Params& params, uint32_t max_inflight,
                                    std::shared_ptr<ProtectionState> state) {
  LocalProtection p;
  p.state = std::move(state);
  p.params = params;
  const resilience::AdaptiveAdmissionParams& a = params.adaptive_admission;
  if (a.enabled) {
    // max_limit, or the front cap when it is 0 (none when that is 0 too); never above the cap.
    uint32_t max = a.max_limit != 0 ? a.max_limit : max_inflight;
    if (max_inflight != 0) max = std::min(max, max_inflight);
    p.aimd = {.min = std::min(a.min_limit, max),
              .max = max,
              .decrease_step = a.decrease_step,
              .increase_step = a.increase_step};
  }
  // A ceiling derived from a front cap in shadow mode would enforce the very number the
  // operator asked only to observe: the ceiling, and brownout measured against it, observe too.
  if (a.max_limit == 0 && params.inflight.mode == resilience::Mode::shadow) {
    p.params.adaptive_admission.mode = resilience::Mode::shadow;
    p.params.brownout.mode = resilience::Mode::shadow;
  }
  p.window = a.window;
  p.front_cap = max_inflight;
  p.brownout = params.brownout.enabled;
  p.brownout_thresholds = {.trigger_percent = params.brownout.trigger_inflight_percent,
                           .recover_percent = params.brownout.recover_inflight_percent,
                           .dwell = a.window};
  p.global_cap = params.route_queue.global_cap;
  return p;
}

uint32_t LocalProtection::route_cap(std::string_view name) const {
  const auto& caps = params.route_queue.caps;
  const auto it = caps.find(name);
  return it != caps.end() ? it->second : params.route_queue.default_cap;
}

bool LocalProtection::core(std::string_view name) const {
  const auto& core = params.brownout.core_routes;
  return std::find(core.begin(), core.end(), name) != core.end();
}

void add_protection_stages(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                           const LocalProtection& p) {
  // Brownout needs the ceiling it measures against.
  if (p.brownout && p.aimd.max != 0) stages.push_back(std::make_unique<BrownoutStage>(up, p));
  if (p.aimd.max != 0) stages.push_back(std::make_unique<AdaptiveStage>(up, p));
  stages.push_back(std::make_unique<CapStage>(up, p, up.pool->route_cap, Reason::route_cap));
  stages.push_back(std::make_unique<CapStage>(up, p, p.state->global_cap, Reason::global_cap));
}

}  // namespace floodgate::proxy
