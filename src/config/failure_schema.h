// The schema of the failure-handling sub-tables of [resilience] (issue 13, resilience/params.h):
// [resilience.circuit_breaker], [resilience.retry_budget] and [resilience.hedging]. Their own
// file because they refer to the [[upstreams]] entries (by name, and the hedging delay against
// a pool's response_timeout), which the front sub-tables never do. A generation turns them into
// the proxy::FailurePolicy (proxy/failure_policy.h), breakers and retry budgets the request
// path consults. docs/resilience.md lists every key. Main thread only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "floodgate/resilience/params.h"
#include "table_reader.h"
#include "upstream_refs.h"

namespace floodgate::config::detail {

// Each reads one sub-table into `p` (which holds the defaults) and records its errors and
// warnings; every key is validated whether or not the table's `enabled` is true. The caller
// finishes the table.
void read_circuit_breaker(TableReader& r, resilience::CircuitBreakerParams& p);
void read_retry_budget(TableReader& r, resilience::RetryBudgetParams& p, const UpstreamRefs& u);
void read_hedging(TableReader& r, resilience::HedgingParams& p, const UpstreamRefs& u);

// (resilience_schema.cpp) An array of distinct method tokens, with a warning for a standard
// method in the wrong case ("get" never matches a GET request).
bool read_methods(TableReader& r, std::string_view key, std::vector<std::string>& out);

}  // namespace floodgate::config::detail
