// The Redis link (include/floodgate/redis/link.h) against a real redis-server of each test's
// own, and a fake server where Redis cannot be made to misbehave: pipelining in order, the
// handshake (AUTH, SELECT, SCRIPT LOAD), NOSCRIPT, cancel, the head-of-line deadline, the
// breaker and its backoff, protocol errors and the limits. Time is a ManualClock moved by the
// test, so every deadline is checked exactly; nothing sleeps to order events.
#include "floodgate/redis/link.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "fake_server.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/net/poller.h"
#include "loop_thread.h"
#include "redis_server.h"

namespace floodgate::redis {
namespace {

using namespace std::chrono_literals;
using testing::FakeServer;
using testing::LoopThread;
using testing::RedisServer;
using Submit = Link::Submit;

constexpr std::string_view kScript =
    "if ARGV[1] == 'fail' then return redis.error_reply('BOOM on purpose') end\n"
    "return {1, redis.call('INCR', KEYS[1])}\n";

// One call of the test script on `key`; what Done saw, for the test to read.
struct TestCall final : Call {
  explicit TestCall(const Clock& clock, std::string key = "k", std::string arg = "ok")
      : Call(&write_evalsha, &on_done), clock(clock), key(std::move(key)), arg(std::move(arg)) {}

  static bool write_evalsha(Call& c, CommandWriter& out, std::string_view sha) noexcept {
    auto& t = static_cast<TestCall&>(c);
    return out.write({"EVALSHA", sha, "1", t.key, t.arg}) != 0;
  }
  static void on_done(Call& c, CallStatus status, const Reply* reply) noexcept {
    auto& t = static_cast<TestCall&>(c);
    ++t.done;
    t.status = status;
    t.at = t.clock.now();
    if (reply != nullptr) {
      t.type = reply->type();
      if (reply->type() == ReplyType::array && reply->count == 2) t.value = reply->items[1].integer;
      if (reply->type() == ReplyType::error) t.error = reply->value.text;
    }
    if (t.then) t.then(t);
  }

  const Clock& clock;
  std::string key;
  std::string arg;
  std::function<void(TestCall&)> then;  // runs inside Done
  int done = 0;
  CallStatus status{};
  std::optional<ReplyType> type;
  int64_t value = -1;  // the INCR's result
  std::string error;
  Clock::time_point at{};
};

class LinkTest : public ::testing::TestWithParam<IoMode> {
 protected:
  void SetUp() override {
    try {
      loop_.emplace(GetParam());
    } catch (const std::system_error&) {
      GTEST_SKIP() << "io_uring is not available on this kernel";
    }
  }
  void TearDown() override {
    if (loop_) {
      loop_->run([&] {
        links_.clear();
        calls_.clear();
      });
    }
    loop_.reset();
  }

  bool start_redis(std::vector<std::string> args = {}) {
    redis_.emplace(std::move(args));
    return redis_->start();
  }
  LinkParams params(uint16_t port) const {
    LinkParams p;
    p.server = {boost::asio::ip::make_address("127.0.0.1"), port};
    p.connect_timeout = 250ms;
    p.command_timeout = 100ms;
    p.script = std::string(kScript);
    return p;
  }
  // A link made (and started) on the loop.
  Link& link(LinkParams p, std::shared_ptr<InflightLimit> inflight = nullptr, bool start = true) {
    return *loop_->run([&] {
      Link* l =
          links_
              .emplace_back(std::make_unique<Link>(loop_->poller(), loop_->wheel(), loop_->clock(),
                                                   std::move(p), std::move(inflight), stats_))
              .get();
      if (start) l->start();
      return l;
    });
  }
  // The SHA-1 of the test script, as a link names it (from a link that never starts).
  std::string sha() {
    return loop_->run([&] {
      LinkStats stats;
      const Link l(loop_->poller(), loop_->wheel(), loop_->clock(), params(1), nullptr, stats);
      return std::string(l.script_sha());
    });
  }
  // Starts `l` and evaluates `c` behind its first connect, in one step (before any reply).
  Submit start_with(Link& l, TestCall& c) {
    return loop_->run([&] {
      l.start();
      return l.eval(c);
    });
  }
  Link& ready_link(LinkParams p) {
    Link& l = link(std::move(p));
    EXPECT_TRUE(wait_ready(l));
    return l;
  }
  TestCall& call(std::string key = "k", std::string arg = "ok") {
    return *loop_->run([&] {
      return calls_
          .emplace_back(std::make_unique<TestCall>(loop_->clock(), std::move(key), std::move(arg)))
          .get();
    });
  }
  std::vector<TestCall*> calls(std::size_t n) {
    std::vector<TestCall*> cs;
    cs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) cs.push_back(&call());
    return cs;
  }
  Submit eval(Link& l, TestCall& c) {
    return loop_->run([&] { return l.eval(c); });
  }
  bool wait_ready(Link& l) {
    return loop_->wait_until([&] { return l.state() == LinkState::ready; });
  }
  bool wait_done(TestCall& c) {
    return loop_->wait_until([&] { return c.done != 0; });
  }
  LinkState state(Link& l) {
    return loop_->run([&] { return l.state(); });
  }
  uint64_t connects() { return stats_.connects.value(); }

