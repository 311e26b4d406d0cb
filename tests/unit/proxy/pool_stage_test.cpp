// Pool admission as the last stage of a route's chain (proxy/pool_stage.h), and the exchange's
// one waiting mechanism (Wait, proxy/exchange.h) as the exchange drives it
// (src/proxy/exchange.cpp): a pool with room admits at once, a full one parks the exchange with
// its pending_timeout as deadline, a grant or a reload's rejection reaches the exchange only
// through its reactor's poller, and whatever the exchange gives up for (its deadline, its client
// going away, its generation retiring), a slot is never leaked nor used by an exchange that gave
// up on it. The test plays the client connection: a fake owner parks, cancels and resumes.
#include "floodgate/proxy/pool_stage.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <thread>
#include <utility>

#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/net/io_mode.h"
#include "floodgate/net/poller.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {
namespace {

using Verdict = Decision::Verdict;
using namespace std::chrono_literals;

constexpr uint32_t kPoolId = 3;
constexpr std::chrono::milliseconds kPendingTimeout = 250ms;

// A client connection reduced to its exchange and its side of the waiting mechanism, as
// waiting.cpp and client_conn.cpp drive it: it runs the route's chain and parks on wait, gives
// up for a deadline or a retirement (leave_wait), goes away (close), and hands a completion to
// the stage that waited (on_wait_over), recording what it got.
class FakeClient final : public WaitOwner {
 public:
  FakeClient(const Chain& chain, ReactorMetrics& metrics, net::Poller& poller)
      : chain_(chain), metrics_(metrics) {
    ex.metrics = &metrics;
    ex.wait.poller = &poller;
    ex.wait.owner = this;
  }

  // Runs the exchange through the chain; on wait, parks it as Exchange::park() does.
  Decision arrive() {
    const Decision d = chain_.run(ex, metrics_);
    if (d.verdict == Verdict::wait) {
      Wait& w = ex.wait;
      w.gave_up = Reason::none;
      w.abandoned = false;
      w.since = std::chrono::steady_clock::now();
      w.at_deadline = d.reason;
    }
    return d;
  }

  // The deadline passed or the generation retired (Exchange::leave_wait): true when the
  // cancel won; otherwise a completion is on its way and the reason is remembered for it.
  bool give_up(Reason reason, CancelReason why) {
    Wait& w = ex.wait;
    if (!w.stage->cancel(ex, why)) {
      w.gave_up = reason;
      return false;
    }
    w.stage = nullptr;
    return true;
  }

  // The client went away while waiting (ClientConn::close, Exchange::abandon): the exchange ends at
  // once, and a completion already on its way is given back when it arrives.
  bool go_away() {
    Wait& w = ex.wait;
    w.abandoned = true;
    const bool won = w.stage->cancel(ex, CancelReason::client_gone);
    if (won) w.stage = nullptr;
    ex.end();
    return won;
  }

  // On the poller's thread, from its inbox (Exchange::on_wait_over).
  void on_wait_over() override {
    ++deliveries;
    Wait& w = ex.wait;
    const Stage& stage = *std::exchange(w.stage, nullptr);
    Ticket& ticket = ex.tickets.next(stage);
    resumed = stage.resume(ex, ticket, w.result);
    ex.tickets.commit();
  }

  bool waiting() const { return ex.wait.stage != nullptr; }

  Exchange ex;
  int deliveries = 0;  // on_wait_over() calls
  Decision resumed;    // what the last resume() answered

 private:
  const Chain& chain_;
  ReactorMetrics& metrics_;
};

class PoolStageTest : public ::testing::Test {
 protected:
  PoolStageTest() {
    up.id = kPoolId;
    up.pool = std::make_shared<Pool>();
    up.pool->admission.set_limits({.max_active = 1, .max_pending = 2});
    up.policy.pending_timeout = kPendingTimeout;
  }

  // Leaves nothing parked (a queued waiter must not be destroyed) and checks that the test
  // left no completion in the poller's inbox.
  void TearDown() override {
    for (FakeClient* c : {&late, &second, &waiter, &holder}) {
      if (c->ex.wait.pool_node.state() == AdmissionWaiter::State::queued) {
        (void)c->ex.wait.pool_node.cancel(CancelReason::retired);
      }
    }
    const int before = deliveries();
    poller.run_inbox();
    EXPECT_EQ(deliveries(), before) << "a completion was left in the poller's inbox";
  }

  Admission& admission() { return up.pool->admission; }
  int deliveries() const {
    return holder.deliveries + waiter.deliveries + second.deliveries + late.deliveries;
  }
  uint64_t admitted() const { return metrics.pool_admitted(kPoolId).value(); }
  uint64_t rejected(Reason reason) const {
    return metrics.pool_rejected(kPoolId, pool_rejection_index(reason)).value();
  }
  uint64_t queue_waits() const { return metrics.pool_queue_wait(kPoolId).count(); }
  uint64_t abandoned() const { return metrics.pool_abandoned(kPoolId).value(); }

