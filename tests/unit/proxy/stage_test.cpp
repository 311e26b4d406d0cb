// The stage chain as the request path drives it: run, stop, shadow, wait and resume, and the
// tickets an exchange holds until it ends, settled exactly once, in reverse order. The stages
// here are fakes that follow a script and write what happens to them into a journal.
#include "floodgate/proxy/stage.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {
namespace {

using resilience::Mode;
using Verdict = Decision::Verdict;

// What the fake stages saw, in the order they saw it.
struct Journal {
  std::vector<int> checked;           // tags, one per check()
  std::vector<int> settled;           // tags, one per settle()
  std::vector<uint64_t> values;       // Ticket::value as settle() got it back
  std::vector<Outcome> outcomes;      // the outcome each settle() got
  std::vector<bool> permit_held;      // whether the ticket still held its permit in settle()
  std::vector<int64_t> active_there;  // watched->active() during settle()
  const Admission* watched = nullptr;
};

// A stage that answers what its script says and, when told to, holds something for the exchange:
// a bare mark (held = true) or a permit of `admission`.
class FakeStage final : public Stage {
 public:
  struct Script {
    int tag = 0;
    Decision decision = Decision::go();
    bool hold = false;
    Admission* admission = nullptr;  // takes a permit from it when set
    StageId id = StageId::inflight;
    Mode mode = Mode::enforce;
  };

  FakeStage(const Script& script, Journal& journal)
      : Stage(script.id, script.mode), script_(script), journal_(journal) {}

  Decision check(Exchange&, Ticket& ticket) const noexcept override {
    journal_.checked.push_back(script_.tag);
    if (script_.hold) ticket.held = true;
    if (script_.admission != nullptr) {
      ticket.permit = std::move(script_.admission->admit(waiter_).permit);
    }
    if (ticket.holds()) ticket.value = static_cast<uint64_t>(script_.tag);
    return script_.decision;
  }

  void settle(Ticket& ticket, const Outcome& outcome) const noexcept override {
    journal_.settled.push_back(script_.tag);
    journal_.values.push_back(ticket.value);
    journal_.outcomes.push_back(outcome);
    journal_.permit_held.push_back(static_cast<bool>(ticket.permit));
    journal_.active_there.push_back(journal_.watched ? journal_.watched->active() : -1);
  }

 private:
  static void never_completes(void*, AdmitStatus) noexcept {}

  Script script_;
  Journal& journal_;
  // admit() takes a waiter to park; the admissions here have no queue, so it is never parked.
  mutable AdmissionWaiter waiter_{&FakeStage::never_completes, nullptr};
};

class StageChain : public ::testing::Test {
 protected:
  StageChain() { journal.watched = &admission; }

  Chain chain_of(std::initializer_list<FakeStage::Script> scripts) {
    std::vector<std::unique_ptr<const Stage>> stages;
    for (const FakeStage::Script& s : scripts) {
      stages.push_back(std::make_unique<FakeStage>(s, journal));
    }
    return Chain(std::move(stages));
  }

  uint64_t shadow_count(StageId stage, Reason reason) const {
    return metrics.shadow_rejections(stage_reason_index(stage, reason)).value();
  }

  // Declared before every chain and exchange of a test body, so it outlives them: a destroyed
  // exchange still settles into it.
  Journal journal;
  Admission admission{AdmissionLimits{.max_active = 4}};
  ReactorMetrics metrics{0};
};

const Decision kStopForCap = Decision::stop(Reason::inflight_cap);

// --- Running ---

TEST_F(StageChain, RunsItsStagesInTheOrderTheyWereGiven) {
  const Chain chain = chain_of({{.tag = 1}, {.tag = 2}, {.tag = 3}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::go);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2, 3}));
}

TEST_F(StageChain, EmptyChainLetsTheExchangeGo) {
  const Chain chain;
  Exchange ex;
  EXPECT_TRUE(chain.empty());
  const Decision d = chain.run(ex, metrics);
  EXPECT_EQ(d.verdict, Verdict::go);
  EXPECT_EQ(d.reason, Reason::none);
  EXPECT_EQ(ex.tickets.size(), 0u);
}

TEST_F(StageChain, FirstEnforcedStopEndsTheRunWithItsReasonAnswerAndStatus) {
  const PrebuiltAnswer answer{.keep_alive = "keep", .close = "close"};
  const Chain chain = chain_of(
      {{.tag = 1},
       {.tag = 2, .decision = Decision::stop(Reason::inflight_cap, &answer, 429)},
       {.tag = 3, .decision = Decision::stop(Reason::denied_path), .id = StageId::protocol}});
  Exchange ex;
  const Decision d = chain.run(ex, metrics);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::inflight_cap);
  EXPECT_EQ(d.answer, &answer);
  EXPECT_EQ(d.status, 429);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2}));
}

