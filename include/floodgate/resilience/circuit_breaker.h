// CircuitBreaker: the per-backend circuit breaker of issue 13 ([resilience.circuit_breaker],
// seed 004 "Circuit Breakers"), with issue 35's opening rule. A standalone primitive: the
// request path, selection, metrics and /status read it; it knows nothing of them.
//
// The state machine, one breaker per backend address:
//   closed    -> open       a recorded failure, once the window holds at least min_requests
//                           verdicts, when failure_threshold of them in a row failed (the
//                           streak) or failure_rate_percent of them did (the rate);
//   open      -> half_open  the first try_pass() once `open` has passed since it opened;
//   half_open -> closed     a probe succeeded (the streak resets, the window starts afresh);
//   half_open -> open       a probe failed (a new open period, from that failure's time).
// Closed lets every attempt through and a success resets the streak. Open refuses every
// attempt. Half-open lets at most half_open_max_probes attempts through at once, each a probe
// holding a permit; the others are refused. Only a probe of the current half-open period
// decides how it ends: any attempt may record, but see record() for what an attempt admitted
// earlier (a straggler) does.
//
// Why the window (issue 35): three consecutive failures are three requests of one client, a
// slow URL or one endpoint answering 503 by design, and opening on them blacks out a pool for
// every other client. min_requests verdicts in `window` (each one request's attempt: a request
// makes at most one attempt per backend, its stale-connection resend included) means that a
// circuit opens on what a backend does to many requests, and the rate means that failures must
// be a share of its traffic. The streak stays, under the same minimum, for the backend that
// just died under a long healthy history, which the rate would see late.
//
// Thread-safety: every member from any thread (every reactor shares one breaker per backend).
// Lock-free and allocation-free: one 64-bit state word changed by compare-and-swap, timestamps
// and counters beside it (the essay at the top of circuit_breaker.cpp says who races whom), and
// the window's ring (failure_window.h).
//
// Costs: try_pass() while closed is one acquire load and no write. record() adds the verdict to
// the window (a relaxed fetch_add on the window's own cache line, as the retry budget counts
// every request); a success while closed with no streak writes nothing else, so the state
// word's line stays read-only, shared by every reactor, while a backend is healthy. Failures
// also read the window (kBuckets loads); failures, probes and transitions are compare-and-swap
// loops. A refusal is not counted here: like the front in-flight cap's, it belongs in the
// reactor's metrics shard (refusals are what an open circuit does all day, from every reactor
// at once).
//
// Time: the caller's loop time (Poller::now, or a ManualClock in tests) is passed to each call
// that needs it; the breaker never reads a clock. An open period ends at opened_at + `open`,
// opened_at being the `now` of the failure that opened it.
//
// Reload: set_limits() from any thread takes effect at once and keeps the state, the streak, the
// probes in flight, the open period's start and the window's counts (unless `window` changed).
// A call that overlaps it may decide with the old or the new limits. Details on set_limits().
//
// Lifetime: outlives every CircuitPass it issued (a process-wide object kept across reloads
// while some generation lists its backend). Neither copies nor moves.
//
// Not here, by design: what counts as a failure (the caller classifies the attempt once, issue
// 13's list), `enabled` (a disabled breaker is one the request path does not consult), which
// backend to pick when all are open (selection reads half_open_at() and last_failure()), and
// the log lines (the caller gets each transition it made, from record() or the pass).
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/failure_window.h"
#include "floodgate/resilience/params.h"

