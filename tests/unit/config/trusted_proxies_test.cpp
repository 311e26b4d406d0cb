// server.trusted_proxies: the peers whose X-Forwarded-For a client_ip key source believes
// (issue 15). Addresses and CIDR ranges of both families, every refusal with the message the
// operator sees, and the warnings for entries that trust too much or not what they look like.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"
#include "floodgate/core/ip_range.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::only;

// `[server]` on line 1 and trusted_proxies = `value` on line 2, then a valid document.
LoadResult proxies(std::string_view value) {
  return testing::load_with("[server]\ntrusted_proxies = " + std::string(value));
}

IpRange range(std::string_view text) {
  return IpRange::parse(text).value();
}

TEST(ConfigTrustedProxies, ReadsAddressesAndRangesOfBothFamilies) {
  const LoadResult r = proxies(R"(["10.0.0.0/8", "192.0.2.7", "::1", "2001:db8::/32"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->server.trusted_proxies,
            (std::vector<IpRange>{range("10.0.0.0/8"), range("192.0.2.7/32"), range("::1/128"),
                                  range("2001:db8::/32")}));
}

TEST(ConfigTrustedProxies, AcceptsAnEmptyList) {
  const LoadResult r = proxies("[]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.config->server.trusted_proxies.empty());
}

TEST(ConfigTrustedProxies, MatchesAnIpv4PeerThatReachesADualStackListener) {
  const LoadResult r = proxies(R"(["10.0.0.0/8"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  const IpRange& trusted = r.config->server.trusted_proxies.at(0);
  EXPECT_TRUE(trusted.contains(IpAddress::parse("::ffff:10.9.8.7").value()));
  EXPECT_FALSE(trusted.contains(IpAddress::parse("11.0.0.1").value()));
}

struct ProxyError {
  std::string_view name;
  std::string_view value;     // of trusted_proxies, on line 2
  std::string_view expected;  // the one diagnostic, formatted
};

void PrintTo(const ProxyError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigTrustedProxyErrors : public ::testing::TestWithParam<ProxyError> {};

TEST_P(ConfigTrustedProxyErrors, AreReportedAtTheEntryWithTheFix) {
  EXPECT_EQ(only(proxies(GetParam().value)), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Entries, ConfigTrustedProxyErrors,
    ::testing::Values(
        ProxyError{"host_name", R"(["10.0.0.1", "proxy.internal"])",
                   "test.toml:2:32: error: server.trusted_proxies[1]: \"proxy.internal\" is a "
                   "host name; trusted_proxies takes IP addresses and CIDR ranges only "
                   "(floodgate never resolves names): write the proxy's address, e.g. "
                   "\"10.0.0.7\", or its network, e.g. \"10.0.0.0/8\""},
        ProxyError{"localhost", R"(["localhost"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"localhost\" is a host "
                   "name; trusted_proxies takes IP addresses and CIDR ranges only (floodgate "
                   "never resolves names): write the proxy's address, e.g. \"10.0.0.7\", or its "
                   "network, e.g. \"10.0.0.0/8\""},
        ProxyError{"ipv4_prefix_too_long", R"(["10.0.0.0/33"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"10.0.0.0/33\": the "
                   "prefix length after '/' must be a number from 0 to 32 for an IPv4 address, "
                   "e.g. \"10.0.0.0/8\""},
        ProxyError{"ipv6_prefix_too_long", R"(["2001:db8::/129"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"2001:db8::/129\": the "
                   "prefix length after '/' must be a number from 0 to 128 for an IPv6 address, "
                   "e.g. \"2001:db8::/32\""},
        ProxyError{"prefix_not_a_number", R"(["10.0.0.0/8a"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"10.0.0.0/8a\": the "
                   "prefix length after '/' must be a number from 0 to 32 for an IPv4 address, "
                   "e.g. \"10.0.0.0/8\""},
        ProxyError{"prefix_empty", R"(["10.0.0.0/"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"10.0.0.0/\": the prefix "
                   "length after '/' must be a number from 0 to 32 for an IPv4 address, e.g. "
                   "\"10.0.0.0/8\""},
        ProxyError{"negative_prefix", R"(["::1/-1"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"::1/-1\": the prefix "
                   "length after '/' must be a number from 0 to 128 for an IPv6 address, e.g. "
                   "\"2001:db8::/32\""},
        ProxyError{"brackets", R"(["[::1]"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"[::1]\" is not an IP "
                   "address or CIDR range; write an IPv4 or IPv6 address without brackets or "
                   "port (\"10.0.0.7\", \"::1\"), or a range (\"10.0.0.0/8\", "
                   "\"2001:db8::/32\")"},
        ProxyError{"port", R"(["10.0.0.1:80"])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"10.0.0.1:80\" is not an "
                   "IP address or CIDR range; write an IPv4 or IPv6 address without brackets or "
                   "port (\"10.0.0.7\", \"::1\"), or a range (\"10.0.0.0/8\", "
                   "\"2001:db8::/32\")"},
        ProxyError{"empty", R"([""])",
                   "test.toml:2:20: error: server.trusted_proxies[0]: \"\" is not an IP address "
                   "or CIDR range; write an IPv4 or IPv6 address without brackets or port "
                   "(\"10.0.0.7\", \"::1\"), or a range (\"10.0.0.0/8\", \"2001:db8::/32\")"},
        ProxyError{"not_a_string", "[8]",
                   "test.toml:2:20: error: server.trusted_proxies[0]: expected a string (an IP "
                   "address or CIDR range), got an integer (8); e.g. \"10.0.0.0/8\""},
        ProxyError{"not_an_array", R"("10.0.0.0/8")",
                   "test.toml:2:1: error: server.trusted_proxies: expected an array of IP "
                   "addresses and CIDR ranges, got a string (\"10.0.0.0/8\"); e.g. "
                   "trusted_proxies = [\"10.0.0.0/8\"]"},
        ProxyError{"duplicate", R"(["10.0.0.1", "::ffff:10.0.0.1"])",
                   "test.toml:2:32: error: server.trusted_proxies[1]: duplicate "
                   "\"::ffff:10.0.0.1\" (same as server.trusted_proxies[0]); remove one of "
                   "them"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigTrustedProxies, ReportsEveryBadEntryAndKeepsNone) {
  const LoadResult r = proxies(R"(["10.0.0.0/8", "a.b", "::1/200"])");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 2u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "server.trusted_proxies[1]");
  EXPECT_EQ(r.diagnostics[1].path, "server.trusted_proxies[2]");
}

TEST(ConfigTrustedProxies, WarnsOfBitsPastThePrefixAndKeepsTheRange) {
  const LoadResult r = proxies(R"(["10.1.2.3/8", "2001:db8::1/32"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->server.trusted_proxies,
            (std::vector<IpRange>{range("10.0.0.0/8"), range("2001:db8::/32")}));
  EXPECT_EQ(dump(r),
            "test.toml:2:20: warning: server.trusted_proxies[0]: \"10.1.2.3/8\" has bits set "
            "past its prefix, so it is the range \"10.0.0.0/8\"; write \"10.0.0.0/8\", or "
            "\"10.1.2.3\" for that one address\n"
            "test.toml:2:34: warning: server.trusted_proxies[1]: \"2001:db8::1/32\" has bits set "
            "past its prefix, so it is the range \"2001:db8::/32\"; write \"2001:db8::/32\", or "
            "\"2001:db8::1\" for that one address\n");
}

TEST(ConfigTrustedProxies, WarnsOfARangeThatTrustsEveryPeer) {
  const LoadResult r = proxies(R"(["0.0.0.0/0", "::/0"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(dump(r),
            "test.toml:2:20: warning: server.trusted_proxies[0]: \"0.0.0.0/0\" trusts every IPv4 "
            "peer, so any client can choose the address a client_ip key counts it by, with an "
            "X-Forwarded-For of its own; list only the addresses of the proxies in front of "
            "floodgate\n"
            "test.toml:2:33: warning: server.trusted_proxies[1]: \"::/0\" trusts every peer, so "
            "any client can choose the address a client_ip key counts it by, with an "
            "X-Forwarded-For of its own; list only the addresses of the proxies in front of "
            "floodgate\n");
}

TEST(ConfigTrustedProxies, DoesNotWarnOfAWideRangeThatIsNotEveryPeer) {
  const LoadResult r = proxies(R"(["0.0.0.0/1", "128.0.0.0/1", "8000::/1"])");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

}  // namespace
}  // namespace floodgate::config
