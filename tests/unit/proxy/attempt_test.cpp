// The attempt's life cycle (proxy/attempt.h: one try of a request at one backend) as a client
// and a backend see it, through a real Reactor on its own thread whose loop runs on a
// ManualClock: the connect and response timeouts are timer-wheel deadlines of the loop's clock
// (they fire when the clock is advanced, never by real time alone), a refused connect answers
// 502 at once, and a complete response returns the backend connection to the reactor's
// keep-alive pool, where the next request of the client finds it.
//
// The test thread touches only the ManualClock, its own sockets and the Reactor's thread-safe
// calls (drain, force_close, join, finished). Waits are bounded polls of a socket, never sleeps.
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

#include "floodgate/core/clock.h"
#include "floodgate/core/endpoint.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/front_stages.h"
#include "floodgate/proxy/params.h"
#include "floodgate/proxy/pool_stage.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/params.h"
#include "floodgate/routing/params.h"
#include "floodgate/routing/route_table.h"
#include "floodgate/upstream/params.h"

namespace floodgate::proxy {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
// Real time a wait for something that must happen may take (sanitizer builds, a busy CPU).
constexpr auto kPatience = 5s;

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

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

// A socket listening on 127.0.0.1 at an ephemeral port.
Fd listen_loopback(int backlog = 16) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(0);
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    return Fd();
  }
  return fd;
}

// A port nothing listens on: bound once, then closed.
uint16_t unused_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(0);
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) return 0;
  return local_port(fd.get());
}

