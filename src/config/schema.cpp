#include "schema.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "floodgate/config/config.h"  // read_file
#include "floodgate/config/resolve.h"
#include "floodgate/upstream/admission.h"  // Admission::kMaxActive only: no link dependency
#include "health_schema.h"
#include "http2_schema.h"
#include "resilience_schema.h"
#include "rules.h"
#include "table_reader.h"
#include "tls_schema.h"
#include "values.h"

namespace floodgate::config::detail {
namespace {

constexpr std::array<Choice<Balance>, 3> kBalances{{
    {"round_robin", Balance::round_robin},
    {"least_active", Balance::least_active},
    {"p2c", Balance::p2c},
}};
constexpr std::array<Choice<LogLevel>, 7> kLogLevels{{
    {"trace", LogLevel::trace},
    {"debug", LogLevel::debug},
    {"info", LogLevel::info},
    {"warn", LogLevel::warn},
    {"error", LogLevel::error},
    {"critical", LogLevel::critical},
    {"off", LogLevel::off},
}};
constexpr std::array<Choice<IoMode>, 3> kIoModes{{
    {"auto", IoMode::automatic},
    {"io_uring", IoMode::io_uring},
    {"epoll", IoMode::epoll},
}};

constexpr std::array<Choice<AccessLogFormat>, 3> kAccessLogFormats{{
    {"json", AccessLogFormat::json},
    {"combined", AccessLogFormat::combined},
    {"combined_floodgate", AccessLogFormat::combined_floodgate},
}};

template <class E, size_t N>
std::string_view name_of(const std::array<Choice<E>, N>& choices, E value) {
  for (const Choice<E>& c : choices) {
    if (c.value == value) {
      return c.name;
    }
  }
  return "?";  // unreachable: every value has a name
}

constexpr std::string_view kServersExample =
    R"(servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 2 }])";

// Where each key of a nested table lives, so that a key written in the wrong table gets told
// where it belongs instead of a list of the keys that table does accept.
struct KeyHome {
  std::string_view key;
  std::string_view home;
};
constexpr std::string_view kServer = "[server]";
constexpr std::string_view kHttp2 = "[server.http2]";
constexpr std::string_view kUpstream = "an [[upstreams]] entry";
constexpr std::string_view kRoute = "a [[routes]] entry";
constexpr std::string_view kLog = "[log]";
constexpr std::string_view kResilience = "[upstreams.resilience]";
constexpr std::string_view kHealth = "[upstreams.health]";
constexpr std::string_view kServerEntry =
    R"(a server entry, e.g. servers = [{ address = "127.0.0.1:9000", weight = 2 }])";
constexpr std::string_view kInflight = "[resilience.inflight]";
constexpr std::string_view kMemoryGuard = "[resilience.memory_guard]";
constexpr std::string_view kProtocol = "[resilience.protocol]";
constexpr std::string_view kCircuitBreaker = "[resilience.circuit_breaker]";
constexpr std::string_view kRetryBudget = "[resilience.retry_budget]";
constexpr std::string_view kHedging = "[resilience.hedging]";
constexpr std::string_view kAdaptive = "[resilience.adaptive_admission]";
constexpr std::string_view kBrownout = "[resilience.brownout]";
constexpr std::string_view kRouteQueue = "[resilience.route_queue]";
constexpr std::string_view kWatchdog = "[resilience.watchdog]";
constexpr std::string_view kRateLimit = "a [[resilience.scoped_rate_limits]] rule";
constexpr std::string_view kQuota = "[resilience.quota]";
constexpr std::string_view kQuotaBackend = "[resilience.quota.backend]";
constexpr std::string_view kQuotaPolicy = "a [[resilience.quota.policies]] entry";
// `enabled`, `open`, `window`, `delay` and `min_requests` have no entry: words this general may
// be meant for any table, where a home would mislead.
constexpr auto kKeyHomes = std::to_array<KeyHome>({
    {"listen", "[server] (or [admin] for the admin listener)"},
    {"workers", kServer},
    {"io", kServer},
    {"max_header_bytes", kServer},
    {"max_headers", kServer},
    {"max_uri_bytes", kServer},
    {"max_body_bytes", kServer},
    {"header_timeout", kServer},
    {"idle_timeout", kServer},
    {"send_timeout", kServer},
    {"max_unsent_bytes", kServer},
    {"handshake_timeout", kServer},
    {"max_opening_connections", kServer},
    {"max_requests_per_connection", kServer},
    {"drain_timeout", kServer},
    {"retirement_grace", kServer},
    {"max_buffers_per_reactor", kServer},
    {"trusted_proxies", kServer},
    {"http2", "[server], as [server.http2]"},
    {"max_concurrent_streams", kHttp2},
    {"min_concurrent_streams", kHttp2},
    {"stream_window", kHttp2},
    {"connection_window", kHttp2},
    {"max_header_list_bytes", kHttp2},
    {"max_continuations", kHttp2},
    {"glitch_threshold", kHttp2},
    {"max_frames_per_turn", kHttp2},
    {"h2c_listen", kHttp2},
    {"alpn", "a [[server.tls]] entry"},
    {"level", kLog},
    {"access_log", kLog},
    {"access_log_format", kLog},
    {"name", kUpstream},
    {"servers", kUpstream},
    {"balance", kUpstream},
    {"connect_timeout",
     "an [[upstreams]] entry (or [resilience.quota.backend] for the connection to Redis)"},
    {"response_timeout", kUpstream},
    {"keepalive", kUpstream},
    {"keepalive_timeout", kUpstream},
    {"resolve_interval", kUpstream},
    {"max_active_requests", kResilience},
    {"max_active_per_backend", kResilience},
    {"max_pending_requests", kResilience},
    {"pending_timeout", kResilience},
    {"retry_after",
     "[upstreams.resilience] (or [resilience.inflight] for the process-wide in-flight cap, "
     "[resilience.route_queue] for the route caps and brownout)"},
    {"health", "an [[upstreams]] entry, as [upstreams.health]"},
    {"ca_file", "[upstreams.tls] (TLS to a pool's backends)"},
    {"verify", "[upstreams.tls] (TLS to a pool's backends)"},
    // `path` and `timeout` also read as plausible slips for path_prefix and the pool's timeouts.
    {"path", "[upstreams.health] (a route matches requests by path_prefix)"},
    {"interval", kHealth},
    {"timeout",
     "[upstreams.health] (a pool's request timeouts are connect_timeout and "
     "response_timeout)"},
    {"fall", kHealth},
    {"rise", kHealth},
    {"expect_status", kHealth},
    {"max_response_header_bytes", kHealth},
    {"address", kServerEntry},
    {"weight", kServerEntry},
    {"host", "a [[routes]] entry (or [upstreams.health] for the probe's Host header)"},
    {"path_prefix", kRoute},
    {"allow_h2c_upgrade", kRoute},
    {"inflight", "[resilience], as [resilience.inflight]"},
    {"memory_guard", "[resilience], as [resilience.memory_guard]"},
    {"protocol", "[resilience], as [resilience.protocol]"},
    {"mode",
     "[resilience.inflight], [resilience.memory_guard], [resilience.protocol], "
     "[resilience.circuit_breaker], [resilience.adaptive_admission], [resilience.brownout], "
     "[resilience.route_queue] or a [[resilience.scoped_rate_limits]] rule ([resilience.quota] "
     "has enforcement instead)"},
    {"max_inflight",
     "[resilience.inflight] (or [resilience.quota.backend] for the Redis decisions in flight)"},
    {"exempt_preflight", kInflight},
    {"exempt_methods", kInflight},
    {"exempt_path_prefixes", kInflight},
    {"exempt_path_suffixes", kInflight},
    {"exempt_upgrades", kInflight},
    {"min_available", kMemoryGuard},
    {"meminfo", kMemoryGuard},
    {"allowed_methods", kProtocol},
    {"denied_path_prefixes", kProtocol},
    {"enforce_authority_host_match", kProtocol},
    {"allow_connect", kProtocol},
    {"connect_allowed_ports", kProtocol},
    {"connect_allowed_authorities", kProtocol},
    {"allow_0rtt", kProtocol},
    {"early_data_safe_methods", kProtocol},
    // Seed 004's protocol.max_headers_* are the request limits floodgate already has.
    {"max_headers_count", "[server], as max_headers"},
    {"max_headers_bytes", "[server], as max_header_bytes"},
    {"circuit_breaker", "[resilience], as [resilience.circuit_breaker]"},
    {"retry_budget", "[resilience], as [resilience.retry_budget]"},
    {"hedging", "[resilience], as [resilience.hedging]"},
    {"failure_threshold", kCircuitBreaker},
    {"failure_rate_percent", kCircuitBreaker},
    {"half_open_max_probes", kCircuitBreaker},
    {"failure_statuses", kCircuitBreaker},
    {"when_all_open", kCircuitBreaker},
    {"ratio_percent", kRetryBudget},
    {"per_route_ratio_percent", kRetryBudget},
    {"min_retries", kRetryBudget},
    {"safe_methods", kHedging},
    {"route_allowlist",
     "[resilience.hedging], a [[resilience.scoped_rate_limits]] rule or a "
     "[[resilience.quota.policies]] entry"},
    // Seed 004 writes these durations as integers of milliseconds.
    {"open_ms", "[resilience.circuit_breaker], as open (a duration: open = \"30s\")"},
    {"delay_ms", "[resilience.hedging], as delay (a duration: delay = \"100ms\")"},
    {"adaptive_admission", "[resilience], as [resilience.adaptive_admission]"},
    {"brownout", "[resilience], as [resilience.brownout]"},
    {"route_queue", "[resilience], as [resilience.route_queue]"},
    {"watchdog", "[resilience], as [resilience.watchdog]"},
    {"min_limit", kAdaptive},
    {"max_limit", kAdaptive},
    {"decrease_step", kAdaptive},
    {"increase_step", kAdaptive},
    {"high_latency", kAdaptive},
    {"trigger_inflight_percent", kBrownout},
    {"recover_inflight_percent", kBrownout},
    {"core_routes", kBrownout},
    {"default_cap", kRouteQueue},
    {"global_cap", kRouteQueue},
    {"caps", kRouteQueue},
    {"check_interval", kWatchdog},
    {"poll_stall_timeout", kWatchdog},
    {"timeout_error_rate_percent", kWatchdog},
    {"min_requests_per_window", kWatchdog},
    {"min_timeout_spread", kWatchdog},
    {"overload_inflight_percent", kWatchdog},
    {"unhealthy_consecutive_windows", kWatchdog},
    {"drain_grace", kWatchdog},
    {"restart_cooldown", kWatchdog},
    {"restart_command", kWatchdog},
    {"restart_hook",
     "[resilience.watchdog], as restart_command (restart_hook itself is no longer accepted)"},
    {"high_latency_ms",
     "[resilience.adaptive_admission], as high_latency (a duration: high_latency = \"500ms\")"},
    {"shed_retry_after_seconds",
     "[resilience.route_queue], as retry_after (a duration: retry_after = \"1s\")"},
    {"check_interval_ms",
     "[resilience.watchdog], as check_interval (a duration: check_interval = \"1s\")"},
    {"poll_stall_timeout_ms",
     "[resilience.watchdog], as poll_stall_timeout (a duration: poll_stall_timeout = \"5s\")"},
    {"drain_grace_ms", "[resilience.watchdog], as drain_grace (a duration: drain_grace = \"8s\")"},
    {"scoped_rate_limits", "[resilience], as [[resilience.scoped_rate_limits]]"},
    {"requests_per_sec", kRateLimit},
    {"burst",
     "a [[resilience.scoped_rate_limits]] rule (or a [[resilience.quota.policies]] entry, as a "
     "window: burst = { requests = 100, window = \"1s\" })"},
    {"idle_ttl", kRateLimit},
    {"max_keys", kRateLimit},
    {"on_table_full", kRateLimit},
    {"tier_key", kRateLimit},
    {"tiers", kRateLimit},
    // Seed 004 writes the idle lifetime as an integer of seconds.
    {"idle_ttl_secs",
     "a [[resilience.scoped_rate_limits]] rule, as idle_ttl (a duration: idle_ttl = \"300s\")"},
    {"restart_cooldown_ms",
     "[resilience.watchdog], as restart_cooldown (a duration: restart_cooldown = \"120s\")"},
    {"quota", "[resilience], as [resilience.quota]"},
    {"enforcement", kQuota},
    {"backend_failure_policy", kQuota},
    {"backend", "[resilience.quota], as [resilience.quota.backend]"},
    {"local_fallback", "[resilience.quota], as [resilience.quota.local_fallback]"},
    {"policies", "[resilience.quota], as [[resilience.quota.policies]]"},
    {"kind", kQuotaBackend},
    {"key_prefix", "[resilience.quota.backend] or [resilience.quota.local_fallback]"},
    {"url", kQuotaBackend},
    {"command_timeout", kQuotaBackend},
    {"max_entries", "[resilience.quota.local_fallback]"},
    {"selector", kQuotaPolicy},
    {"sustained", kQuotaPolicy},
    // Seed 004 writes the quota's durations as integers of milliseconds and seconds.
    {"connect_timeout_ms",
     "[resilience.quota.backend], as connect_timeout (a duration: connect_timeout = \"250ms\")"},
    {"command_timeout_ms",
     "[resilience.quota.backend], as command_timeout (a duration: command_timeout = \"100ms\")"},
    {"window_secs",
     "a quota window (the burst or sustained of a [[resilience.quota.policies]] entry), as "
     "window (a duration: window = \"1s\")"},
});

std::string scope_hint(std::string_view key) {
  if (key == "upstream") {
    return "'upstream' belongs in a [[routes]] entry";
  }
  for (const KeyHome& h : kKeyHomes) {
    if (h.key == key) {
      return std::string("'").append(key) + "' belongs in " + std::string(h.home);
    }
  }
  return {};
}

// Upstream name -> line of its definition. Holds invalid names too, so that a route naming
// one is not reported a second time as undefined.
using Names = std::map<std::string, int, std::less<>>;

void read_server(TableReader& r, ServerParams& p, DocumentMarks& marks) {
  marks.server_listen_ok = r.endpoints("listen", PortRule::zero_allowed, p.listen);
  marks.server_listen_at = r.position("listen");
  marks.workers_ok = r.integer("workers", 0, 256, p.workers);
  r.choice("io", kIoModes, p.io);
  r.integer("max_header_bytes", 256, 1'048'576, p.max_header_bytes);
  r.integer("max_headers", 1, 10'000, p.max_headers);
  r.integer("max_uri_bytes", 16, 1'048'576, p.max_uri_bytes);
  r.integer("max_body_bytes", 0, std::numeric_limits<int64_t>::max(), p.max_body_bytes);
  r.integer("max_buffers_per_reactor", 2, 1'048'576, p.max_buffers_per_reactor);
  marks.header_timeout_ok = r.duration("header_timeout", Zero::rejected, p.header_timeout);
  r.duration("idle_timeout", Zero::rejected, p.idle_timeout);
  r.duration("send_timeout", Zero::rejected, p.send_timeout);
  r.integer("max_unsent_bytes", 0, 67'108'864, p.max_unsent_bytes);
  r.duration("handshake_timeout", Zero::rejected, p.handshake_timeout);
  r.integer("max_opening_connections", 16, 1'000'000, p.max_opening_connections);
  r.integer("max_requests_per_connection", 0, 1'000'000'000, p.max_requests_per_connection);
  marks.drain_timeout_ok = r.duration("drain_timeout", Zero::allowed, p.drain_timeout);
  marks.retirement_grace_ok = r.duration("retirement_grace", Zero::allowed, p.retirement_grace);
  marks.retirement_grace_at = r.position("retirement_grace");
  marks.trusted_proxies_ok = read_trusted_proxies(r, p.trusted_proxies);
  const bool tls_listen_ok = read_server_tls(r, p, r.peek("listen") != nullptr);
  // After [[server.tls]]: h2c_listen names plain listeners, which only then are all known.
  r.table("http2", std::string(kHttp2),
          [&](TableReader& t) { read_http2(t, p, marks.server_listen_ok && tls_listen_ok); });
}

Parsed<std::string> parse_token_file_path(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return Parsed<std::string>::fail(
        "must be an absolute path, e.g. \"/run/credentials/floodgate.service/admin-token\" "
        "(systemd's LoadCredential=admin-token:/etc/floodgate/admin-token)");
  }
  return Parsed<std::string>::ok(std::string(path));
}

// admin.token_file: the token read from a file at every load (start, reload, check), so that it
// can come from systemd's LoadCredential= and be rotated by a reload. Trailing whitespace (the
// newline of `echo` or an editor) is dropped; the rest is checked as admin.token is, and no
// message quotes it.
void read_token_file(TableReader& r, AdminParams& p) {
  constexpr std::size_t kMaxTokenFileBytes = 4096;
  std::string path;
  if (!r.text("token_file", R"(token_file = "/run/credentials/floodgate.service/admin-token")",
              parse_token_file_path, path) ||
      path.empty()) {
    return;
  }
  if (r.peek("token") != nullptr) {
    return r.error("token_file",
                   "admin.token and admin.token_file are both set; keep one (token_file keeps "
                   "the secret out of the configuration file)");
  }
  std::string text;
  std::string why;
  if (!read_file(path, text, why)) {
    return r.error("token_file", "cannot read \"" + path + "\": " + why);
  }
  if (text.size() > kMaxTokenFileBytes) {
    return r.error("token_file", "\"" + path + "\" is larger than " +
                                     std::to_string(kMaxTokenFileBytes) +
                                     " bytes; it should hold the token alone");
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.pop_back();
  }
  auto checked = parse_admin_token(text);
  if (!checked.value) {
    return r.error("token_file", "in \"" + path + "\": " + std::move(checked.error));
  }
  p.token = std::move(*checked.value);
}

// admin.listen = "unix:/path": a UNIX socket. The path is absolute and fits sockaddr_un.
Parsed<std::string> parse_unix_listen(std::string_view text) {
  constexpr std::size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;  // 107 on Linux
  const std::string_view path = text.substr(5);                        // after "unix:"
  if (path.empty() || path.front() != '/') {
    return Parsed<std::string>::fail(
        "a UNIX socket needs an absolute path, e.g. \"unix:/run/floodgate/admin.sock\"");
  }
  if (path.size() > kMaxPath) {
    return Parsed<std::string>::fail("the socket path is longer than " + std::to_string(kMaxPath) +
                                     " bytes (the system's limit); choose a shorter one");
  }
  for (const char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Parsed<std::string>::fail("the socket path has a control character");
    }
  }
  return Parsed<std::string>::ok(std::string(path));
}

// admin.socket_mode: "0660", three or four octal digits, at most 0777.
Parsed<std::string> parse_socket_mode(std::string_view text) {
  const bool octal =
      (text.size() == 3 || text.size() == 4) &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
  if (!octal || (text.size() == 4 && text.front() != '0')) {
    return Parsed<std::string>::fail(
        "must be a file mode in octal, e.g. \"0660\" (owner and group may connect) or \"0600\"");
  }
  return Parsed<std::string>::ok(std::string(text));
}

void read_admin(TableReader& r, AdminParams& p, DocumentMarks& marks) {
  const toml::node* listen = r.peek("listen");
  const bool unix_socket =
      listen != nullptr && listen->is_string() && listen->as_string()->get().starts_with("unix:");
  if (unix_socket) {
    marks.admin_listen_ok = r.text("listen", R"(listen = "unix:/run/floodgate/admin.sock")",
                                   parse_unix_listen, p.unix_path);
    if (marks.admin_listen_ok) p.listen = Endpoint{"", 0, "unix:" + p.unix_path};
  } else {
    marks.admin_listen_ok = r.endpoint("listen", PortRule::nonzero, p.listen);
  }
  marks.admin_listen_at = r.position("listen");
  std::string mode;
  if (r.text("socket_mode", R"(socket_mode = "0660")", parse_socket_mode, mode) && !mode.empty()) {
    if (!unix_socket) {
      r.error("socket_mode",
              "applies to an admin listener on a UNIX socket (listen = \"unix:/path\"); remove "
              "it, or move the listener to a socket");
    } else {
      p.socket_mode = static_cast<uint32_t>(std::stoul(mode, nullptr, 8));
    }
  }
  marks.token_given = r.find("token") != nullptr || r.peek("token_file") != nullptr;
  r.secret("token", R"(token = "<at least 16 visible ASCII characters>")", parse_admin_token,
           p.token);
  read_token_file(r, p);
}

// Whether floodgate, as the user running this check, could open `path` for appending: what
// start-up would hit, said before it does (floodgate never creates a missing directory).
std::string access_log_problem(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return "the directory \"" + dir +
             "\" does not exist; create it first (floodgate never creates directories; under "
             "systemd, LogsDirectory=floodgate provides /var/log/floodgate)";
    }
    return "cannot reach the directory \"" + dir + "\": " + std::strerror(errno);
  }
  if (!S_ISDIR(st.st_mode)) return "\"" + dir + "\" is not a directory";
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "\"" + path + "\" is a directory; name a file in it";
    if (::access(path.c_str(), W_OK) != 0) {
      return "\"" + path + "\" is not writable by this user (uid " + std::to_string(::geteuid()) +
             "): " + std::strerror(errno);
    }
    return "";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "cannot create \"" + path + "\": the directory \"" + dir +
           "\" is not writable by this user (uid " + std::to_string(::geteuid()) + ")";
  }
  return "";
}

