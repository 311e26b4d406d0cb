// Process: GET /status, /metrics, and the figures logged at start and reload (process.h).
#include "process.h"

#include <malloc.h>

#include <string>

#include "floodgate/core/heap_count.h"
#include "floodgate/proxy/front_stages.h"
#include "pool_metrics.h"

namespace floodgate::app {

void Process::log_front(const proxy::Snapshot& snap, const config::Config& cfg) {
  const resilience::InflightParams& in = cfg.resilience.inflight;
  if (snap.max_inflight == 0) {
    spdlog::info("in-flight cap: off (resilience.inflight.max_inflight = 0)");
  } else {
    spdlog::info("in-flight cap: {} requests (resilience.inflight.max_inflight = {}{})",
                 snap.max_inflight, in.automatic ? "auto" : std::to_string(in.max_inflight),
                 in.mode == resilience::Mode::shadow ? ", shadow mode" : "");
  }
  const resilience::AdaptiveAdmissionParams& a = cfg.resilience.adaptive_admission;
  const resilience::AimdLimits& aimd = snap.protection.aimd;
  if (!a.enabled) {
    spdlog::info("adaptive ceiling: off (resilience.adaptive_admission.enabled = false)");
  } else if (aimd.max == 0) {
    spdlog::info("adaptive ceiling: off (no front cap and max_limit = 0)");
  } else if (a.min_limit > aimd.min) {
    // A note, not a warning: both bounds may be defaults, and this comes at every start and
    // reload; `floodgate check` warns when the operator wrote a bound, the adaptive table or
    // the cap (src/config/protection_checks.cpp).
    spdlog::info("adaptive ceiling: {} to {} requests (min_limit {} taken as the maximum){}",
                 aimd.min, aimd.max, a.min_limit,
                 snap.protection.params.adaptive_admission.mode == resilience::Mode::shadow
                     ? ", shadow mode"
                     : "");
  } else {
    spdlog::info("adaptive ceiling: {} to {} requests{}", aimd.min, aimd.max,
                 snap.protection.params.adaptive_admission.mode == resilience::Mode::shadow
                     ? ", shadow mode"
                     : "");
  }
}

void Process::render_front_metrics(PrometheusWriter& w) {
  const proxy::FrontState& front = gens_.front();
  w.header("floodgate_inflight_requests",
           "Requests holding a slot of the front in-flight cap (resilience.inflight).",
           MetricType::gauge);
  w.sample("floodgate_inflight_requests", {}, static_cast<double>(front.inflight.in_flight()));
  w.header("floodgate_inflight_limit",
           "The front in-flight cap as resolved (0 = no cap; resilience.inflight.max_inflight).",
           MetricType::gauge);
  w.sample("floodgate_inflight_limit", {}, static_cast<uint64_t>(serving_->max_inflight));
  w.header("floodgate_memory_guard_available_bytes",
           "MemAvailable + SwapFree at the memory guard's last sample (resilience.memory_guard).",
           MetricType::gauge);
  w.sample("floodgate_memory_guard_available_bytes", {},
           static_cast<double>(front.memory.available_mib()) * 1024 * 1024);
  w.header("floodgate_memory_guard_floor_bytes",
           "Below this, writes are refused with 503 memory_pressure (0 = guard off).",
           MetricType::gauge);
  w.sample("floodgate_memory_guard_floor_bytes", {},
           static_cast<double>(front.memory.floor_mib()) * 1024 * 1024);
  w.header("floodgate_memory_guard_samples_total",
           "Reads of the memory guard's meminfo file (at most one a second).", MetricType::counter);
  w.sample("floodgate_memory_guard_samples_total", {}, front.memory.samples());
  w.header("floodgate_memory_guard_read_failures_total",
           "Reads of the meminfo file that failed or could not be parsed (the last sample "
           "stands).",
           MetricType::counter);
  w.sample("floodgate_memory_guard_read_failures_total", {}, front.memory.read_failures());
}

void Process::render_metrics(std::string& out) {
  std::vector<const ReactorMetrics*> shards;
  for (auto& r : reactors_) shards.push_back(&r->metrics());
  render_prometheus(shards, gens_.pool_names(), out);
  render_accept_errors(shards, out);
  render_tls(shards, out);
  render_http2(shards, out);
  PrometheusWriter w(out);
  if (admin_) {
    w.header("floodgate_admin_connections", "Open admin connections, this scrape's included.",
             MetricType::gauge);
    w.sample("floodgate_admin_connections", {}, static_cast<uint64_t>(admin_->open_connections()));
    w.header("floodgate_admin_connections_refused_total",
             "Admin connections answered 503 because the connection limit was reached.",
             MetricType::counter);
    w.sample("floodgate_admin_connections_refused_total", {}, admin_->refused_connections());
  }
  render_pool_metrics(w, *serving_, shards);
  std::vector<const redis::LinkStats*> links;
  for (auto& r : reactors_) links.push_back(&r->redis_stats());
  render_quota_metrics(w, *serving_, links);
  render_front_metrics(w);
  if (watchdog_) watchdog_->render_metrics(w);
  w.header("floodgate_access_log_dropped_total",
           "Access log lines dropped because the log queue was full.", MetricType::counter);
  w.sample("floodgate_access_log_dropped_total", {}, access_log_.dropped());
  w.header("floodgate_reactor_heap_allocations_total",
           "Heap allocations made on reactor threads: one per connection, none per request.",
           MetricType::counter);
  w.sample("floodgate_reactor_heap_allocations_total", {}, counted_heap_allocations());
  // glibc's view of the heap, all arenas (the way Envoy reports its allocator): what floodgate
  // has allocated, and what the allocator holds from the kernel for it. Not in sanitizer
  // builds, whose allocator glibc does not see.
  if constexpr (kGlibcHeap) {
    const struct mallinfo2 heap = ::mallinfo2();
    w.header("floodgate_memory_allocated_bytes",
             "Heap bytes floodgate has allocated now (glibc, all threads).", MetricType::gauge);
    w.sample("floodgate_memory_allocated_bytes", {},
             static_cast<uint64_t>(heap.uordblks + heap.hblkhd));
    w.header("floodgate_memory_heap_size_bytes",
             "Heap bytes the allocator holds from the kernel: allocated plus free for reuse.",
             MetricType::gauge);
    w.sample("floodgate_memory_heap_size_bytes", {},
             static_cast<uint64_t>(heap.arena + heap.hblkhd));
  }
  w.header("floodgate_config_generation", "The active configuration generation.",
           MetricType::gauge);
  w.sample("floodgate_config_generation", {}, static_cast<double>(serving_->generation));
  w.header("floodgate_config_reloads_total",
           "Reloads by result (SIGHUP and POST /config/activate; start-up not counted), and "
           "rollbacks (POST /config/rollback).",
           MetricType::counter);
  const Label ok[] = {{"result", "ok"}};
  const Label error[] = {{"result", "error"}};
  const Label rollback[] = {{"result", "rollback"}};
  w.sample("floodgate_config_reloads_total", ok, reloads_ok_);
  w.sample("floodgate_config_reloads_total", error, reloads_failed_);
  w.sample("floodgate_config_reloads_total", rollback, rollbacks_);
  w.header("floodgate_config_last_reload_success_timestamp_seconds",
           "When the active configuration was last loaded successfully (start-up included).",
           MetricType::gauge);
  w.sample("floodgate_config_last_reload_success_timestamp_seconds", {},
           std::chrono::duration<double>(last_success_.time_since_epoch()).count());
  render_resolution_metrics(w);
  render_process_metrics(w);
}

// Every pool that re-resolves names (resolve_interval), so that a series exists from the start.
void Process::render_resolution_metrics(PrometheusWriter& w) {
  std::vector<std::string> pools;
  for (const UpstreamParams& u : gens_.active().config.upstreams) {
    const bool names = std::any_of(u.servers.begin(), u.servers.end(),
                                   [](const ServerEntry& s) { return !s.resolved.empty(); });
    if (u.resolve_interval.count() > 0 && names) pools.push_back(u.name);
  }
  if (pools.empty()) return;
  w.header("floodgate_upstream_resolutions_total",
           "Re-resolutions of the servers written as host names (upstreams.resolve_interval), by "
           "result: changed (a new generation with the new addresses), unchanged, failed (the "
           "previous addresses kept).",
           MetricType::counter);
  for (const std::string& pool : pools) {
    const ResolutionCounts& c = resolutions_[pool];
    for (const auto& [result, n] : {std::pair<const char*, uint64_t>{"changed", c.changed},
                                    {"unchanged", c.unchanged},
                                    {"failed", c.failed}}) {
      const Label labels[] = {{"upstream", pool}, {"result", result}};
      w.sample("floodgate_upstream_resolutions_total", labels, n);
    }
  }
}

}  // namespace floodgate::app
