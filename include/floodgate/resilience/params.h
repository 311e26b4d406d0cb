// Parameters of the [resilience] table: the front of the request path's stage chain (the
// process-wide in-flight cap, the host memory guard, the protocol policy), the failure
// handling of the backend attempt (circuit breakers, the retry budget, hedging), the local
// runtime protection (adaptive admission, brownout, the route caps, the watchdog) and the
// traffic contracts (the scoped rate limits, the distributed quota). Plain values
// that config/ fills and the stages compile into their runtime form when a generation is built.
// docs/resilience.md describes every key and maps each seed field to it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace floodgate::resilience {

// Every stage that can refuse a request has a mode: `shadow` admits what it would refuse,
// counts the would-be refusal (floodgate_shadow_rejections_total{stage,reason}) and marks the
// access log record (would_reject).
enum class Mode { enforce, shadow };

// [resilience.inflight]: one cap on requests in flight for the whole process, checked before
// any other per-request work. 503 inflight_cap with Retry-After when full.
struct InflightParams {
  // "auto" = max(32, 4 x (reactors + the sum of every pool's capacity)), resolved when a
  // generation is built; otherwise `max_inflight` (0 = no cap). FLOODGATE_MAX_INFLIGHT
  // overrides the key with the same syntax.
  bool automatic = true;
  uint32_t max_inflight = 0;
  std::chrono::milliseconds retry_after{1'000};  // Retry-After, whole seconds (>= 1)
  bool exempt_preflight = true;  // OPTIONS with Origin and Access-Control-Request-Method
  std::vector<std::string> exempt_methods{};        // method tokens, exact (case-sensitive)
  std::vector<std::string> exempt_path_prefixes{};  // "/"-prefixed, normal form (config)
  std::vector<std::string> exempt_path_suffixes{"/events"};
  bool exempt_upgrades = true;  // upgrade requests (WebSocket) never hold a slot
  Mode mode = Mode::enforce;
  bool operator==(const InflightParams&) const = default;
};

// [resilience.memory_guard]: writes are refused (503 memory_pressure) while MemAvailable +
// SwapFree is below the floor; reads never are.
struct MemoryGuardParams {
  // "auto" = max(32, 2% of MemTotal) MiB, resolved from the first sample; otherwise
  // `min_available_mib` (0 = disabled). FLOODGATE_MEMORY_GUARD_MIN_MB overrides the key.
  bool automatic = true;
  uint64_t min_available_mib = 0;
  std::string meminfo = "/proc/meminfo";  // the file sampled, once a second at most
  Mode mode = Mode::enforce;
  bool operator==(const MemoryGuardParams&) const = default;
};

// [resilience.protocol]: which requests floodgate forwards at all.
struct ProtocolParams {
  std::vector<std::string> allowed_methods{};       // empty = every valid method token
  std::vector<std::string> denied_path_prefixes{};  // "/"-prefixed, normal form (config): 403
  bool enforce_authority_host_match = true;         // absolute-form authority != Host: 400
  bool allow_connect = false;
  std::vector<uint16_t> connect_allowed_ports{};  // 1..65535, distinct
  // Exact "host:port", canonical: host in lower case, port 1..65535 without leading zeros.
  std::vector<std::string> connect_allowed_authorities{};
  bool allow_0rtt = false;  // TLS 1.3 early data on the [[server.tls]] listeners
  std::vector<std::string> early_data_safe_methods{"GET", "HEAD"};
  Mode mode = Mode::enforce;
  bool operator==(const ProtocolParams&) const = default;
};

// What a request gets when every backend it could go to has an open circuit.
enum class WhenAllOpen {
  reject,                 // 503 circuit_open, Retry-After = the time until the first half-open
  least_recently_failed,  // sent to the backend that failed least recently (fail open)
};

// [resilience.circuit_breaker]: one breaker per backend address (issue 13). `mode = "shadow"`:
// the breakers keep their state from every attempt's verdict, but selection ignores them and
// nothing is answered circuit_open; what enforce mode would have refused is counted and logged
// (would_reject). The seed gives the table no mode; the retry budget and hedging refuse no
// request (they decide whether a second attempt is made), so they have none.
//
// The defaults are issue 35's: a closed circuit opens only after at least min_requests verdicts
// in `window`, when failure_threshold of them in a row failed or failure_rate_percent of them
// did; only transport failures and timeouts count unless failure_statuses lists statuses; and
// when every circuit of a pool is open (a one-backend pool's one), requests fail open to the
// least recently failed backend. docs/resilience.md says why each.
struct CircuitBreakerParams {
  bool enabled = true;
  uint32_t failure_threshold = 5;            // consecutive recorded failures (with min_requests)
  uint32_t min_requests = 10;                // verdicts in `window` before any opening (> 0)
  uint32_t failure_rate_percent = 50;        // failures / verdicts in `window`; 0 = no rate rule
  std::chrono::milliseconds window{10'000};  // the sliding window of the counts (> 0)
  std::chrono::milliseconds open{30'000};    // open -> half-open after this long (> 0)
  uint32_t half_open_max_probes = 1;         // concurrent probes while half-open (> 0)
  std::vector<uint16_t> failure_statuses{};  // distinct, 500..599, as written; [] = none
  WhenAllOpen when_all_open = WhenAllOpen::least_recently_failed;
  Mode mode = Mode::enforce;
  bool operator==(const CircuitBreakerParams&) const = default;
};

// [resilience.retry_budget]: allowance = max(floor(primaries in `window` x ratio / 100) + 1,
// min_retries), globally and per selected upstream (issue 13; the sliding window and the floor
// are floodgate's, the seed counts since start). Enforced by resilience::RetryBudget.
struct RetryBudgetParams {
  bool enabled = true;                       // false: no budget limit (eligibility still applies)
  uint32_t ratio_percent = 10;               // 0..100
  std::chrono::milliseconds window{10'000};  // the sliding window of the counts (> 0)
  uint32_t min_retries = 3;                  // 0..1000: retries every window allows at least
  // Upstream name (an [[upstreams]] entry) -> its own ratio, 0..100, instead of ratio_percent.
  std::map<std::string, uint32_t, std::less<>> per_route_ratio_percent{};
  bool operator==(const RetryBudgetParams&) const = default;
};

// [resilience.hedging]: a second attempt to another backend when the primary has no response
// head after `delay` (issue 13), suppressed while brownout is enforced and active.
struct HedgingParams {
  bool enabled = false;
  std::chrono::milliseconds delay{100};                  // > 0
  std::vector<std::string> safe_methods{"GET", "HEAD"};  // method tokens, exact (case-sensitive)
  std::vector<std::string> route_allowlist{};  // upstream names, distinct; empty = every upstream
  bool operator==(const HedgingParams&) const = default;
};

// [resilience.adaptive_admission]: a process-wide ceiling on admitted requests that an AIMD
// controller lowers by `decrease_step` after a window with too many slow or failed samples and
// raises by `increase_step` after a healthy window that used it (issue 14). 503 adaptive_limit
// at the ceiling. Enforced by proxy/protection_stages.h with resilience/adaptive.h.
//
// The ceiling moves within [min, max], worked out where the front cap is resolved (when a
// generation is built): max = max_limit, or the resolved front cap when max_limit is 0 (none
// when the front cap is 0 too: no ceiling); a max_limit above the resolved cap is clamped to
// it; min = min(min_limit, max). config/ checks at load what the file decides: min_limit <=
// max_limit, and max_limit <= the front cap whenever the cap's value is known there
// (docs/resilience.md, "adaptive_admission.max_limit and the front cap").
struct AdaptiveAdmissionParams {
  bool enabled = true;
  uint32_t min_limit = 64;      // > 0
  uint32_t max_limit = 0;       // 0 = the resolved front in-flight cap (the seed's null)
  uint32_t decrease_step = 16;  // > 0
  uint32_t increase_step = 16;  // > 0
  std::chrono::milliseconds high_latency{500};  // time to response head that counts as slow
  std::chrono::milliseconds window{100};        // one decision per window (> 0)
  Mode mode = Mode::enforce;
  bool operator==(const AdaptiveAdmissionParams&) const = default;
};

// [resilience.brownout]: while the adaptive in-flight count is at or above
// `trigger_inflight_percent` of the current ceiling (until it falls to or below
// `recover_inflight_percent`, which is lower), requests to upstreams not in `core_routes` get
// 503 brownout with the route caps' Retry-After, and hedging is suppressed (issue 14).
// Enforced by proxy/protection_stages.h with resilience/brownout.h.
struct BrownoutParams {
  bool enabled = true;
  uint32_t trigger_inflight_percent = 90;  // 0..100
  uint32_t recover_inflight_percent = 60;  // 0..100, below the trigger
  std::vector<std::string> core_routes{};  // upstream names, distinct; [] = none is core
  Mode mode = Mode::enforce;
  bool operator==(const BrownoutParams&) const = default;
};

// [resilience.route_queue] (the seed's name; nothing waits): concurrent caps per upstream
// (`caps`, else `default_cap`) and one `global_cap` across upstreams, acquired at once; a full
// cap answers 503 route_cap or global_cap (issue 14). Enforced by proxy/protection_stages.h.
struct RouteQueueParams {
  uint32_t default_cap = 512;  // > 0
  uint32_t global_cap = 2048;  // > 0
  // Upstream name (an [[upstreams]] entry) -> its own cap (> 0), instead of default_cap.
  std::map<std::string, uint32_t, std::less<>> caps{};
  std::chrono::milliseconds retry_after{1'000};  // for the caps and brownout, whole seconds
  Mode mode = Mode::enforce;
  bool operator==(const RouteQueueParams&) const = default;
};

// [resilience.watchdog]: a thread that judges each `check_interval` (a reactor stalled for
// `poll_stall_timeout`, a high upstream timeout share on `min_timeout_spread` backends at once,
// requests waiting on backends near the ceiling) and, after `unhealthy_consecutive_windows`
// unhealthy windows, drains for `drain_grace` and runs `restart_command` at most once per
// `restart_cooldown` (issue 14). It refuses no request, so it has no mode.
struct WatchdogParams {
  bool enabled = false;
  std::chrono::milliseconds check_interval{1'000};      // > 0
  std::chrono::milliseconds poll_stall_timeout{5'000};  // > 0
  uint32_t timeout_error_rate_percent = 60;             // 0..100
  uint32_t min_requests_per_window = 20;                // > 0: per backend
  uint32_t min_timeout_spread = 2;                      // > 0: backends timing out at once
  uint32_t overload_inflight_percent = 95;              // 0..100
  uint32_t unhealthy_consecutive_windows = 3;           // > 0
  std::chrono::milliseconds drain_grace{8'000};         // >= server.drain_timeout when enabled
  std::chrono::milliseconds restart_cooldown{120'000};  // > 0
  // An absolute executable path, then its arguments; run with fork + exec, no shell. [] = the
  // watchdog only reports.
  std::vector<std::string> restart_command{};
  bool operator==(const WatchdogParams&) const = default;
};

// A request-key source (seed 004's "Request-Key Sources"): where a rule takes the identity it
// counts by. The text form is what the configuration wrote (`header:x-tenant-id`, `peer_ip`).
struct KeySource {
  enum class Kind : uint8_t {
    none,          // no source: a route-scope rule, or no tier_key
    header,        // header:<name>, the first field of that name; `name` lower-case
    cookie,        // cookie:<name>, from the Cookie fields
    query,         // query:<name>, from the target's query string, as received
    path,          // the normalised path
    authority,     // the Host (or the absolute-form target's authority)
    method,        // the method token
    cid,           // cid / sticky-cid: the client connection's id
    peer_ip,       // the address the connection comes from
    client_ip,     // from a trusted proxy, the right-most X-Forwarded-For address not trusted
    bearer_token,  // the credentials of "Authorization: Bearer <token>"
  };
  Kind kind = Kind::none;
  std::string name{};  // header (lower-case), cookie and query: the name; empty otherwise
  bool operator==(const KeySource&) const = default;
};

// Whether a request that reaches a route's chain can lack the identity a source of kind `k`
// gives (proxy/request_key.h): a header, cookie, query parameter or bearer token it did not
// send, a Host it did not send (HTTP/1.0) or one that is no host name. The method, the
// connection id and the addresses are always there, and so is the path (CONNECT and OPTIONS *,
// which have none, never reach a route's chain).
constexpr bool can_be_missing(KeySource::Kind k) noexcept {
  using enum KeySource::Kind;
  return k == header || k == cookie || k == query || k == authority || k == bearer_token;
}

// What a rule counts a request by when the request lacks the identity of the rule's key
// (`missing_key`; issue 35). One enum for both users, each taking some of the values:
//   peer    the client's address, as client_ip gives it (server.trusted_proxies honoured):
//           every anonymous client its own bucket, which it can neither choose nor share.
//           The scoped rate limits' default.
//   route   one bucket for the [[routes]] entry the request took, its host normalised as routing
//           compares it (lower-case, no port, no trailing dot) with its path_prefix: every
//           anonymous client of the route together. Scoped rate limits only.
//   skip    the rule does not count the request at all (nginx's limit_req with an empty key);
//           counted as skipped.
//   refuse  429 selector_identity_missing (seed 004). The quota policies' default; quota only.
enum class MissingKey : uint8_t { peer, route, skip, refuse };

// What a scoped rate limit counts by (seed 004): the upstream routed to, or an identity within it.
enum class RateScope : uint8_t { route, client, tenant, token };
// A new identity finds no bucket it may take in the rule's table: the table is full (max_keys
// live identities) and every bucket it could take over was used in this very millisecond
// (rate_table.h). It shares one overflow bucket at the rule's rate (seed 002's TenantLimiter),
// or passes unlimited (seed 004's legacy scoped limiter). Both are counted.
enum class OnTableFull : uint8_t { overflow_bucket, fail_open };

struct RateTier {
  uint32_t requests_per_sec = 0;  // > 0
  uint32_t burst = 0;             // > 0
  bool operator==(const RateTier&) const = default;
};

// One [[resilience.scoped_rate_limits]] rule: a token bucket per identity, process-wide (GCRA,
// resilience/gcra.h), answered 429 rate_limited with Retry-After and X-Floodgate-Limit when
// empty (issue 15).
struct ScopedRateLimitParams {
  std::string name{};  // unique, non-empty
  RateScope scope = RateScope::route;
  // none for route scope; config fills the defaults: peer_ip for client, bearer_token for token.
  KeySource key{};
  // A request without `key`'s identity: peer, route or skip. Only meaningful when `key` can be
  // missing (can_be_missing); config refuses it for route scope and warns for the others.
  MissingKey missing_key = MissingKey::peer;
  uint32_t requests_per_sec = 0;                // > 0
  uint32_t burst = 0;                           // > 0
  std::vector<std::string> route_allowlist{};   // upstream names; empty = every upstream
  std::chrono::milliseconds idle_ttl{300'000};  // > 0: a bucket idle this long is reclaimed
  // The most identities the rule's table holds (RateTable::kMaxLive unless written); past it a
  // new identity takes over a fully refilled or the least recently used bucket.
  uint32_t max_keys = 1024;
  OnTableFull on_table_full = OnTableFull::overflow_bucket;
  Mode mode = Mode::enforce;
  // Tenant scope only: the plan named by `tier_key` picks the rates; a plan naming no tier (or
  // none sent) uses the rule's own requests_per_sec and burst.
  KeySource tier_key{};
  std::map<std::string, RateTier, std::less<>> tiers{};
  bool operator==(const ScopedRateLimitParams&) const = default;
};

// The most [[resilience.scoped_rate_limits]] rules: what one request holds to give back when a
// later rule refuses it lives on the stack.
inline constexpr std::size_t kMaxScopedRateLimits = 32;

// How [resilience.quota] answers when its counter backend cannot decide (a timeout, Redis
// unreachable, an error reply): admit the request and record a degraded outcome, or refuse it
// with 503 backend_timeout / backend_unavailable / backend_error.
enum class BackendFailurePolicy : uint8_t { fail_open, fail_closed };

// Where the quota's counters live: in this process (exact across its reactors, not shared with
// other instances), or in Redis, shared by every floodgate that points at it.
enum class QuotaBackendKind : uint8_t { in_memory, redis };

// The Redis server of a redis backend, from `url` (redis://[user:password@]host[:port][/db]).
// The host name is resolved once, when the configuration is loaded, on the main thread: a
// reactor never waits for DNS, and a DNS change takes effect with the next reload.
struct RedisTarget {
  std::string host{};     // as written in the url (a name or an IP literal), for logs
  std::string address{};  // the numeric IP address `host` resolved to, without brackets
  uint16_t port = 6379;
  uint32_t db = 0;         // SELECTed after connecting when not 0
  std::string username{};  // empty: the default user (AUTH <password>)
  std::string password{};  // empty: no AUTH; percent-decoded
  bool operator==(const RedisTarget&) const = default;
};

// [resilience.quota.backend]: a tagged table; the keys after key_prefix are kind = "redis"
// only (config refuses them with in_memory).
struct QuotaBackendParams {
  QuotaBackendKind kind = QuotaBackendKind::in_memory;
  std::string key_prefix = "floodgate:quota";      // namespace of the counter keys, non-empty
  RedisTarget redis{};                             // redis only: from `url` (required)
  std::chrono::milliseconds connect_timeout{250};  // > 0
  std::chrono::milliseconds command_timeout{100};  // > 0: one decision's reply
  uint32_t max_inflight = 1024;                    // > 0: Redis decisions in flight, per process
  bool operator==(const QuotaBackendParams&) const = default;
};

// [resilience.quota.local_fallback] (redis backends only): per-instance counters that decide
// when Redis times out or is unavailable (not on an error reply), reported as degraded.
struct QuotaLocalFallbackParams {
  std::string key_prefix = "floodgate:quota:fallback";  // non-empty
  uint32_t max_entries = 0;                             // > 0: live fallback buckets
  bool operator==(const QuotaLocalFallbackParams&) const = default;
};

// What a policy's counters are keyed by, in the stable order policy, route, tenant, token,
// client. A dimension with Kind::none is not selected; at least one dimension is. The sources
// each identity dimension accepts are narrower than the scoped limits' (seed 004's matrix,
// checked by config/), and no two dimensions use the same source.
struct QuotaSelector {
  bool route = false;  // the upstream routed to, readable in the key
  KeySource tenant{};  // header, cookie, query or bearer_token
  KeySource token{};   // header, cookie, query or bearer_token
  KeySource client{};  // header, cookie, query, peer_ip or client_ip
  bool operator==(const QuotaSelector&) const = default;
};

// One window of a policy: at most `requests` requests in `window`.
struct QuotaWindow {
  uint32_t requests = 0;                // > 0
  std::chrono::milliseconds window{0};  // > 0
  bool operator==(const QuotaWindow&) const = default;
};

// One [[resilience.quota.policies]] entry. Both windows, when both are set, are one atomic
// decision (burst.window < sustained.window): a request is allowed only when each permits it,
// and a denial takes from neither.
struct QuotaPolicyParams {
  std::string name{};                          // unique, non-empty
  std::vector<std::string> route_allowlist{};  // upstream names; empty = every upstream
  QuotaSelector selector{};
  // A request lacking a selected dimension's identity: refuse (429 selector_identity_missing),
  // skip (the policy does not count it) or peer (the client's address stands in for it).
  MissingKey missing_key = MissingKey::refuse;
  std::optional<QuotaWindow> burst{};  // at least one of the two
  std::optional<QuotaWindow> sustained{};
  bool operator==(const QuotaPolicyParams&) const = default;
};

// The most [[resilience.quota.policies]] entries: each one a request matches is one decision
// of the backend (a Redis round trip) on its path, evaluated in order.
inline constexpr std::size_t kMaxQuotaPolicies = 32;

// [resilience.quota]: the distributed quota (issue 16), burst and sustained contracts whose
// counters N floodgate instances can share in Redis. Validated even when not enabled.
// Enforced by proxy/quota_stage.h.
struct QuotaParams {
  bool enabled = false;              // true needs at least one policy
  Mode enforcement = Mode::enforce;  // shadow: would-deny outcomes are recorded and admitted
  BackendFailurePolicy backend_failure_policy = BackendFailurePolicy::fail_closed;
  QuotaBackendParams backend{};
  std::optional<QuotaLocalFallbackParams> local_fallback{};  // redis backends only
  std::vector<QuotaPolicyParams> policies{};                 // in configuration order
  bool operator==(const QuotaParams&) const = default;
};

struct Params {
  InflightParams inflight;
  MemoryGuardParams memory_guard;
  ProtocolParams protocol;
  CircuitBreakerParams circuit_breaker;
  RetryBudgetParams retry_budget;
  HedgingParams hedging;
  AdaptiveAdmissionParams adaptive_admission;
  BrownoutParams brownout;
  RouteQueueParams route_queue;
  WatchdogParams watchdog;
  std::vector<ScopedRateLimitParams> scoped_rate_limits;  // in configuration order
  QuotaParams quota;
  bool operator==(const Params&) const = default;
};

}  // namespace floodgate::resilience
