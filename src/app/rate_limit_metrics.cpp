// The scoped rate limits' families of /metrics (docs/metrics.md): one series per rule of the
// serving generation, labelled by its name (bounded by the configuration; identities never
// appear). Counts come from each rule's process-wide state, summed over its reactor shards.
#include <array>
#include <string_view>

#include "pool_metrics.h"

namespace floodgate::app {

void render_rate_limit_metrics(PrometheusWriter& w, const proxy::Snapshot& serving) {
  const auto& rules = serving.rate_limits->rules;
  if (rules.empty()) return;
  using Totals = resilience::RateRule::Totals;
  constexpr std::string_view kRequests = "floodgate_rate_limit_requests_total";
  w.header(kRequests,
           "Requests each scoped rate limit decided, by result: allowed (took a token), limited "
           "(429 rate_limited), shadow_limited (would have been limited: shadow mode), skipped "
           "(without the rule's key, missing_key = \"skip\": not counted).",
           MetricType::counter);
  for (const proxy::RateLimitRule& r : rules) {
    const Totals t = r.state->totals();
    const std::array<std::pair<std::string_view, uint64_t>, 4> results{
        {{"allowed", t.allowed},
         {"limited", t.limited},
         {"shadow_limited", t.shadow_limited},
         {"skipped", t.skipped}}};
    for (const auto& [result, value] : results) {
      const Label labels[] = {{"rule", r.params.name}, {"result", result}};
      w.sample(kRequests, labels, value);
    }
  }
  constexpr std::string_view kBuckets = "floodgate_rate_limit_buckets";
  w.header(kBuckets, "Live buckets (identities) in each rule's table, at most its max_keys.",
           MetricType::gauge);
  for (const proxy::RateLimitRule& r : rules) {
    const Label labels[] = {{"rule", r.params.name}};
    w.sample(kBuckets, labels, uint64_t{r.state->table().live()});
  }
  constexpr std::string_view kFull = "floodgate_rate_limit_table_full_total";
  w.header(kFull,
           "Requests of a new identity that found the rule's table full and no bucket to take "
           "over (all used in that millisecond), by what was done: overflow_bucket (took from "
           "the rule's one shared bucket), fail_open (passed unlimited).",
           MetricType::counter);
  for (const proxy::RateLimitRule& r : rules) {
    const Totals t = r.state->totals();
    const Label overflow[] = {{"rule", r.params.name}, {"action", "overflow_bucket"}};
    const Label open[] = {{"rule", r.params.name}, {"action", "fail_open"}};
    w.sample(kFull, overflow, t.overflow);
    w.sample(kFull, open, t.failed_open);
  }
  constexpr std::string_view kEvictions = "floodgate_rate_limit_evictions_total";
  w.header(kEvictions,
           "Buckets taken over for a new identity that found no free slot in the rule's table: a "
           "fully refilled one, else the least recently used.",
           MetricType::counter);
  for (const proxy::RateLimitRule& r : rules) {
    const Label labels[] = {{"rule", r.params.name}};
    w.sample(kEvictions, labels, r.state->totals().evicted);
  }
  constexpr std::string_view kReclaimed = "floodgate_rate_limit_reclaimed_total";
  w.header(kReclaimed, "Buckets reclaimed after idle_ttl without a request.", MetricType::counter);
  for (const proxy::RateLimitRule& r : rules) {
    const Label labels[] = {{"rule", r.params.name}};
    w.sample(kReclaimed, labels, r.state->reclaimed());
  }
}

}  // namespace floodgate::app
