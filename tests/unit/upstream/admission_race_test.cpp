// Admission under real concurrency. These are the tests the ThreadSanitizer build exists for;
// events are ordered with barriers and polls with deadlines, never with sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <latch>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "admission_test_support.h"
#include "floodgate/upstream/admission.h"

namespace floodgate {
namespace {

using testing::eventually;
using testing::Parked;

Permit admit_one(Admission& admission) {
  AdmissionWaiter unused(&Parked::on_complete, nullptr);
  auto result = admission.admit(unused);
  EXPECT_EQ(result.status, AdmitStatus::admitted);
  return std::move(result.permit);
}

// The handoff-versus-cancel race: a waiter's timeout fires exactly as the slot is handed to it.
// Whoever wins, the slot ends up free: a grant the owner no longer wants is taken and released.
TEST(AdmissionRace, AGrantRacingACancelIsNeverLeaked) {
  constexpr int kIterations = 100'000;
  Admission admission({.max_active = 1, .max_pending = 1});
  Parked waiter;
  Permit handed;  // main -> releaser, ordered by the barrier
  std::atomic<bool> stop{false};
  std::barrier sync(2);
  std::thread releaser([&] {
    for (;;) {
      sync.arrive_and_wait();
      if (stop.load()) return;
      handed.release();
      sync.arrive_and_wait();
    }
  });
  int cancels_won = 0;
  int grants_won = 0;
  for (int i = 0; i < kIterations && !::testing::Test::HasFailure(); ++i) {
    handed = admit_one(admission);
    waiter.reset();
    EXPECT_EQ(admission.admit(waiter.waiter).status, AdmitStatus::queued);
    sync.arrive_and_wait();
    const bool cancelled = waiter.waiter.cancel(CancelReason::timed_out);
    sync.arrive_and_wait();  // the release, and any completion it ran, are done
    if (cancelled) {
      ++cancels_won;
      EXPECT_EQ(waiter.completed(), 0) << i;
    } else {
      ++grants_won;
      EXPECT_TRUE(waiter.granted()) << i;
      EXPECT_TRUE(waiter.waiter.take_permit()) << i;  // taken and dropped at once
    }
    EXPECT_EQ(admission.active(), 0) << i;
    EXPECT_EQ(admission.pending(), 0) << i;
  }
  stop.store(true);
  sync.arrive_and_wait();
  releaser.join();
  EXPECT_EQ(cancels_won + grants_won, kIterations);
  EXPECT_EQ(admission.cancelled(CancelReason::timed_out), static_cast<uint64_t>(cancels_won));
  EXPECT_EQ(admission.admitted(), static_cast<uint64_t>(kIterations + grants_won));
  RecordProperty("cancels_won", cancels_won);
  RecordProperty("grants_won", grants_won);
}

// A seqlock around set_limits(), so that an observer knows which of its samples saw settled
// limits, and which samples belong to the same limits (no set_limits() in between).
class LimitEpochs {
 public:
  void set(Admission& admission, AdmissionLimits limits) {
    seq_.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    admission.set_limits(limits);
    seq_.fetch_add(1, std::memory_order_release);
  }
  // The epoch `read` ran entirely inside, or nothing if a set_limits() overlapped it.
  template <class Read>
  std::optional<uint64_t> settled(Read read) const {
    const uint64_t before = seq_.load(std::memory_order_acquire);
    read();
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = seq_.load(std::memory_order_relaxed);
    if (before != after || before % 2 != 0) return std::nullopt;
    return before;
  }

