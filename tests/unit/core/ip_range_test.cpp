#include "floodgate/core/ip_range.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate {
namespace {

IpAddress addr(std::string_view text) {
  const auto a = IpAddress::parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

IpRange range(std::string_view text) {
  const auto r = IpRange::parse(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r.value_or(IpRange{});
}

// --- addresses ---------------------------------------------------------------------------------

TEST(IpAddress, HoldsAnIpv4AddressInItsMappedIpv6Form) {
  EXPECT_EQ(addr("10.1.2.3"), addr("::ffff:10.1.2.3"));
  EXPECT_EQ(addr("10.1.2.3").bytes,
            (std::array<uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3}));
}

TEST(IpAddress, ParsesIpv6InAnySpelling) {
  EXPECT_EQ(addr("2001:db8::1"), addr("2001:0DB8:0:0:0:0:0:0001"));
  EXPECT_NE(addr("::1"), addr("0.0.0.1"));
}

TEST(IpAddress, RefusesWhatIsNotAnAddressLiteral) {
  for (const std::string_view text :
       {"", "localhost", "example.com", "10.0.0", "10.0.0.256", "10.0.0.1:80", "[::1]",
        "fe80::1%eth0", "::1/128", " 10.0.0.1", "10.0.0.1 ", "1.2.3.4.5", "gggg::1"}) {
    EXPECT_FALSE(IpAddress::parse(text).has_value()) << text;
  }
}

TEST(IpAddress, RefusesATextLongerThanAnyAddressWithoutReadingPastIt) {
  EXPECT_FALSE(IpAddress::parse(std::string(64, '1')).has_value());
  EXPECT_FALSE(IpAddress::parse(std::string(1000, ':')).has_value());
}

TEST(IpAddress, ReadsBothFamiliesOfSocketAddress) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr);
  EXPECT_EQ(IpAddress::of(reinterpret_cast<const sockaddr*>(&v4)), addr("192.0.2.7"));
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "2001:db8::7", &v6.sin6_addr);
  EXPECT_EQ(IpAddress::of(reinterpret_cast<const sockaddr*>(&v6)), addr("2001:db8::7"));
}

TEST(IpAddress, ReadsAMappedPeerOfADualStackListenerAsItsIpv4Address) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:10.0.0.1", &v6.sin6_addr);
  EXPECT_EQ(IpAddress::of(reinterpret_cast<const sockaddr*>(&v6)), addr("10.0.0.1"));
}

TEST(IpAddress, HasNoAddressForAnotherFamilyOrNone) {
  sockaddr_un local{};
  local.sun_family = AF_UNIX;
  EXPECT_FALSE(IpAddress::of(reinterpret_cast<const sockaddr*>(&local)).has_value());
  EXPECT_FALSE(IpAddress::of(nullptr).has_value());
}

// --- ranges ------------------------------------------------------------------------------------

TEST(IpRange, MatchesTheIpv4AddressesOfItsPrefix) {
  const IpRange r = range("10.0.0.0/8");
  EXPECT_EQ(r.prefix, 96 + 8);
  EXPECT_TRUE(r.contains(addr("10.0.0.0")));
  EXPECT_TRUE(r.contains(addr("10.255.255.255")));
  EXPECT_FALSE(r.contains(addr("11.0.0.0")));
  EXPECT_FALSE(r.contains(addr("9.255.255.255")));
}

TEST(IpRange, MatchesAPrefixThatEndsInsideAByte) {
  const IpRange r = range("192.168.4.0/22");
  EXPECT_TRUE(r.contains(addr("192.168.4.1")));
  EXPECT_TRUE(r.contains(addr("192.168.7.255")));
  EXPECT_FALSE(r.contains(addr("192.168.8.0")));
  EXPECT_FALSE(r.contains(addr("192.168.3.255")));
}

