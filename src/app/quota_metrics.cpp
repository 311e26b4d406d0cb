// The distributed quota's families of /metrics (docs/metrics.md): decisions per policy of the
// serving generation by outcome (labels bounded by the configuration; identities never appear),
// decisions by the backend that made them, the tables' live buckets, and the reactors' Redis
// links summed.
#include <array>
#include <string_view>

#include "pool_metrics.h"

namespace floodgate::app {

void render_quota_metrics(PrometheusWriter& w, const proxy::Snapshot& serving,
                          std::span<const redis::LinkStats* const> links) {
  const proxy::Quota* q = serving.quota.get();
  if (q == nullptr) return;
  constexpr std::string_view kDecisions = "floodgate_quota_decisions_total";
  w.header(kDecisions,
           "Quota decisions of each policy, by outcome: allowed, or the canonical reason of a "
           "denial or a backend failure (counted whatever enforcement and "
           "backend_failure_policy then did).",
           MetricType::counter);
  for (const proxy::QuotaPolicy& p : q->policies) {
    for (std::size_t i = 0; i < proxy::kQuotaOutcomes; ++i) {
      const auto o = static_cast<proxy::QuotaOutcome>(i);
      const Label labels[] = {{"policy", p.params.name}, {"outcome", proxy::label(o)}};
      w.sample(kDecisions, labels, p.counts->total(o));
    }
  }
  constexpr std::string_view kModes = "floodgate_quota_backend_decisions_total";
  w.header(kModes,
           "Quota decisions by who made them: in_memory, redis, fallback (the local fallback, a "
           "degraded decision), failed (nobody could: backend_failure_policy applied).",
           MetricType::counter);
  for (std::size_t i = 0; i < proxy::kQuotaModes; ++i) {
    const auto m = static_cast<proxy::QuotaMode>(i);
    const Label labels[] = {{"backend", proxy::label(m)}};
    w.sample(kModes, labels, q->state->total(m));
  }
  constexpr std::string_view kBuckets = "floodgate_quota_buckets";
  w.header(kBuckets,
           "Live buckets of the per-process quota tables: in_memory (at most 4096) and the local "
           "fallback's (at most local_fallback.max_entries).",
           MetricType::gauge);
  const std::array<std::pair<std::string_view, const resilience::QuotaTable*>, 2> tables{
      {{"in_memory", q->table.get()}, {"fallback", q->fallback.get()}}};
  for (const auto& [name, table] : tables) {
    if (table == nullptr) continue;
    const Label labels[] = {{"table", name}};
    w.sample(kBuckets, labels, uint64_t{table->live()});
  }
  if (!q->redis()) return;

  auto counter = [&](std::string_view name, std::string_view help, auto field) {
    w.header(name, help, MetricType::counter);
    uint64_t sum = 0;
    for (const redis::LinkStats* s : links) sum += (s->*field).value();
    w.sample(name, {}, sum);
  };
  auto gauge = [&](std::string_view name, std::string_view help, auto field) {
    w.header(name, help, MetricType::gauge);
    int64_t sum = 0;
    for (const redis::LinkStats* s : links) sum += (s->*field).load(std::memory_order_relaxed);
    w.sample(name, {}, sum);
  };
  gauge("floodgate_quota_redis_links_ready",
        "Reactors whose link to Redis is connected and ready (one link per reactor).",
        &redis::LinkStats::ready);
  gauge("floodgate_quota_redis_inflight", "Quota decisions queued or in flight to Redis.",
        &redis::LinkStats::inflight);
  counter("floodgate_quota_redis_connects_total", "Connections opened to Redis (attempts).",
          &redis::LinkStats::connects);
  counter("floodgate_quota_redis_connect_failures_total",
          "Connects or handshakes (AUTH, SELECT, SCRIPT LOAD) to Redis that failed; each opens "
          "the link's breaker for its backoff.",
          &redis::LinkStats::connect_failures);
  counter("floodgate_quota_redis_disconnects_total",
          "Ready connections to Redis that were lost (closed, reset, or stalled past "
          "command_timeout).",
          &redis::LinkStats::disconnects);
  counter("floodgate_quota_redis_script_loads_total",
          "SCRIPT LOAD commands sent (one per connection, and one per NOSCRIPT reload).",
          &redis::LinkStats::script_loads);
  counter("floodgate_quota_redis_noscript_total",
          "NOSCRIPT replies (the script was flushed from Redis), each followed by a reload and a "
          "resend.",
          &redis::LinkStats::noscript);
  counter("floodgate_quota_redis_timeouts_total",
          "Quota decisions Redis did not answer within command_timeout.",
          &redis::LinkStats::timeouts);
  counter("floodgate_quota_redis_errors_total",
          "Quota decisions that failed with an error (an error reply, or a reply that broke the "
          "protocol).",
          &redis::LinkStats::errors);
  counter("floodgate_quota_redis_refused_total",
          "Quota decisions the link refused at once: its breaker open, a probe under way, or "
          "max_inflight reached.",
          &redis::LinkStats::refused);
  constexpr std::string_view kLatency = "floodgate_quota_redis_latency_seconds";
  w.header(kLatency, "Time from sending a quota decision to Redis to its reply.",
           MetricType::histogram);
  HistogramTotals totals;
  for (const redis::LinkStats* s : links) totals.add(s->latency);
  w.histogram(kLatency, {}, totals);
}

}  // namespace floodgate::app
