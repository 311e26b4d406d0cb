#include "protection_schema.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "resilience_values.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

// The caps and limits are admission limits like a pool's (upstream/admission.h): each stops
// at the largest finite limit of the primitive, as the front cap does.
constexpr int64_t kMaxLimit = kMaxInflight;

KeyMark mark(const TableReader& r, std::string_view key, bool ok) {
  return {r.peek(key) ? std::optional(r.position(key)) : std::nullopt, ok};
}

// "key = value", with " (the default)" when the key is not written: a rule between two keys
// names both, and the operator may have written only one.
std::string shown(const TableReader& r, std::string_view key, uint64_t value) {
  return std::string(key) + " = " + std::to_string(value) + (r.peek(key) ? "" : " (the default)");
}

// --- [resilience.adaptive_admission] ----------------------------------------------------------

// The ceiling moves between min_limit and max_limit. (max_limit = 0 follows the front cap,
// which check_protection() compares with min_limit.)
void check_limits(TableReader& r, const resilience::AdaptiveAdmissionParams& p) {
  if (p.max_limit == 0 || p.max_limit >= p.min_limit) {
    return;
  }
  r.error("max_limit", "max_limit = " + std::to_string(p.max_limit) + " is below " +
                           shown(r, "min_limit", p.min_limit) +
                           ": the adaptive ceiling moves between the two; set max_limit to at "
                           "least " +
                           std::to_string(p.min_limit) + ", or lower min_limit");
}

// --- [resilience.brownout] --------------------------------------------------------------------

// Brownout starts at or above the trigger and ends at or below recover: the gap between the
// two is what keeps it from flapping. Reported at the key the operator wrote (recover first).
void check_hysteresis(TableReader& r, const resilience::BrownoutParams& p) {
  const uint32_t trigger = p.trigger_inflight_percent;
  const uint32_t recover = p.recover_inflight_percent;
  if (recover < trigger) {
    return;
  }
  std::vector<std::string> fixes;
  if (trigger > 0) {
    fixes.push_back("set recover_inflight_percent below " + std::to_string(trigger) +
                    ", e.g. recover_inflight_percent = " + std::to_string(trigger * 2 / 3));
  }
  if (recover < 100) {
    fixes.push_back("set trigger_inflight_percent above " + std::to_string(recover));
  }
  if (fixes.empty()) {
    fixes.emplace_back("e.g. trigger_inflight_percent = 90 and recover_inflight_percent = 60");
  }
  const std::string_view key =
      r.peek("recover_inflight_percent") || !r.peek("trigger_inflight_percent")
          ? "recover_inflight_percent"
          : "trigger_inflight_percent";
  r.error(key, shown(r, "recover_inflight_percent", recover) + " is not below " +
                   shown(r, "trigger_inflight_percent", trigger) +
                   ": brownout starts when the adaptive in-flight count reaches the trigger's "
                   "share of the ceiling and ends at or below recover's, and the gap between "
                   "them keeps it from flapping; " +
                   (fixes.size() == 1 ? fixes[0] : fixes[0] + ", or " + fixes[1]));
}

// --- [resilience.route_queue] -----------------------------------------------------------------

// A cap above global_cap is never reached: the global cap refuses first.
// `p.caps` is not empty only when it was read from the file, valid.
void warn_unreachable_caps(TableReader& r, const resilience::RouteQueueParams& p, bool default_ok) {
  const std::string global = "global_cap = " + std::to_string(p.global_cap);
  const auto message = [&](const std::string& cap) {
    return cap + " is above " + global +
           ", so it is never reached: the global cap, shared by every upstream, refuses first; "
           "lower it to at most " +
           std::to_string(p.global_cap) + ", or raise global_cap";
  };
  if (default_ok && p.default_cap > p.global_cap) {
    r.warning("default_cap", message("default_cap = " + std::to_string(p.default_cap)));
  }
  const toml::node* caps = r.peek("caps");
  for (auto&& [name, cap] : p.caps) {
    if (cap > p.global_cap) {
      const toml::node* value = caps->as_table()->get(name);
      r.out().warning(position_of(value->source()), r.path("caps") + "." + toml_key(name),
                      message("the cap of upstream '" + name + "', " + std::to_string(cap) + ","));
    }
  }
}

// --- [resilience.watchdog] --------------------------------------------------------------------

constexpr std::string_view kCommandExample =
    R"(restart_command = ["/usr/bin/systemctl", "restart", "floodgate"])";

