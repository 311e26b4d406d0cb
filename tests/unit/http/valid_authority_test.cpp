#include <gtest/gtest.h>

#include "floodgate/http/rewrite.h"

namespace floodgate::http {
namespace {

TEST(ValidAuthority, AcceptsNamesAndIpv4WithOrWithoutAPort) {
  EXPECT_TRUE(valid_authority("example.com"));
  EXPECT_TRUE(valid_authority("Ex-1_a~b.example"));
  EXPECT_TRUE(valid_authority("192.0.2.1:8080"));
  EXPECT_TRUE(valid_authority("example.com:1"));
}

TEST(ValidAuthority, AcceptsBracketedIpv6Literals) {
  EXPECT_TRUE(valid_authority("[::1]"));
  EXPECT_TRUE(valid_authority("[::1]:8080"));
  EXPECT_TRUE(valid_authority("[2001:DB8::ffff:192.0.2.1]:443"));
}

TEST(ValidAuthority, AcceptsAnEmptyPortAndPortsUpTo65535) {
  EXPECT_TRUE(valid_authority("example.com:"));
  EXPECT_TRUE(valid_authority("example.com:0"));
  EXPECT_TRUE(valid_authority("example.com:65535"));
  EXPECT_TRUE(valid_authority("example.com:0065535"));
}

TEST(ValidAuthority, RefusesPortsAbove65535OrWithNonDigits) {
  EXPECT_FALSE(valid_authority("example.com:65536"));
  EXPECT_FALSE(valid_authority("example.com:99999999999999999999999"));
  EXPECT_FALSE(valid_authority("example.com:80a"));
  EXPECT_FALSE(valid_authority("example.com:+80"));
  EXPECT_FALSE(valid_authority("example.com:80:81"));
  EXPECT_FALSE(valid_authority("[::1]:65536"));
}

TEST(ValidAuthority, RefusesUserinfoSpacesSlashesAndLists) {
  EXPECT_FALSE(valid_authority("user:pw@example.com"));
  EXPECT_FALSE(valid_authority("user@example.com"));
  EXPECT_FALSE(valid_authority("exa mple.com"));
  EXPECT_FALSE(valid_authority("example.com/x"));
  EXPECT_FALSE(valid_authority("a.example,b.example"));
  EXPECT_FALSE(valid_authority("a%2eexample"));
  EXPECT_FALSE(valid_authority("a\\b"));
}

TEST(ValidAuthority, RefusesMalformedIpLiteralsAndAMissingHost) {
  EXPECT_FALSE(valid_authority(""));
  EXPECT_FALSE(valid_authority(":80"));
  EXPECT_FALSE(valid_authority("::1"));
  EXPECT_FALSE(valid_authority("[::1"));
  EXPECT_FALSE(valid_authority("[]"));
  EXPECT_FALSE(valid_authority("[1.2.3.4]"));
  EXPECT_FALSE(valid_authority("[v1.x]"));
  EXPECT_FALSE(valid_authority("[fe80::1%25eth0]"));
  EXPECT_FALSE(valid_authority("[::1]x"));
}

}  // namespace
}  // namespace floodgate::http
