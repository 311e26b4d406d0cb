#include "failure_schema.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "resilience_values.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

using resilience::WhenAllOpen;

constexpr std::array<Choice<WhenAllOpen>, 2> kWhenAllOpen{{
    {"reject", WhenAllOpen::reject},
    {"least_recently_failed", WhenAllOpen::least_recently_failed},
}};

// "a", "a and b", "a, b and c"
std::string listing(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += i + 1 == items.size() ? " and " : ", ";
    }
    out += items[i];
  }
  return out;
}

// --- [resilience.circuit_breaker] -------------------------------------------------------------

// An array of distinct 5xx statuses, kept as written; assigned only when every element is
// valid. A 4xx answers a fault of the request, never of the backend (issue 13: "4xx are never
// failures"), and 1xx to 3xx are no errors at all, so none of them can open a circuit.
bool read_failure_statuses(TableReader& r, std::vector<uint16_t>& out) {
  constexpr std::string_view kKey = "failure_statuses";
  const toml::node* n = r.find(kKey);
  if (!n) {
    return true;
  }
  const toml::array* items = n->as_array();
  if (!items) {
    const std::string status = n->is_integer() ? std::to_string(n->as_integer()->get()) : "503";
    type_error(r.out(), r.position(kKey), r.path(kKey), "an array of HTTP status codes", *n,
               std::string(kKey) + " = [" + status + "]");
    return false;
  }
  std::vector<uint16_t> statuses;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const toml::node& item = (*items)[i];
    const Position at = position_of(item.source());
    const auto* v = item.as_integer();
    const auto first = v ? std::find(statuses.begin(), statuses.end(), v->get()) : statuses.end();
    const std::string value = v ? std::to_string(v->get()) : "";
    if (!v) {
      type_error(r.out(), at, r.element_path(kKey, i), "an HTTP status code", item, "503");
    } else if (v->get() < 100 || v->get() > 599) {
      r.out().error(at, r.element_path(kKey, i),
                    value + " is not an HTTP status code; use a server error status from 500 " +
                        "to 599, e.g. 503");
    } else if (v->get() < 500) {
      r.out().error(at, r.element_path(kKey, i),
                    value + " is not a server error: only a 5xx status can count as a backend " +
                        "failure (a 4xx answers a fault of the request, never of the backend, " +
                        "and 1xx to 3xx are no errors at all); use a status from 500 to 599");
    } else if (first != statuses.end()) {
      r.out().error(at, r.element_path(kKey, i),
                    "duplicate status " + value + " (same as " +
                        r.element_path(kKey, static_cast<size_t>(first - statuses.begin())) +
                        "); remove one of them");
    } else {
      statuses.push_back(static_cast<uint16_t>(v->get()));
      continue;
    }
    ok = false;
    statuses.push_back(0);  // keeps the indices of later duplicates right; never assigned
  }
  if (ok) {
    out = std::move(statuses);
  }
  return ok;
}

// --- [resilience.hedging] ---------------------------------------------------------------------

// The seed lets safe_methods list any method, so none is an error; but a hedge sends the
// request twice, to two backends, and that is what a method that is not idempotent (RFC 9110
// section 9.2.2) must never have done to it. A CONNECT is a tunnel, which is never hedged.
void warn_unrepeatable_methods(TableReader& r, const std::vector<std::string>& methods) {
  constexpr std::string_view kKey = "safe_methods";
  for (size_t i = 0; i < methods.size(); ++i) {  // parallel to the array: every element was valid
    const std::string& m = methods[i];
    std::string message;
    if (m == "POST" || m == "PATCH") {
      message = quoted(m) +
                " is not idempotent (RFC 9110 section 9.2.2): a hedge sends the request a "
                "second time, to another backend, while the first attempt may still be "
                "processed, so both backends may act on it; list only methods that are safe to "
                "repeat, e.g. \"GET\" and \"HEAD\"";
    } else if (m == "CONNECT") {
      message =
          "\"CONNECT\" is never hedged: it opens a tunnel, and only requests that are not "
          "tunnels are hedged; remove it";
    } else {
      continue;
    }
    r.out().warning(position_of(r.element(kKey, i).source()), r.element_path(kKey, i),
                    std::move(message));
  }
}

