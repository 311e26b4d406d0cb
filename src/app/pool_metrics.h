// The pool admission and per-backend families of /metrics (docs/metrics.md): gauges read from
// each pool's shared Admission and Backend counts, counters and the queue-wait histogram
// summed over the reactors' shards. Main thread (the admin listener), at scrape time.
#pragma once

#include <span>

#include "floodgate/metrics/prometheus.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::app {

// The pools of `serving` (the generation every reactor runs), labelled by upstream name.
void render_pool_metrics(PrometheusWriter& w, const proxy::Snapshot& serving,
                         std::span<const ReactorMetrics* const> shards);
// Circuit breakers, retries, the retry budgets and hedging (part of render_pool_metrics).
// floodgate_backend_*: each backend's responses, times, bytes, connections and aborts, the
// reactors' counts summed (HAProxy's per-server statistics).
void render_backend_metrics(PrometheusWriter& w, const proxy::Snapshot& serving);
void render_failure_metrics(PrometheusWriter& w, const proxy::Snapshot& serving,
                            std::span<const ReactorMetrics* const> shards);
// Adaptive admission, brownout and the route caps (part of render_pool_metrics).
void render_protection_metrics(PrometheusWriter& w, const proxy::Snapshot& serving,
                               std::span<const ReactorMetrics* const> shards);
// The scoped rate limits, labelled by rule name (part of render_pool_metrics).
void render_rate_limit_metrics(PrometheusWriter& w, const proxy::Snapshot& serving);
// The distributed quota, and the reactors' Redis links (`links`, one set per reactor).
void render_quota_metrics(PrometheusWriter& w, const proxy::Snapshot& serving,
                          std::span<const redis::LinkStats* const> links);

}  // namespace floodgate::app
