// What the proxy's tests that run requests against backends share: sockets the test owns on
// 127.0.0.1 (listening backends, clients, bounded reads that poll with deadlines, never
// sleeps) and a generation with one pool built as app::Generations builds one.
//
// Thread-safety: each helper touches only its arguments; the test's thread.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/core/endpoint.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/front_stages.h"
#include "floodgate/proxy/params.h"
#include "floodgate/proxy/pool_stage.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/params.h"
#include "floodgate/routing/params.h"
#include "floodgate/routing/route_table.h"
#include "floodgate/upstream/params.h"

namespace floodgate::proxy::test_support {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

inline constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
inline constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
// Real time a wait for something that must happen may take (sanitizer builds, a busy CPU).
inline constexpr auto kPatience = 5s;

// --- sockets the test owns -----------------------------------------------------------------

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

inline sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

inline uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

// A socket listening on 127.0.0.1 at an ephemeral port.
inline Fd listen_loopback(int backlog = 16) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(0);
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    return Fd();
  }
  return fd;
}

// A port nothing listens on: bound once, then closed.
inline uint16_t unused_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(0);
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) return 0;
  return local_port(fd.get());
}

inline Fd connect_loopback(uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(port);
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
    return Fd();
  }
  return fd;
}

inline bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Whether `fd` becomes readable (data, EOF or an error) within `timeout` of real time.
inline bool readable_within(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r > 0) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;  // timed out (or failed)
  }
}

inline Fd accept_within(int listener, std::chrono::milliseconds timeout) {
  if (!readable_within(listener, timeout)) return Fd();
  return Fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

// Reads from `fd` into `buf` until `done(buf)` holds, EOF, or `timeout` of real time passes.
// True when `done` holds.
template <typename Done>
inline bool read_until(int fd, std::string& buf, Done done, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!done(buf)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0 || !readable_within(fd, left)) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  return true;
}

// A response or request head (up to the blank line) and, for a response, its body of
// Content-Length bytes (0 when the header is absent).
inline bool head_complete(const std::string& buf) {
  return buf.find("\r\n\r\n") != std::string::npos;
}

inline std::size_t content_length(std::string_view head) {
  constexpr std::string_view kName = "\r\ncontent-length:";
  std::string lower(head);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  const std::size_t at = lower.find(kName);
  if (at == std::string::npos) return 0;
  return std::stoul(lower.substr(at + kName.size()));
}

inline bool message_complete(const std::string& buf) {
  const std::size_t end = buf.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  return buf.size() >= end + 4 + content_length(std::string_view(buf).substr(0, end + 2));
}

// Reads one whole response (head and Content-Length body) from `fd`; what follows it stays in
// `buf` for the next call. nullopt when it did not arrive within `timeout`.
inline std::optional<std::string> read_response(int fd, std::string& buf,
                                                std::chrono::milliseconds timeout = kPatience) {
  if (!read_until(fd, buf, message_complete, timeout)) return std::nullopt;
  const std::size_t end = buf.find("\r\n\r\n");
  const std::size_t len = end + 4 + content_length(std::string_view(buf).substr(0, end + 2));
  std::string out = buf.substr(0, len);
  buf.erase(0, len);
  return out;
}

// Reads one request head from `fd` (the test's requests have no body).
inline std::optional<std::string> read_request(int fd, std::string& buf,
                                               std::chrono::milliseconds timeout = kPatience) {
  if (!read_until(fd, buf, head_complete, timeout)) return std::nullopt;
  const std::size_t len = buf.find("\r\n\r\n") + 4;
  std::string out = buf.substr(0, len);
  buf.erase(0, len);
  return out;
}

// Whether the peer of `fd` closes its side (EOF or a reset) within `timeout` of real time;
// bytes before that are read and dropped.
inline bool closed_within(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0 || !readable_within(fd, left)) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EINTR) return true;
  }
}

