// The schema of the distributed quota (issue 16, resilience::QuotaParams): the table
// [resilience.quota] with its sub-tables [resilience.quota.backend] (a tagged table: kind =
// "in_memory" or "redis"), [resilience.quota.local_fallback] and the array of tables
// [[resilience.quota.policies]], each policy with its selector and its burst and sustained
// windows. Every rule of seed 004 is checked in the one pass of the load, whether or not the
// quota is enabled; the Redis host is resolved here (redis_url.h). The request path enforces
// it in the quota stage (proxy/quota_stage.h). docs/configuration.md lists every key. Main
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "floodgate/resilience/params.h"
#include "rate_limit_schema.h"
#include "table_reader.h"
#include "upstream_refs.h"

namespace floodgate::config::detail {

// The largest `requests` of a window: far above any contract one key is held to, yet a bound,
// so that a count (and a sliding window's weighted count) stays exact in Redis's and Lua's
// numbers.
inline constexpr int64_t kMaxQuotaRequests = 1'000'000'000;

// The largest max_inflight of a redis backend and max_entries of a local fallback: bounds of
// memory the stage sizes when a generation is built.
inline constexpr int64_t kMaxQuotaInflight = 1'000'000;
inline constexpr int64_t kMaxFallbackEntries = 1'000'000;

// The longest key_prefix: every counter key starts with it, and the stage builds each key in a
// buffer of bounded size.
inline constexpr size_t kMaxQuotaKeyPrefix = 128;

// Reads the [resilience.quota] table `r` into `p`, recording every error and warning of it and
// of its sub-tables. A selector's client_ip is marked in `marks`, for the warning of
// check_scoped_rate_limits() when server.trusted_proxies is empty.
void read_quota(TableReader& r, resilience::QuotaParams& p, const UpstreamRefs& u,
                RateLimitMarks& marks);

// (quota_policies.cpp) The array of tables `policies` of the [resilience.quota] table `r`, in
// file order, each policy checked on its own and against the ones before it. `enabled`: whether
// the quota is (check notes what its policies do with a request lacking an identity).
void read_quota_policies(TableReader& r, std::vector<resilience::QuotaPolicyParams>& out,
                         const UpstreamRefs& u, RateLimitMarks& marks, bool enabled);

}  // namespace floodgate::config::detail
