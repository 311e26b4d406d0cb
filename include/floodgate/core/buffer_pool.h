// A free list of fixed-size byte blocks, one pool per reactor and block size.
//
// Connections borrow a block while a request is in progress and give it back when they go
// idle, so an idle keep-alive connection holds no buffer (the 8 KiB-per-idle-connection
// budget) and the steady-state request path never calls the allocator.
//
// Thread-safety: single-threaded (one reactor). Blocks are 64-byte aligned.
// Bounds: at most `max_outstanding` blocks are lent out at once (server.max_buffers_per_reactor),
// so a reactor's buffer memory is at most max_outstanding * block_size() whatever the load;
// at most `max_free` returned blocks are kept, extra ones are freed, and trim() frees the ones
// no acquire() needed since the previous trim(), so memory follows demand down after a burst.
// Failure: acquire() never throws. It returns nullptr when the cap is reached or the allocator
// fails; the request path answers 503 buffers_exhausted (docs/http.md) and carries on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <vector>

namespace floodgate {

class BufferPool {
 public:
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

  explicit BufferPool(std::size_t block_size, std::size_t max_free = 1024,
                      std::size_t max_outstanding = kUnlimited)
      : block_size_((block_size + 63) / 64 * 64),
        max_free_(max_free < max_outstanding ? max_free : max_outstanding),
        max_outstanding_(max_outstanding) {
    free_.reserve(max_free_);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool() {
    for (char* b : free_) std::free(b);
  }

  std::size_t block_size() const { return block_size_; }
  std::size_t free_blocks() const { return free_.size(); }
  // Blocks acquired and not yet released.
  std::size_t outstanding() const { return outstanding_; }
  std::size_t max_outstanding() const { return max_outstanding_; }
  // Bytes the pool holds from the allocator: blocks lent out and blocks kept free.
  std::size_t bytes() const { return (outstanding_ + free_.size()) * block_size_; }

  // A block of block_size() bytes, or nullptr when max_outstanding blocks are already lent out
  // or the allocator has no memory. Never throws.
  char* acquire() noexcept {
    if (outstanding_ >= max_outstanding_) return nullptr;
    char* b = nullptr;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
      low_water_ = std::min(low_water_, free_.size());
    } else {
      b = static_cast<char*>(std::aligned_alloc(64, block_size_));
      if (b == nullptr) return nullptr;
    }
    ++outstanding_;
    return b;
  }

  // Gives back a block from acquire() (nullptr is a no-op). Never allocates: free_ has room
  // for max_free blocks from the start.
  void release(char* block) noexcept {
    if (block == nullptr) return;
    --outstanding_;
    if (free_.size() < max_free_) {
      free_.push_back(block);
    } else {
      std::free(block);
    }
  }

  // Frees the free blocks that were idle the whole time since the previous trim() (the fewest
  // free blocks seen in between), oldest first, and returns how many. Called periodically, it
  // keeps what steady demand uses and gives back what a burst left behind within two periods.
  std::size_t trim() noexcept {
    const std::size_t n = std::min(low_water_, free_.size());
    for (std::size_t i = 0; i < n; ++i) std::free(free_[i]);
    free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
    low_water_ = free_.size();
    return n;
  }

 private:
  std::size_t block_size_;
  std::size_t max_free_;
  std::size_t max_outstanding_;
  std::size_t outstanding_ = 0;
  std::size_t low_water_ = 0;  // fewest free blocks since the last trim()
  std::vector<char*> free_;
};

}  // namespace floodgate
