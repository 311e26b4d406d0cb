// ReactorMetrics: every request-path metric of one reactor (its shard). docs/metrics.md lists
// the metrics; render_prometheus (prometheus.h) sums all reactors' shards at scrape time.
//
// Threads: the write methods and client_connections.add() only on the owning reactor's thread;
// the read accessors on any thread (relaxed reads; see counter.h). The shard must outlive every
// scrape that reads it.
//
// Invariants: everything is allocated in the constructor for a fixed number N of upstreams, so
// the write methods never allocate, never throw and take no lock. Request slots: slot 0 counts
// requests answered before routing (label upstream=""), slot i + 1 counts upstream id i
// (slot_for(i)). Preconditions (checked by assert only): slot < N + 1, upstream < N.
#pragma once

#include <array>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/counter.h"
#include "floodgate/metrics/histogram.h"

namespace floodgate {

inline constexpr std::size_t kStatusClasses = 5;  // 1xx .. 5xx
inline constexpr std::array<std::string_view, kStatusClasses> kStatusClassLabels{
    "1xx", "2xx", "3xx", "4xx", "5xx"};

// 0 for 1xx .. 4 for 5xx. A status outside 100..599 is clamped into 1xx or 5xx.
constexpr std::size_t status_class(int status) noexcept {
  const int hundreds = status / 100;
  if (hundreds < 1) {
    return 0;
  }
  if (hundreds > 5) {
    return 4;
  }
  return static_cast<std::size_t>(hundreds - 1);
}

// Why accept() failed on a client listener (floodgate_accept_errors_total{reason}): the process
// is out of descriptors (emfile), the system is (enfile), the kernel is out of socket buffers
// (enobufs) or memory (enomem), or anything else but a client giving up (other).
enum class AcceptError : uint8_t { emfile, enfile, enobufs, enomem, other };
inline constexpr std::array<std::string_view, 5> kAcceptErrorLabels{"emfile", "enfile", "enobufs",
                                                                    "enomem", "other"};

// The reactor's two buffer pools (floodgate_buffer_blocks{pool}): request heads and bodies, and
// response heads and bodies.
enum class BufferPoolKind : uint8_t { request, response };
inline constexpr std::array<std::string_view, 2> kBufferPoolLabels{"request", "response"};

// What became of a failed attempt's retry (floodgate_retries_total{upstream,outcome}): sent (a
// second attempt went to another backend), then succeeded or failed; or not sent, because the
// budget denied it (denied_budget) or no other backend could take it (no_alternate).
enum class RetryResult : uint8_t { sent, succeeded, failed, denied_budget, no_alternate };
inline constexpr std::array<std::string_view, 5> kRetryResultLabels{
    "sent", "succeeded", "failed", "denied_budget", "no_alternate"};

// Hedging (floodgate_hedges_total{upstream,result}): a hedge was sent; the exchange's response
// came from the hedge or from the primary; an attempt was cancelled because the other won.
enum class HedgeResult : uint8_t { sent, won_by_hedge, won_by_primary, cancelled };
inline constexpr std::array<std::string_view, 4> kHedgeResultLabels{"sent", "won_by_hedge",
                                                                    "won_by_primary", "cancelled"};

// TLS handshakes on the listeners (floodgate_tls_handshakes_total{result,version}): finished
// (ok), refused for a protocol error or a plain-HTTP client (failed), cut short by the client
// closing or resetting (closed), not finished within server.header_timeout (timeout), or not
// begun because the front in-flight cap was full (refused); the version agreed, "unknown" for
// a handshake that did not finish.
enum class TlsHandshakeResult : uint8_t { ok, failed, closed, timeout, refused };
inline constexpr std::array<std::string_view, 5> kTlsHandshakeResultLabels{"ok", "failed", "closed",
                                                                           "timeout", "refused"};
inline constexpr std::array<std::string_view, 3> kTlsVersionLabels{"1.2", "1.3", "unknown"};

// HTTP/2 from clients (proxy/h2_conn.h): connections by how they became HTTP/2 (ALPN on TLS, or
// the preface on an h2c listener), streams opened and refused (REFUSED_STREAM), misbehaviour
// points by kind (http/h2_session.h's Glitch, in its order), and the GOAWAY frames floodgate
// sent by their code.
inline constexpr std::array<std::string_view, 2> kH2ViaLabels{"alpn", "h2c"};
inline constexpr std::array<std::string_view, 10> kH2GlitchLabels{
    "reset_unanswered", "tiny_continuation",   "empty_data",    "ping_flood",   "settings_flood",
    "priority_flood",   "window_update_flood", "closed_stream", "stream_error", "header_overflow"};
inline constexpr std::array<std::string_view, 3> kH2GoawayLabels{"no_error", "enhance_your_calm",
                                                                 "other"};
inline constexpr std::size_t kTlsVersionUnknown = kTlsVersionLabels.size() - 1;

// The index of `version` ("1.2", "1.3") in kTlsVersionLabels; kTlsVersionUnknown otherwise.
constexpr std::size_t tls_version_index(std::string_view version) noexcept {
  for (std::size_t i = 0; i < kTlsVersionUnknown; ++i) {
    if (kTlsVersionLabels[i] == version) return i;
  }
  return kTlsVersionUnknown;
}

// The refusals the process log summarises (docs/operations.md, "The process log"): the answers a
// control gave in place of the backend because of load or a limit: the front cap and the memory
// guard (before routing), the buffers, the pools, health checks and circuit breakers, the
// local protection, the rate limits and the quota (its limits and its backend). Not here: a
// client's malformed request, the protocol policy (a request refused for what it is, not for
// the load) and the backends' failures, which the process log has per backend already.
inline constexpr std::array<Reason, 19> kShedReasons{{
    // Before routing, and the buffers (before or after).
    Reason::inflight_cap,
    Reason::memory_pressure,
    Reason::buffers_exhausted,
    // The pools, health checks and circuit breakers.
    Reason::proxy_overloaded,
    Reason::pending_timeout,
    Reason::generation_retired,
    Reason::no_eligible_backend,
    Reason::no_healthy_backend,
    Reason::circuit_open,
    // The local protection.
    Reason::brownout,
    Reason::adaptive_limit,
    Reason::route_cap,
    Reason::global_cap,
    // The rate limits and the quota.
    Reason::rate_limited,
    Reason::burst_quota_exhausted,
    Reason::sustained_quota_exhausted,
    Reason::backend_timeout,
    Reason::backend_unavailable,
    Reason::backend_error,
}};

// The index of `r` in kShedReasons, or kShedReasons.size() when it is not one: one load from a
// table made at compile time (the request path asks it once per request).
inline constexpr auto kShedIndex = [] {
  std::array<unsigned char, kReasonCount> index{};
  index.fill(static_cast<unsigned char>(kShedReasons.size()));
  for (std::size_t i = 0; i < kShedReasons.size(); ++i) {
    index[static_cast<std::size_t>(kShedReasons[i])] = static_cast<unsigned char>(i);
  }
  return index;
}();
constexpr std::size_t shed_reason_index(Reason r) noexcept {
  return kShedIndex[static_cast<std::size_t>(r)];
}

// A struct by name (as the design refers to it) but with private storage: the sizes are invariants.
struct ReactorMetrics {
  static constexpr std::size_t kUnroutedSlot = 0;
  static constexpr std::size_t slot_for(uint32_t upstream) noexcept { return upstream + 1; }

