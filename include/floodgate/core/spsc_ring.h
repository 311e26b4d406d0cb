// A bounded single-producer, single-consumer ring of byte records (each one push is one
// record). The producer never blocks, locks or allocates: push() copies the record in, or
// returns false when there is no room. The consumer takes records in order.
//
// Layout: records are [uint32 length][bytes] padded to 8 bytes. A record that does not fit
// before the end of the buffer is preceded by a wrap marker and starts at offset 0. Positions
// grow without bound (64-bit) and are reduced modulo the power-of-two capacity.
//
// Thread-safety: push() from one thread, pop_all() from one (other) thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace floodgate {

class SpscRing {
 public:
  // `capacity` is rounded up to a power of two (at least 64 bytes).
  explicit SpscRing(std::size_t capacity) : capacity_(round_up(capacity)) {
    buffer_ = std::make_unique<unsigned char[]>(capacity_);
  }

  // Largest record push() can ever accept.
  std::size_t max_record() const { return capacity_ / 2 - kHeader; }

  bool push(std::string_view record) {
    if (record.size() > max_record()) return false;
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    const std::size_t need = padded(kHeader + record.size());
    const std::size_t offset = head & (capacity_ - 1);
    const std::size_t to_end = capacity_ - offset;
    const std::size_t total = need <= to_end ? need : to_end + need;  // wrap: skip the rest
    if (head + total - tail > capacity_) return false;
    uint64_t at = head;
    if (need > to_end) {
      write_length(offset, kWrap);
      at += to_end;
    }
    const std::size_t start = at & (capacity_ - 1);
    write_length(start, static_cast<uint32_t>(record.size()));
    std::memcpy(buffer_.get() + start + kHeader, record.data(), record.size());
    head_.store(head + total, std::memory_order_release);
    return true;
  }

  // Calls `f(std::string_view)` for every record pushed so far, in order; returns how many.
  // The view is valid only during the call.
  template <class F>
  std::size_t pop_all(F&& f) {
    const uint64_t head = head_.load(std::memory_order_acquire);
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::size_t n = 0;
    while (tail != head) {
      const std::size_t offset = tail & (capacity_ - 1);
      const uint32_t length = read_length(offset);
      if (length == kWrap) {
        tail += capacity_ - offset;
        continue;
      }
      f(std::string_view(reinterpret_cast<const char*>(buffer_.get() + offset + kHeader), length));
      tail += padded(kHeader + length);
      ++n;
    }
    tail_.store(tail, std::memory_order_release);
    return n;
  }

 private:
  static constexpr std::size_t kHeader = sizeof(uint32_t);
  static constexpr uint32_t kWrap = 0xffffffffU;
  static std::size_t padded(std::size_t n) { return (n + 7) & ~std::size_t{7}; }
  static std::size_t round_up(std::size_t n) {
    std::size_t c = 64;
    while (c < n) c <<= 1;
    return c;
  }
  void write_length(std::size_t offset, uint32_t n) {
    std::memcpy(buffer_.get() + offset, &n, sizeof(n));
  }
  uint32_t read_length(std::size_t offset) const {
    uint32_t n = 0;
    std::memcpy(&n, buffer_.get() + offset, sizeof(n));
    return n;
  }

  const std::size_t capacity_;
  std::unique_ptr<unsigned char[]> buffer_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
};

}  // namespace floodgate
