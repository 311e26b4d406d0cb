// The health task against real loopback peers: thresholds, streak resets, timeouts without
// overlapping probes, late completions after a generation change or shutdown, and peer
// identity. Every wait polls with a deadline.
#include "floodgate/health/checker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace floodgate::health {
namespace {

using namespace std::chrono_literals;

// Polls `done` every millisecond until it holds or 10 s pass.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

// A loopback peer on its own thread. For each connection it calls `answer(n)` (n = 0, 1, ...)
// for the bytes to send; std::nullopt keeps the connection open and silent until the client
// closes it.
class Peer {
 public:
  using Answer = std::function<std::optional<std::string>(int)>;
  explicit Peer(Answer answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd_, 64);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Peer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (auto& t : conns_) t.join();
  }
  boost::asio::ip::tcp::endpoint endpoint() const {
    return {boost::asio::ip::make_address("127.0.0.1"), port_};
  }
  int accepted() const { return accepted_.load(); }
  int closed_by_client() const { return closed_.load(); }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      const int n = accepted_++;
      std::lock_guard lock(mu_);
      conns_.emplace_back([this, c, n] {
        char buf[4096];
        ::recv(c, buf, sizeof(buf), 0);  // the request (small, one segment on loopback)
        if (auto bytes = answer_(n)) {
          ::send(c, bytes->data(), bytes->size(), MSG_NOSIGNAL);
          ::shutdown(c, SHUT_WR);
        }
        while (::recv(c, buf, sizeof(buf), 0) > 0) {
        }
        ++closed_;
        ::close(c);
      });
    }
  }
  Answer answer_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_{0};
  std::mutex mu_;
  std::vector<std::thread> conns_;
  std::thread thread_;
};

const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
const std::string kError = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";

HealthParams fast(uint32_t fall = 2, uint32_t rise = 2) {
  HealthParams p;
  p.interval = 20ms;
  p.timeout = 500ms;
  p.fall = fall;
  p.rise = rise;
  return p;
}

Target target(const boost::asio::ip::tcp::endpoint& at, std::shared_ptr<PeerHealth> state,
              HealthParams p) {
  return Target{
      "app",      "127.0.0.1:" + std::to_string(at.port()), at, std::move(state), p, nullptr,
      "127.0.0.1"};
}

// A port nothing listens on: connections are refused.
boost::asio::ip::tcp::endpoint refused_endpoint() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return {boost::asio::ip::make_address("127.0.0.1"), ntohs(a.sin_port)};
}

uint64_t probes(const PeerHealth& s, ProbeResult r) {
  return s.probes[static_cast<std::size_t>(r)].load();
}

TEST(Checker, MarksAPeerThatRefusesConnectionsDownAfterFallFailures) {
  auto state = std::make_shared<PeerHealth>();
  Checker checker;
  checker.start();
  checker.update(1, {target(refused_endpoint(), state, fast(3))});
  ASSERT_TRUE(eventually([&] { return state->down.load(); }));
  EXPECT_GE(probes(*state, ProbeResult::failure), 3U);
  EXPECT_TRUE(state->checked.load());
}

TEST(Checker, MarksADownPeerUpAfterRiseSuccesses) {
  std::atomic<bool> healthy{false};
  Peer peer([&](int) { return healthy ? kOk : kError; });
  auto state = std::make_shared<PeerHealth>();
  Checker checker;
  checker.start();
  checker.update(1, {target(peer.endpoint(), state, fast(2, 3))});
  ASSERT_TRUE(eventually([&] { return state->down.load(); }));
  EXPECT_EQ(state->last_status.load(), 500);
  healthy = true;
  ASSERT_TRUE(eventually([&] { return !state->down.load(); }));
  EXPECT_GE(state->success_streak.load(), 3U);
  EXPECT_EQ(state->failure_streak.load(), 0U);
}

TEST(Checker, AFailureResetsTheSuccessStreakAndASuccessTheFailureStreak) {
  // F F S F F S ...: never `fall` = 3 failures in a row, so the peer never goes down.
  Peer peer([](int n) { return n % 3 == 2 ? kOk : kError; });
  auto state = std::make_shared<PeerHealth>();
  Checker checker;
  checker.start();
  checker.update(1, {target(peer.endpoint(), state, fast(3, 1))});
  ASSERT_TRUE(eventually([&] { return probes(*state, ProbeResult::success) >= 4; }));
  EXPECT_FALSE(state->down.load());
  EXPECT_LE(state->failure_streak.load(), 2U);
}

