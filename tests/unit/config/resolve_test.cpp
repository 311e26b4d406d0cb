// config::resolve_server: the addresses a server's host name becomes. Only numeric hosts here,
// which getaddrinfo answers without a lookup; names are resolved end to end, in a mount
// namespace with a hosts file of the test's own, by tests/integration/test_backends_by_name.py.
#include "floodgate/config/resolve.h"

#include <gtest/gtest.h>

namespace floodgate::config {
namespace {

TEST(ResolveServer, GivesEachAddressWithThePortAndTheTextItIsLabelledBy) {
  const Resolution v4 = resolve_server("127.0.0.1", 9000);
  ASSERT_TRUE(v4.error.empty()) << v4.error;
  ASSERT_EQ(v4.addresses.size(), 1U);
  EXPECT_EQ(v4.addresses[0], (Endpoint{"127.0.0.1", 9000, "127.0.0.1:9000"}));
  const Resolution v6 = resolve_server("::1", 80);
  ASSERT_EQ(v6.addresses.size(), 1U) << v6.error;
  EXPECT_EQ(v6.addresses[0], (Endpoint{"::1", 80, "[::1]:80"}));
  EXPECT_EQ(v6.left_out, 0U);
}

TEST(ResolveServer, ListsAddressesForMessagesInOrder) {
  EXPECT_EQ(address_list({Endpoint{"10.0.0.5", 1, "10.0.0.5:1"}, Endpoint{"::1", 1, "[::1]:1"}}),
            "10.0.0.5:1, [::1]:1");
  EXPECT_EQ(address_list({}), "");
}

}  // namespace
}  // namespace floodgate::config