namespace floodgate::resilience {

class CircuitBreaker;

// The values are those of floodgate_circuit_state{upstream,peer}.
enum class CircuitState : uint8_t { closed = 0, open = 1, half_open = 2 };

// An attempt's outcome, as the caller classified it.
enum class CircuitVerdict : uint8_t { success, failure };

// min_requests = 1 with failure_rate_percent = 0 is the streak alone: issue 13's rule.
struct CircuitLimits {
  uint32_t failure_threshold = 5;      // 1..CircuitBreaker::kMaxThreshold; clamped into it
  uint32_t min_requests = 10;          // 1..CircuitBreaker::kMaxMinRequests; clamped into it
  uint32_t failure_rate_percent = 50;  // 0 (no rate rule)..100; clamped into it
  // The window's length (FailureWindow rounds it: a multiple of kBuckets ticks, at least one).
  std::chrono::nanoseconds window = std::chrono::seconds(10);
  std::chrono::nanoseconds open = std::chrono::seconds(30);  // negative is taken as 0
  uint32_t half_open_max_probes = 1;  // 1..CircuitBreaker::kMaxProbes; clamped into it
  bool operator==(const CircuitLimits&) const = default;
};

// The limits [resilience.circuit_breaker] asks for.
inline CircuitLimits circuit_limits(const CircuitBreakerParams& params) noexcept {
  return {.failure_threshold = params.failure_threshold,
          .min_requests = params.min_requests,
          .failure_rate_percent = params.failure_rate_percent,
          .window = params.window,
          .open = params.open,
          .half_open_max_probes = params.half_open_max_probes};
}

// What opened a closed circuit: the streak reached failure_threshold, or (the streak below it)
// the failures reached failure_rate_percent of the window's verdicts.
enum class OpenedBy : uint8_t { none, streak, failure_rate };

// A transition one call made, for the caller's log line (transitions() counts it as well).
// Empty (false) when the call changed no state.
struct CircuitTransition {
  CircuitState from = CircuitState::closed;
  CircuitState to = CircuitState::closed;
  OpenedBy opened_by = OpenedBy::none;  // closed -> open only
  uint32_t streak = 0;                  // consecutive failures, this verdict's included
  FailureWindow::Counts window{};       // the window's counts, this verdict included
  explicit operator bool() const noexcept { return from != to; }
};

// What try_pass() decided for one attempt. Move-only.
//   refused: do not send the attempt to this backend (false in a boolean context).
//   regular: send it (the circuit was closed); record() its verdict. Dropping it unrecorded
//            (a cancelled attempt: a hedge's loser, a client gone) records nothing.
//   probe:   send it; it holds one of the half-open period's probe permits, which record()
//            (with a verdict) or abandon() (without) gives back. Destroying a probe that was
//            neither recorded nor abandoned abandons it, so a permit cannot leak.
// After record() or abandon() the pass is refused (empty).
class CircuitPass {
 public:
  enum class Kind : uint8_t { refused, regular, probe };

  CircuitPass() noexcept = default;  // refused
  CircuitPass(CircuitPass&& other) noexcept
      : breaker_(std::exchange(other.breaker_, nullptr)),
        epoch_(other.epoch_),
        kind_(std::exchange(other.kind_, Kind::refused)),
        half_opened_(std::exchange(other.half_opened_, false)) {}
  CircuitPass& operator=(CircuitPass&& other) noexcept {
    if (this != &other) {
      drop();
      breaker_ = std::exchange(other.breaker_, nullptr);
      epoch_ = other.epoch_;
      kind_ = std::exchange(other.kind_, Kind::refused);
      half_opened_ = std::exchange(other.half_opened_, false);
    }
    return *this;
  }
  CircuitPass(const CircuitPass&) = delete;
  CircuitPass& operator=(const CircuitPass&) = delete;
  ~CircuitPass() { drop(); }

  Kind kind() const noexcept { return kind_; }
  bool probe() const noexcept { return kind_ == Kind::probe; }
  explicit operator bool() const noexcept { return kind_ != Kind::refused; }
  // The try_pass() that issued this probe moved the circuit from open to half-open (one caller
  // per half-open period sees it: the one to log the transition). Kept by moves, whatever
  // becomes of the pass.
  bool half_opened() const noexcept { return half_opened_; }

 private:
  friend class CircuitBreaker;
  CircuitPass(CircuitBreaker& breaker, Kind kind, uint32_t epoch, bool half_opened = false) noexcept
      : breaker_(&breaker), epoch_(epoch), kind_(kind), half_opened_(half_opened) {}
  inline void drop() noexcept;  // abandons a probe; empties the pass

  CircuitBreaker* breaker_ = nullptr;
  uint32_t epoch_ = 0;  // a probe's half-open period (see circuit_breaker.cpp)
  Kind kind_ = Kind::refused;
  bool half_opened_ = false;
};

class alignas(64) CircuitBreaker {
 public:
  using time_point = Clock::time_point;

  // The largest threshold (the streak lives in 24 bits of the state word, saturating there) and
  // the most probes at once (16 bits). Larger limits are clamped.
  static constexpr uint32_t kMaxThreshold = (uint32_t{1} << 24) - 1;
  static constexpr uint32_t kMaxProbes = (uint32_t{1} << 16) - 1;
  // The largest min_requests (the configuration allows 1..1000000).
  static constexpr uint32_t kMaxMinRequests = 1'000'000;

  explicit CircuitBreaker(const CircuitLimits& limits = {}) noexcept;
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // May the attempt go to this backend, and is it a probe? Closed: regular, one acquire load.
  // Open before its time: refused. Open at or past opened_at + `open`: the caller moves it to
  // half-open and takes the first probe permit (one compare-and-swap decides among racing
  // callers). Half-open: a probe while fewer than half_open_max_probes are out, else refused.
  [[nodiscard]] inline CircuitPass try_pass(time_point now) noexcept;