 private:
  std::atomic<uint64_t> seq_{0};
};

struct Tally {
  std::atomic<uint64_t> calls{0}, permits{0}, rejected{0}, cancelled{0}, stalls{0};
  std::atomic<uint64_t> cancels_lost{0}, evicted{0};  // for the record
};

// One caller: admit, then hold and release, or wait for the completion, or cancel (losing
// the race sometimes), as a request would.
void run_caller(Admission& admission, Tally& tally, unsigned seed, int operations) {
  std::minstd_rand rng(seed);
  Parked parked;
  for (int op = 0; op < operations; ++op) {
    tally.calls.fetch_add(1);
    auto result = admission.admit(parked.waiter);
    if (result.status == AdmitStatus::admitted) {
      tally.permits.fetch_add(1);
      if (rng() % 4 == 0) std::this_thread::yield();
      continue;  // the permit releases here
    }
    if (result.status == AdmitStatus::rejected) {
      tally.rejected.fetch_add(1);
      std::this_thread::yield();  // a rejection is cheap; let the holders run
      continue;
    }
    if (rng() % 2 == 0) {
      const auto reason = static_cast<CancelReason>(rng() % 3);
      if (parked.waiter.cancel(reason)) {
        tally.cancelled.fetch_add(1);
        continue;
      }
      tally.cancels_lost.fetch_add(1);
    }
    if (!eventually([&] { return parked.completed() > 0; })) {
      tally.stalls.fetch_add(1);  // a lost wakeup: the test fails; leave the node parked
      (void)parked.waiter.cancel(CancelReason::client_gone);
      return;
    }
    if (parked.granted()) {
      tally.permits.fetch_add(1);
      Permit permit = parked.waiter.take_permit();
      if (rng() % 4 == 0) std::this_thread::yield();
    } else {
      tally.rejected.fetch_add(1);  // set_limits() lowered max_pending past it
      tally.evicted.fetch_add(1);
    }
    parked.reset();
  }
}

struct Violations {
  std::atomic<int> pending_above_max{0}, negative{0}, overshoot_grew{0};
  std::atomic<uint64_t> samples{0};
};

// Samples the observers and checks the invariants within each settled epoch:
// 0 <= pending <= max_pending, active >= 0, and the overshoot active - limit never grows.
void observe(const Admission& admission, const LimitEpochs& epochs, const std::atomic<bool>& done,
             Violations& violations) {
  std::optional<uint64_t> last_epoch;
  int64_t last_overshoot = 0;
  while (!done.load()) {
    int64_t active = 0, pending = 0;
    uint32_t limit = 0, max_pending = 0;
    const auto epoch = epochs.settled([&] {
      active = admission.active();
      pending = admission.pending();
      limit = admission.limit();
      max_pending = admission.max_pending();
    });
    if (!epoch) continue;
    violations.samples.fetch_add(1);
    if (active < 0 || pending < 0) violations.negative.fetch_add(1);
    if (pending > max_pending) violations.pending_above_max.fetch_add(1);
    const int64_t overshoot = limit == 0 ? 0 : std::max<int64_t>(0, active - limit);
    if (epoch == last_epoch && overshoot > last_overshoot) violations.overshoot_grew.fetch_add(1);
    last_epoch = epoch;
    last_overshoot = overshoot;
    std::this_thread::yield();  // leave the cores to the callers
  }
}

TEST(AdmissionRace, ConcurrentCallersAndReloadsQuiesceToZero) {
  constexpr int kCallers = 4;
  constexpr int kOperations = 50'000;
  Admission admission({.max_active = 2, .max_pending = 2});
  LimitEpochs epochs;
  Tally tally;
  Violations violations;
  std::atomic<bool> callers_done{false};
  std::atomic<uint64_t> reloads{0};

  std::thread observer([&] { observe(admission, epochs, callers_done, violations); });
  std::thread reloader([&] {
    std::minstd_rand rng(7);
    constexpr std::array<uint32_t, 6> kActive{0, 1, 2, 3, 5, 8};
    constexpr std::array<uint32_t, 5> kPending{0, 1, 3, 4, 8};
    while (!callers_done.load()) {
      epochs.set(admission, {.max_active = kActive[rng() % kActive.size()],
                             .max_pending = kPending[rng() % kPending.size()]});
      reloads.fetch_add(1);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] { run_caller(admission, tally, 100 + i, kOperations); });
  }
  for (auto& caller : callers) caller.join();
  callers_done.store(true);
  reloader.join();
  observer.join();

  EXPECT_EQ(tally.stalls.load(), 0u);
  EXPECT_EQ(admission.active(), 0);
  EXPECT_EQ(admission.pending(), 0);
  EXPECT_EQ(violations.negative.load(), 0);
  EXPECT_EQ(violations.pending_above_max.load(), 0);
  EXPECT_EQ(violations.overshoot_grew.load(), 0);
  EXPECT_GT(violations.samples.load(), 0u);
  EXPECT_GT(reloads.load(), 0u);
  // Every arrival counted exactly once, and the callers' view matches the admission's.
  const uint64_t cancelled = admission.cancelled(CancelReason::timed_out) +
                             admission.cancelled(CancelReason::client_gone) +
                             admission.cancelled(CancelReason::retired);
  EXPECT_EQ(admission.admitted(), tally.permits.load());
  EXPECT_EQ(admission.rejected(), tally.rejected.load());
  EXPECT_EQ(cancelled, tally.cancelled.load());
  EXPECT_EQ(admission.admitted() + admission.rejected() + cancelled, tally.calls.load());
  RecordProperty("queued", static_cast<int>(admission.queued()));
  RecordProperty("cancelled", static_cast<int>(cancelled));
  RecordProperty("rejected", static_cast<int>(admission.rejected()));
  RecordProperty("cancels_lost", static_cast<int>(tally.cancels_lost.load()));
  RecordProperty("evicted", static_cast<int>(tally.evicted.load()));
  RecordProperty("reloads", static_cast<int>(reloads.load()));
  RecordProperty("samples", static_cast<int>(violations.samples.load()));
}

// Arrivals keep coming while slots are handed over: none of them gets a slot ahead of the
// waiters already queued (with handoff the slot is never free in between).
TEST(AdmissionRace, ArrivalsDuringHandoffsNeverBarge) {
  constexpr int kStorm = 500;
  Admission admission({.max_active = 1, .max_pending = kStorm + 5});
  std::vector<int> order;  // appended only by completions, which run on this thread
  Permit held = admit_one(admission);
  std::vector<std::unique_ptr<Parked>> first, storm;
  for (int i = 0; i < 5; ++i) {
    first.push_back(std::make_unique<Parked>(i, &order));
    ASSERT_EQ(admission.admit(first.back()->waiter).status, AdmitStatus::queued);
  }
  for (int i = 0; i < kStorm; ++i) storm.push_back(std::make_unique<Parked>(100 + i, &order));
  std::atomic<int> barged{0};
  std::latch started(1);
  std::thread stormer([&] {
    for (int i = 0; i < kStorm; ++i) {
      if (admission.admit(storm[i]->waiter).status != AdmitStatus::queued) barged.fetch_add(1);
      if (i == 0) started.count_down();
    }
  });
  started.wait();
  for (auto& parked : first) {
    held.release();
    ASSERT_TRUE(parked->granted());
    held = parked->waiter.take_permit();
  }
  stormer.join();
  EXPECT_EQ(barged.load(), 0);
  for (auto& parked : storm) {  // the storm itself, in its arrival order
    held.release();
    ASSERT_TRUE(parked->granted());
    held = parked->waiter.take_permit();
  }
  held.release();
  ASSERT_EQ(order.size(), 5u + kStorm);
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(admission.active(), 0);
}

// Arrivals from several threads, in a known order, while slots are released concurrently:
// grants follow the arrival order exactly.
TEST(AdmissionRace, GrantsFollowArrivalOrderAcrossThreads) {
  constexpr int kThreads = 3;
  constexpr int kWaiters = 300;
  Admission admission({.max_active = 1, .max_pending = kWaiters});
  std::vector<std::unique_ptr<Parked>> waiters;
  waiters.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) waiters.push_back(std::make_unique<Parked>(i));
  Permit held = admit_one(admission);
  std::atomic<int> arrived{0};
  std::atomic<int> not_queued{0};
  std::vector<std::thread> arrivals;
  arrivals.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    arrivals.emplace_back([&, t] {
      for (int k = t; k < kWaiters; k += kThreads) {
        if (!eventually([&] { return arrived.load() == k; })) return;
        if (admission.admit(waiters[k]->waiter).status != AdmitStatus::queued) {
          not_queued.fetch_add(1);
        }
        arrived.store(k + 1);
      }
    });
  }
  for (int k = 0; k < kWaiters; ++k) {
    ASSERT_TRUE(eventually([&] { return arrived.load() > k; }));
    held.release();  // races the arrival of k + 1, k + 2, ...
    ASSERT_TRUE(waiters[k]->granted()) << k;
    if (k + 1 < kWaiters) {
      ASSERT_EQ(waiters[k + 1]->completed(), 0) << k;
    }
    held = waiters[k]->waiter.take_permit();
  }
  for (auto& thread : arrivals) thread.join();
  held.release();
  EXPECT_EQ(not_queued.load(), 0);
  EXPECT_EQ(admission.active(), 0);
}

