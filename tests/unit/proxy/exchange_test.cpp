// The exchange's life cycle as a client connection drives it, one request after another:
// begin forgets the previous request, the outcome is decided where it happens and keeps
// whether the client saw bytes, end gives back the pool slot before the stages settle their
// tickets with that outcome, exactly once, and lets the generation go. The attempts are
// embedded, so a retry or a hedge allocates nothing.
//
// Then the exchange running requests with no client connection at all: a fake Downstream
// (what an HTTP/1.1 connection or an HTTP/2 stream would be) takes the response, and backends
// the test plays on loopback sockets answer, fail or stall. The reactor is never started: the
// test thread turns its loop (Poller::run_once) and moves its ManualClock, so every deadline
// (the pool queue's pending_timeout, the hedge delay) fires when the test says, in this order:
// chain -> wait -> select -> attempt -> retry -> hedge -> answer.
#include "floodgate/proxy/exchange.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/http/parser.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/net/poller.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/downstream.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/params.h"
#include "floodgate/upstream/admission.h"
#include "proxy_test_support.h"

namespace floodgate::proxy {
namespace {

// A stage that holds a mark for every exchange it admits and records how it was settled.
class HoldingStage final : public Stage {
 public:
  struct Seen {
    std::vector<Outcome> outcomes;
    std::vector<int64_t> pool_active;  // the pool's active count during each settle()
    const Admission* pool = nullptr;
  };

  explicit HoldingStage(Seen& seen)
      : Stage(StageId::inflight, resilience::Mode::enforce), seen_(seen) {}

  Decision check(Exchange&, Ticket& ticket) const noexcept override {
    ticket.held = true;
    return Decision::go();
  }
  void settle(Ticket&, const Outcome& outcome) const noexcept override {
    seen_.outcomes.push_back(outcome);
    seen_.pool_active.push_back(seen_.pool != nullptr ? seen_.pool->active() : -1);
  }

 private:
  Seen& seen_;
};

class ExchangeLife : public ::testing::Test {
 protected:
  ExchangeLife() {
    seen.pool = &pool;
    std::vector<std::unique_ptr<const Stage>> stages;
    stages.push_back(std::make_unique<HoldingStage>(seen));
    chain = Chain(std::move(stages));
  }

  // Through the chain and admitted to the pool, as a routed request is.
  void admit(Exchange& ex) {
    ASSERT_EQ(chain.run(ex, metrics).verdict, Decision::Verdict::go);
    ex.permit = pool.try_admit();
    ASSERT_TRUE(ex.permit);
  }

