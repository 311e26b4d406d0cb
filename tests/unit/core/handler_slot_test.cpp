#include "floodgate/core/handler_slot.h"

#include <gtest/gtest.h>

namespace floodgate {
namespace {

TEST(HandlerSlot, ServesOneOperationFromItsStorageWithoutTheHeap) {
  HandlerSlot slot;
  const uint64_t before = HandlerSlot::heap_fallbacks();
  void* a = slot.allocate(128);
  slot.deallocate(a);
  void* b = slot.allocate(HandlerSlot::kBytes);
  EXPECT_EQ(a, b);
  slot.deallocate(b);
  EXPECT_EQ(HandlerSlot::heap_fallbacks(), before);
}

TEST(HandlerSlot, FallsBackToTheHeapAndCountsWhenBusy) {
  HandlerSlot slot;
  const uint64_t before = HandlerSlot::heap_fallbacks();
  void* first = slot.allocate(64);
  void* second = slot.allocate(64);
  EXPECT_NE(first, second);
  EXPECT_EQ(HandlerSlot::heap_fallbacks(), before + 1);
  slot.deallocate(second);
  slot.deallocate(first);
  void* again = slot.allocate(64);
  EXPECT_EQ(again, first);  // the slot is free again once its operation released it
  slot.deallocate(again);
}

TEST(HandlerSlot, FallsBackToTheHeapForOperationsLargerThanTheSlot) {
  HandlerSlot slot;
  const uint64_t before = HandlerSlot::heap_fallbacks();
  void* big = slot.allocate(HandlerSlot::kBytes + 1);
  EXPECT_EQ(HandlerSlot::heap_fallbacks(), before + 1);
  slot.deallocate(big);
  void* small = slot.allocate(8);  // the slot itself was never taken
  EXPECT_EQ(HandlerSlot::heap_fallbacks(), before + 1);
  slot.deallocate(small);
}

TEST(SlotAllocator, AllocatorsOfOneSlotCompareEqualAcrossTypes) {
  HandlerSlot slot, other;
  const SlotAllocator<int> a(slot);
  const SlotAllocator<double> b(a);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == SlotAllocator<int>(other));
}

}  // namespace
}  // namespace floodgate
