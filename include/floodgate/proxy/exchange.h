// An exchange: one request's life, from its first byte to its access log record, whatever
// protocol brought it (its Downstream, downstream.h). It pins the generation the request runs
// on and holds what the request is (its head, facts, route and pool), its state in the stage
// chain (the request view the stages read, the tickets they hold, what a shadow-mode stage
// would have answered), its pool slot, its outcome, and its attempts at backends.
//
// And it runs the request (src/proxy/exchange.cpp): the route's chain, the waits (it is the
// WaitOwner: the pool's queue, the quota's Redis reply), backend selection, the retry after a
// failed attempt, the hedge beside a slow one and which of the two answers (claim), the
// classification of a failure into an answer or a cut, and the access record. It has its own
// timers: the wait's deadline and the hedge's delay.
//
// Its phases (in the chain, queued, forwarding, answered, tunnel) are its own; the
// connection's (idle, reading a head, closing) are the downstream's.
//
// An exchange embeds two attempts, so a retry or a hedge allocates nothing: the first goes to
// the backend selection chose, the second is a retry after it failed or a hedge beside it.
//
// Thread-safety: reactor thread only. Lifetime: exchanges come from their reactor's pool
// (ExchangePool, below): a downstream takes one (attach), begins it for each request it runs
// on it, and lets go of it when it needs it no more (detach: an HTTP/1.1 connection when it
// ends); the exchange goes back to the pool when nothing of it is pending any more
// (hold/release: a completion, a timer's work, a resolution). While it is held it holds its
// downstream too.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/core/clock.h"
#include "floodgate/core/ip_range.h"
#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/http/request_head.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/net/poller.h"
#include "floodgate/proxy/attempt.h"
#include "floodgate/proxy/quota_stage.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/inflight.h"
#include "floodgate/resilience/request_view.h"
#include "floodgate/routing/match_path.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

class Chain;
class Downstream;
class ExchangePool;
class Reactor;
struct Upstream;
struct FailurePolicy;

// Whom a wait's completion goes to: the exchange that waits.
class WaitOwner {
 public:
  // On the exchange's reactor: the wait's completion is here (Wait::result).
  virtual void on_wait_over() = 0;

 protected:
  ~WaitOwner() = default;
};

// The one way an exchange waits for a stage: the pool's queue and the quota's Redis reply.
// A stage that answers wait (Chain::run records which, and in which chain) has started
// something that completes later; the owner parks the exchange (holding itself, watching its
// client, the deadline on its timer). Exactly one of these ends the wait:
//   - complete(result), from whichever thread decided (another reactor releasing a pool slot,
//     the main thread applying a reload's limits, the reactor's Redis link): handed to the
//     exchange's reactor through the poller's inbox (no allocation, no lock), then the owner's
//     on_wait_over() gives it to the stage's resume();
//   - the deadline, the client going away or the generation retiring: the owner asks the
//     stage to cancel(). When the cancel wins, the owner answers at once; when it loses, a
//     completion is already on its way: the owner records why it gave up (gave_up, or
//     abandoned when the client is gone), and resume() gives back what the completion brings.
// So nothing a stage grants is leaked, or used by an exchange that gave up on it.
struct Wait final : net::RemoteTask {
  Wait() noexcept : RemoteTask(&Wait::delivered) {}

  // Any thread: the wait is over with `value` (the stage's own code: an AdmitStatus for the
  // pool). After it the exchange belongs to its reactor again.
  void complete(uint32_t value) noexcept {
    result = value;
    poller->send(*this);
  }

  const Stage* stage = nullptr;  // waited for; nullptr when the exchange is not waiting
  const Chain* chain = nullptr;  // the chain the stage is in, resumed after it
  Poller* poller = nullptr;      // the exchange's reactor's
  WaitOwner* owner = nullptr;
  uint32_t result = 0;                            // written by complete() before the handoff
  Reason gave_up = Reason::none;                  // the exchange gave up as a completion came
  bool abandoned = false;                         // the client went away as a completion came
  std::chrono::steady_clock::time_point since{};  // parked at
  Reason at_deadline = Reason::none;              // the answer when the deadline passes
  // The pool queue's node (upstream/admission.h), completing into complete().
  AdmissionWaiter pool_node{&Wait::pool_decided, this};