Parsed<std::string> parse_access_log(std::string_view sink) {
  if (sink.empty()) {
    return Parsed<std::string>::fail(R"(must not be empty; use "stderr", "off" or a file path)");
  }
  std::string path(sink);
  if (path != "stderr" && path != "off") {
    if (std::string problem = access_log_problem(path); !problem.empty()) {
      return Parsed<std::string>::fail(std::move(problem));
    }
  }
  return Parsed<std::string>::ok(std::move(path));
}

void read_log(TableReader& r, LogParams& p) {
  r.choice("level", kLogLevels, p.level);
  r.text("access_log", R"(access_log = "stderr")", parse_access_log, p.access_log);
  r.choice("access_log_format", kAccessLogFormats, p.access_log_format);
  // A summary more often than once a second would be the flood of lines it exists to spare.
  if (r.duration("shed_summary_interval", Zero::allowed, p.shed_summary_interval) &&
      p.shed_summary_interval.count() != 0 && p.shed_summary_interval < std::chrono::seconds(1)) {
    r.error("shed_summary_interval",
            "must be \"0s\" (no shedding summary) or at least \"1s\", e.g. \"10s\"");
    p.shed_summary_interval = LogParams{}.shed_summary_interval;
  }
}

void read_name(TableReader& r, UpstreamParams& u, Names& names) {
  constexpr std::string_view kExample = R"(name = "app")";
  if (!r.require("name", kExample)) {
    return;
  }
  auto name = r.string("name", kExample);
  if (!name) {
    return;
  }
  const int line = r.position("name").line;
  if (const auto [it, fresh] = names.try_emplace(*name, line); !fresh) {
    r.error("name", "duplicate upstream name '" + *name + "' (first defined at line " +
                        std::to_string(it->second) + "); give each [[upstreams]] its own name");
  } else if (!is_valid_name(*name)) {
    r.error("name", quoted(*name) + " is not a valid upstream name; use one or more letters, " +
                        "digits, '_', '.' or '-', e.g. \"app\"");
  } else {
    u.name = std::move(*name);
  }
}

