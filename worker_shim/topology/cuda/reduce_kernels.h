// Element-wise reduction kernels for the CUDA executor: dst[i] = dst[i] op src[i], with the wire's
// semantics (kernels.h): wrapping int32 sums; NaN wins min/max; -0 < +0.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "sumcast/wire/format.h"

namespace sumcast::topo::cuda {

// Launches the kernel for (dtype, op) on `stream` (the current device must own dst).
cudaError_t launch_reduce(wire::Dtype dtype, wire::ReduceOp op, void* dst, const void* src, size_t n,
                          cudaStream_t stream);

}  // namespace sumcast::topo::cuda
