#include "sumcast/engine/memory_port.h"

#include <algorithm>
#include <new>

#include "sumcast/wire/format.h"

namespace sumcast::engine {

namespace {
constexpr size_t kAlign = 64;
}

void MemoryTxSink::AlignedFree::operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kAlign}); }

MemoryTxSink::MemoryTxSink(size_t buffers)
    : capacity_(buffers),
      stride_((wire::kMaxFrameLen + kAlign - 1) / kAlign * kAlign),
      pool_(static_cast<uint8_t*>(::operator new (std::max<size_t>(buffers, 1) * stride_, std::align_val_t{kAlign}))) {
  free_.reserve(buffers);
  frames_.reserve(buffers);
  clear();
}

MemoryTxSink::~MemoryTxSink() = default;

uint8_t* MemoryTxSink::acquire() {
  if (free_.empty() || limit_ == 0) {
    ++refused_;
    return nullptr;
  }
  if (limit_ != kUnlimited) --limit_;
  uint8_t* b = free_.back();
  free_.pop_back();
  return b;
}

void MemoryTxSink::submit(uint8_t* buf, uint32_t len) {
  ++submitted_;
  if (recording_) {
    frames_.push_back({buf, len});
  } else {
    free_.push_back(buf);
  }
}

void MemoryTxSink::flush() { ++flushes_; }

void MemoryTxSink::clear() {
  frames_.clear();
  free_.clear();
  // Lowest buffer handed out first.
  for (size_t i = capacity_; i > 0; --i) free_.push_back(pool_.get() + (i - 1) * stride_);
}

}  // namespace sumcast::engine