Fd connect_loopback(uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in a = loopback(port);
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
    return Fd();
  }
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Whether `fd` becomes readable (data, EOF or an error) within `timeout` of real time.
bool readable_within(int fd, std::chrono::milliseconds timeout) {
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

Fd accept_within(int listener, std::chrono::milliseconds timeout) {
  if (!readable_within(listener, timeout)) return Fd();
  return Fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

// Reads from `fd` into `buf` until `done(buf)` holds, EOF, or `timeout` of real time passes.
// True when `done` holds.
template <typename Done>
bool read_until(int fd, std::string& buf, Done done, std::chrono::milliseconds timeout) {
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
bool head_complete(const std::string& buf) {
  return buf.find("\r\n\r\n") != std::string::npos;
}

std::size_t content_length(std::string_view head) {
  constexpr std::string_view kName = "\r\ncontent-length:";
  std::string lower(head);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  const std::size_t at = lower.find(kName);
  if (at == std::string::npos) return 0;
  return std::stoul(lower.substr(at + kName.size()));
}

bool message_complete(const std::string& buf) {
  const std::size_t end = buf.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  return buf.size() >= end + 4 + content_length(std::string_view(buf).substr(0, end + 2));
}

// Reads one whole response (head and Content-Length body) from `fd`; what follows it stays in
// `buf` for the next call. nullopt when it did not arrive within `timeout`.
std::optional<std::string> read_response(int fd, std::string& buf,
                                         std::chrono::milliseconds timeout = kPatience) {
  if (!read_until(fd, buf, message_complete, timeout)) return std::nullopt;
  const std::size_t end = buf.find("\r\n\r\n");
  const std::size_t len = end + 4 + content_length(std::string_view(buf).substr(0, end + 2));
  std::string out = buf.substr(0, len);
  buf.erase(0, len);
  return out;
}

// Reads one request head from `fd` (the test's requests have no body).
std::optional<std::string> read_request(int fd, std::string& buf,
                                        std::chrono::milliseconds timeout = kPatience) {
  if (!read_until(fd, buf, head_complete, timeout)) return std::nullopt;
  const std::size_t len = buf.find("\r\n\r\n") + 4;
  std::string out = buf.substr(0, len);
  buf.erase(0, len);
  return out;
}

// Whether the peer of `fd` closes its side (EOF or a reset) within `timeout` of real time;
// bytes before that are read and dropped.
bool closed_within(int fd, std::chrono::milliseconds timeout) {
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

// Hedging of GETs after `delay`, nothing else of the failure policy.
FailurePolicy hedging_after(std::chrono::milliseconds delay) {
  FailurePolicy failure;
  failure.hedging = true;
  failure.hedge_delay = delay;
  failure.hedge_methods = method_bit(HTTP_GET);
  return failure;
}

// Which of two listening backends a connection reached first (round robin chose it), or 2 when
// none did within kPatience.
std::size_t first_readable(const std::array<Fd, 2>& backends) {
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
// reactor, with `failure` as its breakers, retry and hedging (no retry budget).
std::shared_ptr<const Snapshot> pool_of(const std::vector<uint16_t>& ports,
                                        std::chrono::milliseconds connect_timeout,
                                        std::chrono::milliseconds response_timeout,
                                        const FailurePolicy& failure = {}) {
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

class AttemptTest : public ::testing::Test {
 protected:
  // Starts a reactor on the manual clock for a pool of one backend at `backend_port`; returns
  // the port its listener got.
  uint16_t start_proxy(uint16_t backend_port, std::chrono::milliseconds connect_timeout = 2s,
                       std::chrono::milliseconds response_timeout = 30s) {
    return start_pool(pool_of({backend_port}, connect_timeout, response_timeout));
  }
  uint16_t start_pool(std::shared_ptr<const Snapshot> snap) {
    snap_ = snap;
    reactor_ = std::make_unique<Reactor>(0, std::move(snap), access_log_, clock_);
    const auto bound = reactor_->listen(
        boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0), "127.0.0.1:0");
    reactor_->start();
    return bound.port();
  }

  // Stops the reactor: a drain (the test closed its connections first), or a forced close
  // when something is still in flight after a while (a failed test).
  void TearDown() override {
    if (!reactor_) return;
    reactor_->drain();
    const auto deadline = SteadyClock::now() + kPatience;
    while (!reactor_->finished() && SteadyClock::now() < deadline) ::poll(nullptr, 0, 5);
    if (!reactor_->finished()) reactor_->force_close();
    reactor_->join();
    reactor_.reset();
  }

  // Advances the loop's clock by `step` until `fd` becomes readable, at most `steps` times,
  // waiting up to `per_step` of real time after each: a timer armed before an advance fires
  // within one tick of it. Returns the number of advances made, 0 when nothing arrived.
  int advance_until_readable(int fd, std::chrono::milliseconds step, int steps = 5,
                             std::chrono::milliseconds per_step = 1s) {
    for (int i = 1; i <= steps; ++i) {
      clock_.advance(step);
      if (readable_within(fd, per_step)) return i;
    }
    return 0;
  }

  ManualClock clock_;
  std::shared_ptr<const Snapshot> snap_;
  AccessLog access_log_{LogParams{.access_log = "off"}, 1};
  std::unique_ptr<Reactor> reactor_;
};

TEST_F(AttemptTest, ResponseTimeoutFiresByTheLoopsClockNotTheWallClock) {
  constexpr auto kResponseTimeout = 200ms;
  Fd backend = listen_loopback();
  ASSERT_TRUE(backend);
  const uint16_t proxy = start_proxy(local_port(backend.get()), 2s, kResponseTimeout);
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  ASSERT_TRUE(send_all(client.get(), kGet));

  // The request reaches the backend, which never answers.
  Fd upstream = accept_within(backend.get(), kPatience);
  ASSERT_TRUE(upstream);
  std::string upstream_in;
  ASSERT_TRUE(read_request(upstream.get(), upstream_in).has_value());

  // Real time well past response_timeout, the loop's clock standing still: no answer.
  EXPECT_FALSE(readable_within(client.get(), 3 * kResponseTimeout));

  // The loop's clock past response_timeout: 504 upstream_timeout within a tick.
  EXPECT_GE(advance_until_readable(client.get(), kResponseTimeout + 20ms), 1);
  std::string client_in;
  const auto response = read_response(client.get(), client_in);
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->starts_with("HTTP/1.1 504 ")) << *response;
  EXPECT_NE(response->find("\r\nX-Floodgate-Reason: upstream_timeout\r\n"), std::string::npos)
      << *response;
  // The failed attempt's backend connection is closed, not pooled.
  EXPECT_TRUE(closed_within(upstream.get(), kPatience));
}

TEST_F(AttemptTest, ARefusedConnectAnswers502AtOnceWithoutTheClockMoving) {
  const uint16_t nobody = unused_port();
  ASSERT_NE(nobody, 0);
  const uint16_t proxy = start_proxy(nobody);
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  ASSERT_TRUE(send_all(client.get(), kGet));

  std::string client_in;
  const auto response = read_response(client.get(), client_in);
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->starts_with("HTTP/1.1 502 ")) << *response;
  EXPECT_NE(response->find("\r\nX-Floodgate-Reason: upstream_connect_failed\r\n"),
            std::string::npos)
      << *response;
}

TEST_F(AttemptTest, ACompleteResponseReturnsTheBackendConnectionToTheKeepAlivePool) {
  Fd backend = listen_loopback();
  ASSERT_TRUE(backend);
  const uint16_t proxy = start_proxy(local_port(backend.get()));
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  std::string client_in;
  std::string upstream_in;

  // The first request opens the backend connection.
  ASSERT_TRUE(send_all(client.get(), kGet));
  Fd upstream = accept_within(backend.get(), kPatience);
  ASSERT_TRUE(upstream);
  const auto first = read_request(upstream.get(), upstream_in);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->starts_with("GET / HTTP/1.1\r\n")) << *first;
  ASSERT_TRUE(send_all(upstream.get(), kOk));
  const auto one = read_response(client.get(), client_in);
  ASSERT_TRUE(one.has_value());
  EXPECT_TRUE(one->starts_with("HTTP/1.1 200 ")) << *one;
  EXPECT_TRUE(one->ends_with("\r\n\r\nok")) << *one;

  // The second request, on the same client connection, comes on the same backend connection.
  ASSERT_TRUE(send_all(client.get(), kGet));
  const auto second = read_request(upstream.get(), upstream_in);
  ASSERT_TRUE(second.has_value()) << "the second request did not come on the pooled connection";
  EXPECT_TRUE(second->starts_with("GET / HTTP/1.1\r\n")) << *second;
  ASSERT_TRUE(send_all(upstream.get(), kOk));
  const auto two = read_response(client.get(), client_in);
  ASSERT_TRUE(two.has_value());
  EXPECT_TRUE(two->starts_with("HTTP/1.1 200 ")) << *two;
  EXPECT_TRUE(two->ends_with("\r\n\r\nok")) << *two;

  // One accept in all: no other connection is waiting at the backend.
  EXPECT_FALSE(readable_within(backend.get(), 0ms));
  EXPECT_TRUE(client_in.empty());
  EXPECT_TRUE(upstream_in.empty());
}

TEST_F(AttemptTest, AConnectThatDoesNotCompleteFailsAfterConnectTimeoutOfTheLoopsClock) {
  constexpr auto kConnectTimeout = 200ms;
  // A backend whose accept queue is full: listen(0) queues one connection, which the test
  // makes and never accepts; Linux then drops further SYNs, so a connect stays in progress.
  Fd backend = listen_loopback(0);
  ASSERT_TRUE(backend);
  const uint16_t backend_port = local_port(backend.get());
  Fd filler = connect_loopback(backend_port);
  ASSERT_TRUE(filler);
  // Check that this kernel does drop the SYN: a probe's connect must stay in progress.
  Fd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  ASSERT_TRUE(probe);
  const sockaddr_in at = loopback(backend_port);
  const int r = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&at), sizeof(at));
  ASSERT_TRUE(r == 0 || errno == EINPROGRESS);
  pollfd p{probe.get(), POLLOUT, 0};
  if (r == 0 || ::poll(&p, 1, 300) != 0) {
    GTEST_SKIP() << "a connect to a full accept queue completes here: no way to stall one";
  }

  const uint16_t proxy = start_proxy(backend_port, kConnectTimeout, 30s);
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  ASSERT_TRUE(send_all(client.get(), kGet));

  // Real time well past connect_timeout, the loop's clock standing still: no answer.
  EXPECT_FALSE(readable_within(client.get(), 3 * kConnectTimeout));

  EXPECT_GE(advance_until_readable(client.get(), kConnectTimeout + 20ms), 1);
  std::string client_in;
  const auto response = read_response(client.get(), client_in);
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->starts_with("HTTP/1.1 504 ")) << *response;
  EXPECT_NE(response->find("\r\nX-Floodgate-Reason: upstream_connect_timeout\r\n"),
            std::string::npos)
      << *response;
}

