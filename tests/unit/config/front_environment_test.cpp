// The environment overrides of [resilience]: FLOODGATE_MAX_INFLIGHT (the syntax of
// max_inflight) and FLOODGATE_MEMORY_GUARD_MIN_MB (an integer of MiB). A valid value replaces
// the file's, with a warning when the file said otherwise; an invalid one is an error without a
// position that names the variable and its syntax, so the file is refused. The environment is
// injected: no test here calls setenv.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;
using Vars = std::map<std::string, std::string, std::less<>>;

// An environment holding exactly `vars`.
Environment env_of(Vars vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional(it->second);
  };
}

// `body` from line 2 of [resilience.inflight], then the minimal upstream and route.
LoadResult inflight(std::string_view body, const Vars& vars) {
  return load("[resilience.inflight]\n" + std::string(body) + "\n\n" + std::string(kMinimal),
              env_of(vars));
}
LoadResult memory_guard(std::string_view body, const Vars& vars) {
  return load("[resilience.memory_guard]\n" + std::string(body) + "\n\n" + std::string(kMinimal),
              env_of(vars));
}

const resilience::InflightParams& cap_of(const LoadResult& r) {
  return r.config->resilience.inflight;
}
const resilience::MemoryGuardParams& guard_of(const LoadResult& r) {
  return r.config->resilience.memory_guard;
}

constexpr std::string_view kBadCap =
    "test.toml: error: resilience.inflight.max_inflight: the environment variable "
    "FLOODGATE_MAX_INFLIGHT is \"{}\", which is not an in-flight cap; set it to \"auto\" or an "
    "integer from 0 (no cap) to 2147483646, or unset it to use max_inflight";
constexpr std::string_view kBadFloor =
    "test.toml: error: resilience.memory_guard.min_available: the environment variable "
    "FLOODGATE_MEMORY_GUARD_MIN_MB is \"{}\", which is not a memory floor; set it to a number of "
    "MiB from 0 (the guard is off) to 1073741824, or unset it to use min_available (\"auto\" by "
    "default)";

std::string with_value(std::string_view pattern, std::string_view value) {
  std::string out(pattern);
  return out.replace(out.find("{}"), 2, value);
}

// --- FLOODGATE_MAX_INFLIGHT ------------------------------------------------------------------

TEST(ConfigFrontEnvironment, SetsTheCapWhenTheFileHasNone) {
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MAX_INFLIGHT", "200"}}));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_FALSE(cap_of(r).automatic);
  EXPECT_EQ(cap_of(r).max_inflight, 200u);
}

TEST(ConfigFrontEnvironment, TakesAutoAndZeroLikeTheKey) {
  const LoadResult automatic = inflight("max_inflight = 100", {{"FLOODGATE_MAX_INFLIGHT", "auto"}});
  ASSERT_TRUE(automatic.ok()) << dump(automatic);
  EXPECT_TRUE(cap_of(automatic).automatic);
  const LoadResult off = load(kMinimal, env_of({{"FLOODGATE_MAX_INFLIGHT", "0"}}));
  ASSERT_TRUE(off.ok()) << dump(off);
  EXPECT_FALSE(cap_of(off).automatic);
  EXPECT_EQ(cap_of(off).max_inflight, 0u);
}

TEST(ConfigFrontEnvironment, WarnsAtTheKeyWhoseValueTheVariableOverrides) {
  const LoadResult r = inflight("max_inflight = 100", {{"FLOODGATE_MAX_INFLIGHT", "250"}});
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(cap_of(r).max_inflight, 250u);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.inflight.max_inflight: max_inflight = 100 is "
            "overridden by the environment variable FLOODGATE_MAX_INFLIGHT = \"250\", which "
            "floodgate reads at every load; unset the variable to use the file's value, or "
            "remove max_inflight");
}

