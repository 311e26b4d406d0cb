// The running floodgate: its reactors, admin listener, signals, configuration generations and
// shutdown sequence (Process), split by concern:
//   process.cpp      start-up, the main loop, signals, draining and shutdown
//   reload.cpp       validating and activating a configuration, listeners, retirement
//   control_api.cpp  the control API (docs/operations.md)
//   status.cpp       GET /status, /metrics, and the figures logged at start and reload
// app.cpp holds `floodgate run` and the helpers below. Main thread only.
#pragma once

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_server.h"
#include "floodgate/config/config.h"
#include "floodgate/health/checker.h"
#include "floodgate/metrics/prometheus.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/resilience/memory_guard.h"
#include "generations.h"
#include "name_watcher.h"
#include "notify.h"
#include "shed_summary.h"
#include "watchdog.h"

namespace floodgate::app {

namespace asio = boost::asio;
using boost::system::error_code;

// True when the heap is glibc's malloc (floodgate_memory_* metrics, malloc_trim), false in a
// sanitizer build, whose allocator replaces it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif
#else
constexpr bool kGlibcHeap = true;
#endif

// server.workers, with 0 resolved to one reactor per core.
unsigned resolved_workers(const ServerParams& server);
spdlog::level::level_enum to_spdlog(LogLevel l);
// Prints "floodgate: <message>" to stderr; returns the exit status 1.
int fail(const std::string& message);
// What went wrong, for an operator: a system error's own text ("Permission denied", "Address
// already in use"), without the library's call name and source location; else e.what().
std::string reason_of(const std::exception& e);
std::string rfc3339(std::chrono::system_clock::time_point t);
// What the health task probes in `snap`: every peer of every pool (those of pools without
// [upstreams.health] only to be marked up and unprobed).
std::vector<health::Target> health_targets(const proxy::Snapshot& snap);
// The servers written as host names in pools with a resolve_interval (NameWatcher), once each.
std::vector<NameWatcher::Name> watched_names(const config::Config& c);
// GET /status: every pool of the serving generation with its admission figures and its peers'
// health, the in-flight cap and the memory guard.
boost::json::object status_json(const proxy::Snapshot& snap);

// Owns the running process: reactors, admin listener, signals, configuration generations and
// the shutdown sequence. Main thread only.
class Process {
 public:
  Process(Generations gens, const std::string& path)
      : gens_(std::move(gens)),
        start_(gens_.active().config),
        path_(path),
        access_log_(start_.log, resolved_workers(start_.server)),
        serving_(gens_.active().snapshot) {}

  int start();

  int run();

 private:
  struct Outcome {
    config::LoadResult validation;  // diagnostics (valid only when there are no errors)
    std::string error;              // a failure after validation (binding, resolving)
    uint64_t generation = 0;        // set when activated
  };

  // Validates `source`; with `activate`, builds and publishes it as the next generation.
  Outcome apply(const std::string& source, const std::string& origin, bool activate,
                std::function<void()> served = {});

  // Keys a running floodgate cannot change: they are refused with the reason, so the file is
  // never half applied.
  void restart_only_changes(const config::Config& next, const std::string& origin,
                            config::LoadResult& result);

  // Binds addresses `next` adds (on every reactor) and closes those it removes. Nothing
  // changes when a bind fails.
  bool apply_listeners(const config::Config& next, std::string& error);

  // Activates `next` and installs it everywhere; `reload` counts it in the reload metrics (a
  // re-resolution is not a reload).
  void publish(Generations::Entry next, std::function<void()> served, bool reload = true);

  // --- Backends by name: the answers of the NameWatcher (main thread). A changed set of
  // addresses becomes a new generation, derived from the active one; a failure keeps the
  // addresses the name had and is logged.
  void on_resolved(const NameWatcher::Name& name, config::Resolution r);
  struct ResolutionCounts {
    uint64_t changed = 0;
    uint64_t unchanged = 0;
    uint64_t failed = 0;
  };

  // Posts `snap` to every reactor; once all of them serve it, it is what GET /config reports
  // and `served` runs (main thread).
  void install_everywhere(const std::shared_ptr<const proxy::Snapshot>& snap,
                          std::function<void()> served);

  // --- Retirement: an old generation ends when its last request ends, or is forced after
  // server.retirement_grace (then requests on pools it alone had are ended).
  struct Retiring {
    std::weak_ptr<const proxy::Snapshot> snapshot;
    uint64_t generation;
    std::chrono::steady_clock::time_point deadline;
  };

  void track_retirement(const std::shared_ptr<const proxy::Snapshot>& old);

  void poll_retirement();

  // --- Control API (docs/operations.md) -----------------------------------------------------
  using Reply = std::function<void(AdminServer::Response)>;

  void control(const AdminServer::Request& req, const Reply& done);

  // POST /fault/...: the test-only fault hooks (fault_hooks.h; docs/operations.md, "Fault
  // hooks"), defined by fault_hooks.cpp in floodgate-faults and by no_fault_hooks.cpp (a 404)
  // in floodgate.
  void fault(const AdminServer::Request& req, const Reply& done);