TEST_F(StageChain, EnforcedStopIsNotCountedAsAShadowRejection) {
  const Chain chain = chain_of({{.tag = 1, .decision = kStopForCap}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::stop);
  EXPECT_EQ(shadow_count(StageId::inflight, Reason::inflight_cap), 0u);
  EXPECT_EQ(ex.would_reject, Reason::none);
}

// --- Shadow mode ---

TEST_F(StageChain, ShadowStopIsCountedRememberedAndTheChainGoesOn) {
  const Chain chain =
      chain_of({{.tag = 1, .decision = kStopForCap, .mode = Mode::shadow}, {.tag = 2}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::go);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2}));
  EXPECT_EQ(shadow_count(StageId::inflight, Reason::inflight_cap), 1u);
  EXPECT_EQ(ex.would_reject, Reason::inflight_cap);
  EXPECT_EQ(ex.would_reject_stage, StageId::inflight);
}

TEST_F(StageChain, FirstShadowRefusalIsTheOneTheExchangeRemembersButEveryOneIsCounted) {
  const Chain chain = chain_of({{.tag = 1,
                                 .decision = Decision::stop(Reason::memory_pressure),
                                 .id = StageId::memory_guard,
                                 .mode = Mode::shadow},
                                {.tag = 2,
                                 .decision = Decision::stop(Reason::denied_path),
                                 .id = StageId::protocol,
                                 .mode = Mode::shadow}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::go);
  EXPECT_EQ(ex.would_reject, Reason::memory_pressure);
  EXPECT_EQ(ex.would_reject_stage, StageId::memory_guard);
  EXPECT_EQ(shadow_count(StageId::memory_guard, Reason::memory_pressure), 1u);
  EXPECT_EQ(shadow_count(StageId::protocol, Reason::denied_path), 1u);
}

TEST_F(StageChain, ShadowRefusalIsRememberedWhenALaterStageStopsTheExchange) {
  const Chain chain = chain_of(
      {{.tag = 1, .decision = kStopForCap, .mode = Mode::shadow},
       {.tag = 2, .decision = Decision::stop(Reason::denied_path), .id = StageId::protocol}});
  Exchange ex;
  const Decision d = chain.run(ex, metrics);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::denied_path);
  EXPECT_EQ(ex.would_reject, Reason::inflight_cap);
}

TEST_F(StageChain, EveryShadowedExchangeCountsOnce) {
  const Chain chain = chain_of({{.tag = 1, .decision = kStopForCap, .mode = Mode::shadow}});
  for (int i = 0; i < 3; ++i) {
    Exchange ex;
    chain.run(ex, metrics);
  }
  EXPECT_EQ(shadow_count(StageId::inflight, Reason::inflight_cap), 3u);
}

// --- Waiting ---

TEST_F(StageChain, WaitPausesTheRunAndResumeContinuesWithTheNextStage) {
  const Chain chain = chain_of({{.tag = 1}, {.tag = 2, .decision = Decision::wait()}, {.tag = 3}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::wait);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2}));
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::go);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2, 3}));  // the waiting stage ran once
}

TEST_F(StageChain, ResumedRunStillStopsAtALaterEnforcedStop) {
  const Chain chain = chain_of(
      {{.tag = 1, .decision = Decision::wait()}, {.tag = 2, .decision = kStopForCap}, {.tag = 3}});
  Exchange ex;
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::wait);
  const Decision d = chain.run(ex, metrics);
  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::inflight_cap);
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2}));
}

TEST_F(StageChain, StageThatHoldsAndWaitsKeepsItsTicketAcrossTheResume) {
  const Chain chain =
      chain_of({{.tag = 1, .decision = Decision::wait(), .hold = true}, {.tag = 2, .hold = true}});
  {
    Exchange ex;
    chain.run(ex, metrics);
    EXPECT_EQ(ex.tickets.size(), 1u);
    chain.run(ex, metrics);
    EXPECT_EQ(ex.tickets.size(), 2u);
    ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(5));
    ex.end();
  }
  EXPECT_EQ(journal.settled, (std::vector<int>{2, 1}));
}

// --- Tickets ---

