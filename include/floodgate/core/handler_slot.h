// In-object memory for asynchronous operations, so the request path never calls malloc.
//
// Asio allocates each pending operation (the handler plus its bookkeeping) through the
// handler's associated allocator. Its default recycles only a couple of blocks per thread,
// which many concurrent connections exhaust. A connection instead owns one HandlerSlot per kind
// of operation it can have pending (client read, client write, backend read, ...) and binds
// `SlotAllocator` to those handlers: one operation of a kind is pending at a time, so its slot
// is free again whenever the next one starts. Asio frees the memory before invoking the
// handler, so a handler may start the next operation of its kind.
//
// If a slot is busy or too small (a programming error, or a larger composed operation), the
// allocator falls back to the heap and counts it, so tests can assert the fallback never
// happens on the steady-state path.
//
// Thread-safety: single-threaded (the owning connection's reactor).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace floodgate {

class HandlerSlot {
 public:
  static constexpr std::size_t kBytes = 320;

  HandlerSlot() = default;
  HandlerSlot(const HandlerSlot&) = delete;
  HandlerSlot& operator=(const HandlerSlot&) = delete;

  void* allocate(std::size_t n) {
    if (!in_use_ && n <= kBytes) {
      in_use_ = true;
      return storage_;
    }
    heap_fallbacks_.fetch_add(1, std::memory_order_relaxed);
    return ::operator new(n);
  }

  void deallocate(void* p) {
    if (p == storage_) {
      in_use_ = false;
    } else {
      ::operator delete(p);
    }
  }

  // Process-wide count of allocations that missed their slot (tests and diagnostics).
  static uint64_t heap_fallbacks() { return heap_fallbacks_.load(std::memory_order_relaxed); }

 private:
  alignas(std::max_align_t) unsigned char storage_[kBytes];
  bool in_use_ = false;
  static inline std::atomic<uint64_t> heap_fallbacks_{0};
};

template <class T>
class SlotAllocator {
 public:
  using value_type = T;

  explicit SlotAllocator(HandlerSlot& slot) noexcept : slot_(&slot) {}
  template <class U>
  SlotAllocator(const SlotAllocator<U>& other) noexcept : slot_(other.slot_) {}

  T* allocate(std::size_t n) { return static_cast<T*>(slot_->allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { slot_->deallocate(p); }

  template <class U>
  bool operator==(const SlotAllocator<U>& other) const noexcept {
    return slot_ == other.slot_;
  }

 private:
  template <class>
  friend class SlotAllocator;
  HandlerSlot* slot_;
};

}  // namespace floodgate
