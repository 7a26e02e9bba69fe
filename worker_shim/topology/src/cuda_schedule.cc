// cuda_schedule (cuda_schedule.h).
#include "sumcast/topo/cuda_schedule.h"

namespace sumcast::topo {

const char* cuda_op_name(CudaOpKind kind) {
  switch (kind) {
    case CudaOpKind::kPeerCopy:
      return "peer-copy";
    case CudaOpKind::kHostToDevice:
      return "h2d";
    case CudaOpKind::kDeviceToHost:
      return "d2h";
    case CudaOpKind::kHostCopy:
      return "host-copy";
    case CudaOpKind::kReduceDirect:
      return "reduce-direct";
    case CudaOpKind::kReducePeerScratch:
      return "reduce-peer-scratch";
    case CudaOpKind::kReduceHostScratch:
      return "reduce-host-scratch";
    case CudaOpKind::kReduceHostFromGpu:
      return "reduce-host-from-gpu";
    case CudaOpKind::kReduceHost:
      return "reduce-host";
    case CudaOpKind::kExchangeHost:
      return "exchange-host";
    case CudaOpKind::kExchangeGpu:
      return "exchange-gpu";
  }
  return "?";
}

std::vector<CudaOp> cuda_schedule(const HostModel& model, const Plan& plan,
                                  const std::vector<std::vector<bool>>& peer) {
  std::vector<int> gpu_of_node(model.nodes().size(), -1);
  for (int g : model.gpus()) gpu_of_node[static_cast<size_t>(g)] = model.node(g).index;
  std::vector<CudaOp> out;
  for (size_t si = 0; si < plan.stages.size(); ++si) {
    const Stage& stage = plan.stages[si];
    for (size_t k = 0; k < stage.steps.size(); ++k) {
      const Step& s = stage.steps[k];
      if (s.length == 0) continue;
      CudaOp op;
      op.stage = si;
      op.step = k;
      op.dst_gpu = gpu_of_node[static_cast<size_t>(s.dst.node)];
      op.src_gpu = gpu_of_node[static_cast<size_t>(s.src.node)];
      const int dg = op.dst_gpu, sg = op.src_gpu;
      switch (s.op) {
        case StepOp::kCopy:
          op.kind = dg >= 0 ? (sg >= 0 ? CudaOpKind::kPeerCopy : CudaOpKind::kHostToDevice)
                            : (sg >= 0 ? CudaOpKind::kDeviceToHost : CudaOpKind::kHostCopy);
          break;
        case StepOp::kReduce:
          if (dg >= 0) {
            const bool direct = sg >= 0 && peer[static_cast<size_t>(dg)][static_cast<size_t>(sg)];
            op.kind = direct ? CudaOpKind::kReduceDirect
                             : (sg >= 0 ? CudaOpKind::kReducePeerScratch : CudaOpKind::kReduceHostScratch);
          } else {
            op.kind = sg >= 0 ? CudaOpKind::kReduceHostFromGpu : CudaOpKind::kReduceHost;
          }
          break;
        case StepOp::kExchange:
          op.kind = dg >= 0 ? CudaOpKind::kExchangeGpu : CudaOpKind::kExchangeHost;
          break;
      }
      const bool on_stream = op.kind == CudaOpKind::kPeerCopy || op.kind == CudaOpKind::kHostToDevice ||
                             op.kind == CudaOpKind::kReduceDirect || op.kind == CudaOpKind::kReducePeerScratch ||
                             op.kind == CudaOpKind::kReduceHostScratch;
      op.stream = on_stream ? dg : -1;
      out.push_back(op);
    }
  }
  return out;
}

}  // namespace sumcast::topo
