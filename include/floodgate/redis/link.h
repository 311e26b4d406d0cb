// A reactor's connection to Redis (issue 16): the distributed quota's scripts run over it, many
// in flight at once, and nothing on it ever blocks the reactor.
//
// One link per reactor and Redis server, on that reactor's Poller (net/stream.h) and timer wheel:
//   - Connecting: a TCP connect to the numeric address (names are resolved when the
//     configuration is loaded), then, pipelined, AUTH (when a password is set), SELECT (db != 0)
//     and SCRIPT LOAD of the link's one script; the link is ready when the last of their replies
//     is right (SCRIPT LOAD must answer the script's own SHA-1). `connect_timeout` bounds the
//     connect and the handshake together.
//   - Calls: each eval() appends EVALSHA to the output (written as soon as the socket can take
//     it; while a write is in progress new commands gather behind it) and its entry to a ring in
//     the same order: replies arrive in order and are matched first in, first out. The ring is
//     allocated when the link is made; nothing is allocated per call.
//   - NOSCRIPT (the script was flushed, or Redis restarted between the handshake and the call):
//     the link sends SCRIPT LOAD again and then the call again (Call::write encodes it anew), once
//     per call; the call keeps its deadline.
//   - Deadlines: every call must be answered within `command_timeout` of being sent. Replies come
//     in order, so one timer on the oldest call covers them all. When it fires, Redis is stalled
//     (or the network is): every call in flight completes with CallStatus::timeout, the
//     connection is closed, and the link reconnects at once in "probe" mode (below).
//   - Failures and the breaker: a connect or handshake that fails (refused, reset, timed out, an
//     error reply to AUTH / SELECT / SCRIPT LOAD) fails what waits for it (unavailable; error for
//     an error reply) and opens the link's breaker for a backoff of 100 ms, doubling with each
//     further failure up to 5 s; when the backoff has passed one new connect is the probe. While
//     the breaker is open, or a probe is under way, eval() refuses at once (Submit::unavailable):
//     a dead Redis costs one failed connect per backoff interval, not a timeout per request.
//     Only a link that has not failed since it was last ready (its first connect, or a reconnect
//     after Redis closed a healthy connection) queues calls behind the connect.
//   - A reply that breaks RESP (ReplyParser's protocol_error) closes the connection: the calls in
//     flight complete with CallStatus::error, and the link reconnects as after a failure.
//   - The process log: each failure above (and Redis closing a ready connection) is a warning
//     naming the server, what failed and why (the system's reason, or Redis's own error reply:
//     it never holds the password, which is never logged), and what the link does next; at most
//     one line per second for the links that share LinkParams::failure_log (every reactor's),
//     saying how many it stands for. The first time the link is ready again it logs one line
//     saying so, with how many failures and how long it was down. A call answered logs nothing.
//
// Thread-safety: the link and its calls belong to one reactor thread. LinkStats may be read from
// any thread (relaxed atomics). The process-wide in-flight count is shared by every reactor's
// link (InflightLimit).
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/core/clock.h"
#include "floodgate/core/shared_log_throttle.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/metrics/counter.h"
#include "floodgate/metrics/histogram.h"
#include "floodgate/redis/command_writer.h"
#include "floodgate/redis/reply_parser.h"

namespace floodgate::net {
class Poller;
}  // namespace floodgate::net