  explicit ReactorMetrics(std::size_t upstreams);

  // --- Writers: the owning reactor's thread only. ---

  // A request answered with `status` after `duration`, in slot kUnroutedSlot or slot_for(id).
  void count_request(std::size_t slot, int status, std::chrono::nanoseconds duration) noexcept {
    assert(slot < slots_.size());
    Slot& s = slots_[slot];
    s.requests[status_class(status)].add();
    s.duration.observe(duration);
  }
  // A response floodgate generated itself. Reason::none is accepted but never rendered.
  void generated(Reason reason) noexcept { generated_[static_cast<std::size_t>(reason)].add(); }
  // A request of slot `slot` ended with an answer floodgate generated for `reason`: counted
  // when the reason is one of kShedReasons (the process log's shedding summary), else ignored.
  void refused(std::size_t slot, Reason reason) noexcept {
    assert(slot < slots_.size());
    const std::size_t i = shed_reason_index(reason);
    if (i < kShedReasons.size()) slots_[slot].refused[i].add();
  }
  // A connection attempt to a backend of `upstream` failed: refused, unreachable, reset while
  // connecting, or timed out (a connect timeout also counts in timeout()).
  void connect_failure(uint32_t upstream) noexcept {
    per_upstream(upstream).connect_failures.add();
  }
  // A connect timeout or a response timeout on `upstream` (each answered 504 or retried).
  void timeout(uint32_t upstream) noexcept { per_upstream(upstream).timeouts.add(); }
  // Pool admission of `upstream`: a request got its slot (at once or after waiting); a request
  // was turned away for `reason` (one of kPoolRejections); a request left the queue after
  // waiting `wait` (granted, timed out, retired or abandoned); a waiting client went away.
  void pool_admitted(uint32_t upstream) noexcept { per_upstream(upstream).admitted.add(); }
  void pool_rejected(uint32_t upstream, Reason reason) noexcept {
    const std::size_t i = pool_rejection_index(reason);
    assert(i < kPoolRejections.size());
    per_upstream(upstream).rejected[i].add();
  }
  void pool_queue_wait(uint32_t upstream, std::chrono::nanoseconds wait) noexcept {
    per_upstream(upstream).queue_wait.observe(wait);
  }
  void pool_abandoned(uint32_t upstream) noexcept { per_upstream(upstream).abandoned.add(); }
  // A request of `upstream` answered 503 circuit_open: every backend's circuit was open.
  void circuit_rejected(uint32_t upstream) noexcept {
    per_upstream(upstream).circuit_rejected.add();
  }
  // A request of `upstream` sent to a backend whose circuit is open because every backend's
  // was (when_all_open = least_recently_failed: the breakers failed open).
  void circuit_fail_open(uint32_t upstream) noexcept {
    per_upstream(upstream).circuit_fail_open.add();
  }
  // A request to `upstream` turned away by the local protection: brownout, adaptive_limit,
  // route_cap or global_cap (kProtectionRejections).
  void protection_rejected(uint32_t upstream, Reason reason) noexcept {
    const std::size_t i = protection_rejection_index(reason);
    assert(i < kProtectionRejections.size());
    per_upstream(upstream).protection[i].add();
  }
  // A failed attempt's retry on `upstream` (RetryResult).
  void retry(uint32_t upstream, RetryResult result) noexcept {
    per_upstream(upstream).retries[static_cast<std::size_t>(result)].add();
  }
  // A hedge on `upstream` (HedgeResult).
  void hedge(uint32_t upstream, HedgeResult result) noexcept {
    per_upstream(upstream).hedges[static_cast<std::size_t>(result)].add();
  }
  // A stage in shadow mode would have refused a request for `reason` (one of kStageReasons).
  void shadow_rejected(StageId stage, Reason reason) noexcept {
    shadow_[stage_reason_index(stage, reason)].add();
  }
  // accept() on a client listener failed for `error` (the listener backs off and retries).
  void accept_failed(AcceptError error) noexcept {
    accept_errors_[static_cast<std::size_t>(error)].add();
  }

