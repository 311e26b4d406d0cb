#include "generations.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <span>
#include <stdexcept>
#include <string_view>

#include "floodgate/http/rewrite.h"
#include "floodgate/net/tls.h"
#include "floodgate/proxy/pool_stage.h"

namespace floodgate::app {

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 of the configuration failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::size_t{2} * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

namespace {

// A resolved address as host:port, the breakers' key.
std::string endpoint_text(const boost::asio::ip::tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

// The host a server was written with, which TLS to it sends and verifies: "localhost" for
// "localhost:8443" (the address it connects to is 127.0.0.1), "::1" for "[::1]:8443".
std::string written_host(const Endpoint& address) {
  const std::string_view text = address.text;
  if (text.starts_with('[')) {
    const std::size_t close = text.find(']');
    if (close != std::string_view::npos) return std::string(text.substr(1, close - 1));
  }
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return address.host;
  std::string host(text.substr(0, colon));
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return host;
}

}  // namespace

boost::asio::ip::tcp::endpoint to_tcp(const Endpoint& e) {
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(e.host, ec);
  if (ec) throw std::runtime_error("'" + e.text + "' is not an IP address");
  return {addr, e.port};
}

uint32_t Generations::pool_id(const std::string& name) {
  if (const auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (names_.size() >= proxy::kMaxPools) {
    throw std::runtime_error("upstreams: more than " + std::to_string(proxy::kMaxPools) +
                             " distinct upstream names since floodgate started; restart it to "
                             "reuse the slots of removed upstreams");
  }
  const auto id = static_cast<uint32_t>(names_.size());
  ids_.emplace(name, id);
  names_.push_back(name);
  return id;
}

Generations::Entry Generations::build(const config::Config& cfg, std::string_view source) {
  return build_hashed(cfg, sha256_hex(source));
}

Generations::Entry Generations::rebuild(const config::Config& cfg) {
  return build_hashed(cfg, active_.snapshot->sha256);
}

Generations::Entry Generations::build_hashed(const config::Config& cfg, std::string sha256) {
  auto snap = std::make_shared<proxy::Snapshot>();
  snap->generation = next_number_;
  snap->sha256 = std::move(sha256);
  snap->loaded_at = std::chrono::system_clock::now();
  snap->server = cfg.server;
  if (!cfg.server.tls.empty()) {
    net::TlsServerConfig::Error error;
    snap->tls =
        net::TlsServerConfig::build(cfg.server.tls, error, cfg.resilience.protocol.allow_0rtt);
    if (!snap->tls) throw std::runtime_error(error.text());  // a file changed since the check
  }
  snap->log = cfg.log;
  snap->limits = http::HeadLimits{cfg.server.max_uri_bytes, cfg.server.max_header_bytes,
                                  cfg.server.max_headers};
  snap->failure = proxy::FailurePolicy::of(cfg.resilience);
  const resilience::CircuitLimits snap_limits = snap->failure.limits;
  const resilience::RetryBudgetParams& budget = cfg.resilience.retry_budget;
  const auto budget_for = [&](const std::string& pool, uint32_t ratio) {
    return budgets_.get({pool, ratio, budget.window.count(), budget.min_retries}, [&] {
      return std::make_shared<resilience::RetryBudget>(ratio, budget.window, budget.min_retries);
    });
  };
  if (budget.enabled) snap->failure.global_budget = budget_for("", budget.ratio_percent);
  const resilience::HedgingParams& hedging = cfg.resilience.hedging;
  // Ids first, so that a failure leaves nothing half registered but names (harmless).
  std::vector<uint32_t> ids;
  for (const UpstreamParams& p : cfg.upstreams) ids.push_back(pool_id(p.name));
  std::random_device rd;
  for (std::size_t i = 0; i < cfg.upstreams.size(); ++i) {
    auto up = std::make_shared<proxy::Upstream>();
    up->id = ids[i];
    up->params = cfg.upstreams[i];
    if (up->params.tls.enabled) {
      net::TlsClientConfig::Error error;
      up->tls = net::TlsClientConfig::build(up->params.tls, error);
      if (!up->tls) {  // a file changed since the check
        throw std::runtime_error("upstreams[" + std::to_string(i) + "].tls." + error.key + ": " +
                                 error.message);
      }
    }
    std::map<std::string, uint32_t> seen;  // address -> occurrences so far in this pool
    for (std::size_t s = 0; s < up->params.servers.size(); ++s) {
      const ServerEntry& entry = up->params.servers[s];
      // A server written as a host name is one backend per address it resolved to, each
      // labelled by its address: the same backend (health, circuit, pooled connections) when
      // a later resolution still returns it.
      const std::span<const Endpoint> addresses = entry.resolved.empty()
                                                      ? std::span<const Endpoint>(&entry.address, 1)
                                                      : std::span<const Endpoint>(entry.resolved);
      for (const Endpoint& address : addresses) {
        std::shared_ptr<proxy::Backend> b =
            backends_.get({up->params.name, address.text, seen[address.text]++}, [&] {
              boost::asio::ip::tcp::endpoint endpoint;
              try {
                endpoint = to_tcp(address);
              } catch (const std::exception& e) {
                throw std::runtime_error("upstreams[" + std::to_string(i) + "].servers[" +
                                         std::to_string(s) + "]: " + e.what());
              }
              auto breaker = breakers_.get(endpoint_text(endpoint), [&] {
                return std::make_shared<resilience::CircuitBreaker>(snap_limits);
              });
              return std::make_shared<proxy::Backend>(address, endpoint, reactors_,
                                                      std::move(breaker));
            });
        up->weights.push_back(entry.weight);
        up->hosts.push_back(written_host(entry.address));
        up->backends.push_back(std::move(b));
      }
    }
    up->pool = pools_.get(up->params.name, [] { return std::make_shared<proxy::Pool>(); });
    up->apply_policy();
    if (budget.enabled) {
      up->retry_budget =
          budget_for(up->params.name, resilience::retry_ratio_percent(budget, up->params.name));
    }
    up->hedge = hedging.enabled &&
                (hedging.route_allowlist.empty() ||
                 std::find(hedging.route_allowlist.begin(), hedging.route_allowlist.end(),
                           up->params.name) != hedging.route_allowlist.end());
    up->per_reactor = std::make_unique<proxy::Upstream::PerReactor[]>(reactors_);
    for (unsigned r = 0; r < reactors_; ++r) {
      const uint64_t seed = (uint64_t{rd()} << 32) ^ rd();
      up->per_reactor[r].balancer.emplace(up->params.balance, up->weights, seed);
    }
    snap->upstreams.push_back(std::move(up));
  }
  snap->upstream_names = names_;
  snap->by_id.assign(names_.size(), nullptr);
  for (const auto& up : snap->upstreams) snap->by_id[up->id] = up.get();
  std::vector<uint32_t> route_upstreams;
  for (const RouteParams& r : cfg.routes) {
    route_upstreams.push_back(ids_.at(r.upstream));  // validated: the name exists
  }
  snap->routes = RouteTable::build(cfg.routes, route_upstreams);
  std::vector<uint32_t> capacities;
  for (const UpstreamParams& p : cfg.upstreams) capacities.push_back(resilience::pool_capacity(p));
  snap->max_inflight =
      resilience::resolve_max_inflight(cfg.resilience.inflight, reactors_, capacities);
  snap->inflight_shadow = cfg.resilience.inflight.mode == resilience::Mode::shadow;
  snap->protection = proxy::LocalProtection::of(cfg.resilience, snap->max_inflight, protection_);
  for (const auto& up : snap->upstreams) {
    up->route_cap = snap->protection.route_cap(up->params.name);
  }
  snap->rate_limits = rate_limits(cfg);
  snap->quota = quota(cfg);
  snap->route_chains.reserve(cfg.routes.size());
  for (std::size_t i = 0; i < cfg.routes.size(); ++i) {
    snap->route_chains.push_back(proxy::build_route_chain(*snap->by_id[route_upstreams[i]],
                                                          snap->protection, snap->rate_limits,
                                                          snap->quota, cfg.routes[i]));
  }
  snap->front_state = front_;
  snap->front = proxy::build_front_chain(cfg.resilience, snap->max_inflight, front_);
  backends_.sweep();  // forget backends no generation holds any more
  breakers_.sweep();
  budgets_.sweep();
  rate_rules_.sweep();
  quota_counts_.sweep();
  return Entry{std::move(snap), cfg};
}

// Each rule's buckets: the ones of the rule with the same signature (name, scope, key, rates,
// max_keys) in a generation still held, else new ones (a table of the new size).
std::shared_ptr<const proxy::RateLimits> Generations::rate_limits(const config::Config& cfg) {
  auto limits = std::make_shared<proxy::RateLimits>();
  limits->trusted_proxies = cfg.server.trusted_proxies;
  for (const resilience::ScopedRateLimitParams& p : cfg.resilience.scoped_rate_limits) {
    auto state = rate_rules_.get(proxy::RateLimits::signature(p), [this, &p] {
      return std::make_shared<resilience::RateRule>(reactors_, p.max_keys);
    });
    limits->rules.emplace_back(p, std::move(state));
  }
  return limits;
}

// The quota of a generation: each policy's counts kept by its name across reloads; the tables
// and the Redis in-flight bound are the process's (QuotaState).
std::shared_ptr<const proxy::Quota> Generations::quota(const config::Config& cfg) {
  const resilience::QuotaParams& q = cfg.resilience.quota;
  if (!q.enabled) return nullptr;
  std::vector<std::shared_ptr<proxy::QuotaPolicyCounts>> counts;
  for (const resilience::QuotaPolicyParams& p : q.policies) {
    counts.push_back(quota_counts_.get(
        p.name, [this] { return std::make_shared<proxy::QuotaPolicyCounts>(reactors_); }));
  }
  return proxy::build_quota(q, cfg.server.trusted_proxies, quota_state_, std::move(counts));
}

void Generations::activate(Entry e) {
  // The number is used up only here: a generation built and then refused (a listener that
  // cannot be bound) leaves the next one to take it.
  next_number_ = std::max(next_number_, e.snapshot->generation + 1);
  previous_ = std::move(active_);
  active_ = std::move(e);
  apply_limits();
}

bool Generations::rollback() {
  if (!previous_.snapshot) return false;
  std::swap(active_, previous_);
  apply_limits();
  return true;
}

// Admission is an entry control: the new limits apply to every request from now on, whatever
// generation it started on (a lowered limit lets active fall as requests end; a raised one
// grants parked waiters at once, on this thread, which posts them to their reactors).
void Generations::apply_limits() {
  const proxy::Snapshot& active = *active_.snapshot;
  for (const auto& up : active.upstreams) {
    up->pool->admission.set_limits(up->policy.limits);
    up->pool->route_cap.set_limits({.max_active = up->route_cap});
    for (const auto& b : up->backends) b->breaker->set_limits(active.failure.limits);
  }
  front_->inflight.set_limit(active_.snapshot->max_inflight);
  const proxy::LocalProtection& protection = active.protection;
  protection_->global_cap.set_limits({.max_active = protection.global_cap});
  protection_->adaptive.configure(protection.aimd, protection.window);
}

}  // namespace floodgate::app
