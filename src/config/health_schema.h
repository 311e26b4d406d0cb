// The schema of [upstreams.health]: a pool's active health checks (upstream/params.h,
// HealthParams). Its own file because its values have syntaxes of their own (the probe's path
// and Host header, which go on the wire, and the expect_status list). Main thread only.
#pragma once

#include "floodgate/upstream/params.h"
#include "table_reader.h"

namespace floodgate::config::detail {

// Reads the keys of one [upstreams.health] table into `p` (which holds the defaults), records
// their errors and the interval-versus-timeout warning. The caller finishes the table.
void read_health(TableReader& r, HealthParams& p);

}  // namespace floodgate::config::detail