  // A TLS handshake on a listener ended with `result`, on version `version` (an index into
  // kTlsVersionLabels); a finished one took `duration` from accept and `resumed` a session.
  void tls_handshake(TlsHandshakeResult result, std::size_t version) noexcept {
    tls_handshakes_[static_cast<std::size_t>(result)][version].add();
  }
  void tls_handshake_done(std::chrono::nanoseconds duration, bool resumed) noexcept {
    tls_handshake_duration_.observe(duration);
    if (resumed) tls_resumptions_.add();
  }

  // HTTP/2 (kH2ViaLabels, kH2GlitchLabels, kH2GoawayLabels).
  std::array<Counter, kH2ViaLabels.size()> h2_connections{};
  Counter h2_streams;
  Counter h2_refused_streams;
  std::array<Counter, kH2GlitchLabels.size()> h2_glitches{};
  std::array<Counter, kH2GoawayLabels.size()> h2_goaways{};

  Gauge client_connections;      // open client connections: add(1) on accept, add(-1) on close
  Counter accepted_connections;  // client connections accepted, ever
  Counter send_timeouts;         // connections closed for server.send_timeout
  // Connections that have not completed their first request head (server.max_opening_connections),
  // and those closed to make room for a newer one.
  Gauge opening_connections;
  Counter opening_evictions;
  // Requests sent whole to a backend whose response head has not come yet: what waits on the
  // backends (the watchdog's overload cause), never what waits on a client.
  Gauge awaiting_backend;

  // One buffer pool's state, refreshed by the reactor once a second (not per request): blocks
  // lent out, blocks kept free, bytes held from the allocator, and bytes trim() gave back.
  struct BufferPoolShard {
    Gauge in_use_blocks;
    Gauge free_blocks;
    Gauge bytes;
    Counter trimmed_bytes;
  };
  BufferPoolShard& buffer_pool(BufferPoolKind kind) noexcept {
    return buffer_pools_[static_cast<std::size_t>(kind)];
  }

  // --- Readers: any thread. ---

