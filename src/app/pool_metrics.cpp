#include "pool_metrics.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace floodgate::app {
namespace {

using Shards = std::span<const ReactorMetrics* const>;

template <class Get>
uint64_t sum(Shards shards, Get get) {
  uint64_t total = 0;
  for (const ReactorMetrics* shard : shards) total += get(*shard);
  return total;
}

// A counter family with one series per pool and value of `key` (`values`), summed over the
// reactors' shards; get(shard, pool id, value index).
template <class Get, std::size_t N>
void labelled_counter(PrometheusWriter& w,
                      const std::vector<std::shared_ptr<proxy::Upstream>>& pools, Shards shards,
                      std::string_view name, std::string_view help, std::string_view key,
                      const std::array<std::string_view, N>& values, Get get) {
  w.header(name, help, MetricType::counter);
  for (const auto& up : pools) {
    for (std::size_t v = 0; v < N; ++v) {
      const Label labels[] = {{"upstream", up->params.name}, {key, values[v]}};
      w.sample(name, labels,
               sum(shards, [&](const ReactorMetrics& m) { return get(m, up->id, v); }));
    }
  }
}

// The metric label of each reason in `reasons` (its X-Floodgate-Reason name).
template <std::size_t N>
constexpr std::array<std::string_view, N> reason_labels(const std::array<Reason, N>& reasons) {
  std::array<std::string_view, N> names{};
  for (std::size_t i = 0; i < N; ++i) names[i] = info(reasons[i]).name;
  return names;
}

// A family with one sample per pool, labelled by its name: value(pool).
template <class Value>
void per_pool_family(PrometheusWriter& w,
                     const std::vector<std::shared_ptr<proxy::Upstream>>& pools,
                     std::string_view name, std::string_view help, MetricType type, Value value) {
  w.header(name, help, type);
  for (const auto& up : pools) {
    const Label labels[] = {{"upstream", up->params.name}};
    w.sample(name, labels, value(*up));
  }
}

}  // namespace

void render_pool_metrics(PrometheusWriter& w, const proxy::Snapshot& serving, Shards shards) {
  const auto& pools = serving.upstreams;
  auto per_pool = [&](std::string_view name, std::string_view help, MetricType type, auto value) {
    per_pool_family(w, pools, name, help, type, value);
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
  // A gauge with one sample per backend, labelled by pool and address.
  auto backend_gauge = [&](std::string_view name, std::string_view help, auto value) {
    w.header(name, help, MetricType::gauge);
    for (const auto& up : pools) {
      for (const auto& b : up->backends) {
        const Label labels[] = {{"upstream", up->params.name}, {"backend", b->address.text}};
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

  static constexpr auto kPoolReasons = reason_labels(kPoolRejections);
  labelled_counter(w, pools, shards, "floodgate_pool_rejected_total",
                   "Requests the pool turned away with 503, by X-Floodgate-Reason: "
                   "proxy_overloaded, pending_timeout, generation_retired, no_eligible_backend.",
                   "reason", kPoolReasons, [](const ReactorMetrics& m, uint32_t id, std::size_t r) {
                     return m.pool_rejected(id, r).value();
                   });

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

  backend_gauge(
      "floodgate_backend_up",
      "1 if the backend may get requests, 0 if active health checks marked it down (backends "
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
                                {"backend", b->address.text},
                                {"result", kProbeResultNames[r]}};
        w.sample(kProbes, labels, b->health->probes[r].load(std::memory_order_relaxed));
      }
    }
  }

  constexpr std::string_view kProbeDuration = "floodgate_health_last_probe_duration_seconds";
  w.header(kProbeDuration,
           "How long each backend's last completed health probe took, connect to verdict (0 "
           "before the first).",
           MetricType::gauge);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      const Label labels[] = {{"upstream", up->params.name}, {"backend", b->address.text}};
      w.sample(kProbeDuration, labels,
               static_cast<double>(b->health->last_probe_ns.load(std::memory_order_relaxed)) / 1e9);
    }
  }
  constexpr std::string_view kHealthTransitions = "floodgate_health_transitions_total";
  w.header(kHealthTransitions,
           "Times the health checks marked each backend down (to=\"down\") and up again "
           "(to=\"up\").",
           MetricType::counter);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      static constexpr std::string_view kTo[] = {"down", "up"};
      for (std::size_t i = 0; i < 2; ++i) {
        const Label labels[] = {
            {"upstream", up->params.name}, {"backend", b->address.text}, {"to", kTo[i]}};
        w.sample(kHealthTransitions, labels,
                 b->health->transitions[i].load(std::memory_order_relaxed));
      }
    }
  }

  backend_gauge(
      "floodgate_backend_active",
      "Requests in flight on each backend of the pool, on all reactors.",
      [](const proxy::Backend& b) { return b.load.active.load(std::memory_order_relaxed); });

  render_backend_metrics(w, serving);
  render_failure_metrics(w, serving, shards);
  render_protection_metrics(w, serving, shards);
  render_rate_limit_metrics(w, serving);
}

