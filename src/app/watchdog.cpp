// WatchdogThread: the watchdog thread (watchdog.h).
#include "watchdog.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>  // environ (_GNU_SOURCE)

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "floodgate/core/reason.h"
#include "floodgate/proxy/failure_policy.h"

namespace floodgate::app {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// The tick without [resilience.watchdog] (pings for systemd, reaping): often enough for a
// keep-alive of any sensible WatchdogSec=, cheap for the reactors (one eventfd write each).
constexpr Clock::duration kIdlePeriod = std::chrono::seconds(1);

int64_t ms(Clock::duration d) {
  return duration_cast<milliseconds>(d).count();
}

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

// Starts `argv` (argv[0] an absolute path; no shell, no PATH search): stdin /dev/null, stdout
// and stderr floodgate's stderr, no other descriptor (closefrom: listeners and sockets opened
// without CLOEXEC stay ours), the default signal mask and dispositions. Returns 0 and the pid,
// or an errno value (posix_spawn reports a failed exec too).
int spawn(const std::vector<std::string>& argv, pid_t& pid) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (int rc = ::posix_spawn_file_actions_init(&actions); rc != 0) return rc;
  if (int rc = ::posix_spawnattr_init(&attr); rc != 0) {
    ::posix_spawn_file_actions_destroy(&actions);
    return rc;
  }
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  ::posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // floodgate ignores it; an ignored signal stays so on exec
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  return rc;
}

std::string error_text(int error) {
  char text[128];
  return ::strerror_r(error, text, sizeof(text));
}

// The most backends a log line names (with their counts); STATUS= names fewer (without).
constexpr std::size_t kNamedInLog = 8;
constexpr std::size_t kNamedInStatus = 3;

// The backend failures that are timeouts (floodgate_backend_failures_total{reason}).
const std::size_t kConnectTimeout = proxy::backend_failure_kind(Reason::upstream_connect_timeout);
const std::size_t kResponseTimeout = proxy::backend_failure_kind(Reason::upstream_timeout);

}  // namespace

// What made a window unhealthy, for the log.
std::string WatchdogThread::details(const resilience::WatchdogVerdict& v,
                                    const resilience::WatchdogObservation& o) const {
  using resilience::WatchdogCause;
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  if (v.causes.has(WatchdogCause::poll_stall) && v.stalled_reactor) {
    add(fmt::format("poll_stall: reactor {} has not turned for {} ms (poll_stall_timeout {} ms)",
                    *v.stalled_reactor, ms(o.unanswered[*v.stalled_reactor]),
                    params_.poll_stall_timeout.count()));
  }
  if (v.causes.has(WatchdogCause::timeout_rate)) {
    add(fmt::format(
        "timeout_rate: {} backends timed out (at least {}% of at least {} attempts each; "
        "min_timeout_spread {}): {}",
        v.timed_out_backends, params_.timeout_error_rate_percent, params_.min_requests_per_window,
        params_.min_timeout_spread, timed_out_names(kNamedInLog, true)));
  }
  if (v.causes.has(WatchdogCause::overload)) {
    add(fmt::format("overload: {} in flight of a ceiling of {}", o.in_flight, o.ceiling));
  }
  return out;
}

// The causes for STATUS=, the timed-out backends named: "timeout_rate on 10.0.0.1:80, ...".
std::string WatchdogThread::causes_text(const resilience::WatchdogVerdict& v) const {
  std::string out = v.causes.to_string();
  if (!v.causes.has(resilience::WatchdogCause::timeout_rate)) return out;
  const std::string names = timed_out_names(kNamedInStatus, false);
  const std::string_view label = resilience::kWatchdogCauseLabels[static_cast<std::size_t>(
      resilience::WatchdogCause::timeout_rate)];
  return out.insert(out.find(label) + label.size(), " on " + names);
}