TEST(ConfigFrontEnvironment, DoesNotWarnWhenTheVariableSaysWhatTheFileSays) {
  const LoadResult r = inflight("max_inflight = \"auto\"", {{"FLOODGATE_MAX_INFLIGHT", "auto"}});
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

class ConfigFrontBadCap : public ::testing::TestWithParam<std::string_view> {};

TEST_P(ConfigFrontBadCap, RefusesTheFileNamingTheVariableAndItsSyntax) {
  const std::string value(GetParam());
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MAX_INFLIGHT", value}}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(only(r), with_value(kBadCap, value));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].line, 0);
  EXPECT_EQ(r.diagnostics[0].column, 0);
}

INSTANTIATE_TEST_SUITE_P(Values, ConfigFrontBadCap,
                         ::testing::Values("", "abc", "-1", "1.5", " 10", "10 ", "+10", "AUTO",
                                           "0x10", "2147483647", "99999999999999999999999"),
                         [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(ConfigFrontEnvironment, QuotesALongValueCutShort) {
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MAX_INFLIGHT", std::string(100, 'x')}}));
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_NE(r.diagnostics[0].message.find("is \"" + std::string(64, 'x') + "\"... (100 bytes), "),
            std::string::npos)
      << r.diagnostics[0].message;
}

// --- FLOODGATE_MEMORY_GUARD_MIN_MB -----------------------------------------------------------

TEST(ConfigFrontEnvironment, SetsTheFloorInMib) {
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MEMORY_GUARD_MIN_MB", "512"}}));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_FALSE(guard_of(r).automatic);
  EXPECT_EQ(guard_of(r).min_available_mib, 512u);
}

TEST(ConfigFrontEnvironment, TurnsTheGuardOffWithZero) {
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MEMORY_GUARD_MIN_MB", "0"}}));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_FALSE(guard_of(r).automatic);
  EXPECT_EQ(guard_of(r).min_available_mib, 0u);
}

TEST(ConfigFrontEnvironment, WarnsAtTheFloorTheVariableOverrides) {
  const LoadResult r =
      memory_guard("min_available = \"auto\"", {{"FLOODGATE_MEMORY_GUARD_MIN_MB", "64"}});
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(guard_of(r).min_available_mib, 64u);
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.memory_guard.min_available: min_available = "
            "\"auto\" is overridden by the environment variable FLOODGATE_MEMORY_GUARD_MIN_MB = "
            "\"64\", which floodgate reads at every load; unset the variable to use the file's "
            "value, or remove min_available");
}

class ConfigFrontBadFloor : public ::testing::TestWithParam<std::string_view> {};

TEST_P(ConfigFrontBadFloor, RefusesTheFileNamingTheVariableAndItsSyntax) {
  const std::string value(GetParam());
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MEMORY_GUARD_MIN_MB", value}}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(only(r), with_value(kBadFloor, value));
}

INSTANTIATE_TEST_SUITE_P(Values, ConfigFrontBadFloor,
                         ::testing::Values("", "auto", "512MB", "-1", "1.5", "1073741825"),
                         [](const auto& info) { return "case" + std::to_string(info.index); });

// --- both, and the loader ------------------------------------------------------------------

TEST(ConfigFrontEnvironment, ReportsABadVariableBeforeTheFilesOwnErrors) {
  const LoadResult r = inflight("retry_after = \"0s\"", {{"FLOODGATE_MAX_INFLIGHT", "many"},
                                                         {"FLOODGATE_MEMORY_GUARD_MIN_MB", "x"}});
  ASSERT_EQ(r.diagnostics.size(), 3u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.inflight.max_inflight");
  EXPECT_EQ(r.diagnostics[1].path, "resilience.memory_guard.min_available");
  EXPECT_EQ(r.diagnostics[2].path, "resilience.inflight.retry_after");
}

TEST(ConfigFrontEnvironment, AsksForTheTwoVariablesOnly) {
  std::vector<std::string> asked;
  const LoadResult r = load(kMinimal, [&asked](std::string_view name) {
    asked.emplace_back(name);
    return std::optional<std::string>();
  });
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(asked,
            (std::vector<std::string>{"FLOODGATE_MAX_INFLIGHT", "FLOODGATE_MEMORY_GUARD_MIN_MB"}));
}

TEST(ConfigFrontEnvironment, PutsABadVariableInTheJsonWithoutAPosition) {
  const LoadResult r = load(kMinimal, env_of({{"FLOODGATE_MAX_INFLIGHT", "x"}}));
  const std::string json = to_json(r);
  EXPECT_NE(json.find(R"({"line":0,"column":0,"path":"resilience.inflight.max_inflight",)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("valid":false)"), std::string::npos) << json;
}

TEST(ConfigFrontEnvironment, IsAppliedByLoadFileToo) {
  const std::string path =
      ::testing::TempDir() + "floodgate-front-env-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path) << kMinimal;
  const LoadResult good = load_file(path, env_of({{"FLOODGATE_MAX_INFLIGHT", "7"}}));
  const LoadResult bad = load_file(path, env_of({{"FLOODGATE_MEMORY_GUARD_MIN_MB", "lots"}}));
  std::remove(path.c_str());
  ASSERT_TRUE(good.ok()) << dump(good);
  EXPECT_EQ(cap_of(good).max_inflight, 7u);
  EXPECT_FALSE(bad.ok());
  ASSERT_EQ(bad.diagnostics.size(), 1u) << dump(bad);
  EXPECT_EQ(bad.diagnostics[0].file, path);
}

}  // namespace
}  // namespace floodgate::config
