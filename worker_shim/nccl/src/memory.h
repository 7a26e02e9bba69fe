// Memory registrations (regMr) and CUDA host staging.
//
// A registration only records where the memory is (NCCL_PTR_HOST or NCCL_PTR_CUDA) and its range:
// the TCP sockets and the worker library read and write host memory, so CUDA buffers are staged
// through host memory with synchronous copies on the calling (NCCL proxy) thread, whose current
// CUDA context NCCL has set. The CUDA driver (libcuda.so.1) is loaded at run time, so one build
// serves hosts with and without GPUs; CUDA pointers are offered (NCCL_PTR_CUDA) only when the
// driver loads, reports a device, SUMCAST_NCCL_CUDA is not 0 and the build has SUMCAST_NCCL_CUDA.
// DMA-BUF registrations are not offered.
//
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstddef>

#include "sumcast/status.h"

namespace sumcast::nccl {

struct MemHandle {
  int type = 0;  // NCCL_PTR_HOST or NCCL_PTR_CUDA
  const void* base = nullptr;
  size_t size = 0;
};

// Validates `type` (CUDA only when cuda_usable()) and returns a new handle in *mhandle.
Status register_memory(const void* data, size_t size, int type, void** mhandle);
Status deregister_memory(void* mhandle);
// True when `mhandle` (may be nullptr: host) registers CUDA memory.
bool is_cuda(const void* mhandle);

// Whether CUDA pointers can be staged here (loads the driver once; logs why not).
bool cuda_usable();
// Synchronous copies between device and host memory on the current context.
Status cuda_to_host(void* host, const void* device, size_t bytes);
Status cuda_to_device(void* device, const void* host, size_t bytes);

}  // namespace sumcast::nccl
