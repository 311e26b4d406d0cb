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
#include "proxy_test_support.h"

namespace floodgate::proxy {
namespace {

using namespace std::chrono_literals;
using namespace test_support;  // proxy_test_support.h

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
