#include "floodgate/core/reason.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace floodgate {
namespace {

TEST(Reason, NoneHasNoNameAndNoStatus) {
  EXPECT_EQ(info(Reason::none).name, "");
  EXPECT_EQ(info(Reason::none).status, 0);
}

TEST(Reason, EveryReasonHasAUniqueNameAnErrorStatusAPhraseAndABody) {
  std::set<std::string_view> names;
  for (std::size_t i = 1; i < kReasonCount; ++i) {
    const ReasonInfo& ri = info(static_cast<Reason>(i));
    EXPECT_FALSE(ri.name.empty()) << i;
    EXPECT_TRUE(names.insert(ri.name).second) << ri.name;
    EXPECT_GE(ri.status, 400) << ri.name;
    EXPECT_LE(ri.status, 599) << ri.name;
    EXPECT_FALSE(ri.phrase.empty()) << ri.name;
    EXPECT_FALSE(ri.body.empty()) << ri.name;
    EXPECT_EQ(ri.body.find('\n'), std::string_view::npos) << ri.name;
  }
}

TEST(Reason, TableRowsMatchTheEnumerators) {
  EXPECT_EQ(info(Reason::bad_request).name, "bad_request");
  EXPECT_EQ(info(Reason::header_timeout).status, 408);
  EXPECT_EQ(info(Reason::body_too_large).status, 413);
  EXPECT_EQ(info(Reason::uri_too_long).status, 414);
  EXPECT_EQ(info(Reason::header_too_large).status, 431);
  EXPECT_EQ(info(Reason::no_route).status, 404);
  EXPECT_EQ(info(Reason::upstream_connect_failed).status, 502);
  EXPECT_EQ(info(Reason::upstream_reset).status, 502);
  EXPECT_EQ(info(Reason::upstream_bad_response).status, 502);
  EXPECT_EQ(info(Reason::upstream_connect_timeout).status, 504);
  EXPECT_EQ(info(Reason::upstream_timeout).name, "upstream_timeout");
  EXPECT_EQ(info(Reason::upstream_timeout).status, 504);
}

}  // namespace
}  // namespace floodgate
