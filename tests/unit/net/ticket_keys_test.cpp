// The TLS session ticket keys: which key a ticket opens with after rotations, and lock-free
// reading while the main thread rotates.
#include "floodgate/net/ticket_keys.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace floodgate::net {
namespace {

using Key = TicketKeys::Key;

TEST(TicketKeys, TheCurrentKeyOpensItsTicketsWithoutRenewal) {
  const TicketKeys keys;
  const Key k = keys.current();
  const auto found = keys.find(k.name.data());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->key, k);
  EXPECT_FALSE(found->renew);
}

TEST(TicketKeys, AfterOneRotationTheOldKeyStillOpensItsTicketsAndAsksForANewOne) {
  TicketKeys keys;
  const Key old = keys.current();
  ASSERT_TRUE(keys.rotate());
  EXPECT_NE(keys.current(), old);
  const auto found = keys.find(old.name.data());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->key, old);
  EXPECT_TRUE(found->renew);
  const auto fresh = keys.find(keys.current().name.data());
  ASSERT_TRUE(fresh.has_value());
  EXPECT_FALSE(fresh->renew);
}

TEST(TicketKeys, AfterTwoRotationsTheOldKeyIsForgotten) {
  TicketKeys keys;
  const Key old = keys.current();
  ASSERT_TRUE(keys.rotate());
  ASSERT_TRUE(keys.rotate());
  EXPECT_FALSE(keys.find(old.name.data()).has_value());
}

TEST(TicketKeys, EveryRotationMakesANewNameAndNewSecrets) {
  TicketKeys keys;
  std::set<std::array<unsigned char, TicketKeys::kNameBytes>> names;
  std::set<std::array<unsigned char, TicketKeys::kSecretBytes>> secrets;
  for (int i = 0; i < 10; ++i) {
    const Key k = keys.current();
    names.insert(k.name);
    secrets.insert(k.aes);
    secrets.insert(k.hmac);
    ASSERT_TRUE(keys.rotate());
  }
  EXPECT_EQ(names.size(), 10U);
  EXPECT_EQ(secrets.size(), 20U);
}

TEST(TicketKeys, AnUnknownNameOpensNothing) {
  const TicketKeys keys;
  const std::array<unsigned char, TicketKeys::kNameBytes> name{};
  EXPECT_FALSE(keys.find(name.data()).has_value());
}

// Reactors read while the main thread rotates: every key read whole (a torn read would give
// a name with another key's secrets), never a lock.
TEST(TicketKeys, ReadersSeeWholeKeysWhileTheKeysRotate) {
  TicketKeys keys;
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed) || reads.load() < 1000) {
        const Key k = keys.current();
        if (const auto found = keys.find(k.name.data()); found && found->key != k) {
          mismatches.fetch_add(1);
        }
        reads.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(keys.rotate());
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace floodgate::net
