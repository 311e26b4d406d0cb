// Backends by name: a server written as a host name ("app.internal:9000") becomes one backend
// per address the name resolves to (docs/configuration.md, "Backends by name"). Resolution
// blocks (getaddrinfo: /etc/hosts, then DNS, bounded by resolv.conf's timeout and attempts), so
// it runs on the main thread when a file is loaded and on the re-resolution worker
// (src/app/name_watcher.h), never on a reactor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/core/endpoint.h"

namespace floodgate::config {

// The most backends one name becomes; the rest (in sorted order) are left out, with a warning
// at load and in the log at re-resolution. It bounds the labels a name adds to the metrics.
inline constexpr std::size_t kMaxAddressesPerName = 64;

struct Resolution {
  std::vector<Endpoint> addresses;  // sorted by text, no duplicates; empty exactly on error
  std::string error;                // why the name did not resolve (the resolver's words)
  std::size_t left_out = 0;         // addresses beyond kMaxAddressesPerName
};

// Every IPv4 and IPv6 address of `name`, each as an Endpoint with `port` and the text
// "10.0.0.5:9000" or "[2001:db8::5]:9000" (the backend's label).
Resolution resolve_server(const std::string& name, uint16_t port);

// The addresses as a list for messages: "10.0.0.5:9000, 10.0.0.6:9000".
std::string address_list(const std::vector<Endpoint>& addresses);

}  // namespace floodgate::config
