// Reduction kernels (reduce_kernels.h): one grid-stride kernel per element type and op.
#include <cstdint>

#include "reduce_kernels.h"

namespace sumcast::topo::cuda {
namespace {

template <typename T>
__device__ T reduce_min(T a, T b) {
  if (a != a || b != b) return a + b;                          // NaN in either operand gives NaN
  if (a == b) return signbit(static_cast<double>(a)) ? a : b;  // -0 < +0
  return a < b ? a : b;
}

template <typename T>
__device__ T reduce_max(T a, T b) {
  if (a != a || b != b) return a + b;
  if (a == b) return signbit(static_cast<double>(a)) ? b : a;
  return a > b ? a : b;
}

template <typename T, int kOp>
__global__ void reduce_float(T* __restrict__ dst, const T* __restrict__ src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    T a = dst[i], b = src[i];
    dst[i] = kOp == 0 ? a + b : (kOp == 1 ? reduce_min(a, b) : reduce_max(a, b));
  }
}

template <int kOp>
__global__ void reduce_int32(int32_t* __restrict__ dst, const int32_t* __restrict__ src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    int32_t a = dst[i], b = src[i];
    if (kOp == 0) {
      dst[i] = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));  // wraps
    } else {
      dst[i] = kOp == 1 ? (a < b ? a : b) : (a > b ? a : b);
    }
  }
}

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

template <typename Kernel, typename T>
cudaError_t launch(Kernel k, void* dst, const void* src, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  k<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce(wire::Dtype dtype, wire::ReduceOp op, void* dst, const void* src, size_t n,
                          cudaStream_t stream) {
  int o = static_cast<int>(op);
  switch (dtype) {
    case wire::Dtype::kFp32:
      if (o == 0) return launch<decltype(&reduce_float<float, 0>), float>(reduce_float<float, 0>, dst, src, n, stream);
      if (o == 1) return launch<decltype(&reduce_float<float, 1>), float>(reduce_float<float, 1>, dst, src, n, stream);
      return launch<decltype(&reduce_float<float, 2>), float>(reduce_float<float, 2>, dst, src, n, stream);
    case wire::Dtype::kFp64:
      if (o == 0)
        return launch<decltype(&reduce_float<double, 0>), double>(reduce_float<double, 0>, dst, src, n, stream);
      if (o == 1)
        return launch<decltype(&reduce_float<double, 1>), double>(reduce_float<double, 1>, dst, src, n, stream);
      return launch<decltype(&reduce_float<double, 2>), double>(reduce_float<double, 2>, dst, src, n, stream);
    case wire::Dtype::kInt32:
      if (o == 0) return launch<decltype(&reduce_int32<0>), int32_t>(reduce_int32<0>, dst, src, n, stream);
      if (o == 1) return launch<decltype(&reduce_int32<1>), int32_t>(reduce_int32<1>, dst, src, n, stream);
      return launch<decltype(&reduce_int32<2>), int32_t>(reduce_int32<2>, dst, src, n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace sumcast::topo::cuda
