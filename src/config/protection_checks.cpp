// The rules between the protection sub-tables of [resilience] and the rest of the document
// (resilience_schema.h, check_protection): they need [server], the [[upstreams]] and the
// environment's FLOODGATE_MAX_INFLIGHT, so they run once all three are read.
//
// The adaptive ceiling against the front in-flight cap. The cap is known at load when it is a
// number (from the file or the environment) and when it is "auto" with server.workers set: then
// max_limit above it is an error, and a derived max_limit (0) below min_limit a warning when
// the operator wrote something of the ceiling or of the cap (never about defaults alone). With
// "auto" and server.workers = 0 the cap depends on the core count of the host that runs
// floodgate, which the check cannot know (it may run elsewhere): it is checked against the least
// "auto" can resolve to, one reactor's, and what may not hold on some hosts is a warning that
// says on which (fewer than N cores): for a max_limit, and for a min_limit that is written.
// Where the cap is resolved, when a generation is built, the ceiling's bounds are clamped to it
// (resilience/params.h, AdaptiveAdmissionParams).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/resilience/inflight_sizing.h"
#include "resilience_schema.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

// The front in-flight cap as the load sees it.
struct FrontCap {
  uint32_t value = 0;  // when `exact`, the cap every host enforces; else the least it can be
  bool exact = true;   // false: "auto" with one reactor per core (server.workers = 0)
  std::string named;   // how messages name it, with its value or its formula
  std::string knob;    // what sets it: "max_inflight" or "FLOODGATE_MAX_INFLIGHT"
  bool automatic = false;
  uint64_t pools = 0;  // the sum of the pools' capacities ("auto")

  // How to raise it: "raise max_inflight to at least 600", "set max_inflight to a number of at
  // least 600", and the same with "above".
  std::string raise_to_at_least(uint32_t n) const {
    return (automatic ? "set " + knob + " to a number of at least "
                      : "raise " + knob + " to at least ") +
           std::to_string(n);
  }
  std::string raise_above(uint32_t n) const {
    return (automatic ? "set " + knob + " to a number above " : "raise " + knob + " above ") +
           std::to_string(n);
  }
};

// nullopt when the cap is unknown because a value it depends on has an error of its own.
std::optional<FrontCap> front_cap(const Config& c, const DocumentMarks& doc,
                                  const ResilienceMarks& m) {
  if (!m.max_inflight_ok) {
    return std::nullopt;
  }
  const resilience::InflightParams& p = c.resilience.inflight;
  const std::string source =
      m.max_inflight_from_env ? "FLOODGATE_MAX_INFLIGHT" : "resilience.inflight.max_inflight";
  const std::string knob = m.max_inflight_from_env ? "FLOODGATE_MAX_INFLIGHT" : "max_inflight";
  if (!p.automatic) {
    return FrontCap{.value = p.max_inflight,
                    .named = source + " = " + std::to_string(p.max_inflight),
                    .knob = knob};
  }
  if (!doc.workers_ok || c.upstreams.empty()) {  // no [[upstreams]] is an error of its own
    return std::nullopt;
  }
  std::vector<uint32_t> capacities;
  uint64_t pools = 0;
  for (size_t i = 0; i < c.upstreams.size(); ++i) {
    if (!doc.upstreams[i].capacity_ok) {
      return std::nullopt;
    }
    capacities.push_back(resilience::pool_capacity(c.upstreams[i]));
    pools += capacities.back();
  }
  const uint32_t workers = c.server.workers;
  FrontCap cap;
  cap.exact = workers != 0;
  cap.value = resilience::resolve_max_inflight(p, cap.exact ? workers : 1, capacities);
  const std::string reactors =
      !cap.exact ? "reactors" : std::to_string(workers) + (workers == 1 ? " reactor" : " reactors");
  cap.named = source + " = \"auto\" = max(" + std::to_string(resilience::kAutoInflightFloor) +
              ", " + std::to_string(resilience::kAutoInflightFactor) + " x (" + reactors + " + " +
              std::to_string(pools) + " of pool capacity))" +
              (cap.exact ? " = " + std::to_string(cap.value) : "");
  cap.knob = knob;
  cap.automatic = true;
  cap.pools = pools;
  return cap;
}

// The fewest reactors with which "auto" reaches `limit` (at most Admission::kMaxActive).
uint64_t cores_for(uint64_t limit, uint64_t pools) {
  const uint64_t sum =
      (limit + resilience::kAutoInflightFactor - 1) / resilience::kAutoInflightFactor;
  return sum > pools ? sum - pools : 0;
}

// Where a rule about `key` of [resilience.adaptive_admission] is reported: at the key when it
// is written, else at its table, else at the front cap's key in the file (what the operator
// wrote that brings the rule on), else without a position.
struct Anchor {
  Position at;
  std::string path;
};
Anchor anchor(const ResilienceMarks& m, const KeyMark& key, std::string_view name) {
  std::string path = "resilience.adaptive_admission." + std::string(name);
  if (key.at) {
    return {*key.at, std::move(path)};
  }
  if (m.protection.adaptive_at) {
    return {*m.protection.adaptive_at, std::move(path)};
  }
  if (m.max_inflight_at && !m.max_inflight_from_env) {
    return {*m.max_inflight_at, "resilience.inflight.max_inflight"};
  }
  return {{}, std::move(path)};
}

