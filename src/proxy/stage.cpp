#include "floodgate/proxy/stage.h"

#include "floodgate/proxy/exchange.h"

namespace floodgate::proxy {

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
        return d;  // the stage resumes the chain after itself
      case Decision::Verdict::stop:
        if (stage.mode() == resilience::Mode::enforce) return d;
        metrics.shadow_rejected(stage.id(), d.reason);
        if (exchange.would_reject == Reason::none) {
          exchange.would_reject = d.reason;
          exchange.would_reject_stage = stage.id();
        }
        break;
    }
  }
  return Decision::go();
}

}  // namespace floodgate::proxy
