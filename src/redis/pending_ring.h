// The commands a Redis link has written and Redis has not answered yet, oldest first: handshake
// commands, calls, NOSCRIPT reloads and resent calls. Redis answers in order, so a reply always
// belongs to the head. Fixed capacity, allocated once; push() on a full ring is a precondition
// violation (the link checks size() first).
//
// Deadlines. The link pushes calls with `now + command_timeout`, so in ring order their deadlines
// do not decrease (it sets the deadlines again with restamp() when a connect's queued calls become
// sendable): the head's is the earliest of theirs. A NOSCRIPT resend and its reload go to the back
// but keep the call's older deadline. Those "late" entries are pushed in the order their NOSCRIPT
// replies came, so their deadlines do not decrease either, and a second FIFO lists their slots:
// the earliest deadline of the whole ring is one of the two heads, found in O(1), and one timer
// covers every command.
//
// Thread-safety: the link's reactor.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace floodgate::redis {

class Call;

class PendingRing {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  enum class Kind : uint8_t { auth, select, load, reload, call };
  struct Entry {
    Kind kind = Kind::call;
    bool late = false;     // a reload or a resent call, also listed in the late FIFO
    bool resent = false;   // a call sent again after NOSCRIPT (which it gets only once)
    Call* call = nullptr;  // Kind::call; nullptr once cancelled
    uint64_t seq = 0;      // the order it was written in, from 1
    TimePoint deadline{};
  };

  explicit PendingRing(std::size_t capacity) : ring_(capacity), late_(capacity) {}

  std::size_t size() const noexcept { return count_; }
  std::size_t capacity() const noexcept { return ring_.size(); }
  // The sequence number of the newest entry pushed (0 before the first).
  uint64_t last_seq() const noexcept { return seq_; }
  const Entry& head() const noexcept { return ring_[head_]; }
  Entry& at(uint32_t slot) noexcept { return ring_[slot]; }
  uint32_t slot_of(const Entry& e) const noexcept {
    return static_cast<uint32_t>(&e - ring_.data());
  }

  Entry& push(Kind kind, TimePoint deadline, bool late = false) noexcept {
    const std::size_t slot = (head_ + count_) % ring_.size();
    ++count_;
    if (late) late_[(late_head_ + late_count_++) % late_.size()] = static_cast<uint32_t>(slot);
    ring_[slot] = Entry{.kind = kind, .late = late, .seq = ++seq_, .deadline = deadline};
    return ring_[slot];
  }
  Entry pop() noexcept {
    const Entry e = ring_[head_];
    if (e.late) {  // then it is the oldest late entry too: both FIFOs are in ring order
      late_head_ = (late_head_ + 1) % late_.size();
      --late_count_;
    }
    head_ = (head_ + 1) % ring_.size();
    --count_;
    return e;
  }

  // The earliest deadline of all entries (size() > 0).
  TimePoint earliest_deadline() const noexcept {
    const TimePoint first = ring_[head_].deadline;
    return late_count_ == 0 ? first : std::min(first, ring_[late_[late_head_]].deadline);
  }
  // Gives every entry `deadline` (no late entry may be in the ring).
  void restamp(TimePoint deadline) noexcept {
    for (std::size_t i = 0; i < count_; ++i) ring_[(head_ + i) % ring_.size()].deadline = deadline;
  }

 private:
  std::vector<Entry> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::vector<uint32_t> late_;  // slots of the late entries, oldest first
  std::size_t late_head_ = 0;
  std::size_t late_count_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace floodgate::redis
