// Builds the data plane's immutable Snapshot from a validated configuration (main thread).
#pragma once

#include <memory>

#include "floodgate/config/config.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::app {

// Resolves addresses and pre-computes the route table. Throws std::runtime_error naming the
// key when an address cannot be resolved.
std::shared_ptr<const proxy::Snapshot> build_snapshot(const config::Config& cfg);

boost::asio::ip::tcp::endpoint to_tcp(const Endpoint& e);

}  // namespace floodgate::app
