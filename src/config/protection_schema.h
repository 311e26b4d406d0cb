// The schema of the local runtime protection sub-tables of [resilience] (issue 14,
// resilience/params.h): [resilience.adaptive_admission], [resilience.brownout],
// [resilience.route_queue] and [resilience.watchdog], which the request path enforces
// (proxy/protection_stages.h) and the watchdog thread applies (app/watchdog.h). Each reader
// checks its own table; the rules against other tables (the adaptive ceiling against the front
// in-flight cap, which the environment may override, and the watchdog's drain_grace against
// server.drain_timeout) run once the whole document and the environment are read
// (check_protection, resilience_schema.h), over what the readers marked here.
// docs/resilience.md lists every key. Main thread only.
#pragma once

#include <optional>

#include "collector.h"
#include "floodgate/resilience/params.h"
#include "table_reader.h"
#include "upstream_refs.h"

namespace floodgate::config::detail {

// Where a key was written, and whether its value was valid: an invalid one keeps its default,
// which a rule must not mistake for what the operator wrote.
struct KeyMark {
  std::optional<Position> at;  // of the key; nullopt when it is not written
  bool ok = true;
};

// What the readers saw that the cross-table rules need.
struct ProtectionMarks {
  std::optional<Position> adaptive_at;  // of [resilience.adaptive_admission], when written
  KeyMark adaptive_enabled;
  KeyMark min_limit;
  KeyMark max_limit;
  std::optional<Position> brownout_at;  // of [resilience.brownout], when written
  KeyMark brownout_enabled;
  std::optional<Position> route_queue_at;  // of [resilience.route_queue], when written
  bool route_caps_ok = true;               // default_cap and caps
  std::optional<Position> watchdog_at;     // of [resilience.watchdog], when written
  KeyMark watchdog_enabled;
  KeyMark drain_grace;
};

// Each reads one sub-table into `p` (which holds the defaults) and records its errors and
// warnings; every key is validated whether or not the table is enabled. The caller finishes
// the table.
void read_adaptive_admission(TableReader& r, resilience::AdaptiveAdmissionParams& p,
                             ProtectionMarks& marks);
void read_brownout(TableReader& r, resilience::BrownoutParams& p, const UpstreamRefs& u,
                   ProtectionMarks& marks);
void read_route_queue(TableReader& r, resilience::RouteQueueParams& p, const UpstreamRefs& u,
                      ProtectionMarks& marks);
void read_watchdog(TableReader& r, resilience::WatchdogParams& p, ProtectionMarks& marks);

}  // namespace floodgate::config::detail
