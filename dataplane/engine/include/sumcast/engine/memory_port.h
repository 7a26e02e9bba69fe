// An in-memory TxSink for tests, fuzzers and benchmarks: a fixed pool of frame buffers, the
// frames submitted (in order), and a limit that makes acquire() fail as an empty pool would.
//
// Not thread-safe: one engine (lcore) uses one sink. Buffers are wire::kMaxFrameLen bytes,
// 64-byte aligned, and stay taken until clear() (or at once when recording is off).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "sumcast/engine/engine.h"

namespace sumcast::engine {

class MemoryTxSink final : public TxSink {
 public:
  // One frame handed to submit().
  struct Frame {
    const uint8_t* data;
    uint32_t len;
    std::span<const uint8_t> bytes() const { return {data, len}; }
  };

  // A pool of `buffers` frame buffers (default 1024).
  explicit MemoryTxSink(size_t buffers = 1024);
  ~MemoryTxSink() override;
  MemoryTxSink(const MemoryTxSink&) = delete;
  MemoryTxSink& operator=(const MemoryTxSink&) = delete;

  // A free buffer, or nullptr when the pool is empty or the limit is used up.
  uint8_t* acquire() override;
  void submit(uint8_t* buf, uint32_t len) override;
  void flush() override;

  // Frames submitted since the last clear(), in submission order (while recording).
  const std::vector<Frame>& frames() const { return frames_; }
  // Returns every buffer to the pool and forgets the frames (counters are kept).
  void clear();
  // Only `n` more acquire() calls may succeed (simulates an exhausted pool); kUnlimited undoes it.
  static constexpr size_t kUnlimited = std::numeric_limits<size_t>::max();
  void set_limit(size_t n) { limit_ = n; }
  // Recording off: submit() returns the buffer to the pool at once and only counts (benchmarks).
  void set_recording(bool on) { recording_ = on; }

  size_t capacity() const { return capacity_; }
  size_t free_buffers() const { return free_.size(); }
  uint64_t submitted() const { return submitted_; }  // frames submitted, ever
  uint64_t flushes() const { return flushes_; }      // flush() calls, ever
  uint64_t refused() const { return refused_; }      // acquire() calls answered nullptr, ever

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  size_t capacity_;
  size_t stride_;
  std::unique_ptr<uint8_t, AlignedFree> pool_;
  std::vector<uint8_t*> free_;
  std::vector<Frame> frames_;
  size_t limit_ = kUnlimited;
  bool recording_ = true;
  uint64_t submitted_ = 0;
  uint64_t flushes_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace sumcast::engine