void render_backend_metrics(PrometheusWriter& w, const proxy::Snapshot& serving) {
  using Stats = proxy::Backend::Stats;
  const auto& pools = serving.upstreams;
  // One family with one sample per backend: `get` reads a reactor's Stats, summed here.
  const auto per_backend = [&](std::string_view name, std::string_view help, MetricType type,
                               auto get) {
    w.header(name, help, type);
    for (const auto& up : pools) {
      for (const auto& b : up->backends) {
        uint64_t total = 0;
        for (unsigned r = 0; r < b->reactors; ++r) total += get(b->stats[r], *b, r);
        const Label labels[] = {{"upstream", up->params.name}, {"backend", b->address.text}};
        w.sample(name, labels, total);
      }
    }
  };
  const auto counter = [&](std::string_view name, std::string_view help, Counter Stats::*field) {
    per_backend(
        name, help, MetricType::counter,
        [field](const Stats& s, const proxy::Backend&, unsigned) { return (s.*field).value(); });
  };
  constexpr std::string_view kResponses = "floodgate_backend_responses_total";
  w.header(kResponses, "Final response heads each backend sent, by status class.",
           MetricType::counter);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      for (std::size_t c = 0; c < kStatusClasses; ++c) {
        uint64_t total = 0;
        for (unsigned r = 0; r < b->reactors; ++r) total += b->stats[r].responses[c].value();
        const Label labels[] = {{"upstream", up->params.name},
                                {"backend", b->address.text},
                                {"class", kStatusClassLabels[c]}};
        w.sample(kResponses, labels, total);
      }
    }
  }
  const auto histogram = [&](std::string_view name, std::string_view help,
                             Histogram Stats::*field) {
    w.header(name, help, MetricType::histogram);
    for (const auto& up : pools) {
      for (const auto& b : up->backends) {
        HistogramTotals totals;
        for (unsigned r = 0; r < b->reactors; ++r) totals.add(b->stats[r].*field);
        const Label labels[] = {{"upstream", up->params.name}, {"backend", b->address.text}};
        w.histogram(name, labels, totals);
      }
    }
  };
  histogram("floodgate_backend_response_head_seconds",
            "Time from an attempt's start to its backend's final response head.",
            &Stats::head_time);
  histogram("floodgate_backend_connect_seconds",
            "Time to establish a new connection to the backend (pooled ones not observed).",
            &Stats::connect_time);
  counter("floodgate_backend_sent_bytes_total", "Request bytes written to the backend.",
          &Stats::bytes_sent);
  counter("floodgate_backend_received_bytes_total", "Response bytes read from the backend.",
          &Stats::bytes_received);
  counter("floodgate_backend_connections_total",
          "New connections floodgate started to the backend (attempts, failed ones included).",
          &Stats::connects);
  counter("floodgate_backend_connection_reuses_total",
          "Requests sent on a pooled keep-alive connection to the backend.", &Stats::reuses);
  per_backend("floodgate_backend_idle_connections",
              "Keep-alive connections to the backend idle in the reactors' pools now.",
              MetricType::gauge, [](const Stats&, const proxy::Backend& b, unsigned r) {
                return uint64_t{b.idle[r].count.load(std::memory_order_relaxed)};
              });
  counter("floodgate_backend_client_aborts_total",
          "Clients that went away while the backend's response was due or under way.",
          &Stats::client_aborts);
  counter("floodgate_backend_aborts_total",
          "Responses the backend cut after it had begun them (reset, stalled or malformed).",
          &Stats::backend_aborts);
  constexpr std::string_view kFailures = "floodgate_backend_failures_total";
  w.header(kFailures,
           "Attempts at the backend that failed, by reason: upstream_connect_failed, "
           "upstream_connect_timeout, upstream_reset, upstream_timeout, upstream_bad_response, "
           "upstream_tls_failed.",
           MetricType::counter);
  static constexpr Reason kKinds[] = {
      Reason::upstream_connect_failed, Reason::upstream_connect_timeout,
      Reason::upstream_reset,          Reason::upstream_timeout,
      Reason::upstream_bad_response,   Reason::upstream_tls_failed};
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      for (const Reason reason : kKinds) {
        const std::size_t k = proxy::backend_failure_kind(reason);
        uint64_t total = 0;
        for (unsigned r = 0; r < b->reactors; ++r) total += b->stats[r].failures[k].value();
        const Label labels[] = {{"upstream", up->params.name},
                                {"backend", b->address.text},
                                {"reason", kReasons[static_cast<std::size_t>(reason)].name}};
        w.sample(kFailures, labels, total);
      }
    }
  }
}