  // The holder takes the pool's only slot; the waiter parks behind it.
  void fill_pool_and_park_waiter() {
    ASSERT_EQ(holder.arrive().verdict, Verdict::go);
    ASSERT_EQ(waiter.arrive().verdict, Verdict::wait);
    ASSERT_EQ(admission().pending(), 1);
  }

  // Destroyed in reverse: the clients (their exchanges, permits and queue nodes) first, then
  // the poller they post to, the chain, and the upstream whose Admission they point into.
  ReactorMetrics metrics{kPoolId + 1};  // one shard slot per pool id up to kPoolId
  Upstream up;
  const Chain chain = [this] {  // pool admission alone
    std::vector<std::unique_ptr<const Stage>> stages;
    stages.push_back(std::make_unique<PoolStage>(up));
    return Chain(std::move(stages));
  }();
  boost::asio::io_context io;
  net::Poller poller{io, IoMode::epoll};
  FakeClient holder{chain, metrics, poller};
  FakeClient waiter{chain, metrics, poller};
  FakeClient second{chain, metrics, poller};
  FakeClient late{chain, metrics, poller};
};

TEST_F(PoolStageTest, ThePoolIsTheLastStageOfARoutesChain) {
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain.stage(0).id(), StageId::pool);
  EXPECT_EQ(chain.stage(0).mode(), resilience::Mode::enforce);
}

TEST_F(PoolStageTest, APoolWithRoomAdmitsAtOnce) {
  const Decision d = holder.arrive();

  EXPECT_EQ(d.verdict, Verdict::go);
  EXPECT_TRUE(holder.ex.permit);
  EXPECT_EQ(admission().active(), 1);
  EXPECT_EQ(admitted(), 1u);
  EXPECT_FALSE(holder.waiting());
  EXPECT_EQ(admission().pending(), 0);
  EXPECT_EQ(holder.ex.tickets.size(), 0u);  // the slot is the exchange's, not a ticket
}

TEST_F(PoolStageTest, AFullPoolWithQueueRoomParksTheExchangeUntilItsPendingTimeout) {
  ASSERT_EQ(holder.arrive().verdict, Verdict::go);

  const Decision d = waiter.arrive();

  EXPECT_EQ(d.verdict, Verdict::wait);
  EXPECT_EQ(d.deadline, kPendingTimeout);
  EXPECT_EQ(d.reason, Reason::pending_timeout);
  EXPECT_EQ(waiter.ex.wait.stage, &chain.stage(0));
  EXPECT_EQ(waiter.ex.wait.chain, &chain);
  EXPECT_FALSE(waiter.ex.permit);
  EXPECT_EQ(admission().pending(), 1);
  EXPECT_EQ(admitted(), 1u);  // the holder only
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 0);  // nothing decided yet
}

TEST_F(PoolStageTest, AFullPoolWithAFullQueueTurnsTheExchangeAwayAsOverloaded) {
  fill_pool_and_park_waiter();
  ASSERT_EQ(second.arrive().verdict, Verdict::wait);

  const Decision d = late.arrive();

  EXPECT_EQ(d.verdict, Verdict::stop);
  EXPECT_EQ(d.reason, Reason::proxy_overloaded);
  EXPECT_FALSE(late.ex.permit);
  EXPECT_FALSE(late.waiting());
  EXPECT_EQ(rejected(Reason::proxy_overloaded), 1u);
  EXPECT_EQ(admission().pending(), 2);
}

TEST_F(PoolStageTest, ReleasingTheHoldersSlotGrantsTheWaiterThroughThePoller) {
  fill_pool_and_park_waiter();

  holder.ex.end();

  EXPECT_EQ(waiter.deliveries, 0);     // granted, but only the reactor's poller delivers it
  EXPECT_EQ(admission().active(), 1);  // handed over: the count never dropped
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 1);
  EXPECT_EQ(waiter.resumed.verdict, Verdict::go);
  EXPECT_TRUE(waiter.ex.permit);
  EXPECT_FALSE(waiter.waiting());
  EXPECT_EQ(admitted(), 2u);
  EXPECT_EQ(queue_waits(), 1u);
  EXPECT_EQ(admission().active(), 1);
}

TEST_F(PoolStageTest, AWaiterWhoseDeadlinePassesLeavesTheQueueAndNoLaterGrantReachesIt) {
  fill_pool_and_park_waiter();

  EXPECT_TRUE(waiter.give_up(waiter.ex.wait.at_deadline, CancelReason::timed_out));

  EXPECT_EQ(rejected(Reason::pending_timeout), 1u);
  EXPECT_EQ(queue_waits(), 1u);
  EXPECT_EQ(admission().pending(), 0);
  holder.ex.end();
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 0);
  EXPECT_FALSE(waiter.ex.permit);
  EXPECT_EQ(admission().active(), 0);
  EXPECT_EQ(admitted(), 1u);  // the holder only
}

