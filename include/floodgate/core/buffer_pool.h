// A free list of fixed-size byte blocks, one pool per reactor and block size.
//
// Connections borrow a block while a request is in progress and give it back when they go
// idle, so an idle keep-alive connection holds no buffer (the 8 KiB-per-idle-connection
// budget) and the steady-state request path never calls the allocator.
//
// Thread-safety: single-threaded (one reactor). Blocks are 64-byte aligned.
// Bound: at most `max_free` blocks are kept; extra returned blocks are freed.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace floodgate {

class BufferPool {
 public:
  explicit BufferPool(std::size_t block_size, std::size_t max_free = 1024)
      : block_size_((block_size + 63) / 64 * 64), max_free_(max_free) {
    free_.reserve(max_free);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool() {
    for (char* b : free_) std::free(b);
  }

  std::size_t block_size() const { return block_size_; }
  std::size_t free_blocks() const { return free_.size(); }

  char* acquire() {
    if (!free_.empty()) {
      char* b = free_.back();
      free_.pop_back();
      return b;
    }
    void* p = std::aligned_alloc(64, block_size_);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<char*>(p);
  }

  void release(char* block) {
    if (block == nullptr) return;
    if (free_.size() < max_free_) {
      free_.push_back(block);
    } else {
      std::free(block);
    }
  }

 private:
  std::size_t block_size_;
  std::size_t max_free_;
  std::vector<char*> free_;
};

}  // namespace floodgate
