#include "floodgate/http/writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace floodgate::http {
namespace {

TEST(Writer, AppendsTextNumbersAndHeaders) {
  char buf[128];
  Writer w(buf, sizeof buf);
  w.put("a").dec(1234).put(" ").hex(255).put(" ").header("Name", "value");
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(std::string_view(buf, w.size()), "a1234 ff Name: value\r\n");
  EXPECT_EQ(w.room(), sizeof buf - w.size());
  EXPECT_EQ(w.cursor(), buf + w.size());
}

TEST(Writer, WritesTheLargestNumbers) {
  char buf[64];
  Writer w(buf, sizeof buf);
  w.dec(std::numeric_limits<uint64_t>::max()).put(" ").hex(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(std::string_view(buf, w.size()), "18446744073709551615 ffffffffffffffff");
}

TEST(Writer, FillsExactlyToCapacity) {
  char buf[4];
  Writer w(buf, sizeof buf);
  w.put("abcd");
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(w.room(), 0u);
}

TEST(Writer, OverflowIsStickyAndWritesNothingPastTheEnd) {
  char buf[8] = {'#', '#', '#', '#', '#', '#', '#', '#'};
  Writer w(buf, 4);
  w.put("abc").put("de");
  EXPECT_FALSE(w.ok());
  w.put("f");  // fits, but the message is already lost
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(buf[4], '#');
  EXPECT_EQ(buf[5], '#');
}

TEST(Writer, EmptyPutIsANoOpEvenWithANullView) {
  Writer w(nullptr, 0);
  w.put(std::string_view());
  w.put("");
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(w.size(), 0u);
}

TEST(Writer, NumberThatDoesNotFitOverflows) {
  char buf[3];
  Writer w(buf, sizeof buf);
  w.dec(1000);
  EXPECT_FALSE(w.ok());
}

TEST(Writer, AHeaderThatFitsExactlyIsWrittenAndOneByteMoreOverflowsWithNothingWritten) {
  char buf[16];
  Writer exact(buf, sizeof buf);
  exact.header("Name", "value-xx");  // 4 + 2 + 8 + 2 = 16
  EXPECT_TRUE(exact.ok());
  EXPECT_EQ(std::string_view(buf, exact.size()), "Name: value-xx\r\n");
  Writer over(buf, sizeof buf);
  over.header("Name", "value-xxx");
  EXPECT_FALSE(over.ok());
  EXPECT_EQ(over.size(), 0u);
}

TEST(Writer, AHeaderWithAnEmptyValueHasItsSeparatorAndLineEnd) {
  char buf[32];
  Writer w(buf, sizeof buf);
  w.header("X-Empty", std::string_view{});
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(std::string_view(buf, w.size()), "X-Empty: \r\n");
}

}  // namespace
}  // namespace floodgate::http