  HoldingStage::Seen seen;  // outlives every exchange of a test body
  Admission pool{AdmissionLimits{.max_active = 2}};
  ReactorMetrics metrics{0};
  Chain chain;
  const std::chrono::steady_clock::time_point t0{std::chrono::seconds(100)};
};

TEST_F(ExchangeLife, EmbedsTwoAttemptsSoARetryOrAHedgeAllocatesNothing) {
  static_assert(std::is_same_v<decltype(Exchange::attempts), std::array<Attempt, 2>>);
  Exchange ex;
  EXPECT_EQ(ex.free_attempt(), &ex.attempts[0]);
  EXPECT_EQ(&ex.attempt(), &ex.attempts[0]);
  for (const Attempt& a : ex.attempts) {
    EXPECT_FALSE(a.started());
    EXPECT_EQ(a.backend(), -1);
    EXPECT_FALSE(a.head_ready());
    EXPECT_FALSE(a.request_may_have_left());
    EXPECT_EQ(a.sends(), 0);
  }
}

TEST_F(ExchangeLife, BeginForgetsThePreviousRequest) {
  Exchange ex;
  ex.begin(Ref<ReactorGeneration>(), t0, 10);
  ex.facts.keep_alive = true;
  ex.head_request = ex.request_parsed = true;
  ex.body_bytes = 5;
  ex.body_taken = true;
  ex.bytes_out = 7;
  ex.request_id = "abc";
  ex.decide(Outcome::relayed(200, std::chrono::milliseconds(2)));
  ex.end();

  ex.begin(Ref<ReactorGeneration>(), t0 + std::chrono::seconds(1), 3);
  EXPECT_FALSE(ex.facts.keep_alive);
  EXPECT_FALSE(ex.head_request);
  EXPECT_FALSE(ex.request_parsed);
  EXPECT_EQ(ex.body_bytes, 0u);
  EXPECT_FALSE(ex.body_taken);
  EXPECT_EQ(ex.bytes_in, 3u);  // what was already read of it (pipelined bytes)
  EXPECT_EQ(ex.bytes_out, 0u);
  EXPECT_TRUE(ex.request_id.empty());
  EXPECT_EQ(ex.outcome.status, 0);
  EXPECT_EQ(ex.started, t0 + std::chrono::seconds(1));
  EXPECT_EQ(ex.up, nullptr);
}

TEST_F(ExchangeLife, DecidingKeepsWhetherTheClientAlreadySawBytes) {
  Exchange ex;
  ex.outcome.client_saw_bytes = true;  // a forwarded 103 Early Hints went out
  ex.decide(Outcome::generated(Reason::upstream_timeout));
  EXPECT_TRUE(ex.outcome.client_saw_bytes);
  EXPECT_EQ(ex.outcome.reason, Reason::upstream_timeout);
  EXPECT_EQ(ex.outcome.kind, OutcomeKind::response_timeout);
}

TEST_F(ExchangeLife, EndGivesThePoolSlotBackBeforeTheStagesSettle) {
  Exchange ex;
  admit(ex);
  EXPECT_EQ(pool.active(), 1);
  ex.end();
  ASSERT_EQ(seen.pool_active.size(), 1u);
  EXPECT_EQ(seen.pool_active[0], 0);  // the slot was back when the stage settled
  EXPECT_FALSE(ex.permit);
}

TEST_F(ExchangeLife, EndSettlesWithTheOutcomeDecidedWhereItHappened) {
  Exchange ex;
  admit(ex);
  ex.decide(Outcome::relayed(503, std::chrono::milliseconds(4)));
  ex.end();
  ASSERT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(seen.outcomes[0].status, 503);
  EXPECT_EQ(seen.outcomes[0].kind, OutcomeKind::response);
  EXPECT_EQ(seen.outcomes[0].source, OutcomeSource::upstream);
}

TEST_F(ExchangeLife, EndingTwiceSettlesOnceAndFreesOneSlot) {
  Exchange ex;
  admit(ex);
  ex.decide(Outcome::generated(Reason::upstream_reset));
  ex.end();
  ex.end();  // a close after the response finished: nothing left to settle
  EXPECT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(pool.active(), 0);
}

TEST_F(ExchangeLife, EndResetsTheChainForTheNextRequestOnTheConnection) {
  Exchange ex;
  for (int i = 0; i < 3; ++i) {
    ex.begin(Ref<ReactorGeneration>(), t0, 0);
    admit(ex);
    ex.decide(Outcome::relayed(200 + i, std::chrono::milliseconds(1)));
    ex.end();
    EXPECT_EQ(ex.cursor, 0);
    EXPECT_EQ(ex.tickets.size(), 0u);
  }
  ASSERT_EQ(seen.outcomes.size(), 3u);
  EXPECT_EQ(seen.outcomes[2].status, 202);
  EXPECT_EQ(pool.active(), 0);
}

TEST_F(ExchangeLife, EndLetsTheGenerationGoSoItCanRetire) {
  auto snapshot = std::make_shared<Snapshot>();
  Exchange ex;
  ex.begin(Ref<ReactorGeneration>(new ReactorGeneration(snapshot)), t0, 0);
  EXPECT_EQ(snapshot->reactor_holds.load(), 1u);
  ex.end();
  EXPECT_EQ(snapshot->reactor_holds.load(), 0u);
  EXPECT_FALSE(ex.gen);
}

TEST_F(ExchangeLife, ADestroyedExchangeSettlesWhatItStillHoldsAsAbandoned) {
  {
    Exchange ex;
    admit(ex);
  }
  ASSERT_EQ(seen.outcomes.size(), 1u);
  EXPECT_EQ(seen.outcomes[0].source, OutcomeSource::floodgate);
  EXPECT_EQ(seen.outcomes[0].kind, OutcomeKind::client_aborted);
  EXPECT_EQ(pool.active(), 0);
}

// --- An exchange without a connection --------------------------------------------------------

using namespace std::chrono_literals;
using namespace test_support;  // proxy_test_support.h

// A Downstream that records what the exchange gives it. A flush is taken by the "client" on
// the test's next turn of the loop (FakeClient::take_output), as a socket write completes on
// a later turn; the request has no body.
class FakeClient final : public Downstream {
 public:
  // -- What the test reads.
  Exchange* ex = nullptr;
  int holds = 0;
  bool watching = false;                // watch_while_waiting(true) and not (false) since
  std::optional<Reason> answered;       // respond(): floodgate's own answer
  std::optional<OutcomeSource> cut_by;  // cut()
  int status = 0;                       // the backend's final response head
  std::string body;
  bool body_ended = false;
  bool done = false;  // response_done()
  bool went_away = false;

