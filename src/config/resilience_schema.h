// The schema of the top-level [resilience] table (resilience/params.h): the front of the
// request path's stage chain, in the sub-tables [resilience.inflight],
// [resilience.memory_guard] and [resilience.protocol], the failure handling of the backend
// attempt in [resilience.circuit_breaker], [resilience.retry_budget] and [resilience.hedging]
// (failure_schema.h), and the local runtime protection in [resilience.adaptive_admission],
// [resilience.brownout], [resilience.route_queue] and [resilience.watchdog]
// (protection_schema.h), each rejecting unknown keys, the scoped rate limits in the array of
// tables [[resilience.scoped_rate_limits]] (rate_limit_schema.h) and the distributed quota in
// [resilience.quota] (quota_schema.h); the two environment
// variables that override its keys; and the rules between its keys and the rest of the
// document. Its own file because its values have syntaxes of their own (resilience_values.h)
// and rules between its keys. docs/resilience.md lists every key. Main thread only.
#pragma once

#include <optional>

#include "collector.h"
#include "failure_schema.h"
#include "floodgate/config/config.h"
#include "protection_schema.h"
#include "rate_limit_schema.h"
#include "rules.h"
#include "table_reader.h"

namespace floodgate::config::detail {

// Where the keys an environment variable overrides were written, when their values were
// valid: overriding what the file says is worth a warning at the key. And what the rules of
// check_protection() need to know of the front cap and the protection sub-tables.
struct ResilienceMarks {
  std::optional<Position> max_inflight_at;
  std::optional<Position> min_available_at;
  bool max_inflight_ok = true;         // neither the key nor FLOODGATE_MAX_INFLIGHT is invalid
  bool max_inflight_from_env = false;  // FLOODGATE_MAX_INFLIGHT set the front cap
  ProtectionMarks protection;
  RateLimitMarks rate_limits;
};

// Reads the sub-tables of one [resilience] table into `p` (which holds the defaults), records
// their errors and warnings, and rejects every other sub-table, naming the ones that exist.
// `upstreams` is what the failure-handling and protection sub-tables may refer to. The caller
// finishes the table.
void read_resilience_table(TableReader& r, resilience::Params& p, ResilienceMarks& marks,
                           const UpstreamRefs& upstreams);

// (resilience_environment.cpp) Applies FLOODGATE_MAX_INFLIGHT (the syntax of max_inflight) and
// FLOODGATE_MEMORY_GUARD_MIN_MB (an integer of MiB) from `env` over the file's values, and marks
// what it did to the front cap. An invalid value is an error without a position that names the
// variable and its syntax: a safety knob never falls back silently.
void apply_resilience_environment(const Environment& env, ResilienceMarks& marks,
                                  resilience::Params& p, Collector& out);

// (protection_checks.cpp) The rules between the protection sub-tables and the rest of the
// document, once the environment is applied: adaptive_admission's limits against the front
// in-flight cap (its value where the file decides it; for "auto" with server.workers = 0, the
// least it can resolve to), and watchdog.drain_grace against server.drain_timeout.
void check_protection(const Config& c, const DocumentMarks& doc, const ResilienceMarks& marks,
                      Collector& out);

}  // namespace floodgate::config::detail