  std::size_t upstreams() const noexcept { return upstreams_.size(); }
  std::size_t slots() const noexcept { return slots_.size(); }  // upstreams() + 1
  const Counter& requests(std::size_t slot, std::size_t status_class) const noexcept {
    return slots_[slot].requests[status_class];
  }
  const Histogram& duration(std::size_t slot) const noexcept { return slots_[slot].duration; }
  // `index` into kShedReasons.
  const Counter& refused(std::size_t slot, std::size_t index) const noexcept {
    return slots_[slot].refused[index];
  }
  const Counter& connect_failures(uint32_t upstream) const noexcept {
    return upstreams_[upstream].connect_failures;
  }
  const Counter& timeouts(uint32_t upstream) const noexcept {
    return upstreams_[upstream].timeouts;
  }
  const Counter& pool_admitted(uint32_t upstream) const noexcept {
    return upstreams_[upstream].admitted;
  }
  // `index` into kPoolRejections.
  const Counter& pool_rejected(uint32_t upstream, std::size_t index) const noexcept {
    return upstreams_[upstream].rejected[index];
  }
  const Histogram& pool_queue_wait(uint32_t upstream) const noexcept {
    return upstreams_[upstream].queue_wait;
  }
  const Counter& pool_abandoned(uint32_t upstream) const noexcept {
    return upstreams_[upstream].abandoned;
  }
  const Counter& circuit_rejected(uint32_t upstream) const noexcept {
    return upstreams_[upstream].circuit_rejected;
  }
  const Counter& circuit_fail_open(uint32_t upstream) const noexcept {
    return upstreams_[upstream].circuit_fail_open;
  }
  // `index` into kProtectionRejections.
  const Counter& protection_rejected(uint32_t upstream, std::size_t index) const noexcept {
    return upstreams_[upstream].protection[index];
  }
  const Counter& retries(uint32_t upstream, RetryResult result) const noexcept {
    return upstreams_[upstream].retries[static_cast<std::size_t>(result)];
  }
  const Counter& hedges(uint32_t upstream, HedgeResult result) const noexcept {
    return upstreams_[upstream].hedges[static_cast<std::size_t>(result)];
  }
  const Counter& responses_generated(Reason reason) const noexcept {
    return generated_[static_cast<std::size_t>(reason)];
  }
  const Counter& shadow_rejections(std::size_t stage_reason) const noexcept {
    return shadow_[stage_reason];
  }
  const Counter& accept_errors(AcceptError error) const noexcept {
    return accept_errors_[static_cast<std::size_t>(error)];
  }
  const BufferPoolShard& buffer_pool(BufferPoolKind kind) const noexcept {
    return buffer_pools_[static_cast<std::size_t>(kind)];
  }
  const Counter& tls_handshakes(std::size_t result, std::size_t version) const noexcept {
    return tls_handshakes_[result][version];
  }
  const Histogram& tls_handshake_duration() const noexcept { return tls_handshake_duration_; }
  const Counter& tls_resumptions() const noexcept { return tls_resumptions_; }

 private:
  struct Slot {
    std::array<Counter, kStatusClasses> requests{};
    Histogram duration;
    std::array<Counter, kShedReasons.size()> refused{};
  };
  struct Upstream {
    Counter connect_failures;
    Counter timeouts;
    Counter admitted;
    std::array<Counter, kPoolRejections.size()> rejected{};
    Counter abandoned;
    Histogram queue_wait;
    Counter circuit_rejected;
    Counter circuit_fail_open;
    std::array<Counter, kRetryResultLabels.size()> retries{};
    std::array<Counter, kHedgeResultLabels.size()> hedges{};
    std::array<Counter, kProtectionRejections.size()> protection{};
  };

  Upstream& per_upstream(uint32_t upstream) noexcept {
    assert(upstream < upstreams_.size());
    return upstreams_[upstream];
  }

  std::vector<Slot> slots_;          // size N + 1, never resized
  std::vector<Upstream> upstreams_;  // size N, never resized
  std::array<Counter, kReasonCount> generated_{};
  std::array<Counter, kAcceptErrorLabels.size()> accept_errors_{};
  std::array<Counter, kStageReasons.size() + 1> shadow_{};  // + 1: a pair not in the table
  std::array<BufferPoolShard, kBufferPoolLabels.size()> buffer_pools_{};
  std::array<std::array<Counter, kTlsVersionLabels.size()>, kTlsHandshakeResultLabels.size()>
      tls_handshakes_{};
  Histogram tls_handshake_duration_;
  Counter tls_resumptions_;
};

}  // namespace floodgate
