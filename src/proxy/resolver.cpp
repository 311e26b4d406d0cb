#include "resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <boost/asio/error.hpp>
#include <cstring>
#include <utility>

#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

namespace {

Resolver::Result lookup(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  Resolver::Result r;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0 || list == nullptr) {
    r.error = boost::asio::error::host_not_found;
    return r;
  }
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET || a->ai_family == AF_INET6) {
      boost::asio::ip::tcp::endpoint e;
      std::memcpy(e.data(), a->ai_addr, a->ai_addrlen);
      e.port(port);
      r.endpoint = e;
      break;
    }
  }
  if (r.endpoint.port() == 0) r.error = boost::asio::error::host_not_found;
  ::freeaddrinfo(list);
  return r;
}

}  // namespace

Resolver::~Resolver() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Names nobody resolved: their completions are dropped here, on the thread ending the
  // reactor, after the worker and (Reactor's destructor order) the reactor thread have ended.
  jobs_.clear();
}

bool Resolver::resolve(std::string host, uint16_t port, Done done) {
  {
    const std::lock_guard lock(mutex_);
    if (jobs_.size() >= kMaxPending) return false;
    jobs_.push_back(Job{std::move(host), port, std::move(done)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
  return true;
}

void Resolver::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;  // the rest is dropped by the destructor
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    const Result result = lookup(job.host, job.port);
    // The completion moves into the posted handler: this thread never copies or destroys
    // what it holds.
    reactor_.post([done = std::move(job.done), result] { done(result); });
    lock.lock();
  }
}

}  // namespace floodgate::proxy
