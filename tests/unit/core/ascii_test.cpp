#include "floodgate/core/ascii.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::ascii {
namespace {

std::vector<std::string> tokens(std::string_view value) {
  std::vector<std::string> out;
  for_each_token(value, [&](std::string_view t) { out.emplace_back(t); });
  return out;
}

// Formats into a buffer pre-filled with a sentinel, so writes past the length show up.
template <class Format>
std::string formatted(Format format, uint64_t v) {
  char buf[32];
  std::memset(buf, '#', sizeof buf);
  const std::size_t n = format(v, buf);
  EXPECT_EQ(buf[n], '#') << "wrote past the returned length";
  return std::string(buf, n);
}

TEST(Ascii, IequalsIgnoresLetterCase) {
  EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
  EXPECT_TRUE(iequals("", ""));
  EXPECT_FALSE(iequals("host", "hosts"));
  EXPECT_FALSE(iequals("host", "hose"));
}

TEST(Ascii, IequalsFoldsOnlyLetters) {
  // '@' and '`', '[' and '{' differ by 0x20 like letters do, but are not letters.
  EXPECT_FALSE(iequals("@", "`"));
  EXPECT_FALSE(iequals("[", "{"));
  EXPECT_FALSE(iequals("-", "\r"));
}

TEST(Ascii, IequalsIsUsableAtCompileTime) {
  static_assert(iequals("TE", "te"));
}

TEST(Ascii, TrimRemovesSpacesAndTabsAtBothEnds) {
  EXPECT_EQ(trim(" \t value \t "), "value");
  EXPECT_EQ(trim("a b"), "a b");
  EXPECT_EQ(trim("  inner  space  "), "inner  space");
}

TEST(Ascii, TrimOfBlankIsEmpty) {
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t \t"), "");
}

TEST(Ascii, TrimKeepsOtherWhitespace) {
  EXPECT_EQ(trim("\r\nx\n"), "\r\nx\n");
}

TEST(Ascii, ForEachTokenSplitsOnCommasAndTrims) {
  EXPECT_EQ(tokens("keep-alive, Upgrade"), (std::vector<std::string>{"keep-alive", "Upgrade"}));
  EXPECT_EQ(tokens("\tclose\t,\t x-a "), (std::vector<std::string>{"close", "x-a"}));
}

TEST(Ascii, ForEachTokenSkipsEmptyElements) {
  EXPECT_EQ(tokens(",a,,b, ,\t,c,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(tokens("").empty());
  EXPECT_TRUE(tokens(",").empty());
  EXPECT_TRUE(tokens(" , \t ,, ").empty());
}

TEST(Ascii, ForEachTokenKeepsInnerSpaces) {
  EXPECT_EQ(tokens("a b, c"), (std::vector<std::string>{"a b", "c"}));
}

TEST(Ascii, FormatHexWritesLowerCaseWithoutLeadingZeros) {
  EXPECT_EQ(formatted(format_hex, 0), "0");
  EXPECT_EQ(formatted(format_hex, 0xf), "f");
  EXPECT_EQ(formatted(format_hex, 0x10), "10");
  EXPECT_EQ(formatted(format_hex, 0xABCDEF), "abcdef");
  EXPECT_EQ(formatted(format_hex, std::numeric_limits<uint64_t>::max()), "ffffffffffffffff");
  EXPECT_EQ(formatted(format_hex, uint64_t{1} << 63), "8000000000000000");
}

TEST(Ascii, FormatDecWritesWithoutLeadingZeros) {
  EXPECT_EQ(formatted(format_dec, 0), "0");
  EXPECT_EQ(formatted(format_dec, 9), "9");
  EXPECT_EQ(formatted(format_dec, 10), "10");
  EXPECT_EQ(formatted(format_dec, 1'000'000), "1000000");
  EXPECT_EQ(formatted(format_dec, std::numeric_limits<uint64_t>::max()), "18446744073709551615");
}

}  // namespace
}  // namespace floodgate::ascii
