// [[resilience.quota.policies]] (quota_schema.h): each policy's name, route_allowlist,
// selector and windows, and the rules between the policies (unique names, unique contracts).
#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "key_source.h"
#include "quota_schema.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

using resilience::KeySource;
using resilience::MissingKey;
using resilience::QuotaPolicyParams;
using resilience::QuotaSelector;
using resilience::QuotaWindow;
using Kind = KeySource::Kind;

constexpr std::string_view kPolicy = "[[resilience.quota.policies]]";
constexpr std::string_view kSelectorExample =
    R"(selector = { tenant = { key = "header:x-tenant-id" } })";
constexpr std::string_view kBurstExample = R"(burst = { requests = 100, window = "1s" })";
constexpr std::string_view kSustainedExample = R"(sustained = { requests = 5000, window = "1m" })";

constexpr std::array<Choice<MissingKey>, 3> kMissingKeys{{
    {"refuse", MissingKey::refuse},
    {"skip", MissingKey::skip},
    {"peer", MissingKey::peer},
}};

// Policy name -> line of its definition; holds names with errors of their own too, so that a
// second policy of the same name is told which one came first.
using Names = std::map<std::string, int, std::less<>>;

// The name is a metric label and the first component of its counters' keys: the syntax of an
// upstream name, safe in both.
void read_name(TableReader& r, QuotaPolicyParams& p, Names& names) {
  constexpr std::string_view kExample = R"(name = "per-tenant")";
  if (!r.require("name", kExample)) return;
  auto name = r.string("name", kExample);
  if (!name) return;
  if (name->empty()) {
    r.error("name",
            "a policy name cannot be empty: it names the policy in its metrics and is the first "
            "part of its counters' keys; e.g. " +
                std::string(kExample));
    return;
  }
  const int line = r.position("name").line;
  if (const auto [it, fresh] = names.try_emplace(*name, line); !fresh) {
    r.error("name", "duplicate policy name '" + *name + "' (first defined at line " +
                        std::to_string(it->second) + "); give each " + std::string(kPolicy) +
                        " entry its own name");
  } else if (!is_valid_name(*name)) {
    r.error("name", quoted(*name) + " is not a valid policy name; use one or more letters, " +
                        "digits, '_', '.' or '-' (it is a metric label and the first part of " +
                        "its counters' keys), e.g. \"per-tenant\"");
  } else {
    p.name = std::move(*name);
  }
}

// One identity dimension of a selector and the request-key sources it accepts (seed 004's
// selector matrix): every dimension takes a header, a cookie or a query parameter; tenant and
// token also the bearer token; client also the addresses. path, authority, method and cid name
// a request or its connection, and no dimension takes them.
struct Dimension {
  std::string_view name;
  KeySource QuotaSelector::*field;
  bool addresses;  // peer_ip, client_ip
  bool bearer;     // bearer_token
  std::string_view accepts;
  std::string_view example;  // a key = value of the dimension
};
constexpr std::array<Dimension, 3> kDimensions{{
    {"tenant", &QuotaSelector::tenant, false, true,
     "header:<name>, cookie:<name>, query:<name> or bearer_token", R"("header:x-tenant-id")"},
    {"token", &QuotaSelector::token, false, true,
     "header:<name>, cookie:<name>, query:<name> or bearer_token", R"("bearer_token")"},
    {"client", &QuotaSelector::client, true, false,
     "header:<name>, cookie:<name>, query:<name>, peer_ip or client_ip", R"("peer_ip")"},
}};

bool accepted(const Dimension& d, Kind k) {
  switch (k) {
    case Kind::header:
    case Kind::cookie:
    case Kind::query:
      return true;
    case Kind::peer_ip:
    case Kind::client_ip:
      return d.addresses;
    case Kind::bearer_token:
      return d.bearer;
    default:
      return false;
  }
}

// Why `d` does not take a source of kind `k` (accepted(d, k) is false), and where it fits.
std::string refused_because(const Dimension& d, Kind k, std::string_view text) {
  if (k == Kind::peer_ip || k == Kind::client_ip) {
    return "an address identifies a client: select it as client = { key = " + quoted(text) + " }";
  }
  if (k == Kind::bearer_token) {
    return "a bearer token identifies a token: select it as token = { key = \"bearer_token\" }";
  }
  return "path, authority, method and cid describe a request or its connection, not a " +
         std::string(d.name);
}