TEST(IpRange, MatchesTheIpv6AddressesOfItsPrefix) {
  const IpRange r = range("2001:db8::/32");
  EXPECT_EQ(r.prefix, 32);
  EXPECT_TRUE(r.contains(addr("2001:db8:ffff::1")));
  EXPECT_FALSE(r.contains(addr("2001:db9::1")));
  EXPECT_FALSE(r.contains(addr("10.0.0.1")));
}

TEST(IpRange, MatchesAnIpv4MappedPeerByAnIpv4Range) {
  EXPECT_TRUE(range("10.0.0.0/8").contains(addr("::ffff:10.20.30.40")));
  EXPECT_TRUE(range("192.0.2.7").contains(addr("::ffff:192.0.2.7")));
  EXPECT_FALSE(range("10.0.0.0/8").contains(addr("::10.20.30.40")));  // IPv4-compatible, not mapped
}

TEST(IpRange, TakesALoneAddressAsItsWholeWidth) {
  EXPECT_EQ(range("192.0.2.7"), range("192.0.2.7/32"));
  EXPECT_EQ(range("192.0.2.7").prefix, 128);
  EXPECT_EQ(range("::1"), range("::1/128"));
  EXPECT_TRUE(range("::1").contains(addr("::1")));
  EXPECT_FALSE(range("::1").contains(addr("::2")));
  EXPECT_FALSE(range("192.0.2.7").contains(addr("192.0.2.8")));
}

TEST(IpRange, MatchesEveryIpv4AddressWithAZeroIpv4Prefix) {
  const IpRange r = range("0.0.0.0/0");
  EXPECT_EQ(r.prefix, 96);
  EXPECT_TRUE(r.contains(addr("0.0.0.0")));
  EXPECT_TRUE(r.contains(addr("255.255.255.255")));
  EXPECT_FALSE(r.contains(addr("::1")));
}

TEST(IpRange, MatchesEveryAddressWithAZeroIpv6Prefix) {
  const IpRange r = range("::/0");
  EXPECT_EQ(r.prefix, 0);
  EXPECT_TRUE(r.contains(addr("::1")));
  EXPECT_TRUE(r.contains(addr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_TRUE(r.contains(addr("10.0.0.1")));
}

TEST(IpRange, ClearsTheBitsPastThePrefix) {
  EXPECT_EQ(range("10.1.2.3/8"), range("10.0.0.0/8"));
  EXPECT_EQ(range("10.1.2.3/8").base, addr("10.0.0.0"));
  EXPECT_EQ(range("192.168.7.9/22").base, addr("192.168.4.0"));
  EXPECT_EQ(range("2001:db8:1234::1/32").base, addr("2001:db8::"));
  EXPECT_EQ(range("10.1.2.3/0").base, addr("0.0.0.0"));
}

TEST(IpRange, WritesAnIpv4PrefixOfAMappedAddressInIpv6Bits) {
  // Written with ':', the prefix counts all 128 bits: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
  EXPECT_EQ(range("::ffff:10.0.0.0/104"), range("10.0.0.0/8"));
}

TEST(IpRange, RefusesAPrefixPastTheFamilysWidth) {
  EXPECT_FALSE(IpRange::parse("10.0.0.0/33").has_value());
  EXPECT_FALSE(IpRange::parse("::/129").has_value());
  EXPECT_TRUE(IpRange::parse("::ffff:10.0.0.0/128").has_value());
}

TEST(IpRange, RefusesAPrefixThatIsNotADecimalNumber) {
  for (const std::string_view text :
       {"10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8a", "10.0.0.0/ 8", "10.0.0.0/8/8",
        "10.0.0.0/0x8", "::/1e2", "10.0.0.0/99999999999999999999"}) {
    EXPECT_FALSE(IpRange::parse(text).has_value()) << text;
  }
}

TEST(IpRange, RefusesHostNamesAndOtherNonAddresses) {
  for (const std::string_view text : {"", "/8", "localhost", "proxy.internal/24", "[::1]",
                                      "[::1]/128", "10.0.0.1:80", "*", "10.0.0.*"}) {
    EXPECT_FALSE(IpRange::parse(text).has_value()) << text;
  }
}

}  // namespace
}  // namespace floodgate
