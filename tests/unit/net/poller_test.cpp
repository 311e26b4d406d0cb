// The reactor's event loop (include/floodgate/net/poller.h): work handed in from other
// threads always runs, however busy the ready list is. Run on both kernel interfaces (where
// the kernel refuses io_uring, its cases are skipped).
#include "floodgate/net/poller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/timer_wheel.h"

namespace floodgate::net {
namespace {

// Work for the loop that records when it ran and what it saw.
struct Probe final : RemoteTask {
  Probe() : RemoteTask([](RemoteTask& t) { static_cast<Probe&>(t).run_probe(); }) {}
  void run_probe();
  class Requeuing* busy = nullptr;
  int busy_runs_seen = -1;  // how often the busy target had run when the probe ran
  std::promise<void> ran;
};

// A target that queues itself on the ready list again every time it runs, as a listener does
// between batches of accepts while connections keep arriving. On its first run it hands the
// loop a task from the loop's own thread (as a request ending on a reactor grants its slot to
// a waiter of the same reactor); it stops once that task has run, or after `bound` runs.
class Requeuing final : public PollTarget {
 public:
  Requeuing(Poller& poller, Probe& probe, int bound)
      : poller_(poller), probe_(probe), bound_(bound) {}
  void on_poll(uint32_t) override {}
  void on_ready() override {
    if (++runs_ == 1) poller_.send(probe_);
    if (runs_ < bound_ && !probe_done_) return poller_.defer(*this);
    poller_.stop();
  }
  int runs() const { return runs_; }
  void probe_done() { probe_done_ = true; }

 private:
  Poller& poller_;
  Probe& probe_;
  const int bound_;
  int runs_ = 0;
  bool probe_done_ = false;
};

void Probe::run_probe() {
  if (busy != nullptr) {
    busy_runs_seen = busy->runs();
    busy->probe_done();
  }
  ran.set_value();
}

class PollerTest : public ::testing::TestWithParam<IoMode> {
 protected:
  void SetUp() override {
    try {
      poller_.emplace(io_, GetParam());
    } catch (const std::system_error&) {
      GTEST_SKIP() << "io_uring is not available on this kernel";
    }
  }
  boost::asio::io_context io_;
  std::optional<Poller> poller_;
};

// A target that records the loop's time when it runs, then stops the loop.
class TimeProbe final : public PollTarget {
 public:
  explicit TimeProbe(Poller& poller) : poller_(poller) {}
  void on_poll(uint32_t) override {}
  void on_ready() override {
    seen = poller_.now();
    poller_.stop();
  }
  Clock::time_point seen{};

