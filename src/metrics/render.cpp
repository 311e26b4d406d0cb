// render_prometheus: the ReactorMetrics families, summed over the reactors' shards.
#include <cstddef>
#include <cstdint>

#include "floodgate/metrics/prometheus.h"

namespace floodgate {
namespace {

using Shards = std::span<const ReactorMetrics* const>;
using Names = std::span<const std::string>;

std::string_view slot_label(Names names, std::size_t slot) {
  return slot == ReactorMetrics::kUnroutedSlot ? std::string_view{} : names[slot - 1];
}

void render_requests(PrometheusWriter& w, Shards shards, Names names) {
  constexpr std::string_view kName = "floodgate_requests_total";
  w.header(kName,
           "Requests answered, by upstream and status class; upstream=\"\" counts requests "
           "answered before routing.",
           MetricType::counter);
  for (std::size_t slot = 0; slot <= names.size(); ++slot) {
    for (std::size_t c = 0; c < kStatusClasses; ++c) {
      uint64_t total = 0;
      for (const ReactorMetrics* shard : shards) {
        if (slot < shard->slots()) {
          total += shard->requests(slot, c).value();
        }
      }
      const Label labels[] = {{"upstream", slot_label(names, slot)},
                              {"class", kStatusClassLabels[c]}};
      w.sample(kName, labels, total);
    }
  }
}

void render_durations(PrometheusWriter& w, Shards shards, Names names) {
  constexpr std::string_view kName = "floodgate_request_duration_seconds";
  w.header(kName, "Time from the first byte of a request to the end of its response, by upstream.",
           MetricType::histogram);
  for (std::size_t slot = 0; slot <= names.size(); ++slot) {
    HistogramTotals totals;
    for (const ReactorMetrics* shard : shards) {
      if (slot < shard->slots()) {
        totals.add(shard->duration(slot));
      }
    }
    const Label labels[] = {{"upstream", slot_label(names, slot)}};
    w.histogram(kName, labels, totals);
  }
}

// One unlabelled sample: a field of every reactor's shard, summed.
template <class Metric>
void render_sum(PrometheusWriter& w, Shards shards, std::string_view name, std::string_view help,
                MetricType type, const Metric ReactorMetrics::*field) {
  decltype((shards.front()->*field).value()) total = 0;
  for (const ReactorMetrics* shard : shards) total += (shard->*field).value();
  w.header(name, help, type);
  w.sample(name, {}, total);
}

void render_connections(PrometheusWriter& w, Shards shards) {
  render_sum(w, shards, "floodgate_client_connections", "Open client connections.",
             MetricType::gauge, &ReactorMetrics::client_connections);
  render_sum(w, shards, "floodgate_accepted_connections_total",
             "Client connections accepted, on all listeners.", MetricType::counter,
             &ReactorMetrics::accepted_connections);
  render_sum(w, shards, "floodgate_client_send_timeouts_total",
             "Client connections closed because the client took no byte of a response for "
             "server.send_timeout.",
             MetricType::counter, &ReactorMetrics::send_timeouts);
  render_sum(w, shards, "floodgate_client_opening_connections",
             "Client connections that have not completed their first request head (a TLS one: "
             "its handshake too), bounded by server.max_opening_connections.",
             MetricType::gauge, &ReactorMetrics::opening_connections);
  render_sum(w, shards, "floodgate_client_opening_evictions_total",
             "Opening client connections closed to make room for a newer one at "
             "server.max_opening_connections.",
             MetricType::counter, &ReactorMetrics::opening_evictions);
}

// The reactors' buffer pools, summed: blocks by state, bytes held, bytes given back by trimming.
void render_buffer_pools(PrometheusWriter& w, Shards shards) {
  using Shard = ReactorMetrics::BufferPoolShard;
  const auto total = [&](std::size_t pool, auto get) {
    int64_t sum = 0;
    for (const ReactorMetrics* shard : shards) {
      sum += static_cast<int64_t>(get(shard->buffer_pool(static_cast<BufferPoolKind>(pool))));
    }
    return sum;
  };
  constexpr std::string_view kBlocks = "floodgate_buffer_blocks";
  w.header(kBlocks,
           "Request and response buffer blocks the reactors hold, lent out (in_use) or kept for "
           "reuse (free).",
           MetricType::gauge);
  for (std::size_t pool = 0; pool < kBufferPoolLabels.size(); ++pool) {
    const Label in_use[] = {{"pool", kBufferPoolLabels[pool]}, {"state", "in_use"}};
    const Label free[] = {{"pool", kBufferPoolLabels[pool]}, {"state", "free"}};
    w.sample(kBlocks, in_use, total(pool, [](const Shard& s) { return s.in_use_blocks.value(); }));
    w.sample(kBlocks, free, total(pool, [](const Shard& s) { return s.free_blocks.value(); }));
  }
  constexpr std::string_view kBytes = "floodgate_buffer_bytes";
  w.header(kBytes, "Bytes the reactors' buffer pools hold from the allocator.", MetricType::gauge);
  for (std::size_t pool = 0; pool < kBufferPoolLabels.size(); ++pool) {
    const Label labels[] = {{"pool", kBufferPoolLabels[pool]}};
    w.sample(kBytes, labels, total(pool, [](const Shard& s) { return s.bytes.value(); }));
  }
  constexpr std::string_view kTrimmed = "floodgate_buffer_trimmed_bytes_total";
  w.header(kTrimmed,
           "Bytes of free buffer blocks given back to the allocator after staying idle for a "
           "trim period (10 s).",
           MetricType::counter);
  for (std::size_t pool = 0; pool < kBufferPoolLabels.size(); ++pool) {
    const Label labels[] = {{"pool", kBufferPoolLabels[pool]}};
    w.sample(
        kTrimmed, labels,
        static_cast<uint64_t>(total(pool, [](const Shard& s) { return s.trimmed_bytes.value(); })));
  }
}

// One counter per upstream id; `get(shard, id)` selects it from a shard.
template <class Get>
void render_per_upstream(PrometheusWriter& w, Shards shards, Names names, std::string_view name,
                         std::string_view help, Get get) {
  w.header(name, help, MetricType::counter);
  for (std::size_t id = 0; id < names.size(); ++id) {
    uint64_t total = 0;
    for (const ReactorMetrics* shard : shards) {
      if (id < shard->upstreams()) {
        total += get(*shard, static_cast<uint32_t>(id)).value();
      }
    }
    const Label labels[] = {{"upstream", names[id]}};
    w.sample(name, labels, total);
  }
}

void render_generated(PrometheusWriter& w, Shards shards) {
  constexpr std::string_view kName = "floodgate_responses_generated_total";
  w.header(kName, "Responses floodgate generated itself, by X-Floodgate-Reason.",
           MetricType::counter);
  for (std::size_t r = 1; r < kReasonCount; ++r) {  // skip Reason::none
    const auto reason = static_cast<Reason>(r);
    uint64_t total = 0;
    for (const ReactorMetrics* shard : shards) {
      total += shard->responses_generated(reason).value();
    }
    const Label labels[] = {{"reason", info(reason).name}};
    w.sample(kName, labels, total);
  }
}

void render_shadow(PrometheusWriter& w, Shards shards) {
  constexpr std::string_view kName = "floodgate_shadow_rejections_total";
  w.header(kName,
           "Requests a stage in shadow mode would have refused, by stage and reason (they were "
           "admitted).",
           MetricType::counter);
  for (std::size_t i = 0; i < kStageReasons.size(); ++i) {
    uint64_t total = 0;
    for (const ReactorMetrics* shard : shards) total += shard->shadow_rejections(i).value();
    const Label labels[] = {{"stage", label(kStageReasons[i].stage)},
                            {"reason", info(kStageReasons[i].reason).name}};
    w.sample(kName, labels, total);
  }
}

}  // namespace

void render_accept_errors(Shards shards, std::string& out) {
  constexpr std::string_view kName = "floodgate_accept_errors_total";
  PrometheusWriter w(out);
  w.header(kName, "Failed accept() calls on the client listeners, by reason.", MetricType::counter);
  for (std::size_t r = 0; r < kAcceptErrorLabels.size(); ++r) {
    uint64_t total = 0;
    for (const ReactorMetrics* shard : shards) {
      total += shard->accept_errors(static_cast<AcceptError>(r)).value();
    }
    const Label labels[] = {{"reason", kAcceptErrorLabels[r]}};
    w.sample(kName, labels, total);
  }
}

void render_tls(Shards shards, std::string& out) {
  PrometheusWriter w(out);
  constexpr std::string_view kName = "floodgate_tls_handshakes_total";
  w.header(kName,
           "TLS handshakes on the listeners, by result (ok, failed, closed, timeout) and the "
           "version agreed.",
           MetricType::counter);
  for (std::size_t r = 0; r < kTlsHandshakeResultLabels.size(); ++r) {
    for (std::size_t v = 0; v < kTlsVersionLabels.size(); ++v) {
      uint64_t total = 0;
      for (const ReactorMetrics* shard : shards) total += shard->tls_handshakes(r, v).value();
      const Label labels[] = {{"result", kTlsHandshakeResultLabels[r]},
                              {"version", kTlsVersionLabels[v]}};
      w.sample(kName, labels, total);
    }
  }
  constexpr std::string_view kDuration = "floodgate_tls_handshake_duration_seconds";
  w.header(kDuration, "Time from accept to a finished TLS handshake.", MetricType::histogram);
  HistogramTotals totals;
  for (const ReactorMetrics* shard : shards) totals.add(shard->tls_handshake_duration());
  w.histogram(kDuration, {}, totals);
  constexpr std::string_view kResumed = "floodgate_tls_resumptions_total";
  w.header(kResumed, "Finished TLS handshakes that resumed a session (a session ticket).",
           MetricType::counter);
  uint64_t resumed = 0;
  for (const ReactorMetrics* shard : shards) resumed += shard->tls_resumptions().value();
  w.sample(kResumed, {}, resumed);
}

// One labelled counter family summed over the shards: `field` is an array of counters, one
// per label value.
template <std::size_t N>
void render_labelled(PrometheusWriter& w, Shards shards, std::string_view name,
                     std::string_view help, std::string_view label,
                     const std::array<std::string_view, N>& values,
                     const std::array<Counter, N> ReactorMetrics::*field) {
  w.header(name, help, MetricType::counter);
  for (std::size_t i = 0; i < N; ++i) {
    uint64_t total = 0;
    for (const ReactorMetrics* shard : shards) total += (shard->*field)[i].value();
    const Label labels[] = {{label, values[i]}};
    w.sample(name, labels, total);
  }
}

void render_http2(Shards shards, std::string& out) {
  PrometheusWriter w(out);
  render_labelled(w, shards, "floodgate_http2_connections_total",
                  "Client connections that speak HTTP/2, by how (ALPN on TLS, or the preface on "
                  "an h2c listener).",
                  "via", kH2ViaLabels, &ReactorMetrics::h2_connections);
  render_sum(w, shards, "floodgate_http2_streams_total",
             "HTTP/2 streams opened by clients (each one request).", MetricType::counter,
             &ReactorMetrics::h2_streams);
  render_sum(w, shards, "floodgate_http2_refused_streams_total",
             "HTTP/2 streams refused with REFUSED_STREAM (nothing of them was processed).",
             MetricType::counter, &ReactorMetrics::h2_refused_streams);
  render_labelled(w, shards, "floodgate_http2_glitches_total",
                  "HTTP/2 misbehaviour points counted against server.http2.glitch_threshold, by "
                  "kind.",
                  "kind", kH2GlitchLabels, &ReactorMetrics::h2_glitches);
  render_labelled(w, shards, "floodgate_http2_goaways_total",
                  "GOAWAY frames floodgate sent, by error code.", "code", kH2GoawayLabels,
                  &ReactorMetrics::h2_goaways);
}

void render_prometheus(Shards shards, Names upstream_names, std::string& out) {
  PrometheusWriter w(out);
  render_requests(w, shards, upstream_names);
  render_durations(w, shards, upstream_names);
  render_connections(w, shards);
  render_buffer_pools(w, shards);
  render_per_upstream(
      w, shards, upstream_names, "floodgate_upstream_connect_failures_total",
      "Failed connection attempts to the upstream's backends (refused, unreachable, reset or "
      "timed out).",
      [](const ReactorMetrics& m, uint32_t id) -> const Counter& {
        return m.connect_failures(id);
      });
  render_per_upstream(
      w, shards, upstream_names, "floodgate_upstream_timeouts_total",
      "Connect timeouts and response timeouts on the upstream's backends.",
      [](const ReactorMetrics& m, uint32_t id) -> const Counter& { return m.timeouts(id); });
  render_generated(w, shards);
  render_shadow(w, shards);
}

}  // namespace floodgate