// The backends that timed out in the last window: "10.0.0.1:80 (18 of 20), ..." (`counts`) or
// "10.0.0.1:80, ...", at most `at_most` of them, then how many more.
std::string WatchdogThread::timed_out_names(std::size_t at_most, bool counts) const {
  std::string out;
  std::size_t named = 0;
  std::size_t more = 0;
  for (std::size_t i = 0; i < windows_.size(); ++i) {
    if (!decisions_->timed_out(windows_[i])) continue;
    if (named == at_most) {
      ++more;
      continue;
    }
    if (named++ != 0) out += ", ";
    out += addresses_[i];
    if (counts) out += fmt::format(" ({} of {})", windows_[i].timeouts, windows_[i].settled);
  }
  if (more != 0) out += fmt::format(" and {} more", more);
  return out;
}

WatchdogThread::WatchdogThread(std::vector<proxy::Reactor*> reactors, PressureSource pressure,
                               const Notifier& notifier, const Clock& clock)
    : reactors_(std::move(reactors)),
      pressure_(std::move(pressure)),
      notifier_(notifier),
      clock_(clock),
      systemd_interval_(notifier.watchdog_interval()),
      ping_sent_(reactors_.size()),
      unanswered_(reactors_.size()) {}

WatchdogThread::~WatchdogThread() {
  stop();
}

void WatchdogThread::configure(const resilience::WatchdogParams& params,
                               const proxy::Snapshot& active) {
  if (stopped_) return;
  Pending next{.params = params, .backends = {}};
  if (params.enabled) {
    for (const auto& up : active.upstreams) {
      next.backends.insert(next.backends.end(), up->backends.begin(), up->backends.end());
    }
  }
  {
    const std::lock_guard lock(mutex_);
    pending_ = std::move(next);
  }
  wake_.notify_all();
  if (thread_.joinable() || (!params.enabled && systemd_interval_.count() == 0)) return;
  if (systemd_interval_.count() > 0) {
    spdlog::info("systemd watchdog: WATCHDOG=1 every {} ms while every reactor turns",
                 systemd_interval_.count() / 2000);
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    spdlog::error("watchdog: cannot start its thread ({}); it does not run", e.what());
  }
}

void WatchdogThread::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  reap();
  for (const pid_t pid : children_) {
    spdlog::warn(
        "watchdog: restart_command (pid {}) is still running; floodgate does not wait "
        "for it",
        pid);
  }
  children_.clear();
}

void WatchdogThread::run() {
  Clock::time_point next_tick = clock_.now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (pending_) {
      Pending pending = std::move(*pending_);
      pending_.reset();
      lock.unlock();
      apply(std::move(pending), clock_.now());
      lock.lock();
      continue;
    }
    const Clock::time_point now = clock_.now();
    const Clock::time_point due = params_.enabled ? std::min(next_tick, next_check_) : next_tick;
    if (now >= due) {
      lock.unlock();
      tick(now);
      next_tick = now + period();
      lock.lock();
      continue;
    }
    wake_.wait_for(lock, due - now);  // woken early by configure() and stop()
  }
}

void WatchdogThread::apply(Pending pending, Clock::time_point now) {
  const resilience::WatchdogParams& params = pending.params;
  const bool was_enabled = decisions_ && params_.enabled;
  const bool new_interval = params.check_interval != params_.check_interval;
  const bool could_time_out = was_enabled && addresses_.size() >= params_.min_timeout_spread;
  params_ = params;
  if (!decisions_) decisions_.emplace(params, clock_);
  watch(std::move(pending.backends));  // none while disabled
  if (!params.enabled) {
    if (decisions_->draining()) end_drain("the watchdog was turned off");
    decisions_->reset();
    decisions_->set_params(params);
    return;
  }
  if (decisions_->set_params(params)) end_drain("restart_command was removed");
  if (!was_enabled || new_interval) {  // a window starts now
    start_window();
    next_check_ = now + params.check_interval;
  }
  if (!was_enabled) {
    spdlog::info(
        "watchdog: checking every {} ms (poll_stall_timeout {} ms, timeouts >= {}% of >= {} "
        "attempts on each of >= {} backends, in flight >= {}% of the ceiling; acts after {} "
        "unhealthy checks: {})",
        params.check_interval.count(), params.poll_stall_timeout.count(),
        params.timeout_error_rate_percent, params.min_requests_per_window,
        params.min_timeout_spread, params.overload_inflight_percent,
        params.unhealthy_consecutive_windows,
        params.restart_command.empty() ? "reports only, no restart_command" : "drains, restarts");
  }
  if (addresses_.size() < params.min_timeout_spread && (could_time_out || !was_enabled)) {
    spdlog::info(
        "watchdog: timeout_rate cannot hold: the upstreams have {} distinct backend "
        "address(es), fewer than min_timeout_spread = {} (timeouts on one backend are that "
        "backend's problem; set min_timeout_spread = 1 to judge a lone backend all the same)",
        addresses_.size(), params.min_timeout_spread);
  }
}

