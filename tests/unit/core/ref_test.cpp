#include "floodgate/core/ref.h"

#include <gtest/gtest.h>

#include <utility>

namespace floodgate {
namespace {

// Counts its own destruction, so a test can see when the last Ref let go.
class Tracked : public RefCounted<Tracked> {
 public:
  explicit Tracked(int& destroyed) : destroyed_(destroyed) {}
  ~Tracked() { ++destroyed_; }

 private:
  int& destroyed_;
};

TEST(Ref, DeletesTheObjectWhenTheLastRefGoes) {
  int destroyed = 0;
  {
    Ref<Tracked> a(new Tracked(destroyed));
    {
      Ref<Tracked> b = a;
      EXPECT_EQ(b.get(), a.get());
    }
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(Ref, MovingTransfersOwnershipWithoutReleasing) {
  int destroyed = 0;
  Ref<Tracked> a(new Tracked(destroyed));
  Ref<Tracked> b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is documented empty
  EXPECT_TRUE(b);
  EXPECT_EQ(destroyed, 0);
  b = Ref<Tracked>();
  EXPECT_EQ(destroyed, 1);
}

TEST(Ref, AssigningReleasesThePreviousObject) {
  int first = 0, second = 0;
  Ref<Tracked> r(new Tracked(first));
  r = Ref<Tracked>(new Tracked(second));
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 0);
}

TEST(Ref, SelfAssignmentKeepsTheObject) {
  int destroyed = 0;
  Ref<Tracked> r(new Tracked(destroyed));
  Ref<Tracked>& alias = r;
  r = alias;
  EXPECT_TRUE(r);
  EXPECT_EQ(destroyed, 0);
}

TEST(Ref, DefaultAndNullRefsAreEmpty) {
  EXPECT_FALSE(Ref<Tracked>());
  EXPECT_FALSE(Ref<Tracked>(nullptr));
}

}  // namespace
}  // namespace floodgate
