#include "floodgate/core/timer_wheel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace floodgate {
namespace {

using Clock = TimerWheel::Clock;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr Clock::duration kTick = milliseconds(10);
constexpr std::size_t kSlots = 64;
constexpr Clock::duration kRevolution = kTick * kSlots;
// A synthetic origin far from the clock's epoch, aligned to the resolution.
const Clock::time_point kT0{std::chrono::hours(1000)};

// A wheel driven by synthetic time points; `now` is the last time passed to advance().
struct Wheel {
  TimerWheel wheel{kTick, kSlots};
  Clock::time_point now = kT0;

  Wheel() { wheel.advance(now); }

  void advance(Clock::time_point t) {
    now = t;
    wheel.advance(now);
  }
  // Calls advance() at every `step` up to and including `until`.
  void run_until(Clock::time_point until, Clock::duration step = kTick) {
    while (now < until) advance(std::min(now + step, until));
  }
};

// An entry that records when it fired and then runs an optional action.
struct Probe {
  explicit Probe(Wheel& w) : w(w) {}
  Wheel& w;
  std::vector<Clock::time_point> fired;
  std::function<void(Probe&)> action;
  TimerWheel::Entry entry{&Probe::on_fire, this};

  void arm(Clock::time_point deadline) { w.wheel.schedule(entry, deadline); }
  static void on_fire(void* self) {
    auto& p = *static_cast<Probe*>(self);
    p.fired.push_back(p.w.now);
    if (p.action) p.action(p);
  }
};

// Deadlines relative to kT0 that are not aligned to the resolution, inside and beyond one
// revolution of the wheel.
const std::vector<Clock::duration> kOffsets = {
    nanoseconds(1),
    milliseconds(1),
    milliseconds(9) + nanoseconds(999'999),
    kTick,
    kTick + nanoseconds(1),
    milliseconds(123) + nanoseconds(456),
    kRevolution - nanoseconds(1),
    kRevolution,
    kRevolution + milliseconds(3),
    3 * kRevolution + milliseconds(57),
    7 * kRevolution + kTick,
};

TEST(TimerWheel, FiresNoEarlierThanTheDeadlineAndAtMostOneTickLate) {
  for (const Clock::duration offset : kOffsets) {
    Wheel w;
    Probe p(w);
    const Clock::time_point deadline = kT0 + offset;
    p.arm(deadline);
    w.run_until(deadline + 2 * kTick);
    ASSERT_EQ(p.fired.size(), 1u) << offset.count();
    EXPECT_GE(p.fired[0], deadline) << offset.count();
    EXPECT_LE(p.fired[0] - deadline, kTick) << offset.count();
  }
}

TEST(TimerWheel, NeverFiresEarlyWhenAdvancedAtIrregularTimes) {
  for (const Clock::duration offset : kOffsets) {
    Wheel w;
    Probe p(w);
    const Clock::time_point deadline = kT0 + offset;
    p.arm(deadline);
    // Steps not dividing the resolution visit every phase of a tick.
    w.run_until(deadline + kTick + milliseconds(7), milliseconds(3) + nanoseconds(17));
    ASSERT_EQ(p.fired.size(), 1u) << offset.count();
    EXPECT_GE(p.fired[0], deadline) << offset.count();
  }
}

TEST(TimerWheel, HasFiredByTheFirstAdvanceOneTickAfterTheDeadline) {
  for (const Clock::duration offset : kOffsets) {
    Wheel w;
    Probe p(w);
    const Clock::time_point deadline = kT0 + offset;
    p.arm(deadline);
    w.run_until(deadline + kTick - nanoseconds(1), milliseconds(3) + nanoseconds(17));
    w.advance(deadline + kTick);
    EXPECT_EQ(p.fired.size(), 1u) << offset.count();
  }
}

TEST(TimerWheel, DoesNotFireAnEntryBeforeItsRevolution) {
  Wheel w;
  Probe p(w);
  const Clock::time_point deadline = kT0 + 2 * kRevolution + milliseconds(5);
  p.arm(deadline);
  // The entry's slot is visited twice before its deadline.
  w.run_until(deadline - nanoseconds(1));
  EXPECT_TRUE(p.fired.empty());
  EXPECT_TRUE(p.entry.armed());
  w.run_until(deadline + kTick);
  EXPECT_EQ(p.fired.size(), 1u);
}

TEST(TimerWheel, FiresAPastDeadlineAtTheNextTick) {
  Wheel w;
  w.run_until(kT0 + milliseconds(500));
  Probe p(w);
  p.arm(kT0 + milliseconds(123));
  w.advance(w.now + kTick);
  EXPECT_EQ(p.fired.size(), 1u);
}

TEST(TimerWheel, FiresADeadlineEqualToTheLastAdvanceAtTheNextTick) {
  Wheel w;
  w.run_until(kT0 + milliseconds(500) + milliseconds(3));
  Probe p(w);
  p.arm(w.now);
  w.advance(w.now + kTick);
  EXPECT_EQ(p.fired.size(), 1u);
}

TEST(TimerWheel, FiresAnEntryScheduledBeforeTheFirstAdvanceWhoseDeadlineHasPassed) {
  TimerWheel wheel(kTick, kSlots);
  int fired = 0;
  TimerWheel::Entry e([](void* n) { ++*static_cast<int*>(n); }, &fired);
  wheel.schedule(e, kT0 + milliseconds(5));
  wheel.advance(kT0 + milliseconds(200));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(wheel.size(), 0u);
}

TEST(TimerWheel, DefaultWheelFiresWithinOneMillisecond) {
  TimerWheel wheel;
  EXPECT_EQ(wheel.resolution(), milliseconds(1));
  int fired = 0;
  TimerWheel::Entry e([](void* n) { ++*static_cast<int*>(n); }, &fired);
  wheel.advance(kT0);
  const Clock::time_point deadline =
      kT0 + std::chrono::seconds(60) + milliseconds(3) + nanoseconds(7);
  wheel.schedule(e, deadline);
  for (Clock::time_point t = kT0; t < deadline; t += milliseconds(1)) wheel.advance(t);
  EXPECT_EQ(fired, 0);
  wheel.advance(deadline + milliseconds(1));
  EXPECT_EQ(fired, 1);
}

TEST(TimerWheel, CancelledEntryNeverFires) {
  Wheel w;
  Probe p(w);
  p.arm(kT0 + milliseconds(35));
  p.entry.cancel();
  EXPECT_FALSE(p.entry.armed());
  w.run_until(kT0 + 2 * kRevolution);
  EXPECT_TRUE(p.fired.empty());
}

TEST(TimerWheel, CancellingAnUnarmedEntryIsANoOp) {
  Wheel w;
  Probe p(w);
  p.entry.cancel();
  Probe q(w);
  q.arm(kT0 + kTick);
  p.entry.cancel();
  EXPECT_EQ(w.wheel.size(), 1u);
  w.run_until(kT0 + 2 * kTick);
  EXPECT_EQ(q.fired.size(), 1u);
}

TEST(TimerWheel, RearmingMovesTheEntryToTheNewDeadline) {
  Wheel w;
  Probe p(w);
  p.arm(kT0 + milliseconds(30));
  p.arm(kT0 + milliseconds(95));
  EXPECT_EQ(w.wheel.size(), 1u);
  EXPECT_EQ(p.entry.deadline(), kT0 + milliseconds(95));
  w.run_until(kT0 + milliseconds(90));
  EXPECT_TRUE(p.fired.empty());
  w.run_until(kT0 + milliseconds(200));
  ASSERT_EQ(p.fired.size(), 1u);
  EXPECT_EQ(p.fired[0], kT0 + milliseconds(100));
}

TEST(TimerWheel, RearmingToAnEarlierDeadlineFiresAtTheEarlierOne) {
  Wheel w;
  Probe p(w);
  p.arm(kT0 + kRevolution + milliseconds(40));
  p.arm(kT0 + milliseconds(20));
  w.run_until(kT0 + 2 * kRevolution);
  ASSERT_EQ(p.fired.size(), 1u);
  EXPECT_EQ(p.fired[0], kT0 + milliseconds(20));
}

TEST(TimerWheel, FiredEntryIsNoLongerArmed) {
  Wheel w;
  Probe p(w);
  p.arm(kT0 + kTick);
  EXPECT_TRUE(p.entry.armed());
  w.run_until(kT0 + 2 * kTick);
  EXPECT_FALSE(p.entry.armed());
}

TEST(TimerWheel, SizeCountsArmedEntries) {
  Wheel w;
  EXPECT_EQ(w.wheel.size(), 0u);
  Probe a(w), b(w), c(w);
  a.arm(kT0 + milliseconds(10));
  b.arm(kT0 + milliseconds(50));
  c.arm(kT0 + kRevolution + milliseconds(10));
  EXPECT_EQ(w.wheel.size(), 3u);
  b.arm(kT0 + milliseconds(60));  // re-arm does not count twice
  EXPECT_EQ(w.wheel.size(), 3u);
  c.entry.cancel();
  EXPECT_EQ(w.wheel.size(), 2u);
  w.run_until(kT0 + milliseconds(20));  // a fires
  EXPECT_EQ(w.wheel.size(), 1u);
  {
    Probe d(w);
    d.arm(kT0 + milliseconds(500));
    EXPECT_EQ(w.wheel.size(), 2u);
  }  // ~Entry cancels
  EXPECT_EQ(w.wheel.size(), 1u);
  w.run_until(kT0 + milliseconds(100));
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, DestroyingAnArmedEntryCancelsIt) {
  Wheel w;
  int fired = 0;
  {
    TimerWheel::Entry e([](void* n) { ++*static_cast<int*>(n); }, &fired);
    w.wheel.schedule(e, kT0 + kTick);
  }
  w.run_until(kT0 + 3 * kTick);
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, FiresEveryDueEntryOfASlotOnce) {
  Wheel w;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < 10; ++i) {
    probes.push_back(std::make_unique<Probe>(w));
    // Same slot: the same tick, and the same tick a revolution later (not yet due).
    probes.back()->arm(kT0 + milliseconds(21) + (i % 2 == 0 ? kRevolution : Clock::duration{}));
  }
  w.run_until(kT0 + milliseconds(30));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(probes[i]->fired.size(), i % 2 == 0 ? 0u : 1u) << i;
  EXPECT_EQ(w.wheel.size(), 5u);
}

// Two entries due in the same slot; whichever fires first acts on the other.
struct SameSlotPair {
  explicit SameSlotPair(Wheel& w) : a(w), b(w) {}
  Probe a, b;
  Probe& other(Probe& p) { return &p == &a ? b : a; }
  int fired_total() const { return static_cast<int>(a.fired.size() + b.fired.size()); }
};

TEST(TimerWheel, CallbackCancellingAnotherDueEntryInTheSameSlotStopsIt) {
  Wheel w;
  SameSlotPair pair(w);
  for (Probe* p : {&pair.a, &pair.b}) {
    p->action = [&](Probe& self) { pair.other(self).entry.cancel(); };
    p->arm(kT0 + milliseconds(25));
  }
  w.run_until(kT0 + kRevolution * 2);
  EXPECT_EQ(pair.fired_total(), 1);
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, CallbackRearmingAnotherDueEntryInTheSameSlotMovesIt) {
  Wheel w;
  SameSlotPair pair(w);
  const Clock::time_point later = kT0 + milliseconds(205);
  for (Probe* p : {&pair.a, &pair.b}) {
    p->action = [&](Probe& self) {
      Probe& o = pair.other(self);
      if (o.fired.empty()) o.arm(later);
    };
    p->arm(kT0 + milliseconds(25));
  }
  w.run_until(kT0 + milliseconds(30));
  EXPECT_EQ(pair.fired_total(), 1);
  EXPECT_EQ(w.wheel.size(), 1u);
  w.run_until(kT0 + kRevolution * 2);
  ASSERT_EQ(pair.fired_total(), 2);
  Probe& second = pair.a.fired[0] == kT0 + milliseconds(30) ? pair.b : pair.a;
  EXPECT_EQ(second.fired[0], kT0 + milliseconds(210));
}

TEST(TimerWheel, CallbackDestroyingAnotherDueEntryInTheSameSlotIsSafe) {
  Wheel w;
  std::optional<Probe> a, b;
  a.emplace(w);
  b.emplace(w);
  int fired = 0;
  a->action = [&](Probe&) {
    ++fired;
    b.reset();
  };
  b->action = [&](Probe&) {
    ++fired;
    a.reset();
  };
  a->arm(kT0 + milliseconds(25));
  b->arm(kT0 + milliseconds(25));
  w.run_until(kT0 + kRevolution * 2);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(a.has_value() + b.has_value(), 1);
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, CallbackMayDestroyItsOwnEntry) {
  Wheel w;
  auto owned = std::make_unique<Probe>(w);
  Probe other(w);
  int fired = 0;
  owned->action = [&](Probe&) {
    ++fired;
    owned.reset();
  };
  owned->arm(kT0 + milliseconds(25));
  other.arm(kT0 + milliseconds(25));
  w.run_until(kT0 + milliseconds(40));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(owned, nullptr);
  EXPECT_EQ(other.fired.size(), 1u);
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, CallbackRearmingItselfFiresAgainAtTheNewDeadline) {
  Wheel w;
  Probe p(w);
  p.action = [](Probe& self) {
    if (self.fired.size() < 4) self.arm(self.entry.deadline() + milliseconds(45));
  };
  p.arm(kT0 + milliseconds(5));
  w.run_until(kT0 + kRevolution);
  const std::vector<Clock::time_point> expected = {kT0 + milliseconds(10), kT0 + milliseconds(50),
                                                   kT0 + milliseconds(100),
                                                   kT0 + milliseconds(140)};
  EXPECT_EQ(p.fired, expected);
  EXPECT_EQ(w.wheel.size(), 0u);
}

TEST(TimerWheel, CallbackRearmingItselfBeyondARevolutionFiresOnTime) {
  Wheel w;
  Probe p(w);
  p.action = [](Probe& self) {
    if (self.fired.size() == 1) self.arm(self.w.now + kRevolution + milliseconds(5));
  };
  p.arm(kT0 + milliseconds(10));
  w.run_until(kT0 + 3 * kRevolution);
  ASSERT_EQ(p.fired.size(), 2u);
  EXPECT_EQ(p.fired[1], kT0 + milliseconds(10) + kRevolution + kTick);
}

TEST(TimerWheel, AdvanceAfterAGapLongerThanARevolutionFiresEverythingDueExactlyOnce) {
  Wheel w;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < 200; ++i) {
    probes.push_back(std::make_unique<Probe>(w));
    probes.back()->arm(kT0 + milliseconds(6) * i + nanoseconds(i));
  }
  Probe later(w);
  const Clock::time_point gap_end = kT0 + 2 * kRevolution + milliseconds(3);
  later.arm(gap_end + milliseconds(50));
  w.advance(gap_end);
  for (const auto& p : probes) EXPECT_EQ(p->fired.size(), 1u);
  EXPECT_TRUE(later.fired.empty());
  EXPECT_EQ(w.wheel.size(), 1u);
  w.run_until(gap_end + kRevolution);
  for (const auto& p : probes) EXPECT_EQ(p->fired.size(), 1u);
  ASSERT_EQ(later.fired.size(), 1u);
  EXPECT_GE(later.fired[0], gap_end + milliseconds(50));
}

