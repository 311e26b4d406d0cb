// The circuit breaker under concurrent callers (CircuitBreakerRace, the tests the
// ThreadSanitizer build exists for): racing probes at the half-open moment, racing failures,
// mixed traffic with reloads. Threads start together on latches and barriers; nothing sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "circuit_breaker_fixture.h"
#include "floodgate/resilience/circuit_breaker.h"

namespace floodgate::resilience {
namespace {

using namespace breaker_test;

constexpr int kThreads = 8;

// N threads ask at the half-open moment; exactly max_probes of them get a probe. Each round
// ends the period one way or the other and opens the next, so every round races a fresh
// open -> half_open.
void race_the_half_open_moment(uint32_t max_probes) {
  constexpr int kRounds = 300;
  Fixture f(limits(1, 1s, max_probes));
  f.fail();
  std::vector<CircuitPass> passes(kThreads);
  std::barrier sync(kThreads + 1);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        sync.arrive_and_wait();  // the period has passed
        passes[t] = f.pass();
        sync.arrive_and_wait();  // the main thread counts
      }
    });
  }
  for (int round = 0; round < kRounds; ++round) {
    f.clock.advance(1s);
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    CircuitPass* winner = nullptr;
    uint32_t probes = 0;
    for (CircuitPass& p : passes) {
      EXPECT_NE(p.kind(), Kind::regular);
      if (p.probe()) {
        ++probes;
        winner = &p;
      }
    }
    ASSERT_EQ(probes, max_probes) << "round " << round;
    ASSERT_EQ(f.breaker.probes_in_flight(), max_probes);
    if (round % 2 == 0) {
      f.breaker.record(std::move(*winner), kFailure, f.clock.now());  // reopens
    } else {
      f.breaker.record(std::move(*winner), kSuccess, f.clock.now());  // closes
      f.fail();
    }
    for (CircuitPass& p : passes) p = CircuitPass();  // stragglers: give back nothing
    ASSERT_EQ(f.state(), open);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.breaker.transitions(open, half_open), uint64_t{kRounds});
  EXPECT_EQ(f.breaker.transitions(half_open, open), uint64_t{kRounds / 2});
  EXPECT_EQ(f.breaker.transitions(half_open, closed), uint64_t{kRounds / 2});
}

TEST(CircuitBreakerRace, ExactlyOneOfManyRacingAttemptsGetsTheOnlyProbe) {
  race_the_half_open_moment(1);
}

TEST(CircuitBreakerRace, ExactlyThreeOfManyRacingAttemptsGetTheThreeProbes) {
  race_the_half_open_moment(3);
}

TEST(CircuitBreakerRace, ManyThreadsFailingAtOnceOpenTheCircuitExactlyOnce) {
  constexpr int kEach = 50;
  Fixture f(limits(5, 30s));
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<CircuitPass> passes;  // all admitted while closed
      passes.reserve(kEach);
      for (int i = 0; i < kEach; ++i) passes.push_back(f.pass());
      start.arrive_and_wait();
      for (CircuitPass& p : passes) f.breaker.record(std::move(p), kFailure, f.clock.now());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.breaker.transitions(closed, open), 1u);
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.streak(), uint32_t{kThreads * kEach});
  EXPECT_EQ(f.breaker.half_open_at(), f.clock.now() + 30s);
}

// The rate rule under racing failures: the counts are read beside the word, so several
// failures may see the rate reached at once; exactly one of them opens the circuit, and every
// verdict is in the window.
TEST(CircuitBreakerRace, ManyThreadsFailingAtTheRateOpenTheCircuitExactlyOnce) {
  constexpr int kEach = 50;
  Fixture f(window_limits(100, 50, 1'000'000));
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<CircuitPass> passes;  // all admitted while closed
      passes.reserve(kEach);
      for (int i = 0; i < kEach; ++i) passes.push_back(f.pass());
      start.arrive_and_wait();
      for (CircuitPass& p : passes) f.breaker.record(std::move(p), kFailure, f.clock.now());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.breaker.transitions(closed, open), 1u);
  EXPECT_EQ(f.state(), open);
  EXPECT_EQ(f.breaker.window(f.clock.now()),
            (FailureWindow::Counts{.requests = kThreads * kEach, .failures = kThreads * kEach}));
}

// Mixed traffic with time moving and limits reloading: no probe limit is ever exceeded, no
// permit leaks, and the transition counts balance with the final state.
TEST(CircuitBreakerRace, TransitionsBalanceUnderMixedTrafficAndReloads) {
  constexpr int kIterations = 20'000;
  Fixture f(limits(2, 20ns, 3));
  std::atomic<bool> over_limit{false};
  std::atomic<bool> done{false};
  std::latch start(kThreads + 1);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint32_t rng = 2654435761u * static_cast<uint32_t>(t + 1);
      start.arrive_and_wait();
      for (int i = 0; i < kIterations; ++i) {
        rng = rng * 1664525u + 1013904223u;
        f.clock.advance(1ns);
        CircuitPass pass = f.pass();
        if (f.breaker.probes_in_flight() > 3) over_limit = true;
        switch ((rng >> 24) % 4) {
          case 0:
            f.breaker.abandon(std::move(pass));
            break;
          case 1:
            f.breaker.record(std::move(pass), kFailure, f.clock.now());
            break;
          default:
            f.breaker.record(std::move(pass), kSuccess, f.clock.now());
        }
      }
    });
  }
  std::thread reloader([&] {
    start.arrive_and_wait();
    for (uint32_t i = 0; !done.load(); ++i) {
      f.breaker.set_limits(limits(1 + i % 3, 10ns + 10ns * (i % 2), 1 + i % 3));
    }
  });
  for (std::thread& t : threads) t.join();
  done = true;
  reloader.join();
  EXPECT_FALSE(over_limit.load());
  EXPECT_EQ(f.breaker.probes_in_flight(), 0u);
  const uint64_t to_open =
      f.breaker.transitions(closed, open) + f.breaker.transitions(half_open, open);
  const uint64_t to_half_open = f.breaker.transitions(open, half_open);
  const uint64_t from_half_open =
      f.breaker.transitions(half_open, closed) + f.breaker.transitions(half_open, open);
  EXPECT_GT(to_half_open, 0u);
  // The word's own state: before any deadline, state() does not read past-time as half-open.
  switch (f.breaker.state(Clock::time_point{})) {
    case closed:
      EXPECT_EQ(to_open, to_half_open);
      EXPECT_EQ(to_half_open, from_half_open);
      break;
    case open:
      EXPECT_EQ(to_open, to_half_open + 1);
      EXPECT_EQ(to_half_open, from_half_open);
      break;
    case half_open:
      EXPECT_EQ(to_open, to_half_open);
      EXPECT_EQ(to_half_open, from_half_open + 1);
      break;
  }
}

}  // namespace
}  // namespace floodgate::resilience
