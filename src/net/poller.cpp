#include "floodgate/net/poller.h"

#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

namespace floodgate::net {

namespace {
// Events handled per turn; more stay ready and are reported by the next wait.
constexpr int kBatch = 128;
// A timer due within this of the turn's start bounds the loop's wait from a fresh clock read.
constexpr std::chrono::milliseconds kReadClockWithin{50};

int checked(int fd, const char* what) {
  if (fd < 0) throw std::system_error(errno, std::generic_category(), what);
  return fd;
}

// The poller whose loop runs on this thread (null outside Poller::run()). Each thread reads
// only its own, so send() can tell whether it is called from the loop without a shared field.
thread_local const Poller* t_running = nullptr;

std::array<epoll_event, kBatch>& batch() {
  thread_local std::array<epoll_event, kBatch> events;
  return events;
}

// io_uring: submission queue entries (a turn that wants more submits in several steps), and a
// completion queue four times as large; completions beyond it wait in the kernel (NODROP).
constexpr unsigned kRingEntries = 4096;
constexpr unsigned kCompletionEntries = 4 * kRingEntries;

// What a completion is about, in the low bits of its user_data (the rest is the Slot).
enum Op : uint64_t { kPoll = 1, kRecv = 2, kSend = 3, kRemove = 4 };
constexpr uint64_t kOpMask = 7;

constexpr unsigned kSocketEvents = POLLIN | POLLOUT | POLLRDHUP;
constexpr std::size_t kSlotBlock = 1024;
}  // namespace

// One io_uring registration: the multishot poll of a descriptor, and the name its reads and
// writes complete under. It outlives its target: remove() only clears `target`, and the slot
// is reused once the kernel has confirmed the poll's end, so a completion never reaches a
// destroyed target.
struct alignas(8) Poller::Slot {
  PollTarget* target = nullptr;
  int fd = -1;
  unsigned events = kSocketEvents;
  bool armed = false;    // the kernel holds the poll; its last completion has not come yet
  uint8_t removals = 0;  // POLL_REMOVE requests on their way: the slot stays until they end
  Slot* next_free = nullptr;
};

// The eventfd that wake() writes, as a target (io_uring; epoll names it with a null pointer).
class Poller::Wake final : public PollTarget {
 public:
  explicit Wake(Poller& poller) : poller_(poller) {}
  void on_poll(uint32_t) override { poller_.drain_wake_fd(); }
  void on_ready() override {}

