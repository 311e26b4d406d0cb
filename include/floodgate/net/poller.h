// A reactor's event loop over one of two kernel interfaces, chosen when the reactor starts
// (`server.io`, docs/configuration.md):
//
//  - epoll: one edge-triggered epoll set holds every socket of the reactor (listeners, clients,
//    backends) plus its wake-up descriptor; a socket is read or written with
//    its own system call when the kernel has said it can make progress.
//  - io_uring: the same readiness, reported by a multishot poll per descriptor on one ring, and
//    the reads and writes themselves go through the ring too: every recv and send the loop
//    wants in a turn is submitted together, with MSG_DONTWAIT, in the one `io_uring_enter` that
//    also collects the next events. On a virtual machine, where a system call costs a
//    microsecond or more, that removes most of the per-request kernel entries
//    (docs/BENCHMARKS.md has the figures). MSG_DONTWAIT makes each operation finish inside the
//    call that submitted it (data, or EAGAIN until the next readiness event), so no operation
//    is ever outstanding across a turn: a buffer is never written after the loop has moved on,
//    and closing a socket needs no cancellation of reads or writes.
//
// Either way the loop remembers, for each socket, what the kernel last reported, and a socket's
// owner reads only when data can be there.
//
// Why not Asio's reactor: Asio's epoll reactor either tries a read at once when one is
// started (a `recv` that finds nothing when the peer cannot have sent yet) or, for a plain
// wait, re-arms its registration with an `epoll_ctl` per wait, and each step of a request
// goes back through the io_context's queue, which polls the kernel again between steps. A
// proxied request paid about one system call more than HAProxy and woke up more often
// (docs/BENCHMARKS.md has the figures). Asio's io_uring service submits each operation on its
// own and measured slower still.
//
// The reactor's io_context stays: it carries work posted from other threads (drain, shutdown,
// configuration swaps and retirements, listener changes, the watchdog's pause, name
// resolutions); admission grants and the watchdog's ping come through the inbox instead
// (send(), no allocation). The loop runs the io_context on every turn, and Reactor::post()
// wakes the loop through an eventfd so posted work runs at once. The io_context owns no I/O
// objects, so running it costs no system call.
//
// The loop also runs a ready list: a target that can make progress without waiting (a write
// to a writable socket, a read of a socket known to hold data) is queued and run before the
// loop waits again; an operation never completes inside the call that started it. Each pass
// runs only what was queued when it began, so a target that queues itself again (a listener
// between batches of accepts) cannot hold back the inbox, posted work or the timers.
//
// Thread-safety: wake() and send() from any thread; everything else on the reactor thread
// (and, before run(), on the thread that builds the reactor).
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/net/io_mode.h"

struct io_uring;
struct io_uring_sqe;

namespace floodgate::net {

// Something registered with the poller. hold()/release() keep it alive while a batch of
// events that names it is being handled (a handler may close and release another target) and
// while it is on the ready list.
class PollTarget {
 public:
  virtual void on_poll(uint32_t events) = 0;  // readiness reported by the kernel
  virtual void on_ready() = 0;                // its turn on the ready list
  virtual void hold() {}
  virtual void release() {}

  // io_uring only. While the loop collects a batch of completions it only records them:
  // `on_polled` notes readiness (the default keeps it for on_poll() on the ready list), and
  // `on_io` the result of a recv or send this target submitted (the Stream). Nothing else runs
  // until the whole batch is recorded, so a handler never meets a completion that belongs to
  // a socket it has just dropped.
  virtual void on_polled(uint32_t events) { polled_ |= events; }
  virtual void on_io(bool is_send, int result) {
    (void)is_send;
    (void)result;
  }
  // io_uring only: prepares this target's reads and writes (Poller::prepare_recv/send). Called
  // for each target that asked with Poller::want_io(), right before the ring is entered.
  virtual void submit_io() {}
  // Its turn on the heavy list (Poller::defer_heavy()).
  virtual void on_heavy() {}

 protected:
  ~PollTarget() = default;