// What the checks between the dimensions need of one: where its key is and what it says.
struct DimensionRead {
  bool written = false;
  bool ok = true;  // absent, or valid and assigned
  Position at;
  std::string path;
  std::string text;
};

bool read_dimension_key(TableReader& dim, const Dimension& d, KeySource& out, DimensionRead& m) {
  const std::string example = "key = " + std::string(d.example);
  if (!dim.require("key", example)) return false;
  const auto text = dim.string("key", example);
  if (!text) return false;
  m.at = dim.position("key");
  m.path = dim.path("key");
  m.text = *text;
  auto parsed = parse_key_source(*text);
  if (!parsed.value) {
    dim.error("key", "key = " + parsed.error);
    return false;
  }
  if (!accepted(d, parsed.value->kind)) {
    dim.error("key", "key = " + quoted(*text) + " cannot identify the " + std::string(d.name) +
                         " of a quota selector: " + std::string(d.name) + " takes " +
                         std::string(d.accepts) + " (" +
                         refused_because(d, parsed.value->kind, *text) + "); e.g. " + example);
    return false;
  }
  out = std::move(*parsed.value);
  return true;
}

// `name = { key = "..." }` of the selector `sel`; a client_ip source is marked for the warning
// about server.trusted_proxies.
DimensionRead read_dimension(TableReader& sel, const Dimension& d, KeySource& out,
                             RateLimitMarks& marks) {
  DimensionRead m;
  const toml::node* n = sel.find(d.name);
  if (!n) return m;
  m.written = true;
  const toml::table* t = n->as_table();
  if (!t) {
    const std::string value =
        n->is_string() ? quoted(n->as_string()->get()) : std::string(d.example);
    type_error(sel.out(), sel.position(d.name), sel.path(d.name), "a table { key = \"...\" }", *n,
               std::string(d.name) + " = { key = " + value + " }");
    m.ok = false;
    return m;
  }
  TableReader dim = sel.child(*t, sel.path(d.name), std::string(d.name) + " selector");
  m.ok = read_dimension_key(dim, d, out, m);
  dim.finish();
  if (m.ok && out.kind == Kind::client_ip) marks.client_ip.push_back({m.at, m.path, "key"});
  return m;
}

// Seed 004: one normalised source keys at most one dimension of a selector (two dimensions of
// the same value would count one identity as two). false when one does not.
bool check_reuse(TableReader& sel, const std::array<DimensionRead, 3>& reads,
                 const QuotaSelector& s) {
  for (size_t j = 1; j < kDimensions.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      const bool both = reads[i].written && reads[i].ok && reads[j].written && reads[j].ok;
      if (!both || s.*(kDimensions[i].field) != s.*(kDimensions[j].field)) continue;
      sel.out().error(
          reads[j].at, reads[j].path,
          "key = " + quoted(reads[j].text) + " is the same request-key source as selector." +
              std::string(kDimensions[i].name) + ".key = " + quoted(reads[i].text) +
              ", so both dimensions would hold the same value; a source keys one "
              "dimension of a selector: take the " +
              std::string(kDimensions[j].name) + " from another source, or remove one of the two");
      return false;
    }
  }
  return true;
}

// selector = { route = bool, tenant = { key }, token = { key }, client = { key } }: required in
// effect, since it must select at least one dimension. false when it has an error.
bool read_selector(TableReader& policy, QuotaSelector& s, RateLimitMarks& marks) {
  const toml::node* n = policy.find("selector");
  if (!n) {
    policy.out().error(policy.position(), policy.path("selector"),
                       "missing required key 'selector': a policy's counters are keyed by at "
                       "least one of route, tenant, token and client; add e.g. " +
                           std::string(kSelectorExample) + " to this " + std::string(kPolicy));
    return false;
  }
  const toml::table* t = n->as_table();
  if (!t) {
    type_error(policy.out(), policy.position("selector"), policy.path("selector"),
               "a table of route, tenant, token and client", *n, kSelectorExample);
    return false;
  }
  TableReader sel = policy.child(*t, policy.path("selector"), "quota selector");
  bool ok = sel.boolean("route", "route = true", s.route);
  std::array<DimensionRead, 3> reads;
  for (size_t i = 0; i < kDimensions.size(); ++i) {
    reads[i] = read_dimension(sel, kDimensions[i], s.*(kDimensions[i].field), marks);
    ok = ok && reads[i].ok;
  }
  sel.finish();
  const bool any = std::any_of(reads.begin(), reads.end(), [](const auto& m) { return m.written; });
  if (ok && !s.route && !any) {
    policy.error("selector",
                 "the selector has no dimension, so nothing keys the policy's counters; select "
                 "at least one: route = true (the upstream), or tenant, token or client = { key "
                 "= \"...\" }, e.g. " +
                     std::string(kSelectorExample));
    return false;
  }
  const bool unique = check_reuse(sel, reads, s);  // over the valid dimensions
  return ok && unique;
}