void render_failure_metrics(PrometheusWriter& w, const proxy::Snapshot& serving, Shards shards) {
  using resilience::CircuitState;
  const auto& pools = serving.upstreams;
  const auto now = Clock::steady().now();
  constexpr std::string_view kState = "floodgate_circuit_state";
  w.header(kState,
           "Each backend's circuit breaker: 0 closed, 1 open, 2 half-open (one breaker per "
           "address, shown under every pool that lists it).",
           MetricType::gauge);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      const Label labels[] = {{"upstream", up->params.name}, {"backend", b->address.text}};
      w.sample(kState, labels, static_cast<uint64_t>(b->breaker->state(now)));
    }
  }
  struct Transition {
    CircuitState from, to;
    std::string_view from_name, to_name;
  };
  static constexpr Transition kTransitions[] = {
      {CircuitState::closed, CircuitState::open, "closed", "open"},
      {CircuitState::open, CircuitState::half_open, "open", "half_open"},
      {CircuitState::half_open, CircuitState::closed, "half_open", "closed"},
      {CircuitState::half_open, CircuitState::open, "half_open", "open"},
  };
  constexpr std::string_view kTransitionsName = "floodgate_circuit_transitions_total";
  w.header(kTransitionsName, "Circuit breaker state changes of each backend, by from and to.",
           MetricType::counter);
  for (const auto& up : pools) {
    for (const auto& b : up->backends) {
      for (const Transition& t : kTransitions) {
        const Label labels[] = {{"upstream", up->params.name},
                                {"backend", b->address.text},
                                {"from", t.from_name},
                                {"to", t.to_name}};
        w.sample(kTransitionsName, labels, b->breaker->transitions(t.from, t.to));
      }
    }
  }
  constexpr std::string_view kRejected = "floodgate_circuit_rejected_total";
  w.header(kRejected,
           "Requests answered 503 circuit_open because every backend of the pool that is up had "
           "an open circuit (when_all_open = \"reject\").",
           MetricType::counter);
  for (const auto& up : pools) {
    const Label labels[] = {{"upstream", up->params.name}};
    w.sample(kRejected, labels, sum(shards, [&](const ReactorMetrics& m) {
               return m.circuit_rejected(up->id).value();
             }));
  }
  constexpr std::string_view kFailOpen = "floodgate_circuit_fail_open_total";
  w.header(kFailOpen,
           "Requests sent to a backend with an open circuit because every backend of the pool "
           "that is up had one (when_all_open = \"least_recently_failed\": the breakers failed "
           "open to the least recently failed backend).",
           MetricType::counter);
  for (const auto& up : pools) {
    const Label labels[] = {{"upstream", up->params.name}};
    w.sample(kFailOpen, labels, sum(shards, [&](const ReactorMetrics& m) {
               return m.circuit_fail_open(up->id).value();
             }));
  }

  labelled_counter(w, pools, shards, "floodgate_retries_total",
                   "Failed attempts floodgate retried on another backend, by outcome: sent, then "
                   "succeeded or failed; or not sent: denied_budget, no_alternate.",
                   "outcome", kRetryResultLabels, [](const ReactorMetrics& m, uint32_t id, auto r) {
                     return m.retries(id, static_cast<RetryResult>(r)).value();
                   });
  constexpr std::string_view kRemaining = "floodgate_retry_budget_remaining";
  w.header(kRemaining,
           "Retries the budget admits now: upstream=\"\" is the global budget, each pool its own "
           "(both must admit a retry). Absent when retry_budget.enabled is false.",
           MetricType::gauge);
  if (const auto& global = serving.failure.global_budget) {
    const Label labels[] = {{"upstream", ""}};
    w.sample(kRemaining, labels, global->remaining(now));
  }
  for (const auto& up : pools) {
    if (!up->retry_budget) continue;
    const Label labels[] = {{"upstream", up->params.name}};
    w.sample(kRemaining, labels, up->retry_budget->remaining(now));
  }

  labelled_counter(w, pools, shards, "floodgate_hedges_total",
                   "Hedged requests (resilience.hedging), by result: sent; won_by_hedge or "
                   "won_by_primary; cancelled (the losing attempt, closed).",
                   "result", kHedgeResultLabels, [](const ReactorMetrics& m, uint32_t id, auto r) {
                     return m.hedges(id, static_cast<HedgeResult>(r)).value();
                   });
}

