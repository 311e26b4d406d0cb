#include "resilience_schema.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "failure_schema.h"
#include "quota_schema.h"
#include "resilience_values.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

constexpr std::array<std::string_view, 12> kSubTables{
    "inflight",     "memory_guard", "protocol",           "circuit_breaker",
    "retry_budget", "hedging",      "adaptive_admission", "brownout",
    "route_queue",  "watchdog",     "scoped_rate_limits", "quota"};
constexpr std::string_view kSubTableList =
    "inflight, memory_guard, protocol, circuit_breaker, retry_budget, hedging, "
    "adaptive_admission, brownout, route_queue, watchdog, scoped_rate_limits and quota";

// "auto" or an integer of [0, k.max]; false when it is neither (recorded).
template <class T>
bool read_auto_or_count(TableReader& r, const AutoOrCount& k, bool& automatic, T& count) {
  const toml::node* n = r.find(k.key);
  if (!n) {
    return true;
  }
  if (const auto* i = n->as_integer()) {
    if (i->get() < 0 || i->get() > k.max) {
      r.error(k.key, std::to_string(i->get()) + " is out of range; use " + accepted(k, true));
      return false;
    }
    automatic = false;
    count = static_cast<T>(i->get());
    return true;
  }
  if (const auto* s = n->as_string()) {
    if (s->get() == "auto") {
      automatic = true;
      count = 0;
      return true;
    }
    if (parse_digits(s->get(), std::numeric_limits<uint64_t>::max())) {
      r.error(k.key, quoted(s->get()) + " is a string; write the number without quotes, e.g. " +
                         std::string(k.key) + " = " + s->get());
    } else {
      r.error(k.key, "unknown value " + quoted(s->get()) + "; use " + accepted(k, true));
    }
    return false;
  }
  type_error(r.out(), r.position(k.key), r.path(k.key), "\"auto\" or an integer", *n,
             std::string(k.key) + " = \"auto\"");
  return false;
}

// Whether `key` holds a non-empty array, valid or not: what the operator meant to list.
bool lists_something(const TableReader& r, std::string_view key) {
  const toml::node* n = r.peek(key);
  const toml::array* items = n ? n->as_array() : nullptr;
  return n != nullptr && (items == nullptr || !items->empty());
}

// Methods are case-sensitive: "get" is a valid token that no GET request matches.
void warn_miscased_methods(TableReader& r, std::string_view key) {
  const toml::node* n = r.peek(key);
  const toml::array* items = n ? n->as_array() : nullptr;
  for (size_t i = 0; items && i < items->size(); ++i) {
    const auto* s = (*items)[i].as_string();
    const std::string_view upper = s ? miscased_method(s->get()) : std::string_view{};
    if (!upper.empty()) {
      const std::string written = quoted(s->get());
      const std::string meant = quoted(upper);
      std::string message = written + " never matches: methods are case-sensitive (RFC 9110 ";
      message.append("section 9.1), and ").append(written).append(" is not ").append(meant);
      message.append("; write ").append(meant);
      r.out().warning(position_of((*items)[i].source()), r.element_path(key, i),
                      std::move(message));
    }
  }
}

// An array of distinct ports 1..65535; assigned only when every element is valid.
bool read_ports(TableReader& r, std::string_view key, std::vector<uint16_t>& out) {
  const toml::node* n = r.find(key);
  if (!n) {
    return true;
  }
  const toml::array* items = n->as_array();
  if (!items) {
    const std::string port = n->is_integer() ? std::to_string(n->as_integer()->get()) : "443";
    type_error(r.out(), r.position(key), r.path(key), "an array of port numbers", *n,
               std::string(key) + " = [" + port + "]");
    return false;
  }
  std::vector<uint16_t> ports;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const toml::node& item = (*items)[i];
    const Position at = position_of(item.source());
    const auto* v = item.as_integer();
    const auto first = v ? std::find(ports.begin(), ports.end(), v->get()) : ports.end();
    if (!v) {
      type_error(r.out(), at, r.element_path(key, i), "a port number", item, "443");
    } else if (v->get() < 1 || v->get() > 65535) {
      r.out().error(at, r.element_path(key, i),
                    std::to_string(v->get()) + " is out of range; use a port from 1 to 65535");
    } else if (first != ports.end()) {
      r.out().error(at, r.element_path(key, i),
                    "duplicate port " + std::to_string(v->get()) + " (same as " +
                        r.element_path(key, static_cast<size_t>(first - ports.begin())) +
                        "); remove one of them");
    } else {
      ports.push_back(static_cast<uint16_t>(v->get()));
      continue;
    }
    ok = false;
    ports.push_back(0);  // keeps the indices of later duplicates right; never assigned
  }
  if (ok) {
    out = std::move(ports);
  }
  return ok;
}

