#include "floodgate/core/heap_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

// clang's ThreadSanitizer runtime is linked statically and defines the global operator new and
// delete itself, so a second definition fails the link (GCC's runtime is a shared library, which
// a replacement in the program overrides). Under clang's TSan the count comes from the
// sanitizer's allocation hook instead, which sees every heap allocation, malloc's too
// (docs/metrics.md, floodgate_reactor_heap_allocations_total).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FLOODGATE_HEAP_COUNT_BY_SANITIZER_HOOK 1
#include <sanitizer/allocator_interface.h>
#endif
#endif

namespace floodgate {
namespace {
thread_local bool counted_thread = false;
std::atomic<uint64_t> allocations{0};

void count_allocation() {
  if (counted_thread) allocations.fetch_add(1, std::memory_order_relaxed);
}

#ifdef FLOODGATE_HEAP_COUNT_BY_SANITIZER_HOOK
void on_malloc(const volatile void* /*p*/, std::size_t /*n*/) {
  count_allocation();
}
void on_free(const volatile void* /*p*/) {}
// Installed before main(), as the sanitizer asks (before any other thread starts).
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
#else
void* allocate(std::size_t n) {
  count_allocation();
  return std::malloc(n == 0 ? 1 : n);
}
#endif
}  // namespace

void count_heap_allocations_on_this_thread() {
  counted_thread = true;
}
uint64_t counted_heap_allocations() {
  return allocations.load(std::memory_order_relaxed);
}

}  // namespace floodgate

#ifndef FLOODGATE_HEAP_COUNT_BY_SANITIZER_HOOK
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
#endif