  std::optional<LoopThread> loop_;
  std::optional<RedisServer> redis_;
  LinkStats stats_;
  std::deque<std::unique_ptr<TestCall>> calls_;  // the loop's
  std::deque<std::unique_ptr<Link>> links_;      // the loop's
};

// ---- Calls ----

TEST_P(LinkTest, CallsPipelinedAtOnceAreAnsweredInTheOrderSent) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  const std::vector<TestCall*> cs = calls(300);
  const int done_inside_eval = loop_->run([&] {
    for (TestCall* c : cs) EXPECT_EQ(l.eval(*c), Submit::accepted);
    int done = 0;
    for (TestCall* c : cs) done += c->done;
    return done;
  });
  EXPECT_EQ(done_inside_eval, 0) << "Done ran inside eval()";
  ASSERT_TRUE(wait_done(*cs.back()));
  for (std::size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(cs[i]->status, CallStatus::reply);
    EXPECT_EQ(cs[i]->value, static_cast<int64_t>(i + 1));  // INCR in Redis's order, matched FIFO
  }
  EXPECT_FALSE(loop_->run([&] { return l.busy(); }));
  EXPECT_EQ(stats_.inflight.load(), 0);
  EXPECT_EQ(stats_.latency.count(), cs.size());
  EXPECT_EQ(stats_.ready.load(), 1);
}

TEST_P(LinkTest, CallsMadeWhileTheFirstConnectIsUnderWayAreSentAfterTheHandshake) {
  ASSERT_TRUE(start_redis());
  LinkParams p = params(redis_->port());
  p.max_pending = 2;  // the handshake's commands do not count
  p.db = 1;
  Link& l = link(p, nullptr, false);
  TestCall& a = call();
  TestCall& b = call();
  loop_->run([&] {
    l.start();
    EXPECT_EQ(l.state(), LinkState::connecting);
    EXPECT_EQ(l.eval(a), Submit::accepted);
    EXPECT_EQ(l.eval(b), Submit::accepted);
  });
  ASSERT_TRUE(wait_done(b));
  EXPECT_EQ(a.value, 1);
  EXPECT_EQ(b.value, 2);
  EXPECT_EQ(stats_.connects.value(), 1u);
}

TEST_P(LinkTest, ACallQueuedBehindASlowHandshakeHasCommandTimeoutFromTheLinkBeingReady) {
  FakeServer fake("$40\r\n" + sha() + "\r\n", {""});  // the call stalls
  fake.hold(true);
  Link& l = link(params(fake.port()), nullptr, false);
  TestCall& c = call();
  ASSERT_EQ(start_with(l, c), Submit::accepted);
  loop_->advance(200ms);  // within connect_timeout
  fake.hold(false);
  ASSERT_TRUE(wait_ready(l));
  loop_->advance(100ms - LoopThread::kResolution);
  EXPECT_EQ(loop_->run([&] { return c.done; }), 0);
  loop_->advance(LoopThread::kResolution);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::timeout);
}

TEST_P(LinkTest, AnErrorReplyReachesDoneAsAReplyAndTheLinkStaysReady) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  TestCall& c = call("k", "fail");
  ASSERT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::reply);
  EXPECT_EQ(c.type, ReplyType::error);
  EXPECT_EQ(c.error.rfind("BOOM", 0), 0u) << c.error;
  EXPECT_EQ(stats_.errors.value(), 1u);
  EXPECT_EQ(state(l), LinkState::ready);
}

