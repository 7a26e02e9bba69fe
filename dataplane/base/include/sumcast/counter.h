// Counters with one writer (an engine core, the control thread) read by others (telemetry): the
// writer adds with a relaxed load and store, no locked read-modify-write on the hot path, and
// readers load relaxed. A counter written by two threads must use fetch_add instead.
#pragma once

#include <atomic>
#include <cstdint>

namespace sumcast {

// Adds `n` to a counter that only the calling thread writes.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// A counter's value for a reader on another thread (telemetry): a relaxed load, no ordering.
inline uint64_t read_counter(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

}  // namespace sumcast
