#include "rate_limit_schema.h"

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "key_source.h"
#include "resilience_values.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

using resilience::KeySource;
using resilience::MissingKey;
using resilience::OnTableFull;
using resilience::RateScope;
using resilience::RateTier;
using resilience::ScopedRateLimitParams;
using Kind = KeySource::Kind;
using Tiers = std::map<std::string, RateTier, std::less<>>;

constexpr std::string_view kRule = "[[resilience.scoped_rate_limits]]";

constexpr std::array<Choice<RateScope>, 4> kScopes{{
    {"route", RateScope::route},
    {"client", RateScope::client},
    {"tenant", RateScope::tenant},
    {"token", RateScope::token},
}};
constexpr std::array<Choice<OnTableFull>, 2> kOnTableFull{{
    {"overflow_bucket", OnTableFull::overflow_bucket},
    {"fail_open", OnTableFull::fail_open},
}};

constexpr std::array<Choice<MissingKey>, 3> kMissingKeys{{
    {"peer", MissingKey::peer},
    {"route", MissingKey::route},
    {"skip", MissingKey::skip},
}};

constexpr std::string_view kTiersExample =
    "tiers = { free = { requests_per_sec = 100, burst = 100 } }";

std::string scope_text(RateScope s) {
  for (const Choice<RateScope>& c : kScopes) {
    if (c.value == s) return "scope = " + quoted(c.name);
  }
  return "scope = ?";  // unreachable: every scope has a name
}

// Rule name -> line of its definition. Holds names with errors of their own too, so that a
// second rule of the same name is told which one came first.
using Names = std::map<std::string, int, std::less<>>;

// The name is sent in the X-Floodgate-Limit header of the rule's 429s and is the `rule` label
// of its metrics: the syntax of an upstream name, which is safe in both.
void read_name(TableReader& r, ScopedRateLimitParams& p, Names& names) {
  constexpr std::string_view kExample = R"(name = "tenant-api")";
  if (!r.require("name", kExample)) return;
  auto name = r.string("name", kExample);
  if (!name) return;
  if (name->empty()) {
    r.error("name",
            "a rule name cannot be empty: it names the rule in the X-Floodgate-Limit header of "
            "its 429 responses and in its metrics; e.g. " +
                std::string(kExample));
    return;
  }
  const int line = r.position("name").line;
  if (const auto [it, fresh] = names.try_emplace(*name, line); !fresh) {
    r.error("name", "duplicate rule name '" + *name + "' (first defined at line " +
                        std::to_string(it->second) + "); give each " + std::string(kRule) +
                        " rule its own name");
  } else if (!is_valid_name(*name)) {
    r.error("name", quoted(*name) + " is not a valid rule name; use one or more letters, " +
                        "digits, '_', '.' or '-' (it is sent in the X-Floodgate-Limit header " +
                        "and is a metric label), e.g. \"tenant-api\"");
  } else {
    p.name = std::move(*name);
  }
}

// A request-key source (key_source.h); false when it is written and invalid (recorded).
bool read_source(TableReader& r, std::string_view key, std::string_view example, KeySource& out) {
  const std::string written = std::string(key) + " = " + std::string(example);
  const auto text = r.string(key, written);
  if (!text) return r.peek(key) == nullptr;
  auto parsed = parse_key_source(*text);
  if (!parsed.value) {
    r.error(key, std::string(key) + " = " + parsed.error);
    return false;
  }
  out = std::move(*parsed.value);
  return true;
}

// requests_per_sec or burst, both required: an integer of [1, kMaxRate].
bool read_rate(TableReader& r, std::string_view key, uint32_t& out) {
  if (!r.require(key, std::string(key) + " = 100")) return false;
  uint32_t value = 100;  // what a type error's example shows
  if (!r.integer(key, 1, kMaxRate, value)) return false;
  out = value;
  return true;
}

// One tier, `name = { requests_per_sec = N, burst = N }`; nullopt when it has an error.
std::optional<RateTier> read_tier(TableReader& r, const std::string& name, const toml::node& value,
                                  const toml::key& key) {
  const std::string path = r.path("tiers") + "." + toml_key(name);
  if (name.empty()) {
    r.out().error(position_of(key.source()), path,
                  "a tier name cannot be empty: it is the plan that tier_key names in a request, "
                  "e.g. " +
                      std::string(kTiersExample));
    return std::nullopt;
  }
  const toml::table* rates = value.as_table();
  if (!rates) {
    type_error(r.out(), position_of(value.source()), path,
               "a table { requests_per_sec = N, burst = N }", value,
               toml_key(name) + " = { requests_per_sec = 100, burst = 100 }");
    return std::nullopt;
  }
  TableReader tier = r.child(*rates, path, "tier " + quoted(name));
  RateTier rate;
  const bool rps_ok = read_rate(tier, "requests_per_sec", rate.requests_per_sec);
  const bool burst_ok = read_rate(tier, "burst", rate.burst);
  tier.finish();
  return rps_ok && burst_ok ? std::optional(rate) : std::nullopt;
}