TEST_P(LinkTest, ASteadyStreamOfCallsAllocatesNothing) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  const std::vector<TestCall*> cs = calls(64);
  loop_->run([] { count_heap_allocations_on_this_thread(); });
  for (int round = 0; round < 3; ++round) {  // the first round warms up (lazy statics)
    const uint64_t before = counted_heap_allocations();
    loop_->run([&] {
      for (TestCall* c : cs) {
        c->done = 0;
        EXPECT_EQ(l.eval(*c), Submit::accepted);
      }
    });
    ASSERT_TRUE(wait_done(*cs.back()));
    if (round > 0) {
      EXPECT_EQ(counted_heap_allocations(), before) << "round " << round;
    }
  }
}

// ---- The handshake ----

TEST_P(LinkTest, AuthenticatesWithThePasswordAndTheUserName) {
  ASSERT_TRUE(start_redis({"--requirepass", "s3cret"}));
  LinkParams p = params(redis_->port());
  p.password = "s3cret";
  Link& plain = ready_link(p);
  p.username = "default";
  Link& named = ready_link(p);
  TestCall& a = call();
  TestCall& b = call();
  ASSERT_EQ(eval(plain, a), Submit::accepted);
  ASSERT_EQ(eval(named, b), Submit::accepted);
  ASSERT_TRUE(wait_done(a) && wait_done(b));
  EXPECT_EQ(a.status, CallStatus::reply);
  EXPECT_EQ(b.status, CallStatus::reply);
  EXPECT_EQ(a.value + b.value, 3);
}

TEST_P(LinkTest, AWrongPasswordFailsTheHandshakeAndTheCallsWaitingForItWithError) {
  ASSERT_TRUE(start_redis({"--requirepass", "s3cret"}));
  LinkParams p = params(redis_->port());
  p.password = "wrong";
  Link& l = link(p, nullptr, false);
  TestCall& c = call();
  ASSERT_EQ(start_with(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::error);
  EXPECT_EQ(state(l), LinkState::backoff);
  EXPECT_EQ(stats_.connect_failures.value(), 1u);
  EXPECT_EQ(stats_.ready.load(), 0);
}

TEST_P(LinkTest, SelectsTheConfiguredDatabase) {
  ASSERT_TRUE(start_redis());
  LinkParams p = params(redis_->port());
  p.db = 3;
  Link& l = ready_link(p);
  TestCall& c = call("in-db-3");
  ASSERT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.value, 1);
  EXPECT_EQ(testing::pipeline(redis_->port(), {{"SELECT", "3"}, {"GET", "in-db-3"}}),
            "$1\r\n1\r\n");
  EXPECT_EQ(testing::pipeline(redis_->port(), {{"GET", "in-db-3"}}), "$-1\r\n");
}

// ---- NOSCRIPT ----

TEST_P(LinkTest, AFlushedScriptIsLoadedAgainAndTheCallSentAgain) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  ASSERT_EQ(testing::pipeline(redis_->port(), {{"SCRIPT", "FLUSH"}}), "+OK\r\n");
  TestCall& c = call();
  ASSERT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::reply);
  EXPECT_EQ(c.value, 1);
  EXPECT_EQ(stats_.noscript.value(), 1u);
  EXPECT_EQ(stats_.script_loads.value(), 2u);  // the handshake's and the reload
}

TEST_P(LinkTest, CallsSentBeforeTheReloadShareItAndStayInOrder) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  ASSERT_EQ(testing::pipeline(redis_->port(), {{"SCRIPT", "FLUSH"}}), "+OK\r\n");
  const std::vector<TestCall*> cs = calls(5);
  loop_->run([&] {
    for (TestCall* c : cs) EXPECT_EQ(l.eval(*c), Submit::accepted);
  });
  ASSERT_TRUE(wait_done(*cs.back()));
  for (std::size_t i = 0; i < cs.size(); ++i) EXPECT_EQ(cs[i]->value, static_cast<int64_t>(i + 1));
  EXPECT_EQ(stats_.noscript.value(), 5u);
  EXPECT_EQ(stats_.script_loads.value(), 2u);
}

TEST_P(LinkTest, NoscriptAgainAfterTheReloadFailsTheCallWithError) {
  FakeServer fake("$40\r\n" + sha() + "\r\n", {"-NOSCRIPT No matching script.\r\n"});
  Link& l = ready_link(params(fake.port()));
  TestCall& c = call();
  ASSERT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::error);
  EXPECT_EQ(stats_.noscript.value(), 2u);
  EXPECT_EQ(stats_.script_loads.value(), 2u);  // the handshake's and one reload
  EXPECT_EQ(state(l), LinkState::ready);
}

