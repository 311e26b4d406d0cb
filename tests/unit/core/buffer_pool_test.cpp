#include "floodgate/core/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace floodgate {
namespace {

bool aligned64(const char* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0;
}

TEST(BufferPool, RoundsTheBlockSizeUpToAMultipleOf64) {
  EXPECT_EQ(BufferPool(1).block_size(), 64u);
  EXPECT_EQ(BufferPool(64).block_size(), 64u);
  EXPECT_EQ(BufferPool(65).block_size(), 128u);
  EXPECT_EQ(BufferPool(8192).block_size(), 8192u);
}

TEST(BufferPool, StartsWithNoFreeBlocks) {
  EXPECT_EQ(BufferPool(4096).free_blocks(), 0u);
}

TEST(BufferPool, ReusesAReleasedBlock) {
  BufferPool pool(4096);
  char* b = pool.acquire();
  pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 1u);
  EXPECT_EQ(pool.acquire(), b);
  EXPECT_EQ(pool.free_blocks(), 0u);
  pool.release(b);
}

TEST(BufferPool, HandsOutDistinctBlocksWhileTheyAreHeld) {
  BufferPool pool(256);
  std::vector<char*> held;
  for (int i = 0; i < 8; ++i) held.push_back(pool.acquire());
  EXPECT_EQ(std::set<char*>(held.begin(), held.end()).size(), held.size());
  for (char* b : held) pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 8u);
  // Reacquiring takes every released block back before allocating.
  std::set<char*> again;
  for (int i = 0; i < 8; ++i) again.insert(pool.acquire());
  EXPECT_EQ(again, std::set<char*>(held.begin(), held.end()));
  for (char* b : again) pool.release(b);
}

TEST(BufferPool, KeepsAtMostMaxFreeBlocks) {
  BufferPool pool(128, 2);
  char* a = pool.acquire();
  char* b = pool.acquire();
  char* c = pool.acquire();
  pool.release(a);
  pool.release(b);
  pool.release(c);  // freed, not kept
  EXPECT_EQ(pool.free_blocks(), 2u);
}

TEST(BufferPool, WithZeroMaxFreeKeepsNothing) {
  BufferPool pool(128, 0);
  pool.release(pool.acquire());
  EXPECT_EQ(pool.free_blocks(), 0u);
}

TEST(BufferPool, BlocksAre64ByteAlignedAndWritableToTheirFullSize) {
  BufferPool pool(1000);
  std::vector<char*> held;
  for (int i = 0; i < 16; ++i) {
    char* b = pool.acquire();
    EXPECT_TRUE(aligned64(b));
    std::memset(b, 0xab, pool.block_size());
    held.push_back(b);
  }
  for (char* b : held) pool.release(b);
  char* reused = pool.acquire();
  EXPECT_TRUE(aligned64(reused));
  pool.release(reused);
}

TEST(BufferPool, ReleasingNullIsANoOp) {
  BufferPool pool(128, 4);
  pool.release(nullptr);
  EXPECT_EQ(pool.free_blocks(), 0u);
  char* b = pool.acquire();
  EXPECT_NE(b, nullptr);
  pool.release(b);
}

TEST(BufferPool, AcquireReturnsNullOnceMaxOutstandingBlocksAreLentOut) {
  BufferPool pool(128, 4, 2);
  char* a = pool.acquire();
  char* b = pool.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pool.acquire(), nullptr);
  EXPECT_EQ(pool.outstanding(), 2u);
  pool.release(a);
  pool.release(b);
}

TEST(BufferPool, AReleasedBlockMakesRoomUnderTheCapAgain) {
  BufferPool pool(128, 4, 1);
  char* a = pool.acquire();
  EXPECT_EQ(pool.acquire(), nullptr);
  pool.release(a);
  EXPECT_EQ(pool.outstanding(), 0u);
  char* again = pool.acquire();
  EXPECT_NE(again, nullptr);
  pool.release(again);
}

TEST(BufferPool, KeepsNoMoreFreeBlocksThanItMayLendOut) {
  BufferPool pool(128, 16, 3);
  std::vector<char*> held;
  for (int i = 0; i < 3; ++i) held.push_back(pool.acquire());
  for (char* b : held) pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 3u);
}

// Lends out `n` blocks and gives them all back: a burst of n concurrent requests.
void burst(BufferPool& pool, int n) {
  std::vector<char*> held;
  for (int i = 0; i < n; ++i) held.push_back(pool.acquire());
  for (char* b : held) pool.release(b);
}

TEST(BufferPool, TrimFreesTheBlocksABurstLeftBehindOnceTheyStayIdleForAWholePeriod) {
  BufferPool pool(128);
  burst(pool, 10);
  EXPECT_EQ(pool.free_blocks(), 10u);
  // The burst's blocks were in use during this period: kept.
  EXPECT_EQ(pool.trim(), 0u);
  EXPECT_EQ(pool.free_blocks(), 10u);
  // Idle for the whole next period: given back.
  EXPECT_EQ(pool.trim(), 10u);
  EXPECT_EQ(pool.free_blocks(), 0u);
  EXPECT_EQ(pool.bytes(), 0u);
}

TEST(BufferPool, TrimKeepsWhatSteadyDemandUses) {
  BufferPool pool(128);
  burst(pool, 10);
  pool.trim();
  for (int period = 0; period < 5; ++period) {
    burst(pool, 4);  // four requests at a time, every period
    EXPECT_EQ(pool.trim(), period == 0 ? 6u : 0u);
    EXPECT_EQ(pool.free_blocks(), 4u);
  }
}

TEST(BufferPool, TrimNeverTouchesBlocksThatAreLentOut) {
  BufferPool pool(128);
  char* held = pool.acquire();
  burst(pool, 3);
  pool.trim();
  pool.trim();
  EXPECT_EQ(pool.outstanding(), 1u);
  EXPECT_EQ(pool.free_blocks(), 0u);
  EXPECT_EQ(pool.bytes(), pool.block_size());
  std::memset(held, 0xcd, pool.block_size());  // still ours (ASan would tell otherwise)
  pool.release(held);
}

TEST(BufferPool, AcquireIsNoexcept) {
  BufferPool pool(64);
  static_assert(noexcept(pool.acquire()));
  static_assert(noexcept(pool.release(nullptr)));
  static_assert(noexcept(pool.trim()));
}

}  // namespace
}  // namespace floodgate