  // Whether the exchange has given the client all it will: an answer, a whole response, a cut.
  bool finished() const { return answered || cut_by || done; }

  // The request: parsed here as a client connection parses it, its head then in the exchange.
  void parse(std::string_view text, const http::HeadLimits& limits) {
    text_ = text;
    parser_.begin(text_.data(), fields_.get(), limits);
    ASSERT_EQ(parser_.parse_head(text_.size()), http::Parser::Result::head_done);
    ASSERT_EQ(parser_.head_end(), text_.size());
  }
  const http::Parser& parser() const { return parser_; }

  // The client took what was flushed: the attempt hears on_client_drained().
  void take_output() {
    if (!writing_) return;
    writing_ = false;
    buffered_ = 0;
    ex->attempt().on_client_drained();
  }

  // Downstream.
  void hold() noexcept override { ++holds; }
  void release() noexcept override { --holds; }
  bool gone() const noexcept override { return went_away; }
  std::string_view client_ip() const noexcept override { return "192.0.2.7"; }
  const net::TlsSession* tls() const noexcept override { return nullptr; }
  void respond(const Decision& d) override { answered = d.reason; }
  void answer_options() override { answered = Reason::none; }
  void cut(OutcomeSource by) override {
    ex->outcome.cut_short(by);
    cut_by = by;
  }
  void watch_while_waiting(bool on) override { watching = on; }
  void on_request_head_sent(Attempt& a) override { pump_request_body(a); }
  void pump_request_body(Attempt& a) override {
    if (a.sending() || went_away || !a.head_ready()) return;
    if (a.request_buffered()) return a.send_request();
    a.request_done();  // no body: the request is all sent
  }
  Reason response_head(const http::Parser& head, bool interim) override {
    if (!interim) status = head.status();
    return Reason::none;
  }
  Reason tunnel_head(const http::Parser*) override { return Reason::upstream_bad_response; }
  std::size_t body_room() const noexcept override { return kRoom - buffered_; }
  void put_body(const char* data, std::size_t n) override {
    body.append(data, n);
    buffered_ += n;
  }
  void end_body() override { body_ended = true; }
  bool response_pending() const noexcept override { return buffered_ > 0; }
  bool writing() const noexcept override { return writing_; }
  void flush() override {
    if (writing_) return;
    writing_ = true;
    ex->outcome.client_saw_bytes = true;
  }
  void discard_response() noexcept override {
    buffered_ = 0;
    body.clear();
  }
  void response_done() override { done = true; }
  void run_tunnel() override {}

 private:
  static constexpr std::size_t kRoom = 16 * 1024;
  std::string text_;
  std::unique_ptr<http::HeaderField[]> fields_ =
      std::make_unique<http::HeaderField[]>(http::HeadLimits{}.max_headers);
  http::Parser parser_{http::Parser::Kind::request};
  std::size_t buffered_ = 0;
  bool writing_ = false;
};

// The pool admits one request at a time and queues the next for up to 1 s.
ResilienceParams one_at_a_time() {
  ResilienceParams pool;
  pool.max_active_requests = 1;
  pool.max_pending_requests = 4;
  pool.pending_timeout = 1s;
  return pool;
}

class ExchangeRun : public ::testing::Test {
 protected:
  ~ExchangeRun() override {
    for (FakeClient& c : clients_) finish(c);
    // The last turns let closed backend connections leave the loop.
    for (int i = 0; i < 3; ++i) reactor_->poller().run_once(0ms);
  }

