// Several buffers of one process on one host (GPUs, or host buffers standing for them) in one
// all-reduce across hosts (sumcast_allreduce_local_group, docs/topology.md): the buffers are
// reduced on this host by the topology planner's plan, the host's sum goes to the appliance once
// (the plan's exchange steps call the communicator), and the result comes back into every buffer
// by the plan.
//
// The host the plan is made for: a given HostModel whose GPUs are the buffers, else one NUMA
// node with one NIC and the buffers on their own root ports (host memory has no PCIe tree to
// plan for). Host memory only: the CUDA executor is not wired in here, and a device buffer is
// refused. Every host of the job must use the same buffer count and element count: the exchange
// steps (their order and sizes) follow from them.
//
// Thread safety: one run() at a time per LocalGroup and per communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "sumcast/shim/communicator.h"
#include "sumcast/status.h"
#include "sumcast/topo/cpu_executor.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/planner.h"

namespace sumcast::shim {

class LocalGroup {
 public:
  // Plans for `buffers` buffers of `count` elements of dtype (fp32, fp64, int32) with op.
  // `model`: the host (its GPU count must equal `buffers`), or nullopt for the host-memory host.
  static Result<std::unique_ptr<LocalGroup>> create(size_t buffers, size_t count, wire::Dtype dtype, wire::ReduceOp op,
                                                    std::optional<topo::HostModel> model = std::nullopt);

  // Runs the plan on `buffers` (in place), exchanging through `comm` (same dtype and op).
  // `devices[i]` is buffer i's CUDA device, -1 for host memory; empty: all host memory.
  Status run(Communicator& comm, std::span<void* const> buffers, std::span<const int> devices = {});

  size_t buffers() const { return buffers_; }
  size_t count() const { return count_; }
  const topo::Plan& plan() const { return result_.best().plan; }
  // The planner's account: the chosen plan, its predicted time and the runners-up.
  const std::string& why() const { return result_.why; }
  // Exchange steps of the last run (calls to the communicator).
  size_t exchanges() const { return exchanges_; }

 private:
  LocalGroup() = default;

  size_t buffers_ = 0, count_ = 0;
  wire::Dtype dtype_ = wire::Dtype::kFp32;
  wire::ReduceOp op_ = wire::ReduceOp::kSum;
  std::unique_ptr<topo::HostModel> model_;
  topo::PlannerResult result_;
  std::optional<topo::CpuExecutor> executor_;
  size_t exchanges_ = 0;
};

// The host-memory host of `buffers` buffers (see above).
topo::HostModel host_memory_model(size_t buffers);

}  // namespace sumcast::shim
