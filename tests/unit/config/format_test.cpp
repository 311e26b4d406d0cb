#include <gtest/gtest.h>

#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

Diagnostic diagnostic(int line, int column, std::string path) {
  return Diagnostic{Diagnostic::Severity::error,   "floodgate.toml", line, column, std::move(path),
                    "what is wrong; how to fix it"};
}

TEST(ConfigFormat, PrintsFileLineColumnSeverityPathAndMessage) {
  EXPECT_EQ(format(diagnostic(14, 1, "upstreams[0].balance")),
            "floodgate.toml:14:1: error: upstreams[0].balance: what is wrong; how to fix it");
}

TEST(ConfigFormat, PrintsWarningsAsWarnings) {
  Diagnostic d = diagnostic(3, 7, "server.workers");
  d.severity = Diagnostic::Severity::warning;
  EXPECT_EQ(format(d), "floodgate.toml:3:7: warning: server.workers: what is wrong; how to fix it");
}

TEST(ConfigFormat, PrintsNotesAsNotes) {
  Diagnostic d = diagnostic(3, 7, "server.workers");
  d.severity = Diagnostic::Severity::note;
  EXPECT_EQ(format(d), "floodgate.toml:3:7: note: server.workers: what is wrong; how to fix it");
}

TEST(ConfigFormat, LeavesOutThePositionWhenThereIsNone) {
  EXPECT_EQ(format(diagnostic(0, 0, "")), "floodgate.toml: error: what is wrong; how to fix it");
}

TEST(ConfigFormat, LeavesOutTheKeyPathWhenThereIsNone) {
  EXPECT_EQ(format(diagnostic(2, 5, "")),
            "floodgate.toml:2:5: error: what is wrong; how to fix it");
}

}  // namespace
}  // namespace floodgate::config
