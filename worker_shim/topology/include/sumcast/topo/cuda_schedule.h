// The CUDA executor's schedule (docs/topology.md §5): what each step of a plan becomes on the
// devices, decided without a device so that it can be tested anywhere. The executor
// (cuda/cuda_executor.cu) runs exactly this list: ops that name a stream are queued on that plan
// GPU's stream (a GPU step goes to its destination's stream, so steps writing one buffer keep
// their order); the others wait for every stream and run on the calling thread; every stage ends
// with all streams idle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"

namespace sumcast::topo {

enum class CudaOpKind : uint8_t {
  kPeerCopy = 0,       // GPU -> GPU: cudaMemcpyPeerAsync on the destination's stream
  kHostToDevice,       // host staging -> GPU: cudaMemcpyAsync on the destination's stream
  kDeviceToHost,       // GPU -> host staging: wait for all streams, cudaMemcpy
  kHostCopy,           // host -> host: wait, memmove
  kReduceDirect,       // GPU += GPU read in place (peer access or the same device): kernel on dst's stream
  kReducePeerScratch,  // GPU += GPU without peer access: peer copy into dst's scratch, kernel (dst's stream)
  kReduceHostScratch,  // GPU += host staging: H2D into dst's scratch, kernel (dst's stream)
  kReduceHostFromGpu,  // host += GPU: wait, D2H into the pinned scratch, CPU reduce
  kReduceHost,         // host += host: wait, CPU reduce
  kExchangeHost,       // exchange of a host range: wait, exchange in place
  kExchangeGpu,        // exchange of a GPU range: wait, D2H into the pinned scratch, exchange, H2D
};
const char* cuda_op_name(CudaOpKind kind);

struct CudaOp {
  CudaOpKind kind = CudaOpKind::kPeerCopy;
  size_t stage = 0;  // index into plan.stages
  size_t step = 0;   // index into that stage's steps
  int stream = -1;   // plan GPU whose stream carries it; -1: the calling thread, after all streams
  int dst_gpu = -1;  // plan GPU indexes, -1 for host buffers
  int src_gpu = -1;
};

// The ops of every non-empty step, in plan order. peer[dst][src]: whether plan GPU dst reads plan
// GPU src directly (what the executor found at create(); the same device counts as direct).
std::vector<CudaOp> cuda_schedule(const HostModel& model, const Plan& plan, const std::vector<std::vector<bool>>& peer);

}  // namespace sumcast::topo
