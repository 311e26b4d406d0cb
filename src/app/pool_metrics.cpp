#include "pool_metrics.h"

#include <cstdint>

namespace floodgate::app {
namespace {

using Shards = std::span<const ReactorMetrics* const>;

template <class Get>
uint64_t sum(Shards shards, Get get) {
  uint64_t total = 0;
  for (const ReactorMetrics* shard : shards) total += get(*shard);
  return total;
}

}  // namespace

void render_pool_metrics(PrometheusWriter& w, const proxy::Snapshot& serving, Shards shards) {
  const auto& pools = serving.upstreams;
  // One sample per pool, labelled by its name.
  auto per_pool = [&](std::string_view name, std::string_view help, MetricType type, auto value) {
    w.header(name, help, type);
    for (const auto& up : pools) {
      const Label labels[] = {{"upstream", up->params.name}};
      w.sample(name, labels, value(*up));
    }
  };
  auto gauge = [&](std::string_view name, std::string_view help, auto value) {
    per_pool(name, help, MetricType::gauge, value);
  };
  // A per-pool counter of the reactors' shards, summed.
  auto counter = [&](std::string_view name, std::string_view help, auto get) {
    per_pool(name, help, MetricType::counter, [&](const proxy::Upstream& up) {
      return sum(shards, [&](const ReactorMetrics& m) { return get(m, up.id).value(); });
    });
  };
  // A gauge with one sample per peer, labelled by pool and address.
  auto peer_gauge = [&](std::string_view name, std::string_view help, auto value) {
    w.header(name, help, MetricType::gauge);
    for (const auto& up : pools) {
      for (const auto& b : up->backends) {
        const Label labels[] = {{"upstream", up->params.name}, {"peer", b->address.text}};
        w.sample(name, labels, value(*b));
      }
    }
  };
  gauge("floodgate_pool_active",
        "Requests holding a slot of the pool (admitted and not finished), on all reactors.",
        [](const proxy::Upstream& up) { return up.pool->admission.active(); });
  gauge("floodgate_pool_pending", "Requests waiting in the pool's admission queue.",
        [](const proxy::Upstream& up) { return up.pool->admission.pending(); });
  gauge("floodgate_pool_limit", "The pool's max_active_requests (0 = unlimited).",
        [](const proxy::Upstream& up) { return uint64_t{up.pool->admission.limit()}; });

  counter(
      "floodgate_pool_admitted_total",
      "Requests that got a slot of the pool, at once or after waiting.",
      [](const ReactorMetrics& m, uint32_t id) -> const Counter& { return m.pool_admitted(id); });

  constexpr std::string_view kRejected = "floodgate_pool_rejected_total";
  w.header(kRejected,
           "Requests the pool turned away with 503, by X-Floodgate-Reason: proxy_overloaded, "
           "pending_timeout, generation_retired, no_eligible_backend.",
           MetricType::counter);
  for (const auto& up : pools) {
    for (std::size_t r = 0; r < kPoolRejections.size(); ++r) {
      const Label labels[] = {{"upstream", up->params.name},
                              {"reason", info(kPoolRejections[r]).name}};
      w.sample(kRejected, labels, sum(shards, [&](const ReactorMetrics& m) {
                 return m.pool_rejected(up->id, r).value();
               }));
    }
  }

  counter(
      "floodgate_pool_queue_abandoned_total",
      "Clients that went away while their request waited in the pool's queue.",
      [](const ReactorMetrics& m, uint32_t id) -> const Counter& { return m.pool_abandoned(id); });

  constexpr std::string_view kWait = "floodgate_pool_queue_wait_seconds";
  w.header(kWait,
           "Time requests spent in the pool's admission queue, observed when they left it "
           "(granted, timed out, retired or abandoned).",
           MetricType::histogram);
  for (const auto& up : pools) {
    HistogramTotals totals;
    for (const ReactorMetrics* shard : shards) totals.add(shard->pool_queue_wait(up->id));
    const Label labels[] = {{"upstream", up->params.name}};
    w.histogram(kWait, labels, totals);
  }

  peer_gauge("floodgate_upstream_peer_up",
             "1 if the peer may get requests, 0 if active health checks marked it down (peers "
             "of pools without [upstreams.health] are always 1).",
             [](const proxy::Backend& b) {
               return uint64_t{b.health->down.load(std::memory_order_relaxed) ? 0U : 1U};
             });

  constexpr std::string_view kProbes = "floodgate_health_probes_total";
  w.header(kProbes, "Completed health probes by result: success, failure, timeout, malformed.",
           MetricType::counter);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      for (std::size_t r = 0; r < kProbeResults; ++r) {
        const Label labels[] = {{"upstream", up->params.name},
                                {"peer", b->address.text},
                                {"result", kProbeResultNames[r]}};
        w.sample(kProbes, labels, b->health->probes[r].load(std::memory_order_relaxed));
      }
    }
  }

  peer_gauge("floodgate_backend_active",
             "Requests in flight on each backend of the pool, on all reactors.",
             [](const proxy::Backend& b) { return b.load.active.load(std::memory_order_relaxed); });
}

}  // namespace floodgate::app
