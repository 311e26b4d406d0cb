#include "floodgate/core/heap_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace floodgate {
namespace {
thread_local bool counted_thread = false;
std::atomic<uint64_t> allocations{0};

void* allocate(std::size_t n) {
  if (counted_thread) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace

void count_heap_allocations_on_this_thread() {
  counted_thread = true;
}
uint64_t counted_heap_allocations() {
  return allocations.load(std::memory_order_relaxed);
}

}  // namespace floodgate

// The replaceable allocation functions ([new.delete.single], [new.delete.array]). The
// default operator delete frees with std::free, which matches std::malloc above; the aligned
// forms keep their defaults (floodgate does not use over-aligned types).
void* operator new(std::size_t n) {
  if (void* p = floodgate::allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = floodgate::allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return floodgate::allocate(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return floodgate::allocate(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
