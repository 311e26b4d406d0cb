// WatchdogThread: the watchdog of issue 14 ([resilience.watchdog]; docs/operations.md,
// "Watchdog") and systemd's WATCHDOG=1 keep-alive, on one thread of their own, never a
// reactor's.
//
// What it watches, every tick:
//   - each reactor's heartbeat: it sends the reactor's embedded ping (Reactor::ping) unless the
//     previous one is unanswered, and times how long an unanswered one has waited. An idle
//     reactor, blocked in the kernel, answers at once (the ping wakes it); only a loop that
//     does not turn leaves a ping waiting. No allocation per ping on either side;
//   - at the end of each check_interval (when [resilience.watchdog] is enabled): per distinct
//     backend address of the active generation, the attempts at it that ended in the window
//     and the connect and response timeouts among them (each Backend's per-reactor Stats,
//     summed as /metrics sums them: floodgate_backend_responses_total and
//     floodgate_backend_failures_total; a backend that several pools list is one address), and
//     the requests waiting on a backend (sent whole, no response head yet:
//     ReactorMetrics::awaiting_backend) against the ceiling (a PressureSource). A request
//     waiting on its client (a slow upload, a slow reader) is no sign of a wedged process and
//     is not counted. The request path writes these counters anyway; this thread only reads
//     them (relaxed loads), so judging costs the reactors nothing.
// The window goes to resilience::Watchdog, which decides; this class acts:
//   - drain: every reactor stops accepting (Reactor::pause_accepting: the listeners refuse new
//     connections, established ones and requests in flight carry on), /healthz answers 503
//     (drain_causes()), sd_notify STATUS= names the causes;
//   - restart: runs restart_command with posix_spawn (no shell, argv as configured, stdin
//     /dev/null, stdout and stderr both floodgate's stderr, i.e. the process log's stream; no
//     other descriptor inherited; default signal mask and SIGPIPE disposition), then stops
//     draining. The child is reaped by this thread (waitpid WNOHANG every tick) and its exit
//     status logged; one still running when the thread stops is left to init;
//   - report: a warning and a STATUS= line, once per episode (until a healthy window), so a
//     lasting problem does not flood the log.
// Under systemd with WatchdogSec= (WATCHDOG_USEC), it sends WATCHDOG=1 every half interval
// while every reactor is fresh (no ping unanswered for min(poll_stall_timeout, half the
// interval)), whether [resilience.watchdog] is enabled or not: a wedged process is then
// restarted by systemd.
//
// Thread-safety: construct, configure() and stop() on the main thread; drain_causes() and
// render_metrics() from any thread (atomics). The reactors, the PressureSource's targets and
// the Notifier must outlive stop(); the destructor stops. The backends of the generation last
// configured are kept alive (shared_ptr) until the next configure(). stop() is final (the shutdown
// drain calls it, so a reactor that ended its loop is never taken for a stalled one).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/metrics/prometheus.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/watchdog.h"
#include "notify.h"

namespace floodgate::app {

class WatchdogThread {
 public:
  // The ceiling requests are admitted under, which the overload cause compares the requests
  // waiting on a backend with (0 = none: no overload cause). Called on the watchdog thread once
  // per window.
  struct Pressure {
    uint64_t ceiling = 0;
  };
  using PressureSource = std::function<Pressure()>;

  WatchdogThread(std::vector<proxy::Reactor*> reactors, PressureSource pressure,
                 const Notifier& notifier, const Clock& clock = Clock::steady());
  ~WatchdogThread();
  WatchdogThread(const WatchdogThread&) = delete;
  WatchdogThread& operator=(const WatchdogThread&) = delete;

  // The active generation's [resilience.watchdog] and backends (start, reload, rollback).
  // Starts the thread the first time it is needed (enabled, or systemd expects keep-alives);
  // the thread takes the new parameters at once. Turning the watchdog off ends a drain in
  // progress. A backend the previous generation had too keeps its window's counts.
  void configure(const resilience::WatchdogParams& params, const proxy::Snapshot& active);
  // Ends the thread (it wakes at once; joins). No drain, restart or keep-alive after it.
  void stop();

