// DPDK's rte_ring hands objects between threads with rte_smp_wmb/rmb fences and volatile head/tail
// accesses, which ThreadSanitizer does not model. In a TSan build these calls tell it what the
// fences guarantee: what a thread wrote before enqueuing an object happens before what the thread
// that dequeued it does next (launch_lcore uses them the same way for a loop's launch). Elsewhere
// they are empty. (The ring's own head/tail and slot
// accesses are suppressed by file in tests/tsan.supp.)
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace sumcast::dpdk {

// Before enqueuing to `ring`.
inline void ring_release([[maybe_unused]] const void* ring) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(ring));
#endif
}

// After dequeuing from `ring`.
inline void ring_acquire([[maybe_unused]] const void* ring) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(ring));
#endif
}

}  // namespace sumcast::dpdk
