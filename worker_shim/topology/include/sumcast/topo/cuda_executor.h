// The CUDA executor (docs/topology.md §5): runs a plan on GPUs. Plan GPU i is CUDA device
// devices[i] (several plan GPUs may share a device, for tests on small machines). Copies between
// GPUs are peer copies (direct when peer access is possible, staged by the driver otherwise);
// reductions into a GPU run a kernel on that GPU, reading the source in place when peer access
// is enabled, from a scratch copy otherwise; host staging buffers are pinned memory and host-side
// reductions use the CPU summation kernels. Built only when CMake finds nvcc (SUMCAST_CUDA); the
// header itself needs no CUDA.
//
// Thread safety: one run() at a time per executor; run() returns when every stage is done.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/cpu_executor.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"
#include "sumcast/wire/format.h"

namespace sumcast::topo {

// CUDA devices visible to this process; 0 without a driver or a GPU (never fails).
int cuda_device_count();

class CudaExecutor {
 public:
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Allocates streams, scratch and pinned staging buffers and enables peer access where it can.
  // `devices` maps plan GPU index -> CUDA ordinal; empty: GPU i is device i. fp32/fp64/int32.
  static Result<std::unique_ptr<CudaExecutor>> create(const HostModel& model, const Plan& plan, wire::Dtype dtype,
                                                      wire::ReduceOp op, std::vector<int> devices = {});

  // Runs the plan in place on device_buffers[i] (plan.bytes on plan GPU i's device). `exchange`
  // receives host memory (the range is staged through pinned memory).
  Status run(std::span<void* const> device_buffers, const ExchangeFn& exchange);

  // Whether plan GPU `dst` reads plan GPU `src` directly (peer access or the same device).
  bool direct(int dst, int src) const;

 private:
  struct Impl;
  explicit CudaExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::topo
