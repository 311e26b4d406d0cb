// HTTP/2 from clients in the configuration: [server.http2] (its limits, the rules between them,
// h2c_listen against the listeners), server.max_requests_per_connection and the alpn of a
// [[server.tls]] entry. Every refusal is pinned with the text the operator sees.
//
// The [[server.tls]] entries here name certificate files that do not exist: a load reads them
// only once every key of [[server.tls]] is valid, so an entry's own errors come alone, and a
// document whose entries are valid has the unreadable certificate as one more diagnostic.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"
#include "floodgate/net/tls_params.h"
#include "floodgate/proxy/params.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::load_with;
using testing::only;

// `[server.http2]` on line 1 and `body` from line 2, then a valid document.
LoadResult http2(std::string_view body) {
  return load_with("[server.http2]\n" + std::string(body));
}

// A [[server.tls]] entry on lines 1..4 (TLS only: no plain listener) with `alpn = value` on
// line 5.
LoadResult alpn(std::string_view value) {
  return load_with(
      "[[server.tls]]\nlisten = [\"127.0.0.1:8443\"]\n"
      "certificate = \"/nonexistent-floodgate-dir/a.pem\"\n"
      "private_key = \"/nonexistent-floodgate-dir/a.key\"\nalpn = " +
      std::string(value));
}

