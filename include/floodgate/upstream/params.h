// Parameters of one upstream pool ([[upstreams]] in the configuration). Plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/core/endpoint.h"

namespace floodgate {

enum class Balance { round_robin, least_active, p2c };

struct ServerEntry {
  Endpoint address;
  uint32_t weight = 1;  // 1..1000; only round_robin uses it
};

struct UpstreamParams {
  std::string name;
  std::vector<ServerEntry> servers;
  Balance balance = Balance::round_robin;
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds response_timeout{30'000};  // request sent -> response head received
  uint32_t keepalive = 32;  // idle pooled connections per backend per reactor
  std::chrono::milliseconds keepalive_timeout{60'000};
};

}  // namespace floodgate