  // A reactor (never started) for a pool of backends at `ports`.
  void make_reactor(const std::vector<uint16_t>& ports, const FailurePolicy& failure = {},
                    const ResilienceParams& pool = {}) {
    snap_ = pool_of(ports, 2s, 30s, failure, pool);
    reactor_ = std::make_unique<Reactor>(0, snap_, access_log_, clock_);
  }

  // A new client, owned by the fixture: it outlives the fixture's ending of its exchange.
  FakeClient& new_client() { return clients_.emplace_back(); }

  // The client's request, from an exchange of the reactor's pool through take_head and route,
  // as a connection does once a head is complete.
  Exchange& start(FakeClient& client, std::string_view request = kGet) {
    client.parse(request, snap_->limits);
    Exchange& ex = reactor_->exchanges().acquire(client, conn_);
    client.ex = &ex;
    ex.begin(reactor_->current(), clock_.now(), request.size());
    ex.head = client.parser().request_head();
    if (ex.take_head(reactor_->current())) {
      ex.request_parsed = true;  // no body
      ex.route(false);
    }
    return ex;
  }

  // The client's exchange ends as its connection ends it: logged, its attempts ended, what it
  // holds given back, and the exchange back to the pool.
  void finish(FakeClient& client) {
    if (client.ex == nullptr) return;
    Exchange& ex = *std::exchange(client.ex, nullptr);
    ex.log();
    ex.end_attempts();
    ex.end();
    ex.detach();
  }

  // Turns the loop (each turn waits at most 1 ms of real time for the kernel) until `done`
  // holds or kPatience of real time passes; what clients flushed is taken between turns.
  template <typename Done>
  bool turn_until(Done done) {
    for (const auto deadline = SteadyClock::now() + kPatience; SteadyClock::now() < deadline;) {
      reactor_->poller().run_once(1ms);
      for (FakeClient& c : clients_) {
        if (c.ex != nullptr) c.take_output();
      }
      if (done()) return true;
    }
    return false;
  }
  // A few turns with nothing to wait for: what is due now has run.
  void settle() {
    for (int i = 0; i < 5; ++i) reactor_->poller().run_once(0ms);
  }

  // The backend listening on `listener` gets a connection and reads a request head on it.
  Fd backend_takes_request(const Fd& listener, std::string* head = nullptr) {
    if (!turn_until([&] { return readable_within(listener.get(), 0ms); })) return Fd();
    Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    std::string buf;
    if (!turn_until([&] {
          return readable_within(conn.get(), 0ms) &&
                 read_until(conn.get(), buf, head_complete, 100ms);
        })) {
      return Fd();
    }
    if (head != nullptr) *head = buf;
    return conn;
  }

  // A pool of one request at a time (one_at_a_time): `first` holds its slot at the backend,
  // whose connection is returned, and `second` waits in the queue behind it.
  Fd queue_behind_one(FakeClient& first, FakeClient& second) {
    backend_ = listen_loopback();
    make_reactor({local_port(backend_.get())}, {}, one_at_a_time());
    start(first);
    Fd conn = backend_takes_request(backend_);
    start(second);
    return conn;
  }

