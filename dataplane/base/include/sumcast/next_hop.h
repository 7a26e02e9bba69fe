// The next-hop table the engine lcores address unicast results from: one 64-bit word per next
// hop (an on-link member or a gateway), written by the neighbour resolver's thread and read by
// any lcore without locks. A word holds the next hop's MAC in its low 48 bits and kValidBit
// when the MAC is usable; 0 means unresolved (the lcore then counts the frame as
// next_hop_unresolved and sends nothing: the worker's retransmission recovers it once resolved).
//
// Thread safety: publish()/clear() from one writer thread; mac() from any thread. One word is
// read and written whole (relaxed atomics): a reader sees the old or the new MAC, never a mix.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

namespace sumcast {

// A member without a next-hop index: its frames go to the MAC it registered (the in-memory and
// kernel-socket engines, which have no resolver).
inline constexpr uint32_t kNoNextHop = 0xFFFFFFFFu;

class NextHopTable {
 public:
  static constexpr uint64_t kValidBit = uint64_t{1} << 63;

  explicit NextHopTable(uint32_t capacity) : capacity_(capacity), words_(new std::atomic<uint64_t>[capacity]) {
    for (uint32_t i = 0; i < capacity; ++i) words_[i].store(0, std::memory_order_relaxed);
  }

  uint32_t capacity() const { return capacity_; }

  void publish(uint32_t index, const uint8_t mac[6]) {
    uint64_t w = kValidBit;
    for (int i = 0; i < 6; ++i) w |= uint64_t{mac[i]} << (8 * (5 - i));
    words_[index].store(w, std::memory_order_relaxed);
  }
  void clear(uint32_t index) { words_[index].store(0, std::memory_order_relaxed); }

  // Writes the next hop's MAC to `out`; false (nothing written) while it is unresolved.
  bool mac(uint32_t index, uint8_t out[6]) const {
    if (index >= capacity_) return false;
    const uint64_t w = words_[index].load(std::memory_order_relaxed);
    if ((w & kValidBit) == 0) return false;
    for (int i = 0; i < 6; ++i) out[i] = static_cast<uint8_t>(w >> (8 * (5 - i)));
    return true;
  }

 private:
  uint32_t capacity_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

}  // namespace sumcast