TEST(Checker, AProbeWithoutAnAnswerTimesOutAndProbesNeverOverlap) {
  Peer silent([](int) { return std::nullopt; });
  auto state = std::make_shared<PeerHealth>();
  HealthParams p = fast(100);
  p.interval = 5ms;  // far shorter than the timeout: rounds are skipped, not stacked
  p.timeout = 100ms;
  Checker checker;
  checker.start();
  checker.update(1, {target(silent.endpoint(), state, p)});
  ASSERT_TRUE(eventually([&] { return probes(*state, ProbeResult::timeout) >= 3; }));
  // Every connection the peer saw is a probe that has timed out, or the one in flight.
  EXPECT_LE(silent.accepted(), static_cast<int>(probes(*state, ProbeResult::timeout)) + 1);
  EXPECT_EQ(state->last_result.load(), static_cast<int>(ProbeResult::timeout));
}

TEST(Checker, AProbeThatCompletesAfterAGenerationChangeChangesNothing) {
  Peer silent([](int) { return std::nullopt; });
  auto state = std::make_shared<PeerHealth>();
  HealthParams p = fast(1);
  p.timeout = 300ms;
  Checker checker;
  checker.start();
  checker.update(1, {target(silent.endpoint(), state, p)});
  ASSERT_TRUE(eventually([&] { return silent.accepted() == 1; }));
  p.interval = 60s;  // generation 2 keeps the peer and probes it again only much later
  checker.update(2, {target(silent.endpoint(), state, p)});
  // The generation-1 probe times out and closes its connection; with fall = 1 it would have
  // marked the peer down had it counted.
  ASSERT_TRUE(eventually([&] { return silent.closed_by_client() == 1; }));
  EXPECT_FALSE(state->down.load());
  EXPECT_EQ(state->failure_streak.load(), 0U);
  EXPECT_EQ(probes(*state, ProbeResult::timeout), 0U);
  EXPECT_EQ(silent.accepted(), 1);
}

TEST(Checker, AReloadThatKeepsAPeerKeepsItsStateAndStreaks) {
  auto state = std::make_shared<PeerHealth>();
  const auto dead = refused_endpoint();
  Checker checker;
  checker.start();
  checker.update(1, {target(dead, state, fast(2, 50))});
  ASSERT_TRUE(eventually([&] { return state->down.load(); }));
  const uint32_t streak = state->failure_streak.load();
  checker.update(2, {target(dead, state, fast(2, 50))});
  // Still down, and the failure streak goes on from where it was instead of restarting.
  ASSERT_TRUE(eventually([&] { return state->failure_streak.load() > streak; }));
  EXPECT_TRUE(state->down.load());
}

TEST(Checker, StoppingWithAProbeInFlightLeavesThePeerAsItWas) {
  Peer silent([](int) { return std::nullopt; });
  auto state = std::make_shared<PeerHealth>();
  HealthParams p = fast(1);
  p.timeout = 5s;
  {
    Checker checker;
    checker.start();
    checker.update(1, {target(silent.endpoint(), state, p)});
    ASSERT_TRUE(eventually([&] { return silent.accepted() == 1; }));
    checker.stop();  // returns at once: the probe is abandoned, its socket closed
  }
  ASSERT_TRUE(eventually([&] { return silent.closed_by_client() == 1; }));
  EXPECT_FALSE(state->down.load());
  EXPECT_EQ(state->last_result.load(), -1);
}

TEST(Checker, TwoPeersWithTheSameAddressKeepTheirOwnState) {
  Peer peer([](int) { return kOk; });
  auto first = std::make_shared<PeerHealth>();
  auto second = std::make_shared<PeerHealth>();
  HealthParams healthy = fast();
  HealthParams strict = fast(1);
  strict.expect_status = {StatusRange{204, 204}};  // the same server fails this one's check
  Checker checker;
  checker.start();
  checker.update(
      1, {target(peer.endpoint(), first, healthy), target(peer.endpoint(), second, strict)});
  ASSERT_TRUE(eventually([&] { return second->down.load(); }));
  ASSERT_TRUE(eventually([&] { return probes(*first, ProbeResult::success) >= 2; }));
  EXPECT_FALSE(first->down.load());
  EXPECT_EQ(probes(*first, ProbeResult::failure), 0U);
}

TEST(Checker, APoolWithoutHealthChecksIsUpAndUnprobed) {
  auto state = std::make_shared<PeerHealth>();
  Checker checker;
  checker.start();
  checker.update(1, {target(refused_endpoint(), state, fast(1))});
  ASSERT_TRUE(eventually([&] { return state->down.load(); }));
  Target unchecked = target(refused_endpoint(), state, fast());
  unchecked.params.reset();
  checker.update(2, {unchecked});
  ASSERT_TRUE(eventually([&] { return !state->down.load() && !state->checked.load(); }));
}

}  // namespace
}  // namespace floodgate::health