 private:
  friend class Poller;
  PollTarget* ready_next_ = nullptr;
  PollTarget* io_next_ = nullptr;
  PollTarget* heavy_next_ = nullptr;
  void* slot_ = nullptr;  // io_uring: the registration that names this target
  uint32_t polled_ = 0;   // io_uring: readiness recorded for on_poll()
  bool queued_ = false;
  bool io_queued_ = false;
  bool heavy_queued_ = false;
};

// Work handed to a reactor by another thread without allocating: an intrusive node the sender
// owns (in floodgate, the admission grant of a parked request, embedded in its exchange). The
// poller runs `run(task)` on its thread on the next turn. A node is in at most one inbox at a
// time and must stay alive until it has run.
struct RemoteTask {
  using Run = void (*)(RemoteTask& task);
  explicit RemoteTask(Run run) noexcept : run(run) {}
  const Run run;
  RemoteTask* next = nullptr;  // written by the sender before it publishes the node
};

class Poller {
 public:
  // Builds the loop on `mode`'s interface. IoMode::automatic takes io_uring when the kernel
  // offers what the loop needs (Linux 6.1: single-issuer rings with deferred task work,
  // multishot poll) and epoll otherwise; IoMode::io_uring throws std::system_error when it
  // cannot have it.
  // `clock` gives the loop its time (now()); it must outlive the poller.
  Poller(boost::asio::io_context& io, IoMode mode, const Clock& clock = Clock::steady());
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  IoEngine engine() const { return uring_ != nullptr ? IoEngine::io_uring : IoEngine::epoll; }
  // When the loop last returned from waiting for the kernel (reactor thread).
  // The clock's time when the loop last woke up (read once per turn).
  Clock::time_point now() const { return now_; }
  // The clock the loop reads (injected: a ManualClock in tests).
  const Clock& clock() const { return clock_; }
  bool uses_uring() const { return uring_ != nullptr; }
  // Why IoMode::automatic fell back to epoll (empty when it did not).
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Registers a descriptor (edge-triggered: readable, writable, peer closed). Returns 0 or an
  // errno value. With epoll the registration ends by itself when the descriptor is closed;
  // with io_uring the owner calls remove() before it closes the descriptor.
  int add(int fd, PollTarget& target);
  // Ends `target`'s registration (io_uring; a no-op with epoll). Events still on their way for
  // it are dropped, so the target may be destroyed right after.
  void remove(PollTarget& target);
  // Queues `target` on the ready list (once; no-op if queued).
  void defer(PollTarget& target);
  // Queues `target` for on_heavy() on this turn or a later one (once; no-op if queued): work
  // that costs far more than handling an event, a TLS handshake's key exchange and signature.
  // Each turn runs the list's first target only, after the kernel's events, the inbox and the
  // ready list: a flood of handshakes takes turns with the established connections instead of
  // making every turn long. The list is bounded by the targets that exist (each is on it at
  // most once), and a loop with heavy work queued does not wait for the kernel, so alone it
  // runs that work back to back.
  void defer_heavy(PollTarget& target);

  // io_uring: asks for target.submit_io() before the next entry into the ring (once).
  void want_io(PollTarget& target);
  // io_uring, from submit_io(): a recv into [data, data + cap) / a send of [data, data + len)
  // on `target`'s descriptor, completing with on_io() in this turn.
  void prepare_recv(PollTarget& target, int fd, char* data, std::size_t cap);
  void prepare_send(PollTarget& target, int fd, const char* data, std::size_t len);

  // The reactor's timers: the loop advances `wheel` to its time on every turn, after the
  // kernel's events, and sleeps no longer than until the wheel's next due entry, so a
  // deadline fires within about a millisecond of its time (the wheel's resolution) and an
  // idle loop wakes up only for one. Set before run(); the wheel must outlive the loop.
  void set_timers(TimerWheel& wheel) { timers_ = &wheel; }

  // Runs the loop on the calling thread until stop().
  void run();
  // Runs one turn of the loop on the calling thread, blocking for the kernel at most
  // `max_wait` (a test drives a loop turn by turn, without a thread of its own). The thread
  // must be the one that runs the loop every time.
  void run_once(std::chrono::nanoseconds max_wait);
  // Ends run() after the current turn (reactor thread).
  void stop();
  // Makes run() look at the io_context now (any thread): call after posting to it. The loop
  // runs the io_context only on turns after such a call, since polling it costs a lock.
  void wake();
  // Queues `task` to run on the reactor thread (any thread; lock-free, allocation-free). Wakes
  // the loop only when the inbox was empty, so a burst of grants costs one eventfd write.
  void send(RemoteTask& task) noexcept;
  // Runs what send() queued, oldest first (reactor thread). run() calls it every turn; the
  // reactor calls it once more while it shuts down.
  void run_inbox();