  ManualClock clock_;
  Fd backend_;  // queue_behind_one()'s
  AccessLog access_log_{LogParams{.access_log = "off"}, 1};
  std::shared_ptr<const Snapshot> snap_;
  std::unique_ptr<Reactor> reactor_;
  ConnectionFacts conn_{.peer_text = "192.0.2.7", .connection_id = 1};
  std::deque<FakeClient> clients_;  // new_client(): whose exchanges the fixture ends
};

TEST_F(ExchangeRun, APathThatCannotBeRoutedIsAnswered400WithoutABackend) {
  const Fd backend = listen_loopback();
  make_reactor({local_port(backend.get())});
  FakeClient& client = new_client();
  // Every route matches any path; one that cannot be normalised is refused before routing.
  Exchange& ex = start(client, "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(client.answered.has_value());
  EXPECT_EQ(*client.answered, Reason::bad_request);
  EXPECT_EQ(ex.outcome.status, 400);
  EXPECT_FALSE(readable_within(backend.get(), 0ms));  // no backend saw anything
}

TEST_F(ExchangeRun, ARoutedRequestReachesABackendAndItsResponseTheDownstream) {
  const Fd backend = listen_loopback();
  make_reactor({local_port(backend.get())});
  FakeClient& client = new_client();
  Exchange& ex = start(client);
  std::string head;
  const Fd conn = backend_takes_request(backend, &head);
  ASSERT_TRUE(conn);
  EXPECT_EQ(head.rfind("GET / HTTP/1.1\r\n", 0), 0u);
  EXPECT_NE(head.find("X-Forwarded-For: 192.0.2.7"), std::string::npos);  // the downstream's
  EXPECT_EQ(ex.phase, Exchange::Phase::forwarding);
  ASSERT_TRUE(send_all(conn.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return client.finished(); }));
  EXPECT_TRUE(client.done);
  EXPECT_EQ(client.status, 200);
  EXPECT_EQ(client.body, "ok");
  EXPECT_EQ(ex.outcome.status, 200);
  EXPECT_EQ(client.holds, 0);  // nothing of the exchange is pending
}

TEST_F(ExchangeRun, AnExchangeGoesBackToThePoolOnceItsDownstreamLetsGo) {
  const Fd backend = listen_loopback();
  make_reactor({local_port(backend.get())});
  ExchangePool& pool = reactor_->exchanges();
  FakeClient& first = new_client();
  Exchange* taken = &start(first);
  const Fd conn = backend_takes_request(backend);
  ASSERT_TRUE(send_all(conn.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return first.finished(); }));
  EXPECT_EQ(pool.in_use(), 1u);
  finish(first);
  EXPECT_EQ(pool.in_use(), 0u);
  // The next request reuses it, on the backend connection the keep-alive pool kept.
  FakeClient& second = new_client();
  EXPECT_EQ(&start(second), taken);
  std::string buf;
  ASSERT_TRUE(turn_until([&] {
    return readable_within(conn.get(), 0ms) && read_until(conn.get(), buf, head_complete, 100ms);
  }));
  ASSERT_TRUE(send_all(conn.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return second.finished(); }));
  EXPECT_EQ(second.status, 200);
}

TEST_F(ExchangeRun, AQueuedRequestWaitsForAPoolSlotAndGoesOnWhenOneFrees) {
  FakeClient& first = new_client();
  FakeClient& second = new_client();
  const Fd conn = queue_behind_one(first, second);
  ASSERT_TRUE(conn);
  Exchange& queued = *second.ex;
  EXPECT_EQ(queued.phase, Exchange::Phase::queued);
  EXPECT_TRUE(second.watching);  // the downstream watches for its client going away
  EXPECT_EQ(second.holds, 1);    // the parked exchange holds it
  EXPECT_EQ(snap_->upstreams[0]->pool->admission.pending(), 1);

  ASSERT_TRUE(send_all(conn.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return first.finished(); }));
  finish(first);  // its slot goes to the waiter, through the loop's inbox
  std::string buf;
  ASSERT_TRUE(turn_until([&] {
    return readable_within(conn.get(), 0ms) && read_until(conn.get(), buf, head_complete, 100ms);
  }));
  EXPECT_EQ(queued.phase, Exchange::Phase::forwarding);
  EXPECT_FALSE(second.watching);
  ASSERT_TRUE(send_all(conn.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return second.finished(); }));
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.holds, 0);
}

TEST_F(ExchangeRun, AQueuedRequestIsTurnedAwayWhenItsPendingTimeoutPassesOnTheLoopsClock) {
  FakeClient& first = new_client();
  FakeClient& second = new_client();
  const Fd conn = queue_behind_one(first, second);
  ASSERT_TRUE(conn);
  clock_.advance(999ms);
  settle();
  EXPECT_FALSE(second.finished());  // 1 ms before its deadline
  clock_.advance(1ms);
  ASSERT_TRUE(turn_until([&] { return second.finished(); }));
  ASSERT_TRUE(second.answered.has_value());
  EXPECT_EQ(*second.answered, Reason::pending_timeout);
  EXPECT_EQ(second.ex->outcome.status, 503);
  EXPECT_EQ(snap_->upstreams[0]->pool->admission.pending(), 0);
  EXPECT_EQ(second.holds, 0);
  EXPECT_FALSE(first.finished());  // the admitted one carries on
}

