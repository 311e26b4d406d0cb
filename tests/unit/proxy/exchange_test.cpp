// The exchange's life cycle as a client connection drives it, one request after another:
// begin forgets the previous request, the outcome is decided where it happens and keeps
// whether the client saw bytes, end gives back the pool slot before the stages settle their
// tickets with that outcome, exactly once, and lets the generation go. The attempts are
// embedded, so a retry or a hedge allocates nothing.
#include "floodgate/proxy/exchange.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {
namespace {

// A stage that holds a mark for every exchange it admits and records how it was settled.
class HoldingStage final : public Stage {
 public:
  struct Seen {
    std::vector<Outcome> outcomes;
    std::vector<int64_t> pool_active;  // the pool's active count during each settle()
    const Admission* pool = nullptr;
  };

  explicit HoldingStage(Seen& seen)
      : Stage(StageId::inflight, resilience::Mode::enforce), seen_(seen) {}

  Decision check(Exchange&, Ticket& ticket) const noexcept override {
    ticket.held = true;
    return Decision::go();
  }
  void settle(Ticket&, const Outcome& outcome) const noexcept override {
    seen_.outcomes.push_back(outcome);
    seen_.pool_active.push_back(seen_.pool != nullptr ? seen_.pool->active() : -1);
  }

 private:
  Seen& seen_;
};

class ExchangeLife : public ::testing::Test {
 protected:
  ExchangeLife() {
    seen.pool = &pool;
    std::vector<std::unique_ptr<const Stage>> stages;
    stages.push_back(std::make_unique<HoldingStage>(seen));
    chain = Chain(std::move(stages));
  }

  // Through the chain and admitted to the pool, as a routed request is.
  void admit(Exchange& ex) {
    ASSERT_EQ(chain.run(ex, metrics).verdict, Decision::Verdict::go);
    ex.permit = pool.try_admit();
    ASSERT_TRUE(ex.permit);
  }