// A server written as a host name: resolved now (the main thread, when the file is loaded), one
// backend per address. A name that does not resolve is an error naming the server.
bool resolve_entry(TableReader& r, Position at, const std::string& path, ServerEntry& e) {
  if (is_ip_literal(e.address.host)) return true;
  Resolution res = resolve_server(e.address.host, e.address.port);
  if (res.addresses.empty()) {
    r.out().error(at, path,
                  "cannot resolve '" + e.address.host + "' (" + res.error +
                      "): floodgate resolves a server's name when it loads the file; fix the "
                      "name or its DNS record, or write the server's IP address");
    return false;
  }
  if (res.left_out > 0) {
    r.out().warning(at, path,
                    "'" + e.address.host + "' resolves to more than " +
                        std::to_string(kMaxAddressesPerName) + " addresses; the pool uses the " +
                        "first " + std::to_string(kMaxAddressesPerName) + " in sorted order and " +
                        std::to_string(res.left_out) + " are left out");
  }
  e.resolved = std::move(res.addresses);
  return true;
}

std::optional<ServerEntry> read_server_entry(TableReader& r, const toml::node& item,
                                             const std::string& path) {
  const Position at = position_of(item.source());
  if (const auto* s = item.as_string()) {
    auto parsed = parse_endpoint(s->get(), PortRule::nonzero, true);
    if (!parsed.value) {
      r.out().error(at, path, std::move(parsed.error));
      return std::nullopt;
    }
    ServerEntry entry;
    entry.address = std::move(*parsed.value);
    return resolve_entry(r, at, path, entry) ? std::optional(entry) : std::nullopt;
  }
  if (const toml::table* t = item.as_table()) {
    TableReader entry_reader = r.child(*t, path, "server entry");
    ServerEntry entry;
    bool ok = entry_reader.require("address", R"(address = "127.0.0.1:9000")") &&
              entry_reader.endpoint("address", PortRule::nonzero, entry.address, true) &&
              resolve_entry(r, entry_reader.position("address"), path + ".address", entry);
    ok = entry_reader.integer("weight", 1, 1000, entry.weight) && ok;
    entry_reader.finish();
    return ok ? std::optional(entry) : std::nullopt;
  }
  type_error(r.out(), at, path,
             R"(a "host:port" string or a table { address = "...", weight = N })", item,
             R"("127.0.0.1:9000")");
  return std::nullopt;
}

