// Helpers shared by the config tests: load a document and look at its diagnostics as the
// operator would see them (format() lines), so each test can assert the exact text.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "floodgate/config/config.h"

namespace floodgate::config::testing {

// The smallest valid document: one upstream and one route, on lines 1..6.
inline constexpr std::string_view kMinimal = R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]

[[routes]]
upstream = "app"
)";

// An environment with no variable set, so that no test depends on the one it runs in.
inline std::optional<std::string> no_environment(std::string_view) {
  return std::nullopt;
}

inline LoadResult load(std::string_view text, const Environment& env = no_environment) {
  return load_string(text, "test.toml", env);
}

// `head` (e.g. a [server] section starting on line 1) followed by kMinimal.
inline LoadResult load_with(std::string_view head) {
  return load(std::string(head) + "\n" + std::string(kMinimal));
}

// Every diagnostic, formatted, one per line.
inline std::string dump(const LoadResult& r) {
  std::string out;
  for (const Diagnostic& d : r.diagnostics) out += format(d) + "\n";
  return out;
}

// The one diagnostic of `r`, formatted; or a listing of all of them when there is not exactly one.
inline std::string only(const LoadResult& r) {
  if (r.diagnostics.size() == 1) return format(r.diagnostics[0]);
  return std::to_string(r.diagnostics.size()) + " diagnostics:\n" + dump(r);
}

// `header` on line 1 (a table, "[resilience.brownout]"), `body` from line 2 on, then `tail` (the
// rest of a valid document) after a blank line.
// Two pools after the tables under test, "app" and "billing", one server each (64 of pool
// capacity, so "auto" is 4 x (reactors + 64), 260 with one reactor), and a route to "app".
inline constexpr std::string_view kTwoPools = R"([[upstreams]]
name = "app"
servers = ["127.0.0.1:9000"]

[[upstreams]]
name = "billing"
servers = ["127.0.0.1:9001"]

[[routes]]
upstream = "app"
)";

inline LoadResult load_table(std::string_view header, std::string_view body,
                             std::string_view tail) {
  return load(std::string(header) + "\n" + std::string(body) + "\n\n" + std::string(tail));
}

// One refused key of a table, for parameterised tests: the table's header (line 1), the
// body (from line 2) and the one diagnostic expected, formatted.
struct TableKeyError {
  std::string_view name;
  std::string_view header;
  std::string_view body;
  std::string_view expected;
};

inline void PrintTo(const TableKeyError& c, std::ostream* os) {
  *os << c.name;
}

}  // namespace floodgate::config::testing