// Follows `backends` from now on: one that was followed already keeps its window's start, a
// new one starts its window now. Several pools' backends at one address are one address.
void WatchdogThread::watch(std::vector<std::shared_ptr<const proxy::Backend>> backends) {
  std::unordered_map<const proxy::Backend*, Counts> started;
  for (const Watched& w : watched_) started.emplace(w.backend.get(), w.start);
  std::unordered_set<const proxy::Backend*> seen;
  std::map<boost::asio::ip::tcp::endpoint, std::size_t> index;
  std::vector<Watched> next;
  addresses_.clear();
  for (std::shared_ptr<const proxy::Backend>& b : backends) {
    if (!seen.insert(b.get()).second) continue;
    const auto [at, added] = index.try_emplace(b->endpoint, addresses_.size());
    if (added) addresses_.push_back(b->address.text);
    const auto was = started.find(b.get());
    const Counts start = was != started.end() ? was->second : counts_of(*b);
    next.push_back(Watched{.backend = std::move(b), .address = at->second, .start = start});
  }
  watched_ = std::move(next);
  windows_.assign(addresses_.size(), {});
}

void WatchdogThread::start_window() {
  for (Watched& w : watched_) w.start = counts_of(*w.backend);
}

Clock::duration WatchdogThread::period() const {
  Clock::duration p = params_.enabled ? Clock::duration(params_.check_interval) : kIdlePeriod;
  if (systemd_interval_.count() > 0) p = std::min<Clock::duration>(p, systemd_interval_ / 4);
  return std::max<Clock::duration>(p, milliseconds(1));
}

void WatchdogThread::tick(Clock::time_point now) {
  if (params_.enabled || systemd_interval_.count() > 0) ping_all(now);
  if (params_.enabled && now >= next_check_) judge(now);
  keep_alive(now);
  reap();
}

void WatchdogThread::ping_all(Clock::time_point now) {
  for (std::size_t i = 0; i < reactors_.size(); ++i) {
    if (reactors_[i]->ping()) {  // the previous one was answered
      ping_sent_[i] = now;
      unanswered_[i] = Clock::duration::zero();
    } else {
      unanswered_[i] = now - ping_sent_[i];
    }
  }
}

// An attempt ends with a final response head (responses) or a failure (failures); one cut
// after its head counts under both, which only ever lowers its backend's timeout share. Each
// counter is read once, so the timeouts are among the attempts counted, in every window.
WatchdogThread::Counts WatchdogThread::counts_of(const proxy::Backend& b) {
  Counts c;
  for (unsigned r = 0; r < b.reactors; ++r) {
    const proxy::Backend::Stats& s = b.stats[r];
    for (const Counter& n : s.responses) c.settled += n.value();
    for (std::size_t k = 0; k < s.failures.size(); ++k) {
      const uint64_t n = s.failures[k].value();
      c.settled += n;
      if (k == kConnectTimeout || k == kResponseTimeout) c.timeouts += n;
    }
  }
  return c;
}

uint64_t WatchdogThread::awaiting() const {
  uint64_t n = 0;
  for (const proxy::Reactor* r : reactors_) {
    n += static_cast<uint64_t>(std::max<int64_t>(0, r->metrics().awaiting_backend.value()));
  }
  return n;
}