 private:
  static void delivered(net::RemoteTask& task) { static_cast<Wait&>(task).owner->on_wait_over(); }
  static void pool_decided(void* wait, AdmitStatus status) noexcept {
    static_cast<Wait*>(wait)->complete(static_cast<uint32_t>(status));
  }
};

// What the stages' keys (request_key.h) and the access log know of the connection a request
// came on: the downstream connection owns it, and every exchange it runs points to it.
struct ConnectionFacts {
  IpAddress peer{};
  std::string_view peer_text;  // the peer's address as the access log writes it
  uint64_t connection_id = 0;  // unique in the process (cid)
  // The SHA-256 identity of peer_ip (a client rule's default key), worked out by the first
  // request of the connection that needs it: every later one reuses it.
  resilience::Digest peer_digest{};
  bool peer_digest_known = false;
};

class Exchange final : public WaitOwner {
 public:
  // Where the exchange is in its own life (the connection's phases are the downstream's).
  enum class Phase : uint8_t {
    none,        // no request yet, or its head is being read
    chain,       // running the stages
    queued,      // waiting for a stage (the pool's queue, the quota's reply)
    forwarding,  // at a backend (or connecting a CONNECT tunnel)
    answered,    // floodgate's own answer is being written
    tunnel,      // relaying an upgrade's or a CONNECT's bytes
  };

  // The generation the request runs on (pinned once its head is complete; on_head re-pins).
  // First, so that it is destroyed last: the stages that tickets and a wait point to are its.
  Ref<ReactorGeneration> gen;

  // -- The stage chain's state (stage.h).
  resilience::RequestView request;     // what the stages read
  int8_t inflight_exempt = -1;         // exempt_from_inflight(), once known (-1: not yet)
  TicketBook tickets;                  // what they hold until the exchange ends
  uint8_t cursor = 0;                  // the next stage to run
  Reason would_reject = Reason::none;  // the first shadow-mode refusal
  StageId would_reject_stage = StageId::count_;
  const std::string* rate_limited_by = nullptr;  // the rule that answered 429 rate_limited
  // The quota policy that answered, or recorded a shadow denial or a degraded decision.
  const std::string* quota_by = nullptr;
  QuotaCall quota;                    // the quota stage's progress and its Redis call
  QuotaLinks* quota_links = nullptr;  // the reactor's links to Redis

  // -- The request.
  http::RequestFacts facts;
  const Upstream* up = nullptr;  // its pool, once routed (part of gen)
  std::chrono::steady_clock::time_point started{};
  std::string_view request_id;  // X-Request-Id as received, or request_id_buf
  char request_id_buf[32] = {};
  bool head_request = false;    // HEAD: the response has no body
  bool request_parsed = false;  // the request parser saw the end of the message
  uint64_t body_bytes = 0;      // request body bytes forwarded
  bool body_taken = false;      // a byte of the body left the client's buffer for an attempt
  uint64_t bytes_in = 0;        // bytes read from the client for this request
  uint64_t bytes_out = 0;       // bytes written to the client for this request
  uint64_t head_bytes_out = 0;  // of them, response heads (1xx included): the rest is body

  // -- The pool slot, held from admission until the backend's part of the exchange is over
  // (release_admission; a tunnel's until it closes).
  Permit permit;
  // -- Waiting for a stage (the pool's queue).
  Wait wait;
  // -- The reactor's clock (injected: a ManualClock in tests). Every time the request path
  // reads (latencies, queue waits, the quota's fallback windows) comes from it.
  const Clock* clock = &Clock::steady();
  std::chrono::steady_clock::time_point now() const noexcept { return clock->now(); }
  // -- The reactor's metrics shard, where stages count what they decide.
  ReactorMetrics* metrics = nullptr;
  uint32_t reactor_index = 0;  // its index (the per-reactor shards stages keep)

