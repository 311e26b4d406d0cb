// A hint to the CPU that this thread spins on a flag another thread holds for a few stores
// (a quota cell's flag): it saves power and gives a sibling hyper-thread the core, and costs a
// few dozen nanoseconds.
//
// Thread-safety: any thread.
#pragma once

namespace floodgate {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace floodgate
