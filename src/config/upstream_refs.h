// The [resilience] keys that name [[upstreams]] entries: the lists of names
// (hedging.route_allowlist, brownout.core_routes) and the tables keyed by name
// (retry_budget.per_route_ratio_percent, route_queue.caps). One reader for each shape, so that
// every such key reports an undefined name the same way: at the name, with a "did you mean"
// for a near miss and the two ways to fix it. Main thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "table_reader.h"

namespace floodgate::config::detail {

// What [resilience] may refer to in the [[upstreams]] entries, which are read before it
// whatever the order of the file.
struct UpstreamRefs {
  // The name of every [[upstreams]] entry, valid or not: a name with an error of its own is not
  // reported a second time as undefined (as for a route's upstream).
  std::vector<std::string> names;
  struct Timeout {
    std::string name;
    std::chrono::milliseconds response_timeout;
  };
  // The response_timeout of every upstream whose name and response_timeout are both valid, in
  // file order.
  std::vector<Timeout> response_timeouts;
};

// `name` as a TOML key: bare when it can be, quoted when it cannot (an upstream name may hold a
// '.', which a bare key would read as a dotted key). For the key paths of messages.
std::string toml_key(std::string_view name);

// An array of distinct names of [[upstreams]] entries; assigned only when every one is valid.
bool read_upstream_names(TableReader& r, std::string_view key, std::vector<std::string>& out,
                         const UpstreamRefs& u);

// A table keyed by names of [[upstreams]] entries, each an integer of [lo, hi]; e.g.
// per_route_ratio_percent = { app = 20 }. What the messages say about it.
struct UpstreamTableKey {
  std::string_view key;     // "per_route_ratio_percent"
  std::string_view values;  // "percentages": "a table of upstream names and percentages"
  int64_t lo;
  int64_t hi;
  int64_t example;  // a value for the examples of the messages
};
using UpstreamTable = std::map<std::string, uint32_t, std::less<>>;

// Assigned only when every entry is valid. An undefined name is reported at its key, a bad
// value at the value; an unquoted name with a '.' (a dotted key) gets told to quote it.
bool read_upstream_table(TableReader& r, const UpstreamTableKey& k, UpstreamTable& out,
                         const UpstreamRefs& u);

}  // namespace floodgate::config::detail