  // -- The request's head (request_head.h), whatever protocol brought it: complete() once the
  // head is parsed. Its views stay valid until the exchange ends.
  http::RequestHead head;
  // The normalised path routes match (request.path views it; unused for OPTIONS * and
  // CONNECT), worked out by take_head.
  MatchPath match_path;
  // -- Who sends it, for the rate limits' key sources (request_key.h): its connection's.
  ConnectionFacts* conn = nullptr;

  // -- How the exchange ended, set where it is decided (core/outcome.h).
  Outcome outcome;

  // -- Its tries at backends.
  std::array<Attempt, 2> attempts;

  Phase phase = Phase::none;

  Exchange();
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Binds the exchange to its reactor, once (its pool does).
  void bind(Reactor& reactor, ExchangePool* pool) noexcept;
  // A downstream takes the exchange for its next request (ExchangePool::acquire), and lets go
  // of it when the request is over and ended (end, or abandon): it goes back to its pool once
  // nothing of it is pending.
  void attach(Downstream& downstream, ConnectionFacts& conn) noexcept;
  void detach() noexcept;
  // Keeps the exchange, and its downstream, while a completion, a timer's work or a resolution
  // is on its way to it.
  void hold() noexcept;
  void release() noexcept;
  Reactor& reactor() const noexcept { return *reactor_; }
  // The generation the request runs on, or the reactor's current one when none is pinned.
  const Snapshot& snapshot() const noexcept;
  Downstream& downstream() const noexcept { return *downstream_; }

  // -- Running the request (exchange.cpp).
  // `head` is in: the request moves to the generation `current` now, and its facts and the
  // path routes match are worked out. False when the head is refused (answered already).
  bool take_head(const Ref<ReactorGeneration>& current);
  // Then the request view the stages read (`early_data`: the head came in TLS 0-RTT data),
  // the front of the chain, routing, the route's chain and a backend.
  void route(bool early_data);
  // floodgate answers the request itself: the outcome is decided, then the downstream writes
  // the answer (its prebuilt bytes, or one built now).
  void answer(const Decision& d);
  // The bytes of floodgate's answer for `d` as HTTP/1.1 carries it (`close`: with
  // Connection: close): the stage's prebuilt answer, the pool's with its Retry-After for a pool
  // reason, the plain one for the reason, or, when its Retry-After or header lines are known
  // only now, one built into [buf, buf + cap) (nullptr, or too small: the plain one).
  std::string_view answer_bytes(const Decision& d, bool close, char* buf, std::size_t cap) const;
  void answer(Reason reason) { answer(Decision::stop(reason)); }
  // Attempt `failed` failed for `reason`. When the other attempt is still live (a hedge), that
  // one goes on alone. Otherwise a retry when the rules allow it, else the failure is answered
  // when the client has seen nothing of a response yet, or the request is cut short.
  void on_attempt_failed(Attempt& failed, Reason reason);
  // Attempt `a` has the exchange's response (its first byte is about to go to the client): the
  // other attempt, if still live, is cancelled (hedging: the first response head wins).
  void claim(Attempt& a);
  // The backend's part is over (its response read to the end and wholly in the downstream's
  // output, its connection given back): the pool slot and the stages' tickets go back now,
  // while the client may still be reading (release_admission).
  void on_backend_done() noexcept { release_admission(); }
  // The attempt holds all it can of the response and waits on the client alone: the client
  // sets the pace (release_tickets).
  void on_client_paced() noexcept { release_tickets(); }
  // The downstream is closing: a wait in progress is given up (abandoned), the attempts end,
  // and what the exchange holds is settled; the generation stays pinned while a completion
  // may still come. True when the request was in progress (it is logged as cut short).
  void abandon() noexcept;
  // The generation `retired` is being forced out and `current` serves: a waiting exchange on
  // it is turned away (generation_retired); one whose pool `current` no longer has is cut.
  void on_generation_retired(uint64_t retired, const Snapshot& current);
  // Ends both attempts (one still running is abandoned, never pooled).
  void end_attempts() noexcept;
  // The access record and the request metrics, once the exchange is over.
  void log();

