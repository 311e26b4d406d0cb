// The environment overrides of [resilience] (resilience_schema.h): FLOODGATE_MAX_INFLIGHT and
// FLOODGATE_MEMORY_GUARD_MIN_MB, applied over the file's values once the document is read.
#include <optional>
#include <string>
#include <string_view>

#include "resilience_schema.h"
#include "resilience_values.h"

namespace floodgate::config::detail {
namespace {

constexpr std::string_view kMaxInflightVariable = "FLOODGATE_MAX_INFLIGHT";
constexpr std::string_view kMinAvailableVariable = "FLOODGATE_MEMORY_GUARD_MIN_MB";
// An environment value is quoted in messages up to this many bytes: it comes from outside the
// file and may be anything.
constexpr size_t kShownValueBytes = 64;

// `value` in quotes, cut short.
std::string shown(std::string_view value) {
  if (value.size() <= kShownValueBytes) {
    return quoted(value);
  }
  return quoted(value.substr(0, kShownValueBytes)) + "... (" + std::to_string(value.size()) +
         " bytes)";
}

std::string spelled(bool automatic, uint64_t count) {
  return automatic ? "\"auto\"" : std::to_string(count);
}

// An override that changes what the file says is worth a warning at the file's key.
void warn_overridden(Collector& out, const std::optional<Position>& at, const std::string& path,
                     std::string_view key, const std::string& file_value, std::string_view variable,
                     std::string_view value) {
  if (!at) {
    return;
  }
  out.warning(*at, path,
              std::string(key) + " = " + file_value + " is overridden by the environment " +
                  "variable " + std::string(variable) + " = " + shown(value) +
                  ", which floodgate reads at every load; unset the variable to use the file's " +
                  "value, or remove " + std::string(key));
}

void apply_max_inflight(std::string_view value, ResilienceMarks& marks,
                        resilience::InflightParams& p, Collector& out) {
  const std::string path = "resilience.inflight.max_inflight";
  const bool automatic = value == "auto";
  const auto count = automatic ? std::optional<uint64_t>(0) : parse_digits(value, kMaxInflight);
  if (!count) {
    out.error({}, path,
              "the environment variable " + std::string(kMaxInflightVariable) + " is " +
                  shown(value) + ", which is not an in-flight cap; set it to " +
                  accepted(kMaxInflightKey, true) + ", or unset it to use max_inflight");
    marks.max_inflight_ok = false;
    return;
  }
  if (automatic != p.automatic || *count != p.max_inflight) {
    warn_overridden(out, marks.max_inflight_at, path, "max_inflight",
                    spelled(p.automatic, p.max_inflight), kMaxInflightVariable, value);
  }
  p.automatic = automatic;
  p.max_inflight = static_cast<uint32_t>(*count);
  marks.max_inflight_ok = true;  // whatever the file said, the variable decides
  marks.max_inflight_from_env = true;
}

void apply_min_available(std::string_view value, const ResilienceMarks& marks,
                         resilience::MemoryGuardParams& p, Collector& out) {
  const std::string path = "resilience.memory_guard.min_available";
  const auto mib = parse_digits(value, kMaxMinAvailableMib);
  if (!mib) {
    out.error({}, path,
              "the environment variable " + std::string(kMinAvailableVariable) + " is " +
                  shown(value) + ", which is not a memory floor; set it to " +
                  accepted(kMinAvailableKey, false) +
                  ", or unset it to use min_available (\"auto\" by default)");
    return;
  }
  if (p.automatic || *mib != p.min_available_mib) {
    warn_overridden(out, marks.min_available_at, path, "min_available",
                    spelled(p.automatic, p.min_available_mib), kMinAvailableVariable, value);
  }
  p.automatic = false;
  p.min_available_mib = *mib;
}

}  // namespace

void apply_resilience_environment(const Environment& env, ResilienceMarks& marks,
                                  resilience::Params& p, Collector& out) {
  if (!env) {
    return;
  }
  if (const auto value = env(kMaxInflightVariable)) {
    apply_max_inflight(*value, marks, p.inflight, out);
  }
  if (const auto value = env(kMinAvailableVariable)) {
    apply_min_available(*value, marks, p.memory_guard, out);
  }
}

}  // namespace floodgate::config::detail