 private:
  Poller& poller_;
};

Poller::Poller(boost::asio::io_context& io, IoMode mode, const Clock& clock)
    : io_(io),
      work_(io.get_executor()),
      wake_fd_(checked(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd")),
      clock_(clock) {
  if (mode != IoMode::epoll) {
    std::string why;
    if (open_ring(why)) {
      add_slot_block();
      wake_target_ = std::make_unique<Wake>(*this);
      Slot* slot = new_slot(*wake_target_, wake_fd_);
      slot->events = POLLIN;  // an eventfd is always writable: only a write to it matters
      arm_poll(*slot);
      return;
    }
    if (mode == IoMode::io_uring) {
      ::close(wake_fd_);
      throw std::system_error(EOPNOTSUPP, std::generic_category(),
                              "server.io = \"io_uring\": " + why);
    }
    fallback_reason_ = why;
  }
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.ptr = nullptr;  // the wake-up descriptor is the one target without an object
  if (epoll_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    const int e = errno;
    ::close(wake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    throw std::system_error(e, std::generic_category(), "epoll");
  }
}

Poller::~Poller() {
  ready_.release_all();
  heavy_.release_all();
  wanted_.release_all();
  if (uring_) io_uring_queue_exit(uring_.get());  // ends every poll the kernel still holds
  ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool Poller::open_ring(std::string& why) {
  auto ring = std::make_unique<io_uring>();
  io_uring_params params{};
  // One thread submits (the reactor's, enabled in run()); completions are processed only when
  // it enters the ring, never by interrupting it.
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
                 IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
  params.cq_entries = kCompletionEntries;
  if (const int r = io_uring_queue_init_params(kRingEntries, ring.get(), &params); r < 0) {
    why = std::string("the kernel refused an io_uring with deferred task work (") +
          std::strerror(-r) + "); it needs Linux 6.1 or later and io_uring not disabled";
    return false;
  }
  if ((params.features & IORING_FEAT_NODROP) == 0) {
    io_uring_queue_exit(ring.get());
    why = "the kernel's io_uring may drop completions (no IORING_FEAT_NODROP)";
    return false;
  }
  if ((params.features & IORING_FEAT_EXT_ARG) == 0) {  // the timers' bounded waits need it
    io_uring_queue_exit(ring.get());
    why = "the kernel's io_uring cannot bound a wait (no IORING_FEAT_EXT_ARG)";
    return false;
  }
  uring_ = std::move(ring);
  return true;
}

void Poller::add_slot_block() {
  slot_blocks_.push_back(std::make_unique<Slot[]>(kSlotBlock));
  Slot* block = slot_blocks_.back().get();
  for (std::size_t i = 0; i < kSlotBlock; ++i) free_slot(block[i]);
}

Poller::Slot* Poller::new_slot(PollTarget& target, int fd) {
  if (free_slots_ == nullptr) add_slot_block();  // past the first 1024 sockets at once
  Slot* slot = free_slots_;
  free_slots_ = slot->next_free;
  *slot = Slot{&target, fd, kSocketEvents, false, 0, nullptr};
  target.slot_ = slot;
  return slot;
}

void Poller::free_slot(Slot& slot) {
  slot.target = nullptr;
  slot.next_free = free_slots_;
  free_slots_ = &slot;
}

int Poller::add(int fd, PollTarget& target) {
  if (uring_) {
    arm_poll(*new_slot(target, fd));
    return 0;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &target;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return errno;
  return 0;
}

void Poller::remove(PollTarget& target) {
  auto* slot = static_cast<Slot*>(target.slot_);
  if (slot == nullptr) return;
  target.slot_ = nullptr;
  slot->target = nullptr;
  if (!slot->armed) {
    free_slot(*slot);
  } else if (!ring_done_) {  // once the ring is done, closing it ends the poll
    request_removal(*slot);
  }
}

void Poller::request_removal(Slot& slot) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_poll_remove(sqe, reinterpret_cast<uint64_t>(&slot) | kPoll);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&slot) | kRemove);
  ++slot.removals;
  ++removals_;
}

void Poller::arm_poll(Slot& slot) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_poll_multishot(sqe, slot.fd, slot.events);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&slot) | kPoll);
  slot.armed = true;
}

io_uring_sqe* Poller::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(uring_.get());
  while (sqe == nullptr) {
    // The queue is full: hand it to the kernel now. The completions wait in the completion
    // queue for reap(); a read or write submitted here still completes in this turn.
    io_uring_submit(uring_.get());
    sqe = io_uring_get_sqe(uring_.get());
  }
  return sqe;
}

void Poller::want_io(PollTarget& target) {
  wanted_.push(target);
}

void Poller::prepare_recv(PollTarget& target, int fd, char* data, std::size_t cap) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_recv(sqe, fd, data, cap, MSG_DONTWAIT);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(target.slot_) | kRecv);
}

void Poller::prepare_send(PollTarget& target, int fd, const char* data, std::size_t len) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_send(sqe, fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(target.slot_) | kSend);
}

void Poller::submit_wanted_io() {
  while (PollTarget* t = wanted_.pop()) {
    t->submit_io();
    t->release();
  }
}

namespace {
// Submits what is prepared and waits for one completion or `wait`, in one io_uring_enter with
// the timeout as its extended argument (IORING_FEAT_EXT_ARG). liburing's
// io_uring_submit_and_wait_timeout does the same through its generic wait-for-a-CQE loop,
// which costs hundreds of instructions per wait more; this is the loop's every idle wait.
// The ring is floodgate's own (single issuer, no SQPOLL), so publishing the submission tail
// is a plain store, as liburing's own flush does for such a ring.
int submit_and_wait_for(io_uring& ring, std::chrono::nanoseconds wait) {
  io_uring_sq& sq = ring.sq;
  const unsigned tail = sq.sqe_tail;
  if (sq.sqe_head != tail) {
    sq.sqe_head = tail;
    __atomic_store_n(sq.ktail, tail, __ATOMIC_RELEASE);
  }
  const unsigned to_submit = tail - __atomic_load_n(sq.khead, __ATOMIC_ACQUIRE);
  __kernel_timespec ts{};
  if (const int64_t ns = wait.count(); ns < 1'000'000'000) {  // the usual wait: no division
    ts.tv_nsec = ns;
  } else {
    ts.tv_sec = ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
  }
  io_uring_getevents_arg arg{};
  arg.ts = reinterpret_cast<uint64_t>(&ts);
  return io_uring_enter2(static_cast<unsigned>(ring.ring_fd), to_submit, 1,
                         IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                         reinterpret_cast<sigset_t*>(&arg), sizeof(arg));
}
}  // namespace