TEST(ConfigHttp2, DefaultsAreTheDocumentedValues) {
  const LoadResult r = load_with("");
  ASSERT_TRUE(r.ok()) << dump(r);
  const ServerParams& s = r.config->server;
  EXPECT_EQ(s.http2, Http2Params{});
  EXPECT_EQ(s.http2.max_concurrent_streams, 100u);
  EXPECT_EQ(s.http2.min_concurrent_streams, 10u);
  EXPECT_EQ(s.http2.stream_window, 65536u);
  EXPECT_EQ(s.http2.connection_window, 1048576u);
  EXPECT_EQ(s.http2.max_header_list_bytes, 65536u);
  EXPECT_EQ(s.http2.max_continuations, 8u);
  EXPECT_EQ(s.http2.glitch_threshold, 200u);
  EXPECT_EQ(s.http2.max_frames_per_turn, 64u);
  EXPECT_TRUE(s.http2.h2c_listen.empty());
  EXPECT_EQ(s.max_requests_per_connection, 0u);
  EXPECT_EQ(net::TlsCertParams{}.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
}

TEST(ConfigHttp2, ReadsEveryKey) {
  const LoadResult r = load_with(R"([server]
listen = ["127.0.0.1:8080", "127.0.0.1:8081"]
max_requests_per_connection = 1000

[server.http2]
max_concurrent_streams = 250
min_concurrent_streams = 25
stream_window = 131072
connection_window = 4194304
max_header_list_bytes = 32768
max_continuations = 0
glitch_threshold = 0
max_frames_per_turn = 16
h2c_listen = ["127.0.0.1:8081"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  const ServerParams& s = r.config->server;
  EXPECT_EQ(s.max_requests_per_connection, 1000u);
  EXPECT_EQ(s.http2.max_concurrent_streams, 250u);
  EXPECT_EQ(s.http2.min_concurrent_streams, 25u);
  EXPECT_EQ(s.http2.stream_window, 131072u);
  EXPECT_EQ(s.http2.connection_window, 4194304u);
  EXPECT_EQ(s.http2.max_header_list_bytes, 32768u);
  EXPECT_EQ(s.http2.max_continuations, 0u);
  EXPECT_EQ(s.http2.glitch_threshold, 0u);
  EXPECT_EQ(s.http2.max_frames_per_turn, 16u);
  EXPECT_EQ(s.http2.h2c_listen, (std::vector<Endpoint>{{"127.0.0.1", 8081, "127.0.0.1:8081"}}));
}

struct Http2Range {
  std::string_view key;
  int64_t lowest;
  int64_t highest;
  std::string_view beside;  // a line that keeps both ends clear of the rules between keys
};

void PrintTo(const Http2Range& c, std::ostream* os) {
  *os << c.key;
}

class ConfigHttp2Ranges : public ::testing::TestWithParam<Http2Range> {
 protected:
  // `[server.http2]` on line 1, the key = `value` on line 2 and `beside` on line 3.
  LoadResult with(int64_t value) const {
    const Http2Range& c = GetParam();
    return http2(std::string(c.key) + " = " + std::to_string(value) + "\n" + std::string(c.beside));
  }
};

TEST_P(ConfigHttp2Ranges, AcceptBothEndsOfTheRange) {
  for (const int64_t good : {GetParam().lowest, GetParam().highest}) {
    const LoadResult r = with(good);
    EXPECT_TRUE(r.ok()) << good << "\n" << dump(r);
    EXPECT_TRUE(r.diagnostics.empty()) << good << "\n" << dump(r);
  }
}

TEST_P(ConfigHttp2Ranges, RejectOneBelowAndOneAboveTheRange) {
  const Http2Range& c = GetParam();
  for (const int64_t bad : {c.lowest - 1, c.highest + 1}) {
    EXPECT_EQ(only(with(bad)), "test.toml:2:1: error: server.http2." + std::string(c.key) + ": " +
                                   std::to_string(bad) + " is out of range; use an integer from " +
                                   std::to_string(c.lowest) + " to " + std::to_string(c.highest));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigHttp2Ranges,
    ::testing::Values(
        Http2Range{"max_concurrent_streams", 1, 10'000, "min_concurrent_streams = 1"},
        Http2Range{"min_concurrent_streams", 1, 10'000, "max_concurrent_streams = 10000"},
        Http2Range{"stream_window", 65'535, 2'147'483'647, "connection_window = 2147483647"},
        Http2Range{"connection_window", 65'535, 2'147'483'647, "stream_window = 65535"},
        Http2Range{"max_header_list_bytes", 1024, 1'048'576, ""},
        Http2Range{"max_continuations", 0, 1000, ""},
        Http2Range{"glitch_threshold", 0, 1'000'000, ""},
        Http2Range{"max_frames_per_turn", 1, 100'000, ""}),
    [](const auto& info) { return std::string(info.param.key); });

TEST(ConfigHttp2, RefusesAStreamFloorAboveTheLimitNamingBothValues) {
  EXPECT_EQ(only(http2("max_concurrent_streams = 50\nmin_concurrent_streams = 60")),
            "test.toml:3:1: error: server.http2.min_concurrent_streams: min_concurrent_streams = "
            "60 is above max_concurrent_streams = 50: under pressure the advertised limit would "
            "rise instead of shrinking; set min_concurrent_streams to at most 50 or raise "
            "max_concurrent_streams to at least 60");
}

TEST(ConfigHttp2, SaysWhenTheLimitTheFloorIsAboveIsTheDefault) {
  EXPECT_EQ(only(http2("min_concurrent_streams = 101")),
            "test.toml:2:1: error: server.http2.min_concurrent_streams: min_concurrent_streams = "
            "101 is above max_concurrent_streams = 100 (the default): under pressure the "
            "advertised limit would rise instead of shrinking; set min_concurrent_streams to at "
            "most 100 or raise max_concurrent_streams to at least 101");
}

TEST(ConfigHttp2, AcceptsAStreamFloorEqualToTheLimit) {
  const LoadResult r = http2("max_concurrent_streams = 50\nmin_concurrent_streams = 50");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.http2.min_concurrent_streams, 50u);
}

TEST(ConfigHttp2, RefusesAConnectionWindowSmallerThanAStreamWindow) {
  EXPECT_EQ(only(http2("stream_window = 131072\nconnection_window = 65535")),
            "test.toml:3:1: error: server.http2.connection_window: connection_window = 65535 is "
            "smaller than stream_window = 131072: one request body could never use its whole "
            "window; raise connection_window to at least 131072 or lower stream_window to at "
            "most 65535");
}

TEST(ConfigHttp2, RefusesAStreamWindowAboveTheDefaultConnectionWindowAtTheTable) {
  EXPECT_EQ(only(http2("stream_window = 2097152")),
            "test.toml:1:1: error: server.http2.connection_window: connection_window = 1048576 "
            "(the default) is smaller than stream_window = 2097152: one request body could "
            "never use its whole window; raise connection_window to at least 2097152 or lower "
            "stream_window to at most 1048576");
}

TEST(ConfigHttp2, DoesNotCompareAValueThatHadAnError) {
  // The refused max keeps its default (100), which is not what the operator wrote.
  EXPECT_EQ(only(http2("max_concurrent_streams = 0\nmin_concurrent_streams = 200")),
            "test.toml:2:1: error: server.http2.max_concurrent_streams: 0 is out of range; use "
            "an integer from 1 to 10000");
}

TEST(ConfigHttp2, AcceptsH2cOnAPlainListenerStoredAsServerListenWritesIt) {
  const LoadResult r = load_with(
      "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\n[server.http2]\n"
      "h2c_listen = [\"localhost:8081\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.http2.h2c_listen,
            (std::vector<Endpoint>{{"127.0.0.1", 8081, "127.0.0.1:8081"}}));
}

TEST(ConfigHttp2, AcceptsH2cOnTheDefaultListener) {
  const LoadResult r = http2("h2c_listen = [\"127.0.0.1:8080\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.http2.h2c_listen,
            (std::vector<Endpoint>{{"127.0.0.1", 8080, "127.0.0.1:8080"}}));
}

TEST(ConfigHttp2, AcceptsAnEmptyH2cListenAsNone) {
  const LoadResult r = http2("h2c_listen = []");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_TRUE(r.config->server.http2.h2c_listen.empty());
}

TEST(ConfigHttp2, RefusesAnH2cAddressThatIsNotAListener) {
  EXPECT_EQ(only(load_with("[server]\nlisten = [\"127.0.0.1:8080\"]\n[server.http2]\n"
                           "h2c_listen = [\"127.0.0.1:8080\", \"127.0.0.1:9090\"]")),
            "test.toml:4:33: error: server.http2.h2c_listen[1]: \"127.0.0.1:9090\" is not one of "
            "server.listen; add it to server.listen or remove it from h2c_listen");
}

TEST(ConfigHttp2, RefusesAnH2cAddressWrittenTwice) {
  EXPECT_EQ(only(http2("h2c_listen = [\"127.0.0.1:8080\", \"localhost:8080\"]")),
            "test.toml:2:33: error: server.http2.h2c_listen[1]: duplicate address "
            "\"localhost:8080\" (same as server.http2.h2c_listen[0]); remove one of them");
}

TEST(ConfigHttp2, RefusesH2cListenWrittenAsOneAddress) {
  EXPECT_EQ(only(http2("h2c_listen = \"127.0.0.1:8080\"")),
            "test.toml:2:1: error: server.http2.h2c_listen: expected an array of \"host:port\" "
            "strings, got a string (\"127.0.0.1:8080\"); e.g. h2c_listen = [\"127.0.0.1:8080\"]");
}

TEST(ConfigHttp2, RefusesH2cOnATlsListenerBecauseTlsChoosesByAlpn) {
  const LoadResult r = load_with(R"([server]
listen = ["127.0.0.1:8080"]

[[server.tls]]
listen = ["127.0.0.1:8443"]
certificate = "/nonexistent-floodgate-dir/a.pem"
private_key = "/nonexistent-floodgate-dir/a.key"

[server.http2]
h2c_listen = ["127.0.0.1:8080", "localhost:8443"])");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.tls[0].certificate");
  EXPECT_EQ(format(r.diagnostics[1]),
            "test.toml:10:33: error: server.http2.h2c_listen[1]: \"localhost:8443\" is a TLS "
            "listener (a [[server.tls]] entry lists it); HTTP/2 on TLS is chosen by ALPN (the "
            "entry's alpn, which offers \"h2\" by default): remove it from h2c_listen");
}

TEST(ConfigHttp2, SaysThatTlsWithoutServerListenLeavesNoPlainListener) {
  const LoadResult r = load_with(R"([[server.tls]]
listen = ["127.0.0.1:8443"]
certificate = "/nonexistent-floodgate-dir/a.pem"
private_key = "/nonexistent-floodgate-dir/a.key"

[server.http2]
h2c_listen = ["127.0.0.1:8080"])");
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.tls[0].certificate");
  EXPECT_EQ(format(r.diagnostics[1]),
            "test.toml:7:15: error: server.http2.h2c_listen[0]: \"127.0.0.1:8080\" is not one of "
            "server.listen (with [[server.tls]] entries and no server.listen written, floodgate "
            "has no plain listener); add it to server.listen or remove it from h2c_listen");
}

TEST(ConfigHttp2, DoesNotCompareH2cWithListenersThatHadAnError) {
  // Either listener list, refused, would make every h2c address look unknown.
  const LoadResult plain = load_with(
      "[server]\nlisten = [\"127.0.0.1:99999\"]\n[server.http2]\n"
      "h2c_listen = [\"127.0.0.1:9090\"]");
  ASSERT_EQ(plain.diagnostics.size(), 1u) << dump(plain);
  EXPECT_EQ(plain.diagnostics[0].path, "server.listen[0]");
  const LoadResult tls = load_with(R"([server]
listen = ["127.0.0.1:8080"]
[[server.tls]]
listen = ["127.0.0.1:99999"]
certificate = "/nonexistent-floodgate-dir/a.pem"
private_key = "/nonexistent-floodgate-dir/a.key"
[server.http2]
h2c_listen = ["127.0.0.1:9443"])");
  // The refused address is reported (with the entry's listen then empty); h2c_listen is not.
  ASSERT_FALSE(tls.diagnostics.empty());
  for (const auto& d : tls.diagnostics) {
    EXPECT_EQ(d.path.rfind("server.tls[0].listen", 0), 0u) << dump(tls);
  }
}

TEST(ConfigHttp2, ListsTheKnownKeysForAnUnknownOne) {
  EXPECT_EQ(only(http2("max_streams = 5")),
            "test.toml:2:1: error: server.http2.max_streams: unknown key 'max_streams' in "
            "[server.http2]; expected one of: max_concurrent_streams, min_concurrent_streams, "
            "stream_window, connection_window, max_header_list_bytes, max_continuations, "
            "glitch_threshold, max_frames_per_turn, h2c_listen");
}

TEST(ConfigHttp2, SuggestsTheClosestKeyForATypo) {
  EXPECT_EQ(only(http2("glitch_treshold = 5")),
            "test.toml:2:1: error: server.http2.glitch_treshold: unknown key 'glitch_treshold' "
            "in [server.http2] (did you mean 'glitch_threshold'?); expected one of: "
            "max_concurrent_streams, min_concurrent_streams, stream_window, connection_window, "
            "max_header_list_bytes, max_continuations, glitch_threshold, max_frames_per_turn, "
            "h2c_listen");
}

TEST(ConfigHttp2, TellsWhereAMisplacedKeyBelongs) {
  EXPECT_EQ(only(load_with("[server]\nmax_concurrent_streams = 50")),
            "test.toml:2:1: error: server.max_concurrent_streams: unknown key "
            "'max_concurrent_streams' in [server]; 'max_concurrent_streams' belongs in "
            "[server.http2]");
  EXPECT_EQ(only(http2("max_requests_per_connection = 5")),
            "test.toml:2:1: error: server.http2.max_requests_per_connection: unknown key "
            "'max_requests_per_connection' in [server.http2]; 'max_requests_per_connection' "
            "belongs in [server]");
  EXPECT_EQ(only(load_with("[http2]\nmax_concurrent_streams = 50")),
            "test.toml:1:1: error: http2: unknown key 'http2' in the root table; 'http2' belongs "
            "in [server], as [server.http2]");
  EXPECT_EQ(only(load_with("[server]\nalpn = [\"h2\"]")),
            "test.toml:2:1: error: server.alpn: unknown key 'alpn' in [server]; 'alpn' belongs in "
            "a [[server.tls]] entry");
}

TEST(ConfigHttp2, RefusesAnHttp2ThatIsNotATable) {
  EXPECT_EQ(only(load_with("[server]\nhttp2 = true")),
            "test.toml:2:1: error: server.http2: expected a table, got a boolean (true); e.g. "
            "[server.http2]");
}

TEST(ConfigHttp2, RefusesMaxRequestsPerConnectionOfTheWrongType) {
  EXPECT_EQ(only(load_with("[server]\nmax_requests_per_connection = \"100\"")),
            "test.toml:2:1: error: server.max_requests_per_connection: expected an integer, got "
            "a string (\"100\"); e.g. max_requests_per_connection = 0");
}

TEST(ConfigAlpn, AcceptsEitherProtocolAloneOrInEitherOrder) {
  // Every key valid: the certificate files are read, and only they fail.
  for (const char* value : {R"(["http/1.1"])", R"(["h2"])", R"(["http/1.1", "h2"])"}) {
    const LoadResult r = alpn(value);
    ASSERT_EQ(r.diagnostics.size(), 1u) << value << "\n" << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "server.tls[0].certificate") << value;
  }
}

struct AlpnError {
  std::string_view name;
  std::string_view value;     // of alpn, on line 5
  std::string_view expected;  // the one diagnostic, formatted
};

void PrintTo(const AlpnError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigAlpnErrors : public ::testing::TestWithParam<AlpnError> {};

TEST_P(ConfigAlpnErrors, AreReportedAtTheEntryWithTheFix) {
  EXPECT_EQ(only(alpn(GetParam().value)), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Values, ConfigAlpnErrors,
    ::testing::Values(
        AlpnError{"unknown_protocol", R"(["h2", "spdy/3.1"])",
                  "test.toml:5:15: error: server.tls[0].alpn[1]: \"spdy/3.1\" is not a protocol "
                  "floodgate offers by ALPN; use \"h2\" or \"http/1.1\""},
        AlpnError{"h2c", R"(["h2c"])",
                  "test.toml:5:9: error: server.tls[0].alpn[0]: \"h2c\" is not a protocol "
                  "floodgate offers by ALPN; use \"h2\" or \"http/1.1\" (h2c is HTTP/2 without "
                  "TLS: list the plain listener in server.http2.h2c_listen)"},
        AlpnError{"upper_case", R"(["HTTP/1.1"])",
                  "test.toml:5:9: error: server.tls[0].alpn[0]: \"HTTP/1.1\" is not a protocol "
                  "floodgate offers by ALPN; use \"h2\" or \"http/1.1\" (ALPN names are "
                  "case-sensitive)"},
        AlpnError{"duplicate", R"(["h2", "http/1.1", "h2"])",
                  "test.toml:5:27: error: server.tls[0].alpn[2]: duplicate \"h2\" (same as "
                  "server.tls[0].alpn[0]); remove one of them"},
        AlpnError{"empty", "[]",
                  "test.toml:5:1: error: server.tls[0].alpn: is empty; offer at least one "
                  "protocol, e.g. alpn = [\"h2\", \"http/1.1\"] (the default), or [\"http/1.1\"] "
                  "to keep this certificate's clients on HTTP/1.1"},
        AlpnError{"not_an_array", R"("h2")",
                  "test.toml:5:1: error: server.tls[0].alpn: expected an array of strings, got a "
                  "string (\"h2\"); e.g. alpn = [\"h2\"]"},
        AlpnError{"not_a_string", "[2]",
                  "test.toml:5:9: error: server.tls[0].alpn[0]: expected a string, got an "
                  "integer (2); e.g. \"h2\""}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace floodgate::config