 private:
  Poller& poller_;
};

TEST_P(PollerTest, TheLoopTimeComesFromTheInjectedClock) {
  ManualClock clock;
  clock.advance(std::chrono::minutes(7));
  boost::asio::io_context io;
  std::optional<Poller> poller;
  poller.emplace(io, GetParam(), clock);  // SetUp() already skipped where io_uring is missing
  EXPECT_EQ(poller->now(), clock.now());
  TimeProbe probe(*poller);
  poller->defer(probe);
  poller->run();
  EXPECT_EQ(probe.seen, clock.now());
}

TEST_P(PollerTest, ATaskRunsOnTheNextTurnWhileATargetKeepsQueuingItselfAgain) {
  Probe probe;
  Requeuing busy(*poller_, probe, 100'000);
  probe.busy = &busy;
  poller_->defer(busy);
  poller_->run();
  // Unbounded passes over the ready list would have run the target 100'000 times without
  // looking at the inbox again (and the probe would never have run).
  EXPECT_GE(probe.busy_runs_seen, 1);
  EXPECT_LE(probe.busy_runs_seen, 2);
}

TEST_P(PollerTest, ATaskSentFromAnotherThreadWakesAWaitingLoop) {
  Poller& poller = *poller_;
  Probe probe;
  struct Stop final : RemoteTask {
    explicit Stop(Poller& p)
        : RemoteTask([](RemoteTask& t) { static_cast<Stop&>(t).poller.stop(); }), poller(p) {}
    Poller& poller;
  } stop(poller);
  std::future<void> ran = probe.ran.get_future();
  std::thread loop([&] { poller.run(); });  // nothing is ready: it waits in the kernel
  std::thread sender([&] { poller.send(probe); });
  sender.join();
  const bool woke = ran.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  poller.send(stop);
  if (!woke) poller.wake();  // a loop that slept through the task still has to end
  loop.join();
  EXPECT_TRUE(woke) << "a task sent from another thread did not wake the loop";
}

// Heavy work (a TLS handshake's step, Poller::defer_heavy) and the ordinary work of a turn,
// recorded in the order the loop ran them. Each heavy step makes the connection it stands for
// ready again (as its handshake flight does); the ordinary target stops the loop once every
// heavy step has run. Without an ordinary target, the last heavy step stops it.
struct Trace {
  std::string order;
  int heavy_left = 0;
};

class Ordinary final : public PollTarget {
 public:
  Ordinary(Poller& poller, Trace& trace) : poller_(poller), trace_(trace) {}
  void on_poll(uint32_t) override {}
  void on_ready() override {
    trace_.order += 'r';
    if (trace_.heavy_left == 0) poller_.stop();
  }

 private:
  Poller& poller_;
  Trace& trace_;
};

class Heavy final : public PollTarget {
 public:
  Heavy(Poller& poller, Trace& trace, Ordinary* ready)
      : poller_(poller), trace_(trace), ready_(ready) {}
  void on_poll(uint32_t) override {}
  void on_ready() override {}
  void on_heavy() override {
    trace_.order += 'h';
    --trace_.heavy_left;
    if (ready_ != nullptr) return poller_.defer(*ready_);
    if (trace_.heavy_left == 0) poller_.stop();
  }

 private:
  Poller& poller_;
  Trace& trace_;
  Ordinary* const ready_;
};

// Stops a loop from another thread if it has not ended by itself within 20 s (a loop waiting
// in the kernel with heavy work queued would never end).
class Deadline {
 public:
  explicit Deadline(Poller& poller) : poller_(poller), stop_(poller) {
    thread_ = std::thread([this] {
      if (ended_.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready) {
        return;
      }
      fired = true;
      poller_.send(stop_);
    });
  }
  ~Deadline() {
    ended_.set_value();
    thread_.join();
  }
  std::atomic<bool> fired = false;

 private:
  struct Stop final : RemoteTask {
    explicit Stop(Poller& p)
        : RemoteTask([](RemoteTask& t) { static_cast<Stop&>(t).poller.stop(); }), poller(p) {}
    Poller& poller;
  };
  Poller& poller_;
  Stop stop_;
  std::promise<void> ended_;
  std::thread thread_;
};

std::string heavy_trace(Poller& poller, bool with_ordinary_work, bool& timed_out) {
  Trace trace;
  Ordinary ready(poller, trace);
  std::vector<std::unique_ptr<Heavy>> heavy;
  for (int i = 0; i < 4; ++i) {
    heavy.push_back(std::make_unique<Heavy>(poller, trace, with_ordinary_work ? &ready : nullptr));
    poller.defer_heavy(*heavy.back());
    ++trace.heavy_left;
  }
  poller.defer_heavy(*heavy.front());  // already queued: runs once
  {
    Deadline deadline(poller);
    poller.run();
    timed_out = deadline.fired;
  }
  return trace.order;
}

TEST_P(PollerTest, OneHeavyStepRunsPerTurnAfterTheTurnsOrdinaryWork) {
  bool timed_out = false;
  EXPECT_EQ(heavy_trace(*poller_, true, timed_out), "hrhrhrhr");
  EXPECT_FALSE(timed_out);
}

TEST_P(PollerTest, HeavyWorkAloneRunsBackToBackWithoutWaitingForTheKernel) {
  bool timed_out = false;
  EXPECT_EQ(heavy_trace(*poller_, false, timed_out), "hhhh");
  EXPECT_FALSE(timed_out) << "the loop waited in the kernel with heavy work queued";
}

// Timers armed on the loop's wheel, each recording the loop's time when it fired; the last
// one stops the loop.
struct TimerTrace {
  Poller* poller = nullptr;
  int left = 0;
  std::vector<Clock::time_point> fired;
  static void on_fire(void* self) {
    auto& t = *static_cast<TimerTrace*>(self);
    t.fired.push_back(t.poller->now());
    if (--t.left == 0) t.poller->stop();
  }
};

TEST_P(PollerTest, ALoopWithNothingElseToDoWakesForEachTimerAndNeverBeforeIt) {
  Poller& poller = *poller_;
  TimerWheel wheel;
  poller.set_timers(wheel);
  TimerTrace trace;
  trace.poller = &poller;
  std::vector<std::unique_ptr<TimerWheel::Entry>> entries;
  std::vector<Clock::time_point> deadlines;
  const Clock::time_point start = Clock::steady().now();
  // Out of order, off the millisecond, one beyond the wheel's inner span.
  for (const auto d : {std::chrono::microseconds(7'300), std::chrono::microseconds(2'100),
                       std::chrono::microseconds(1'100'500), std::chrono::microseconds(15'000)}) {
    entries.push_back(std::make_unique<TimerWheel::Entry>(&TimerTrace::on_fire, &trace));
    deadlines.push_back(start + d);
    wheel.schedule(*entries.back(), deadlines.back());
    ++trace.left;
  }
  bool timed_out = false;
  {
    Deadline deadline(poller);  // a loop that waited for an event alone would sleep forever
    poller.run();
    timed_out = deadline.fired;
  }
  EXPECT_FALSE(timed_out) << "the loop slept past its timers";
  std::sort(deadlines.begin(), deadlines.end());
  ASSERT_EQ(trace.fired.size(), deadlines.size());
  for (std::size_t i = 0; i < deadlines.size(); ++i) EXPECT_GE(trace.fired[i], deadlines[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(BothInterfaces, PollerTest,
                         ::testing::Values(IoMode::epoll, IoMode::io_uring),
                         [](const ::testing::TestParamInfo<IoMode>& info) {
                           return std::string(info.param == IoMode::epoll ? "epoll" : "io_uring");
                         });

}  // namespace
}  // namespace floodgate::net