TEST(TimerWheel, EntryArmedByACallbackForAPassedDeadlineFiresWithinOneTick) {
  // During an advance() that covers many ticks, a callback arms an entry for a deadline
  // that lies in a slot the same advance() already visited.
  Wheel w;
  Probe late(w), trigger(w);
  trigger.action = [&](Probe&) { late.arm(kT0 + milliseconds(15)); };
  trigger.arm(kT0 + milliseconds(80));
  w.advance(kT0 + milliseconds(100));
  ASSERT_EQ(trigger.fired.size(), 1u);
  w.advance(kT0 + milliseconds(110));
  EXPECT_EQ(late.fired.size(), 1u);
}

// An event loop that sleeps until next_due() and then advances: how a reactor drives its wheel
// (Poller::run). Counts its wake-ups.
struct SleepingLoop {
  SleepingLoop(TimerWheel& wheel, Clock::time_point start) : wheel(wheel), now(start) {
    wheel.advance(now);
  }
  TimerWheel& wheel;
  Clock::time_point now;
  int wakeups = 0;
  std::vector<Clock::time_point> fired;  // when a Recorder entry fired

  // Sleeps and wakes until `until` (or until nothing is armed).
  void run_until(Clock::time_point until) {
    for (;;) {
      const Clock::time_point due = wheel.next_due();
      if (due == Clock::time_point::max() || due > until) return;
      if (due > now) now = due;
      ++wakeups;
      wheel.advance(now);
    }
  }
  static void record(void* self) {
    auto& loop = *static_cast<SleepingLoop*>(self);
    loop.fired.push_back(loop.now);
  }
};