// A prefix of "/" in `prefixes` (valid, so parallel to the array) makes the list cover every
// request: worth saying what that does.
void warn_root_prefix(TableReader& r, std::string_view key,
                      const std::vector<std::string>& prefixes, std::string_view what_it_does) {
  const auto root = std::find(prefixes.begin(), prefixes.end(), "/");
  if (root != prefixes.end()) {
    const auto i = static_cast<size_t>(root - prefixes.begin());
    r.out().warning(position_of(r.element(key, i).source()), r.element_path(key, i),
                    "\"/\" matches every request, so " + std::string(what_it_does));
  }
}

void read_inflight(TableReader& r, resilience::InflightParams& p, ResilienceMarks& marks) {
  marks.max_inflight_ok = read_auto_or_count(r, kMaxInflightKey, p.automatic, p.max_inflight);
  if (marks.max_inflight_ok && r.peek("max_inflight")) {
    marks.max_inflight_at = r.position("max_inflight");
  }
  // Whole seconds on the wire, rounded up, as a pool's retry_after: "0s" would invite the
  // immediate retry that the cap sheds.
  r.duration("retry_after", Zero::rejected, p.retry_after);
  r.boolean("exempt_preflight", "exempt_preflight = false", p.exempt_preflight);
  read_methods(r, "exempt_methods", p.exempt_methods);
  if (r.texts("exempt_path_prefixes", "\"/downloads/\"", parse_match_prefix,
              p.exempt_path_prefixes)) {
    warn_root_prefix(r, "exempt_path_prefixes", p.exempt_path_prefixes,
                     "the in-flight cap never applies; list the paths to exempt, e.g. "
                     "\"/downloads/\", or set max_inflight = 0 to turn the cap off");
  }
  r.texts("exempt_path_suffixes", "\"/events\"", parse_match_suffix, p.exempt_path_suffixes);
  r.boolean("exempt_upgrades", "exempt_upgrades = false", p.exempt_upgrades);
  r.choice("mode", kModes, p.mode);
}

void read_memory_guard(TableReader& r, resilience::MemoryGuardParams& p, ResilienceMarks& marks) {
  if (read_auto_or_count(r, kMinAvailableKey, p.automatic, p.min_available_mib) &&
      r.peek("min_available")) {
    marks.min_available_at = r.position("min_available");
  }
  r.text("meminfo", R"(meminfo = "/proc/meminfo")", parse_meminfo_path, p.meminfo);
  r.choice("mode", kModes, p.mode);
}

// Which [resilience.protocol] values were valid (an invalid one keeps its default, which is
// not what the operator wrote).
struct ProtocolMarks {
  bool allowed_methods_ok = true;
  bool allow_connect_ok = true;
  bool ports_ok = true;
  bool authorities_ok = true;
};

// A CONNECT passes when its authority is listed OR its port is (resilience/protocol.h): an
// authority on a listed port adds nothing, and suggests that the operator took the port list
// for a narrowing of the authorities, when it opens that port on every host.
void warn_redundant_authorities(TableReader& r, const resilience::ProtocolParams& p) {
  constexpr std::string_view kKey = "connect_allowed_authorities";
  const auto& ports = p.connect_allowed_ports;
  for (size_t i = 0; i < p.connect_allowed_authorities.size(); ++i) {
    const std::string& a = p.connect_allowed_authorities[i];
    const std::string port = a.substr(a.rfind(':') + 1);
    const auto value = parse_digits(port, 65535);
    if (value && std::find(ports.begin(), ports.end(), *value) != ports.end()) {
      std::string message = quoted(a) + " adds nothing: connect_allowed_ports lists " + port;
      message += ", which allows a CONNECT to any host on that port; to allow only the hosts ";
      message += "listed here, remove " + port + " from connect_allowed_ports";
      r.out().warning(position_of(r.element(kKey, i).source()), r.element_path(kKey, i),
                      std::move(message));
    }
  }
}