 private:
  struct Slot;
  class Wake;

  // An intrusive FIFO of targets (the ready list, the targets wanting a submission), linked
  // through `Next` and marked by `Queued`, holding each target while it is queued.
  template <PollTarget* PollTarget::*Next, bool PollTarget::*Queued>
  class TargetQueue {
   public:
    bool empty() const { return head_ == nullptr; }
    PollTarget* back() const { return tail_; }
    void push(PollTarget& t) {
      if (t.*Queued) return;
      t.*Queued = true;
      t.hold();
      t.*Next = nullptr;
      (tail_ != nullptr ? tail_->*Next : head_) = &t;
      tail_ = &t;
    }
    // The oldest target, unmarked; the caller releases it.
    PollTarget* pop() {
      PollTarget* t = head_;
      if (t == nullptr) return nullptr;
      head_ = t->*Next;
      if (head_ == nullptr) tail_ = nullptr;
      t->*Next = nullptr;
      t->*Queued = false;
      return t;
    }
    void release_all() {
      while (PollTarget* t = pop()) t->release();
    }

   private:
    PollTarget* head_ = nullptr;
    PollTarget* tail_ = nullptr;
  };

  // One turn of the loop; `cap` bounds its wait for the kernel (nullopt: the timers alone do).
  void epoll_turn(std::optional<std::chrono::nanoseconds> cap);
  void uring_turn(std::optional<std::chrono::nanoseconds> cap);
  std::optional<std::chrono::nanoseconds> turn_wait(
      std::optional<std::chrono::nanoseconds> cap) const;
  void enable_ring();
  bool run_queued();
  void dispatch(int n);
  void run_ready();
  void run_heavy();
  void drain_wake_fd();
  void ring_bell();  // writes the eventfd
  void run_posted();
  // Fires the timers due at now_ (once a turn, after the kernel's events).
  [[gnu::always_inline]] void run_timers() {
    if (timers_ != nullptr && timers_->due(now_)) timers_->advance(now_);
  }
  // How long the loop may block: until the next timer is due (never when it is due already,
  // or when `more` work is queued); nullopt to wait for an event alone.
  std::optional<std::chrono::nanoseconds> wait_bound(bool more) const;
  // io_uring.
  bool open_ring(std::string& why);
  void arm_poll(Slot& slot);
  void request_removal(Slot& slot);
  void finish_removals();
  io_uring_sqe* next_sqe();
  void submit_wanted_io();
  void enter(std::optional<std::chrono::nanoseconds> wait);
  int wait_epoll(struct epoll_event* events, std::optional<std::chrono::nanoseconds> wait);
  void reap();
  Slot* new_slot(PollTarget& target, int fd);
  void free_slot(Slot& slot);
  void add_slot_block();

  boost::asio::io_context& io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::unique_ptr<io_uring> uring_;  // null: epoll
  std::unique_ptr<Wake> wake_target_;
  // Slots come in blocks (the first one made with the poller) and are reused through an
  // intrusive free list: registering a socket allocates nothing in steady state.
  std::vector<std::unique_ptr<Slot[]>> slot_blocks_;
  Slot* free_slots_ = nullptr;
  std::string fallback_reason_;
  int removals_ = 0;           // POLL_REMOVE requests the kernel has not answered yet
  bool ring_done_ = false;     // the loop and its last removals are over: no more submissions
  bool ring_enabled_ = false;  // the thread that first ran the loop became its single issuer
  // A Treiber stack of RemoteTasks, newest first: senders push with a compare-and-swap, the
  // reactor takes the whole stack with one exchange (so no ABA) and runs it reversed.
  std::atomic<RemoteTask*> inbox_{nullptr};
  std::atomic<bool> posted_{false};  // wake() was called: the io_context may have work
  TargetQueue<&PollTarget::ready_next_, &PollTarget::queued_> ready_;
  TargetQueue<&PollTarget::heavy_next_, &PollTarget::heavy_queued_> heavy_;  // defer_heavy()
  // io_uring: targets that asked for submit_io() this turn.
  TargetQueue<&PollTarget::io_next_, &PollTarget::io_queued_> wanted_;
  bool stopped_ = false;
  const Clock& clock_;
  Clock::time_point now_ = clock_.now();
  TimerWheel* timers_ = nullptr;  // set_timers()
  bool pwait2_ = true;            // epoll_pwait2 is there (Linux 5.11): nanosecond waits
};

}  // namespace floodgate::net