std::string shown(const KeyMark& key, std::string_view name, uint32_t value) {
  return std::string(name) + " = " + std::to_string(value) + (key.at ? "" : " (the default)");
}

// max_limit is set: it must not be above the cap (when there is one).
void check_set_max(const resilience::AdaptiveAdmissionParams& p, const FrontCap& cap,
                   const ResilienceMarks& m, Collector& out) {
  const ProtectionMarks& pm = m.protection;
  const std::string max = std::to_string(p.max_limit);
  const std::string value = std::to_string(cap.value);
  if (cap.exact && cap.value != 0 && p.max_limit > cap.value) {
    const Anchor a = anchor(m, pm.max_limit, "max_limit");
    out.error(a.at, a.path,
              "max_limit = " + max + " is above the front in-flight cap, " + cap.named +
                  ", past which no request is admitted, so the adaptive ceiling could never "
                  "reach it; set max_limit to at most " +
                  value + ", or to 0 to follow the cap, or " + cap.raise_to_at_least(p.max_limit));
  } else if (!cap.exact && p.max_limit > cap.value) {
    const Anchor a = anchor(m, pm.max_limit, "max_limit");
    out.warning(a.at, a.path,
                "max_limit = " + max + " is above the front in-flight cap on a host with fewer " +
                    "than " + std::to_string(cores_for(p.max_limit, cap.pools)) + " cores: " +
                    cap.named + ", with one reactor per core (server.workers = 0), is " + value +
                    " on one core; where the cap is lower, the adaptive ceiling stops at the "
                    "cap; set max_limit to at most " +
                    value + ", or to 0 to follow the cap, or set server.workers, or set " +
                    cap.knob + " to a number, so that this is checked here");
  }
}

// Whether the operator set something of the rule between the ceiling's bounds and the cap: a
// bound, the adaptive table, or the cap itself (the key in the file, or FLOODGATE_MAX_INFLIGHT).
// A cap that only follows from "auto", the reactors and the pools says nothing of adaptive
// admission: a warning there would be about defaults nobody wrote, printed at every check,
// start and reload; the start and reload log the ceiling's range instead (app/status.cpp).
bool ceiling_configured(const ResilienceMarks& m) {
  const ProtectionMarks& pm = m.protection;
  return pm.min_limit.at || pm.max_limit.at || pm.adaptive_at || m.max_inflight_at ||
         m.max_inflight_from_env;
}

// max_limit = 0 follows the cap: none leaves no ceiling, and one below min_limit fixes it, said
// when the operator configured the ceiling or the cap (ceiling_configured). With "auto" on one
// reactor per core, only a min_limit the operator wrote is compared with the least the cap can
// be: the default min_limit is above it for any small pool (a capacity under 15) on a small
// host, and a warning about values nobody wrote, true on some hosts only, would be noise in
// every such file; the start and reload log, which know the host, give the range there.
void check_derived_max(const resilience::AdaptiveAdmissionParams& p, const FrontCap& cap,
                       const ResilienceMarks& m, Collector& out) {
  const ProtectionMarks& pm = m.protection;
  const std::string follows = ", which " + shown(pm.max_limit, "max_limit", 0) + " follows, ";
  const std::string min = shown(pm.min_limit, "min_limit", p.min_limit);
  const std::string value = std::to_string(cap.value);
  if (cap.exact && cap.value == 0) {
    const Anchor a = anchor(m, pm.max_limit, "max_limit");
    out.warning(a.at, a.path,
                shown(pm.max_limit, "max_limit", 0) + " follows the front in-flight cap, but " +
                    cap.named +
                    " (no cap), so adaptive admission has no ceiling and refuses nothing; set "
                    "max_limit, e.g. max_limit = 1024, or set enabled = false");
  } else if (cap.exact && cap.value < p.min_limit && ceiling_configured(m)) {
    const Anchor a = anchor(m, pm.min_limit, "min_limit");
    const std::string lower = cap.value > 1 ? "lower min_limit below " + value + ", or " : "";
    out.warning(a.at, a.path,
                min + " is above the front in-flight cap, " + cap.named + follows + "so " +
                    "min_limit is taken as " + value + " and the adaptive ceiling stays at " +
                    value + ": adaptive admission never moves it; " + lower +
                    cap.raise_above(p.min_limit) + ", or set enabled = false");
  } else if (!cap.exact && cap.value < p.min_limit && pm.min_limit.at) {
    const Anchor a = anchor(m, pm.min_limit, "min_limit");
    out.warning(a.at, a.path,
                min + " is above the front in-flight cap on a host with fewer than " +
                    std::to_string(cores_for(p.min_limit, cap.pools)) + " cores: " + cap.named +
                    follows + "is " + value + " on one core (server.workers = 0 runs one " +
                    "reactor per core); there min_limit is taken as the cap and the adaptive "
                    "ceiling stays at it; lower min_limit below " +
                    value + ", or set server.workers, or set " + cap.knob +
                    " to a number, so that this is checked here");
  }
}