[[gnu::always_inline]] inline std::optional<std::chrono::nanoseconds> Poller::wait_bound(
    bool more) const {
  if (more) return std::chrono::nanoseconds::zero();
  if (timers_ == nullptr) return std::nullopt;
  const Clock::time_point due = timers_->next_due();
  if (due == Clock::time_point::max()) return std::nullopt;
  if (due <= now_) return std::chrono::nanoseconds::zero();  // also min(): not yet advanced
  // Measured from the turn's start, the wait is longer by what the turn's own work took
  // (microseconds): harmless for a deadline far off, which any event on the way shortens
  // again, but not for one close at hand, which measures from the clock's time now.
  const Clock::time_point from = due - now_ < kReadClockWithin ? clock_.now() : now_;
  if (due <= from) return std::chrono::nanoseconds::zero();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(due - from);
}

[[gnu::always_inline]] inline void Poller::enter(std::optional<std::chrono::nanoseconds> wait) {
  // Submits what is prepared and runs the kernel's deferred work (poll wake-ups), which posts
  // their completions; with a `wait` other than zero, blocks until there is at least one or
  // the wait has passed (nullopt: no bound). The bound travels in the same io_uring_enter
  // (IORING_FEAT_EXT_ARG, Linux 5.11), so a timer costs no system call of its own.
  int r = 0;
  if (wait && wait->count() == 0) {
    r = io_uring_submit_and_get_events(uring_.get());
  } else if (!wait) {
    r = io_uring_submit_and_wait(uring_.get(), 1);
  } else {
    r = submit_and_wait_for(*uring_, *wait);
  }
  if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) {
    throw std::system_error(-r, std::generic_category(), "io_uring_enter");
  }
}

int Poller::wait_epoll(epoll_event* events, std::optional<std::chrono::nanoseconds> wait) {
  if (!wait) return ::epoll_wait(epoll_fd_, events, kBatch, -1);
  if (wait->count() == 0) return ::epoll_wait(epoll_fd_, events, kBatch, 0);
  if (pwait2_) {
    timespec ts{};
    ts.tv_sec = wait->count() / 1'000'000'000;
    ts.tv_nsec = wait->count() % 1'000'000'000;
    const int n = ::epoll_pwait2(epoll_fd_, events, kBatch, &ts, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    pwait2_ = false;  // before Linux 5.11: whole milliseconds, rounded up (never early)
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wait).count();
  return ::epoll_wait(epoll_fd_, events, kBatch,
                      static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
}

void Poller::reap() {
  io_uring* ring = uring_.get();
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      const uint64_t data = cqe->user_data;
      const uint64_t op = data & kOpMask;
      // user_data carries the slot's address (8-aligned) with the operation in its low bits.
      auto* slot = reinterpret_cast<Slot*>(data & ~kOpMask);  // NOLINT(performance-no-int-to-ptr)
      PollTarget* t = slot->target;
      if (op == kRemove) {
        --slot->removals;
        --removals_;
        // EALREADY: the poll was being woken and could not be cancelled; it is still armed
        // (a multishot poll goes on), so ask again. The slot stays ours until it ends.
        if (cqe->res == -EALREADY && slot->armed && t == nullptr && !ring_done_) {
          request_removal(*slot);
        } else if (!slot->armed && t == nullptr && slot->removals == 0) {
          free_slot(*slot);
        }
        continue;
      }
      if (op == kPoll) {
        const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
        if (!more) slot->armed = false;
        if (t == nullptr) {  // removed: this was (or will be followed by) its last word
          if (!more && slot->removals == 0) free_slot(*slot);
          continue;
        }
        if (stopped_) continue;  // the loop is over: nobody would run the target
        if (cqe->res < 0) {      // the descriptor is unusable: its owner finds out on its next step
          t->on_polled(POLLERR | POLLHUP);
          defer(*t);
          continue;
        }
        t->on_polled(static_cast<uint32_t>(cqe->res));
        defer(*t);
        if (!more) arm_poll(*slot);  // the kernel ended the multishot (e.g. a full queue)
        continue;
      }
      if (t == nullptr || stopped_) continue;  // operations end in the turn they start
      t->on_io(op == kSend, cqe->res);
      defer(*t);
    }
    if (seen == 0) return;
    io_uring_cq_advance(ring, seen);
  }
}