// A hedge goes out when the primary has no response head after `delay`; a pool's
// response_timeout ends the primary at that point (504) first, when it is not longer than the
// delay, so the pool's requests are never hedged.
void warn_late_delay(TableReader& r, const resilience::HedgingParams& p, const UpstreamRefs& u) {
  const auto& allowlist = p.route_allowlist;
  std::vector<std::string> late;
  for (const UpstreamRefs::Timeout& t : u.response_timeouts) {
    const bool hedged = allowlist.empty() ||
                        std::find(allowlist.begin(), allowlist.end(), t.name) != allowlist.end();
    if (hedged && p.delay >= t.response_timeout) {
      late.push_back("'" + t.name + "' (" + quoted(format_duration(t.response_timeout)) + ")");
    }
  }
  if (late.empty()) {
    return;
  }
  const bool one = late.size() == 1;
  r.warning("delay",
            "delay = " + quoted(format_duration(p.delay)) +
                " is not shorter than the response_timeout of " +
                (one ? "upstream " : "upstreams ") + listing(late) + ", so no request " +
                (one ? "to it" : "to them") +
                " is ever hedged: the primary attempt times out first; set delay below " +
                (one ? "that response_timeout" : "those response_timeouts") +
                (allowlist.empty() ? "" : ", or remove the upstream from route_allowlist"));
}

}  // namespace

// Issue 35's keys: a circuit opens on what a backend does to min_requests requests in `window`,
// by the streak or by failure_rate_percent (0: the streak alone), never on three requests of one
// client. min_requests = 1 with failure_rate_percent = 0 is issue 13's streak-only rule.
void read_circuit_breaker(TableReader& r, resilience::CircuitBreakerParams& p) {
  r.boolean("enabled", "enabled = false", p.enabled);
  r.integer("failure_threshold", 1, kMaxCount, p.failure_threshold);
  r.integer("min_requests", 1, kMaxCount, p.min_requests);
  r.integer("failure_rate_percent", 0, 100, p.failure_rate_percent);
  r.duration("window", Zero::rejected, p.window);
  r.duration("open", Zero::rejected, p.open);
  r.integer("half_open_max_probes", 1, kMaxCount, p.half_open_max_probes);
  read_failure_statuses(r, p.failure_statuses);
  r.choice("when_all_open", kWhenAllOpen, p.when_all_open);
  r.choice("mode", kModes, p.mode);
}

void read_retry_budget(TableReader& r, resilience::RetryBudgetParams& p, const UpstreamRefs& u) {
  r.boolean("enabled", "enabled = false", p.enabled);
  r.integer("ratio_percent", 0, 100, p.ratio_percent);
  r.duration("window", Zero::rejected, p.window);
  r.integer("min_retries", 0, 1000, p.min_retries);
  read_upstream_table(r, {"per_route_ratio_percent", "percentages", 0, 100, 20},
                      p.per_route_ratio_percent, u);
}

void read_hedging(TableReader& r, resilience::HedgingParams& p, const UpstreamRefs& u) {
  const bool enabled_ok = r.boolean("enabled", "enabled = true", p.enabled);
  const bool delay_ok = r.duration("delay", Zero::rejected, p.delay);
  const bool methods_ok = read_methods(r, "safe_methods", p.safe_methods);
  const bool allowlist_ok = read_upstream_names(r, "route_allowlist", p.route_allowlist, u);
  if (methods_ok) {
    warn_unrepeatable_methods(r, p.safe_methods);
  }
  if (!enabled_ok || !p.enabled) {
    return;
  }
  if (methods_ok && p.safe_methods.empty()) {
    r.warning("safe_methods",
              "enabled = true with safe_methods = []: no request is ever hedged; list the "
              "methods to hedge, e.g. safe_methods = [\"GET\", \"HEAD\"], or set enabled = false");
  }
  if (delay_ok && allowlist_ok) {
    warn_late_delay(r, p, u);
  }
}

}  // namespace floodgate::config::detail
