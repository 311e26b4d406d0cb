// The schema of the scoped rate limits (issue 15, resilience/params.h): the array of tables
// [[resilience.scoped_rate_limits]], one rule each, and server.trusted_proxies, the peers whose
// X-Forwarded-For a client_ip key source believes. The request path enforces them in the rate
// limit stage (proxy/rate_limit_stage.h). A rule's own keys are checked as it is read (scope
// against key, tiers against tier_key); the rule between the rules and [server] (client_ip
// without a trusted proxy) runs once the whole document is read, over what the readers marked
// here. docs/configuration.md lists every key. Main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector.h"
#include "floodgate/config/config.h"
#include "floodgate/core/ip_range.h"
#include "floodgate/resilience/params.h"
#include "table_reader.h"
#include "upstream_refs.h"

namespace floodgate::config::detail {

// The largest requests_per_sec and burst of a rule or a tier: far above what one proxy serves,
// yet a bound, so that the bucket arithmetic (burst x 1 s / rate, in nanoseconds) never
// overflows.
inline constexpr int64_t kMaxRate = 10'000'000;

// The bounds of a rule's max_keys. Its table takes 128 bytes a key (256 at most: the slots are
// twice max_keys rounded up to a power of two, one cache line each), allocated when the rule is
// built, so the upper bound bounds that memory (128 MiB); below the lower one a handful of
// clients would keep taking each other's buckets over.
inline constexpr int64_t kMinRateKeys = 16;
inline constexpr int64_t kMaxRateKeys = 1'000'000;

// What check_scoped_rate_limits() needs of the rules, and of the quota's selectors
// (quota_schema.h), whose client dimension takes client_ip too.
struct RateLimitMarks {
  struct Source {
    Position at;       // of the key
    std::string path;  // "resilience.scoped_rate_limits[0].key"
    std::string key;   // "key" or "tier_key"
  };
  std::vector<Source> client_ip;  // every valid key and tier_key that is client_ip
};

// Reads the array of tables `scoped_rate_limits` of the [resilience] table `r` into `out`, in
// file order, recording every error and warning of each rule; each rule is finished here.
void read_scoped_rate_limits(TableReader& r, std::vector<resilience::ScopedRateLimitParams>& out,
                             const UpstreamRefs& u, RateLimitMarks& marks);

// server.trusted_proxies of the [server] table `r`: an array of distinct IP addresses and CIDR
// ranges (IpRange::parse). Assigned only when every element is valid; false when one is not.
bool read_trusted_proxies(TableReader& r, std::vector<IpRange>& out);

// The rule between the rules (and the quota selectors) and [server]: client_ip with no trusted
// proxy is the peer's address, which is worth a warning at the key. `trusted_proxies_ok`: the list
// had no error.
void check_scoped_rate_limits(const Config& c, bool trusted_proxies_ok, const RateLimitMarks& marks,
                              Collector& out);

}  // namespace floodgate::config::detail