  // Whether the request is outside the in-flight accounting ([resilience.inflight]
  // exemptions), which the front cap and every local protection stage ask: decided once.
  bool exempt_from_inflight(const resilience::InflightExemptions& exemptions) noexcept {
    if (inflight_exempt < 0) inflight_exempt = exemptions.exempt(request) ? 1 : 0;
    return inflight_exempt != 0;
  }

  // Records how the exchange ends, keeping whether response bytes (a forwarded 1xx) already
  // reached the client.
  void decide(const Outcome& o) noexcept {
    const bool saw = outcome.client_saw_bytes;
    outcome = o;
    outcome.client_saw_bytes = saw;
  }

  // Which attempt carries the exchange's response: the first, then its retry, or a hedge that
  // won. The client side (body pump, output drained) talks to it.
  uint8_t current = 0;
  bool hedge_settled = false;  // a hedged exchange's winner was counted

  Attempt& attempt() noexcept { return attempts[current]; }
  const Attempt& attempt() const noexcept { return attempts[current]; }
  Attempt& other(const Attempt& a) noexcept { return attempts[&a == &attempts[0] ? 1 : 0]; }
  uint8_t index_of(const Attempt& a) const noexcept {
    return static_cast<uint8_t>(&a - attempts.data());
  }
  // Attempts started for this request (1 or 2 once it reached a backend).
  unsigned attempts_started() const noexcept {
    return (attempts[0].started() ? 1U : 0U) + (attempts[1].started() ? 1U : 0U);
  }
  // An attempt that has not started, or nullptr when both are in use.
  Attempt* free_attempt() noexcept {
    for (Attempt& a : attempts) {
      if (!a.started()) return &a;
    }
    return nullptr;
  }

  // A new request, read on `generation`, begun at `now` with `bytes_in` of it already read.
  void begin(Ref<ReactorGeneration> generation, std::chrono::steady_clock::time_point now,
             uint64_t already_read) noexcept {
    gen = std::move(generation);
    phase = Phase::none;
    head = {};
    facts = {};
    up = nullptr;
    started = now;
    request_id = {};
    head_request = request_parsed = body_taken = false;
    body_bytes = bytes_out = head_bytes_out = 0;
    bytes_in = already_read;
    current = 0;
    rate_limited_by = nullptr;
    quota_by = nullptr;
    quota.next = 0;
    hedge_settled = false;
    outcome = Outcome{};
    for (Attempt& a : attempts) a.reset();
  }

  // Gives back what admitted the request, once the backend's part is over (its response read
  // to the end, or floodgate's own answer decided) and before the client has the bytes: the
  // pool slot, after every backend's in-flight count (sum of backends <= pool), then the
  // stages' tickets (the front cap, the adaptive ceiling with the outcome as it stands, the
  // route and global caps). A client reading slowly, or going away now, is then no load the
  // controls count. Later calls do nothing.
  void release_admission() noexcept {
    permit.release();
    tickets.settle(outcome);
  }
  // The client sets the pace: its response waits in floodgate because the client does not
  // take it (on_client_paced, or a write stalled for 1 s). Floodgate spends nothing on it
  // meanwhile, so the stages' tickets go back (the front cap, the adaptive ceiling, the route and
  // global caps); the pool slot stays until the backend's part is over, since the backend may still
  // be sending. Later calls do nothing.
  void release_tickets() noexcept { tickets.settle(outcome); }

  // Settles what the exchange holds, in reverse order of taking (the pool slot after every
  // backend's in-flight count, then the stages' tickets), and unpins its generation. The
  // attempts must be ended before (their backend connections are the client's business).
  // Later calls do nothing but reset.
  // `unpin` false keeps the generation pinned until the exchange is destroyed or begun again
  // (a closing connection: completions still pending may read what it owns).
  void end(bool unpin = true) noexcept {
    release_admission();
    request = {};
    inflight_exempt = -1;
    cursor = 0;
    would_reject = Reason::none;
    would_reject_stage = StageId::count_;
    up = nullptr;
    // The request is over; its generation may retire. Unless a wait's completion is still on
    // its way: it runs the waiting stage's code, which the generation owns.
    if (unpin && wait.stage == nullptr) gen = Ref<ReactorGeneration>();
  }

