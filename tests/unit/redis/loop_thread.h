// A reactor's loop for a test: a Poller running on its own thread (one run() for the whole
// test, as a Poller runs once), a timer wheel advanced by a 1 ms tick from a ManualClock, and
// a way for the test's thread to run steps on the loop and wait for conditions there.
//
// Everything the code under test owns (links, calls) is made, used and destroyed inside run():
// the loop's thread is the only one that touches it. Time moves only through advance(), so the
// deadlines a test checks are exact; the real 1 ms tick only bounds how soon due timers fire
// and how often wait_until() looks.
#pragma once

#include <sys/timerfd.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>

#include "floodgate/core/clock.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/net/poller.h"

namespace floodgate::redis::testing {

class LoopThread {
 public:
  static constexpr std::chrono::milliseconds kResolution{1};

  // Throws std::system_error when `mode` is io_uring and the kernel refuses it.
  explicit LoopThread(IoMode mode) : poller_(io_, mode, clock_), ticker_(*this) {
    thread_ = std::thread([this] { poller_.run(); });
  }
  ~LoopThread() {
    run([this] { poller_.stop(); });
    thread_.join();
  }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  // Runs `f` on the loop's thread and returns what it returns.
  template <class F>
  std::invoke_result_t<F&> run(F&& f) {
    using R = std::invoke_result_t<F&>;
    struct Task final : net::RemoteTask {
      Task(LoopThread& loop, F& f)
          : RemoteTask([](RemoteTask& t) { static_cast<Task&>(t).go(); }), loop(loop), fn(f) {}
      void go() {
        if constexpr (std::is_void_v<R>) {
          fn();
        } else {
          result.emplace(fn());
        }
        const std::lock_guard lock(loop.mutex_);
        finished = true;
        loop.changed_.notify_all();  // under the lock: the task may go as soon as it is seen
      }
      LoopThread& loop;
      F& fn;
      std::optional<std::conditional_t<std::is_void_v<R>, int, R>> result;
      bool finished = false;
    } task(*this, f);
    poller_.send(task);
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return task.finished; });
    if constexpr (!std::is_void_v<R>) return std::move(*task.result);
  }

  // Whether `pred` (run on the loop) became true within `limit` of real time. It is looked at
  // after every tick of the loop.
  template <class F>
  bool wait_until(F&& pred, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const uint64_t seen = ticks();
      if (run(pred)) return true;
      std::unique_lock lock(mutex_);
      if (!changed_.wait_until(lock, end, [&] { return ticks_ != seen; })) return false;
    }
  }

  // Moves the loop's time on by `d` and fires the timers that are then due.
  void advance(Clock::duration d) {
    run([&] {
      clock_.advance(d);
      wheel_.advance(clock_.now());
    });
  }

  net::Poller& poller() { return poller_; }
  TimerWheel& wheel() { return wheel_; }
  // Moving it without advance() (on the loop) fires nothing until the next tick.
  ManualClock& clock() { return clock_; }

 private:
  // The tick: a 1 ms timerfd that advances the wheel to the manual clock's time.
  class Ticker final : public net::PollTarget {
   public:
    explicit Ticker(LoopThread& loop) : loop_(loop) {
      fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
      itimerspec spec{};
      spec.it_interval.tv_nsec = std::chrono::nanoseconds(kResolution).count();
      spec.it_value = spec.it_interval;
      if (fd_ < 0 || ::timerfd_settime(fd_, 0, &spec, nullptr) != 0 ||
          loop_.poller_.add(fd_, *this) != 0) {
        throw std::system_error(errno, std::generic_category(), "tick timer");
      }
    }
    ~Ticker() {
      loop_.poller_.remove(*this);
      ::close(fd_);
    }
    Ticker(const Ticker&) = delete;
    Ticker& operator=(const Ticker&) = delete;
    void on_poll(uint32_t) override {
      uint64_t expirations = 0;
      [[maybe_unused]] const ssize_t n = ::read(fd_, &expirations, sizeof expirations);
      loop_.wheel_.advance(loop_.clock_.now());
      const std::lock_guard lock(loop_.mutex_);
      ++loop_.ticks_;
      loop_.changed_.notify_all();
    }
    void on_ready() override {}

   private:
    LoopThread& loop_;
    int fd_ = -1;
  };

  uint64_t ticks() {
    const std::lock_guard lock(mutex_);
    return ticks_;
  }

  ManualClock clock_;
  boost::asio::io_context io_;
  net::Poller poller_;
  TimerWheel wheel_{kResolution, 8192};
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t ticks_ = 0;  // guarded by mutex_
  Ticker ticker_;
  std::thread thread_;
};

}  // namespace floodgate::redis::testing
