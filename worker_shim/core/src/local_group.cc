// LocalGroup (local_group.h): the topology planner's plan for several buffers of one process,
// run on host memory by the CPU executor, its exchange steps through the communicator.
#include "sumcast/shim/local_group.h"

#include <utility>

namespace sumcast::shim {
namespace {

constexpr double kAssumedMemoryGbps = 20;

}  // namespace

topo::HostModel host_memory_model(size_t buffers) {
  topo::HostModel m;
  topo::Node numa;
  numa.kind = topo::NodeKind::kNuma;
  numa.index = 0;
  numa.name = "NUMA0";
  const int numa_id = m.add_node(numa);
  auto child = [&](topo::NodeKind kind, int index) {
    topo::Node n;
    n.kind = kind;
    n.parent = numa_id;
    n.index = index;
    const int id = m.add_node(n);
    topo::Link l;
    l.a = numa_id;
    l.b = id;
    l.kind = topo::LinkKind::kPcie;
    // Memory to memory: an assumed per-buffer rate, so that the candidates' predicted times (and
    // the planner's choice among them) mean something.
    l.gbps = kAssumedMemoryGbps;
    m.add_link(l);
    return id;
  };
  for (size_t i = 0; i < buffers; ++i) child(topo::NodeKind::kGpu, static_cast<int>(i));
  child(topo::NodeKind::kNic, 0);
  m.set_source("host memory: " + std::to_string(buffers) + " buffers of one process");
  m.add_assumption("host buffers of one process: one NUMA node, each buffer on its own root port at an assumed " +
                   topo::format_gbps(kAssumedMemoryGbps) + " GB/s, one NIC");
  return m;
}

Result<std::unique_ptr<LocalGroup>> LocalGroup::create(size_t buffers, size_t count, wire::Dtype dtype,
                                                       wire::ReduceOp op, std::optional<topo::HostModel> model) {
  if (buffers == 0) return Status::invalid_argument("a local group needs at least one buffer");
  SUMCAST_RETURN_IF_ERROR(topo::check_host_dtype(dtype, op));
  std::unique_ptr<LocalGroup> g(new LocalGroup());
  g->buffers_ = buffers;
  g->count_ = count;
  g->dtype_ = dtype;
  g->op_ = op;
  if (model) {
    if (static_cast<size_t>(model->gpu_count()) != buffers) {
      return Status::invalid_argument("the host model has " + std::to_string(model->gpu_count()) + " GPUs, the group " +
                                      std::to_string(buffers) + " buffers");
    }
    g->model_ = std::make_unique<topo::HostModel>(std::move(*model));
  } else {
    g->model_ = std::make_unique<topo::HostModel>(host_memory_model(buffers));
    SUMCAST_RETURN_IF_ERROR(g->model_->finish(12.5));
  }
  topo::PlanRequest req;
  req.elem_size = static_cast<uint32_t>(wire::dtype_size(dtype));
  req.bytes = count * req.elem_size;
  req.network = true;
  auto planned = topo::plan_host(*g->model_, req);
  if (!planned.ok()) return planned.status();
  g->result_ = std::move(*planned);
  auto ex = topo::CpuExecutor::create(*g->model_, g->result_.best().plan, dtype, op);
  if (!ex.ok()) return ex.status();
  g->executor_.emplace(std::move(*ex));
  return g;
}

Status LocalGroup::run(Communicator& comm, std::span<void* const> buffers, std::span<const int> devices) {
  if (buffers.size() != buffers_) {
    return Status::invalid_argument("the group was planned for " + std::to_string(buffers_) + " buffers, got " +
                                    std::to_string(buffers.size()));
  }
  if (comm.config().dtype != dtype_ || comm.config().op != op_) {
    return Status::invalid_argument("the communicator's dtype/op differ from the group's");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] >= 0) {
      return Status::invalid_argument("buffer " + std::to_string(i) + " is on CUDA device " +
                                      std::to_string(devices[i]) +
                                      ": the local group runs on host memory only (the CUDA executor is not wired in)");
    }
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i] == nullptr && count_ != 0)
      return Status::invalid_argument("buffer " + std::to_string(i) + " is NULL");
  }
  if (count_ == 0) return Status();
  const size_t es = wire::dtype_size(dtype_);
  exchanges_ = 0;
  topo::ExchangeFn exchange = [&](void* data, uint64_t, uint64_t length) {
    ++exchanges_;
    return comm.allreduce(data, data, length / es);
  };
  return executor_->run(buffers, exchange);
}

}  // namespace sumcast::shim