  // A pass whatever the state, holding no permit: for an attempt sent to a backend whose
  // circuit is open because every candidate's is (when_all_open = least_recently_failed). Its
  // verdict records as a straggler's does (see record()): a failure adds to the streak and to
  // last_failure() without extending the open period; a success closes nothing.
  [[nodiscard]] CircuitPass force_pass() noexcept { return {*this, CircuitPass::Kind::regular, 0}; }
  // The attempt's verdict; `now` is when it ended. Empties `pass`; a refused pass records
  // nothing. Every other verdict counts in the window. A probe of the current half-open period
  // decides it: success closes the circuit (streak 0, the window cleared), failure reopens it
  // from `now`. Any other pass:
  //   - closed: a failure adds one to the streak and opens the circuit when the window holds at
  //     least min_requests verdicts and either the streak has reached failure_threshold or the
  //     window's failures are at least failure_rate_percent of its verdicts (a rate of 0 never
  //     is); a success resets the streak;
  //   - open or half-open (an attempt admitted before the circuit opened, a forced pass, or a
  //     probe of a half-open period that has since ended, which holds no permit any more): a
  //     failure adds to the streak (saturating) and to last_failure() but never extends the
  //     open period nor reopens a half-open circuit; a success changes nothing. Only a current
  //     probe tells how the backend is doing now.
  // Returns the transition it made, if any (for the caller's log line).
  inline CircuitTransition record(CircuitPass&& pass, CircuitVerdict verdict,
                                  time_point now) noexcept;

  // No verdict (the attempt was cancelled): a current probe gives its permit back, leaving the
  // state as it is. Empties `pass`; for any other pass it does nothing.
  void abandon(CircuitPass&& pass) noexcept;

  // A reload, from any thread; takes effect at once (values clamped as on CircuitLimits):
  //   - failure_threshold, min_requests, failure_rate_percent: a closed circuit stays closed
  //     and keeps its streak and its window. If the counts already meet the lowered limits,
  //     the next recorded failure opens it (the next success resets the streak); set_limits
  //     itself never opens a circuit.
  //   - window: a changed length starts the counts afresh; the same one keeps them.
  //   - open: applies to the current open period too (it ends at opened_at + the new `open`),
  //     so a shortened one may make the next try_pass a probe at once.
  //   - half_open_max_probes: a lowered one revokes no permit, it only refuses new probes
  //     until fewer are out than the new limit; a raised one lets more through at once.
  void set_limits(const CircuitLimits& limits) noexcept;
  // As set (clamped; the window as FailureWindow rounds it). Each field is exact; they are not
  // read atomically together.
  CircuitLimits limits() const noexcept;

  // Observers for metrics, /status and selection; snapshots, any thread.
  //
  // state(): what try_pass(now) would find. An open circuit past its time reads half_open, so
  // that selection, which skips open backends, sends the attempt that will probe it (the
  // metric then shows half-open a little before the word says so).
  CircuitState state(time_point now) const noexcept;
  // Consecutive recorded failures since the last success that counted (one in closed, or a
  // probe's), saturating at kMaxThreshold.
  uint32_t streak() const noexcept { return streak_of(word_.load(std::memory_order_relaxed)); }
  // Probe permits held in the current half-open period (0 in any other state).
  uint32_t probes_in_flight() const noexcept {
    return probes_of(word_.load(std::memory_order_relaxed));
  }
  // When an open circuit becomes half-open: opened_at + the current `open` (Retry-After, and the
  // first backend to half-open). In other states, the end of the most recent open period;
  // time_point{} if the circuit never opened. For the instant between an opening failure's
  // compare-and-swap and the store of its time, it is estimated as last_failure() + `open`.
  time_point half_open_at() const noexcept;
  // The `now` of the latest recorded failure, in any state (when_all_open =
  // least_recently_failed); time_point{} if none. Never moves back, whatever the order in which
  // threads record.
  time_point last_failure() const noexcept {
    return time_point{Clock::duration{last_failure_.load(std::memory_order_relaxed)}};
  }
  // The window's counts at `now` (the log lines; /status).
  FailureWindow::Counts window(time_point now) const noexcept { return window_.counts(now); }
  // floodgate_circuit_transitions_total{from,to}: each transition counted once, by the thread
  // that made it. 0 for the pairs the state machine never takes (closed -> half_open, open ->
  // closed, and a state to itself).
  uint64_t transitions(CircuitState from, CircuitState to) const noexcept;

 private:
  friend class CircuitPass;
  using Rep = Clock::duration::rep;

