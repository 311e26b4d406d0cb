#include "floodgate/upstream/admission.h"

#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "admission_test_support.h"

namespace floodgate {
namespace {

using testing::Parked;
using State = AdmissionWaiter::State;

// Admits `n` callers that must not queue; returns their permits.
std::deque<Permit> admit_n(Admission& admission, int n) {
  std::deque<Permit> permits;
  for (int i = 0; i < n; ++i) {
    Parked unused;
    auto result = admission.admit(unused.waiter);
    EXPECT_EQ(result.status, AdmitStatus::admitted) << i;
    permits.push_back(std::move(result.permit));
  }
  return permits;
}

// --- cap boundaries ---

TEST(Admission, AdmitsExactlyMaxActiveAtOnce) {
  Admission admission({.max_active = 3, .max_pending = 1});
  auto permits = admit_n(admission, 3);
  EXPECT_EQ(admission.active(), 3);
  Parked fourth;
  EXPECT_EQ(admission.admit(fourth.waiter).status, AdmitStatus::queued);
  EXPECT_EQ(admission.active(), 3);
  EXPECT_EQ(admission.pending(), 1);
  fourth.waiter.cancel(CancelReason::client_gone);
}

TEST(Admission, RejectsTheArrivalThatFindsTheQueueFull) {
  Admission admission({.max_active = 3, .max_pending = 2});
  auto permits = admit_n(admission, 3);
  Parked a, b, c;
  EXPECT_EQ(admission.admit(a.waiter).status, AdmitStatus::queued);
  EXPECT_EQ(admission.admit(b.waiter).status, AdmitStatus::queued);
  const auto result = admission.admit(c.waiter);
  EXPECT_EQ(result.status, AdmitStatus::rejected);
  EXPECT_FALSE(result.permit);
  EXPECT_EQ(c.waiter.state(), State::idle);
  EXPECT_EQ(admission.pending(), 2);
  EXPECT_EQ(admission.rejected(), 1u);
  a.waiter.cancel(CancelReason::client_gone);
  b.waiter.cancel(CancelReason::client_gone);
}

TEST(Admission, WithoutAQueueRejectsAtOnce) {
  Admission admission({.max_active = 2, .max_pending = 0});
  auto permits = admit_n(admission, 2);
  Parked third;
  EXPECT_EQ(admission.admit(third.waiter).status, AdmitStatus::rejected);
  EXPECT_EQ(admission.pending(), 0);
  EXPECT_EQ(admission.rejected(), 1u);
}

TEST(Admission, TryAdmitTakesAFreeSlotAndRefusesAtTheLimitWithoutCountingIt) {
  Admission admission({.max_active = 2, .max_pending = 0});
  Permit a = admission.try_admit();
  Permit b = admission.try_admit();
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(admission.try_admit());
  EXPECT_EQ(admission.active(), 2);
  EXPECT_EQ(admission.admitted(), 2u);
  EXPECT_EQ(admission.rejected(), 0u);  // the caller counts its refusals
  a.release();
  EXPECT_TRUE(admission.try_admit());
}

TEST(Admission, TryAdmitNeverBargesPastAParkedWaiter) {
  Admission admission({.max_active = 1, .max_pending = 1});
  auto permits = admit_n(admission, 1);
  Parked waiting;
  ASSERT_EQ(admission.admit(waiting.waiter).status, AdmitStatus::queued);
  permits.clear();  // the slot is handed to the waiter, not left for try_admit()
  EXPECT_FALSE(admission.try_admit());
  EXPECT_EQ(admission.active(), 1);
  EXPECT_TRUE(waiting.granted());
  EXPECT_TRUE(waiting.waiter.take_permit());
}

TEST(Admission, ZeroMaxActiveMeansUnlimited) {
  Admission admission({.max_active = 0, .max_pending = 0});
  auto permits = admit_n(admission, 10'000);
  EXPECT_EQ(admission.active(), 10'000);
  EXPECT_EQ(admission.limit(), 0u);
  permits.clear();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, ClampsAHugeLimitInsteadOfOverflowing) {
  Admission admission({.max_active = UINT32_MAX, .max_pending = 0});
  EXPECT_EQ(admission.limit(), Admission::kMaxActive);
}

TEST(Admission, ReleasingWithNobodyWaitingFreesTheSlot) {
  Admission admission({.max_active = 1, .max_pending = 0});
  auto permits = admit_n(admission, 1);
  permits.clear();
  EXPECT_EQ(admission.active(), 0);
  EXPECT_EQ(admit_n(admission, 1).size(), 1u);
}

// --- permits ---

TEST(Permit, ReleasesOnceOnly) {
  Admission admission({.max_active = 2});
  auto permits = admit_n(admission, 2);
  permits[0].release();
  permits[0].release();
  EXPECT_FALSE(permits[0]);
  EXPECT_EQ(admission.active(), 1);
}

TEST(Permit, MovingKeepsTheSlot) {
  Admission admission({.max_active = 1});
  Permit first = std::move(admit_n(admission, 1).front());
  Permit second(std::move(first));
  EXPECT_FALSE(first);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(admission.active(), 1);
  second = Permit();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Permit, AssigningOverAPermitReleasesItsOldSlot) {
  Admission a({.max_active = 1});
  Admission b({.max_active = 1});
  Permit permit = std::move(admit_n(a, 1).front());
  permit = std::move(admit_n(b, 1).front());
  EXPECT_EQ(a.active(), 0);
  EXPECT_EQ(b.active(), 1);
}

// The request path holds its slot in a Permit member: an exception anywhere in it unwinds
// through the holder and frees the slot, once, to the next waiter.
TEST(Permit, AnExceptionUnwindingThroughTheHolderHandsTheSlotOn) {
  Admission admission({.max_active = 1, .max_pending = 1});
  Parked next;
  try {
    Permit held = std::move(admit_n(admission, 1).front());
    ASSERT_EQ(admission.admit(next.waiter).status, AdmitStatus::queued);
    throw std::runtime_error("a failure mid-request");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(next.granted());
  EXPECT_EQ(admission.active(), 1);
  EXPECT_TRUE(next.waiter.take_permit());
}

// --- handoff, FIFO, no barging ---

TEST(Admission, HandsTheSlotToTheOldestWaiterOnRelease) {
  Admission admission({.max_active = 1, .max_pending = 4});
  auto permits = admit_n(admission, 1);
  Parked waiter;
  ASSERT_EQ(admission.admit(waiter.waiter).status, AdmitStatus::queued);
  permits.clear();
  EXPECT_TRUE(waiter.granted());
  EXPECT_EQ(waiter.waiter.state(), State::granted);
  EXPECT_EQ(admission.active(), 1);  // the slot moved, it was never free
  EXPECT_EQ(admission.pending(), 0);
  Permit permit = waiter.waiter.take_permit();
  EXPECT_TRUE(permit);
  EXPECT_FALSE(waiter.waiter.take_permit());  // once
  permit.release();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, GrantsWaitersInArrivalOrder) {
  Admission admission({.max_active = 1, .max_pending = 10});
  std::vector<int> order;
  std::vector<std::unique_ptr<Parked>> waiters;
  Permit held = std::move(admit_n(admission, 1).front());
  for (int i = 0; i < 10; ++i) {
    waiters.push_back(std::make_unique<Parked>(i, &order));
    ASSERT_EQ(admission.admit(waiters.back()->waiter).status, AdmitStatus::queued);
  }
  for (auto& parked : waiters) {
    held.release();
    held = parked->waiter.take_permit();
    ASSERT_TRUE(held);
  }
  held.release();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, ASlotHandedOverIsNeverFreeForANewcomer) {
  Admission admission({.max_active = 1, .max_pending = 4});
  Permit held = std::move(admit_n(admission, 1).front());
  Parked first, second;
  ASSERT_EQ(admission.admit(first.waiter).status, AdmitStatus::queued);
  held.release();  // the slot goes to `first`, so a newcomer finds none free
  EXPECT_EQ(admission.admit(second.waiter).status, AdmitStatus::queued);
  first.waiter.take_permit().release();
  EXPECT_TRUE(second.granted());
  second.waiter.take_permit().release();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, AWaiterIsGrantedAfterExactlyTheReleasesAheadOfIt) {
  Admission admission({.max_active = 2, .max_pending = 8});
  auto permits = admit_n(admission, 2);
  std::array<Parked, 5> ahead;
  for (auto& parked : ahead) ASSERT_EQ(admission.admit(parked.waiter).status, AdmitStatus::queued);
  Parked target;
  ASSERT_EQ(admission.admit(target.waiter).status, AdmitStatus::queued);
  std::array<Parked, 2> behind;  // later arrivals, interleaved with the releases
  std::deque<Permit> held = std::move(permits);
  for (std::size_t i = 0; i < ahead.size(); ++i) {
    if (i < behind.size()) {
      ASSERT_EQ(admission.admit(behind[i].waiter).status, AdmitStatus::queued);
    }
    held.front().release();
    held.pop_front();
    ASSERT_TRUE(ahead[i].granted());
    EXPECT_FALSE(target.completed());
    held.push_back(ahead[i].waiter.take_permit());
  }
  held.front().release();
  EXPECT_TRUE(target.granted());
  EXPECT_FALSE(behind[0].completed());
  held.clear();
  target.waiter.take_permit().release();
  behind[0].waiter.take_permit().release();
  behind[1].waiter.take_permit().release();
  EXPECT_EQ(admission.active(), 0);
  EXPECT_EQ(admission.pending(), 0);
}

// --- cancel, deadline, retirement ---

TEST(AdmissionWaiter, CancelTakesAQueuedWaiterOutWithoutACompletion) {
  Admission admission({.max_active = 1, .max_pending = 2});
  auto permits = admit_n(admission, 1);
  Parked waiter;
  ASSERT_EQ(admission.admit(waiter.waiter).status, AdmitStatus::queued);
  EXPECT_TRUE(waiter.waiter.cancel(CancelReason::client_gone));
  EXPECT_EQ(waiter.waiter.state(), State::cancelled);
  EXPECT_EQ(admission.pending(), 0);
  EXPECT_EQ(admission.cancelled(CancelReason::client_gone), 1u);
  permits.clear();  // nobody to hand to
  EXPECT_EQ(waiter.completed(), 0);
  EXPECT_EQ(admission.active(), 0);
  EXPECT_FALSE(waiter.waiter.cancel(CancelReason::client_gone));  // not queued any more
}

TEST(AdmissionWaiter, ACancelledWaiterInTheMiddleIsSkipped) {
  Admission admission({.max_active = 1, .max_pending = 3});
  std::vector<int> order;
  Parked a(1, &order), b(2, &order), c(3, &order);
  Permit held = std::move(admit_n(admission, 1).front());
  for (Parked* p : {&a, &b, &c}) ASSERT_EQ(admission.admit(p->waiter).status, AdmitStatus::queued);
  ASSERT_TRUE(b.waiter.cancel(CancelReason::client_gone));
  held.release();
  a.waiter.take_permit().release();
  c.waiter.take_permit().release();
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
  EXPECT_EQ(b.completed(), 0);
  EXPECT_EQ(admission.active(), 0);
}

TEST(AdmissionWaiter, CancelLosingToAGrantLeavesAPermitThatGoesToTheNextWaiter) {
  Admission admission({.max_active = 1, .max_pending = 2});
  Permit held = std::move(admit_n(admission, 1).front());
  Parked late, next;
  ASSERT_EQ(admission.admit(late.waiter).status, AdmitStatus::queued);
  ASSERT_EQ(admission.admit(next.waiter).status, AdmitStatus::queued);
  held.release();  // grants `late` just before its timeout fires
  EXPECT_FALSE(late.waiter.cancel(CancelReason::timed_out));
  EXPECT_EQ(admission.cancelled(CancelReason::timed_out), 0u);
  ASSERT_TRUE(late.granted());
  late.waiter.take_permit().release();  // the owner gave up: the grant moves on
  EXPECT_TRUE(next.granted());
  next.waiter.take_permit().release();
  EXPECT_EQ(admission.active(), 0);
}

TEST(AdmissionWaiter, DestroyingAGrantedWaiterReleasesItsUntakenSlot) {
  Admission admission({.max_active = 1, .max_pending = 1});
  Permit held = std::move(admit_n(admission, 1).front());
  {
    Parked waiter;
    ASSERT_EQ(admission.admit(waiter.waiter).status, AdmitStatus::queued);
    held.release();
    ASSERT_TRUE(waiter.granted());
  }
  EXPECT_EQ(admission.active(), 0);
}

TEST(AdmissionWaiter, APendingTimeoutFiredOnAnotherThreadCancels) {
  Admission admission({.max_active = 1, .max_pending = 1});
  auto permits = admit_n(admission, 1);
  Parked waiter;
  ASSERT_EQ(admission.admit(waiter.waiter).status, AdmitStatus::queued);
  bool cancelled = false;
  std::thread timer([&] { cancelled = waiter.waiter.cancel(CancelReason::timed_out); });
  timer.join();
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(admission.cancelled(CancelReason::timed_out), 1u);
  EXPECT_EQ(admission.pending(), 0);
  permits.clear();
  EXPECT_EQ(waiter.completed(), 0);
  EXPECT_EQ(admission.active(), 0);
}

// Forced retirement: each reactor cancels the waiters its retiring generation parked (the
// primitive needs no cancel-all: the owner is the only one who knows the waiter's generation,
// and cancelling on the owner's own thread completes the request there). Waiters of the new
// generation keep their places.
TEST(AdmissionWaiter, RetiringAGenerationTakesOutOnlyItsWaiters) {
  Admission admission({.max_active = 1, .max_pending = 8});
  std::vector<int> order;
  std::vector<std::unique_ptr<Parked>> old_gen, new_gen;
  Permit held = std::move(admit_n(admission, 1).front());
  for (int i = 0; i < 4; ++i) {
    old_gen.push_back(std::make_unique<Parked>(100 + i, &order));
    new_gen.push_back(std::make_unique<Parked>(200 + i, &order));
    ASSERT_EQ(admission.admit(old_gen.back()->waiter).status, AdmitStatus::queued);
    ASSERT_EQ(admission.admit(new_gen.back()->waiter).status, AdmitStatus::queued);
  }
  for (auto& parked : old_gen) EXPECT_TRUE(parked->waiter.cancel(CancelReason::retired));
  EXPECT_EQ(admission.cancelled(CancelReason::retired), 4u);
  EXPECT_EQ(admission.pending(), 4);
  for (auto& parked : new_gen) {
    held.release();
    held = parked->waiter.take_permit();
  }
  held.release();
  EXPECT_EQ(order, (std::vector<int>{200, 201, 202, 203}));
  EXPECT_EQ(admission.active(), 0);
}

TEST(AdmissionWaiter, ARetiredWaiterAlreadyGrantedPassesTheSlotOn) {
  Admission admission({.max_active = 1, .max_pending = 2});
  Permit held = std::move(admit_n(admission, 1).front());
  Parked retiring, survivor;
  ASSERT_EQ(admission.admit(retiring.waiter).status, AdmitStatus::queued);
  ASSERT_EQ(admission.admit(survivor.waiter).status, AdmitStatus::queued);
  held.release();
  ASSERT_FALSE(retiring.waiter.cancel(CancelReason::retired));
  retiring.waiter.take_permit().release();  // its continuation sees the retirement
  EXPECT_TRUE(survivor.granted());
  survivor.waiter.take_permit().release();
  EXPECT_EQ(admission.active(), 0);
}

// --- limit changes ---

// Reload 1000 -> 100 with 500 active: the 500 keep their slots, arrivals queue, and every
// release lowers active by one without admitting anybody until active is at the new limit.
TEST(Admission, LoweringTheLimitDrainsActiveMonotonicallyBeforeAnyHandoff) {
  Admission admission({.max_active = 1000, .max_pending = 64});
  auto permits = admit_n(admission, 500);
  admission.set_limits({.max_active = 100, .max_pending = 64});
  EXPECT_EQ(admission.active(), 500);
  std::vector<std::unique_ptr<Parked>> waiters;
  for (int i = 0; i < 50; ++i) {
    waiters.push_back(std::make_unique<Parked>(i));
    ASSERT_EQ(admission.admit(waiters.back()->waiter).status, AdmitStatus::queued);
  }
  const uint64_t admitted = admission.admitted();
  for (int64_t expected = 499; expected >= 100; --expected) {
    permits.pop_front();
    ASSERT_EQ(admission.active(), expected);
    ASSERT_EQ(admission.admitted(), admitted);
    ASSERT_EQ(admission.pending(), 50);
    ASSERT_EQ(waiters.front()->completed(), 0);
    Parked probe;  // a newcomer at this step queues behind the others
    ASSERT_EQ(admission.admit(probe.waiter).status, AdmitStatus::queued);
    ASSERT_TRUE(probe.waiter.cancel(CancelReason::client_gone));
  }
  permits.pop_front();  // active is at the limit: this release hands off
  EXPECT_EQ(admission.active(), 100);
  EXPECT_TRUE(waiters.front()->granted());
  EXPECT_EQ(admission.admitted(), admitted + 1);
  permits.clear();  // 49 more handoffs: now every waiter holds a slot
  for (auto& parked : waiters) {
    Permit permit = parked->waiter.take_permit();
    ASSERT_TRUE(permit);
  }
  EXPECT_EQ(admission.active(), 0);
  EXPECT_EQ(admission.pending(), 0);
}

TEST(Admission, LoweringTheLimitStopsTheFastPathUntilActiveIsBelowIt) {
  Admission admission({.max_active = 1000, .max_pending = 0});
  auto permits = admit_n(admission, 500);
  admission.set_limits({.max_active = 100, .max_pending = 0});
  const uint64_t admitted = admission.admitted();
  while (admission.active() > 99) {
    Parked probe;
    ASSERT_EQ(admission.admit(probe.waiter).status, AdmitStatus::rejected) << admission.active();
    ASSERT_EQ(admission.admitted(), admitted);
    const int64_t before = admission.active();
    permits.pop_front();
    ASSERT_EQ(admission.active(), before - 1);
  }
  EXPECT_EQ(admit_n(admission, 1).size(), 1u);
}

TEST(Admission, RaisingTheLimitGrantsParkedWaitersAtOnce) {
  Admission admission({.max_active = 2, .max_pending = 5});
  std::vector<int> order;
  auto permits = admit_n(admission, 2);
  std::vector<std::unique_ptr<Parked>> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.push_back(std::make_unique<Parked>(i, &order));
    ASSERT_EQ(admission.admit(waiters.back()->waiter).status, AdmitStatus::queued);
  }
  admission.set_limits({.max_active = 5, .max_pending = 5});
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(admission.active(), 5);
  EXPECT_EQ(admission.pending(), 2);
  admission.set_limits({.max_active = 0, .max_pending = 5});  // unlimited: everybody
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(admission.pending(), 0);
  permits.clear();
  for (auto& parked : waiters) parked->waiter.take_permit().release();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, LoweringMaxPendingRejectsTheYoungestWaiters) {
  Admission admission({.max_active = 1, .max_pending = 5});
  auto permits = admit_n(admission, 1);
  std::vector<int> order;
  std::vector<std::unique_ptr<Parked>> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.push_back(std::make_unique<Parked>(i, &order));
    ASSERT_EQ(admission.admit(waiters.back()->waiter).status, AdmitStatus::queued);
  }
  ASSERT_TRUE(waiters[3]->waiter.cancel(CancelReason::client_gone));
  admission.set_limits({.max_active = 1, .max_pending = 2});
  EXPECT_EQ(admission.pending(), 2);
  EXPECT_EQ(order, (std::vector<int>{4, 2}));  // youngest first; the cancelled one is just gone
  EXPECT_TRUE(waiters[4]->rejected());
  EXPECT_TRUE(waiters[2]->rejected());
  EXPECT_EQ(waiters[2]->waiter.state(), State::rejected);
  EXPECT_FALSE(waiters[2]->waiter.cancel(CancelReason::timed_out));
  EXPECT_EQ(admission.rejected(), 2u);
  admission.set_limits({.max_active = 1, .max_pending = 0});  // no queue any more
  EXPECT_EQ(admission.pending(), 0);
  EXPECT_TRUE(waiters[0]->rejected());
  EXPECT_TRUE(waiters[1]->rejected());
  permits.clear();
  EXPECT_EQ(admission.active(), 0);
}

TEST(Admission, ObserversReportTheLimitsInForce) {
  Admission admission({.max_active = 7, .max_pending = 3});
  EXPECT_EQ(admission.limit(), 7u);
  EXPECT_EQ(admission.max_pending(), 3u);
  admission.set_limits({.max_active = 0, .max_pending = 0});
  EXPECT_EQ(admission.limit(), 0u);
  EXPECT_EQ(admission.max_pending(), 0u);
}

// Every admit() ends in exactly one counter: admitted, rejected, or cancelled(reason).
TEST(Admission, CountsEveryArrivalOnceWhenItLeavesTheQueue) {
  Admission admission({.max_active = 1, .max_pending = 2});
  Permit held = std::move(admit_n(admission, 1).front());  // admitted 1
  Parked granted, cancelled, rejected;
  ASSERT_EQ(admission.admit(granted.waiter).status, AdmitStatus::queued);
  ASSERT_EQ(admission.admit(cancelled.waiter).status, AdmitStatus::queued);
  ASSERT_EQ(admission.admit(rejected.waiter).status, AdmitStatus::rejected);  // rejected 1
  EXPECT_EQ(admission.queued(), 2u);
  ASSERT_TRUE(cancelled.waiter.cancel(CancelReason::timed_out));  // timed_out 1
  held.release();                                                 // admitted 2
  granted.waiter.take_permit().release();
  EXPECT_EQ(admission.admitted(), 2u);
  EXPECT_EQ(admission.rejected(), 1u);
  EXPECT_EQ(admission.cancelled(CancelReason::timed_out), 1u);
  EXPECT_EQ(admission.cancelled(CancelReason::client_gone), 0u);
  EXPECT_EQ(admission.cancelled(CancelReason::retired), 0u);
}

// A completion may re-enter the admission: it runs after the lock is dropped.
TEST(AdmissionWaiter, ACompletionMayCallBackIntoTheAdmission) {
  struct Reentrant {
    Admission* admission;
    Permit permit;
    AdmissionWaiter waiter{&Reentrant::on_complete, this};
    static void on_complete(void* self, AdmitStatus) noexcept {
      auto* r = static_cast<Reentrant*>(self);
      r->permit = r->waiter.take_permit();
      (void)r->admission->active();
    }
  };
  Admission admission({.max_active = 1, .max_pending = 1});
  Permit held = std::move(admit_n(admission, 1).front());
  Reentrant reentrant{&admission, {}};
  ASSERT_EQ(admission.admit(reentrant.waiter).status, AdmitStatus::queued);
  held.release();
  EXPECT_TRUE(reentrant.permit);
  reentrant.permit.release();
  EXPECT_EQ(admission.active(), 0);
}

}  // namespace
}  // namespace floodgate