TEST_P(LinkTest, AResentCallKeepsItsDeadlineBehindLaterCalls) {
  // The first EVALSHA gets NOSCRIPT, then Redis stalls.
  FakeServer fake("$40\r\n" + sha() + "\r\n", {"-NOSCRIPT No matching script.\r\n", ""});
  Link& l = ready_link(params(fake.port()));
  TestCall& first = call();
  TestCall& later = call();
  const Clock::time_point sent = loop_->run([&] {
    const Clock::time_point t = loop_->clock().now();
    EXPECT_EQ(l.eval(first), Submit::accepted);
    loop_->clock().advance(50ms);                // no tick can come inside this step
    EXPECT_EQ(l.eval(later), Submit::accepted);  // due at t + 150 ms, ahead of the resend
    return t;
  });
  ASSERT_TRUE(loop_->wait_until([&] { return stats_.noscript.value() == 1; }));
  loop_->advance(50ms - LoopThread::kResolution);
  EXPECT_EQ(loop_->run([&] { return first.done; }), 0);
  loop_->advance(LoopThread::kResolution);
  ASSERT_TRUE(wait_done(first));
  EXPECT_EQ(first.status, CallStatus::timeout);
  EXPECT_LE(first.at - sent, 100ms + LoopThread::kResolution);
}

// ---- Cancel and re-entrancy ----

TEST_P(LinkTest, ACancelledCallsReplyIsDroppedAndItsDoneNeverRuns) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  TestCall& a = call();
  TestCall& b = call();
  TestCall& c = call();
  loop_->run([&] {
    l.eval(a);
    l.eval(b);
    l.eval(c);
    l.cancel(b);
    EXPECT_FALSE(b.pending());
  });
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(b.done, 0);
  EXPECT_EQ(c.value, 3);  // b was sent all the same
  EXPECT_TRUE(loop_->wait_until([&] { return !l.busy(); }));
  EXPECT_EQ(stats_.inflight.load(), 0);
}

TEST_P(LinkTest, ADoneMayStartAnotherCallOnTheLinkAndCancelAPendingOne) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  TestCall& a = call();
  TestCall& b = call();
  TestCall& next = call();
  a.then = [&](TestCall&) {
    EXPECT_EQ(l.eval(next), Submit::accepted);
    l.cancel(b);
  };
  loop_->run([&] {
    l.eval(a);
    l.eval(b);
  });
  ASSERT_TRUE(wait_done(next));
  EXPECT_EQ(next.status, CallStatus::reply);
  EXPECT_EQ(next.value, 3);
  EXPECT_EQ(b.done, 0);
}

TEST_P(LinkTest, ADoneThatClosesTheLinkWhileCallsFailEndsEachOtherCallOnce) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->pause();
  const std::vector<TestCall*> cs = calls(3);
  cs[0]->then = [&](TestCall&) { l.close(); };
  loop_->run([&] {
    for (TestCall* c : cs) l.eval(*c);
  });
  loop_->advance(100ms);
  ASSERT_TRUE(wait_done(*cs.back()));
  EXPECT_EQ(cs[0]->status, CallStatus::timeout);
  for (TestCall* c : cs) EXPECT_EQ(c->done, 1);
  EXPECT_EQ(cs[1]->status, CallStatus::unavailable);  // completed by close()
  EXPECT_EQ(state(l), LinkState::idle);
  EXPECT_FALSE(loop_->run([&] { return l.busy(); }));
  redis_->resume();
}

// ---- The deadline ----

TEST_P(LinkTest, AStalledRedisTimesOutEveryCallInFlightWithinATickOfCommandTimeout) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->pause();
  const std::vector<TestCall*> cs = calls(5);
  const Clock::time_point sent = loop_->run([&] {
    for (TestCall* c : cs) EXPECT_EQ(l.eval(*c), Submit::accepted);
    return loop_->clock().now();
  });
  loop_->advance(100ms - LoopThread::kResolution);
  EXPECT_EQ(loop_->run([&] { return cs.front()->done; }), 0);
  loop_->advance(LoopThread::kResolution);
  ASSERT_TRUE(wait_done(*cs.back()));
  for (TestCall* c : cs) {
    EXPECT_EQ(c->status, CallStatus::timeout);
    EXPECT_LE(c->at - sent, 100ms + LoopThread::kResolution);
  }
  EXPECT_EQ(stats_.timeouts.value(), 5u);
  EXPECT_EQ(stats_.disconnects.value(), 1u);
  redis_->resume();
}

