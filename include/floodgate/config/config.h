// The resolved configuration and its loader. config/ is the only component that includes
// toml++: it maps the TOML document onto the Params structs the other components own.
//
// Loading never throws: it returns either a Config or the complete list of problems, each with
// its file position and key path, collected in one pass. Called on the main thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/proxy/params.h"
#include "floodgate/resilience/params.h"
#include "floodgate/routing/params.h"
#include "floodgate/upstream/params.h"

namespace floodgate::config {

struct Config {
  ServerParams server;
  AdminParams admin;
  LogParams log;
  std::vector<UpstreamParams> upstreams;
  std::vector<RouteParams> routes;
  resilience::Params resilience;  // [resilience]
  bool operator==(const Config&) const = default;
};

struct Diagnostic {
  // note: not a problem but a fact `floodgate check` states about what the file means, at the
  // key it concerns (what a rate limit counts a request without its key as).
  enum class Severity { error, warning, note };
  Severity severity = Severity::error;
  std::string file;
  int line = 0;         // 1-based; 0 when the problem has no position (e.g. unreadable file)
  int column = 0;       // 1-based
  std::string path;     // key path, e.g. "upstreams[0].balance"
  std::string message;  // says what is wrong and how to fix it
};

struct LoadResult {
  std::optional<Config> config;         // set when there are no errors (warnings allowed)
  std::vector<Diagnostic> diagnostics;  // errors and warnings, in source order
  // Notes (Severity::note), in source order: printed by `floodgate check` only, never at start-up
  // or on a reload, where they would repeat what the operator wrote on every load.
  std::vector<Diagnostic> notes;

  bool ok() const { return config.has_value(); }
};

// The environment as the loader sees it: a variable's value, or nullopt when it is not set.
// The loader reads FLOODGATE_MAX_INFLIGHT and FLOODGATE_MEMORY_GUARD_MIN_MB through it, which
// override resilience.inflight.max_inflight and resilience.memory_guard.min_available
// (docs/resilience.md). An invalid value is an error without a position, so start-up, reload
// and `floodgate check` all refuse it.
using Environment = std::function<std::optional<std::string>(std::string_view name)>;

// The process's own environment (getenv). A running floodgate keeps the environment it was
// started with, so a reload applies the same overrides again.
std::optional<std::string> process_environment(std::string_view name);

// Reads a configuration file whole (at most 16 MiB); false with the reason in `why`.
bool read_file(const std::string& path, std::string& text, std::string& why);

// Reads and validates a configuration file.
LoadResult load_file(const std::string& path, const Environment& env = process_environment);

// Validates configuration text; `source_name` stands for the file name in diagnostics.
LoadResult load_string(std::string_view toml, std::string_view source_name,
                       const Environment& env = process_environment);

// "FILE:LINE:COLUMN: error: KEY.PATH: message" (the format of `floodgate check`; "warning:" and
// "note:" for the others).
std::string format(const Diagnostic& d);

// The result as one JSON object (`floodgate check --format json`, POST /config/validate):
// {"valid": bool, "errors": [...], "warnings": [...]}, each item {"line": int, "column": int,
// "path": "upstreams[0].balance", "message": "..."} in source order; line and column are 0 and
// path is "" when the problem has none. With `notes` (check's), and when the result has any, a
// "notes" array of the same items follows. The file name is left out: the caller knows it.
// Bytes that are not UTF-8 (say, from a file name in a message) become U+FFFD, so the output is
// always valid JSON. No trailing newline.
std::string to_json(const LoadResult& result, bool notes = false);

}  // namespace floodgate::config