// The watchdog drains for drain_grace before it runs restart_command: the requests in flight
// get at least the time a shutdown (SIGTERM, server.drain_timeout) would give them.
void check_drain_grace(const Config& c, const DocumentMarks& doc, const ProtectionMarks& pm,
                       Collector& out) {
  const resilience::WatchdogParams& w = c.resilience.watchdog;
  if (!pm.watchdog_enabled.ok || !w.enabled || !pm.drain_grace.ok || !doc.drain_timeout_ok ||
      w.drain_grace >= c.server.drain_timeout) {
    return;
  }
  const std::string timeout = quoted(format_duration(c.server.drain_timeout));
  out.error(pm.drain_grace.at.value_or(pm.watchdog_at.value_or(Position{})),
            "resilience.watchdog.drain_grace",
            "drain_grace = " + quoted(format_duration(w.drain_grace)) +
                (pm.drain_grace.at ? "" : " (the default)") + " is shorter than " +
                "server.drain_timeout = " + timeout +
                ": with the watchdog enabled, the requests in flight when it drains must get at "
                "least the time a shutdown gives them before restart_command runs; set "
                "drain_grace = " +
                timeout + " or more, or lower server.drain_timeout");
}

// Brownout measures the adaptive ceiling's in-flight count: without adaptive admission it never
// starts. Said only when the brownout table is written (the operator configured brownout);
// switching adaptive admission off with brownout left at its default is the way to have neither.
void check_brownout_needs_ceiling(const Config& c, const ProtectionMarks& pm, Collector& out) {
  const resilience::BrownoutParams& b = c.resilience.brownout;
  if (!pm.brownout_at || !pm.brownout_enabled.ok || !b.enabled || !pm.adaptive_enabled.ok ||
      c.resilience.adaptive_admission.enabled) {
    return;
  }
  out.warning(*pm.brownout_at, "resilience.brownout",
              "brownout starts at trigger_inflight_percent of the adaptive ceiling, but "
              "[resilience.adaptive_admission] enabled = false, so there is no ceiling and "
              "brownout never starts; enable adaptive admission, or set enabled = false here");
}

// A pool whose own max_active_requests is above its route cap never reaches it: the route cap
// refuses first, with 503 route_cap instead of the pool's queue. Said at max_active_requests,
// what the operator wrote (the cap may be the default).
void check_route_caps(const Config& c, const DocumentMarks& doc, const ProtectionMarks& pm,
                      Collector& out) {
  if (!pm.route_caps_ok) return;
  const resilience::RouteQueueParams& q = c.resilience.route_queue;
  for (size_t i = 0; i < c.upstreams.size() && i < doc.upstreams.size(); ++i) {
    const UpstreamParams& up = c.upstreams[i];
    if (!doc.upstreams[i].capacity_ok || up.resilience.max_active_requests == 0) continue;
    const auto it = q.caps.find(up.name);
    const uint32_t cap = it != q.caps.end() ? it->second : q.default_cap;
    if (up.resilience.max_active_requests <= cap) continue;
    const std::string named = it != q.caps.end() ? "caps." + up.name : "default_cap";
    out.warning(
        doc.upstreams[i].max_active_at.value_or(pm.route_queue_at.value_or(Position{})),
        "upstreams[" + std::to_string(doc.upstreams[i].index) + "].resilience.max_active_requests",
        "upstream '" + up.name + "' admits " + std::to_string(up.resilience.max_active_requests) +
            " requests at once (max_active_requests), but its route cap is " + std::to_string(cap) +
            " (resilience.route_queue." + named +
            "), which refuses the rest first with 503 route_cap; set "
            "[resilience.route_queue] caps." +
            up.name + " = " + std::to_string(up.resilience.max_active_requests) +
            " or more, or lower max_active_requests");
  }
}

}  // namespace

void check_protection(const Config& c, const DocumentMarks& doc, const ResilienceMarks& marks,
                      Collector& out) {
  const resilience::AdaptiveAdmissionParams& p = c.resilience.adaptive_admission;
  const ProtectionMarks& pm = marks.protection;
  const std::optional<FrontCap> cap = front_cap(c, doc, marks);
  if (cap && pm.min_limit.ok && pm.max_limit.ok) {
    if (p.max_limit != 0) {
      check_set_max(p, *cap, marks, out);  // a limit set is checked whether enabled or not
    } else if (pm.adaptive_enabled.ok && p.enabled) {
      check_derived_max(p, *cap, marks, out);
    }
  }
  check_drain_grace(c, doc, pm, out);
  check_brownout_needs_ceiling(c, pm, out);
  check_route_caps(c, doc, pm, out);
}

}  // namespace floodgate::config::detail