// tiers = { plan = { requests_per_sec = N, burst = N }, ... }; assigned only when every tier is
// valid.
bool read_tiers(TableReader& r, Tiers& out) {
  const toml::node* n = r.find("tiers");
  if (!n) return true;
  const toml::table* t = n->as_table();
  if (!t) {
    type_error(r.out(), r.position("tiers"), r.path("tiers"), "a table of plan names and rates", *n,
               kTiersExample);
    return false;
  }
  Tiers tiers;
  bool ok = true;
  for (auto&& [key, value] : *t) {
    const std::string name(key.str());
    if (const auto tier = read_tier(r, name, value, key)) {
      tiers.emplace(name, *tier);
    } else {
      ok = false;
    }
  }
  if (ok) out = std::move(tiers);
  return ok;
}

// key by scope (seed 004): forbidden for route, required for tenant, and for client and token
// optional with a default that is filled in here.
void check_key(TableReader& r, ScopedRateLimitParams& p) {
  const bool written = r.peek("key") != nullptr;
  switch (p.scope) {
    case RateScope::route:
      if (written) {
        r.error("key",
                "key is not allowed with scope = \"route\": a route rule has one bucket per "
                "upstream, which every request to it takes from; remove key, or set scope = "
                "\"client\", \"tenant\" or \"token\" to count by it");
      }
      return;
    case RateScope::tenant:
      if (!written) {
        r.out().error(r.position(), r.path("key"),
                      "missing required key 'key': scope = \"tenant\" counts by the tenant a "
                      "request names, and no source names it by default; add key = "
                      "\"header:x-tenant-id\" (or the cookie, query parameter or token that "
                      "names the tenant) to this " +
                          std::string(kRule));
      }
      return;
    case RateScope::client:
      if (!written) p.key = KeySource{.kind = Kind::peer_ip};
      return;
    case RateScope::token:
      if (!written) p.key = KeySource{.kind = Kind::bearer_token};
      return;
  }
}

// Which of the rule's sources and tiers were valid.
struct RuleMarks {
  bool key_ok = true;
  bool missing_key_ok = true;
  bool tier_key_ok = true;
  bool tiers_ok = true;
};

// What a request without the rule's key is counted as, for check's note.
std::string counted_as(const ScopedRateLimitParams& p, bool written) {
  std::string choice = "(missing_key = ";
  for (const Choice<MissingKey>& c : kMissingKeys) {
    if (c.value == p.missing_key) choice += quoted(c.name);
  }
  choice += written ? ")" : ", the default)";
  switch (p.missing_key) {
    case MissingKey::peer:
      return "is counted by its client's address (as client_ip gives it, server.trusted_proxies "
             "honoured), one bucket per client " +
             choice;
    case MissingKey::route:
      return "is counted in one bucket for the route it takes (its [[routes]] entry: the host, "
             "lower-case without port or trailing dot, and the path_prefix), shared by every "
             "client without the key " +
             choice;
    case MissingKey::skip:
    case MissingKey::refuse:  // not a rate limit's value
      break;
  }
  return "is not counted by this rule and passes it unlimited " + choice +
         "; floodgate_rate_limit_requests_total{result=\"skipped\"} counts such requests";
}

// missing_key (issue 35): not for route scope, which has no key; pointless with a key every
// request has (a warning); otherwise check notes what it means for the rule.
void check_missing_key(TableReader& r, const ScopedRateLimitParams& p, const RuleMarks& m) {
  const bool written = r.peek("missing_key") != nullptr;
  if (p.scope == RateScope::route) {
    if (written) {
      r.error("missing_key",
              "missing_key is not allowed with scope = \"route\": a route rule counts every "
              "request to its upstream in one bucket and has no key a request could lack; remove "
              "missing_key, or set scope = \"client\", \"tenant\" or \"token\" with a key");
    }
    return;
  }
  if (!m.key_ok || !m.missing_key_ok || p.key.kind == KeySource::Kind::none) return;
  const std::string key = "key = " + quoted(key_source_text(p.key));
  if (!resilience::can_be_missing(p.key.kind)) {
    if (written) {
      r.warning("missing_key", "missing_key has no effect: every request has the identity " + key +
                                   " gives, so no request is counted as missing_key says; remove "
                                   "missing_key, or key the rule by a header, cookie, query "
                                   "parameter or bearer token that a request may lack");
    }
    return;
  }
  const Position at = written ? r.position("missing_key") : r.position("key");
  r.out().note(at, r.path("missing_key"),
               "a request without " + key + " " + counted_as(p, written));
}

