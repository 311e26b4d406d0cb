#include "snapshot_builder.h"

#include <stdexcept>

namespace floodgate::app {

boost::asio::ip::tcp::endpoint to_tcp(const Endpoint& e) {
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(e.host, ec);
  if (ec) throw std::runtime_error("'" + e.text + "' is not an IP address");
  return {addr, e.port};
}

std::shared_ptr<const proxy::Snapshot> build_snapshot(const config::Config& cfg) {
  auto snap = std::make_shared<proxy::Snapshot>();
  snap->server = cfg.server;
  snap->log = cfg.log;
  snap->limits = http::HeadLimits{cfg.server.max_uri_bytes, cfg.server.max_header_bytes,
                                  cfg.server.max_headers};
  for (std::size_t i = 0; i < cfg.upstreams.size(); ++i) {
    auto up = std::make_shared<proxy::Upstream>();
    up->id = static_cast<uint32_t>(i);
    up->params = cfg.upstreams[i];
    for (std::size_t s = 0; s < up->params.servers.size(); ++s) {
      const ServerEntry& entry = up->params.servers[s];
      auto b = std::make_unique<proxy::Backend>();
      b->address = entry.address;
      try {
        b->endpoint = to_tcp(entry.address);
      } catch (const std::exception& e) {
        throw std::runtime_error("upstreams[" + std::to_string(i) + "].servers[" +
                                 std::to_string(s) + "]: " + e.what());
      }
      b->weight = entry.weight;
      up->weights.push_back(entry.weight);
      up->backends.push_back(std::move(b));
    }
    snap->upstream_names.push_back(up->params.name);
    snap->upstreams.push_back(std::move(up));
  }
  std::vector<uint32_t> route_upstreams;
  for (const RouteParams& r : cfg.routes) {
    for (const auto& up : snap->upstreams) {
      if (up->params.name == r.upstream) route_upstreams.push_back(up->id);
    }
  }
  if (route_upstreams.size() != cfg.routes.size()) {
    throw std::logic_error("a route names an unknown upstream after validation");
  }
  snap->routes = RouteTable::build(cfg.routes, route_upstreams);
  return snap;
}

}  // namespace floodgate::app