 private:
  void run_chain(const Chain& chain);
  void park(const Decision& d);
  void on_wait_over() override;
  void leave_wait(Reason reason, CancelReason why);
  void on_wait_deadline();
  void select_backend();
  void open_connect_tunnel();
  // Arms the hedge timer when the request may be hedged (resilience.hedging).
  void arm_hedge(const Upstream& up, const FailurePolicy& policy);
  bool brownout_suppresses_hedging() const noexcept;
  void on_hedge_timer();
  // After a failed attempt: starts the retry on another backend when the rules, an alternate
  // and the budgets allow; false when the failure stands.
  bool retry_elsewhere(Reason reason);
  enum class SecondAttempt : uint8_t { started, no_alternate, denied_budget };
  SecondAttempt start_second_attempt(AttemptRole role, uint32_t exclude);
  // Turns the request away for a pool reason (kPoolRejections): frees its pool slot at once.
  void reject(Reason reason);

  friend class ExchangePool;
  // Back to the pool: nothing of the exchange is pending and its downstream let go.
  void recycle() noexcept;

  Reactor* reactor_ = nullptr;
  ExchangePool* pool_ = nullptr;
  Downstream* downstream_ = nullptr;
  Exchange* next_free_ = nullptr;  // the pool's free list
  uint32_t holds_ = 0;             // hold() without its release()
  bool attached_ = false;          // a downstream has it (attach .. detach)
  TimerWheel::Entry wait_timer_;   // the wait's deadline (the pool's pending_timeout)
  TimerWheel::Entry hedge_timer_;  // hedging.delay after the first attempt started
  // A hold (and so one on the downstream) while it waits for a stage.
  bool parked_ = false;
};

// A reactor's exchanges: a downstream takes one for each request in progress (an HTTP/1.1
// connection one at a time, an HTTP/2 connection one per stream), and an exchange comes back
// once its request is over and nothing of it is pending. The pool never allocates on the
// request path in steady state: a downstream reserves what it may need at once when it is
// made (an HTTP/1.1 connection one exchange, made then if none is free), and returned
// exchanges are kept for reuse, the reserved ones and up to `spare` more; beyond that they
// are freed when a reservation ends or at the reactor's housekeeping.
//
// Thread-safety: reactor thread only. Lifetime: outlives every exchange taken from it.
class ExchangePool {
 public:
  ExchangePool(Reactor& reactor, std::size_t spare) noexcept : reactor_(reactor), spare_(spare) {}
  ~ExchangePool();
  ExchangePool(const ExchangePool&) = delete;
  ExchangePool& operator=(const ExchangePool&) = delete;

  // A downstream may hold `n` more exchanges at once: the pool makes them now if it has not
  // enough, and keeps them. unreserve() gives the reservation back.
  void reserve(std::size_t n);
  void unreserve(std::size_t n) noexcept;
  // An exchange for `downstream`'s next request on the connection `conn` describes (made now
  // only beyond the reservations).
  Exchange& acquire(Downstream& downstream, ConnectionFacts& conn);
  // Frees kept exchanges beyond the reservations and the spare ones (unreserve, and the
  // reactor's housekeeping; not put_back, whose caller is the returned exchange's own code).
  void trim() noexcept;
  // Exchanges taken and not back yet, and free ones kept for reuse.
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t kept() const noexcept { return free_count_; }

 private:
  friend class Exchange;
  void put_back(Exchange& e) noexcept;
  Exchange* make();

  Reactor& reactor_;
  const std::size_t spare_;
  Exchange* free_ = nullptr;
  std::size_t free_count_ = 0;
  std::size_t in_use_ = 0;
  std::size_t reserved_ = 0;
};

}  // namespace floodgate::proxy
