#include "floodgate/proxy/rate_limit_stage.h"

#include <algorithm>
#include <array>

#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/request_key.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/identity_digest.h"
#include "floodgate/routing/route_table.h"

namespace floodgate::proxy {

namespace {

using resilience::GcraRate;
using resilience::KeySource;
using resilience::RateRule;
using resilience::RateScope;

constexpr int64_t kSecond = 1'000'000'000;

// The tag that keeps identities from different sources apart in the digest (an authority
// "a.example" is not the header value "a.example", nor an anonymous client's address the header
// value "192.0.2.7").
std::string_view tag_of(KeySource::Kind kind) noexcept {
  static constexpr std::array<char, 11> kTags{'-', 'h', 'c', 'q', 'p', 'a',
                                              'm', 'i', 'r', 'x', 'b'};
  const auto i = static_cast<std::size_t>(kind);
  return {&kTags[i < kTags.size() ? i : 0], 1};
}

// The bucket of the requests of `route` that lack a rule's key (missing_key = "route"): the
// route's host as routing compares it, and its path prefix. Its own frame of three parts, so it
// is no key's identity and no route-scope bucket.
resilience::Digest route_entry_digest(const RouteParams& route) {
  std::array<char, RouteTable::kMaxHostBytes> host{};
  return resilience::digest_of(
      {"missing:route", normalise_host(route.host, host), route.path_prefix});
}

class RateLimitStage final : public Stage {
 public:
  RateLimitStage(const Upstream& up, const RouteParams& route,
                 std::shared_ptr<const RateLimits> limits)
      : Stage(StageId::rate_limit, resilience::Mode::enforce), limits_(std::move(limits)) {
    for (const RateLimitRule& r : limits_->rules) {
      if (r.applies_to(up.params.name) && rules_.size() < kMaxRateRules) rules_.push_back(&r);
    }
    route_digest_ = resilience::digest_of({"route", up.params.name});
    route_entry_digest_ = route_entry_digest(route);
  }

  bool empty() const noexcept { return rules_.empty(); }