void render_protection_metrics(PrometheusWriter& w, const proxy::Snapshot& serving, Shards shards) {
  const auto& pools = serving.upstreams;
  const proxy::ProtectionState& state = *serving.protection.state;
  const auto single = [&](std::string_view name, std::string_view help, MetricType type,
                          uint64_t value) {
    w.header(name, help, type);
    w.sample(name, {}, value);
  };
  single("floodgate_adaptive_limit",
         "The adaptive admission ceiling now (resilience.adaptive_admission); 0 = no ceiling.",
         MetricType::gauge, uint64_t{state.adaptive.ceiling()});
  single("floodgate_adaptive_inflight", "Requests holding a permit of the adaptive ceiling.",
         MetricType::gauge,
         static_cast<uint64_t>(std::max<int64_t>(0, state.adaptive.in_flight())));
  static constexpr std::array<std::string_view, 4> kMoves{"hold", "decrease", "increase",
                                                          "skipped"};
  constexpr std::string_view kDecisions = "floodgate_adaptive_decisions_total";
  w.header(kDecisions,
           "The AIMD controller's window decisions, by direction: decrease (a bad window), "
           "increase (a healthy window that used half the ceiling), hold, skipped (the window "
           "after a decrease).",
           MetricType::counter);
  for (std::size_t m = 0; m < kMoves.size(); ++m) {
    const Label labels[] = {{"direction", kMoves[m]}};
    w.sample(kDecisions, labels, state.adaptive.decisions(static_cast<resilience::AimdMove>(m)));
  }
  single("floodgate_brownout_active", "1 while brownout sheds the upstreams that are not core.",
         MetricType::gauge, uint64_t{state.brownout.active() ? 1U : 0U});
  constexpr std::string_view kTransitions = "floodgate_brownout_transitions_total";
  w.header(kTransitions, "Brownout state changes, by the state entered.", MetricType::counter);
  for (const bool to_active : {true, false}) {
    const Label labels[] = {{"to", to_active ? "active" : "inactive"}};
    w.sample(kTransitions, labels, state.brownout.transitions(to_active));
  }
  static constexpr auto kReasons = reason_labels(kProtectionRejections);
  labelled_counter(w, pools, shards, "floodgate_protection_rejected_total",
                   "Requests the local protection turned away with 503, by reason: brownout "
                   "(shed: not a core upstream), adaptive_limit, route_cap, global_cap.",
                   "reason", kReasons, [](const ReactorMetrics& m, uint32_t id, std::size_t r) {
                     return m.protection_rejected(id, r).value();
                   });
  per_pool_family(w, pools, "floodgate_route_cap",
                  "Each upstream's concurrent cap (resilience.route_queue).", MetricType::gauge,
                  [](const proxy::Upstream& up) { return uint64_t{up.route_cap}; });
  per_pool_family(w, pools, "floodgate_route_cap_inflight",
                  "Requests holding a permit of each upstream's route cap.", MetricType::gauge,
                  [](const proxy::Upstream& up) {
                    return static_cast<uint64_t>(std::max<int64_t>(0, up.pool->route_cap.active()));
                  });
  single("floodgate_global_cap", "The cap on routed requests across upstreams.", MetricType::gauge,
         uint64_t{serving.protection.global_cap});
  single("floodgate_global_cap_inflight", "Requests holding a permit of the global cap.",
         MetricType::gauge, static_cast<uint64_t>(std::max<int64_t>(0, state.global_cap.active())));
}

}  // namespace floodgate::app