TEST_F(StageChain, EndSettlesEveryHeldTicketOnceInReverseOrderWithTheOutcome) {
  const Chain chain = chain_of(
      {{.tag = 1, .hold = true}, {.tag = 2, .admission = &admission}, {.tag = 3, .hold = true}});
  Exchange ex;
  chain.run(ex, metrics);
  EXPECT_TRUE(journal.settled.empty());  // nothing is settled before the exchange ends
  ex.outcome = Outcome::generated(Reason::upstream_timeout);
  ex.end();
  EXPECT_EQ(journal.settled, (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(journal.values, (std::vector<uint64_t>{3, 2, 1}));
  for (const Outcome& o : journal.outcomes) {
    EXPECT_EQ(o.reason, Reason::upstream_timeout);
    EXPECT_EQ(o.kind, OutcomeKind::response_timeout);
    EXPECT_EQ(o.status, 504);
  }
}

TEST_F(StageChain, StagesThatHeldNothingAreNotSettled) {
  const Chain chain = chain_of({{.tag = 1, .hold = true}, {.tag = 2}, {.tag = 3, .hold = true}});
  Exchange ex;
  chain.run(ex, metrics);
  EXPECT_EQ(ex.tickets.size(), 2u);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  EXPECT_EQ(journal.settled, (std::vector<int>{3, 1}));
}

TEST_F(StageChain, TicketsTakenBeforeAnEnforcedStopAreSettledWithTheRefusal) {
  const Chain chain = chain_of(
      {{.tag = 1, .hold = true},
       {.tag = 2, .decision = Decision::stop(Reason::denied_path), .id = StageId::protocol},
       {.tag = 3, .hold = true}});
  Exchange ex;
  const Decision d = chain.run(ex, metrics);
  ex.outcome = Outcome::generated(d.reason);
  ex.end();
  EXPECT_EQ(journal.settled, (std::vector<int>{1}));
  ASSERT_EQ(journal.outcomes.size(), 1u);
  EXPECT_EQ(journal.outcomes[0].reason, Reason::denied_path);
  EXPECT_EQ(journal.outcomes[0].kind, OutcomeKind::rejection);
}

TEST_F(StageChain, EndingAnExchangeTwiceSettlesItsTicketsOnce) {
  const Chain chain = chain_of({{.tag = 1, .hold = true}, {.tag = 2, .hold = true}});
  Exchange ex;
  chain.run(ex, metrics);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  ex.outcome = Outcome::generated(Reason::upstream_reset);
  ex.end();
  EXPECT_EQ(journal.settled, (std::vector<int>{2, 1}));
  for (const Outcome& o : journal.outcomes) EXPECT_EQ(o.status, 200);
}

TEST_F(StageChain, DestroyedExchangeSettlesWhatItStillHolds) {
  const Chain chain = chain_of({{.tag = 1, .hold = true}, {.tag = 2, .admission = &admission}});
  {
    Exchange ex;
    chain.run(ex, metrics);
    EXPECT_EQ(admission.active(), 1);
  }
  EXPECT_EQ(journal.settled, (std::vector<int>{2, 1}));
  EXPECT_EQ(admission.active(), 0);
}

TEST_F(StageChain, DestroyedExchangeSettlesNothingItAlreadySettled) {
  const Chain chain = chain_of({{.tag = 1, .hold = true}});
  {
    Exchange ex;
    chain.run(ex, metrics);
    ex.outcome = Outcome::relayed(204, std::chrono::milliseconds(1));
    ex.end();
  }
  EXPECT_EQ(journal.settled, (std::vector<int>{1}));
}

TEST_F(StageChain, PermitInATicketIsReleasedRightAfterItsStageSettles) {
  const Chain chain = chain_of({{.tag = 1, .admission = &admission}});
  Exchange ex;
  chain.run(ex, metrics);
  EXPECT_EQ(admission.active(), 1);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  ASSERT_EQ(journal.settled.size(), 1u);
  EXPECT_TRUE(journal.permit_held[0]);    // settle() still sees its permit
  EXPECT_EQ(journal.active_there[0], 1);  // and the slot is still taken while it runs
  EXPECT_EQ(admission.active(), 0);       // then it is given back
}

TEST_F(StageChain, PermitOfAStageIsStillHeldWhileLaterStagesSettle) {
  const Chain chain = chain_of({{.tag = 1, .admission = &admission}, {.tag = 2, .hold = true}});
  Exchange ex;
  chain.run(ex, metrics);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  EXPECT_EQ(journal.settled, (std::vector<int>{2, 1}));
  EXPECT_EQ(journal.active_there, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(admission.active(), 0);
}

TEST_F(StageChain, EndedExchangeIsReadyForTheNextRequest) {
  const Chain chain = chain_of(
      {{.tag = 1, .decision = kStopForCap, .hold = true, .mode = Mode::shadow}, {.tag = 2}});
  Exchange ex;
  ex.request.method = "GET";
  chain.run(ex, metrics);
  ASSERT_EQ(ex.cursor, 2u);
  ASSERT_EQ(ex.would_reject, Reason::inflight_cap);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  EXPECT_EQ(ex.cursor, 0u);
  EXPECT_EQ(ex.would_reject, Reason::none);
  EXPECT_EQ(ex.would_reject_stage, StageId::count_);
  EXPECT_EQ(ex.tickets.size(), 0u);
  EXPECT_TRUE(ex.request.method.empty());
}

TEST_F(StageChain, ReusedExchangeRunsEveryStageAgainAndSettlesAgain) {
  const Chain chain = chain_of({{.tag = 1, .hold = true}, {.tag = 2}});
  Exchange ex;
  chain.run(ex, metrics);
  ex.outcome = Outcome::relayed(200, std::chrono::milliseconds(1));
  ex.end();
  EXPECT_EQ(chain.run(ex, metrics).verdict, Verdict::go);
  ex.outcome = Outcome::relayed(500, std::chrono::milliseconds(1));
  ex.end();
  EXPECT_EQ(journal.checked, (std::vector<int>{1, 2, 1, 2}));
  EXPECT_EQ(journal.settled, (std::vector<int>{1, 1}));
  ASSERT_EQ(journal.outcomes.size(), 2u);
  EXPECT_EQ(journal.outcomes[1].status, 500);
}

}  // namespace
}  // namespace floodgate::proxy
