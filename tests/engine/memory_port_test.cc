// Unit tests of the in-memory TxSink: pool size, limit, recording, clear.
#include "sumcast/engine/memory_port.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "sumcast/wire/format.h"

namespace sumcast::engine {
namespace {

TEST(MemoryTxSinkTest, PoolRunsDryAfterCapacityBuffersAndClearRefillsIt) {
  MemoryTxSink tx(3);
  std::set<uint8_t*> seen;
  for (int i = 0; i < 3; ++i) {
    uint8_t* b = tx.acquire();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
    std::memset(b, i, wire::kMaxFrameLen);  // the whole buffer is writable
    seen.insert(b);
    tx.submit(b, static_cast<uint32_t>(10 + i));
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(tx.acquire(), nullptr);
  EXPECT_EQ(tx.refused(), 1u);
  ASSERT_EQ(tx.frames().size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(tx.frames()[i].len, 10 + i);
    EXPECT_EQ(tx.frames()[i].data[0], i);
  }
  tx.clear();
  EXPECT_TRUE(tx.frames().empty());
  EXPECT_EQ(tx.free_buffers(), 3u);
  EXPECT_NE(tx.acquire(), nullptr);
  EXPECT_EQ(tx.submitted(), 3u);
}

TEST(MemoryTxSinkTest, LimitRefusesAcquiresUntilLifted) {
  MemoryTxSink tx(8);
  tx.set_limit(2);
  EXPECT_NE(tx.acquire(), nullptr);
  EXPECT_NE(tx.acquire(), nullptr);
  EXPECT_EQ(tx.acquire(), nullptr);
  EXPECT_EQ(tx.free_buffers(), 6u);
  tx.set_limit(MemoryTxSink::kUnlimited);
  EXPECT_NE(tx.acquire(), nullptr);
}

TEST(MemoryTxSinkTest, WithoutRecordingBuffersReturnAtOnce) {
  MemoryTxSink tx(1);
  tx.set_recording(false);
  for (int i = 0; i < 100; ++i) {
    uint8_t* b = tx.acquire();
    ASSERT_NE(b, nullptr);
    tx.submit(b, 64);
  }
  tx.flush();
  EXPECT_TRUE(tx.frames().empty());
  EXPECT_EQ(tx.submitted(), 100u);
  EXPECT_EQ(tx.flushes(), 1u);
}

}  // namespace
}  // namespace sumcast::engine