// `text` (a shell command line) as restart_command, when its words are plain enough to be split
// on spaces without a shell (no quotes, variables, redirections or globs) and the first is an
// absolute path; else the generic example.
std::string command_example(std::string_view text) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view(" /._-=:,@+%").find(c) != std::string_view::npos;
  };
  if (!text.starts_with('/') || !std::all_of(text.begin(), text.end(), plain)) {
    return std::string(kCommandExample);
  }
  std::string out = "restart_command = [";
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(' ', begin), text.size());
    if (end > begin) {
      out += (out.back() == '[' ? "" : ", ") + quoted(text.substr(begin, end - begin));
    }
    begin = end + 1;
  }
  return out + "]";
}

// Why element `i` of restart_command cannot be run; "" when it can. The command is run with
// fork + exec: no shell, no PATH search, and arguments are C strings.
std::string command_error(std::string_view text, size_t i) {
  if (text.find('\0') != std::string_view::npos) {
    return "contains a NUL character, which no program name or argument can hold; remove it";
  }
  if (i > 0) {
    return {};
  }
  if (text.empty()) {
    return std::string("the executable path is empty; write the absolute path of the program to ") +
           "run, e.g. " + std::string(kCommandExample);
  }
  if (!text.starts_with('/')) {
    const bool word = text.find_first_of(" /") == std::string_view::npos;
    return quoted(text) +
           " is not an absolute path: restart_command is run without a shell and without a PATH "
           "search; write the program's full path" +
           (word ? " (`command -v " + std::string(text) + "` prints it)" : std::string()) +
           ", e.g. \"/usr/bin/systemctl\"";
  }
  return {};
}

// An array of strings: an absolute executable path, then its arguments (any, repeated or not);
// [] = no command. Assigned only when every element is valid.
bool read_restart_command(TableReader& r, std::vector<std::string>& out) {
  constexpr std::string_view kKey = "restart_command";
  const toml::node* n = r.find(kKey);
  if (!n) {
    return true;
  }
  const toml::array* items = n->as_array();
  if (!items) {
    const auto* s = n->as_string();
    type_error(r.out(), r.position(kKey), r.path(kKey),
               "an array of strings (the executable's absolute path, then its arguments; no "
               "shell)",
               *n, s ? command_example(s->get()) : std::string(kCommandExample));
    return false;
  }
  std::vector<std::string> command;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const toml::node& item = (*items)[i];
    const auto* s = item.as_string();
    std::string why = s ? command_error(s->get(), i) : std::string();
    if (!s) {
      type_error(r.out(), position_of(item.source()), r.element_path(kKey, i), "a string", item,
                 i == 0 ? "\"/usr/bin/systemctl\"" : "\"restart\"");
      ok = false;
    } else if (!why.empty()) {
      r.out().error(position_of(item.source()), r.element_path(kKey, i), std::move(why));
      ok = false;
    } else {
      command.push_back(s->get());
    }
  }
  if (ok) {
    out = std::move(command);
  }
  return ok;
}

// The seed's restart_hook is deprecated and any value rejected: a hook is a command line, which
// needs a shell to run.
void reject_restart_hook(TableReader& r) {
  constexpr std::string_view kKey = "restart_hook";
  const toml::node* n = r.claim(kKey);
  if (!n) {
    return;
  }
  const auto* s = n->as_string();
  r.error(kKey,
          "restart_hook is not accepted: a hook is a command line, "
          "which would need a shell; write the command as restart_command, the executable's "
          "absolute path and then its arguments, run without a shell: " +
              (s ? command_example(s->get()) : std::string(kCommandExample)));
}

// 0% makes every window unhealthy: the watchdog would drain (and restart) under any load.
void warn_zero_percentages(TableReader& r, const resilience::WatchdogParams& p, bool timeout_ok,
                           bool overload_ok) {
  const std::string after =
      ", so floodgate drains (and runs restart_command) after unhealthy_consecutive_windows "
      "checks whatever its health; use the share that means trouble, e.g. ";
  if (timeout_ok && p.timeout_error_rate_percent == 0) {
    r.warning("timeout_error_rate_percent",
              "timeout_error_rate_percent = 0 makes every check in which min_timeout_spread "
              "backends had min_requests_per_window attempts each unhealthy, timeouts or not" +
                  after + "timeout_error_rate_percent = 60");
  }
  if (overload_ok && p.overload_inflight_percent == 0) {
    r.warning("overload_inflight_percent",
              "overload_inflight_percent = 0 makes every check unhealthy (the in-flight count is "
              "always at least 0% of the ceiling)" +
                  after + "overload_inflight_percent = 95");
  }
}

}  // namespace