void read_servers(TableReader& r, std::vector<ServerEntry>& out) {
  if (!r.require("servers", kServersExample)) {
    return;
  }
  const toml::node& n = *r.find("servers");
  const toml::array* items = n.as_array();
  if (!items) {
    type_error(r.out(), r.position("servers"), r.path("servers"), "an array", n, kServersExample);
    return;
  }
  if (items->empty()) {
    r.error("servers", "at least one server is required; e.g. " + std::string(kServersExample));
    return;
  }
  std::vector<ServerEntry> servers;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string path = r.path("servers") + "[" + std::to_string(i) + "]";
    if (auto entry = read_server_entry(r, (*items)[i], path)) {
      servers.push_back(std::move(*entry));
    }
  }
  if (servers.size() == items->size()) {
    out = std::move(servers);
  }
}

// Weights only steer round_robin (upstream/balancer.h); a weight under another balancer is
// almost certainly meant to do something it does not.
void warn_ignored_weights(TableReader& r, const UpstreamParams& u) {
  const toml::node* servers = r.find("servers");
  const toml::array* items = servers ? servers->as_array() : nullptr;
  if (u.balance == Balance::round_robin || !items || u.servers.size() != items->size()) {
    return;  // no weights to ignore, or the servers have errors of their own
  }
  const std::string_view balance = name_of(kBalances, u.balance);
  for (size_t i = 0; i < items->size(); ++i) {
    const toml::table* entry = (*items)[i].as_table();
    if (!entry || !entry->contains("weight") || u.servers[i].weight == 1) {
      continue;
    }
    r.out().warning(position_of(entry->find("weight")->first.source()),
                    r.path("servers") + "[" + std::to_string(i) + "].weight",
                    "weight " + std::to_string(u.servers[i].weight) + " is ignored by balance = " +
                        quoted(balance) + "; only round_robin uses weights: set balance = " +
                        "\"round_robin\" or remove the weight");
  }
}