TEST_P(LinkTest, AfterAStallCallsAreRefusedAtOnceUntilAProbeSucceeds) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->pause();
  TestCall& stalled = call();
  ASSERT_EQ(eval(l, stalled), Submit::accepted);
  loop_->advance(100ms);
  ASSERT_TRUE(wait_done(stalled));
  // The probe reconnects at once; the kernel accepts for the stopped server, which never answers.
  EXPECT_EQ(state(l), LinkState::connecting);
  EXPECT_EQ(connects(), 2u);
  TestCall& refused = call();
  EXPECT_EQ(eval(l, refused), Submit::unavailable);
  loop_->advance(250ms);  // connect_timeout: the breaker opens
  EXPECT_EQ(state(l), LinkState::backoff);
  EXPECT_EQ(eval(l, refused), Submit::unavailable);
  EXPECT_EQ(connects(), 2u);
  EXPECT_EQ(refused.done, 0);
  redis_->resume();
  loop_->advance(100ms);  // the backoff: one probe
  ASSERT_TRUE(wait_ready(l));
  EXPECT_EQ(connects(), 3u);
  TestCall& after = call();
  ASSERT_EQ(eval(l, after), Submit::accepted);
  ASSERT_TRUE(wait_done(after));
  EXPECT_EQ(after.status, CallStatus::reply);
}

// ---- The breaker ----

TEST_P(LinkTest, AKilledRedisFailsTheCallsInFlightAndOpensTheBreaker) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->pause();  // so that the calls are in flight when it dies
  TestCall& c = call();
  ASSERT_EQ(eval(l, c), Submit::accepted);
  redis_->stop();
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::unavailable);
  // Redis closed a ready connection: one reconnect at once, refused, and the breaker opens.
  ASSERT_TRUE(loop_->wait_until([&] { return l.state() == LinkState::backoff; }));
  EXPECT_EQ(connects(), 2u);
  EXPECT_EQ(stats_.disconnects.value(), 1u);
  EXPECT_EQ(stats_.connect_failures.value(), 1u);
  TestCall& refused = call();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(eval(l, refused), Submit::unavailable);
  loop_->advance(99ms);
  EXPECT_EQ(eval(l, refused), Submit::unavailable);
  EXPECT_EQ(connects(), 2u) << "a refused eval() must not connect";
  EXPECT_EQ(stats_.refused.value(), 11u);
  loop_->advance(1ms);
  EXPECT_EQ(connects(), 3u);  // the probe
  EXPECT_TRUE(loop_->wait_until([&] { return stats_.connect_failures.value() == 2; }));
  EXPECT_EQ(refused.done, 0);
}

TEST_P(LinkTest, TheBackoffStartsAt100msAndDoublesUpTo5s) {
  Link& l = link(params(testing::free_port()));  // nothing listens
  ASSERT_TRUE(loop_->wait_until([&] { return l.state() == LinkState::backoff; }));
  for (const auto backoff : {100ms, 200ms, 400ms, 800ms, 1600ms, 3200ms, 5000ms, 5000ms}) {
    const uint64_t before = connects();
    loop_->advance(backoff - 1ms);
    EXPECT_EQ(connects(), before) << backoff.count();
    loop_->advance(1ms);
    EXPECT_EQ(connects(), before + 1) << backoff.count();
    ASSERT_TRUE(loop_->wait_until([&] { return l.state() == LinkState::backoff; }));
  }
}

TEST_P(LinkTest, ARedisRestartedOnTheSamePortIsReachedAfterTheBackoff) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->stop();
  ASSERT_TRUE(loop_->wait_until([&] { return l.state() == LinkState::backoff; }));
  ASSERT_TRUE(redis_->start());
  EXPECT_EQ(state(l), LinkState::backoff);
  loop_->advance(100ms);
  ASSERT_TRUE(wait_ready(l));
  TestCall& c = call();
  ASSERT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::reply);
  EXPECT_EQ(stats_.ready.load(), 1);
}

TEST_P(LinkTest, CloseCompletesThePendingCallsAsUnavailableAndStartConnectsAgain) {
  ASSERT_TRUE(start_redis());
  Link& l = ready_link(params(redis_->port()));
  redis_->pause();
  TestCall& c = call();
  ASSERT_EQ(eval(l, c), Submit::accepted);
  loop_->run([&] {
    l.close();
    EXPECT_EQ(c.done, 1);
    EXPECT_EQ(c.status, CallStatus::unavailable);
    EXPECT_EQ(l.state(), LinkState::idle);
    EXPECT_EQ(l.eval(c), Submit::unavailable);
  });
  redis_->resume();
  loop_->run([&] { l.start(); });
  ASSERT_TRUE(wait_ready(l));
}

