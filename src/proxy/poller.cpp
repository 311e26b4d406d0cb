#include "poller.h"

#include <sys/epoll.h>

#include <array>
#include <boost/asio/bind_allocator.hpp>
#include <cerrno>
#include <system_error>

namespace floodgate::proxy {

namespace asio = boost::asio;

namespace {
int create_epoll() {
  const int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  return fd;
}

// Events handled per wakeup; more stay ready and are reported by the next wait.
constexpr int kBatch = 128;
}  // namespace

Poller::Poller(asio::io_context& io) : set_(io, create_epoll()) {}

int Poller::add(int fd, PollTarget& target) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &target;
  if (::epoll_ctl(set_.native_handle(), EPOLL_CTL_ADD, fd, &ev) != 0) return errno;
  if (!armed_ && !stopped_) arm();
  return 0;
}

void Poller::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  set_.cancel(ignored);
}

void Poller::arm() {
  armed_ = true;
  set_.async_wait(asio::posix::stream_descriptor::wait_read,
                  asio::bind_allocator(SlotAllocator<void>(wait_slot_),
                                       [this](const boost::system::error_code& ec) {
                                         armed_ = false;
                                         on_ready(ec);
                                       }));
}

void Poller::on_ready(const boost::system::error_code& ec) {
  if (ec || stopped_) return;
  std::array<epoll_event, kBatch> events;
  int n = 0;
  do {
    n = ::epoll_wait(set_.native_handle(), events.data(), kBatch, 0);
  } while (n < 0 && errno == EINTR);
  // A handler may close (and release) a target whose event comes later in this batch: every
  // target in the batch is kept alive until the batch is done. A closed socket has left the
  // epoll set, so no event can name a target that was freed before the wait.
  const auto target = [&events](int i) { return static_cast<PollTarget*>(events[i].data.ptr); };
  for (int i = 0; i < n; ++i) target(i)->hold();
  for (int i = 0; i < n; ++i) target(i)->on_poll(events[i].events);
  for (int i = 0; i < n; ++i) target(i)->release();
  if (!stopped_) arm();
}

}  // namespace floodgate::proxy