// Whether the peer of `fd` has closed its side (EOF or a reset) by now, without waiting; bytes
// before that are read and dropped.
inline bool peer_closed_now(int fd) {
  for (;;) {
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

// Hedging of GETs after `delay`, nothing else of the failure policy.
inline FailurePolicy hedging_after(std::chrono::milliseconds delay) {
  FailurePolicy failure;
  failure.hedging = true;
  failure.hedge_delay = delay;
  failure.hedge_methods = method_bit(HTTP_GET);
  return failure;
}

// Which of two listening backends a connection reached first (round robin chose it), or 2 when
// none did within kPatience.
inline std::size_t first_readable(const std::array<Fd, 2>& backends) {
  for (const auto deadline = SteadyClock::now() + kPatience; SteadyClock::now() < deadline;) {
    for (std::size_t i = 0; i < 2; ++i) {
      if (readable_within(backends[i].get(), 10ms)) return i;
    }
  }
  return 2;
}

// --- the proxy under test ------------------------------------------------------------------

// A generation with one pool, "app", of backends at 127.0.0.1:`ports` (round robin), and one
// route to it for every host and path; no in-flight cap and no memory guard (nothing but the
// attempts can answer). Built as app::Generations builds one from a configuration, for one
// reactor, with `failure` as its breakers, retry and hedging (no retry budget), and `pool` as
// the pool's admission (max_active_requests, its queue).
inline std::shared_ptr<const Snapshot> pool_of(const std::vector<uint16_t>& ports,
                                               std::chrono::milliseconds connect_timeout,
                                               std::chrono::milliseconds response_timeout,
                                               const FailurePolicy& failure = {},
                                               const ResilienceParams& pool = {}) {
  auto snap = std::make_shared<Snapshot>();
  snap->failure = failure;
  snap->generation = 1;
  snap->limits = http::HeadLimits{snap->server.max_uri_bytes, snap->server.max_header_bytes,
                                  snap->server.max_headers};
  auto up = std::make_shared<Upstream>();
  up->id = 0;
  up->params.name = "app";
  up->params.connect_timeout = connect_timeout;
  up->params.response_timeout = response_timeout;
  up->hedge = failure.hedging;
  up->params.resilience = pool;
  for (const uint16_t port : ports) {
    const Endpoint address{"127.0.0.1", port, "127.0.0.1:" + std::to_string(port)};
    up->params.servers.push_back(ServerEntry{address});
    up->backends.push_back(std::make_shared<Backend>(
        address, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), port), 1,
        std::make_shared<resilience::CircuitBreaker>(failure.limits)));
    up->weights.push_back(1);
  }
  up->pool = std::make_shared<Pool>();
  up->apply_policy();
  up->pool->admission.set_limits(up->policy.limits);
  up->per_reactor = std::make_unique<Upstream::PerReactor[]>(1);
  up->per_reactor[0].balancer.emplace(up->params.balance, up->weights, 1);
  snap->upstream_names = {"app"};
  snap->by_id = {up.get()};
  const std::vector<RouteParams> routes{RouteParams{.upstream = "app"}};
  const std::vector<uint32_t> route_upstreams{up->id};
  snap->routes = RouteTable::build(routes, route_upstreams);
  resilience::Params front;
  front.inflight.automatic = false;  // max_inflight = 0: no cap, so no adaptive ceiling either
  front.memory_guard.automatic = false;
  front.memory_guard.min_available_mib = 0;  // disabled
  snap->protection = LocalProtection::of(front, 0, std::make_shared<ProtectionState>(1));
  snap->route_chains.push_back(build_route_chain(*up, snap->protection));
  snap->upstreams.push_back(std::move(up));
  snap->front_state = std::make_shared<FrontState>();
  snap->max_inflight = 0;
  snap->front = build_front_chain(front, snap->max_inflight, snap->front_state);
  return snap;
}

}  // namespace floodgate::proxy::test_support