// Forced retirement on two reactors at once while slots are being handed over: each reactor
// cancels its own old-generation waiters; those already granted pass the slot on. The
// new generation's waiters end up first in line, in order, and no slot is lost.
TEST(AdmissionRace, RetirementRacingHandoffsLeavesNoGrantBehind) {
  constexpr int kPerReactor = 100;
  constexpr int kNewGeneration = 20;
  Admission admission({.max_active = 2, .max_pending = 2 * kPerReactor + kNewGeneration});
  std::array<std::vector<std::unique_ptr<Parked>>, 2> retiring;
  std::vector<std::unique_ptr<Parked>> fresh;
  Permit a = admit_one(admission);
  Permit b = admit_one(admission);
  for (int i = 0; i < kPerReactor; ++i) {
    for (auto& reactor : retiring) {
      reactor.push_back(std::make_unique<Parked>(i));
      ASSERT_EQ(admission.admit(reactor.back()->waiter).status, AdmitStatus::queued);
    }
  }
  for (int i = 0; i < kNewGeneration; ++i) {
    fresh.push_back(std::make_unique<Parked>(i));
    ASSERT_EQ(admission.admit(fresh.back()->waiter).status, AdmitStatus::queued);
  }
  std::atomic<int> passed_on{0};
  std::atomic<int> stalls{0};
  std::latch go(3);
  std::vector<std::thread> reactors;
  reactors.reserve(retiring.size());
  for (auto& waiters : retiring) {
    reactors.emplace_back([&, mine = &waiters] {
      go.arrive_and_wait();
      for (auto& parked : *mine) {
        if (parked->waiter.cancel(CancelReason::retired)) continue;
        if (!eventually([&] { return parked->completed() > 0; })) {
          stalls.fetch_add(1);
          continue;
        }
        parked->waiter.take_permit().release();  // the request is gone: pass it on
        passed_on.fetch_add(1);
      }
    });
  }
  go.arrive_and_wait();
  a.release();
  b.release();
  for (auto& thread : reactors) thread.join();
  EXPECT_EQ(stalls.load(), 0);
  EXPECT_EQ(admission.cancelled(CancelReason::retired) + passed_on.load(), 2u * kPerReactor);
  EXPECT_EQ(admission.active(), 2);
  EXPECT_EQ(admission.pending(), kNewGeneration - 2);
  EXPECT_TRUE(fresh[0]->granted());
  EXPECT_TRUE(fresh[1]->granted());
  EXPECT_EQ(fresh[2]->completed(), 0);
  for (auto& parked : fresh) {
    ASSERT_TRUE(parked->granted());
    parked->waiter.take_permit().release();
  }
  EXPECT_EQ(admission.active(), 0);
  EXPECT_EQ(admission.pending(), 0);
}

}  // namespace
}  // namespace floodgate