void count(void* n) {
  ++*static_cast<int*>(n);
}

TEST(TimerWheel, NextDueIsNeverWhenNothingIsArmed) {
  TimerWheel wheel;
  EXPECT_EQ(wheel.next_due(), Clock::time_point::max());
  wheel.advance(kT0);
  EXPECT_EQ(wheel.next_due(), Clock::time_point::max());
}

TEST(TimerWheel, NextDueIsAtOnceForEntriesArmedBeforeTheFirstAdvance) {
  TimerWheel wheel;
  int fired = 0;
  TimerWheel::Entry e(&count, &fired);
  wheel.schedule(e, kT0 + milliseconds(20));
  EXPECT_EQ(wheel.next_due(), Clock::time_point::min());
  wheel.advance(kT0);
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(wheel.next_due(), kT0 + milliseconds(20));
}

TEST(TimerWheel, ALoopSleepingUntilNextDueFiresEachDeadlineWithinOneMillisecond) {
  // Deadlines near and far, off the millisecond, beyond the inner span and the outer one.
  const std::vector<Clock::duration> offsets = {
      nanoseconds(1),
      milliseconds(20) + nanoseconds(300),
      milliseconds(1023),
      milliseconds(1024) + nanoseconds(1),
      milliseconds(1300) + nanoseconds(5),
      std::chrono::seconds(5) + milliseconds(17),
      std::chrono::seconds(60) + nanoseconds(999'999),
      std::chrono::minutes(17) + milliseconds(400),
      std::chrono::hours(2) + milliseconds(9) + nanoseconds(1),
  };
  for (const Clock::duration offset : offsets) {
    TimerWheel wheel;
    SleepingLoop loop(wheel, kT0);
    TimerWheel::Entry e(&SleepingLoop::record, &loop);
    const Clock::time_point deadline = kT0 + offset;
    wheel.schedule(e, deadline);
    loop.run_until(deadline + std::chrono::seconds(1));
    ASSERT_EQ(loop.fired.size(), 1u) << offset.count();
    EXPECT_GE(loop.fired[0], deadline) << offset.count();
    EXPECT_LE(loop.fired[0] - deadline, milliseconds(1)) << offset.count();
    // A far deadline costs a wake-up per outer revolution (about 17 minutes) and two more to
    // move it in and fire it: never a periodic tick.
    EXPECT_LE(loop.wakeups, 3 + static_cast<int>(offset / std::chrono::minutes(17)))
        << offset.count();
  }
}

TEST(TimerWheel, NextDueFindsTheNextDeadlineAcrossWordsAndRoundTheWheel) {
  // Loops started at every phase of the bitmaps' words and of the wheel's revolution, so that
  // the next entry lies in the same word, a later word, or round the end of the ring.
  const std::vector<Clock::duration> starts = {milliseconds(0),    milliseconds(63),
                                               milliseconds(64),   milliseconds(1000),
                                               milliseconds(1023), std::chrono::seconds(1047)};
  const std::vector<Clock::duration> offsets = {
      milliseconds(1),    milliseconds(5),    milliseconds(70),         milliseconds(700),
      milliseconds(1020), milliseconds(1500), std::chrono::seconds(300)};
  for (const Clock::duration start : starts) {
    for (const Clock::duration offset : offsets) {
      TimerWheel wheel;
      SleepingLoop loop(wheel, kT0 + start);
      TimerWheel::Entry e(&SleepingLoop::record, &loop);
      const Clock::time_point deadline = loop.now + offset;
      wheel.schedule(e, deadline);
      const Clock::time_point due = wheel.next_due();
      EXPECT_GT(due, loop.now) << start.count() << " " << offset.count();
      EXPECT_LE(due, deadline) << start.count() << " " << offset.count();
      loop.run_until(deadline + std::chrono::seconds(1));
      ASSERT_EQ(loop.fired.size(), 1u) << start.count() << " " << offset.count();
      EXPECT_GE(loop.fired[0], deadline);
      EXPECT_LE(loop.fired[0] - deadline, milliseconds(1))
          << start.count() << " " << offset.count();
    }
  }
}

TEST(TimerWheel, AnIdleLoopWithOnlyFarDeadlinesWakesRarely) {
  // Ten thousand keep-alive connections idle for a minute: the loop wakes to move each outer
  // slot's entries in (a few times a second, near the end) and to fire them, never once a
  // millisecond meanwhile.
  TimerWheel wheel;
  SleepingLoop loop(wheel, kT0);
  int fired = 0;
  std::vector<std::unique_ptr<TimerWheel::Entry>> entries;
  for (int i = 0; i < 10'000; ++i) {
    entries.push_back(std::make_unique<TimerWheel::Entry>(&count, &fired));
    wheel.schedule(*entries.back(), kT0 + std::chrono::seconds(60) + milliseconds(i % 2000));
  }
  loop.run_until(kT0 + std::chrono::seconds(59));
  EXPECT_EQ(fired, 0);
  EXPECT_LE(loop.wakeups, 2);
  loop.run_until(kT0 + std::chrono::seconds(63));
  EXPECT_EQ(fired, 10'000);
  EXPECT_EQ(wheel.size(), 0u);
  // Two seconds of deadlines, one per millisecond, plus the outer slots that move them in.
  EXPECT_LE(loop.wakeups, 2000 + 12);
}

TEST(TimerWheel, CancellingTheNextDueEntryMovesNextDueToTheOneAfter) {
  TimerWheel wheel;
  wheel.advance(kT0);
  int fired = 0;
  TimerWheel::Entry a(&count, &fired);
  TimerWheel::Entry b(&count, &fired);
  wheel.schedule(a, kT0 + milliseconds(5));
  wheel.schedule(b, kT0 + milliseconds(40) + nanoseconds(1));
  EXPECT_EQ(wheel.next_due(), kT0 + milliseconds(5));
  a.cancel();
  EXPECT_EQ(wheel.next_due(), kT0 + milliseconds(41));
  b.cancel();
  EXPECT_EQ(wheel.next_due(), Clock::time_point::max());
}

TEST(TimerWheel, AFarEntryRearmedNearFiresAtItsNewDeadline) {
  TimerWheel wheel;
  SleepingLoop loop(wheel, kT0);
  TimerWheel::Entry e(&SleepingLoop::record, &loop);
  wheel.schedule(e, kT0 + std::chrono::seconds(30));
  loop.run_until(kT0 + milliseconds(10));
  wheel.schedule(e, kT0 + milliseconds(15));
  loop.run_until(kT0 + std::chrono::seconds(40));
  ASSERT_EQ(loop.fired.size(), 1u);
  EXPECT_EQ(loop.fired[0], kT0 + milliseconds(15));
}

}  // namespace
}  // namespace floodgate
