// Field names are recognised in any case, whatever their length, and nothing else is: the
// parser classifies every field of every head with this.
#include "floodgate/http/field.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace floodgate::http {
namespace {

TEST(FieldClassify, RecognisesEveryKnownNameInAnyCase) {
  const struct {
    std::string_view name;
    Field kind;
  } known[] = {
      {"TE", Field::te},
      {"Via", Field::via},
      {"Host", Field::host},
      {"Expect", Field::expect},
      {"Trailer", Field::trailer},
      {"Upgrade", Field::upgrade},
      {"Connection", Field::connection},
      {"Keep-Alive", Field::keep_alive},
      {"X-Request-Id", Field::x_request_id},
      {"Content-Length", Field::content_length},
      {"X-Forwarded-For", Field::x_forwarded_for},
      {"Proxy-Connection", Field::proxy_connection},
      {"X-Forwarded-Host", Field::x_forwarded_host},
      {"Transfer-Encoding", Field::transfer_encoding},
      {"X-Forwarded-Proto", Field::x_forwarded_proto},
  };
  for (const auto& k : known) {
    std::string upper(k.name);
    std::string lower(k.name);
    for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    EXPECT_EQ(classify(k.name), k.kind) << k.name;
    EXPECT_EQ(classify(upper), k.kind) << upper;
    EXPECT_EQ(classify(lower), k.kind) << lower;
  }
}

// Any other token character, or a byte a token never has but the parser might pass on (a
// field-name is a token: llhttp refuses a CR in one before it is classified).
TEST(FieldClassify, ANameThatDiffersInOneByteAnywhereIsOther) {
  for (const std::string_view name :
       {"host", "upgrade", "content-length", "x-forwarded-for", "transfer-encoding"}) {
    for (std::size_t i = 0; i < name.size(); ++i) {
      for (const char swap : {'_', '~', '^', '@', '`', '0', '!', '\x8d', 'z'}) {
        if (name[i] == swap) continue;
        std::string changed(name);
        changed[i] = swap;
        EXPECT_EQ(classify(changed), Field::other) << changed;
      }
    }
  }
}

TEST(FieldClassify, OtherLengthsAndNearNamesAreOther) {
  EXPECT_EQ(classify(""), Field::other);
  EXPECT_EQ(classify("Hosts"), Field::other);
  EXPECT_EQ(classify("Content-Lengt"), Field::other);
  EXPECT_EQ(classify("Content_Length"), Field::other);
  EXPECT_EQ(classify("X-Forwarded-Fo "), Field::other);
  static_assert(classify("content-LENGTH") == Field::content_length);  // constant evaluation
}

}  // namespace
}  // namespace floodgate::http
