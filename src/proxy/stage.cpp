#include "floodgate/proxy/stage.h"

#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/exchange.h"

namespace floodgate::proxy {

PrebuiltAnswer prebuild_answer(Reason reason, uint32_t retry_after, int status,
                               std::string_view extra) {
  PrebuiltAnswer a;
  for (const bool close : {false, true}) {
    (close ? a.close : a.keep_alive) =
        http::build_generated_response({.reason = reason,
                                        .close = close,
                                        .retry_after_seconds = retry_after,
                                        .status = status,
                                        .extra_headers = extra});
  }
  return a;
}

void TicketBook::settle(const Outcome& outcome) noexcept {
  while (count_ > 0) {
    Ticket& t = tickets_[--count_];
    t.stage->settle(t, outcome);
    t = Ticket{};  // releases the permit
  }
}

Decision Chain::run(Exchange& exchange, ReactorMetrics& metrics) const noexcept {
  while (exchange.cursor < stages_.size()) {
    const Stage& stage = *stages_[exchange.cursor++];
    Ticket& ticket = exchange.tickets.next(stage);
    const Decision d = stage.check(exchange, ticket);
    exchange.tickets.commit();
    switch (d.verdict) {
      case Decision::Verdict::go:
        break;
      case Decision::Verdict::wait:
        exchange.wait.stage = &stage;  // the exchange's owner parks it (exchange.h, Wait)
        exchange.wait.chain = this;
        return d;
      case Decision::Verdict::stop:
        if (enforced(exchange, stage, d, metrics)) return d;
        break;
    }
  }
  return Decision::go();
}

bool Chain::enforced(Exchange& exchange, const Stage& stage, const Decision& d,
                     ReactorMetrics& metrics) noexcept {
  if (d.verdict != Decision::Verdict::stop) return false;
  if (stage.mode() == resilience::Mode::enforce || d.always) return true;
  metrics.shadow_rejected(stage.id(), d.reason);
  if (exchange.would_reject == Reason::none) {
    exchange.would_reject = d.reason;
    exchange.would_reject_stage = stage.id();
  }
  return false;
}

}  // namespace floodgate::proxy
