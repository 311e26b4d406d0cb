// The configuration's generations (main thread only).
//
// A generation is an immutable proxy::Snapshot built off the reactor threads from a validated
// configuration: numbered (1, 2, ...), stamped with the SHA-256 of its source text and the
// time it was loaded. Generations builds them so that pools keep their identity by name: a
// pool name gets a stable id (its metrics and route slot) the first time it appears, and a
// backend address of a pool keeps its Backend object (in-flight count, idle connections) for as
// long as some generation lists it, and a pool name keeps its admission state (proxy::Pool)
// for the process's life; activating a generation sets each of its pools' limits.
//
// It keeps the active generation and the one before it (for rollback), each with the
// configuration it came from (for previews).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "floodgate/config/config.h"
#include "floodgate/core/registry.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::app {

// Lowercase hex SHA-256 of `text` (OpenSSL's libcrypto).
std::string sha256_hex(std::string_view text);

boost::asio::ip::tcp::endpoint to_tcp(const Endpoint& e);

class Generations {
 public:
  struct Entry {
    std::shared_ptr<const proxy::Snapshot> snapshot;
    config::Config config;
  };

  explicit Generations(unsigned reactors) : reactors_(reactors) {}

  // Builds the next generation (not yet active), numbered one past the last activated: a
  // generation built and never activated uses no number. Throws std::runtime_error naming the
  // key when an address cannot be resolved or there are too many pool names.
  Entry build(const config::Config& cfg, std::string_view source);
  // The same, for `cfg` derived from the active generation's file (servers resolved again):
  // it keeps the active file's SHA-256.
  Entry rebuild(const config::Config& cfg);
  // Makes `e` the active generation; the active one becomes the previous.
  void activate(Entry e);
  // Makes the previous generation active again (and the active one the previous). False when
  // there is none.
  bool rollback();

  const Entry& active() const { return active_; }
  // The front stages' process-wide state (the main thread refreshes its memory sample).
  proxy::FrontState& front() { return *front_; }
  proxy::ProtectionState& protection() { return *protection_; }
  proxy::QuotaState& quota_state() { return *quota_state_; }
  const Entry* previous() const { return previous_.snapshot ? &previous_ : nullptr; }
  // Pool names by id, for metrics (grows; ids never change).
  const std::vector<std::string>& pool_names() const { return names_; }

 private:
  uint32_t pool_id(const std::string& name);
  Entry build_hashed(const config::Config& cfg, std::string sha256);
  std::shared_ptr<const proxy::RateLimits> rate_limits(const config::Config& cfg);
  std::shared_ptr<const proxy::Quota> quota(const config::Config& cfg);
  void apply_limits();

  unsigned reactors_;
  uint64_t next_number_ = 1;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  // A peer's identity, (pool name, address as written, which occurrence of the address in the
  // pool), -> its Backend while some generation holds it. The occurrence keeps two entries
  // with one address apart (each its own health state and in-flight count).
  Registry<std::tuple<std::string, std::string, uint32_t>, proxy::Backend, Retention::referenced>
      backends_;
  // A resolved backend address ("ip:port") -> its circuit breaker, while some Backend holds it:
  // every pool and occurrence listing the address shares one breaker (issue 13).
  Registry<std::string, resilience::CircuitBreaker, Retention::referenced> breakers_;
  // (pool name, or "" for the global one; ratio; window in ms; min_retries) -> a retry budget,
  // while some generation holds it: a reload that keeps a budget's ratio, window and floor keeps
  // its counts, one that changes them starts a new budget.
  Registry<std::tuple<std::string, uint32_t, int64_t, uint32_t>, resilience::RetryBudget,
           Retention::referenced>
      budgets_;
  // A scoped rate limit's signature (RateLimits::signature) -> its buckets and counts, while
  // some generation holds the rule: a reload keeping the rule keeps them, a changed rule starts
  // afresh.
  Registry<std::string, resilience::RateRule, Retention::referenced> rate_rules_;
  // A quota policy's name -> its decision counts, while some generation holds the policy.
  Registry<std::string, proxy::QuotaPolicyCounts, Retention::referenced> quota_counts_;
  // The quota's tables and Redis in-flight bound, for the process's life (made on first use).
  std::shared_ptr<proxy::QuotaState> quota_state_ = std::make_shared<proxy::QuotaState>(reactors_);
  // Pool name -> its admission state. Kept for the process's life, like the name's id: a pool
  // removed and added back finds its counters (and any request still on it) where it left them.
  Registry<std::string, proxy::Pool, Retention::process> pools_;
  // The front stages' process-wide state: the in-flight cap's count, the memory sample.
  std::shared_ptr<proxy::FrontState> front_ = std::make_shared<proxy::FrontState>();
  // The local protection's: the adaptive ceiling and its controller, brownout, the global cap.
  std::shared_ptr<proxy::ProtectionState> protection_ =
      std::make_shared<proxy::ProtectionState>(reactors_);
  Entry active_;
  Entry previous_;
};

}  // namespace floodgate::app
