// The configuration schema: which tables and keys exist, their types and ranges, and how they
// map onto the Params structs. Adding a key means adding one read here (and a line in
// docs/configuration.md). Main thread only.
#pragma once

#include <toml++/toml.h>

#include "collector.h"
#include "floodgate/config/config.h"

namespace floodgate::config::detail {

// Maps a parsed document onto a Config, then applies the overrides `env` holds, recording
// every problem in `out`. The result is only meaningful when `out` holds no errors afterwards.
Config map_document(const toml::table& root, const Environment& env, Collector& out);

}  // namespace floodgate::config::detail