TEST_F(ExchangeRun, AClientGoneWhileQueuedGivesUpItsPlaceAndItsHold) {
  FakeClient& first = new_client();
  FakeClient& second = new_client();
  const Fd conn = queue_behind_one(first, second);
  ASSERT_TRUE(conn);
  Exchange& queued = *second.ex;
  second.went_away = true;
  queued.abandon();  // as a closing connection does
  EXPECT_EQ(snap_->upstreams[0]->pool->admission.pending(), 0);
  EXPECT_EQ(second.holds, 0);
  EXPECT_FALSE(second.finished());  // nothing is written to a client that is gone
}

TEST_F(ExchangeRun, AnAttemptWhoseBackendClosesIsRetriedOnTheOtherBackend) {
  std::array<Fd, 2> backends{listen_loopback(), listen_loopback()};
  make_reactor({local_port(backends[0].get()), local_port(backends[1].get())});
  FakeClient& client = new_client();
  Exchange& ex = start(client);
  ASSERT_TRUE(turn_until([&] {
    return readable_within(backends[0].get(), 0ms) || readable_within(backends[1].get(), 0ms);
  }));
  const std::size_t first = readable_within(backends[0].get(), 0ms) ? 0 : 1;
  {
    const Fd conn = backend_takes_request(backends[first]);
    ASSERT_TRUE(conn);
  }  // closed without an answer: a transport failure before the response, and a GET
  const Fd retried = backend_takes_request(backends[1 - first]);
  ASSERT_TRUE(retried);
  EXPECT_EQ(ex.attempts_started(), 2u);
  EXPECT_EQ(ex.attempt().role(), AttemptRole::retry);
  ASSERT_TRUE(send_all(retried.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return client.finished(); }));
  EXPECT_EQ(client.status, 200);
  EXPECT_EQ(client.body, "ok");
}

TEST_F(ExchangeRun, ASlowAttemptIsHedgedAfterTheDelayAndTheFirstResponseHeadWins) {
  std::array<Fd, 2> backends{listen_loopback(), listen_loopback()};
  make_reactor({local_port(backends[0].get()), local_port(backends[1].get())}, hedging_after(50ms));
  FakeClient& client = new_client();
  Exchange& ex = start(client);
  ASSERT_TRUE(turn_until([&] {
    return readable_within(backends[0].get(), 0ms) || readable_within(backends[1].get(), 0ms);
  }));
  const std::size_t first = readable_within(backends[0].get(), 0ms) ? 0 : 1;
  const Fd slow = backend_takes_request(backends[first]);
  ASSERT_TRUE(slow);
  clock_.advance(49ms);
  settle();
  EXPECT_FALSE(readable_within(backends[1 - first].get(), 0ms));  // not before the delay
  EXPECT_EQ(ex.attempts_started(), 1u);
  clock_.advance(1ms);
  const Fd hedge = backend_takes_request(backends[1 - first]);
  ASSERT_TRUE(hedge);
  EXPECT_EQ(ex.attempts[1].role(), AttemptRole::hedge);
  ASSERT_TRUE(send_all(hedge.get(), kOk));
  ASSERT_TRUE(turn_until([&] { return client.finished(); }));
  EXPECT_EQ(client.status, 200);
  EXPECT_EQ(&ex.attempt(), &ex.attempts[1]);  // the hedge's response is the exchange's
  // The slow one's connection is closed, never pooled mid-request.
  EXPECT_FALSE(ex.attempts[0].live());
  EXPECT_TRUE(turn_until([&] { return peer_closed_now(slow.get()); }));
}

TEST_F(ExchangeRun, AFailureNoOtherBackendCanTakeIsAnswered502) {
  const uint16_t nobody = unused_port();
  make_reactor({nobody});
  FakeClient& client = new_client();
  Exchange& ex = start(client);
  ASSERT_TRUE(turn_until([&] { return client.finished(); }));
  ASSERT_TRUE(client.answered.has_value());
  EXPECT_EQ(*client.answered, Reason::upstream_connect_failed);
  EXPECT_EQ(ex.outcome.status, 502);
  EXPECT_EQ(client.holds, 0);
}

}  // namespace
}  // namespace floodgate::proxy
