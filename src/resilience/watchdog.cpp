// Watchdog: the watchdog's decisions (watchdog.h).
#include "floodgate/resilience/watchdog.h"

namespace floodgate::resilience {

std::string WatchdogCauses::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < kWatchdogCauses; ++i) {
    if (!has(static_cast<WatchdogCause>(i))) continue;
    if (!out.empty()) out += ", ";
    out += kWatchdogCauseLabels[i];
  }
  return out;
}

Watchdog::Watchdog(const WatchdogParams& params, const Clock& clock)
    : params_(params), clock_(clock) {}

bool Watchdog::timed_out(const WatchdogBackendWindow& b) const noexcept {
  // Percentages are at most 100 and counts of one window far below 2^57: no overflow.
  return b.settled >= params_.min_requests_per_window &&
         b.timeouts * 100 >= uint64_t{params_.timeout_error_rate_percent} * b.settled;
}

WatchdogCauses Watchdog::classify(const WatchdogObservation& o, std::optional<std::size_t>* stalled,
                                  uint32_t* timed_out_backends) const noexcept {
  WatchdogCauses causes;
  for (std::size_t i = 0; i < o.unanswered.size(); ++i) {
    if (o.unanswered[i] < params_.poll_stall_timeout) continue;
    if (stalled != nullptr && !causes.has(WatchdogCause::poll_stall)) *stalled = i;
    causes.add(WatchdogCause::poll_stall);
  }
  uint32_t spread = 0;
  for (const WatchdogBackendWindow& b : o.backends) {
    if (timed_out(b)) ++spread;
  }
  if (timed_out_backends != nullptr) *timed_out_backends = spread;
  if (spread >= params_.min_timeout_spread) causes.add(WatchdogCause::timeout_rate);
  if (o.ceiling > 0 &&
      o.in_flight * 100 >= uint64_t{params_.overload_inflight_percent} * o.ceiling) {
    causes.add(WatchdogCause::overload);
  }
  return causes;
}

WatchdogVerdict Watchdog::observe(const WatchdogObservation& o) {
  const Clock::time_point now = clock_.now();
  WatchdogVerdict v;
  v.causes = classify(o, &v.stalled_reactor, &v.timed_out_backends);
  consecutive_ = v.causes.empty() ? 0 : consecutive_ + 1;
  v.consecutive = consecutive_;
  if (drain_started_) {  // committed: only the grace decides
    if (now - *drain_started_ >= params_.drain_grace) {
      drain_started_.reset();
      last_restart_ = now;
      consecutive_ = 0;
      v.action = WatchdogAction::restart;
    }
    return v;
  }
  if (consecutive_ < params_.unhealthy_consecutive_windows) return v;
  consecutive_ = 0;  // acting (or reporting) starts the count afresh
  if (params_.restart_command.empty() || inside_cooldown(now + params_.drain_grace)) {
    v.action = WatchdogAction::report;
    return v;
  }
  drain_started_ = now;
  v.action = WatchdogAction::drain;
  return v;
}

bool Watchdog::set_params(const WatchdogParams& params) {
  params_ = params;
  if (!drain_started_ || !params_.restart_command.empty()) return false;
  drain_started_.reset();  // nothing would end it
  consecutive_ = 0;
  return true;
}

void Watchdog::reset() noexcept {
  consecutive_ = 0;
  drain_started_.reset();
}

std::optional<Clock::time_point> Watchdog::restart_due() const noexcept {
  if (!drain_started_) return std::nullopt;
  return *drain_started_ + params_.drain_grace;
}

bool Watchdog::inside_cooldown(Clock::time_point restart_at) const noexcept {
  return last_restart_ && restart_at < *last_restart_ + params_.restart_cooldown;
}

}  // namespace floodgate::resilience
