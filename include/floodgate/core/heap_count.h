// Counts the heap allocations made on reactor threads, so that "the request path allocates
// nothing" is a figure anyone can read (floodgate_reactor_heap_allocations_total) instead of
// a claim. floodgate replaces the global operator new (src/core/heap_count.cpp; a clang
// ThreadSanitizer build, whose runtime owns operator new, counts through the sanitizer's
// allocation hook, malloc included); a thread that called
// count_heap_allocations_on_this_thread() adds one to a relaxed counter per allocation.
// Threads that did not call it (the main thread, log threads) are not counted.
// On the request path the count does not move: per connection there is one allocation (the
// client connection) and one per new backend connection, and nothing per request.
//
// Thread-safety: any thread.
#pragma once

#include <cstdint>

namespace floodgate {

void count_heap_allocations_on_this_thread();
// Allocations made so far by counted threads.
uint64_t counted_heap_allocations();

// Allocations made while `f` runs on this thread, which becomes a counted thread (the
// no-allocation tests; exact while no other counted thread runs).
template <class F>
uint64_t allocations_during(F&& f) {
  count_heap_allocations_on_this_thread();
  const uint64_t before = counted_heap_allocations();
  f();
  return counted_heap_allocations() - before;
}

}  // namespace floodgate
