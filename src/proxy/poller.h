// A reactor's event loop: one edge-triggered epoll set that holds every socket of the reactor
// (listeners, clients, backends) plus its tick timer and its wake-up descriptor, and that
// remembers, for each socket, what the kernel last reported.
//
// Why not Asio's reactor: Asio's epoll reactor either tries a read at once when one is
// started (a `recv` that finds nothing when the peer cannot have sent yet) or, for a plain
// wait, re-arms its registration with an `epoll_ctl` per wait, and each step of a request
// goes back through the io_context's queue, which polls the kernel again between steps. A
// proxied request paid about one system call more than HAProxy and woke up more often
// (docs/BENCHMARKS.md has the figures). Here a socket is registered once; its owner reads only
// when data can be there; one `epoll_wait` serves a whole batch of requests from first byte to
// response.
//
// The reactor's io_context stays: it carries work posted from other threads (drain, shutdown,
// later configuration swaps and admission grants). The loop runs it on every turn, and
// Reactor::post() wakes the loop through an eventfd so posted work runs at once. The
// io_context owns no I/O objects, so running it costs no system call.
//
// The loop also runs a ready list: a target that can make progress without waiting (a write
// to a writable socket, a read of a socket known to hold data) is queued and run before the
// loop waits again; an operation never completes inside the call that started it.
//
// Thread-safety: wake() from any thread; everything else on the reactor thread.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <optional>
#include <thread>

namespace floodgate::proxy {

// Something registered with the poller. hold()/release() keep it alive while a batch of
// events that names it is being handled (a handler may close and release another target) and
// while it is on the ready list.
class PollTarget {
 public:
  virtual void on_poll(uint32_t events) = 0;  // readiness reported by the kernel
  virtual void on_ready() = 0;                // its turn on the ready list
  virtual void hold() {}
  virtual void release() {}

 protected:
  ~PollTarget() = default;

 private:
  friend class Poller;
  PollTarget* ready_next_ = nullptr;
  bool queued_ = false;
};

// Work handed to a reactor by another thread without allocating: an intrusive node the sender
// owns (in floodgate, the admission grant of a parked request, embedded in its Session). The
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
  explicit Poller(boost::asio::io_context& io);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Registers a descriptor (edge-triggered: readable, writable, peer closed). The
  // registration ends by itself when the descriptor is closed. Returns 0 or an errno value.
  int add(int fd, PollTarget& target);
  // Queues `target` on the ready list (once; no-op if queued).
  void defer(PollTarget& target);

  // Runs the loop on the calling thread until stop().
  void run();
  // Ends run() after the current turn (reactor thread).
  void stop();
  // Makes run() look at the io_context now (any thread).
  void wake();
  // Queues `task` to run on the reactor thread (any thread; lock-free, allocation-free). Wakes
  // the loop only when the inbox was empty, so a burst of grants costs one eventfd write.
  void send(RemoteTask& task) noexcept;
  // Runs what send() queued, oldest first (reactor thread). run() calls it every turn; the
  // reactor calls it once more while it shuts down.
  void run_inbox();

 private:
  void dispatch(int n);
  void run_ready();

  boost::asio::io_context& io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  // A Treiber stack of RemoteTasks, newest first: senders push with a compare-and-swap, the
  // reactor takes the whole stack with one exchange (so no ABA) and runs it reversed.
  std::atomic<RemoteTask*> inbox_{nullptr};
  std::thread::id owner_;  // the thread in run(); written before any task can be sent
  PollTarget* ready_head_ = nullptr;
  PollTarget* ready_tail_ = nullptr;
  bool stopped_ = false;
};

}  // namespace floodgate::proxy
