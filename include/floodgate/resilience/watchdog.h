// Watchdog: the decisions of issue 14's watchdog ([resilience.watchdog], seed 004 "Watchdog"),
// as a pure object. Once per check_interval the watchdog thread (app/watchdog.h) hands it what
// it observed over the window that just ended; it classifies the window, counts unhealthy
// windows in a row, and says what to do. It does nothing itself: no thread, no reactor, no
// process, no clock of its own (the injected Clock says when a window ends).
//
// A window is unhealthy for one or more causes:
//   - poll_stall: some reactor has left its heartbeat ping unanswered for at least
//     poll_stall_timeout (its loop has not turned; an idle reactor answers at once);
//   - timeout_rate: upstream timeouts on at least min_timeout_spread distinct backends at once:
//     a backend *timed out* in the window when at least min_requests_per_window of its attempts
//     ended in it and at least timeout_error_rate_percent of those were connect or response
//     timeouts. A wedged process times out on every backend it talks to; one slow backend, or
//     one slow URL that only one backend serves, times out on one, and is the backend's
//     problem, which a restart of floodgate does not cure (issue 35). (A URL slow on every
//     backend of its pool does spread; only each backend's rate, which its other requests
//     dilute, tells it from a wedge.) So a deployment with fewer distinct backends than
//     min_timeout_spread never has this cause: the operator sets 1 to judge a lone backend,
//     accepting that its slowness then reads as floodgate's;
//   - overload: a ceiling is set (non-zero) and in-flight is at least overload_inflight_percent
//     of it.
// The comparisons are the configuration's, literally (`check` warns about 0%, which makes every
// window unhealthy).
//
// The decisions, made at the end of each window (its verdict's `action`):
//   - none: healthy, or fewer than unhealthy_consecutive_windows unhealthy windows in a row, or
//     a drain in progress whose grace has not passed yet;
//   - report: the threshold was reached but nothing is done: restart_command is empty (only
//     reporting: a drain nobody ends would take the instance out of service for good), or the
//     restart it would lead to, drain_grace from now, would fall inside restart_cooldown of the
//     previous one. The count starts afresh, so a lasting problem reports once every
//     unhealthy_consecutive_windows windows;
//   - drain: the threshold was reached, with a command, outside the cooldown. The drain is
//     committed: later windows, healthy or not, do not cancel it (a drained instance looks
//     healthy: no traffic, no timeouts), they are only classified and counted;
//   - restart: the first window end at least drain_grace after the drain began. The caller runs
//     restart_command and stops draining; the count starts afresh and restart_cooldown runs
//     from now.
// So a drain always ends in exactly one restart, and restarts are at least restart_cooldown
// apart. Precision: one check_interval (decisions happen at window ends).
//
// Reconfiguration: set_params() keeps the state (a drain in progress, the count, the last
// restart) and applies the new thresholds from the next window on (a drain in progress ends if
// the new restart_command is empty, as there is no restart left to end it); reset() forgets the
// count and any drain (the caller stops draining), but not when the last restart was, so turning
// the watchdog off and on cannot get around the cooldown.
//
// Thread-safety: none; one thread (the watchdog thread) owns it. observe() and classify() are
// allocation-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "floodgate/core/clock.h"
#include "floodgate/resilience/params.h"

namespace floodgate::resilience {

enum class WatchdogCause : uint8_t { poll_stall, timeout_rate, overload };
inline constexpr std::size_t kWatchdogCauses = 3;
inline constexpr std::array<std::string_view, kWatchdogCauses> kWatchdogCauseLabels{
    "poll_stall", "timeout_rate", "overload"};

// A set of causes; empty is a healthy window.
class WatchdogCauses {
 public:
  constexpr WatchdogCauses() noexcept = default;
  static constexpr WatchdogCauses from_bits(uint8_t bits) noexcept {
    WatchdogCauses c;
    c.bits_ = static_cast<uint8_t>(bits & kAll);
    return c;
  }
  constexpr void add(WatchdogCause c) noexcept { bits_ |= bit(c); }
  constexpr bool has(WatchdogCause c) const noexcept { return (bits_ & bit(c)) != 0; }
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr uint8_t bits() const noexcept { return bits_; }
  // "poll_stall, overload" (in kWatchdogCauseLabels order); "" when empty.
  std::string to_string() const;
  constexpr bool operator==(const WatchdogCauses&) const = default;

