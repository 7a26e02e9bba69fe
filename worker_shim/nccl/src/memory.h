// Memory registrations (regMr).
//
// The plugin offers host memory only (ptrSupport NCCL_PTR_HOST, as NCCL's own socket transport):
// NCCL then stages GPU data through host buffers with its own asynchronous copies, and never
// hands the plugin a device pointer. Copying device buffers inside the plugin would have to
// happen on NCCL's proxy thread; a blocking copy there (on the legacy default stream) waits for
// kernels that wait for the proxy: a deadlock. A registration therefore only checks the type and
// records the range. NCCL_PTR_CUDA and DMA-BUF registrations are refused with an error that says
// so (NCCL does not ask for them when ptrSupport lacks them).
//
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstddef>

#include "sumcast/status.h"

namespace sumcast::nccl {

struct MemHandle {
  const void* base = nullptr;
  size_t size = 0;
};

// Accepts NCCL_PTR_HOST only; returns a new handle in *mhandle.
Status register_memory(const void* data, size_t size, int type, void** mhandle);
Status deregister_memory(void* mhandle);

}  // namespace sumcast::nccl