// Each waiter is a parked request holding its client connection (and its buffers) while it
// waits, so the queue needs a bound like every other queue. A million waiters is far more than
// any pool should park, yet still a bound.
constexpr int64_t kMaxPendingRequests = 1'000'000;

// The rules between the keys of one [upstreams.resilience]. A value that had an error keeps
// its default, which must not be mistaken for what the operator wrote: hence the `*_ok`.
void check_resilience(TableReader& r, const ResilienceParams& p, bool active_ok, bool timeout_ok,
                      size_t servers) {
  const std::string pending = "max_pending_requests = " + std::to_string(p.max_pending_requests);
  if (p.max_pending_requests > 0 && active_ok && p.max_active_requests == 0) {
    r.error("max_pending_requests",
            pending + " needs a limit to queue behind, but max_active_requests is 0 (unlimited), " +
                "so no request ever waits; set max_active_requests, e.g. max_active_requests " +
                "= 100, or remove max_pending_requests");
  } else if (p.max_pending_requests > 0 && timeout_ok && p.pending_timeout.count() == 0) {
    r.warning("max_pending_requests",
              pending + " with pending_timeout = \"0s\": a waiter is bounded only by its " +
                  "client going away and by retirement; set pending_timeout, e.g. " +
                  "pending_timeout = \"5s\"");
  }
  const uint64_t per_backend = p.max_active_per_backend;
  const uint64_t active = p.max_active_requests;
  if (per_backend > 0 && active > 0 && servers > 0 && per_backend * servers < active) {
    const uint64_t reachable = per_backend * servers;
    r.warning("max_active_per_backend",
              "max_active_per_backend = " + std::to_string(per_backend) + " times " +
                  std::to_string(servers) + (servers == 1 ? " server" : " servers") +
                  " admits at most " + std::to_string(reachable) +
                  " active requests, fewer than max_active_requests = " + std::to_string(active) +
                  ", so the pool limit is never reached: requests get 503 no_eligible_backend " +
                  "instead of queueing while the pool has room; raise max_active_per_backend to " +
                  std::to_string((active + servers - 1) / servers) +
                  " or lower max_active_requests to " + std::to_string(reachable));
  }
}