TEST_F(PoolStageTest, AWaiterThatTimesOutAsItsGrantArrivesGivesTheSlotBack) {
  fill_pool_and_park_waiter();
  holder.ex.end();  // the grant is on its way: in the inbox, not delivered

  EXPECT_FALSE(waiter.give_up(waiter.ex.wait.at_deadline, CancelReason::timed_out));
  EXPECT_EQ(waiter.ex.wait.gave_up, Reason::pending_timeout);
  EXPECT_EQ(rejected(Reason::pending_timeout), 0u);  // counted when the grant arrives

  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 1);
  EXPECT_EQ(waiter.resumed.verdict, Verdict::stop);
  EXPECT_EQ(waiter.resumed.reason, Reason::pending_timeout);
  EXPECT_FALSE(waiter.ex.permit);
  EXPECT_EQ(admission().active(), 0);
  EXPECT_EQ(rejected(Reason::pending_timeout), 1u);
  EXPECT_EQ(admitted(), 1u);  // the holder only
}

TEST_F(PoolStageTest, AClientThatGoesAwayWhileWaitingIsCountedAsAbandoned) {
  fill_pool_and_park_waiter();

  EXPECT_TRUE(waiter.go_away());

  EXPECT_EQ(abandoned(), 1u);
  EXPECT_EQ(queue_waits(), 1u);
  EXPECT_EQ(admission().pending(), 0);
  holder.ex.end();
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 0);
  EXPECT_EQ(admission().active(), 0);
}

TEST_F(PoolStageTest, AClientGoneAsItsGrantArrivesHandsTheSlotToTheNextWaiter) {
  fill_pool_and_park_waiter();
  ASSERT_EQ(second.arrive().verdict, Verdict::wait);
  holder.ex.end();  // the grant to the first waiter is on its way

  EXPECT_FALSE(waiter.go_away());
  EXPECT_EQ(abandoned(), 1u);  // counted whatever the cancel found

  poller.run_inbox();  // the grant reaches the gone client, which hands it on
  EXPECT_EQ(waiter.deliveries, 1);
  EXPECT_EQ(waiter.resumed.verdict, Verdict::stop);
  EXPECT_FALSE(waiter.ex.permit);
  EXPECT_EQ(admitted(), 1u);  // the holder only: the gone client was not admitted
  poller.run_inbox();         // the second waiter's grant
  EXPECT_EQ(second.deliveries, 1);
  EXPECT_EQ(second.resumed.verdict, Verdict::go);
  EXPECT_TRUE(second.ex.permit);
  EXPECT_EQ(admitted(), 2u);
  EXPECT_EQ(admission().active(), 1);
  EXPECT_EQ(admission().pending(), 0);
}

TEST_F(PoolStageTest, AReloadThatShrinksTheQueueTurnsTheWaiterAwayAsOverloaded) {
  fill_pool_and_park_waiter();

  // The main thread applies the reload's limits.
  std::thread reload([this] { admission().set_limits({.max_active = 1, .max_pending = 0}); });
  reload.join();

  EXPECT_EQ(waiter.deliveries, 0);  // only the reactor's poller delivers it
  EXPECT_EQ(admission().pending(), 0);
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 1);
  EXPECT_EQ(waiter.resumed.verdict, Verdict::stop);
  EXPECT_EQ(waiter.resumed.reason, Reason::proxy_overloaded);
  EXPECT_FALSE(waiter.ex.permit);
  EXPECT_EQ(rejected(Reason::proxy_overloaded), 1u);
  EXPECT_EQ(admitted(), 1u);  // the holder only
  EXPECT_EQ(admission().active(), 1);
}

TEST_F(PoolStageTest, AWaiterWhoseGenerationRetiresLeavesTheQueueAsRetired) {
  fill_pool_and_park_waiter();

  EXPECT_TRUE(waiter.give_up(Reason::generation_retired, CancelReason::retired));

  EXPECT_EQ(rejected(Reason::generation_retired), 1u);
  EXPECT_EQ(rejected(Reason::pending_timeout), 0u);
  EXPECT_EQ(admission().pending(), 0);
  holder.ex.end();
  poller.run_inbox();
  EXPECT_EQ(waiter.deliveries, 0);
  EXPECT_EQ(admission().active(), 0);
}

TEST_F(PoolStageTest, EndingAnAdmittedExchangeGivesItsSlotBackExactlyOnce) {
  ASSERT_EQ(holder.arrive().verdict, Verdict::go);

  holder.ex.end();

  EXPECT_FALSE(holder.ex.permit);
  EXPECT_EQ(admission().active(), 0);
  ASSERT_EQ(second.arrive().verdict, Verdict::go);  // the slot is free for the next request
  EXPECT_EQ(admission().active(), 1);
  holder.ex.end();
  EXPECT_EQ(admission().active(), 1);  // a second end() gives nothing back
  EXPECT_TRUE(second.ex.permit);
}

}  // namespace
}  // namespace floodgate::proxy
