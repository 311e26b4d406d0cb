#include "name_watcher.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <exception>
#include <utility>

namespace floodgate::app {

namespace asio = boost::asio;

NameWatcher::NameWatcher(asio::io_context& main, Resolve resolve, Done done)
    : main_(main), resolve_(std::move(resolve)), done_(std::move(done)) {}

NameWatcher::~NameWatcher() {
  try {
    stop();
    if (worker_.joinable()) worker_.join();
  } catch (...) {
    // The worker could not be told to stop or joined: it may still use this object, so
    // nothing can be released safely (as health::Checker).
    std::terminate();
  }
}

void NameWatcher::watch(const std::vector<Name>& names) {
  {
    const std::lock_guard lock(mu_);
    if (stopping_) return;
  }
  std::vector<std::shared_ptr<Watch>> next;
  for (const Name& n : names) {
    const auto it =
        std::find_if(watches_.begin(), watches_.end(), [&](const auto& w) { return w->name == n; });
    if (it != watches_.end()) {
      next.push_back(*it);  // keeps its timer, or its resolution in flight
      continue;
    }
    auto w = std::make_shared<Watch>(main_, n);
    arm(w);
    next.push_back(std::move(w));
  }
  for (const auto& w : watches_) {
    if (std::find(next.begin(), next.end(), w) == next.end()) {
      w->dropped = true;
      w->timer.cancel();
    }
  }
  watches_ = std::move(next);
  if (!watches_.empty() && !worker_.joinable()) {
    worker_ = std::thread([this] { run_worker(); });
  }
}

void NameWatcher::stop() {
  for (const auto& w : watches_) {
    w->dropped = true;
    w->timer.cancel();
  }
  watches_.clear();
  {
    const std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_one();
}

void NameWatcher::arm(const std::shared_ptr<Watch>& w) {
  w->timer.expires_after(w->name.interval);
  w->timer.async_wait([this, weak = std::weak_ptr<Watch>(w)](const boost::system::error_code& ec) {
    const auto watch = weak.lock();
    if (ec || !watch || watch->dropped) return;  // dropped: `this` may be gone
    auto job = [this, weak, name = watch->name, alive = std::weak_ptr<bool>(alive_)] {
      config::Resolution r = resolve_(name.server.host, name.server.port);
      asio::post(main_, [this, weak, name, alive, r = std::move(r)]() mutable {
        if (alive.expired()) return;  // the watcher is gone
        const auto w = weak.lock();
        if (!w || w->dropped) return;
        // First the schedule, then the answer: `done_` may publish a generation, which calls
        // watch() again and keeps this name.
        arm(w);
        done_(name, std::move(r));
      });
    };
    {
      const std::lock_guard lock(mu_);
      if (stopping_) return;
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  });
}

void NameWatcher::run_worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace floodgate::app