// A CONNECT is a method too: allowed_methods, when it lists methods, refuses what it omits.
void warn_connect_method(TableReader& r, const resilience::ProtocolParams& p) {
  const auto& methods = p.allowed_methods;
  const bool lists_connect = std::find(methods.begin(), methods.end(), "CONNECT") != methods.end();
  if (p.allow_connect && !methods.empty() && !lists_connect) {
    r.warning("allowed_methods",
              "allow_connect = true, but allowed_methods does not list \"CONNECT\", so every "
              "CONNECT is refused with 405 method_not_allowed; add \"CONNECT\" to "
              "allowed_methods, or set allow_connect = false");
  } else if (!p.allow_connect && lists_connect) {
    r.warning("allowed_methods",
              "allowed_methods lists \"CONNECT\", but allow_connect = false, so every CONNECT "
              "is still refused (connect_denied); set allow_connect = true with an allowlist, "
              "or remove \"CONNECT\"");
  }
}

// The CONNECT rules of seed 004: the allowlists only narrow allow_connect = true, and
// allow_connect = true needs at least one of them.
void check_connect(TableReader& r, const resilience::ProtocolParams& p, const ProtocolMarks& m) {
  if (!m.allow_connect_ok) {
    return;
  }
  const bool ports = lists_something(r, "connect_allowed_ports");
  const bool authorities = lists_something(r, "connect_allowed_authorities");
  if (!p.allow_connect) {
    for (const auto& [key, listed] : {std::pair{"connect_allowed_ports", ports},
                                      std::pair{"connect_allowed_authorities", authorities}}) {
      if (listed) {
        r.error(key, std::string(key) + " is set, but allow_connect = false, so it allows " +
                         "nothing (the allowlists only narrow allow_connect = true); set " +
                         "allow_connect = true, or remove " + key);
      }
    }
  } else if (!ports && !authorities) {
    r.error("allow_connect",
            "allow_connect = true with both connect_allowed_ports and "
            "connect_allowed_authorities empty would let any client open a TCP tunnel to any "
            "host and port through floodgate (an open proxy); list what may be reached, e.g. "
            "connect_allowed_authorities = [\"db.internal:5432\"], or set allow_connect = false");
  } else if (m.ports_ok && m.authorities_ok) {
    warn_redundant_authorities(r, p);
  }
  if (m.allowed_methods_ok) {
    warn_connect_method(r, p);
  }
}

// Early data can be replayed by an attacker (RFC 8470 section 1): with allow_0rtt = true only
// the safe, idempotent GET and HEAD may be accepted in it.
void check_early_data(TableReader& r) {
  constexpr std::string_view kKey = "early_data_safe_methods";
  const toml::node* n = r.peek(kKey);
  const toml::array* items = n ? n->as_array() : nullptr;
  for (size_t i = 0; items && i < items->size(); ++i) {
    const auto* s = (*items)[i].as_string();
    if (!s || !parse_method(s->get()).value || s->get() == "GET" || s->get() == "HEAD") {
      continue;  // not a method (its own error), or allowed
    }
    r.out().error(position_of((*items)[i].source()), r.element_path(kKey, i),
                  quoted(s->get()) +
                      " cannot be accepted in early data: 0-RTT data can be replayed by an "
                      "attacker (RFC 8470), so with allow_0rtt = true only \"GET\" and \"HEAD\" "
                      "may be listed; remove it, or set allow_0rtt = false");
  }
}