  HoldingStage::Seen seen;  // outlives every exchange of a test body
  Admission pool{AdmissionLimits{.max_active = 2}};
  ReactorMetrics metrics{0};
  Chain chain;
  const std::chrono::steady_clock::time_point t0{std::chrono::seconds(100)};
};

TEST_F(ExchangeLife, EmbedsTwoAttemptsSoARetryOrAHedgeAllocatesNothing) {
  static_assert(std::is_same_v<decltype(Exchange::attempts), std::array<Attempt, 2>>);
  Exchange ex;
  EXPECT_EQ(ex.free_attempt(), &ex.attempts[0]);
  EXPECT_EQ(&ex.attempt(), &ex.attempts[0]);
  for (const Attempt& a : ex.attempts) {
    EXPECT_FALSE(a.started());
    EXPECT_EQ(a.backend(), -1);
    EXPECT_FALSE(a.head_ready());
    EXPECT_FALSE(a.request_may_have_left());
    EXPECT_EQ(a.sends(), 0);
  }
}

TEST_F(ExchangeLife, BeginForgetsThePreviousRequest) {
  Exchange ex;
  ex.begin(Ref<ReactorGeneration>(), t0, 10);
  ex.facts.keep_alive = true;
  ex.head_request = ex.request_parsed = true;
  ex.body_bytes = 5;
  ex.body_taken = true;
  ex.bytes_out = 7;
  ex.request_id = "abc";
  ex.decide(Outcome::relayed(200, std::chrono::milliseconds(2)));
  ex.end();

  ex.begin(Ref<ReactorGeneration>(), t0 + std::chrono::seconds(1), 3);
  EXPECT_FALSE(ex.facts.keep_alive);
  EXPECT_FALSE(ex.head_request);
  EXPECT_FALSE(ex.request_parsed);
  EXPECT_EQ(ex.body_bytes, 0u);
  EXPECT_FALSE(ex.body_taken);
  EXPECT_EQ(ex.bytes_in, 3u);  // what was already read of it (pipelined bytes)
  EXPECT_EQ(ex.bytes_out, 0u);
  EXPECT_TRUE(ex.request_id.empty());
  EXPECT_EQ(ex.outcome.status, 0);
  EXPECT_EQ(ex.started, t0 + std::chrono::seconds(1));
  EXPECT_EQ(ex.up, nullptr);
}

TEST_F(ExchangeLife, DecidingKeepsWhetherTheClientAlreadySawBytes) {
  Exchange ex;
  ex.outcome.client_saw_bytes = true;  // a forwarded 103 Early Hints went out
  ex.decide(Outcome::generated(Reason::upstream_timeout));
  EXPECT_TRUE(ex.outcome.client_saw_bytes);
  EXPECT_EQ(ex.outcome.reason, Reason::upstream_timeout);
  EXPECT_EQ(ex.outcome.kind, OutcomeKind::response_timeout);
}

TEST_F(ExchangeLife, EndGivesThePoolSlotBackBeforeTheStagesSettle) {
  Exchange ex;
  admit(ex);
  EXPECT_EQ(pool.active(), 1);
  ex.end();
  ASSERT_EQ(seen.pool_active.size(), 1u);
  EXPECT_EQ(seen.pool_active[0], 0);  // the slot was back when the stage settled
  EXPECT_FALSE(ex.permit);
}

TEST_F(ExchangeLife, EndSettlesWithTheOutcomeDecidedWhereItHappened) {
  Exchange ex;
  admit(ex);
  ex.decide(Outcome::relayed(503, std::chrono::milliseconds(4)));
  ex.end();
  ASSERT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(seen.outcomes[0].status, 503);
  EXPECT_EQ(seen.outcomes[0].kind, OutcomeKind::response);
  EXPECT_EQ(seen.outcomes[0].source, OutcomeSource::upstream);
}

TEST_F(ExchangeLife, EndingTwiceSettlesOnceAndFreesOneSlot) {
  Exchange ex;
  admit(ex);
  ex.decide(Outcome::generated(Reason::upstream_reset));
  ex.end();
  ex.end();  // a close after the response finished: nothing left to settle
  EXPECT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(pool.active(), 0);
}

TEST_F(ExchangeLife, EndResetsTheChainForTheNextRequestOnTheConnection) {
  Exchange ex;
  for (int i = 0; i < 3; ++i) {
    ex.begin(Ref<ReactorGeneration>(), t0, 0);
    admit(ex);
    ex.decide(Outcome::relayed(200 + i, std::chrono::milliseconds(1)));
    ex.end();
    EXPECT_EQ(ex.cursor, 0);
    EXPECT_EQ(ex.tickets.size(), 0u);
  }
  ASSERT_EQ(seen.outcomes.size(), 3u);
  EXPECT_EQ(seen.outcomes[2].status, 202);
  EXPECT_EQ(pool.active(), 0);
}

TEST_F(ExchangeLife, EndLetsTheGenerationGoSoItCanRetire) {
  auto snapshot = std::make_shared<Snapshot>();
  Exchange ex;
  ex.begin(Ref<ReactorGeneration>(new ReactorGeneration(snapshot)), t0, 0);
  EXPECT_EQ(snapshot->reactor_holds.load(), 1u);
  ex.end();
  EXPECT_EQ(snapshot->reactor_holds.load(), 0u);
  EXPECT_FALSE(ex.gen);
}

TEST_F(ExchangeLife, ADestroyedExchangeSettlesWhatItStillHoldsAsAbandoned) {
  {
    Exchange ex;
    admit(ex);
  }
  ASSERT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(seen.outcomes[0].source, OutcomeSource::floodgate);
  EXPECT_EQ(seen.outcomes[0].kind, OutcomeKind::client_aborted);
  EXPECT_EQ(pool.active(), 0);
}

}  // namespace
}  // namespace floodgate::proxy
