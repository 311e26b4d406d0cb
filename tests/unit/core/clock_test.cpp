#include "floodgate/core/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace floodgate {
namespace {

using std::chrono::milliseconds;

TEST(ManualClock, StandsStillUntilMoved) {
  ManualClock clock;
  const auto t = clock.now();
  EXPECT_EQ(clock.now(), t);
}

TEST(ManualClock, AdvanceMovesItForwardByExactlyTheStep) {
  ManualClock clock;
  const auto t = clock.now();
  clock.advance(milliseconds(250));
  EXPECT_EQ(clock.now() - t, milliseconds(250));
}

TEST(ManualClock, SetPutsItAtTheGivenTime) {
  ManualClock clock;
  const auto at = Clock::time_point{} + std::chrono::hours(5);
  clock.set(at);
  EXPECT_EQ(clock.now(), at);
}

TEST(ManualClock, StartsFarEnoughFromTheEpochToSubtractSeconds) {
  ManualClock clock;
  EXPECT_GT(clock.now() - std::chrono::seconds(60), Clock::time_point{});
}

TEST(ManualClock, AMoveOnOneThreadIsSeenOnAnother) {
  ManualClock clock;
  const auto t = clock.now();
  std::thread([&] { clock.advance(milliseconds(5)); }).join();
  EXPECT_EQ(clock.now(), t + milliseconds(5));
}

TEST(SteadyClock, NeverGoesBackwards) {
  const Clock& clock = Clock::steady();
  const auto a = clock.now();
  const auto b = clock.now();
  EXPECT_LE(a, b);
}

TEST(SteadyClock, IsTheProcessSteadyClock) {
  const auto before = std::chrono::steady_clock::now();
  const auto t = Clock::steady().now();
  const auto after = std::chrono::steady_clock::now();
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);
}

}  // namespace
}  // namespace floodgate
