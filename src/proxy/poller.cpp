#include "poller.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>
#include <thread>

namespace floodgate::proxy {

namespace {
// Events handled per turn; more stay ready and are reported by the next wait.
constexpr int kBatch = 128;

int checked(int fd, const char* what) {
  if (fd < 0) throw std::system_error(errno, std::generic_category(), what);
  return fd;
}

std::array<epoll_event, kBatch>& batch() {
  thread_local std::array<epoll_event, kBatch> events;
  return events;
}
}  // namespace

Poller::Poller(boost::asio::io_context& io)
    : io_(io),
      work_(io.get_executor()),
      epoll_fd_(checked(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1")),
      wake_fd_(checked(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd")) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.ptr = nullptr;  // the wake-up descriptor is the one target without an object
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    const int e = errno;
    ::close(wake_fd_);
    ::close(epoll_fd_);
    throw std::system_error(e, std::generic_category(), "epoll_ctl(eventfd)");
  }
}

Poller::~Poller() {
  while (PollTarget* t = ready_head_) {
    ready_head_ = t->ready_next_;
    t->queued_ = false;
    t->release();
  }
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

int Poller::add(int fd, PollTarget& target) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &target;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return errno;
  return 0;
}

void Poller::defer(PollTarget& target) {
  if (target.queued_) return;
  target.queued_ = true;
  target.hold();
  target.ready_next_ = nullptr;
  if (ready_tail_ != nullptr) {
    ready_tail_->ready_next_ = &target;
  } else {
    ready_head_ = &target;
  }
  ready_tail_ = &target;
}

void Poller::wake() {
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
  if (head == nullptr && std::this_thread::get_id() != owner_) wake();
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

void Poller::run() {
  owner_ = std::this_thread::get_id();
  std::array<epoll_event, kBatch>& events = batch();
  while (!stopped_) {
    io_.poll();  // work posted from other threads; no system call (no I/O objects)
    run_inbox();
    run_ready();
    if (stopped_) break;
    // Block only when nothing is ready; the tick timer bounds the wait anyway.
    const bool more = ready_head_ != nullptr || inbox_.load(std::memory_order_relaxed) != nullptr;
    const int n = ::epoll_wait(epoll_fd_, events.data(), kBatch, more ? 0 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "epoll_wait");
    }
    dispatch(n);
    run_ready();
  }
  io_.poll();  // what was posted before stop() still runs (it may hold references)
  run_inbox();
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
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof(count));
    }
  }
  for (int i = 0; i < n; ++i) {
    if (PollTarget* t = target(i)) t->release();
  }
}

void Poller::run_ready() {
  while (PollTarget* t = ready_head_) {
    ready_head_ = t->ready_next_;
    if (ready_head_ == nullptr) ready_tail_ = nullptr;
    t->ready_next_ = nullptr;
    t->queued_ = false;
    t->on_ready();
    t->release();
  }
}

}  // namespace floodgate::proxy
