// The watchdog's decisions (resilience::Watchdog) on a ManualClock: each cause and its
// threshold, min_requests_per_window and min_timeout_spread per backend, consecutive windows and
// the reset by a healthy one, the drain and the restart after drain_grace, the cooldown,
// reporting without a command, and reconfiguration. Nothing sleeps: the clock moves one
// check_interval per window.
#include "floodgate/resilience/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/resilience/params.h"

namespace floodgate::resilience {
namespace {

using namespace std::chrono_literals;
using Action = WatchdogAction;

WatchdogParams params() {
  return WatchdogParams{.enabled = true,
                        .check_interval = 1s,
                        .poll_stall_timeout = 5s,
                        .timeout_error_rate_percent = 60,
                        .min_requests_per_window = 20,
                        .min_timeout_spread = 2,
                        .overload_inflight_percent = 95,
                        .unhealthy_consecutive_windows = 3,
                        .drain_grace = 8s,
                        .restart_cooldown = 120s,
                        .restart_command = {"/usr/bin/true"}};
}

// Two reactors, both answering, three backends with 100 attempts each and no timeout, no
// ceiling: healthy.
struct Window {
  std::vector<Clock::duration> unanswered{Clock::duration{0}, Clock::duration{0}};
  std::vector<WatchdogBackendWindow> backends{{100, 0}, {100, 0}, {100, 0}};
  uint64_t in_flight = 0;
  uint64_t ceiling = 0;

  WatchdogObservation observation() const {
    return {
        .unanswered = unanswered, .backends = backends, .in_flight = in_flight, .ceiling = ceiling};
  }
};

Window healthy() {
  return Window{};
}
Window stalled() {
  Window w;
  w.unanswered[1] = 5s;
  return w;
}
// Every backend timing out, as a wedged process would.
Window timing_out() {
  Window w;
  for (WatchdogBackendWindow& b : w.backends) b.timeouts = b.settled;
  return w;
}

struct Fixture {
  explicit Fixture(const WatchdogParams& p = params()) : watchdog(p, clock) {}

  // One window ends: the clock moves one check_interval, then the watchdog judges `w`.
  WatchdogVerdict window(const Window& w) {
    clock.advance(watchdog.params().check_interval);
    return watchdog.observe(w.observation());
  }
  // `n` windows like `w`; the actions in order.
  std::vector<Action> windows(const Window& w, int n) {
    std::vector<Action> out;
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out.push_back(window(w).action);
    return out;
  }
  WatchdogCauses causes(const Window& w) const { return watchdog.classify(w.observation()); }