// missing_key: refuse, skip or peer; "route", the scoped rate limits' fourth value, is told
// what a policy takes instead.
bool read_missing_key(TableReader& r, MissingKey& out) {
  const toml::node* n = r.peek("missing_key");
  if (n && n->as_string() && n->as_string()->get() == "route") {
    r.find("missing_key");
    r.error("missing_key",
            "missing_key = \"route\" is for the scoped rate limits only; a quota policy takes "
            "\"refuse\" (429 selector_identity_missing, the default), \"skip\" (the policy "
            "does not count the request) or \"peer\" (the client's address stands in for the "
            "missing identity)");
    return false;
  }
  return r.choice("missing_key", kMissingKeys, out);
}

// The selected dimensions a request can lack, as `selector.<name>.key = "<source>"`, joined by
// " or ".
std::string missable_dimensions(const QuotaSelector& s) {
  std::string out;
  for (const Dimension& d : kDimensions) {
    const KeySource& k = s.*(d.field);
    if (k.kind == Kind::none || !resilience::can_be_missing(k.kind)) continue;
    if (!out.empty()) out += " or ";
    out += "selector." + std::string(d.name) + ".key = " + quoted(key_source_text(k));
  }
  return out;
}

// missing_key is pointless (a warning) when no selected dimension can be missing; otherwise,
// when the quota is enabled, check notes what a request without one gets.
void check_missing_key(TableReader& r, const QuotaPolicyParams& p, bool enabled) {
  const bool written = r.peek("missing_key") != nullptr;
  const std::string dimensions = missable_dimensions(p.selector);
  if (dimensions.empty()) {
    if (written) {
      r.warning("missing_key",
                "missing_key has no effect: every request has what this selector selects (the "
                "route, or the client's address), so none lacks an identity; remove "
                "missing_key");
    }
    return;
  }
  if (!enabled) return;
  std::string choice = "(missing_key = ";
  for (const Choice<MissingKey>& c : kMissingKeys) {
    if (c.value == p.missing_key) choice += quoted(c.name);
  }
  choice += written ? ")" : ", the default)";
  std::string what;
  switch (p.missing_key) {
    case MissingKey::skip:
      what = "is not counted by this policy and passes it " + choice +
             "; floodgate_quota_decisions_total{outcome=\"skipped\"} counts such requests";
      break;
    case MissingKey::peer:
      what =
          "is counted with its client's address in place of the missing identity (as "
          "client_ip gives it, server.trusted_proxies honoured), one count per client " +
          choice;
      break;
    case MissingKey::refuse:
    case MissingKey::route:  // refused when read
      what = "is refused with 429 selector_identity_missing " + choice;
      break;
  }
  const Position at = written ? r.position("missing_key") : r.position("selector");
  r.out().note(at, r.path("missing_key"), "a request without " + dimensions + " " + what);
}

// burst or sustained = { requests = N, window = "..." }; assigned only when valid.
bool read_window(TableReader& policy, std::string_view key, std::string_view example,
                 std::chrono::milliseconds example_window, std::optional<QuotaWindow>& out) {
  const toml::node* n = policy.find(key);
  if (!n) return true;
  const toml::table* t = n->as_table();
  if (!t) {
    type_error(policy.out(), policy.position(key), policy.path(key),
               "a table { requests = N, window = \"...\" }", *n, example);
    return false;
  }
  TableReader w = policy.child(*t, policy.path(key), std::string(key) + " window");
  QuotaWindow window{.requests = 100, .window = example_window};  // the examples of type errors
  const bool requests_ok = w.require("requests", "requests = 100") &&
                           w.integer("requests", 1, kMaxQuotaRequests, window.requests);
  const std::string window_example = "window = " + quoted(format_duration(example_window));
  const bool window_ok =
      w.require("window", window_example) && w.duration("window", Zero::rejected, window.window);
  w.finish();
  if (requests_ok && window_ok) out = window;
  return requests_ok && window_ok;
}