void WatchdogThread::judge(Clock::time_point now) {
  std::fill(windows_.begin(), windows_.end(), resilience::WatchdogBackendWindow{});
  for (Watched& w : watched_) {
    const Counts c = counts_of(*w.backend);
    resilience::WatchdogBackendWindow& window = windows_[w.address];
    window.settled += c.settled - w.start.settled;
    window.timeouts += c.timeouts - w.start.timeouts;
    w.start = c;
  }
  const Pressure pressure = pressure_ ? pressure_() : Pressure{};
  const resilience::WatchdogObservation o{.unanswered = unanswered_,
                                          .backends = windows_,
                                          .in_flight = pressure.ceiling != 0 ? awaiting() : 0,
                                          .ceiling = pressure.ceiling};
  next_check_ += params_.check_interval;
  if (next_check_ <= now) next_check_ = now + params_.check_interval;
  const resilience::WatchdogVerdict v = decisions_->observe(o);
  for (std::size_t i = 0; i < resilience::kWatchdogCauses; ++i) {
    if (v.causes.has(static_cast<resilience::WatchdogCause>(i))) {
      counters_.unhealthy[i].fetch_add(1, std::memory_order_relaxed);
    }
  }
  // One line when a streak begins, none for the windows of an episode already reported.
  if (v.consecutive == 1 && v.action == resilience::WatchdogAction::none &&
      !decisions_->draining() && !reported_) {
    spdlog::info("watchdog: unhealthy check ({}); it acts after {} in a row", details(v, o),
                 params_.unhealthy_consecutive_windows);
  }
  if (v.causes.empty() && reported_) {
    reported_ = false;
    spdlog::info("watchdog: healthy again");
    notifier_.status("serving; watchdog: healthy again");
  }
  switch (v.action) {
    case resilience::WatchdogAction::none:
      break;
    case resilience::WatchdogAction::report:
      report(v, o);
      break;
    case resilience::WatchdogAction::drain:
      spdlog::warn(
          "watchdog: {} unhealthy checks in a row ({}): draining; restart_command runs "
          "in {} ms",
          v.consecutive, details(v, o), params_.drain_grace.count());
      begin_drain(v);
      break;
    case resilience::WatchdogAction::restart:
      restart();
      break;
  }
}

void WatchdogThread::report(const resilience::WatchdogVerdict& v,
                            const resilience::WatchdogObservation& o) {
  counters_.reports.fetch_add(1, std::memory_order_relaxed);
  if (reported_) return;  // the same episode: said once, until a healthy window ends it
  reported_ = true;
  spdlog::warn("watchdog: {} unhealthy checks in a row ({}); {}", v.consecutive, details(v, o),
               params_.restart_command.empty()
                   ? "no restart_command: reporting only"
                   : "restart_command ran less than restart_cooldown ago: reporting only");
  notifier_.status("serving; watchdog: unhealthy (" + causes_text(v) + "), reporting only");
}

void WatchdogThread::begin_drain(const resilience::WatchdogVerdict& v) {
  drain_causes_.store(v.causes.bits(), std::memory_order_release);
  for (proxy::Reactor* r : reactors_) r->pause_accepting(true);
  counters_.drains.fetch_add(1, std::memory_order_relaxed);
  notifier_.status("draining: watchdog (" + causes_text(v) + "); restart_command in " +
                   std::to_string(params_.drain_grace.count()) + " ms");
}

void WatchdogThread::end_drain(const std::string& why) {
  for (proxy::Reactor* r : reactors_) r->pause_accepting(false);
  drain_causes_.store(0, std::memory_order_release);
  reported_ = false;
  spdlog::info("watchdog: {}; accepting connections again", why);
  notifier_.status("serving; watchdog: " + why);
}

void WatchdogThread::restart() {
  const std::vector<std::string>& argv = params_.restart_command;
  counters_.restarts.fetch_add(1, std::memory_order_relaxed);
  pid_t pid = 0;
  if (const int rc = argv.empty() ? ENOENT : spawn(argv, pid); rc != 0) {
    counters_.restart_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("watchdog: cannot run restart_command [{}]: {}", joined(argv), error_text(rc));
    end_drain("restart_command could not run");
    return;
  }
  children_.push_back(pid);
  spdlog::warn("watchdog: drain_grace over: ran restart_command [{}] (pid {})", joined(argv), pid);
  end_drain("restart_command ran (pid " + std::to_string(pid) + ")");
}

