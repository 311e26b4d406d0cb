// Fuzz target: the configuration loader (TOML text -> Config or diagnostics).
//
// Properties: no crash and no exception escapes; a load either yields a Config and no error,
// or errors and no Config; every error points somewhere (a line or a key path), as
// `floodgate check` promises; formatting and the JSON rendering of the result do not crash.
#include <string_view>

#include "floodgate/config/config.h"
#include "fuzz_support.h"

using floodgate::config::Diagnostic;
using floodgate::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const floodgate::config::LoadResult result = floodgate::config::load_string(text, "fuzz.toml");
  bool errors = false;
  for (const Diagnostic& d : result.diagnostics) {
    if (d.severity != Diagnostic::Severity::error) continue;
    errors = true;
    check(d.line > 0 || !d.path.empty(), "an error with neither a position nor a key path");
    check(!d.message.empty(), "an error without a message");
    (void)floodgate::config::format(d);
  }
  check(result.ok() != errors, "a Config together with errors, or neither");
  (void)floodgate::config::to_json(result);
  return 0;
}