// [upstreams.resilience]: the pool's admission policy (upstream/admission.h). `servers` is the
// pool's server count, 0 when the servers had errors.
void read_resilience(TableReader& r, ResilienceParams& p, size_t servers,
                     DocumentMarks::Upstream& mark) {
  constexpr int64_t kMaxActive = Admission::kMaxActive;
  const bool active_ok = r.integer("max_active_requests", 0, kMaxActive, p.max_active_requests);
  if (active_ok && r.find("max_active_requests")) {
    mark.max_active_at = r.position("max_active_requests");
  }
  r.integer("max_active_per_backend", 0, kMaxActive, p.max_active_per_backend);
  r.integer("max_pending_requests", 0, kMaxPendingRequests, p.max_pending_requests);
  const bool timeout_ok = r.duration("pending_timeout", Zero::allowed, p.pending_timeout);
  if (timeout_ok && r.find("pending_timeout")) {
    mark.pending_timeout_at = r.position("pending_timeout");
  }
  // Retry-After goes out in whole seconds, rounded up, so every rejection tells the client to
  // wait at least 1s; "0s" would invite the immediate retry that admission control sheds.
  r.duration("retry_after", Zero::rejected, p.retry_after);
  mark.capacity_ok = mark.capacity_ok && active_ok;
  check_resilience(r, p, active_ok, timeout_ok, servers);
}