void WatchdogThread::reap() {
  std::erase_if(children_, [this](pid_t pid) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == 0) return false;  // still running
    if (r < 0) return true;    // not ours any more (ECHILD): nothing to wait for
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      spdlog::info("watchdog: restart_command (pid {}) exited with status 0", pid);
      return true;
    }
    counters_.restart_failures.fetch_add(1, std::memory_order_relaxed);
    if (WIFEXITED(status)) {
      spdlog::warn("watchdog: restart_command (pid {}) exited with status {}", pid,
                   WEXITSTATUS(status));
    } else {
      spdlog::warn("watchdog: restart_command (pid {}) was killed by signal {}", pid,
                   WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    return true;
  });
}

void WatchdogThread::keep_alive(Clock::time_point now) {
  if (systemd_interval_.count() == 0 || now < next_keep_alive_) return;
  const Clock::duration fresh_for =
      std::min<Clock::duration>(params_.poll_stall_timeout, systemd_interval_ / 2);
  const auto stalled = std::find_if(unanswered_.begin(), unanswered_.end(),
                                    [&](Clock::duration d) { return d >= fresh_for; });
  if (stalled == unanswered_.end()) {
    notifier_.keep_alive();
    next_keep_alive_ = now + systemd_interval_ / 2;
    if (withheld_) spdlog::info("systemd watchdog: every reactor turns again; WATCHDOG=1 resumed");
    withheld_ = false;
    return;
  }
  if (!withheld_) {
    spdlog::warn(
        "systemd watchdog: reactor {} has not turned for {} ms: WATCHDOG=1 withheld (systemd "
        "restarts floodgate once WatchdogSec= passes without one)",
        stalled - unanswered_.begin(), ms(*stalled));
  }
  withheld_ = true;
}

void WatchdogThread::render_metrics(PrometheusWriter& w) const {
  constexpr std::string_view kWindows = "floodgate_watchdog_unhealthy_windows_total";
  w.header(kWindows,
           "Watchdog checks (resilience.watchdog) found unhealthy, by cause; a check with "
           "several causes counts under each.",
           MetricType::counter);
  for (std::size_t i = 0; i < resilience::kWatchdogCauses; ++i) {
    const Label labels[] = {{"cause", resilience::kWatchdogCauseLabels[i]}};
    w.sample(kWindows, labels, counters_.unhealthy[i].load(std::memory_order_relaxed));
  }
  w.header("floodgate_watchdog_reports_total",
           "Times the watchdog reached unhealthy_consecutive_windows and only reported (no "
           "restart_command, or inside restart_cooldown).",
           MetricType::counter);
  w.sample("floodgate_watchdog_reports_total", {},
           counters_.reports.load(std::memory_order_relaxed));
  w.header("floodgate_watchdog_drains_total",
           "Drains the watchdog started (listeners paused, /healthz 503) before restart_command.",
           MetricType::counter);
  w.sample("floodgate_watchdog_drains_total", {}, counters_.drains.load(std::memory_order_relaxed));
  w.header("floodgate_watchdog_restarts_total",
           "Times the watchdog ran restart_command (at the end of a drain).", MetricType::counter);
  w.sample("floodgate_watchdog_restarts_total", {},
           counters_.restarts.load(std::memory_order_relaxed));
  w.header("floodgate_watchdog_restart_failures_total",
           "restart_command runs that could not start, exited non-zero or were killed.",
           MetricType::counter);
  w.sample("floodgate_watchdog_restart_failures_total", {},
           counters_.restart_failures.load(std::memory_order_relaxed));
  w.header("floodgate_watchdog_draining", "1 while the watchdog's drain is in progress.",
           MetricType::gauge);
  w.sample("floodgate_watchdog_draining", {},
           uint64_t{drain_causes_.load(std::memory_order_relaxed) != 0 ? 1U : 0U});
}

}  // namespace floodgate::app