// ---- Protocol errors ----

TEST_P(LinkTest, GarbageForAHandshakeFailsItWithErrorAndTheLinkConnectsAgainAfterTheBackoff) {
  FakeServer fake("?garbage\r\n", {});
  Link& l = link(params(fake.port()), nullptr, false);
  TestCall& c = call();
  ASSERT_EQ(start_with(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.status, CallStatus::error);
  EXPECT_EQ(state(l), LinkState::backoff);
  EXPECT_EQ(stats_.connect_failures.value(), 1u);
  loop_->advance(100ms);
  EXPECT_EQ(connects(), 2u);
  EXPECT_TRUE(loop_->wait_until([&] { return fake.accepted() == 2; }));
}

TEST_P(LinkTest, AReplyThatBreaksTheProtocolFailsTheCallsInFlightAndTheLinkProbes) {
  FakeServer fake("$40\r\n" + sha() + "\r\n", {"*1\r\n*1\r\n:1\r\n"});  // a nested array
  Link& l = ready_link(params(fake.port()));
  const uint64_t before = connects();
  TestCall& a = call();
  TestCall& b = call();
  TestCall& during = call();
  Submit seen = Submit::accepted;
  a.then = [&](TestCall&) { seen = l.eval(during); };
  loop_->run([&] {
    l.eval(a);
    l.eval(b);
  });
  ASSERT_TRUE(wait_done(b));
  EXPECT_EQ(a.status, CallStatus::error);
  EXPECT_EQ(b.status, CallStatus::error);
  EXPECT_EQ(seen, Submit::unavailable);  // probing: refused at once
  EXPECT_EQ(stats_.disconnects.value(), 1u);
  EXPECT_EQ(connects(), before + 1);
  EXPECT_TRUE(wait_ready(l));  // the fake answers the probe's handshake
}

// ---- Limits ----

TEST_P(LinkTest, TheProcessInflightLimitIsSharedByLinksAndRefusesWithBusy) {
  ASSERT_TRUE(start_redis());
  auto limit = std::make_shared<InflightLimit>(2);
  Link& one = link(params(redis_->port()), limit);
  Link& two = link(params(redis_->port()), limit);
  ASSERT_TRUE(wait_ready(one) && wait_ready(two));
  redis_->pause();
  TestCall& a = call();
  TestCall& b = call();
  TestCall& c = call();
  EXPECT_EQ(eval(one, a), Submit::accepted);
  EXPECT_EQ(eval(two, b), Submit::accepted);
  EXPECT_EQ(eval(two, c), Submit::busy);
  EXPECT_EQ(limit->current.load(), 2u);
  redis_->resume();
  ASSERT_TRUE(wait_done(a) && wait_done(b));
  EXPECT_EQ(limit->current.load(), 0u);
  EXPECT_EQ(eval(one, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
}

TEST_P(LinkTest, MaxPendingRefusesWithBusyUntilACallCompletes) {
  ASSERT_TRUE(start_redis());
  LinkParams p = params(redis_->port());
  p.max_pending = 2;
  Link& l = ready_link(p);
  redis_->pause();
  TestCall& a = call();
  TestCall& b = call();
  TestCall& c = call();
  EXPECT_EQ(eval(l, a), Submit::accepted);
  EXPECT_EQ(eval(l, b), Submit::accepted);
  EXPECT_EQ(eval(l, c), Submit::busy);
  EXPECT_EQ(eval(l, a), Submit::busy);  // pending already
  EXPECT_EQ(stats_.refused.value(), 2u);
  redis_->resume();
  ASSERT_TRUE(wait_done(b));
  EXPECT_EQ(eval(l, c), Submit::accepted);
  ASSERT_TRUE(wait_done(c));
  EXPECT_EQ(c.value, 3);
}

INSTANTIATE_TEST_SUITE_P(BothInterfaces, LinkTest,
                         ::testing::Values(IoMode::epoll, IoMode::io_uring),
                         [](const ::testing::TestParamInfo<IoMode>& info) {
                           return std::string(info.param == IoMode::epoll ? "epoll" : "io_uring");
                         });

}  // namespace
}  // namespace floodgate::redis