 private:
  static constexpr uint8_t kAll = (1U << kWatchdogCauses) - 1;
  static constexpr uint8_t bit(WatchdogCause c) noexcept {
    return static_cast<uint8_t>(1U << static_cast<unsigned>(c));
  }
  uint8_t bits_ = 0;
};

// One backend's attempts that ended in a window.
struct WatchdogBackendWindow {
  uint64_t settled = 0;   // attempts that ended: response heads and failures
  uint64_t timeouts = 0;  // of those, connect or response timeouts (at most `settled`)
};

// What the watchdog thread saw over one window.
struct WatchdogObservation {
  // Per reactor: how long its latest heartbeat ping has been waiting for an answer (zero when
  // it was answered). Read during observe() only.
  std::span<const Clock::duration> unanswered;
  // Per distinct backend (one address, however many pools list it), in any order. Read during
  // observe() only.
  std::span<const WatchdogBackendWindow> backends;
  uint64_t in_flight = 0;
  uint64_t ceiling = 0;  // the admission ceiling in force; 0 = none (no overload cause)
};

enum class WatchdogAction : uint8_t { none, report, drain, restart };

struct WatchdogVerdict {
  WatchdogCauses causes;     // this window's; empty = healthy
  uint32_t consecutive = 0;  // unhealthy windows in a row, this one included
  WatchdogAction action = WatchdogAction::none;
  // The first reactor found stalled (poll_stall), for the log.
  std::optional<std::size_t> stalled_reactor;
  // The backends that timed out (timed_out()), whether or not enough for timeout_rate.
  uint32_t timed_out_backends = 0;
};

class Watchdog {
 public:
  // `clock` must outlive the watchdog.
  Watchdog(const WatchdogParams& params, const Clock& clock);

  // The window that just ended (call once per check_interval).
  WatchdogVerdict observe(const WatchdogObservation& o);

  // The window's causes alone, by the current thresholds (no state changes). `stalled` and
  // `timed_out_backends`, when given, receive what the verdict's fields of those names say.
  WatchdogCauses classify(const WatchdogObservation& o,
                          std::optional<std::size_t>* stalled = nullptr,
                          uint32_t* timed_out_backends = nullptr) const noexcept;
  // Whether one backend timed out in its window, by the current thresholds (see the header
  // comment): what timeout_rate counts, and what the log names.
  bool timed_out(const WatchdogBackendWindow& b) const noexcept;

  // New thresholds from the next window on; the state stays (see the header comment), except
  // that a drain in progress ends when the new parameters have no restart_command (nothing
  // would end it): then it returns true, and the caller stops draining.
  bool set_params(const WatchdogParams& params);
  // Forgets the count and any drain in progress; keeps the last restart's time.
  void reset() noexcept;

  bool draining() const noexcept { return drain_started_.has_value(); }
  // When the drain in progress leads to the restart (the first window end at or after it).
  std::optional<Clock::time_point> restart_due() const noexcept;
  uint32_t consecutive() const noexcept { return consecutive_; }
  const WatchdogParams& params() const noexcept { return params_; }

 private:
  bool inside_cooldown(Clock::time_point restart_at) const noexcept;

  WatchdogParams params_;
  const Clock& clock_;
  uint32_t consecutive_ = 0;
  std::optional<Clock::time_point> drain_started_;
  std::optional<Clock::time_point> last_restart_;
};

}  // namespace floodgate::resilience
