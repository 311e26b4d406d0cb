// Rules that relate keys of different tables (the admin listener against the data-plane
// listeners and admin.token; one route against the others; a pool's pending_timeout against
// server.retirement_grace). They run once every table has been read, over the values that were
// valid, and add their errors and warnings to the same Collector, so that one pass still
// reports everything. Main thread only.
#pragma once

#include <optional>
#include <vector>

#include "collector.h"
#include "floodgate/config/config.h"

namespace floodgate::config::detail {

// What the table readers saw, beyond the values in Config: where things were written and
// whether they were valid (an invalid value keeps its default in Config, which a rule must not
// mistake for what the operator wrote).
struct DocumentMarks {
  bool server_listen_ok = true;
  bool admin_listen_ok = true;
  Position server_listen_at;
  std::optional<Position> admin_listen_at;
  bool token_given = false;  // admin.token is written, valid or not
  bool retirement_grace_ok = true;
  Position retirement_grace_at;  // of the key, or of [server] when it is not written
  bool header_timeout_ok = true;
  bool workers_ok = true;
  bool drain_timeout_ok = true;
  bool trusted_proxies_ok = true;

  struct Upstream {
    size_t index = 0;                            // i of upstreams[i] in the file
    std::optional<Position> pending_timeout_at;  // when resilience.pending_timeout is valid
    std::optional<Position> max_active_at;       // when resilience.max_active_requests is set
    bool response_timeout_ok = true;
    bool capacity_ok = true;  // servers, keepalive, max_active_requests: what "auto" counts
  };
  std::vector<Upstream> upstreams;  // parallel to Config::upstreams, including the ones with errors

  struct Route {
    size_t index = 0;  // i of routes[i] in the file
    Position at;       // of its [[routes]] header
    bool host_and_prefix_ok = true;
  };
  std::vector<Route> routes;  // parallel to Config::routes, including the ones with errors
};

// Records the errors and warnings of every cross-table rule (see docs/configuration.md).
void check_document(const Config& c, const DocumentMarks& marks, Collector& out);

}  // namespace floodgate::config::detail