namespace floodgate::redis {

struct LinkParams {
  boost::asio::ip::tcp::endpoint server;  // numeric
  uint32_t db = 0;                        // SELECTed when not 0
  std::string username;                   // empty: AUTH <password>
  std::string password;                   // empty: no AUTH
  std::chrono::milliseconds connect_timeout{250};
  std::chrono::milliseconds command_timeout{100};
  std::string script;  // the Lua source every call runs (EVALSHA of its SHA-1)
  // Calls this link holds at most (queued or in flight); the ring's size.
  uint32_t max_pending = 1024;
  // Throttles the failure lines of every link made from these params (a copy shares it), so
  // that one Redis down is one line a second however many reactors there are. Null: the link
  // gets one of its own.
  std::shared_ptr<SharedLogThrottle> failure_log;
};

// Commands in flight on every link of the process (quota.backend.max_inflight): an eval() past
// the limit is refused (Submit::busy). Shared by the links of every reactor.
struct InflightLimit {
  explicit InflightLimit(uint32_t max) noexcept : max(max) {}
  const uint32_t max;
  std::atomic<uint32_t> current{0};
};

// What a link did, for the metrics (summed over a reactor's links by the scrape). Written by the
// link's reactor only.
struct LinkStats {
  Counter connects;               // connect attempts
  Counter connect_failures;       // connects or handshakes that failed
  Counter disconnects;            // ready connections lost (closed by Redis, reset, stalled)
  Counter script_loads;           // SCRIPT LOAD sent (handshakes and NOSCRIPT reloads)
  Counter noscript;               // NOSCRIPT replies (each followed by a reload and a resend)
  Counter timeouts;               // calls completed with CallStatus::timeout
  Counter errors;                 // calls completed with CallStatus::error (error replies included)
  Counter refused;                // eval() refused (breaker open, probing, full, busy)
  Histogram latency;              // sent to reply, of calls answered
  std::atomic<int64_t> ready{0};  // links of this reactor that are ready (0 or 1 each)
  std::atomic<int64_t> inflight{0};  // calls of this reactor's links queued or in flight
};

enum class CallStatus : uint8_t {
  reply,        // Redis answered (anything but NOSCRIPT; error replies too): Done gets the reply
  timeout,      // no reply within command_timeout
  unavailable,  // the connection failed or closed before the reply came
  error,        // an error reply to the handshake, a reply that broke the protocol, or NOSCRIPT
                // again after the reload (or no room to resend)
};

class Link;
class LinkImpl;

// One call of the script, embedded in whoever waits for it (the quota stage's exchange). It must
// stay where it is while pending() (the link points at it) and be cancelled or completed before
// it is destroyed (~Call cancels).
class Call {
 public:
  // Encodes "EVALSHA <sha> <numkeys> keys... args..." into `out` (CommandWriter::write) for the
  // script whose SHA-1 (40 hex digits) is `sha`; false when it does not fit. Called by eval() and
  // again to resend after NOSCRIPT, so it must write the same command each time.
  using Write = bool (*)(Call& call, CommandWriter& out, std::string_view sha) noexcept;
  // The call is over: `reply` is set for CallStatus::reply (valid during the call only). Called
  // exactly once per accepted eval() unless cancel() came first, from the link's reactor, never
  // from inside eval() or cancel(). It may start a new call (on any link) or cancel others.
  using Done = void (*)(Call& call, CallStatus status, const Reply* reply) noexcept;

  Call(Write write, Done done) noexcept : write_(write), done_(done) {}
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  bool pending() const noexcept { return link_ != nullptr; }

 private:
  friend class Link;
  friend class LinkImpl;
  Write write_;
  Done done_;
  Link* link_ = nullptr;
  uint32_t slot_ = 0;  // its ring entry
  std::chrono::steady_clock::time_point sent_{};
};

enum class LinkState : uint8_t {
  idle,        // not started, or closed
  connecting,  // connect or handshake under way (queues calls unless probing)
  ready,
  backoff,  // the breaker is open until the backoff passes
};

class Link {
 public:
  // `clock` gives the time of deadlines and backoffs (the reactor's loop clock; a ManualClock in
  // tests). `poller`, `wheel`, `clock` and `stats` outlive the link.
  Link(net::Poller& poller, TimerWheel& wheel, const Clock& clock, LinkParams params,
       std::shared_ptr<InflightLimit> inflight, LinkStats& stats);
  ~Link();  // closes; pending calls are dropped without Done (their owners are going too)
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Starts connecting unless connecting, ready or backing off.
  void start();
  enum class Submit : uint8_t {
    accepted,     // Done will be called (or cancel() called first)
    unavailable,  // the breaker is open or a probe is under way, or the link is closed
    busy,         // max_pending or the process's max_inflight reached, no room to write, or `call`
                  // is pending already
  };
  // Runs the script through `call` (call.write encodes it). Never calls Done itself.
  Submit eval(Call& call) noexcept;
  // The caller gives up on `call`: Done will not be called. Its reply, when it comes, is dropped.
  void cancel(Call& call) noexcept;
  // Closes the connection and stops: pending calls complete with CallStatus::unavailable.
  void close() noexcept;

  LinkState state() const noexcept { return state_; }
  // Whether calls are queued or in flight (a link may be dropped only when not).
  bool busy() const noexcept;
  const LinkParams& params() const noexcept { return params_; }
  std::string_view script_sha() const noexcept { return {sha_, sizeof sha_}; }

 private:
  friend class LinkImpl;
  LinkState state_ = LinkState::idle;
  LinkParams params_;
  char sha_[40] = {};
  std::unique_ptr<LinkImpl> impl_;  // the socket, buffers, ring and timers (link.cpp)
};

}  // namespace floodgate::redis
