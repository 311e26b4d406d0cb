// to_json: the `floodgate check --format json` object (and the control API's validation body).
#include <gtest/gtest.h>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::kMinimal;
using testing::load;
using Severity = Diagnostic::Severity;

LoadResult invalid_with(std::vector<Diagnostic> diagnostics) {
  return LoadResult{std::nullopt, std::move(diagnostics), {}};
}

TEST(ConfigJson, ReportsAValidFileWithEmptyLists) {
  EXPECT_EQ(to_json(load(kMinimal)), R"({"valid":true,"errors":[],"warnings":[]})");
}

TEST(ConfigJson, SplitsErrorsFromWarningsKeepingSourceOrder) {
  const LoadResult r = load(R"([[upstreams]]
name = "app"
balance = "p2c"
servers = [{ address = "127.0.0.1:9001", weight = 3 }]
[[routes]]
upstream = "api"
[[routes]]
upstream = "app"
path_prefix = "/app"
workers = 1
)");
  EXPECT_EQ(to_json(r),
            R"({"valid":false,"errors":[)"
            R"({"line":6,"column":1,"path":"routes[0].upstream","message":"route names )"
            R"(upstream 'api', which is not defined; define [[upstreams]] name = \"api\" or fix )"
            R"(the name"},)"
            R"({"line":10,"column":1,"path":"routes[1].workers","message":"unknown key )"
            R"('workers' in [[routes]]; 'workers' belongs in [server]"}],"warnings":[)"
            R"({"line":4,"column":42,"path":"upstreams[0].servers[0].weight","message":"weight )"
            R"(3 is ignored by balance = \"p2c\"; only round_robin uses weights: set balance = )"
            R"(\"round_robin\" or remove the weight"}]})");
}

TEST(ConfigJson, IsValidWithWarningsOnly) {
  const LoadResult r =
      load(std::string(kMinimal) + "[[routes]]\nupstream = \"app\"\n");  // shadowed
  const std::string json = to_json(r);
  EXPECT_EQ(json.substr(0, 30), R"({"valid":true,"errors":[],"war)");
  EXPECT_NE(json.find(R"("path":"routes[1]")"), std::string::npos) << json;
}

TEST(ConfigJson, AddsTheNotesOnlyWhenAskedAndThereAreSome) {
  LoadResult r = load(kMinimal);
  r.notes.push_back(Diagnostic{Severity::note, "f", 3, 1, "a.missing_key", "a fact"});
  EXPECT_EQ(to_json(r), R"({"valid":true,"errors":[],"warnings":[]})");
  EXPECT_EQ(to_json(r, true),
            R"({"valid":true,"errors":[],"warnings":[],"notes":[)"
            R"({"line":3,"column":1,"path":"a.missing_key","message":"a fact"}]})");
  EXPECT_EQ(to_json(load(kMinimal), true), R"({"valid":true,"errors":[],"warnings":[]})");
}

TEST(ConfigJson, GivesZeroPositionAndEmptyPathForAnUnreadableFile) {
  EXPECT_EQ(to_json(load_file("/nonexistent/f.toml")),
            R"({"valid":false,"errors":[{"line":0,"column":0,"path":"","message":"cannot read )"
            R"(configuration file \"/nonexistent/f.toml\": No such file or directory"}],)"
            R"("warnings":[]})");
}

TEST(ConfigJson, EscapesQuotesBackslashesAndControlCharacters) {
  const LoadResult r = invalid_with(
      {Diagnostic{Severity::error, "f", 1, 2, "a.b", std::string("\"q\" \\ \n\t\x01 end")}});
  EXPECT_EQ(to_json(r), R"({"valid":false,"errors":[{"line":1,"column":2,"path":"a.b",)"
                        R"("message":"\"q\" \\ \n\t\u0001 end"}],"warnings":[]})");
}

TEST(ConfigJson, KeepsUtf8AndReplacesBytesThatAreNotUtf8) {
  const LoadResult r = invalid_with(
      {Diagnostic{Severity::warning, "f", 1, 1, "", "caf\xc3\xa9 \xff \xc3 \xed\xa0\x80 end"}});
  EXPECT_EQ(to_json(r),
            "{\"valid\":false,\"errors\":[],\"warnings\":[{\"line\":1,\"column\":1,"
            "\"path\":\"\",\"message\":\"caf\xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd "
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd end\"}]}");
}

}  // namespace
}  // namespace floodgate::config
