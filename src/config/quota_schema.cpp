#include "quota_schema.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "redis_url.h"
#include "resilience_values.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

using resilience::BackendFailurePolicy;
using resilience::QuotaBackendKind;
using resilience::QuotaBackendParams;
using resilience::QuotaLocalFallbackParams;
using resilience::QuotaParams;

constexpr std::array<Choice<BackendFailurePolicy>, 2> kFailurePolicies{{
    {"fail_open", BackendFailurePolicy::fail_open},
    {"fail_closed", BackendFailurePolicy::fail_closed},
}};
constexpr std::array<Choice<QuotaBackendKind>, 2> kKinds{{
    {"in_memory", QuotaBackendKind::in_memory},
    {"redis", QuotaBackendKind::redis},
}};

// The keys of [resilience.quota.backend] that only a redis backend has.
constexpr std::array<std::string_view, 4> kRedisOnly{"url", "connect_timeout", "command_timeout",
                                                     "max_inflight"};

constexpr std::string_view kUrlExample = R"(url = "redis://127.0.0.1:6379/0")";

// key_prefix of the backend and of the local fallback: the namespace every counter key starts
// with. '{' and '}' are left to the stage, which puts each decision's hash tag in them (Redis
// Cluster hashes the first {...} of a key, so a brace in the prefix would take the tag's place).
Parsed<std::string> parse_key_prefix(std::string_view text) {
  using P = Parsed<std::string>;
  constexpr std::string_view kExample = R"(e.g. key_prefix = "floodgate:quota:prod")";
  const auto bad = [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; };
  if (text.empty()) {
    return P::fail(
        "key_prefix cannot be empty: it keeps the quota's counters apart from the other keys "
        "of the store; " +
        std::string(kExample));
  }
  if (text.size() > kMaxQuotaKeyPrefix) {
    return P::fail("key_prefix is " + std::to_string(text.size()) + " bytes long; at most " +
                   std::to_string(kMaxQuotaKeyPrefix) + " (it starts every counter key), " +
                   std::string(kExample));
  }
  if (text.find_first_of("{}") != std::string_view::npos) {
    return P::fail("key_prefix = " + quoted(text) +
                   " holds '{' or '}', which floodgate keeps for the hash tag of each "
                   "decision's keys (Redis Cluster hashes the first {...} of a key); remove "
                   "them, " +
                   std::string(kExample));
  }
  if (std::any_of(text.begin(), text.end(), bad)) {
    return P::fail("key_prefix = " + quoted(text) + " holds a space or a control character; " +
                   std::string(kExample));
  }
  return P::ok(std::string(text));
}

// url: parsed, then its host resolved (the main thread may wait for DNS here; a reactor never
// does). Assigned only when both succeed.
void read_url(TableReader& r, resilience::RedisTarget& out) {
  const auto text = r.string("url", kUrlExample);
  if (!text) return;
  auto parsed = parse_redis_url(*text);
  if (!parsed.value) {
    r.error("url", "url = " + parsed.error);
    return;
  }
  auto address = resolve_redis_host(parsed.value->host);
  if (!address.value) {
    r.error("url", "url = " + quoted(redact_redis_url(*text)) + ": " + address.error +
                       "; fix the name, or write the server's IP address: floodgate resolves "
                       "the name when it loads the configuration, and again at each reload");
    return;
  }
  out = std::move(*parsed.value);
  out.address = std::move(*address.value);
}

// The keys of a redis backend. `required`: kind = "redis" was written, so url must be too.
void read_redis_keys(TableReader& r, QuotaBackendParams& p, bool required) {
  if (required) r.require("url", kUrlExample);
  read_url(r, p.redis);
  r.duration("connect_timeout", Zero::rejected, p.connect_timeout);
  r.duration("command_timeout", Zero::rejected, p.command_timeout);
  r.integer("max_inflight", 1, kMaxQuotaInflight, p.max_inflight);
}

// A tagged table: the redis keys with kind = "in_memory" belong to another kind.
void reject_redis_keys(TableReader& r) {
  for (const std::string_view key : kRedisOnly) {
    if (r.claim(key)) {
      r.error(key, std::string(key) +
                       " is only for kind = \"redis\": the in-memory backend keeps its counters "
                       "in this process and talks to no server; remove " +
                       std::string(key) + ", or set kind = \"redis\"");
    }
  }
}

// [resilience.quota.backend]; true when kind is valid. kind is required when the table is
// written (seed 004: the tag of a tagged object); the default table is in_memory.
bool read_backend(TableReader& r, QuotaBackendParams& p) {
  const bool kind_ok = r.require("kind", R"(kind = "redis")") && r.choice("kind", kKinds, p.kind);
  r.text("key_prefix", R"(key_prefix = "floodgate:quota")", parse_key_prefix, p.key_prefix);
  if (kind_ok && p.kind == QuotaBackendKind::in_memory) {
    reject_redis_keys(r);
  } else {
    read_redis_keys(r, p, kind_ok);  // an unknown kind: the values are still checked
  }
  return kind_ok;
}

void read_local_fallback(TableReader& r, QuotaLocalFallbackParams& p) {
  r.text("key_prefix", R"(key_prefix = "floodgate:quota:fallback")", parse_key_prefix,
         p.key_prefix);
  if (r.require("max_entries", "max_entries = 50000")) {
    uint32_t entries = 50'000;  // what a type error's example shows
    if (r.integer("max_entries", 1, kMaxFallbackEntries, entries)) p.max_entries = entries;
  }
}

// Whether `key` holds an array with at least one element: a policy written, valid or not.
bool has_policies(const TableReader& r) {
  const toml::node* n = r.peek("policies");
  const toml::array* items = n ? n->as_array() : nullptr;
  return n != nullptr && (items == nullptr || !items->empty());
}

}  // namespace

void read_quota(TableReader& r, QuotaParams& p, const UpstreamRefs& u, RateLimitMarks& marks) {
  const bool enabled_ok = r.boolean("enabled", "enabled = true", p.enabled);
  r.choice("enforcement", kModes, p.enforcement);
  r.choice("backend_failure_policy", kFailurePolicies, p.backend_failure_policy);
  bool kind_ok = true;
  r.table("backend", "[resilience.quota.backend]",
          [&](TableReader& t) { kind_ok = read_backend(t, p.backend); });
  r.table("local_fallback", "[resilience.quota.local_fallback]",
          [&](TableReader& t) { read_local_fallback(t, p.local_fallback.emplace()); });
  if (p.local_fallback && kind_ok && p.backend.kind == QuotaBackendKind::in_memory) {
    r.error("local_fallback",
            "local_fallback is only for a redis backend: it decides when Redis times out or is "
            "unavailable, and the in-memory backend has no server to lose; remove "
            "[resilience.quota.local_fallback], or set [resilience.quota.backend] kind = "
            "\"redis\"");
  }
  read_quota_policies(r, p.policies, u, marks, enabled_ok && p.enabled);
  if (enabled_ok && p.enabled && !has_policies(r)) {
    r.error("enabled",
            "enabled = true, but [resilience.quota] has no policy, so it would count nothing; "
            "add a [[resilience.quota.policies]] entry (a name, a selector and a burst or "
            "sustained window), or set enabled = false");
  }
}

}  // namespace floodgate::config::detail