  ManualClock clock;
  Watchdog watchdog;
};

WatchdogCauses only(WatchdogCause c) {
  WatchdogCauses causes;
  causes.add(c);
  return causes;
}

// --- classifying a window ---

TEST(WatchdogClassify, AWindowWithEveryFigureBelowItsThresholdIsHealthy) {
  Fixture f;
  EXPECT_TRUE(f.causes(healthy()).empty());
}

TEST(WatchdogClassify, AReactorWhosePingWaitedPollStallTimeoutIsAStall) {
  Fixture f;
  std::optional<std::size_t> which;
  EXPECT_EQ(f.watchdog.classify(stalled().observation(), &which), only(WatchdogCause::poll_stall));
  EXPECT_EQ(which, 1u);
}

TEST(WatchdogClassify, APingUnansweredForLessThanPollStallTimeoutIsNoStall) {
  Fixture f;
  Window w;
  w.unanswered[0] = 5s - 1ms;
  EXPECT_TRUE(f.causes(w).empty());
}

TEST(WatchdogClassify, TimeoutsAtTheRateOnMinTimeoutSpreadBackendsAreUnhealthy) {
  Fixture f;  // 60% of at least 20 attempts, on 2 backends
  Window w;
  w.backends = {{20, 12}, {20, 12}, {100, 0}};  // 60% on two of three
  EXPECT_EQ(f.causes(w), only(WatchdogCause::timeout_rate));
  w.backends[1].timeouts = 11;  // 55%: one backend left
  EXPECT_TRUE(f.causes(w).empty());
}

TEST(WatchdogClassify, OneSlowBackendIsNotAWedgedProcess) {
  Fixture f;
  Window w;
  w.backends = {{1000, 1000}, {20, 0}, {20, 0}};
  const WatchdogVerdict v = f.window(w);
  EXPECT_TRUE(v.causes.empty());
  EXPECT_EQ(v.timed_out_backends, 1u);
}

TEST(WatchdogClassify, TimeoutsOverFewerThanMinRequestsPerWindowDoNotCountTowardTheSpread) {
  Fixture f;
  Window w;
  w.backends = {{19, 19}, {19, 19}, {20, 20}};
  EXPECT_TRUE(f.causes(w).empty());
  EXPECT_FALSE(f.watchdog.timed_out({19, 19}));
  EXPECT_TRUE(f.watchdog.timed_out({20, 12}));
}

TEST(WatchdogClassify, ABackendWithNoAttemptsNeverTimesOut) {
  WatchdogParams p = params();
  p.timeout_error_rate_percent = 0;
  p.min_requests_per_window = 1;
  Fixture f(p);
  EXPECT_FALSE(f.watchdog.timed_out({0, 0}));
  EXPECT_TRUE(f.watchdog.timed_out({1, 0}));  // 0% means any attempt at all
}

TEST(WatchdogClassify, ALoneBackendIsJudgedOnlyWhenMinTimeoutSpreadIsOne) {
  Window w;
  w.backends = {{50, 50}};
  EXPECT_TRUE(Fixture{}.causes(w).empty());
  WatchdogParams p = params();
  p.min_timeout_spread = 1;
  EXPECT_EQ(Fixture{p}.causes(w), only(WatchdogCause::timeout_rate));
}

TEST(WatchdogClassify, AWiderSpreadNeedsThatManyBackendsTimingOutAtOnce) {
  WatchdogParams p = params();
  p.min_timeout_spread = 3;
  Fixture f(p);
  Window w = timing_out();
  w.backends[2].timeouts = 0;
  EXPECT_TRUE(f.causes(w).empty());
  EXPECT_EQ(f.causes(timing_out()), only(WatchdogCause::timeout_rate));
}

TEST(WatchdogClassify, TheVerdictCountsTheBackendsThatTimedOut) {
  Fixture f;
  EXPECT_EQ(f.window(timing_out()).timed_out_backends, 3u);
  EXPECT_EQ(f.window(healthy()).timed_out_backends, 0u);
}

TEST(WatchdogClassify, InFlightAtTheOverloadShareOfTheCeilingIsUnhealthy) {
  Fixture f;
  Window w;
  w.ceiling = 200;
  w.in_flight = 190;  // 95%
  EXPECT_EQ(f.causes(w), only(WatchdogCause::overload));
  w.in_flight = 189;
  EXPECT_TRUE(f.causes(w).empty());
}

TEST(WatchdogClassify, WithoutACeilingInFlightIsNeverOverload) {
  Fixture f;
  Window w;
  w.in_flight = 1'000'000;
  EXPECT_TRUE(f.causes(w).empty());
}

TEST(WatchdogClassify, AWindowCanHaveEveryCauseAtOnce) {
  Fixture f;
  Window w = timing_out();
  w.unanswered[1] = 5s;
  w.ceiling = 10;
  w.in_flight = 10;
  const WatchdogCauses c = f.causes(w);
  EXPECT_EQ(c.to_string(), "poll_stall, timeout_rate, overload");
  EXPECT_EQ(WatchdogCauses::from_bits(c.bits()), c);
}

// --- consecutive windows ---

TEST(Watchdog, DrainsAtTheConfiguredNumberOfUnhealthyWindowsInARow) {
  Fixture f;
  EXPECT_EQ(f.windows(stalled(), 3), (std::vector{Action::none, Action::none, Action::drain}));
  EXPECT_TRUE(f.watchdog.draining());
}

TEST(Watchdog, CountsUnhealthyWindowsInTheVerdict) {
  Fixture f;
  EXPECT_EQ(f.window(stalled()).consecutive, 1u);
  EXPECT_EQ(f.window(stalled()).consecutive, 2u);
  EXPECT_EQ(f.window(healthy()).consecutive, 0u);
}

TEST(Watchdog, AHealthyWindowStartsTheCountAgain) {
  Fixture f;
  f.windows(stalled(), 2);
  f.window(healthy());
  EXPECT_EQ(f.windows(stalled(), 2), (std::vector{Action::none, Action::none}));
  EXPECT_EQ(f.window(stalled()).action, Action::drain);
}

TEST(Watchdog, DifferentCausesInARowAddUp) {
  Fixture f;
  Window overload;
  overload.ceiling = 10;
  overload.in_flight = 10;
  f.window(stalled());
  f.window(timing_out());
  EXPECT_EQ(f.window(overload).action, Action::drain);
}

// --- drain, then restart ---

TEST(Watchdog, RestartsAtTheFirstWindowEndAfterDrainGrace) {
  Fixture f;  // drain_grace 8 s, check_interval 1 s
  f.windows(stalled(), 3);
  EXPECT_EQ(f.watchdog.restart_due(), f.clock.now() + 8s);
  EXPECT_EQ(f.windows(stalled(), 7), std::vector<Action>(7, Action::none));
  EXPECT_EQ(f.window(stalled()).action, Action::restart);
  EXPECT_FALSE(f.watchdog.draining());
}

TEST(Watchdog, HealthyWindowsDuringTheDrainDoNotCancelIt) {
  Fixture f;
  f.windows(stalled(), 3);
  EXPECT_EQ(f.windows(healthy(), 7), std::vector<Action>(7, Action::none));
  EXPECT_TRUE(f.watchdog.draining());
  EXPECT_EQ(f.window(healthy()).action, Action::restart);
}

TEST(Watchdog, RestartsOncePerDrainAndCountsAfreshAfterIt) {
  WatchdogParams p = params();
  p.restart_cooldown = 1s;
  Fixture f(p);
  f.windows(stalled(), 3);
  f.windows(stalled(), 8);  // the restart is the 8th
  EXPECT_EQ(f.window(stalled()).consecutive, 1u);
  EXPECT_EQ(f.windows(stalled(), 2), (std::vector{Action::none, Action::drain}));
}

// --- the cooldown ---

TEST(Watchdog, ARestartThatWouldFallInsideTheCooldownOnlyReports) {
  Fixture f;                 // cooldown 120 s; a drain takes 8 s
  f.windows(stalled(), 11);  // drain at 3 s, restart at 11 s
  EXPECT_EQ(f.windows(stalled(), 3), (std::vector{Action::none, Action::none, Action::report}));
  EXPECT_FALSE(f.watchdog.draining());
}

TEST(Watchdog, DrainsAgainOnceTheRestartItLeadsToIsOutsideTheCooldown) {
  WatchdogParams p = params();
  p.unhealthy_consecutive_windows = 1;
  Fixture f(p);
  f.window(stalled());      // drain at 1 s
  f.windows(stalled(), 8);  // restart at 9 s: the cooldown lasts until 129 s
  f.clock.advance(110s);
  EXPECT_EQ(f.window(stalled()).action, Action::report);  // at 120 s: a restart at 128 s
  EXPECT_EQ(f.window(stalled()).action, Action::drain);   // at 121 s: a restart at 129 s
}

// --- without a command ---

TEST(Watchdog, WithoutARestartCommandItOnlyReportsAndNeverDrains) {
  WatchdogParams p = params();
  p.restart_command.clear();
  Fixture f(p);
  EXPECT_EQ(f.windows(stalled(), 3), (std::vector{Action::none, Action::none, Action::report}));
  EXPECT_FALSE(f.watchdog.draining());
}

TEST(Watchdog, ALastingProblemReportsOnceEveryThresholdOfWindows) {
  WatchdogParams p = params();
  p.restart_command.clear();
  Fixture f(p);
  EXPECT_EQ(f.windows(stalled(), 6), (std::vector{Action::none, Action::none, Action::report,
                                                  Action::none, Action::none, Action::report}));
}

// --- reconfiguration ---

TEST(Watchdog, NewThresholdsApplyFromTheNextWindowAndKeepTheCount) {
  Fixture f;
  f.windows(stalled(), 2);
  WatchdogParams p = params();
  p.unhealthy_consecutive_windows = 5;
  EXPECT_FALSE(f.watchdog.set_params(p));
  EXPECT_EQ(f.windows(stalled(), 3), (std::vector{Action::none, Action::none, Action::drain}));
}

TEST(Watchdog, RemovingTheRestartCommandEndsADrainInProgress) {
  Fixture f;
  f.windows(stalled(), 3);
  WatchdogParams p = params();
  p.restart_command.clear();
  EXPECT_TRUE(f.watchdog.set_params(p));
  EXPECT_FALSE(f.watchdog.draining());
  EXPECT_EQ(f.windows(healthy(), 10), std::vector<Action>(10, Action::none));
}

TEST(Watchdog, ResetForgetsTheDrainButNotTheCooldown) {
  Fixture f;
  f.windows(stalled(), 11);  // restarted at 11 s
  f.windows(stalled(), 2);
  f.watchdog.reset();
  EXPECT_EQ(f.watchdog.consecutive(), 0u);
  EXPECT_EQ(f.windows(stalled(), 3), (std::vector{Action::none, Action::none, Action::report}));
}

TEST(Watchdog, JudgingAWindowAllocatesNothing) {
  Fixture f;
  Window w = timing_out();
  w.unanswered[1] = 5s;
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  for (int i = 0; i < 30; ++i) f.window(w);
  EXPECT_EQ(counted_heap_allocations() - before, 0u);
}

}  // namespace
}  // namespace floodgate::resilience