void read_adaptive_admission(TableReader& r, resilience::AdaptiveAdmissionParams& p,
                             ProtectionMarks& marks) {
  marks.adaptive_at = r.position();
  marks.adaptive_enabled = mark(r, "enabled", r.boolean("enabled", "enabled = false", p.enabled));
  marks.min_limit = mark(r, "min_limit", r.integer("min_limit", 1, kMaxLimit, p.min_limit));
  marks.max_limit = mark(r, "max_limit", r.integer("max_limit", 0, kMaxLimit, p.max_limit));
  r.integer("decrease_step", 1, kMaxLimit, p.decrease_step);
  r.integer("increase_step", 1, kMaxLimit, p.increase_step);
  r.duration("high_latency", Zero::rejected, p.high_latency);
  r.duration("window", Zero::rejected, p.window);
  r.choice("mode", kModes, p.mode);
  if (marks.min_limit.ok && marks.max_limit.ok) {
    check_limits(r, p);
  }
}

void read_brownout(TableReader& r, resilience::BrownoutParams& p, const UpstreamRefs& u,
                   ProtectionMarks& marks) {
  marks.brownout_at = r.position();
  const bool enabled_ok = r.boolean("enabled", "enabled = false", p.enabled);
  marks.brownout_enabled.ok = enabled_ok;
  const bool trigger_ok = r.integer("trigger_inflight_percent", 0, 100, p.trigger_inflight_percent);
  const bool recover_ok = r.integer("recover_inflight_percent", 0, 100, p.recover_inflight_percent);
  const bool core_ok = read_upstream_names(r, "core_routes", p.core_routes, u);
  r.choice("mode", kModes, p.mode);
  if (trigger_ok && recover_ok) {
    check_hysteresis(r, p);
  }
  // Every name listed is defined and distinct: listing as many as there are lists them all.
  if (enabled_ok && p.enabled && core_ok && !u.names.empty() &&
      p.core_routes.size() == u.names.size()) {
    r.warning("core_routes",
              "core_routes lists every upstream, so brownout never sheds a request; list only "
              "the upstreams that must keep being served under pressure, or set enabled = false");
  }
}

void read_route_queue(TableReader& r, resilience::RouteQueueParams& p, const UpstreamRefs& u,
                      ProtectionMarks& marks) {
  marks.route_queue_at = r.position();
  const bool default_ok = r.integer("default_cap", 1, kMaxLimit, p.default_cap);
  const bool global_ok = r.integer("global_cap", 1, kMaxLimit, p.global_cap);
  const bool caps_ok = read_upstream_table(r, {"caps", "caps", 1, kMaxLimit, 256}, p.caps, u);
  marks.route_caps_ok = default_ok && caps_ok;
  // Whole seconds on the wire, rounded up, as the other Retry-Afters: "0s" would invite the
  // immediate retry that the caps shed.
  r.duration("retry_after", Zero::rejected, p.retry_after);
  r.choice("mode", kModes, p.mode);
  if (global_ok) {
    warn_unreachable_caps(r, p, default_ok);
  }
}

void read_watchdog(TableReader& r, resilience::WatchdogParams& p, ProtectionMarks& marks) {
  marks.watchdog_at = r.position();
  marks.watchdog_enabled = mark(r, "enabled", r.boolean("enabled", "enabled = true", p.enabled));
  r.duration("check_interval", Zero::rejected, p.check_interval);
  r.duration("poll_stall_timeout", Zero::rejected, p.poll_stall_timeout);
  const bool timeout_ok =
      r.integer("timeout_error_rate_percent", 0, 100, p.timeout_error_rate_percent);
  r.integer("min_requests_per_window", 1, kMaxCount, p.min_requests_per_window);
  r.integer("min_timeout_spread", 1, kMaxCount, p.min_timeout_spread);
  const bool overload_ok =
      r.integer("overload_inflight_percent", 0, 100, p.overload_inflight_percent);
  r.integer("unhealthy_consecutive_windows", 1, kMaxCount, p.unhealthy_consecutive_windows);
  marks.drain_grace =
      mark(r, "drain_grace", r.duration("drain_grace", Zero::rejected, p.drain_grace));
  r.duration("restart_cooldown", Zero::rejected, p.restart_cooldown);
  read_restart_command(r, p.restart_command);
  reject_restart_hook(r);
  if (marks.watchdog_enabled.ok && p.enabled) {
    warn_zero_percentages(r, p, timeout_ok, overload_ok);
  }
}

}  // namespace floodgate::config::detail
