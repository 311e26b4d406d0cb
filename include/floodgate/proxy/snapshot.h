// The immutable, fully resolved configuration the data plane runs on: one generation.
//
// Built on the main thread from a validated config (app/generations.h), then shared read-only
// by every reactor (std::shared_ptr<const Snapshot>): nothing in it is parsed or looked up by
// string on the request path. The mutable parts are per-reactor entries that only their
// reactor touches (balancer state, idle connection lists) and each Backend's in-flight count,
// an atomic that all reactors share on purpose (least_active and per-backend caps hold
// process-wide).
//
// Pools keep their identity by name across reloads: a pool's id (metrics slot, route target)
// never changes, and a Backend object lives on while any generation lists its address, so its
// in-flight count and pooled connections carry over (docs/architecture.md).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/reason.h"
#include "floodgate/core/shared_log_throttle.h"
#include "floodgate/http/parser.h"
#include "floodgate/metrics/counter.h"
#include "floodgate/metrics/histogram.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/proxy/failure_policy.h"
#include "floodgate/proxy/front_stages.h"
#include "floodgate/proxy/params.h"
#include "floodgate/proxy/protection_stages.h"
#include "floodgate/proxy/quota_stage.h"
#include "floodgate/proxy/rate_limit_stage.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/circuit_breaker.h"
#include "floodgate/resilience/retry_budget.h"
#include "floodgate/routing/route_table.h"
#include "floodgate/upstream/admission.h"
#include "floodgate/upstream/backend_load.h"
#include "floodgate/upstream/balancer.h"
#include "floodgate/upstream/params.h"
#include "floodgate/upstream/peer_health.h"

namespace floodgate::net {
class TlsClientConfig;  // tls.h
class TlsServerConfig;  // tls.h: OpenSSL's headers stay out of the request path's
}  // namespace floodgate::net

namespace floodgate::proxy {

class BackendConn;

// Most distinct pool names one process can see (metrics slots are sized for them at start).
inline constexpr std::size_t kMaxPools = 512;

// One backend server of a pool, a peer. Long-lived: every generation whose pool (same name)
// lists the same address (the same occurrence of it, when the pool lists it more than once)
// shares this object, so its in-flight count, its health state and its reactors' idle
// keep-alive connections carry over a reload. Its circuit breaker is per resolved address:
// every backend of every pool with that address shares it (and so does each occurrence).
struct Backend {
  // A reactor's idle keep-alive connections to this backend (most recently used first). Each
  // reactor touches only its own entry, on its own thread.
  struct alignas(64) Idle {
    BackendConn* head = nullptr;
    // Written by its reactor alone (relaxed load and store, no locked instruction); read by
    // scrapes (floodgate_backend_idle_connections).
    std::atomic<uint32_t> count{0};
    uint64_t generation = 0;  // the reactor's latest generation that lists this backend
  };

  // What one reactor counted about this backend (floodgate_backend_* metrics): written by that
  // reactor alone, summed at scrape time, as ReactorMetrics' shards are.
  struct alignas(64) Stats {
    std::array<Counter, kStatusClasses> responses{};  // final response heads, by status class
    Histogram head_time;                              // attempt start to final response head
    Histogram connect_time;                           // connect start to established
    Counter connects;                                 // new connections started
    Counter reuses;                                   // pooled keep-alive connections used
    Counter bytes_sent;                               // request bytes written to the backend
    Counter bytes_received;                           // response bytes read from it
    Counter client_aborts;   // the client went away while this backend's response was due
    Counter backend_aborts;  // this backend cut a response it had begun
    std::array<Counter, kBackendFailureKinds> failures{};  // by backend_failure_kind()
  };

  Backend(Endpoint address, const boost::asio::ip::tcp::endpoint& endpoint, unsigned reactors,
          std::shared_ptr<resilience::CircuitBreaker> breaker)
      : address(std::move(address)),
        endpoint(endpoint),
        health(std::make_shared<PeerHealth>()),
        breaker(std::move(breaker)),
        idle(std::make_unique<Idle[]>(reactors)),
        stats(std::make_unique<Stats[]>(reactors)),
        reactors(reactors) {}

  const Endpoint address;                         // as configured; `peer` label in metrics
  const boost::asio::ip::tcp::endpoint endpoint;  // resolved at build time
  BackendLoad load;                               // process-wide in-flight requests
  // Written by the health task alone (health/checker.h); the request path reads `down`.
  const std::shared_ptr<PeerHealth> health;
  // Written by the attempts' verdicts alone (never by health); selection reads it.
  const std::shared_ptr<resilience::CircuitBreaker> breaker;
  std::unique_ptr<Idle[]> idle;    // index = reactor
  std::unique_ptr<Stats[]> stats;  // index = reactor
  const unsigned reactors;
  // The process log's lines about this backend's failures: at most one a second per kind of
  // failure, whichever reactor sees it (Attempt::log_failure; index: backend_failure_kind()).
  std::array<SharedLogThrottle, kBackendFailureKinds> failure_log;
  // The lines about its circuit's transitions: at most one a second per transition
  // (circuit_log.h; index: kCircuitTransitions' order).
  std::array<SharedLogThrottle, kCircuitTransitions> circuit_log;
};

// A pool's admission state, long-lived like Backend: every generation whose pool has the same
// name shares it, so requests in progress, parked waiters and the limit carry over a reload.
// The active generation's policy sets its limits (app/generations.h) when it is activated.
struct Pool {
  Admission admission;
  Admission route_cap;  // [resilience.route_queue]: no queue, the active generation's cap
};

// A pool's admission policy in one generation, resolved to scalars: what the request path reads.
struct Policy {
  AdmissionLimits limits;                        // max_active_requests, max_pending_requests
  uint32_t max_active_per_backend = 0;           // 0 = unlimited
  std::chrono::milliseconds pending_timeout{0};  // 0 = none
  uint32_t retry_after_seconds = 1;              // Retry-After of this pool's rejections (>= 1)

