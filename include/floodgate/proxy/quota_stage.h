// The distributed quota (issue 16, docs/resilience.md): burst and sustained contracts per policy,
// counted in this process (in_memory) or in Redis, where every floodgate that uses the same Redis
// shares them. A stage of each route's chain, right after the scoped rate limits, and the first
// that waits on I/O: a Redis decision parks the exchange (Wait, exchange.h) until its reply comes
// or the link's deadline passes.
//
// Per request, the policies whose route_allowlist names the upstream run in configuration order:
//   - Every selected dimension must resolve (request_key.h's sources): one over 256 bytes is 429
//     selector_identity_invalid; a missing one is what the policy's missing_key says (issue 35):
//     429 selector_identity_missing (refuse, the default, seed 004), the policy not counting the
//     request (skip, counted as skipped), or the client's address standing in for the identity
//     (peer: the request counts as its client's, in a key no present identity can have).
//   - The backend decides both windows as one (resilience/quota_counter.h; Redis with
//     quota_script.h): exhausted is 429 burst_quota_exhausted or sustained_quota_exhausted with
//     Retry-After until the window ends. Every answer names the policy in X-Floodgate-Quota.
//   - A backend that cannot decide: backend_timeout (no reply within command_timeout),
//     backend_unavailable (Redis unreachable, the link's breaker open, max_inflight reached, the
//     in-memory table full) or backend_error (an error reply). With a local_fallback, a timeout or
//     an unavailable Redis is decided by the per-instance fallback counters (a degraded decision);
//     otherwise, or when the fallback cannot decide either, backend_failure_policy: fail_open
//     admits (counted as failed), fail_closed answers 503 with the reason and Retry-After: 1.
//   - A denial (or a fail_closed failure) stops the evaluation; with enforcement = "shadow" it is
//     counted (floodgate_shadow_rejections_total{stage="quota"}, would_reject in the access log)
//     and the request goes on to the next policy.
//
// Redis policies run one after another (a denial must not count in a later policy), each one
// wait; resume() re-enters the stage for the next policy by stepping the chain's cursor back.
//
// Thread-safety: the Quota and the stages are built on the main thread with their generation and
// read by every reactor; counters are per-reactor shards or atomics; a reactor's QuotaLinks and the
// exchange's QuotaCall belong to that reactor.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/clock.h"
#include "floodgate/core/ip_range.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/redis/link.h"
#include "floodgate/resilience/identity_digest.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/quota_counter.h"

namespace floodgate::net {
class Poller;
}  // namespace floodgate::net

namespace floodgate::proxy {

struct Upstream;
struct Exchange;
struct Quota;
struct QuotaPolicy;

// How one policy decided a request (floodgate_quota_decisions_total{outcome}).
enum class QuotaOutcome : uint8_t {
  allowed,
  burst_quota_exhausted,
  sustained_quota_exhausted,
  selector_identity_missing,
  selector_identity_invalid,
  backend_timeout,
  backend_unavailable,
  backend_error,
  skipped,  // a selected identity missing, missing_key = "skip": the policy did not count it
  count_
};
inline constexpr std::size_t kQuotaOutcomes = static_cast<std::size_t>(QuotaOutcome::count_);
std::string_view label(QuotaOutcome o) noexcept;

// Who decided (floodgate_quota_backend_decisions_total{backend}).
enum class QuotaMode : uint8_t { in_memory, redis, fallback, failed, count_ };
inline constexpr std::size_t kQuotaModes = static_cast<std::size_t>(QuotaMode::count_);
std::string_view label(QuotaMode m) noexcept;

// A policy's counts, per reactor, kept across the reloads that keep its name.
class QuotaPolicyCounts {
 public:
  explicit QuotaPolicyCounts(unsigned reactors) : shards_(reactors) {}
  void count(uint32_t reactor, QuotaOutcome o) noexcept {
    shards_[reactor].n[static_cast<std::size_t>(o)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t total(QuotaOutcome o) const noexcept;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kQuotaOutcomes> n{};
  };
  std::vector<Shard> shards_;
};

// The quota's process-wide state, for the process's life: the in-memory table (made when first
// needed), the local fallback's (remade when max_entries changes), decisions by backend mode.
class QuotaState {
 public:
  explicit QuotaState(unsigned reactors) : modes_(reactors) {}
  // Main thread, when a generation is built.
  std::shared_ptr<resilience::QuotaTable> in_memory_table();
  std::shared_ptr<resilience::QuotaTable> fallback_table(uint32_t max_entries);
  // The process's Redis in-flight bound for `max` (the same object while it stays the same).
  std::shared_ptr<redis::InflightLimit> inflight(uint32_t max);
  // An id naming the reactors' link to `link` with `inflight`: equal for equal pairs.
  uint64_t link_key(const redis::LinkParams& link, const redis::InflightLimit* inflight);

