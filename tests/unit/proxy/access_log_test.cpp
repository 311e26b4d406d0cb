// The access log's lines as a reader sees them: written through a real AccessLog to a file.
#include "floodgate/proxy/access_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace floodgate::proxy {
namespace {

// The lines `record` becomes in `format`, one per call of write().
std::string logged(AccessLogFormat format, const AccessRecord& record) {
  char path[] = "/tmp/floodgate-access-log-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  {
    AccessLog log(LogParams{.access_log = path, .access_log_format = format}, 1);
    log.write(0, record);
    log.flush();
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  std::string s = text.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Whether `s` is valid UTF-8 made only of printable ASCII (what an escaped line must be).
bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return false;
    }
  }
  return true;
}

AccessRecord record(std::string_view target, std::string_view request_id = "rid") {
  AccessRecord r;
  r.client = "10.0.0.1";
  r.method = "GET";
  r.target = target;
  r.status = 200;
  r.request_id = request_id;
  return r;
}

TEST(AccessLog, JsonEscapesControlCharactersAndBytesAbove0x7fAsUnicodeEscapes) {
  const std::string line =
      logged(AccessLogFormat::json, record("/a\"\\\x01\x7f\xc3\xa9\xff", "id\xfe\n"));
  EXPECT_TRUE(printable_ascii(line)) << line;
  EXPECT_NE(line.find(R"("target":"/a\"\\\u0001\u007f\u00c3\u00a9\u00ff")"), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("request_id":"id\u00fe\u000a")"), std::string::npos) << line;
}

TEST(AccessLog, JsonCutsATargetAt4096BytesAndMarksTheCut) {
  const std::string target = "/" + std::string(5000, 'a');
  const std::string line = logged(AccessLogFormat::json, record(target));
  EXPECT_NE(line.find("\"target\":\"" + target.substr(0, 4096) + "...\""), std::string::npos);
}

TEST(AccessLog, JsonCutsEveryOtherStringAt256Bytes) {
  const std::string id(1000, 'r');
  const std::string line = logged(AccessLogFormat::json, record("/", id));
  EXPECT_NE(line.find("\"request_id\":\"" + id.substr(0, 256) + "...\""), std::string::npos);
}

TEST(AccessLog, TheLongestEscapedLineIsWrittenWhole) {
  const std::string target(5000, '\xff');
  const std::string id(1000, '\x01');
  const std::string line = logged(AccessLogFormat::json, record(target, id));
  EXPECT_EQ(line.back(), '}');
  EXPECT_TRUE(printable_ascii(line));
}

TEST(AccessLog, CombinedEscapesQuotesBackslashesAndNonPrintableBytesAsHex) {
  const std::string line = logged(AccessLogFormat::combined, record("/a\"b\\c\x01\xe9 d", "id\"x"));
  EXPECT_TRUE(printable_ascii(line)) << line;
  EXPECT_NE(line.find(R"("GET /a\x22b\x5cc\x01\xe9 d HTTP/1.1")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"( id\x22x)"), std::string::npos) << line;
}

TEST(AccessLog, CombinedWritesADashForAnEmptyField) {
  const std::string line = logged(AccessLogFormat::combined, record("/", ""));
  EXPECT_EQ(line.substr(line.size() - 2), " -") << line;
}

}  // namespace
}  // namespace floodgate::proxy
