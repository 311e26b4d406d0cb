// The access log's lines as a reader sees them: written through a real AccessLog to a file.
#include "floodgate/proxy/access_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
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
  r.protocol = "HTTP/1.1";
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
  const std::string header(2000, '\x01');
  const std::string id(1000, '\x01');
  for (const AccessLogFormat format :
       {AccessLogFormat::json, AccessLogFormat::combined, AccessLogFormat::combined_floodgate}) {
    AccessRecord r = record(target, id);
    r.client = r.peer = r.host = r.method = r.protocol = r.upstream = r.backend = r.rate_limit =
        r.quota = r.tls_version = r.tls_cipher = id;
    r.backends = {id, id, id, id};
    r.attempts = 4;
    r.user_agent = r.referer = header;
    const std::string line = logged(format, r);
    // Whole: the last field is there (the peer, cut, in combined_floodgate).
    const char last = format == AccessLogFormat::json       ? '}'
                      : format == AccessLogFormat::combined ? '"'
                                                            : '.';
    EXPECT_EQ(line.back(), last);
    EXPECT_TRUE(printable_ascii(line));
  }
}

TEST(AccessLog, JsonHasTheRequestsHostProtocolHeadersAndTheBackendsTimes) {
  AccessRecord r = record("/x");
  r.host = "app.example";
  r.protocol = "HTTP/1.0";
  r.user_agent = "curl/8.0 \"quoted\"";
  r.referer = "https://ref.example/a?b=\xc3\xa9";
  r.bytes_out = 120;
  r.body_bytes_sent = 13;
  r.connect_time = std::chrono::microseconds(1500);
  r.head_time = std::chrono::microseconds(2250);
  r.attempts = 1;
  const std::string line = logged(AccessLogFormat::json, r);
  for (const char* part :
       {R"("host":"app.example")", R"("protocol":"HTTP/1.0")", R"("bytes_out":120)",
        R"("body_bytes_sent":13)", R"("upstream_connect_ms":1.500)", R"("upstream_head_ms":2.250)",
        R"("user_agent":"curl/8.0 \"quoted\"")",
        R"("referer":"https://ref.example/a?b=\u00c3\u00a9")"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
}

TEST(AccessLog, JsonHasTheHttp2StreamAndZeroOnHttp1) {
  AccessRecord r = record("/s");
  r.protocol = "HTTP/2.0";
  r.stream = 7;
  EXPECT_NE(logged(AccessLogFormat::json, r).find(R"("protocol":"HTTP/2.0","stream":7,)"),
            std::string::npos);
  r.protocol = "HTTP/1.1";
  r.stream = 0;
  EXPECT_NE(logged(AccessLogFormat::json, r).find(R"("protocol":"HTTP/1.1","stream":0,)"),
            std::string::npos);
}

TEST(AccessLog, JsonTimesAreNullWhenNoBackendWasReached) {
  const std::string line = logged(AccessLogFormat::json, record("/"));
  EXPECT_NE(line.find(R"("upstream_connect_ms":null,"upstream_head_ms":null)"), std::string::npos)
      << line;
}

TEST(AccessLog, JsonCutsUserAgentAndRefererAt1024Bytes) {
  AccessRecord r = record("/");
  const std::string ua(3000, 'u');
  r.user_agent = ua;
  const std::string line = logged(AccessLogFormat::json, r);
  EXPECT_NE(line.find("\"user_agent\":\"" + ua.substr(0, 1024) + "...\""), std::string::npos);
}

// 2026-12-03T07:04:05Z: what the combined tests log.
AccessRecord timed(AccessRecord r) {
  r.time = std::chrono::system_clock::time_point(std::chrono::seconds(1796281445));
  return r;
}

TEST(AccessLog, CombinedIsNginxsCombinedFormatExactly) {
  AccessRecord r = timed(record("/x?y=1"));
  r.protocol = "HTTP/1.0";
  r.bytes_out = 120;
  r.body_bytes_sent = 13;
  r.referer = "https://ref.example/";
  r.user_agent = "Mozilla/5.0 (X11; Linux x86_64)";
  r.upstream = "app";  // floodgate's own fields are not in `combined`
  EXPECT_EQ(logged(AccessLogFormat::combined, r),
            R"(10.0.0.1 - - [03/Dec/2026:07:04:05 +0000] "GET /x?y=1 HTTP/1.0" 200 13 )"
            R"x("https://ref.example/" "Mozilla/5.0 (X11; Linux x86_64)")x");
}

TEST(AccessLog, CombinedWritesDashesForAnUnparsedRequestAndAbsentHeaders) {
  AccessRecord r = timed(AccessRecord{});
  r.client = "10.0.0.1";
  r.status = 400;
  EXPECT_EQ(logged(AccessLogFormat::combined, r),
            R"(10.0.0.1 - - [03/Dec/2026:07:04:05 +0000] "-" 400 0 "-" "-")");
}

TEST(AccessLog, CombinedEscapesQuotesBackslashesAndNonPrintableBytesAsHex) {
  AccessRecord r = record("/a\"b\\c\x01\xe9 d");
  r.user_agent = "ua\"x";
  const std::string line = logged(AccessLogFormat::combined, r);
  EXPECT_TRUE(printable_ascii(line)) << line;
  EXPECT_NE(line.find(R"("GET /a\x22b\x5cc\x01\xe9 d HTTP/1.1")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"( "ua\x22x")"), std::string::npos) << line;
}

TEST(AccessLog, CombinedFloodgateAppendsUpstreamBackendsTimesReasonRequestIdAndPeer) {
  AccessRecord r = timed(record("/", "id\"x"));
  r.peer = "192.0.2.10";
  r.body_bytes_sent = 13;
  r.upstream = "app";
  r.backends = {"10.0.0.7:9000", "10.0.0.8:9000"};
  r.backend = "10.0.0.8:9000";
  r.attempts = 2;
  r.duration = std::chrono::milliseconds(12);
  r.connect_time = std::chrono::milliseconds(0);
  r.head_time = std::chrono::milliseconds(11);
  EXPECT_EQ(logged(AccessLogFormat::combined_floodgate, r),
            R"(10.0.0.1 - - [03/Dec/2026:07:04:05 +0000] "GET / HTTP/1.1" 200 13 "-" "-" )"
            R"(app 10.0.0.7:9000,10.0.0.8:9000 0.012000 0.000 0.011 - id\x22x - - 192.0.2.10)");
}

TEST(AccessLog, EverySendOfTheRequestIsListedInOrder) {
  // A stale pooled connection's resend, then a retry on another backend, resent once too.
  AccessRecord r = timed(record("/"));
  r.upstream = "app";
  r.backends = {"10.0.0.7:9000", "10.0.0.7:9000", "10.0.0.8:9000", "10.0.0.8:9000"};
  r.backend = "10.0.0.8:9000";
  r.attempts = 4;
  const std::string json = logged(AccessLogFormat::json, r);
  EXPECT_NE(json.find(R"("attempts":4,"backends":["10.0.0.7:9000","10.0.0.7:9000",)"
                      R"("10.0.0.8:9000","10.0.0.8:9000"])"),
            std::string::npos)
      << json;
  const std::string combined = logged(AccessLogFormat::combined_floodgate, r);
  EXPECT_NE(combined.find(" app 10.0.0.7:9000,10.0.0.7:9000,10.0.0.8:9000,10.0.0.8:9000 "),
            std::string::npos)
      << combined;
}

TEST(AccessLog, TlsVersionAndCipherAreLoggedOnTlsListeners) {
  AccessRecord r = timed(record("/", "id"));
  r.tls_version = "TLSv1.3";
  r.tls_cipher = "TLS_AES_128_GCM_SHA256";
  const std::string json = logged(AccessLogFormat::json, r);
  EXPECT_NE(json.find(R"("tls_version":"TLSv1.3","tls_cipher":"TLS_AES_128_GCM_SHA256"})"),
            std::string::npos)
      << json;
  const std::string line = logged(AccessLogFormat::combined_floodgate, r);
  EXPECT_TRUE(line.ends_with(" id TLSv1.3 TLS_AES_128_GCM_SHA256 -")) << line;  // no peer here
  const std::string plain = logged(AccessLogFormat::combined, r);
  EXPECT_EQ(plain.find("TLS"), std::string::npos) << plain;  // nginx's combined, exactly
}

TEST(AccessLog, TheClientAndTheConnectionsPeerAreLoggedApart) {
  // Behind a trusted proxy: the client its X-Forwarded-For gives, the proxy as the peer.
  AccessRecord r = timed(record("/"));
  r.client = "198.51.100.7";
  r.peer = "192.0.2.10";
  const std::string json = logged(AccessLogFormat::json, r);
  EXPECT_NE(json.find(R"("client":"198.51.100.7","peer":"192.0.2.10")"), std::string::npos) << json;
  const std::string combined = logged(AccessLogFormat::combined, r);  // as nginx's realip does
  EXPECT_TRUE(combined.starts_with("198.51.100.7 - - [")) << combined;
  EXPECT_EQ(combined.find("192.0.2.10"), std::string::npos) << combined;
  const std::string line = logged(AccessLogFormat::combined_floodgate, r);
  EXPECT_TRUE(line.starts_with("198.51.100.7 - - [")) << line;
  EXPECT_TRUE(line.ends_with(" 192.0.2.10")) << line;
}

TEST(AccessLog, CombinedFloodgateWritesADashForAnEmptyField) {
  const std::string line = logged(AccessLogFormat::combined_floodgate, record("/", ""));
  EXPECT_EQ(line.substr(line.size() - 2), " -") << line;
}

}  // namespace
}  // namespace floodgate::proxy