void read_protocol(TableReader& r, resilience::ProtocolParams& p) {
  ProtocolMarks m;
  m.allowed_methods_ok = read_methods(r, "allowed_methods", p.allowed_methods);
  if (r.texts("denied_path_prefixes", "\"/admin\"", parse_match_prefix, p.denied_path_prefixes)) {
    warn_root_prefix(r, "denied_path_prefixes", p.denied_path_prefixes,
                     "every request is refused with 403 denied_path; list the paths to deny, "
                     "e.g. \"/admin\"");
  }
  r.boolean("enforce_authority_host_match", "enforce_authority_host_match = false",
            p.enforce_authority_host_match);
  m.allow_connect_ok = r.boolean("allow_connect", "allow_connect = true", p.allow_connect);
  m.ports_ok = read_ports(r, "connect_allowed_ports", p.connect_allowed_ports);
  m.authorities_ok = r.texts("connect_allowed_authorities", "\"db.internal:5432\"",
                             parse_connect_authority, p.connect_allowed_authorities);
  const bool zero_rtt_ok = r.boolean("allow_0rtt", "allow_0rtt = true", p.allow_0rtt);
  read_methods(r, "early_data_safe_methods", p.early_data_safe_methods);
  r.choice("mode", kModes, p.mode);
  check_connect(r, p, m);
  if (zero_rtt_ok && p.allow_0rtt) {
    check_early_data(r);
  }
}

// Every sub-table of [resilience] other than the twelve this version has is an error naming
// them. Other unknown keys are left to finish().
void reject_other_tables(TableReader& r) {
  const std::vector<std::string> known(kSubTables.begin(), kSubTables.end());
  for (auto&& [key, value] : r.node()) {
    const std::string name(key.str());
    const toml::array* items = value.as_array();
    const bool table = value.is_table() || (items && !items->empty() && items->front().is_table());
    if (std::find(known.begin(), known.end(), name) != known.end() || !table) {
      continue;
    }
    r.claim(name);
    std::string message = "unknown table [resilience." + name + "]";
    if (const auto match = closest_match(name, known); !match.empty()) {
      message += " (did you mean '" + std::string(match) + "'?)";
    }
    r.error(name, message + "; [resilience] has the sub-tables " + std::string(kSubTableList));
  }
}

}  // namespace

bool read_methods(TableReader& r, std::string_view key, std::vector<std::string>& out) {
  const bool ok = r.texts(key, "\"GET\"", parse_method, out);
  warn_miscased_methods(r, key);
  return ok;
}

void read_resilience_table(TableReader& r, resilience::Params& p, ResilienceMarks& marks,
                           const UpstreamRefs& upstreams) {
  r.table("inflight", "[resilience.inflight]",
          [&](TableReader& t) { read_inflight(t, p.inflight, marks); });
  r.table("memory_guard", "[resilience.memory_guard]",
          [&](TableReader& t) { read_memory_guard(t, p.memory_guard, marks); });
  r.table("protocol", "[resilience.protocol]",
          [&](TableReader& t) { read_protocol(t, p.protocol); });
  r.table("circuit_breaker", "[resilience.circuit_breaker]",
          [&](TableReader& t) { read_circuit_breaker(t, p.circuit_breaker); });
  r.table("retry_budget", "[resilience.retry_budget]",
          [&](TableReader& t) { read_retry_budget(t, p.retry_budget, upstreams); });
  r.table("hedging", "[resilience.hedging]",
          [&](TableReader& t) { read_hedging(t, p.hedging, upstreams); });
  ProtectionMarks& protection = marks.protection;
  r.table("adaptive_admission", "[resilience.adaptive_admission]",
          [&](TableReader& t) { read_adaptive_admission(t, p.adaptive_admission, protection); });
  r.table("brownout", "[resilience.brownout]",
          [&](TableReader& t) { read_brownout(t, p.brownout, upstreams, protection); });
  r.table("route_queue", "[resilience.route_queue]",
          [&](TableReader& t) { read_route_queue(t, p.route_queue, upstreams, protection); });
  r.table("watchdog", "[resilience.watchdog]",
          [&](TableReader& t) { read_watchdog(t, p.watchdog, protection); });
  read_scoped_rate_limits(r, p.scoped_rate_limits, upstreams, marks.rate_limits);
  r.table("quota", "[resilience.quota]",
          [&](TableReader& t) { read_quota(t, p.quota, upstreams, marks.rate_limits); });
  reject_other_tables(r);
}

}  // namespace floodgate::config::detail
