#include "floodgate/routing/match_path.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate {
namespace {

// The normalised path of `target`, or "<malformed>" / "<above_root>".
std::string normal(std::string_view target) {
  MatchPath p;
  switch (p.assign(target)) {
    case PathVerdict::ok:
      return std::string(p.view());
    case PathVerdict::malformed:
      return "<malformed>";
    case PathVerdict::above_root:
      return "<above_root>";
  }
  return "?";
}

TEST(MatchPath, AnAlreadyNormalPathIsUsedInPlace) {
  const std::string_view target = "/api/v1/items?x=/../y";
  MatchPath p;
  ASSERT_EQ(p.assign(target), PathVerdict::ok);
  EXPECT_EQ(p.view(), "/api/v1/items");
  EXPECT_EQ(p.view().data(), target.data());
}

TEST(MatchPath, TheQueryIsExcluded) {
  EXPECT_EQ(normal("/a?b"), "/a");
  EXPECT_EQ(normal("/a//b?c//d"), "/a/b");
  EXPECT_EQ(normal("/?x"), "/");
}

TEST(MatchPath, DotSegmentsAreResolved) {
  EXPECT_EQ(normal("/x/../admin"), "/admin");
  EXPECT_EQ(normal("/./admin"), "/admin");
  EXPECT_EQ(normal("/a/b/./c/../d"), "/a/b/d");
  EXPECT_EQ(normal("/a/b/.."), "/a/");
  EXPECT_EQ(normal("/a/b/."), "/a/b/");
  EXPECT_EQ(normal("/a/.."), "/");
  EXPECT_EQ(normal("/."), "/");
}

TEST(MatchPath, NamesThatOnlyStartWithADotAreKept) {
  EXPECT_EQ(normal("/.well-known/x"), "/.well-known/x");
  EXPECT_EQ(normal("/a/..b/.c"), "/a/..b/.c");
  EXPECT_EQ(normal("/a/.../b"), "/a/.../b");
}

TEST(MatchPath, RepeatedSlashesAreMerged) {
  EXPECT_EQ(normal("//admin"), "/admin");
  EXPECT_EQ(normal("/a///b//"), "/a/b/");
  EXPECT_EQ(normal("//"), "/");
  EXPECT_EQ(normal("/a//../b"), "/b");
}

TEST(MatchPath, UnreservedCharactersArePercentDecoded) {
  EXPECT_EQ(normal("/%61dmin"), "/admin");
  EXPECT_EQ(normal("/%41%7a%30%2D%2e%5F%7E"), "/Az0-._~");
}

TEST(MatchPath, OtherPercentEncodingsAreKeptWithUpperCaseHex) {
  EXPECT_EQ(normal("/a%2fb"), "/a%2Fb");
  EXPECT_EQ(normal("/a%2Fb"), "/a%2Fb");
  EXPECT_EQ(normal("/%c3%a9"), "/%C3%A9");
  EXPECT_EQ(normal("/%00"), "/%00");
}

TEST(MatchPath, EncodedDotsAreDotSegments) {
  EXPECT_EQ(normal("/x/%2e%2e/admin"), "/admin");
  EXPECT_EQ(normal("/x/.%2E/admin"), "/admin");
  EXPECT_EQ(normal("/%2e/admin"), "/admin");
  EXPECT_EQ(normal("/x/%2e%2e%2e/a"), "/x/.../a");
}

TEST(MatchPath, APathThatClimbsAboveTheRootIsRefused) {
  EXPECT_EQ(normal("/.."), "<above_root>");
  EXPECT_EQ(normal("/../admin"), "<above_root>");
  EXPECT_EQ(normal("/a/../../admin"), "<above_root>");
  EXPECT_EQ(normal("//../admin"), "<above_root>");
  EXPECT_EQ(normal("/%2e%2e/admin"), "<above_root>");
}

TEST(MatchPath, AMalformedPercentEncodingIsRefused) {
  EXPECT_EQ(normal("/a%zz"), "<malformed>");
  EXPECT_EQ(normal("/a%4"), "<malformed>");
  EXPECT_EQ(normal("/a%"), "<malformed>");
  EXPECT_EQ(normal("/a%4/b"), "<malformed>");
}

TEST(MatchPath, ATargetThatIsNotAPathIsRefused) {
  EXPECT_EQ(normal(""), "<malformed>");
  EXPECT_EQ(normal("*"), "<malformed>");
  EXPECT_EQ(normal("?q"), "<malformed>");
}

TEST(MatchPath, ALongPathKeepsItsFirstBytesExactly) {
  const std::string head = "/" + std::string(kMaxPathPrefixBytes + 100, 'a');
  const std::string result = normal(head + "//x");
  EXPECT_EQ(result, head.substr(0, kMaxPathPrefixBytes));
}

TEST(MatchPath, DotDotAfterALongSegmentReturnsIntoTheBuffer) {
  const std::string longseg = std::string(3 * kMaxPathPrefixBytes, 'z');
  EXPECT_EQ(normal("/a/" + longseg + "/b/c/../../../admin/%61"), "/a/admin/a");
  EXPECT_EQ(normal("//" + longseg + "/../../x"), "<above_root>");
}

TEST(MatchPath, SegmentsBeyondTheBufferAreStillCountedForTheRoot) {
  std::string target = "/./" + std::string(kMaxPathPrefixBytes, 'q');
  for (int i = 0; i < 50; ++i) target += "/s";
  for (int i = 0; i < 51; ++i) target += "/..";
  EXPECT_EQ(normal(target), "/");
  EXPECT_EQ(normal(target + "/.."), "<above_root>");
}

}  // namespace
}  // namespace floodgate