  // The state word. Bits 0-1 the state, bit 2 "an opening is publishing its time", bits 3-18
  // the probes in flight, bits 19-42 the streak, bits 43-63 the epoch (the count of openings,
  // wrapping: it names each half-open period, so that a probe of an ended one is recognised).
  static constexpr uint64_t kStateMask = 0x3;
  static constexpr uint64_t kPublishing = uint64_t{1} << 2;
  static constexpr unsigned kProbesShift = 3;
  static constexpr unsigned kStreakShift = 19;
  static constexpr unsigned kEpochShift = 43;
  static constexpr uint64_t kOneProbe = uint64_t{1} << kProbesShift;
  static constexpr uint64_t kOneStreak = uint64_t{1} << kStreakShift;
  static constexpr uint64_t kProbesMask = uint64_t{kMaxProbes} << kProbesShift;
  static constexpr uint64_t kStreakMask = uint64_t{kMaxThreshold} << kStreakShift;

  static CircuitState state_of(uint64_t word) noexcept {
    return static_cast<CircuitState>(word & kStateMask);
  }
  static uint32_t probes_of(uint64_t word) noexcept {
    return static_cast<uint32_t>((word & kProbesMask) >> kProbesShift);
  }
  static uint32_t streak_of(uint64_t word) noexcept {
    return static_cast<uint32_t>((word & kStreakMask) >> kStreakShift);
  }
  static uint32_t epoch_of(uint64_t word) noexcept {
    return static_cast<uint32_t>(word >> kEpochShift);
  }
  static bool current_probe(uint64_t word, uint32_t epoch) noexcept {
    return state_of(word) == CircuitState::half_open && epoch_of(word) == epoch;
  }

  CircuitPass try_pass_slow(uint64_t word, time_point now) noexcept;
  CircuitTransition record_slow(CircuitPass::Kind kind, uint32_t epoch, CircuitVerdict verdict,
                                time_point now) noexcept;
  // Would a failure that makes the streak `streak` open a closed circuit whose window holds
  // `counts`?
  OpenedBy opens(uint32_t streak, FailureWindow::Counts counts) const noexcept;
  void release_probe(uint32_t epoch) noexcept;
  void note_failure(time_point now) noexcept;
  void publish_opening(time_point now) noexcept;
  Rep half_open_ticks() const noexcept;
  void count(CircuitState from, CircuitState to) noexcept;

  // Atomic: every reactor reads it on every attempt and compare-and-swaps it on failures,
  // probes and transitions. Written by nothing while a closed circuit sees only successes.
  std::atomic<uint64_t> word_{0};
  // Atomic: written by the thread whose CAS opened the circuit (under kPublishing), read by any
  // try_pass() of an open circuit. Clock ticks; kNever until the first opening.
  std::atomic<Rep> opened_at_;
  // Atomic: every thread recording a failure raises it (a max, by CAS).
  std::atomic<Rep> last_failure_{0};
  // Atomic: set_limits() writes them on the main thread while reactors read them.
  std::atomic<uint32_t> threshold_;
  std::atomic<uint32_t> min_requests_;
  std::atomic<uint32_t> rate_percent_;
  std::atomic<uint32_t> max_probes_;
  std::atomic<Rep> open_ticks_;
  // Atomic: counted by whichever thread makes the transition, read by metrics. On the same
  // lines as the word: they move only when it does.
  std::array<std::atomic<uint64_t>, 4> transitions_{};
  // Every verdict's count (its atomics are its own, on lines of their own).
  FailureWindow window_;
};

// The fast paths, inline: closed, one load.

CircuitPass CircuitBreaker::try_pass(time_point now) noexcept {
  const uint64_t word = word_.load(std::memory_order_acquire);
  if (state_of(word) == CircuitState::closed) return {*this, CircuitPass::Kind::regular, 0};
  return try_pass_slow(word, now);
}

CircuitTransition CircuitBreaker::record(CircuitPass&& pass, CircuitVerdict verdict,
                                         time_point now) noexcept {
  const CircuitPass::Kind kind = std::exchange(pass.kind_, CircuitPass::Kind::refused);
  if (kind == CircuitPass::Kind::refused) return {};
  assert(pass.breaker_ == this && "recording a pass on another breaker");
  pass.breaker_ = nullptr;
  window_.add(now, verdict == CircuitVerdict::failure);
  if (verdict == CircuitVerdict::success) {
    // Closed with no streak (the healthy case): nothing to change, so the word is not written.
    // A probe here belongs to a half-open period that has ended.
    const uint64_t word = word_.load(std::memory_order_relaxed);
    if ((word & (kStateMask | kStreakMask)) == 0) return {};
  }
  return record_slow(kind, pass.epoch_, verdict, now);
}

void CircuitPass::drop() noexcept {
  if (kind_ == Kind::probe) breaker_->release_probe(epoch_);
  kind_ = Kind::refused;
  breaker_ = nullptr;
}

}  // namespace floodgate::resilience
