// Name resolution for CONNECT tunnels, off the reactor: getaddrinfo() can wait seconds for a
// DNS server, and nothing on a reactor may block. One thread per reactor, started on the
// first name it is asked to resolve (a floodgate that never tunnels to a name never starts
// it), takes names from a bounded FIFO and posts each result back to its reactor.
//
// Backends are never resolved here: their addresses are resolved at load. Only a CONNECT to a
// host name that the protocol policy allows comes here (an IP literal is connected at once).
//
// Thread-safety: resolve() on the reactor thread; the worker touches nothing of the reactor
// but Reactor::post(). A job's completion (and whatever it holds, such as a client connection
// reference) lives on the reactor thread or, when the reactor never runs it again, is
// destroyed by ~Resolver or with the reactor's io_context after the reactor thread has ended.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace floodgate::proxy {

class Reactor;

class Resolver {
 public:
  struct Result {
    boost::system::error_code error;  // set when the name has no usable address
    boost::asio::ip::tcp::endpoint endpoint;
  };
  using Done = std::function<void(const Result&)>;

  // Names waiting beyond this are refused at once: a burst of tunnels to names cannot queue
  // without bound behind a slow DNS server.
  static constexpr std::size_t kMaxPending = 256;

  explicit Resolver(Reactor& reactor) : reactor_(reactor) {}
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Resolves `host` (a name, not an IP literal) for `port`; `done` runs later on the reactor
  // thread with the first address found. Returns false (and drops `done` at once) when
  // kMaxPending names are already waiting.
  bool resolve(std::string host, uint16_t port, Done done);

 private:
  struct Job {
    std::string host;
    uint16_t port = 0;
    Done done;
  };
  void run();

  Reactor& reactor_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // started by the first resolve()
};

}  // namespace floodgate::proxy
