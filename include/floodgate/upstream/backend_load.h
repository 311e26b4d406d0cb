// BackendLoad: the number of requests in flight on one backend, for the whole process.
//
// Shared by all reactors: least_active, p2c and the per-backend cap (max_active_per_backend)
// must see the load the other reactors put on a backend, not just their own, so the count
// lives in one place and every reactor updates it. That is why it is atomic. Relaxed ordering
// suffices: the count publishes no other data, it is only compared.
//
// Each count sits alone on its own 64-byte cache line, because reactors on different cores write
// counts of neighbouring backends all the time and sharing a line would bounce it between them.
//
// Lifetime: owned by the upstream's long-lived state, created on the main thread, outliving every
// reactor that uses it. Not movable (std::atomic): hold them in a container that never relocates
// its elements (for example std::vector constructed at its final size, never resized, or
// std::unique_ptr<BackendLoad[]>).
//
// InFlight is the move-only guard that makes the accounting exactly-once: constructing it counts
// a request in, destroying it (or release()) counts it out.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace floodgate {

struct alignas(64) BackendLoad {
  std::atomic<int64_t> active{0};
};

static_assert(sizeof(BackendLoad) == 64);

class InFlight {
 public:
  InFlight() noexcept = default;  // counts nothing
  explicit InFlight(BackendLoad& load) noexcept : load_(&load) {
    load.active.fetch_add(1, std::memory_order_relaxed);
  }
  // Counts a request in only while the backend has fewer than `cap` in flight (0 = no cap):
  // a compare-and-swap, so reactors racing for the last slot of a backend cannot overshoot
  // its cap (max_active_per_backend). Empty when the backend is at its cap.
  static InFlight enter_below(BackendLoad& load, uint32_t cap) noexcept {
    if (cap == 0) return InFlight(load);
    int64_t n = load.active.load(std::memory_order_relaxed);
    while (n < static_cast<int64_t>(cap)) {
      if (load.active.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
        return InFlight(load, Counted{});
      }
    }
    return InFlight();
  }
  InFlight(InFlight&& other) noexcept : load_(std::exchange(other.load_, nullptr)) {}
  InFlight& operator=(InFlight&& other) noexcept {
    if (this != &other) {
      release();
      load_ = std::exchange(other.load_, nullptr);
    }
    return *this;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() { release(); }

  // Counts the request out now; later calls and the destructor do nothing.
  void release() noexcept {
    if (load_ != nullptr) {
      std::exchange(load_, nullptr)->active.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  explicit operator bool() const noexcept { return load_ != nullptr; }

 private:
  struct Counted {};
  InFlight(BackendLoad& load, Counted) noexcept : load_(&load) {}  // already counted in
  BackendLoad* load_ = nullptr;
};

}  // namespace floodgate
