// One plan step on host memory, shared by the CPU and shared-memory executors.
#pragma once

#include <cstring>

#include "sumcast/kernels/kernels.h"
#include "sumcast/topo/cpu_executor.h"
#include "sumcast/wire/format.h"

namespace sumcast::topo::internal {

inline size_t host_elem_size(wire::Dtype dtype) { return dtype == wire::Dtype::kFp64 ? 8 : 4; }

// dst/src point at the start of their buffers.
inline Status apply_host_step(const Step& step, uint8_t* dst, const uint8_t* src, wire::Dtype dtype, wire::ReduceOp op,
                              const ExchangeFn& exchange) {
  if (step.length == 0) return Status();
  switch (step.op) {
    case StepOp::kCopy:
      std::memmove(dst + step.offset, src + step.offset, step.length);
      return Status();
    case StepOp::kReduce: {
      const kernels::KernelTable& k = kernels::active_kernels();
      k.accumulate[static_cast<int>(dtype)][static_cast<int>(op)](dst + step.offset, src + step.offset,
                                                                  step.length / host_elem_size(dtype));
      return Status();
    }
    case StepOp::kExchange:
      if (!exchange)
        return Status::invalid_argument("the plan has an exchange step and no exchange function was given");
      return exchange(dst + step.offset, step.offset, step.length);
  }
  return Status::internal("unknown step op");
}

}  // namespace sumcast::topo::internal