  // The causes of the watchdog's drain in progress; empty when there is none.
  resilience::WatchdogCauses drain_causes() const {
    return resilience::WatchdogCauses::from_bits(drain_causes_.load(std::memory_order_acquire));
  }

  // floodgate_watchdog_* (docs/metrics.md).
  void render_metrics(PrometheusWriter& w) const;

 private:
  // Counts read by the scrape; relaxed: each is a monotonic count, read alone.
  struct Counters {
    std::array<std::atomic<uint64_t>, resilience::kWatchdogCauses> unhealthy{};
    std::atomic<uint64_t> reports{0};
    std::atomic<uint64_t> drains{0};
    std::atomic<uint64_t> restarts{0};
    std::atomic<uint64_t> restart_failures{0};
  };
  // What configure() hands the thread.
  struct Pending {
    resilience::WatchdogParams params;
    std::vector<std::shared_ptr<const proxy::Backend>> backends;  // none while disabled
  };
  // One backend's attempts that ended, ever, and the timeouts among them.
  struct Counts {
    uint64_t settled = 0;
    uint64_t timeouts = 0;
  };
  // A backend of the configured generation, as this thread follows it.
  struct Watched {
    std::shared_ptr<const proxy::Backend> backend;
    std::size_t address = 0;  // index into addresses_ and windows_
    Counts start;             // its counts when this window began
  };

  void run();
  void apply(Pending pending, Clock::time_point now);
  void watch(std::vector<std::shared_ptr<const proxy::Backend>> backends);
  void start_window();
  void tick(Clock::time_point now);
  void ping_all(Clock::time_point now);
  void judge(Clock::time_point now);
  void keep_alive(Clock::time_point now);
  static Counts counts_of(const proxy::Backend& b);
  uint64_t awaiting() const;
  Clock::duration period() const;
  std::string details(const resilience::WatchdogVerdict& v,
                      const resilience::WatchdogObservation& o) const;
  std::string causes_text(const resilience::WatchdogVerdict& v) const;
  std::string timed_out_names(std::size_t at_most, bool counts) const;
  void begin_drain(const resilience::WatchdogVerdict& v);
  void end_drain(const std::string& why);
  void report(const resilience::WatchdogVerdict& v, const resilience::WatchdogObservation& o);
  void restart();
  void reap();

  const std::vector<proxy::Reactor*> reactors_;
  const PressureSource pressure_;
  const Notifier& notifier_;
  const Clock& clock_;
  const std::chrono::microseconds systemd_interval_;  // WATCHDOG_USEC; 0 = no keep-alive

  // The main thread hands parameters and the stop to the thread under the mutex.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Pending> pending_;  // guarded by mutex_
  bool stopping_ = false;           // guarded by mutex_
  bool stopped_ = false;            // main thread: stop() ran
  std::thread thread_;

  // The thread's own state (before start and after join: the main thread's).
  resilience::WatchdogParams params_;
  std::optional<resilience::Watchdog> decisions_;
  std::vector<Clock::time_point> ping_sent_;  // per reactor: its last ping
  std::vector<Clock::duration> unanswered_;   // per reactor: how long it has waited
  std::vector<Watched> watched_;              // the backends (empty while disabled)
  std::vector<std::string> addresses_;        // per distinct address: its text, for the log
  std::vector<resilience::WatchdogBackendWindow> windows_;  // per address: the last window's
  Clock::time_point next_check_{};                          // the end of this window
  Clock::time_point next_keep_alive_{};
  bool withheld_ = false;        // a keep-alive is being withheld for a stalled reactor
  bool reported_ = false;        // an unhealthy episode was reported; a healthy window ends it
  std::vector<pid_t> children_;  // restart commands not reaped yet

  std::atomic<uint8_t> drain_causes_{0};  // read by /healthz on the main thread
  Counters counters_;
};

}  // namespace floodgate::app
