#include "config_diff.h"

#include <algorithm>
#include <boost/json.hpp>

namespace floodgate::app {

namespace json = boost::json;

namespace {

const UpstreamParams* find_pool(const config::Config& c, const std::string& name) {
  for (const auto& u : c.upstreams) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

// Everything of a pool but its name and servers (reported on their own).
bool same_policy(const UpstreamParams& a, const UpstreamParams& b) {
  UpstreamParams x = a;
  x.name = b.name;
  x.servers = b.servers;
  return x == b;
}

std::string route_key(const RouteParams& r) {
  return r.host + r.path_prefix;
}

json::object route_json(const RouteParams& r) {
  return json::object{{"host", r.host},
                      {"path_prefix", r.path_prefix},
                      {"upstream", r.upstream},
                      {"allow_h2c_upgrade", r.allow_h2c_upgrade}};
}

json::object section(json::array added, json::array removed, json::array changed) {
  return json::object{{"added", std::move(added)},
                      {"removed", std::move(removed)},
                      {"changed", std::move(changed)}};
}

}  // namespace

json::object config_diff(const config::Config& active, const config::Config& next) {
  json::array pools_added, pools_removed, pools_changed;
  json::array servers_added, servers_removed, servers_changed, policies_changed;
  for (const auto& u : next.upstreams) {
    const UpstreamParams* old = find_pool(active, u.name);
    if (old == nullptr) {
      pools_added.emplace_back(json::string(u.name));
      continue;
    }
    bool changed = false;
    for (const auto& srv : u.servers) {
      const auto it = std::find_if(old->servers.begin(), old->servers.end(), [&](const auto& o) {
        return o.address.text == srv.address.text;
      });
      if (it == old->servers.end()) {
        servers_added.push_back(json::object{{"upstream", u.name}, {"server", srv.address.text}});
        changed = true;
      } else if (!(*it == srv)) {
        json::object entry{
            {"upstream", u.name}, {"server", srv.address.text}, {"weight", srv.weight}};
        if (!srv.resolved.empty()) {
          json::array addresses;
          for (const Endpoint& a : srv.resolved) addresses.emplace_back(json::string(a.text));
          entry["addresses"] = std::move(addresses);
        }
        servers_changed.push_back(std::move(entry));
        changed = true;
      }
    }
    for (const auto& o : old->servers) {
      const bool kept = std::any_of(u.servers.begin(), u.servers.end(), [&](const auto& n) {
        return n.address.text == o.address.text;
      });
      if (!kept) {
        servers_removed.push_back(json::object{{"upstream", u.name}, {"server", o.address.text}});
        changed = true;
      }
    }
    // The same servers in another order (round robin's order) count as a change of the pool.
    if (!changed && old->servers != u.servers) changed = true;
    if (!same_policy(*old, u)) {
      policies_changed.emplace_back(json::string(u.name));
      changed = true;
    }
    if (changed) pools_changed.emplace_back(json::string(u.name));
  }
  for (const auto& o : active.upstreams) {
    if (find_pool(next, o.name) == nullptr) pools_removed.emplace_back(json::string(o.name));
  }
  json::array routes_added, routes_removed, routes_changed;
  for (const auto& r : next.routes) {
    const auto it = std::find_if(active.routes.begin(), active.routes.end(),
                                 [&](const auto& o) { return route_key(o) == route_key(r); });
    if (it == active.routes.end()) {
      routes_added.push_back(route_json(r));
    } else if (!(*it == r)) {
      routes_changed.push_back(route_json(r));
    }
  }
  for (const auto& o : active.routes) {
    const bool kept = std::any_of(next.routes.begin(), next.routes.end(),
                                  [&](const auto& r) { return route_key(r) == route_key(o); });
    if (!kept) routes_removed.push_back(route_json(o));
  }
  json::array resilience_changed;
  const resilience::Params& was = active.resilience;
  const resilience::Params& will = next.resilience;
  if (was.inflight != will.inflight) resilience_changed.emplace_back("inflight");
  if (was.memory_guard != will.memory_guard) resilience_changed.emplace_back("memory_guard");
  if (was.protocol != will.protocol) resilience_changed.emplace_back("protocol");
  if (was.circuit_breaker != will.circuit_breaker) {
    resilience_changed.emplace_back("circuit_breaker");
  }
  if (was.retry_budget != will.retry_budget) resilience_changed.emplace_back("retry_budget");
  if (was.hedging != will.hedging) resilience_changed.emplace_back("hedging");
  if (was.adaptive_admission != will.adaptive_admission) {
    resilience_changed.emplace_back("adaptive_admission");
  }
  if (was.brownout != will.brownout) resilience_changed.emplace_back("brownout");
  if (was.route_queue != will.route_queue) resilience_changed.emplace_back("route_queue");
  if (was.watchdog != will.watchdog) resilience_changed.emplace_back("watchdog");
  if (was.scoped_rate_limits != will.scoped_rate_limits) {
    resilience_changed.emplace_back("scoped_rate_limits");
  }
  if (was.quota != will.quota) resilience_changed.emplace_back("quota");
  // A sub-table no one listed here yet: reported rather than missed.
  if (resilience_changed.empty() && was != will) resilience_changed.emplace_back("other");
  json::array tables_changed;
  if (!(active.server == next.server)) tables_changed.emplace_back("server");
  if (!(active.admin == next.admin)) tables_changed.emplace_back("admin");
  if (!(active.log == next.log)) tables_changed.emplace_back("log");
  // Whatever differs and is not listed above (a new top-level table no one added here yet):
  // reported rather than missed.
  json::object out{
      {"pools", section(pools_added, pools_removed, pools_changed)},
      {"servers", section(servers_added, servers_removed, servers_changed)},
      {"routes", section(routes_added, routes_removed, routes_changed)},
      {"policies", json::object{{"changed", policies_changed}}},
      {"resilience", json::object{{"changed", resilience_changed}}},
      {"tables", json::object{{"changed", tables_changed}}},
  };
  config::Config listed = next;  // next with everything the sections above compare undone
  listed.upstreams = active.upstreams;
  listed.routes = active.routes;
  listed.resilience = active.resilience;
  listed.server = active.server;
  listed.admin = active.admin;
  listed.log = active.log;
  const bool order_only = routes_added.empty() && routes_removed.empty() &&
                          routes_changed.empty() && active.routes != next.routes;
  if (!(listed == active) || order_only) {
    out["tables"].as_object()["changed"].as_array().emplace_back(order_only ? "routes" : "other");
  }
  return out;
}

std::string summarize(const json::object& diff) {
  std::string out;
  const auto add = [&out](std::size_t n, const char* one, const char* many, const char* what) {
    if (n == 0) return;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + (n == 1 ? one : many) + " " + what;
  };
  for (const char* kind : {"pools", "servers", "routes"}) {
    const json::object& s = diff.at(kind).as_object();
    const std::string noun = std::string(kind).substr(0, std::string(kind).size() - 1);
    const std::string plural = kind;
    add(s.at("added").as_array().size(), noun.c_str(), plural.c_str(), "added");
    add(s.at("removed").as_array().size(), noun.c_str(), plural.c_str(), "removed");
    add(s.at("changed").as_array().size(), noun.c_str(), plural.c_str(), "changed");
  }
  const auto names = [](const json::value& v) {
    std::string list;
    for (const auto& n : v.as_array()) {
      if (!list.empty()) list += ", ";
      list += json::value_to<std::string>(n);
    }
    return list;
  };
  if (const auto& r = diff.at("resilience").at("changed"); !r.as_array().empty()) {
    if (!out.empty()) out += ", ";
    out += "[resilience] " + names(r) + " changed";
  }
  if (const auto& t = diff.at("tables").at("changed"); !t.as_array().empty()) {
    if (!out.empty()) out += ", ";
    out += names(t) + " changed";
  }
  return out.empty() ? "nothing changed" : out;
}

}  // namespace floodgate::app
