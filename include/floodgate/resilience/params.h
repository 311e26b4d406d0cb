// Parameters of the [resilience] table: the front of the request path's stage chain (the
// process-wide in-flight cap, the host memory guard, the protocol policy). Plain values that
// config/ fills and the stages compile into their runtime form when a generation is built.
// docs/resilience.md describes every key and maps each seed field to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace floodgate::resilience {

// Every stage that can refuse a request has a mode: `shadow` admits what it would refuse,
// counts the would-be refusal (floodgate_shadow_rejections_total{stage,reason}) and marks the
// access log record (would_reject).
enum class Mode { enforce, shadow };

// [resilience.inflight]: one cap on requests in flight for the whole process, checked before
// any other per-request work. 429 inflight_cap with Retry-After when full.
struct InflightParams {
  // "auto" = max(32, 4 x (reactors + the sum of every pool's capacity)), resolved when a
  // generation is built; otherwise `max_inflight` (0 = no cap). FLOODGATE_MAX_INFLIGHT
  // overrides the key with the same syntax.
  bool automatic = true;
  uint32_t max_inflight = 0;
  std::chrono::milliseconds retry_after{1'000};  // Retry-After, whole seconds (>= 1)
  bool exempt_preflight = true;  // OPTIONS with Origin and Access-Control-Request-Method
  std::vector<std::string> exempt_methods{};        // method tokens, exact (case-sensitive)
  std::vector<std::string> exempt_path_prefixes{};  // "/"-prefixed, normal form (config)
  std::vector<std::string> exempt_path_suffixes{"/events"};
  bool exempt_upgrades = true;  // upgrade requests (WebSocket) never hold a slot
  Mode mode = Mode::enforce;
  bool operator==(const InflightParams&) const = default;
};

// [resilience.memory_guard]: writes are refused (503 memory_pressure) while MemAvailable +
// SwapFree is below the floor; reads never are.
struct MemoryGuardParams {
  // "auto" = max(32, 2% of MemTotal) MiB, resolved from the first sample; otherwise
  // `min_available_mib` (0 = disabled). FLOODGATE_MEMORY_GUARD_MIN_MB overrides the key.
  bool automatic = true;
  uint64_t min_available_mib = 0;
  std::string meminfo = "/proc/meminfo";  // the file sampled, once a second at most
  Mode mode = Mode::enforce;
  bool operator==(const MemoryGuardParams&) const = default;
};

// [resilience.protocol]: which requests floodgate forwards at all.
struct ProtocolParams {
  std::vector<std::string> allowed_methods{};       // empty = every valid method token
  std::vector<std::string> denied_path_prefixes{};  // "/"-prefixed, normal form (config): 403
  bool enforce_authority_host_match = true;         // absolute-form authority != Host: 400
  bool allow_connect = false;
  std::vector<uint16_t> connect_allowed_ports{};  // 1..65535, distinct
  // Exact "host:port", canonical: host in lower case, port 1..65535 without leading zeros.
  std::vector<std::string> connect_allowed_authorities{};
  bool allow_0rtt = false;  // validated here; enforced with TLS
  std::vector<std::string> early_data_safe_methods{"GET", "HEAD"};
  Mode mode = Mode::enforce;
  bool operator==(const ProtocolParams&) const = default;
};

struct Params {
  InflightParams inflight;
  MemoryGuardParams memory_guard;
  ProtocolParams protocol;
  bool operator==(const Params&) const = default;
};

}  // namespace floodgate::resilience