// resolve_interval: 0 (resolve only at load) or at least a second; pointless, and said so,
// when every server is an IP address.
void read_resolve_interval(TableReader& r, UpstreamParams& u) {
  if (!r.duration("resolve_interval", Zero::allowed, u.resolve_interval) ||
      u.resolve_interval.count() == 0) {
    return;
  }
  if (u.resolve_interval < std::chrono::seconds(1)) {
    r.error("resolve_interval",
            "must be \"0\" (resolve only when the file is loaded) or at least \"1s\"");
    u.resolve_interval = {};
    return;
  }
  const bool names = std::any_of(u.servers.begin(), u.servers.end(),
                                 [](const ServerEntry& e) { return !e.resolved.empty(); });
  if (!u.servers.empty() && !names) {
    r.warning("resolve_interval",
              "has no effect: every server of this upstream is an IP address (it re-resolves "
              "servers written as host names)");
  }
}

void read_upstream(TableReader& r, UpstreamParams& u, Names& names, DocumentMarks& marks,
                   size_t index) {
  DocumentMarks::Upstream& mark = marks.upstreams.emplace_back();
  mark.index = index;
  read_name(r, u, names);
  read_servers(r, u.servers);
  r.choice("balance", kBalances, u.balance);
  r.duration("connect_timeout", Zero::rejected, u.connect_timeout);
  mark.response_timeout_ok = r.duration("response_timeout", Zero::rejected, u.response_timeout);
  // The servers are required and assigned only when all are valid: none means an error.
  mark.capacity_ok = r.integer("keepalive", 0, 100'000, u.keepalive) && !u.servers.empty();
  r.duration("keepalive_timeout", Zero::rejected, u.keepalive_timeout);
  read_resolve_interval(r, u);
  r.table("resilience", std::string(kResilience),
          [&](TableReader& t) { read_resilience(t, u.resilience, u.servers.size(), mark); });
  r.table("health", std::string(kHealth),
          [&](TableReader& t) { read_health(t, u.health.emplace()); });
  r.table("tls", "[upstreams.tls]", [&](TableReader& t) { read_upstream_tls(t, u.tls); });
  warn_ignored_weights(r, u);
}

// Admission limits belong to a pool: every route to the pool shares them. Until route-scoped
// resilience keys exist, [routes.resilience] holds nothing else, so its other keys are unknown.
constexpr std::array<std::string_view, 5> kPoolScoped{
    "max_active_requests", "max_active_per_backend", "max_pending_requests", "pending_timeout",
    "retry_after"};

void reject_pool_scoped(TableReader& r, const RouteParams& p) {
  const std::string where =
      p.upstream.empty() ? "of the upstream the route uses" : "of upstream '" + p.upstream + "'";
  for (const std::string_view key : kPoolScoped) {
    if (r.claim(key)) {
      r.error(key,
              std::string(key) + " is pool-scoped: set it under [upstreams.resilience] " + where);
    }
  }
}

void read_route_upstream(TableReader& r, RouteParams& p, const Names& names) {
  constexpr std::string_view kExample = R"(upstream = "app")";
  if (!r.require("upstream", kExample)) {
    return;
  }
  if (auto name = r.string("upstream", kExample)) {
    if (names.contains(*name)) {
      p.upstream = std::move(*name);
    } else {
      r.error("upstream", "route names upstream '" + *name +
                              "', which is not defined; define [[upstreams]] name = \"" + *name +
                              "\" or fix the name");
    }
  }
}

void read_route(TableReader& r, RouteParams& p, const Names& names, DocumentMarks& marks,
                size_t index) {
  bool ok = r.text("host", R"(host = "*")", parse_route_host, p.host);
  ok = r.text("path_prefix", R"(path_prefix = "/")", parse_path_prefix, p.path_prefix) && ok;
  read_route_upstream(r, p, names);
  r.boolean("allow_h2c_upgrade", "allow_h2c_upgrade = true", p.allow_h2c_upgrade);
  marks.routes.push_back({index, r.position(), ok});
  reject_pool_scoped(r, p);
  // Only a table is descended into; anything else named resilience stays an unknown key.
  const toml::node* resilience = r.peek("resilience");
  if (const toml::table* t = resilience ? resilience->as_table() : nullptr) {
    r.claim("resilience");
    TableReader sub = r.child(*t, r.path("resilience"), "[routes.resilience]");
    reject_pool_scoped(sub, p);
    sub.finish();
  }
}

// What [resilience] may refer to: every name written (valid or not, as `names`) and the
// response_timeout of the pools whose name and response_timeout are both valid.
UpstreamRefs upstream_refs(const Config& c, const DocumentMarks& marks, const Names& names) {
  UpstreamRefs refs;
  for (const auto& entry : names) {
    refs.names.push_back(entry.first);
  }
  for (size_t i = 0; i < c.upstreams.size(); ++i) {
    const UpstreamParams& u = c.upstreams[i];
    if (!u.name.empty() && marks.upstreams[i].response_timeout_ok) {
      refs.response_timeouts.push_back({u.name, u.response_timeout});
    }
  }
  return refs;
}

}  // namespace

