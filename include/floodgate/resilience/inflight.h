// The front in-flight cap ([resilience.inflight], seed 002 "Admission"): one process-wide limit
// on requests in flight, checked first in the chain, before routing or any other per-request
// work beyond one atomic operation and the exemption check. Over the cap the request is answered
// 503 inflight_cap with Retry-After at once: the cheapest refusal there is, so that a backlog of
// requests that will be refused cannot eat the CPU that admitted ones need.
//
// Three pieces, each usable alone:
//   - resolve_max_inflight() (inflight_sizing.h): the limit, from the params and the shape of the
//     generation ("auto" sizing). Pure; called when a generation is built, on the main thread.
//   - InflightExemptions: which requests never take a slot (CORS preflights, listed methods,
//     paths, upgrades and tunnels). Compiled from the params when a generation is built; exempt()
//     is a read-only scan of a few short strings, callable from any reactor, allocation-free.
//   - InflightCap: the counter itself, a floodgate::Admission (the pools' primitive) used with
//     no queue. Process-wide and long-lived: it outlives every generation, a reload only calls
//     set_limit(). try_enter() is lock-free and allocation-free (see below).
//
// What the integrator must know about the cap:
//   - A refused try_enter() is not counted here: count it in the reactor's metrics shard (a
//     process-wide counter would add a contended write to every refusal, the path that must
//     stay cheapest).
//   - Shadow mode is the chain's: a would-be refusal simply proceeds without a permit, so it is
//     not counted in in_flight().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "floodgate/resilience/inflight_sizing.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/request_view.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::resilience {

// A CORS preflight (Fetch standard): OPTIONS with Origin and Access-Control-Request-Method.
bool is_cors_preflight(const RequestView& request) noexcept;

// Which requests never take a slot of the cap. Matching rules, all exact and case-sensitive:
//   - exempt_preflight: is_cors_preflight();
//   - exempt_methods: the method token equals a listed one ("options" is not OPTIONS);
//   - exempt_path_prefixes / exempt_path_suffixes: a byte prefix / suffix of the normalised path
//     (RequestView::path), so "/%65vents" is "/events". A suffix is never matched on a path of
//     exactly kMaxPathPrefixBytes bytes: MatchPath keeps only that many bytes of a path it had to
//     rewrite, so its end is not the path's end, and such a request takes a slot (the safe side:
//     nobody can get exempted by a long path). Prefixes no longer than that decide exactly;
//   - exempt_upgrades: CONNECT tunnels, held open for as long as the client likes by design,
//     doing no work inside the cap. An upgrade offer (WebSocket) is not exempt here: it takes a
//     slot until its backend answers 101, and the tunnel it becomes gives the slot back then
//     (the proxy's Exchange::release_tickets); a plain answer to it is a request like another.
// Thread-safety: immutable after construction; exempt() from any thread. Cost: a few flag tests
// and at most one short comparison per listed entry; no allocation.
class InflightExemptions {
 public:
  InflightExemptions() = default;  // exempts nothing
  explicit InflightExemptions(const InflightParams& params);

  bool exempt(const RequestView& request) const noexcept;

  // Whether exempt() reads RequestView::path (some prefix or suffix is listed). When false, the
  // caller may run the cap before normalising the path.
  bool needs_path() const noexcept { return !prefixes_.empty() || !suffixes_.empty(); }

 private:
  std::vector<std::string> methods_;
  std::vector<std::string> prefixes_;
  std::vector<std::string> suffixes_;
  bool preflight_ = false;
  bool upgrades_ = false;
};

// The cap. A floodgate::Admission with max_pending = 0 (no queue), so the front cap and the pools
// share one primitive, one state word and one set of reload rules (a lowered limit never revokes
// a permit; in_flight() falls monotonically to the new limit).
//
// Cost. try_enter() is Admission::try_admit(): below the limit a load and one compare-and-swap
// on the state word (plus a relaxed add to its admitted count, same cache line); at the cap one
// relaxed load, and never the mutex (under overload refusals are most arrivals). Releasing the
// Permit is one compare-and-swap (with no queue the "FIFO not empty" flag is never set, so a
// release never takes the slow path). Nothing allocates.
//
// Thread-safety: every member from any thread. Memory ordering: entering acquires and releasing
// releases, like a semaphore; nothing relies on it. Observers are relaxed snapshots.
// Lifetime: outlives every Permit it granted (a process-wide object, like the pools'
// Admission). Neither copies nor moves.
class InflightCap {
 public:
  explicit InflightCap(uint32_t limit = 0) noexcept : admission_({.max_active = limit}) {}
  InflightCap(const InflightCap&) = delete;
  InflightCap& operator=(const InflightCap&) = delete;

  // A slot, held by the returned Permit until it is destroyed or released (exactly once, by
  // construction); an empty Permit when the cap is full. Never blocks, never queues.
  [[nodiscard]] Permit try_enter() noexcept { return admission_.try_admit(); }

  // A reload: takes effect at once; 0 = unlimited. Lowering it revokes nothing.
  void set_limit(uint32_t limit) noexcept { admission_.set_limits({.max_active = limit}); }

  // Observers for metrics and /status (relaxed).
  int64_t in_flight() const noexcept { return admission_.active(); }
  uint32_t limit() const noexcept { return admission_.limit(); }  // 0 = unlimited
  uint64_t admitted() const noexcept { return admission_.admitted(); }

 private:
  Admission admission_;
};

}  // namespace floodgate::resilience