  // The pool's [upstreams.resilience] resolved to what the request path reads: the one place
  // these values are derived.
  static Policy of(const ResilienceParams& r);
};

// A pool as one generation configures it: its policy and its backends (shared with other
// generations, see Backend). Reactors keep their balancer state here, one entry each.
struct Upstream {
  struct alignas(64) PerReactor {
    std::optional<Balancer> balancer;
  };

  uint32_t id = 0;  // stable for the pool's name over the process's life (metrics, routes)
  UpstreamParams params;
  std::vector<std::shared_ptr<Backend>> backends;
  std::vector<uint32_t> weights;  // per backend, for the balancers
  // Per backend: the host its server was written with (a name, or the IP address), the name
  // TLS to it sends and verifies unless [upstreams.tls] server_name says otherwise.
  std::vector<std::string> hosts;
  std::unique_ptr<PerReactor[]> per_reactor;
  std::shared_ptr<Pool> pool;  // shared by name with other generations
  Policy policy;
  // The pool's retry budget (retry_budget.per_route_ratio_percent or ratio_percent), shared
  // with the generations that keep its ratio and window; null when the budget is off.
  std::shared_ptr<resilience::RetryBudget> retry_budget;
  // TLS to the backends ([upstreams.tls]; nullptr: plain TCP), read when the generation was
  // built. Connections keep the one they were made with; a pooled one is reused only under the
  // same parameters.
  std::shared_ptr<const net::TlsClientConfig> tls;
  bool hedge = false;      // hedging on and this pool in its route_allowlist
  uint32_t route_cap = 0;  // route_queue.caps[name], else default_cap
  // The generated responses for kPoolRejections, with Retry-After: [reason index][close].
  std::array<std::array<std::string, 2>, kPoolRejections.size()> rejections;

  // Sets the policy from params.resilience and prebuilds the rejections with its Retry-After.
  void apply_policy();
  // The prebuilt response for `reason` (one of kPoolRejections).
  std::string_view rejection(Reason reason, bool close) const {
    return rejections[pool_rejection_index(reason)][close ? 1 : 0];
  }
};

// A generation: the immutable, fully resolved configuration a request runs on, with its
// number and the SHA-256 of the text it came from.
struct Snapshot {
  uint64_t generation = 0;
  std::string sha256;  // lowercase hex of the configuration text
  std::chrono::system_clock::time_point loaded_at{};
  ServerParams server;
  // The TLS listeners' certificates (nullptr: no [[server.tls]]), read when the generation was
  // built: new handshakes use the active generation's, established connections keep theirs.
  std::shared_ptr<const net::TlsServerConfig> tls;
  LogParams log;
  http::HeadLimits limits;
  std::vector<std::shared_ptr<Upstream>> upstreams;  // this generation's pools
  std::vector<const Upstream*> by_id;  // index = Upstream::id; nullptr for pools not in it
  RouteTable routes;
  // The front of the stage chain, run before routing (front_stages.h), and the in-flight cap
  // it resolved (0 = none).
  Chain front;
  // Each route's chain, by Route::index (pool_stage.h): pool admission last.
  std::vector<Chain> route_chains;
  uint32_t max_inflight = 0;
  bool inflight_shadow = false;  // [resilience.inflight] mode = "shadow" (TLS handshakes read it)
  // Circuit breakers, retries and hedging (failure_policy.h).
  FailurePolicy failure;
  // Brownout, adaptive admission and the route caps (protection_stages.h).
  LocalProtection protection;
  // The scoped rate limits (rate_limit_stage.h), first on every route's chain.
  std::shared_ptr<const RateLimits> rate_limits;
  std::shared_ptr<const Quota> quota;       // [resilience.quota] when enabled
  std::shared_ptr<FrontState> front_state;  // process-wide: the cap's count, the memory sample
  std::vector<std::string> upstream_names;  // every pool name since start; index = id
  // Reactors that hold this generation (as their current one, or for requests still on it).
  // The main thread reads it to tell when a retiring generation has no request left.
  mutable std::atomic<uint32_t> reactor_holds{0};

  const Upstream& upstream(uint32_t id) const { return *by_id[id]; }
};

}  // namespace floodgate::proxy