  // The file's text, or the reason it cannot be read in `text`.
  bool read_config_file(std::string& text);

  // A reload from SIGHUP or the control API: validate, build, publish; log the outcome.
  // `served` runs once every reactor serves the new generation.
  Outcome reload(const std::string& source, const std::string& origin, std::string_view trigger,
                 const std::function<void(uint64_t)>& served = {});

  void wait_signal();

  void begin_drain(int sig);

  // The watchdog thread (watchdog.h), once the reactors run; install_everywhere() reconfigures
  // it, begin_drain() stops it.
  void start_watchdog();
  // What /healthz says while the watchdog drains ("" when it does not).
  std::string watchdog_drain_reason() const;

  void force();

  // The memory guard's sample, refreshed here on the main thread so that no reactor ever reads
  // a file: the sampler reads /proc/meminfo at most once a second (a procfs read never waits
  // for a disk), and the reactors see the result in one atomic load.
  void poll_memory();
  // Every net::TicketKeys::kPeriod: new TLS session ticket keys (net/ticket_keys.h).
  void rotate_ticket_keys();

  // The in-flight cap this generation resolved, logged at start and on reload.
  static void log_front(const proxy::Snapshot& snap, const config::Config& cfg);
  // At start: whether the host has swap, once the memory guard has its first sample.
  void log_swap(const resilience::MemoryGuardParams& guard);

  // The reactors give idle buffer blocks back to the allocator (Reactor::housekeep); glibc keeps
  // freed memory in each thread's arena, so when some were given back since the last look, the
  // main thread asks it to return free pages to the kernel. Off the reactors: malloc_trim()
  // walks every arena under its lock and makes system calls.
  void poll_trimmed();

  // Once a second: the scoped rate limits' buckets idle for their rule's idle_ttl are
  // reclaimed (off the reactors, which only look buckets up and add new ones).
  void sweep_rate_limits();

  // Every log.shed_summary_interval (read anew each time, so a reload applies at the next
  // tick): the refusals since the last tick in the process log (ShedSummary). Turned off, it
  // looks once a second whether a reload turned it on. Reads the reactors' counters only.
  void summarise_shedding();

  // Reactors end their threads when their last connection closes; the main loop ends then.
  void poll_done();

  void render_front_metrics(PrometheusWriter& w);
  // The standard process_* families and floodgate_build_info (process_metrics.cpp).
  void render_process_metrics(PrometheusWriter& w);

  void render_metrics(std::string& out);
  void render_resolution_metrics(PrometheusWriter& w);

  Generations gens_;
  const config::Config start_;  // the configuration floodgate started with
  std::string path_;
  proxy::AccessLog access_log_;
  asio::io_context io_{1};
  asio::signal_set signals_{io_};
  asio::steady_timer drain_timer_{io_};
  asio::steady_timer poll_timer_{io_};
  asio::steady_timer retire_timer_{io_};
  asio::steady_timer trim_timer_{io_};
  asio::steady_timer rate_timer_{io_};
  asio::steady_timer memory_timer_{io_};
  asio::steady_timer ticket_timer_{io_};
  asio::steady_timer shed_timer_{io_};
  resilience::MeminfoSampler sampler_{gens_.active().config.resilience.memory_guard,
                                      gens_.front().memory, Clock::steady()};
  uint64_t trimmed_seen_ = 0;  // buffer bytes the reactors had given back at the last malloc_trim
  ShedSummary shed_;
  // When shed_ last read the counters (the first read counts from start-up, from zero).
  std::chrono::steady_clock::time_point shed_read_at_ = std::chrono::steady_clock::now();
  std::optional<AdminServer> admin_;
  std::vector<std::unique_ptr<proxy::Reactor>> reactors_;
  health::Checker health_;  // probes the peers of pools with [upstreams.health]
  std::vector<Retiring> retiring_;
  std::shared_ptr<const proxy::Snapshot> serving_;  // installed on every reactor
  uint64_t publish_seq_ = 0;
  uint64_t reloads_ok_ = 0;
  uint64_t reloads_failed_ = 0;
  uint64_t rollbacks_ = 0;
  std::chrono::system_clock::time_point last_success_ = std::chrono::system_clock::now();
  const std::chrono::system_clock::time_point started_at_ = std::chrono::system_clock::now();
  bool draining_ = false;
  Notifier notifier_;
  // After the reactors and the notifier, so it ends first (stop(), at the latest here).
  std::optional<WatchdogThread> watchdog_;
  // floodgate_upstream_resolutions_total, by upstream name.
  std::map<std::string, ResolutionCounts> resolutions_;
  // After io_, so its timers go first; its worker ends in begin_drain(), at the latest here.
  NameWatcher names_{
      io_, config::resolve_server,
      [this](const NameWatcher::Name& n, config::Resolution r) { on_resolved(n, std::move(r)); }};
};

}  // namespace floodgate::app