// Brownout (enforced) suppresses hedging: with brownout active, the primary's backend is
// left to answer however long the loop's clock runs past hedging.delay.
TEST_F(AttemptTest, NoHedgeIsSentWhileBrownoutIsActive) {
  constexpr auto kDelay = 100ms;
  std::array<Fd, 2> backends{listen_loopback(), listen_loopback()};
  ASSERT_TRUE(backends[0] && backends[1]);
  const FailurePolicy failure = hedging_after(kDelay);
  auto snap =
      pool_of({local_port(backends[0].get()), local_port(backends[1].get())}, 2s, 30s, failure);
  ASSERT_TRUE(snap->protection.brownout_enforced());
  ASSERT_TRUE(snap->protection.state->brownout.observe(clock_.now(), 100, 100, {}));
  const uint16_t proxy = start_pool(snap);
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  ASSERT_TRUE(send_all(client.get(), kGet));
  const std::size_t first = first_readable(backends);
  ASSERT_NE(first, 2U) << "the request reached no backend";
  Fd primary = accept_within(backends[first].get(), kPatience);
  ASSERT_TRUE(primary);
  std::string primary_in;
  ASSERT_TRUE(read_request(primary.get(), primary_in).has_value());
  for (int i = 0; i < 5; ++i) {
    clock_.advance(kDelay);
    EXPECT_FALSE(readable_within(backends[1 - first].get(), 100ms)) << "a hedge was sent";
  }
  ASSERT_TRUE(send_all(primary.get(), kOk));
  std::string client_in;
  const auto response = read_response(client.get(), client_in);
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->starts_with("HTTP/1.1 200 ")) << *response;
  EXPECT_EQ(reactor_->metrics().hedges(0, HedgeResult::sent).value(), 0U);
}