Config map_document(const toml::table& root, const Environment& env, Collector& out) {
  Config c;
  DocumentMarks marks;
  ResilienceMarks resilience_marks;
  Names names;
  TableReader r(out, root, "", "the root table", scope_hint);
  r.table("server", "[server]", [&](TableReader& t) { read_server(t, c.server, marks); });
  r.table("admin", "[admin]", [&](TableReader& t) { read_admin(t, c.admin, marks); });
  r.table("log", "[log]", [&](TableReader& t) { read_log(t, c.log); });
  r.tables("upstreams", "[[upstreams]]",
           R"(at least one [[upstreams]] is required; add one with name = "app" and )"
           R"(servers = ["127.0.0.1:9000"])",
           [&](TableReader& t, size_t i) {
             read_upstream(t, c.upstreams.emplace_back(), names, marks, i);
           });
  r.tables(
      "routes", "[[routes]]",
      R"(at least one [[routes]] is required; add one with upstream = "app")",
      [&](TableReader& t, size_t i) { read_route(t, c.routes.emplace_back(), names, marks, i); });
  const UpstreamRefs refs = upstream_refs(c, marks, names);
  r.table("resilience", "[resilience]",
          [&](TableReader& t) { read_resilience_table(t, c.resilience, resilience_marks, refs); });
  r.finish();
  check_document(c, marks, out);
  apply_resilience_environment(env, resilience_marks, c.resilience, out);
  check_protection(c, marks, resilience_marks, out);
  check_scoped_rate_limits(c, marks.trusted_proxies_ok, resilience_marks.rate_limits, out);
  return c;
}

}  // namespace floodgate::config::detail
