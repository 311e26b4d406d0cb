// Registry: long-lived state keyed by name that outlives configuration generations, such as a
// pool's admission state, a backend's in-flight count and health, a backend address's circuit
// breaker, a retry budget's counts or a rate limit's buckets (app::Generations holds one
// registry of each). A generation asks for the entry of each name it configures and holds it;
// the next generation asking for the same name gets the same object, so a reload never loses a
// count or a state that requests still rely on.
//
// Two retentions:
//   - Retention::process: an entry is kept for the process's life once made (a pool removed
//     and added back finds its counters where it left them).
//   - Retention::referenced: an entry lives while some holder (a generation) keeps it; sweep()
//     forgets the names nobody holds, so an entry removed from the configuration and added back
//     later starts afresh.
//
// Thread-safety: main thread only (generations are built there); the entries themselves are
// shared with the reactors and are their own business.
#pragma once

#include <map>
#include <memory>
#include <utility>

namespace floodgate {

enum class Retention { process, referenced };

template <class Key, class T, Retention kRetention>
class Registry {
 public:
  // The entry for `key`, made with `make()` (returning std::shared_ptr<T>) when there is none.
  template <class Make>
  std::shared_ptr<T> get(const Key& key, Make&& make) {
    auto& slot = entries_[key];
    if constexpr (kRetention == Retention::process) {
      if (!slot) slot = make();
      return slot;
    } else {
      std::shared_ptr<T> entry = slot.lock();
      if (!entry) {
        entry = make();
        slot = entry;
      }
      return entry;
    }
  }

  // Retention::referenced: forgets the keys whose entries nobody holds any more.
  void sweep() {
    if constexpr (kRetention == Retention::referenced) {
      for (auto it = entries_.begin(); it != entries_.end();) {
        it = it->second.expired() ? entries_.erase(it) : std::next(it);
      }
    }
  }

  std::size_t size() const { return entries_.size(); }

 private:
  using Slot =
      std::conditional_t<kRetention == Retention::process, std::shared_ptr<T>, std::weak_ptr<T>>;
  std::map<Key, Slot> entries_;
};

}  // namespace floodgate