void Poller::drain_wake_fd() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof(count));
}

void Poller::defer(PollTarget& target) {
  ready_.push(target);
}

void Poller::defer_heavy(PollTarget& target) {
  heavy_.push(target);
}

void Poller::wake() {
  posted_.store(true, std::memory_order_release);  // after the post it announces
  ring_bell();
}

void Poller::ring_bell() {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated: a wake-up is pending anyway.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void Poller::send(RemoteTask& task) noexcept {
  RemoteTask* head = inbox_.load(std::memory_order_relaxed);
  do {
    task.next = head;
  } while (!inbox_.compare_exchange_weak(head, &task, std::memory_order_release,
                                         std::memory_order_relaxed));
  // The first task of an empty inbox wakes the loop; the others find a wake-up pending. A
  // task sent by the loop's own thread (a request ending hands its slot to a waiter of the
  // same reactor) needs none: the loop looks at the inbox before it waits again.
  if (head == nullptr && t_running != this) ring_bell();
}

void Poller::run_posted() {
  // Work posted from other threads; no system call (the io_context owns no I/O objects).
  if (posted_.load(std::memory_order_relaxed) &&
      posted_.exchange(false, std::memory_order_acquire)) {
    io_.poll();
  }
}

void Poller::run_inbox() {
  if (inbox_.load(std::memory_order_relaxed) == nullptr) return;
  RemoteTask* stack = inbox_.exchange(nullptr, std::memory_order_acquire);
  RemoteTask* fifo = nullptr;
  while (stack != nullptr) {  // reverse: oldest first
    RemoteTask* next = stack->next;
    stack->next = fifo;
    fifo = stack;
    stack = next;
  }
  while (fifo != nullptr) {
    RemoteTask* next = fifo->next;  // read first: running the task may end its owner
    fifo->run(*fifo);
    fifo = next;
  }
}

void Poller::stop() {
  stopped_ = true;
  work_.reset();
}

// The loop's turns, inlined into run() (a turn costs no call of its own) and run_once().
// What is queued runs first: work posted and sent from other threads, the ready list, one
// heavy target. False when that work stopped the loop.
[[gnu::always_inline]] inline bool Poller::run_queued() {
  run_posted();
  run_inbox();
  run_ready();
  run_heavy();
  return !stopped_;
}

// How long a turn may block: until the next timer is due, and no longer than `cap`.
[[gnu::always_inline]] inline std::optional<std::chrono::nanoseconds> Poller::turn_wait(
    std::optional<std::chrono::nanoseconds> cap) const {
  // Block only when nothing is ready, and only until the next timer is due.
  const bool more =
      !ready_.empty() || !heavy_.empty() || inbox_.load(std::memory_order_relaxed) != nullptr;
  std::optional<std::chrono::nanoseconds> wait = wait_bound(more);
  if (cap && (!wait || *wait > *cap)) wait = cap;
  return wait;
}

[[gnu::always_inline]] inline void Poller::uring_turn(std::optional<std::chrono::nanoseconds> cap) {
  if (!run_queued()) return;
  submit_wanted_io();
  // The reads and writes just submitted complete at once, so a wait for one completion
  // returns then.
  enter(turn_wait(cap));
  now_ = clock_.now();
  reap();
  run_ready();
  run_timers();
}

[[gnu::always_inline]] inline void Poller::epoll_turn(std::optional<std::chrono::nanoseconds> cap) {
  if (!run_queued()) return;
  const int n = wait_epoll(batch().data(), turn_wait(cap));
  now_ = clock_.now();
  if (n < 0) {
    if (errno == EINTR) return;
    throw std::system_error(errno, std::generic_category(), "epoll_wait");
  }
  dispatch(n);
  run_ready();
  run_timers();
}

namespace {
// Marks this thread as the loop's for as long as it runs it: send() from here needs no bell.
struct Running {
  explicit Running(const Poller* p) { t_running = p; }
  ~Running() { t_running = nullptr; }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
};
}  // namespace

void Poller::run() {
  const Running running(this);
  if (uring_) {
    enable_ring();
    while (!stopped_) uring_turn(std::nullopt);
    io_.poll();  // what was posted before stop() still runs (it may hold references)
    run_inbox();
    finish_removals();
    wanted_.release_all();  // reads and writes nobody will submit any more
    return;
  }
  while (!stopped_) epoll_turn(std::nullopt);
  io_.poll();  // what was posted before stop() still runs (it may hold references)
  run_inbox();
}

void Poller::run_once(std::chrono::nanoseconds max_wait) {
  const Running running(this);
  if (uring_) {
    enable_ring();
    return uring_turn(max_wait);
  }
  epoll_turn(max_wait);
}

// The ring was made disabled so that the thread that runs it becomes its single issuer.
// (liburing 2.3 declares io_uring_enable_rings() but does not export it.)
void Poller::enable_ring() {
  if (ring_enabled_) return;
  if (::syscall(__NR_io_uring_register, uring_->ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr,
                0) != 0) {
    throw std::system_error(errno, std::generic_category(), "io_uring enable");
  }
  ring_enabled_ = true;
}

// The loop has ended, but the sockets closed on its last turns (a drain closes the
// listeners) are still held by their polls until the kernel has seen the removals: without
// this a listener of a reactor that finished draining early would keep taking connections
// nobody accepts while the others drain. Bounded: at most about a second.
void Poller::finish_removals() {
  __kernel_timespec step{};
  step.tv_nsec = 10'000'000;
  for (int i = 0; i < 100 && removals_ > 0; ++i) {
    io_uring_cqe* cqe = nullptr;
    io_uring_submit_and_wait_timeout(uring_.get(), &cqe, 1, &step, nullptr);
    reap();  // after stop() it records nothing for live targets
  }
  ring_done_ = true;
}

void Poller::dispatch(int n) {
  std::array<epoll_event, kBatch>& events = batch();
  const auto target = [&events](int i) { return static_cast<PollTarget*>(events[i].data.ptr); };
  // A handler may close (and release) a target whose event comes later in this batch: every
  // target in the batch is kept alive until the batch is done. A closed socket has left the
  // epoll set, so no event can name a target that was freed before the wait.
  for (int i = 0; i < n; ++i) {
    if (PollTarget* t = target(i)) t->hold();
  }
  for (int i = 0; i < n; ++i) {
    if (PollTarget* t = target(i)) {
      t->on_poll(events[i].events);
    } else {  // the wake-up: empty the eventfd; the next turn runs the io_context
      drain_wake_fd();
    }
  }
  for (int i = 0; i < n; ++i) {
    if (PollTarget* t = target(i)) t->release();
  }
}

void Poller::run_ready() {
  // One pass over what is queued now: what the targets queue meanwhile (themselves included)
  // waits for the next turn, after the kernel's events, the inbox and posted work.
  PollTarget* const last = ready_.back();
  if (last == nullptr) return;
  bool done = false;
  while (!done) {
    PollTarget* t = ready_.pop();
    done = t == last;  // compared before release(), which may end the target
    if (const uint32_t events = std::exchange(t->polled_, 0); events != 0) {
      t->on_poll(events);  // io_uring: readiness recorded by reap()
    } else {
      t->on_ready();
    }
    t->release();
  }
}

// One target a turn; those queued meanwhile go after the rest (defer_heavy()).
void Poller::run_heavy() {
  PollTarget* const t = heavy_.pop();
  if (t == nullptr) return;
  t->on_heavy();
  t->release();
}

}  // namespace floodgate::net