  void count(uint32_t reactor, QuotaMode m) noexcept {
    modes_[reactor].n[static_cast<std::size_t>(m)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t total(QuotaMode m) const noexcept;
  // For the sweep and the metrics (main thread): the tables in use.
  const resilience::QuotaTable* in_memory() const noexcept { return in_memory_.get(); }
  const resilience::QuotaTable* fallback() const noexcept { return fallback_.get(); }
  // The process's once-a-second sweep: reclaims buckets whose windows ended.
  void sweep(std::chrono::steady_clock::time_point now) noexcept;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kQuotaModes> n{};
  };
  std::vector<Shard> modes_;
  std::shared_ptr<resilience::QuotaTable> in_memory_;
  std::shared_ptr<resilience::QuotaTable> fallback_;
  std::shared_ptr<redis::InflightLimit> inflight_;
  std::vector<std::pair<std::string, uint64_t>> link_keys_;  // signature -> key
};

// One generation's form of a policy.
struct QuotaPolicy {
  resilience::QuotaPolicyParams params;
  resilience::QuotaLimits limits;
  std::shared_ptr<QuotaPolicyCounts> counts;
  std::string header;  // "X-Floodgate-Quota: <name>\r\n"
  // The 429s for a missing or invalid identity, the 503s of fail_closed.
  PrebuiltAnswer missing, invalid, timeout, unavailable, error;
  // A digest of the windows, part of the in-memory key: a changed window starts afresh.
  std::string contract;

  QuotaPolicy(resilience::QuotaPolicyParams p, std::shared_ptr<QuotaPolicyCounts> c);
  bool applies_to(std::string_view upstream) const noexcept;
};

// A generation's quota (only when enabled).
struct Quota {
  resilience::QuotaParams params;
  std::vector<QuotaPolicy> policies;  // configuration order
  std::shared_ptr<QuotaState> state;
  std::shared_ptr<resilience::QuotaTable> table;     // in_memory backend's
  std::shared_ptr<resilience::QuotaTable> fallback;  // redis with local_fallback
  // redis:
  redis::LinkParams link;
  std::shared_ptr<redis::InflightLimit> inflight;
  uint64_t link_key = 0;  // which of a reactor's links (QuotaLinks) serves this quota
  std::vector<IpRange> trusted_proxies;  // server.trusted_proxies, for client_ip

  bool redis() const noexcept { return params.backend.kind == resilience::QuotaBackendKind::redis; }
};

// The Lua script of a Redis decision (docs/resilience.md): KEYS are the policy's window keys,
// ARGV three numbers per key (requests, window in ms, 1 for burst or 2 for sustained); it answers
// {1, 0, 0} (allowed: counted in every window) or {0, window, ms until it ends} (nothing counted).
std::string_view quota_script() noexcept;

// Builds a generation's quota (main thread), or nullptr when it is not enabled.
std::shared_ptr<const Quota> build_quota(const resilience::QuotaParams& params,
                                         std::vector<IpRange> trusted_proxies,
                                         std::shared_ptr<QuotaState> state,
                                         std::vector<std::shared_ptr<QuotaPolicyCounts>> counts);

// The quota stage of a route to `up`, when some policy applies to it.
void add_quota_stage(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                     std::shared_ptr<const Quota> quota);

// A reactor's links to Redis, one per backend in use (a reload that changes the server or the
// timeouts gets a new one; the old one goes once no request uses it).
class QuotaLinks {
 public:
  QuotaLinks(net::Poller& poller, TimerWheel& wheel, const Clock& clock) noexcept
      : poller_(poller), wheel_(wheel), clock_(clock) {}
  ~QuotaLinks();
  QuotaLinks(const QuotaLinks&) = delete;
  QuotaLinks& operator=(const QuotaLinks&) = delete;

  // The link serving `q` (made and started the first time: once per backend per reactor).
  redis::Link& link(const Quota& q);
  // Once a second: closes links no request uses whose key is not `keep` (0: none kept).
  void prune(uint64_t keep) noexcept;
  // Closes every link (the reactor is stopping).
  void close() noexcept;
  const redis::LinkStats& stats() const noexcept { return stats_; }

 private:
  struct Entry {
    uint64_t key = 0;
    std::unique_ptr<redis::Link> link;
  };
  net::Poller& poller_;
  TimerWheel& wheel_;
  const Clock& clock_;
  redis::LinkStats stats_;
  std::vector<Entry> links_;
};

// An exchange's Redis decision in progress: which policy, its identities' digests, the call.
struct QuotaCall final : redis::Call {
  QuotaCall() noexcept;
  Exchange* ex = nullptr;
  const Quota* quota = nullptr;
  const QuotaPolicy* policy = nullptr;
  redis::Link* link = nullptr;
  std::array<resilience::Digest, 3> ids{};  // tenant, token, client (when selected)
  uint8_t next = 0;                         // the next policy to evaluate (of the stage's)
  uint8_t current = 0;                      // the one waited for
};

}  // namespace floodgate::proxy