// tier_key and tiers (seed 002's tiers): tenant scope only, tiers only with tier_key, and the
// plan taken from another source than the tenant.
void check_tiers(TableReader& r, const ScopedRateLimitParams& p, const RuleMarks& m) {
  const toml::node* tier_key = r.peek("tier_key");
  const bool tiers = r.peek("tiers") != nullptr;
  if (p.scope != RateScope::tenant) {
    for (const std::string_view key : {"tier_key", "tiers"}) {
      if (r.peek(key)) {
        r.error(key, std::string(key) + " is only for scope = \"tenant\" (a tenant's plan picks " +
                         "its rates), and this rule has " + scope_text(p.scope) + "; remove " +
                         std::string(key) + ", or set scope = \"tenant\"");
      }
    }
  } else if (tiers && !tier_key) {
    r.error("tiers",
            "tiers needs tier_key, the request-key source that names a request's plan, e.g. "
            "tier_key = \"header:x-plan\": without it no request picks a tier");
  } else if (tier_key && m.key_ok && m.tier_key_ok && p.key == p.tier_key) {
    r.error("tier_key", "tier_key = " + quoted(tier_key->as_string()->get()) +
                            " is the same request-key source as key = " +
                            quoted(r.peek("key")->as_string()->get()) +
                            ", so every tenant's plan would be its own id; take the plan from "
                            "another source, e.g. tier_key = \"header:x-plan\"");
  } else if (tier_key && m.tier_key_ok && m.tiers_ok && p.tiers.empty()) {
    r.warning("tier_key",
              "tier_key is set, but tiers lists no plan, so every request gets this rule's own "
              "requests_per_sec and burst; add the plans, e.g. " +
                  std::string(kTiersExample) + ", or remove tier_key");
  }
}

void mark_client_ip(const TableReader& r, std::string_view key, const KeySource& source,
                    RateLimitMarks& marks) {
  if (r.peek(key) && source.kind == Kind::client_ip) {
    marks.client_ip.push_back({r.position(key), r.path(key), std::string(key)});
  }
}

void read_rule(TableReader& r, ScopedRateLimitParams& p, const UpstreamRefs& u, Names& names,
               RateLimitMarks& marks) {
  read_name(r, p, names);
  const bool scope_ok =
      r.require("scope", R"(scope = "client")") && r.choice("scope", kScopes, p.scope);
  RuleMarks m;
  m.key_ok = read_source(r, "key", R"("header:x-tenant-id")", p.key);
  m.missing_key_ok = r.choice("missing_key", kMissingKeys, p.missing_key);
  read_rate(r, "requests_per_sec", p.requests_per_sec);
  read_rate(r, "burst", p.burst);
  read_upstream_names(r, "route_allowlist", p.route_allowlist, u);
  r.duration("idle_ttl", Zero::rejected, p.idle_ttl);
  r.integer("max_keys", kMinRateKeys, kMaxRateKeys, p.max_keys);
  r.choice("on_table_full", kOnTableFull, p.on_table_full);
  r.choice("mode", kModes, p.mode);
  m.tier_key_ok = read_source(r, "tier_key", R"("header:x-plan")", p.tier_key);
  m.tiers_ok = read_tiers(r, p.tiers);
  if (!scope_ok) {
    return;  // the scope decides every rule below
  }
  check_key(r, p);
  check_missing_key(r, p, m);
  check_tiers(r, p, m);
  if (m.key_ok && p.scope != RateScope::route) mark_client_ip(r, "key", p.key, marks);
  if (m.tier_key_ok && p.scope == RateScope::tenant) {
    mark_client_ip(r, "tier_key", p.tier_key, marks);
  }
}

}  // namespace

void read_scoped_rate_limits(TableReader& r, std::vector<ScopedRateLimitParams>& out,
                             const UpstreamRefs& u, RateLimitMarks& marks) {
  Names names;
  r.tables("scoped_rate_limits", std::string(kRule), "", [&](TableReader& t, size_t i) {
    read_rule(t, out.emplace_back(), u, names, marks);
    if (i == resilience::kMaxScopedRateLimits) {
      t.error("name", "more than " + std::to_string(resilience::kMaxScopedRateLimits) +
                          " scoped rate limits; merge rules (one rule with tiers can "
                          "give plans different rates)");
    }
  });
}

void check_scoped_rate_limits(const Config& c, bool trusted_proxies_ok, const RateLimitMarks& marks,
                              Collector& out) {
  if (!trusted_proxies_ok || !c.server.trusted_proxies.empty()) {
    return;
  }
  for (const RateLimitMarks::Source& s : marks.client_ip) {
    out.warning(s.at, s.path,
                "client_ip reads X-Forwarded-For only for a connection from a proxy listed in "
                "server.trusted_proxies, and that list is empty, so this is the address of the "
                "peer (peer_ip) for every request; list the proxies in front of floodgate, e.g. "
                "[server] trusted_proxies = [\"10.0.0.0/8\"], or write " +
                    s.key + " = \"peer_ip\"");
  }
}

}  // namespace floodgate::config::detail
