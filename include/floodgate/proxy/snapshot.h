// The immutable, fully resolved configuration the data plane runs on.
//
// Built on the main thread from a validated config, then shared read-only by every reactor
// (std::shared_ptr<const Snapshot>): nothing in it is parsed or looked up by string on the
// request path. The one mutable part is each Backend's in-flight count, an atomic that all
// reactors share on purpose (least_active and later per-backend caps hold process-wide).
//
// Upstream and Backend objects are long-lived: a later reload keeps them by name so their
// counters and pooled connections carry over (see docs/architecture.md).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/http/parser.h"
#include "floodgate/proxy/params.h"
#include "floodgate/routing/route_table.h"
#include "floodgate/upstream/backend_load.h"
#include "floodgate/upstream/params.h"

namespace floodgate::proxy {

struct Backend {
  Endpoint address;                         // as configured; `peer` label in metrics
  boost::asio::ip::tcp::endpoint endpoint;  // resolved at build time
  uint32_t weight = 1;
  BackendLoad load;  // process-wide in-flight requests on this backend
};

struct Upstream {
  uint32_t id = 0;  // index in Snapshot::upstreams; metrics slot id + 1
  UpstreamParams params;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<uint32_t> weights;  // backends[i]->weight, for the balancers
};

struct Snapshot {
  ServerParams server;
  LogParams log;
  http::HeadLimits limits;
  std::vector<std::shared_ptr<Upstream>> upstreams;
  RouteTable routes;
  std::vector<std::string> upstream_names;  // metrics labels, index = upstream id
};

}  // namespace floodgate::proxy