// Hedging: the primary's backend takes the request and never answers; once the loop's clock
// passes hedging.delay (never by real time alone) the hedge goes to the other backend, whose
// answer the client gets, and the primary's connection is closed with its counts released.
TEST_F(AttemptTest, AHedgeGoesToTheOtherBackendAfterTheDelayAndTheLoserIsClosed) {
  constexpr auto kDelay = 100ms;
  std::array<Fd, 2> backends{listen_loopback(), listen_loopback()};
  ASSERT_TRUE(backends[0] && backends[1]);
  const FailurePolicy failure = hedging_after(kDelay);
  const uint16_t proxy = start_pool(
      pool_of({local_port(backends[0].get()), local_port(backends[1].get())}, 2s, 30s, failure));
  Fd client = connect_loopback(proxy);
  ASSERT_TRUE(client);
  ASSERT_TRUE(send_all(client.get(), kGet));

  // The primary: whichever backend round robin chose.
  const std::size_t first = first_readable(backends);
  ASSERT_NE(first, 2U) << "the request reached no backend";
  const std::size_t second = 1 - first;
  Fd primary = accept_within(backends[first].get(), kPatience);
  ASSERT_TRUE(primary);
  std::string primary_in;
  ASSERT_TRUE(read_request(primary.get(), primary_in).has_value());

  // Real time past the delay, the loop's clock standing still: no hedge.
  EXPECT_FALSE(readable_within(backends[second].get(), 3 * kDelay));

  // The clock past the delay: the hedge reaches the other backend, which answers.
  int advances = 0;
  while (advances < 5 && !readable_within(backends[second].get(), 1s)) {
    clock_.advance(kDelay);
    ++advances;
  }
  Fd hedge = accept_within(backends[second].get(), kPatience);
  ASSERT_TRUE(hedge) << "no hedge after the delay";
  std::string hedge_in;
  const auto request = read_request(hedge.get(), hedge_in);
  ASSERT_TRUE(request.has_value());
  EXPECT_TRUE(request->starts_with("GET / HTTP/1.1\r\n")) << *request;
  ASSERT_TRUE(send_all(hedge.get(), kOk));

  std::string client_in;
  const auto response = read_response(client.get(), client_in);
  ASSERT_TRUE(response.has_value());
  EXPECT_TRUE(response->starts_with("HTTP/1.1 200 ")) << *response;
  EXPECT_TRUE(response->ends_with("\r\n\r\nok")) << *response;

  // The loser: its connection closed (HTTP/1.1 cannot cancel a request on it), its count in
  // the backend's load released once, and no verdict for its circuit.
  EXPECT_TRUE(closed_within(primary.get(), kPatience));
  const Upstream& up = *snap_->upstreams[0];
  const auto settled = [&] {
    return up.backends[0]->load.active.load() == 0 && up.backends[1]->load.active.load() == 0;
  };
  for (const auto deadline = SteadyClock::now() + kPatience;
       !settled() && SteadyClock::now() < deadline;) {
    ::poll(nullptr, 0, 5);
  }
  EXPECT_TRUE(settled());
  EXPECT_EQ(up.backends[first]->breaker->streak(), 0U);
  EXPECT_EQ(up.backends[first]->breaker->state(clock_.now()), resilience::CircuitState::closed);
}

}  // namespace
}  // namespace floodgate::proxy
