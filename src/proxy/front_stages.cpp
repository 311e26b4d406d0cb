#include "floodgate/proxy/front_stages.h"

#include <string>
#include <utility>
#include <vector>

#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/exchange.h"

namespace floodgate::proxy {

namespace {

class InflightStage final : public Stage {
 public:
  InflightStage(const resilience::InflightParams& p, std::shared_ptr<FrontState> state)
      : Stage(StageId::inflight, p.mode),
        exemptions_(p),
        state_(std::move(state)),
        answer_(prebuild_answer(Reason::inflight_cap, http::retry_after_seconds(p.retry_after))) {}

  Decision check(Exchange& ex, Ticket& ticket) const noexcept override {
    if (ex.exempt_from_inflight(exemptions_)) return Decision::go();
    ticket.permit = state_->inflight.try_enter();
    if (!ticket.permit) return Decision::stop(Reason::inflight_cap, &answer_);
    return Decision::go();
  }

 private:
  resilience::InflightExemptions exemptions_;
  std::shared_ptr<FrontState> state_;
  PrebuiltAnswer answer_;
};

class MemoryGuardStage final : public Stage {
 public:
  MemoryGuardStage(const resilience::MemoryGuardParams& p, std::shared_ptr<FrontState> state)
      : Stage(StageId::memory_guard, p.mode), state_(std::move(state)) {}

  Decision check(Exchange& ex, Ticket&) const noexcept override {
    return state_->memory.refuses(ex.request) ? Decision::stop(Reason::memory_pressure)
                                              : Decision::go();
  }

 private:
  std::shared_ptr<FrontState> state_;
};

class ProtocolStage final : public Stage {
 public:
  explicit ProtocolStage(const resilience::ProtocolParams& p)
      : Stage(StageId::protocol, p.mode), policy_(p) {
    const std::string allow = "Allow: " + std::string(policy_.allow()) + "\r\n";
    method_not_allowed_ = prebuild_answer(Reason::method_not_allowed, 0, 405, allow);
    connect_not_allowed_ = prebuild_answer(Reason::connect_denied, 0, 405, allow);
    connect_denied_ = prebuild_answer(Reason::connect_denied, 0, 403);
    denied_path_ = prebuild_answer(Reason::denied_path, 0);
    authority_mismatch_ = prebuild_answer(Reason::authority_mismatch, 0);
    too_early_ = prebuild_answer(Reason::too_early, 0);
  }

  Decision check(Exchange& ex, Ticket&) const noexcept override {
    const resilience::Verdict v = policy_.check(ex.request);
    if (v.pass()) return Decision::go();
    switch (v.reason) {
      case Reason::method_not_allowed:
        return Decision::stop(v.reason, &method_not_allowed_, 405);
      case Reason::connect_denied:
        return v.status == 405 ? Decision::stop(v.reason, &connect_not_allowed_, 405)
                               : Decision::stop(v.reason, &connect_denied_, 403);
      case Reason::denied_path:
        return Decision::stop(v.reason, &denied_path_);
      case Reason::too_early:  // replay protection: enforced in shadow mode too
        return Decision::stop_always(v.reason, &too_early_);
      default:
        return Decision::stop(v.reason, &authority_mismatch_);
    }
  }

 private:
  resilience::ProtocolPolicy policy_;
  PrebuiltAnswer method_not_allowed_;
  PrebuiltAnswer connect_not_allowed_;
  PrebuiltAnswer connect_denied_;
  PrebuiltAnswer denied_path_;
  PrebuiltAnswer authority_mismatch_;
  PrebuiltAnswer too_early_;
};

}  // namespace

Chain build_front_chain(const resilience::Params& params, uint32_t max_inflight,
                        const std::shared_ptr<FrontState>& state) {
  std::vector<std::unique_ptr<const Stage>> stages;
  if (max_inflight != 0) stages.push_back(std::make_unique<InflightStage>(params.inflight, state));
  if (params.memory_guard.automatic || params.memory_guard.min_available_mib != 0) {
    stages.push_back(std::make_unique<MemoryGuardStage>(params.memory_guard, state));
  }
  stages.push_back(std::make_unique<ProtocolStage>(params.protocol));
  return Chain(std::move(stages));
}

}  // namespace floodgate::proxy
