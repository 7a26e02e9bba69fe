// CpuExecutor (cpu_executor.h): stages in order, steps in order, host memory only.
#include "sumcast/topo/cpu_executor.h"

#include "exec_util.h"

namespace sumcast::topo {

Status check_host_dtype(wire::Dtype dtype, wire::ReduceOp op) {
  if (dtype != wire::Dtype::kFp32 && dtype != wire::Dtype::kFp64 && dtype != wire::Dtype::kInt32) {
    return Status::invalid_argument("host executors reduce fp32, fp64 or int32 in place (not dtype " +
                                    std::to_string(static_cast<int>(dtype)) + ")");
  }
  if (!wire::is_valid_op(static_cast<uint8_t>(op))) return Status::invalid_argument("unknown reduce op");
  return Status();
}

Result<CpuExecutor> CpuExecutor::create(const HostModel& model, const Plan& plan, wire::Dtype dtype,
                                        wire::ReduceOp op) {
  SUMCAST_RETURN_IF_ERROR(check_host_dtype(dtype, op));
  if (plan.elem_size != internal::host_elem_size(dtype)) {
    return Status::invalid_argument("plan element size " + std::to_string(plan.elem_size) +
                                    " does not match the dtype");
  }
  SUMCAST_RETURN_IF_ERROR(validate_plan(model, plan));
  CpuExecutor ex;
  ex.model_ = &model;
  ex.plan_ = &plan;
  ex.dtype_ = dtype;
  ex.op_ = op;
  ex.gpu_index_of_node_.assign(model.nodes().size(), -1);
  for (int g : model.gpus()) ex.gpu_index_of_node_[static_cast<size_t>(g)] = model.node(g).index;
  ex.staging_.resize(model.nodes().size());
  for (const auto& [node, slots] : plan.host_slots) {
    ex.staging_[static_cast<size_t>(node)].assign(static_cast<size_t>(slots), std::vector<uint8_t>(plan.bytes));
  }
  return ex;
}

Status CpuExecutor::run(std::span<void* const> buffers, const ExchangeFn& exchange) {
  if (buffers.size() != static_cast<size_t>(model_->gpu_count())) {
    return Status::invalid_argument("run() needs one buffer per GPU of the plan (" +
                                    std::to_string(model_->gpu_count()) + "), got " + std::to_string(buffers.size()));
  }
  auto resolve = [&](const BufferRef& b) -> uint8_t* {
    int g = gpu_index_of_node_[static_cast<size_t>(b.node)];
    if (g >= 0) return static_cast<uint8_t*>(buffers[static_cast<size_t>(g)]);
    return staging_[static_cast<size_t>(b.node)][static_cast<size_t>(b.slot)].data();
  };
  for (const Stage& stage : plan_->stages) {
    for (const Step& step : stage.steps) {
      SUMCAST_RETURN_IF_ERROR(
          internal::apply_host_step(step, resolve(step.dst), resolve(step.src), dtype_, op_, exchange));
    }
  }
  return Status();
}

}  // namespace sumcast::topo
