// Process: validating and activating a configuration, listeners, retirement (process.h).
#include "process.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "config_diff.h"

namespace floodgate::app {

std::vector<NameWatcher::Name> watched_names(const config::Config& c) {
  std::vector<NameWatcher::Name> out;
  for (const UpstreamParams& u : c.upstreams) {
    if (u.resolve_interval.count() == 0) continue;
    for (const ServerEntry& s : u.servers) {
      if (s.resolved.empty()) continue;
      NameWatcher::Name n{u.name, s.address, u.resolve_interval};
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    }
  }
  return out;
}

Process::Outcome Process::apply(const std::string& source, const std::string& origin, bool activate,
                                std::function<void()> served) {
  Outcome out;
  out.validation = config::load_string(source, origin);
  if (!out.validation.ok()) return out;
  restart_only_changes(*out.validation.config, origin, out.validation);
  if (!out.validation.ok() || !activate) return out;
  Generations::Entry next;
  try {
    next = gens_.build(*out.validation.config, source);
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  if (!apply_listeners(next.config, out.error)) return out;
  publish(std::move(next), std::move(served));
  out.generation = gens_.active().snapshot->generation;
  return out;
}

void Process::restart_only_changes(const config::Config& next, const std::string& origin,
                                   config::LoadResult& result) {
  bool refused = false;
  auto refuse = [&](std::string path, std::string message) {
    result.diagnostics.push_back(config::Diagnostic{config::Diagnostic::Severity::error, origin, 0,
                                                    0, std::move(path), std::move(message)});
    refused = true;
  };
  const config::Config& now = start_;
  if (resolved_workers(next.server) != resolved_workers(now.server)) {
    refuse("server.workers", "the number of reactors cannot change while floodgate runs (" +
                                 std::to_string(resolved_workers(now.server)) +
                                 "); restart floodgate to apply it, or set it back");
  }
  if (next.server.io != now.server.io) {
    refuse("server.io",
           "the reactors' event loops are built at start; restart floodgate to "
           "change the kernel interface they use, or set it back");
  }
  if (next.admin.listen.text != now.admin.listen.text ||
      next.admin.socket_mode != now.admin.socket_mode) {
    refuse("admin.listen", "the admin listener cannot move while floodgate runs (it is on " +
                               now.admin.listen.text + "); restart floodgate to apply it");
  }
  if (next.log.access_log != now.log.access_log ||
      next.log.access_log_format != now.log.access_log_format) {
    refuse("log.access_log",
           "the access log's destination and format are fixed at start; "
           "restart floodgate to change them (SIGUSR1 reopens the file)");
  }
  if (next.server.max_headers > now.server.max_headers ||
      next.server.max_uri_bytes + next.server.max_header_bytes >
          now.server.max_uri_bytes + now.server.max_header_bytes) {
    refuse("server.max_header_bytes",
           "request buffers were sized at start for max_headers = " +
               std::to_string(now.server.max_headers) + " and max_uri_bytes + max_header_bytes = " +
               std::to_string(now.server.max_uri_bytes + now.server.max_header_bytes) +
               "; a reload may lower these limits, raising them needs a restart");
  }
  if (refused) result.config.reset();  // `next` refers into it: only now
}

bool Process::apply_listeners(const config::Config& next, std::string& error) {
  const auto& now = gens_.active().config.server.listen;
  auto listed = [](const std::vector<Endpoint>& list, const Endpoint& e) {
    return std::any_of(list.begin(), list.end(),
                       [&](const Endpoint& x) { return x.text == e.text; });
  };
  std::vector<std::pair<std::string, std::vector<int>>> opened;
  for (const Endpoint& e : next.server.listen) {
    if (listed(now, e)) continue;
    std::vector<int> fds;
    try {
      auto at = to_tcp(e);
      proxy::Reactor::ensure_unused(at);
      for (std::size_t i = 0; i < reactors_.size(); ++i) {
        boost::asio::ip::tcp::endpoint bound;
        fds.push_back(proxy::Reactor::open_listener(at, bound));
        at = bound;
      }
    } catch (const std::exception& ex) {
      for (int fd : fds) ::close(fd);
      for (auto& [key, list] : opened) {
        for (int fd : list) ::close(fd);
      }
      error = "server.listen: cannot listen on " + e.text + ": " + reason_of(ex);
      return false;
    }
    opened.emplace_back(e.text, std::move(fds));
  }
  for (auto& [key, fds] : opened) {
    for (std::size_t i = 0; i < reactors_.size(); ++i) reactors_[i]->add_listener(fds[i], key);
    spdlog::info("listening on {}", key);
  }
  for (const Endpoint& e : now) {
    if (listed(next.server.listen, e)) continue;
    for (auto& r : reactors_) r->remove_listener(e.text);
    spdlog::info("no longer listening on {} (established connections carry on)", e.text);
  }
  return true;
}

void Process::publish(Generations::Entry next, std::function<void()> served, bool reload) {
  std::shared_ptr<const proxy::Snapshot> old = gens_.active().snapshot;
  const auto snap = next.snapshot;
  const std::string changes = summarize(config_diff(gens_.active().config, next.config));
  gens_.activate(std::move(next));
  install_everywhere(snap, std::move(served));
  if (reload) {
    ++reloads_ok_;
    last_success_ = std::chrono::system_clock::now();
  }
  track_retirement(old);
  spdlog::info("generation {} active ({}): {}; generation {} retiring", snap->generation,
               snap->sha256, changes, old->generation);
}

void Process::install_everywhere(const std::shared_ptr<const proxy::Snapshot>& snap,
                                 std::function<void()> served) {
  spdlog::set_level(to_spdlog(snap->log.level));
  health_.update(snap->generation, health_targets(*snap));
  // The active generation is `snap` (publish and rollback activate before installing).
  log_front(*snap, gens_.active().config);
  sampler_.set_params(gens_.active().config.resilience.memory_guard);
  if (watchdog_) watchdog_->configure(gens_.active().config.resilience.watchdog, *snap);
  if (!draining_) names_.watch(watched_names(gens_.active().config));
  const uint64_t seq = ++publish_seq_;
  auto left = std::make_shared<std::size_t>(reactors_.size());
  auto on_main = [this, snap, seq, left, served = std::move(served)] {
    if (--*left != 0) return;
    if (seq == publish_seq_) serving_ = snap;  // a later publish wins
    if (served) served();
  };
  for (auto& r : reactors_) {
    r->activate(snap, [this, on_main] { asio::post(io_, on_main); });
  }
}

void Process::track_retirement(const std::shared_ptr<const proxy::Snapshot>& old) {
  retiring_.push_back(Retiring{
      old, old->generation,
      std::chrono::steady_clock::now() + gens_.active().snapshot->server.retirement_grace});
  if (retiring_.size() == 1) poll_retirement();
}

void Process::poll_retirement() {
  retire_timer_.expires_after(std::chrono::milliseconds(100));
  retire_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(retiring_, [&](const Retiring& r) {
      // The previous generation stays in memory for rollback; what matters is whether any
      // reactor still runs a request on it.
      const auto s = r.snapshot.lock();
      if (s == gens_.active().snapshot) return true;  // rolled back to: not retiring any more
      if (!s || s->reactor_holds.load(std::memory_order_acquire) == 0) {
        spdlog::info("generation {} retired", r.generation);
        return true;
      }
      if (now >= r.deadline) {
        spdlog::warn(
            "generation {}: retirement_grace passed; ending its requests on removed "
            "upstreams",
            r.generation);
        for (auto& reactor : reactors_) reactor->retire(r.generation);
        return true;
      }
      return false;
    });
    if (!retiring_.empty()) poll_retirement();
  });
}

