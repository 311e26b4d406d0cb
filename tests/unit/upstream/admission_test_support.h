// Helpers shared by the admission tests: a parked request that records its completion, and a
// bounded poll for conditions another thread makes true (tests never sleep to order events).
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "floodgate/upstream/admission.h"

namespace floodgate::testing {

// A request parked in an admission queue. The completion only records what happened, as a
// reactor's would only post: the test thread plays the continuation (take_permit()).
struct Parked {
  explicit Parked(int id = 0, std::vector<int>* log = nullptr) : id(id), log(log) {}

  static void on_complete(void* self, AdmitStatus status) noexcept {
    auto* parked = static_cast<Parked*>(self);
    if (parked->log != nullptr) parked->log->push_back(parked->id);
    parked->status.store(status, std::memory_order_relaxed);
    parked->completions.fetch_add(1, std::memory_order_release);
  }

  int completed() const { return completions.load(std::memory_order_acquire); }
  bool granted() const {
    return completed() > 0 && status.load(std::memory_order_relaxed) == AdmitStatus::admitted;
  }
  bool rejected() const {
    return completed() > 0 && status.load(std::memory_order_relaxed) == AdmitStatus::rejected;
  }
  // Ready to be admitted again (the tests reuse nodes across iterations).
  void reset() { completions.store(0, std::memory_order_relaxed); }

  const int id;
  std::vector<int>* const log;  // single-threaded tests: grant order
  std::atomic<int> completions{0};
  std::atomic<AdmitStatus> status{AdmitStatus::queued};
  AdmissionWaiter waiter{&Parked::on_complete, this};  // last: destroyed first
};

// Polls `condition` until it holds or `limit` passes; false on timeout.
template <class Condition>
bool eventually(Condition condition, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace floodgate::testing