// At least one window; burst shorter than sustained when both are set.
bool check_windows(TableReader& r, const QuotaPolicyParams& p, const std::string& path) {
  if (!r.peek("burst") && !r.peek("sustained")) {
    r.out().error(r.position(), path,
                  "a policy needs at least one window, burst or sustained: without one it "
                  "limits nothing; add e.g. " +
                      std::string(kBurstExample) + " or " + std::string(kSustainedExample));
    return false;
  }
  if (p.burst && p.sustained && p.burst->window >= p.sustained->window) {
    r.out().error(r.position("burst"), r.path("burst") + ".window",
                  "burst.window = " + quoted(format_duration(p.burst->window)) +
                      " is not shorter than sustained.window = " +
                      quoted(format_duration(p.sustained->window)) +
                      ": burst is a policy's short window and sustained its long one; shorten "
                      "burst.window or lengthen sustained.window");
    return false;
  }
  return true;
}

// What makes two policies the same contract, whatever their names: seed 004 refuses a second.
struct Contract {
  std::vector<std::string> allowlist;  // sorted: the order of the names does not matter
  QuotaSelector selector;
  std::optional<QuotaWindow> burst;
  std::optional<QuotaWindow> sustained;
  bool operator==(const Contract&) const = default;
};
struct Seen {
  Contract contract;
  std::string path;
  std::string name;  // "" when it had an error
  int line;
};

void check_contract(TableReader& r, const QuotaPolicyParams& p, const std::string& path,
                    std::vector<Seen>& seen) {
  Contract c{p.route_allowlist, p.selector, p.burst, p.sustained};
  std::sort(c.allowlist.begin(), c.allowlist.end());
  for (const Seen& s : seen) {
    if (s.contract != c) continue;
    const std::string first = s.path + " (" + (s.name.empty() ? "" : quoted(s.name) + ", ") +
                              "line " + std::to_string(s.line) + ")";
    r.out().error(r.position(), path,
                  "this policy has the same route_allowlist, selector and windows as " + first +
                      ", so it would count the same requests against the same limits a second "
                      "time; remove one of them, or change its selector or windows");
    return;
  }
  seen.push_back({std::move(c), path, p.name, r.position().line});
}

// One policy; true when everything its contract is made of is valid.
bool read_policy(TableReader& r, QuotaPolicyParams& p, const std::string& path,
                 const UpstreamRefs& u, Names& names, RateLimitMarks& marks, bool enabled) {
  using namespace std::chrono_literals;
  read_name(r, p, names);
  const bool allowlist_ok = read_upstream_names(r, "route_allowlist", p.route_allowlist, u);
  const bool selector_ok = read_selector(r, p.selector, marks);
  if (read_missing_key(r, p.missing_key) && selector_ok) check_missing_key(r, p, enabled);
  const bool burst_ok = read_window(r, "burst", kBurstExample, 1s, p.burst);
  const bool sustained_ok = read_window(r, "sustained", kSustainedExample, 1min, p.sustained);
  const bool windows_ok = burst_ok && sustained_ok && check_windows(r, p, path);
  return allowlist_ok && selector_ok && windows_ok;
}

}  // namespace

void read_quota_policies(TableReader& r, std::vector<QuotaPolicyParams>& out, const UpstreamRefs& u,
                         RateLimitMarks& marks, bool enabled) {
  Names names;
  std::vector<Seen> seen;
  r.tables("policies", std::string(kPolicy), "", [&](TableReader& t, size_t i) {
    QuotaPolicyParams& p = out.emplace_back();
    const std::string path = r.element_path("policies", i);
    if (read_policy(t, p, path, u, names, marks, enabled)) check_contract(t, p, path, seen);
    if (i == resilience::kMaxQuotaPolicies) {
      t.error("name", "more than " + std::to_string(resilience::kMaxQuotaPolicies) +
                          " quota policies; merge policies (a request waits for one backend "
                          "decision per policy it matches, and one policy holds both a burst "
                          "and a sustained window)");
    }
  });
}

}  // namespace floodgate::config::detail