bool Process::read_config_file(std::string& text) {
  std::string why;
  if (config::read_file(path_, text, why)) return true;
  text = why;
  return false;
}

Process::Outcome Process::reload(const std::string& source, const std::string& origin,
                                 std::string_view trigger,
                                 const std::function<void(uint64_t)>& served) {
  notifier_.reloading();
  Outcome o = apply(source, origin, true, [this, served] {
    const uint64_t g = serving_->generation;
    notifier_.reloaded(g, true, "");
    if (served) served(g);
  });
  if (o.generation != 0) {
    for (const auto& d : o.validation.diagnostics) spdlog::warn("{}", config::format(d));
    return o;
  }
  ++reloads_failed_;
  spdlog::error("reload ({}) refused; generation {} keeps serving", trigger,
                gens_.active().snapshot->generation);
  for (const auto& d : o.validation.diagnostics) spdlog::error("{}", config::format(d));
  if (!o.error.empty()) spdlog::error("{}: {}", origin, o.error);
  notifier_.reloaded(gens_.active().snapshot->generation, false,
                     o.error.empty() ? "invalid configuration" : o.error);
  return o;
}

void Process::on_resolved(const NameWatcher::Name& name, config::Resolution r) {
  if (draining_) return;
  const config::Config& active = gens_.active().config;
  const auto pool = std::find_if(active.upstreams.begin(), active.upstreams.end(),
                                 [&](const UpstreamParams& u) { return u.name == name.upstream; });
  if (pool == active.upstreams.end()) return;  // removed by a reload meanwhile
  const auto same_server = [&](const ServerEntry& s) {
    return !s.resolved.empty() && s.address.text == name.server.text;
  };
  const auto server = std::find_if(pool->servers.begin(), pool->servers.end(), same_server);
  if (server == pool->servers.end()) return;
  ResolutionCounts& counts = resolutions_[name.upstream];
  const std::string was = config::address_list(server->resolved);
  if (r.addresses.empty()) {
    ++counts.failed;
    spdlog::warn("upstream \"{}\": cannot resolve {} again ({}); keeping {}", name.upstream,
                 name.server.text, r.error, was);
    return;
  }
  if (r.addresses == server->resolved) {
    ++counts.unchanged;
    return;
  }
  config::Config next = active;
  auto& servers = next.upstreams[static_cast<std::size_t>(pool - active.upstreams.begin())].servers;
  for (ServerEntry& s : servers) {
    if (same_server(s)) s.resolved = r.addresses;
  }
  Generations::Entry entry;
  try {
    entry = gens_.rebuild(next);
  } catch (const std::exception& e) {
    ++counts.failed;
    spdlog::error("upstream \"{}\": {} resolves to {}, but the pool cannot use it ({}); keeping {}",
                  name.upstream, name.server.text, config::address_list(r.addresses), e.what(),
                  was);
    return;
  }
  ++counts.changed;
  spdlog::info("upstream \"{}\": {} now resolves to {} (was {}){}", name.upstream, name.server.text,
               config::address_list(r.addresses), was,
               r.left_out > 0 ? fmt::format("; {} more left out (at most {} per name)", r.left_out,
                                            config::kMaxAddressesPerName)
                              : std::string());
  publish(std::move(entry), nullptr, false);
}

}  // namespace floodgate::app
