// Backends by name, after load: the servers written as host names in pools with
// `resolve_interval` are resolved again every interval (docs/configuration.md, "Backends by
// name"). Resolution blocks (getaddrinfo), so it runs on a worker thread of its own, one name at
// a time, never on the main thread's loop or a reactor; each result comes back to the main
// thread through `done`, which decides what to do with it (Process::on_resolved: a changed
// answer becomes a new generation, as a reload of that pool would).
//
// Bounds: at most one resolution per name in flight (a name's next interval starts when its
// answer is back), so the worker's queue holds at most one job per watched name; a resolution
// itself is bounded by resolv.conf's `timeout` and `attempts`. The destructor waits for the one
// in progress, if any. Main thread only, except the worker.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/config/resolve.h"
#include "floodgate/core/endpoint.h"

namespace floodgate::app {

class NameWatcher {
 public:
  struct Name {
    std::string upstream;
    Endpoint server;  // as written: the host name and port
    std::chrono::milliseconds interval{0};
    bool operator==(const Name&) const = default;
  };
  using Resolve = std::function<config::Resolution(const std::string& host, uint16_t port)>;
  using Done = std::function<void(const Name&, config::Resolution)>;

  NameWatcher(boost::asio::io_context& main, Resolve resolve, Done done);
  ~NameWatcher();
  NameWatcher(const NameWatcher&) = delete;
  NameWatcher& operator=(const NameWatcher&) = delete;

  // The names to watch from now on. A name watched already keeps its schedule; a new one is
  // first resolved one interval from now; a name no longer listed is dropped (an answer for it
  // still in flight is discarded).
  void watch(const std::vector<Name>& names);

  // Drops every name and tells the worker to end once the resolution in progress, if any, is
  // done (the destructor waits for it); watch() does nothing after it.
  void stop();

 private:
  struct Watch {
    Watch(boost::asio::io_context& io, Name n) : name(std::move(n)), timer(io) {}
    Name name;
    boost::asio::steady_timer timer;
    bool dropped = false;
  };

  void arm(const std::shared_ptr<Watch>& w);
  void run_worker();

  boost::asio::io_context& main_;
  Resolve resolve_;
  Done done_;
  std::vector<std::shared_ptr<Watch>> watches_;
  // What a posted answer checks before it touches `this`: gone once the watcher is.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;  // at most one per watched name
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace floodgate::app
