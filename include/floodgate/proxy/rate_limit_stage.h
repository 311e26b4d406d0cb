// The scoped rate limits (docs/resilience.md, issue 15): traffic contracts, first on each
// route's chain, before the local protection spends a permit on a request the contract refuses.
//
// The rules that apply to the route's upstream (route_allowlist) run in configuration order.
// Each takes one token from the bucket of the request's identity (request_key.h: its key
// source), hashed with SHA-256 before it is looked up (resilience/identity_digest.h): the rule's
// table never holds a raw value. A request without the key is counted as the rule's
// missing_key says (issue 35): by the client's address (peer, the default), in one bucket for
// the route the stage serves (route: its [[routes]] entry, host normalised as routing compares
// it, and path_prefix, so neither another spelling of a host nor an invented host name under a
// wildcard route makes a new bucket), or not at all (skip, counted as skipped).
// The first enforced rule whose bucket is empty answers 429 rate_limited with Retry-After (the
// time until a token is there, in whole seconds, at least 1) and X-Floodgate-Limit naming the
// rule, and gives back what the rules before it took: a refused request costs no contract
// anything. A rule in shadow mode that would refuse counts it (floodgate_shadow_rejections_total,
// its own shadow count, would_reject in the access log) and the request goes on.
//
// A tenant rule with tiers takes at the rates of the plan its tier_key names; a plan naming no
// tier, or none sent, takes at the rule's own rates.
//
// The buckets are process-wide (resilience/rate_rule.h): one rate whatever the number of
// reactors. They outlive generations: RateLimits::signature says which reload keeps them.
//
// Thread-safety: built on the main thread with its generation; check() on any reactor.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/core/ip_range.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/gcra.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/rate_rule.h"
#include "floodgate/routing/params.h"

namespace floodgate::proxy {

struct Upstream;

// One generation's form of a rule: its rates resolved, its answers prebuilt.
struct RateLimitRule {
  resilience::ScopedRateLimitParams params;
  std::shared_ptr<resilience::RateRule> state;  // process-wide, across the reloads keeping it
  resilience::GcraRate rate;
  std::vector<std::pair<std::string, resilience::GcraRate>> tiers;  // by plan name, sorted
  std::vector<PrebuiltAnswer> answers;  // 429 for Retry-After 1, 2, ... seconds

  RateLimitRule(resilience::ScopedRateLimitParams p, std::shared_ptr<resilience::RateRule> s);
  // The rates of `plan` (a tier's, else the rule's own).
  const resilience::GcraRate& rate_for(std::string_view plan) const noexcept;
  // The answer for a refusal with `retry_after` to go until a token is there.
  const PrebuiltAnswer& answer(std::chrono::nanoseconds retry_after) const noexcept;
  bool applies_to(std::string_view upstream) const noexcept;
};

// A generation's rate limits.
struct RateLimits {
  std::vector<RateLimitRule> rules;      // configuration order
  std::vector<IpRange> trusted_proxies;  // server.trusted_proxies, for client_ip

  // What must stay the same for a reload to keep a rule's buckets: its name, scope, key, rates,
  // max_keys and tiers. Mode, allowlist, idle_ttl, on_table_full and missing_key may change and
  // keep them (an anonymous request's bucket is keyed apart from every key's identity).
  static std::string signature(const resilience::ScopedRateLimitParams& p);
};

inline constexpr std::size_t kMaxRateRules = resilience::kMaxScopedRateLimits;

// The rate limit stage of `route` (the [[routes]] entry whose chain it is) to `up`, when some
// rule applies to it.
void add_rate_limit_stage(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                          const RouteParams& route, std::shared_ptr<const RateLimits> limits);

}  // namespace floodgate::proxy
