#include "schema.h"

#include <array>
#include <limits>
#include <map>
#include <string>

#include "table_reader.h"
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
constexpr std::array<Choice<AccessLogFormat>, 2> kAccessLogFormats{{
    {"json", AccessLogFormat::json},
    {"combined", AccessLogFormat::combined},
}};

constexpr std::string_view kServersExample =
    R"(servers = ["127.0.0.1:9000", { address = "127.0.0.1:9001", weight = 2 }])";

// Where each key of a nested table lives, so that a key written in the wrong table gets told
// where it belongs instead of a list of the keys that table does accept.
struct KeyHome {
  std::string_view key;
  std::string_view home;
};
constexpr std::string_view kServer = "[server]";
constexpr std::string_view kUpstream = "an [[upstreams]] entry";
constexpr std::string_view kRoute = "a [[routes]] entry";
constexpr std::string_view kLog = "[log]";
constexpr std::string_view kServerEntry =
    R"(a server entry, e.g. servers = [{ address = "127.0.0.1:9000", weight = 2 }])";
constexpr std::array<KeyHome, 23> kKeyHomes{{
    {"listen", "[server] (or [admin] for the admin listener)"},
    {"workers", kServer},
    {"max_header_bytes", kServer},
    {"max_headers", kServer},
    {"max_uri_bytes", kServer},
    {"max_body_bytes", kServer},
    {"header_timeout", kServer},
    {"idle_timeout", kServer},
    {"drain_timeout", kServer},
    {"level", kLog},
    {"access_log", kLog},
    {"access_log_format", kLog},
    {"name", kUpstream},
    {"servers", kUpstream},
    {"balance", kUpstream},
    {"connect_timeout", kUpstream},
    {"response_timeout", kUpstream},
    {"keepalive", kUpstream},
    {"keepalive_timeout", kUpstream},
    {"address", kServerEntry},
    {"weight", kServerEntry},
    {"host", kRoute},
    {"path_prefix", kRoute},
}};

std::string scope_hint(std::string_view key) {
  if (key == "upstream") {
    return "'upstream' belongs in a [[routes]] entry";
  }
  for (const KeyHome& h : kKeyHomes) {
    if (h.key == key) {
      return "'" + std::string(key) + "' belongs in " + std::string(h.home);
    }
  }
  return {};
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// Where the listeners were defined, to catch the admin listener sharing a data-plane port.
struct ListenMarks {
  bool server_ok = true;
  bool admin_ok = true;
  Position server_at;
  std::optional<Position> admin_at;
};

// Upstream name -> line of its definition. Holds invalid names too, so that a route naming
// one is not reported a second time as undefined.
using Names = std::map<std::string, int, std::less<>>;

void read_server(TableReader& r, ServerParams& p, ListenMarks& marks) {
  marks.server_ok = r.endpoints("listen", PortRule::zero_allowed, p.listen);
  marks.server_at = r.position("listen");
  r.integer("workers", 0, 256, p.workers);
  r.integer("max_header_bytes", 256, 1'048'576, p.max_header_bytes);
  r.integer("max_headers", 1, 10'000, p.max_headers);
  r.integer("max_uri_bytes", 16, 1'048'576, p.max_uri_bytes);
  r.integer("max_body_bytes", 0, std::numeric_limits<int64_t>::max(), p.max_body_bytes);
  r.duration("header_timeout", Zero::rejected, p.header_timeout);
  r.duration("idle_timeout", Zero::rejected, p.idle_timeout);
  r.duration("drain_timeout", Zero::allowed, p.drain_timeout);
}

void read_admin(TableReader& r, AdminParams& p, ListenMarks& marks) {
  marks.admin_ok = r.endpoint("listen", PortRule::nonzero, p.listen);
  marks.admin_at = r.position("listen");
}

Parsed<std::string> parse_access_log(std::string_view sink) {
  if (sink.empty()) {
    return Parsed<std::string>::fail(R"(must not be empty; use "stderr", "off" or a file path)");
  }
  return Parsed<std::string>::ok(std::string(sink));
}

void read_log(TableReader& r, LogParams& p) {
  r.choice("level", kLogLevels, p.level);
  r.text("access_log", R"(access_log = "stderr")", parse_access_log, p.access_log);
  r.choice("access_log_format", kAccessLogFormats, p.access_log_format);
}

// With SO_REUSEPORT both listeners could bind the same port and share its connections.
void check_admin_port(const Config& c, const ListenMarks& marks, Collector& out) {
  if (!marks.server_ok || !marks.admin_ok) {
    return;
  }
  for (const Endpoint& e : c.server.listen) {
    if (e.port != 0 && e.host == c.admin.listen.host && e.port == c.admin.listen.port) {
      out.error(marks.admin_at.value_or(marks.server_at), "admin.listen",
                quoted(c.admin.listen.text) +
                    " is also a server.listen address; give the admin listener its own port");
      return;
    }
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

std::optional<ServerEntry> read_server_entry(TableReader& r, const toml::node& item,
                                             const std::string& path) {
  const Position at = position_of(item.source());
  if (const auto* s = item.as_string()) {
    auto parsed = parse_endpoint(s->get(), PortRule::nonzero);
    if (!parsed.value) {
      r.out().error(at, path, std::move(parsed.error));
      return std::nullopt;
    }
    return ServerEntry{std::move(*parsed.value)};
  }
  if (const toml::table* t = item.as_table()) {
    TableReader entry_reader = r.child(*t, path, "server entry");
    ServerEntry entry;
    bool ok = entry_reader.require("address", R"(address = "127.0.0.1:9000")") &&
              entry_reader.endpoint("address", PortRule::nonzero, entry.address);
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

void read_upstream(TableReader& r, UpstreamParams& u, Names& names) {
  read_name(r, u, names);
  read_servers(r, u.servers);
  r.choice("balance", kBalances, u.balance);
  r.duration("connect_timeout", Zero::rejected, u.connect_timeout);
  r.duration("response_timeout", Zero::rejected, u.response_timeout);
  r.integer("keepalive", 0, 100'000, u.keepalive);
  r.duration("keepalive_timeout", Zero::rejected, u.keepalive_timeout);
}

void read_route(TableReader& r, RouteParams& p, const Names& names) {
  r.text("host", R"(host = "*")", parse_route_host, p.host);
  r.text("path_prefix", R"(path_prefix = "/")", parse_path_prefix, p.path_prefix);
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

}  // namespace

Config map_document(const toml::table& root, Collector& out) {
  Config c;
  ListenMarks marks;
  Names names;
  TableReader r(out, root, "", "the root table", scope_hint);
  r.table("server", "[server]", [&](TableReader& t) { read_server(t, c.server, marks); });
  r.table("admin", "[admin]", [&](TableReader& t) { read_admin(t, c.admin, marks); });
  r.table("log", "[log]", [&](TableReader& t) { read_log(t, c.log); });
  r.tables("upstreams", "[[upstreams]]",
           R"(at least one [[upstreams]] is required; add one with name = "app" and )"
           R"(servers = ["127.0.0.1:9000"])",
           [&](TableReader& t, size_t) { read_upstream(t, c.upstreams.emplace_back(), names); });
  r.tables("routes", "[[routes]]",
           R"(at least one [[routes]] is required; add one with upstream = "app")",
           [&](TableReader& t, size_t) { read_route(t, c.routes.emplace_back(), names); });
  r.finish();
  check_admin_port(c, marks, out);
  return c;
}

}  // namespace floodgate::config::detail
