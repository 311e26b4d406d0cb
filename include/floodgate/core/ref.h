// Single-threaded intrusive reference counting for objects that pending Asio operations
// keep alive (client and backend connections). A connection lives on one reactor forever, so
// the count needs no atomic: copying a Ref into a handler costs one plain increment.
//
// Thread-safety: a RefCounted object and all its Refs belong to one thread.
#pragma once

#include <cstdint>
#include <utility>

namespace floodgate {

template <class T>
class RefCounted {
 public:
  void add_ref() { ++refs_; }
  void release_ref() {
    if (--refs_ == 0) delete static_cast<T*>(this);
  }

 protected:
  RefCounted() = default;
  ~RefCounted() = default;

 private:
  uint32_t refs_ = 0;
};

template <class T>
class Ref {
 public:
  Ref() = default;
  explicit Ref(T* p) : p_(p) {
    if (p_ != nullptr) p_->add_ref();
  }
  Ref(const Ref& o) : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_ != nullptr) p_->release_ref();
  }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

}  // namespace floodgate
