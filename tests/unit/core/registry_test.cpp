// Registry: one entry per name across generations, kept for the process's life or while held.
#include "floodgate/core/registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace floodgate {
namespace {

struct Counter {
  int value = 0;
};

TEST(Registry, TheSameNameGetsTheSameEntry) {
  Registry<std::string, Counter, Retention::process> r;
  int made = 0;
  auto make = [&] {
    ++made;
    return std::make_shared<Counter>();
  };
  auto a = r.get("app", make);
  a->value = 7;
  EXPECT_EQ(r.get("app", make)->value, 7);
  EXPECT_NE(r.get("api", make), a);
  EXPECT_EQ(made, 2);
}

TEST(Registry, ProcessRetentionKeepsAnEntryNobodyHolds) {
  Registry<std::string, Counter, Retention::process> r;
  auto make = [] { return std::make_shared<Counter>(); };
  r.get("app", make)->value = 3;  // the only holder lets go at once
  r.sweep();
  EXPECT_EQ(r.get("app", make)->value, 3);
}

TEST(Registry, ReferencedRetentionKeepsAnEntryWhileItIsHeld) {
  Registry<std::string, Counter, Retention::referenced> r;
  auto make = [] { return std::make_shared<Counter>(); };
  auto held = r.get("b1", make);
  held->value = 5;
  r.sweep();
  EXPECT_EQ(r.get("b1", make)->value, 5);
  EXPECT_EQ(r.size(), 1u);
}

TEST(Registry, ReferencedRetentionStartsAfreshOnceNobodyHoldsIt) {
  Registry<std::string, Counter, Retention::referenced> r;
  auto make = [] { return std::make_shared<Counter>(); };
  r.get("b1", make)->value = 5;
  r.sweep();
  EXPECT_EQ(r.size(), 0u);
  EXPECT_EQ(r.get("b1", make)->value, 0);
}

}  // namespace
}  // namespace floodgate