  Decision check(Exchange& ex, Ticket&) const noexcept override {
    const auto now = ex.started;
    const KeyContext ctx{.head = &ex.head,
                         .request = &ex.request,
                         .peer = &ex.conn->peer,
                         .peer_text = ex.conn->peer_text,
                         .connection_id = ex.conn->connection_id,
                         .trusted_proxies = &limits_->trusted_proxies};
    std::array<RateRule::Held, kMaxRateRules> held{};
    std::array<char, kKeyScratch> scratch{};
    uint32_t allowed = 0;  // one bit per rule that took a token
    for (std::size_t i = 0; i < rules_.size(); ++i) {
      const RateLimitRule& rule = *rules_[i];
      const resilience::ScopedRateLimitParams& p = rule.params;
      resilience::Digest id = route_digest_;
      if (p.scope != RateScope::route) {
        const Identity who = identity_of(p.key, p.missing_key, ctx, scratch);
        if (who.as == Counted::skipped || who.as == Counted::refused) {
          // refused is not a rate limit's value (config): skipped as well, never a 429.
          rule.state->shard(ex.reactor_index).skipped.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        id = identity(ex, p.key.kind, who);
      }
      const GcraRate& rate =
          rule.tiers.empty() ? rule.rate : rule.rate_for(key_of(p.tier_key, ctx, scratch));
      RateRule::Shard& counts = rule.state->shard(ex.reactor_index);
      const resilience::GcraTake t =
          rule.state->take(id, now, rate, p.on_table_full, counts, held[i]);
      if (t.allowed) {
        allowed |= uint32_t{1} << i;
        continue;
      }
      if (p.mode == resilience::Mode::shadow) {
        counts.shadow_limited.fetch_add(1, std::memory_order_relaxed);
        note_shadow(ex);
        continue;
      }
      for (std::size_t k = 0; k < i; ++k) RateRule::give_back(held[k], now);
      counts.limited.fetch_add(1, std::memory_order_relaxed);
      ex.rate_limited_by = &p.name;
      return Decision::stop(Reason::rate_limited, &rule.answer(t.retry_after));
    }
    for (std::size_t i = 0; i < rules_.size(); ++i) {
      if ((allowed >> i & 1) != 0) {
        rules_[i]->state->shard(ex.reactor_index).allowed.fetch_add(1, std::memory_order_relaxed);
      }
    }
    return Decision::go();
  }

 private:
  // The digest of `who`, a request of a rule keyed by `kind`: the connection's own for its peer
  // address (the same for every request on it); an anonymous client's address tagged as
  // client_ip's, which it is; the stage's bucket for its route; else worked out now.
  resilience::Digest identity(Exchange& ex, KeySource::Kind kind,
                              const Identity& who) const noexcept {
    if (who.as == Counted::by_route) return route_entry_digest_;
    if (who.as == Counted::by_peer) kind = KeySource::Kind::client_ip;
    if (kind != KeySource::Kind::peer_ip) return resilience::digest_of({tag_of(kind), who.value});
    if (!ex.conn->peer_digest_known) {
      ex.conn->peer_digest = resilience::digest_of({tag_of(kind), who.value});
      ex.conn->peer_digest_known = true;
    }
    return ex.conn->peer_digest;
  }

  // What the chain does for a stage in shadow mode (Chain::enforced), for one rule.
  static void note_shadow(Exchange& ex) noexcept {
    ex.metrics->shadow_rejected(StageId::rate_limit, Reason::rate_limited);
    if (ex.would_reject == Reason::none) {
      ex.would_reject = Reason::rate_limited;
      ex.would_reject_stage = StageId::rate_limit;
    }
  }

  std::shared_ptr<const RateLimits> limits_;
  std::vector<const RateLimitRule*> rules_;  // the ones applying to the upstream, in order
  resilience::Digest route_digest_{};        // a route-scope rule's identity: the upstream
  resilience::Digest route_entry_digest_{};  // missing_key = "route": the [[routes]] entry
};

}  // namespace

RateLimitRule::RateLimitRule(resilience::ScopedRateLimitParams p, std::shared_ptr<RateRule> s)
    : params(std::move(p)),
      state(std::move(s)),
      rate(GcraRate::of(params.requests_per_sec, params.burst)) {
  int64_t longest = rate.interval;
  for (const auto& [plan, tier] : params.tiers) {
    tiers.emplace_back(plan, GcraRate::of(tier.requests_per_sec, tier.burst));
    longest = std::max(longest, tiers.back().second.interval);
  }
  // A refused take waits at most one interval for its token (GCRA), so that bounds Retry-After.
  const auto most = static_cast<uint32_t>((longest + kSecond - 1) / kSecond);
  const std::string header = "X-Floodgate-Limit: " + params.name + "\r\n";
  for (uint32_t s = 1; s <= std::max<uint32_t>(most, 1); ++s) {
    answers.push_back(prebuild_answer(Reason::rate_limited, s, 0, header));
  }
}

const GcraRate& RateLimitRule::rate_for(std::string_view plan) const noexcept {
  const auto it = std::lower_bound(tiers.begin(), tiers.end(), plan,
                                   [](const auto& t, std::string_view n) { return t.first < n; });
  return it != tiers.end() && it->first == plan ? it->second : rate;
}

const PrebuiltAnswer& RateLimitRule::answer(std::chrono::nanoseconds retry_after) const noexcept {
  const int64_t s = std::max<int64_t>(1, (retry_after.count() + kSecond - 1) / kSecond);
  return answers[std::min<std::size_t>(static_cast<std::size_t>(s), answers.size()) - 1];
}

bool RateLimitRule::applies_to(std::string_view upstream) const noexcept {
  const auto& allow = params.route_allowlist;
  return allow.empty() || std::find(allow.begin(), allow.end(), upstream) != allow.end();
}

std::string RateLimits::signature(const resilience::ScopedRateLimitParams& p) {
  std::string s = p.name;
  s += '\n';
  s += std::to_string(static_cast<int>(p.scope));
  s += '\n';
  s += std::to_string(static_cast<int>(p.key.kind)) + ':' + p.key.name;
  s += '\n';
  s += std::to_string(p.requests_per_sec) + '/' + std::to_string(p.burst);
  s += '\n';
  s += std::to_string(p.max_keys);  // a table of another size is a new table
  s += '\n';
  s += std::to_string(static_cast<int>(p.tier_key.kind)) + ':' + p.tier_key.name;
  for (const auto& [plan, tier] : p.tiers) {
    s += '\n' + plan + '=' + std::to_string(tier.requests_per_sec) + '/' +
         std::to_string(tier.burst);
  }
  return s;
}

void add_rate_limit_stage(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                          const RouteParams& route, std::shared_ptr<const RateLimits> limits) {
  if (!limits || limits->rules.empty()) return;
  auto stage = std::make_unique<RateLimitStage>(up, route, std::move(limits));
  if (!stage->empty()) stages.push_back(std::move(stage));
}

}  // namespace floodgate::proxy
