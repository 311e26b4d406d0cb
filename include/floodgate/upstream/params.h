// Parameters of one upstream pool ([[upstreams]] in the configuration). Plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/core/endpoint.h"
#include "floodgate/net/tls_params.h"

namespace floodgate {

enum class Balance { round_robin, least_active, p2c };

struct ServerEntry {
  Endpoint address;     // a host name in `address.host` when `resolved` is not empty
  uint32_t weight = 1;  // 1..1000; only round_robin uses it
  // For a host name: the addresses it resolved to when the file was loaded (or at the last
  // re-resolution, UpstreamParams::resolve_interval), sorted, each a backend of the pool with
  // `weight`. Empty for an IP address.
  std::vector<Endpoint> resolved{};
  bool operator==(const ServerEntry&) const = default;
};

// [upstreams.resilience]: the pool's admission policy (docs/configuration.md). The defaults
// (all zero, retry_after 1s) admit everything at once, exactly as a pool without the table.
struct ResilienceParams {
  uint32_t max_active_requests = 0;     // 0 = unlimited
  uint32_t max_active_per_backend = 0;  // 0 = unlimited
  uint32_t max_pending_requests = 0;    // 0 = no queue: reject at once when the pool is full
  std::chrono::milliseconds pending_timeout{0};  // 0 = bounded by the request's own life
  std::chrono::milliseconds retry_after{1'000};  // sent as Retry-After (whole seconds, >= 1)
  bool operator==(const ResilienceParams&) const = default;
};

// An inclusive range of HTTP status codes, for HealthParams::expect_status.
struct StatusRange {
  int lo = 200;
  int hi = 399;
  bool operator==(const StatusRange&) const = default;
};

// [upstreams.health]: active health checks of the pool's servers (docs/configuration.md).
// Absent (UpstreamParams::health empty): no probes, every server counts as up.
struct HealthParams {
  std::string path = "/healthz";  // request-target of the probe (origin-form, starts with '/')
  std::string host{};             // Host header of the probe; "" = the server's address
  std::chrono::milliseconds interval{2'000};
  std::chrono::milliseconds timeout{1'000};  // whole probe: connect, send, response head
  uint32_t fall = 3;                         // consecutive failures: up -> down
  uint32_t rise = 2;                         // consecutive successes: down -> up
  std::vector<StatusRange> expect_status{StatusRange{200, 399}};
  uint32_t max_response_header_bytes = 8192;  // status line + header section
  bool operator==(const HealthParams&) const = default;
};

struct UpstreamParams {
  std::string name;
  std::vector<ServerEntry> servers;
  Balance balance = Balance::round_robin;
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds response_timeout{30'000};  // request sent -> response head received
  uint32_t keepalive = 32;  // idle pooled connections per backend per reactor
  std::chrono::milliseconds keepalive_timeout{60'000};
  // How often the servers written as host names are resolved again in the background; 0 =
  // only when the file is loaded (start and reload).
  std::chrono::milliseconds resolve_interval{0};
  ResilienceParams resilience;
  std::optional<HealthParams> health;  // absent: no active health checks
  net::TlsClientParams tls;            // [upstreams.tls]: off unless enabled
  bool operator==(const UpstreamParams&) const = default;
};

}  // namespace floodgate
