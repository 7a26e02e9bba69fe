// Runs plans on host memory (docs/topology.md §5): the CPU executor the MPI path uses. Each GPU of
// the plan stands for one host buffer (a rank's buffer); staging buffers are host memory;
// reductions use the summation kernels (sumcast::kernels::active_kernels()).
//
// Element types: fp32, fp64 and int32 (whose accumulator is the element itself); ops: sum, min,
// max. Results are exact whenever the sums are (integer-valued floats below 2^24 for fp32).
//
// Thread safety: one run() at a time per executor.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"
#include "sumcast/wire/format.h"

namespace sumcast::topo {

// The network round trip of an exchange step: `data` holds `length` bytes at buffer offset
// `offset`, reduced within this host; on return it must hold the result across hosts. A single
// host (or a test) may leave it unchanged.
using ExchangeFn = std::function<Status(void* data, uint64_t offset, uint64_t length)>;

// Checks that dtype/op can run in place on the host (fp32/fp64/int32; any op).
Status check_host_dtype(wire::Dtype dtype, wire::ReduceOp op);

class CpuExecutor {
 public:
  // Allocates the plan's staging buffers. The model must be the one the plan was made for.
  static Result<CpuExecutor> create(const HostModel& model, const Plan& plan, wire::Dtype dtype, wire::ReduceOp op);

  // Runs every stage in order. buffers[i] is GPU i's buffer of plan.bytes bytes (in place).
  // `exchange` is called for exchange steps; may be empty when the plan has none.
  Status run(std::span<void* const> buffers, const ExchangeFn& exchange);

 private:
  CpuExecutor() = default;

  const HostModel* model_ = nullptr;
  const Plan* plan_ = nullptr;
  wire::Dtype dtype_ = wire::Dtype::kFp32;
  wire::ReduceOp op_ = wire::ReduceOp::kSum;
  std::vector<int> gpu_index_of_node_;                      // node id -> GPU index, -1
  std::vector<std::vector<std::vector<uint8_t>>> staging_;  // node id -> slot -> bytes
};

// Shared memory between processes on one host: a POSIX shared-memory segment holding every
// rank's buffer (rank i = GPU i of the plan) and the plan's staging buffers, and a process-shared
// barrier between stages. Each rank runs the steps whose destination it owns (its own buffer;
// the staging buffers of a NUMA node belong to the lowest rank on that node, else rank 0).
class ShmReduction {
 public:
  ShmReduction(ShmReduction&& other) noexcept;
  ShmReduction& operator=(ShmReduction&&) = delete;
  ShmReduction(const ShmReduction&) = delete;
  ~ShmReduction();  // unmaps; the creator also unlinks the name

  // Creates the segment `name` ("/sumcast-..."), sized for the plan; fails if it exists.
  static Result<ShmReduction> create(const std::string& name, const HostModel& model, const Plan& plan,
                                     wire::Dtype dtype, wire::ReduceOp op);
  // Maps an existing segment made by create() for the same plan (checked by size and shape).
  static Result<ShmReduction> attach(const std::string& name, const HostModel& model, const Plan& plan,
                                     wire::Dtype dtype, wire::ReduceOp op);

  // Rank i's buffer (plan.bytes bytes) inside the segment.
  void* buffer(int rank) const;
  int ranks() const { return ranks_; }
  // Runs rank `rank`'s share of every stage, meeting the other ranks at the barrier before the
  // first stage (inputs written) and after each. Fails (kTimeout) when the others do not arrive
  // within `timeout_ms`, (kAborted) when another rank failed; the segment is unusable afterwards.
  Status run(int rank, const ExchangeFn& exchange, int timeout_ms);
  // The rank that executes steps writing `node`'s buffers.
  int owner_of(int node) const;

 private:
  ShmReduction() = default;
  static Result<ShmReduction> map(const std::string& name, const HostModel& model, const Plan& plan, wire::Dtype dtype,
                                  wire::ReduceOp op, bool create);
  uint8_t* resolve(const BufferRef& b) const;

  std::string name_;
  bool creator_ = false;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  int ranks_ = 0;
  const HostModel* model_ = nullptr;
  const Plan* plan_ = nullptr;
  wire::Dtype dtype_ = wire::Dtype::kFp32;
  wire::ReduceOp op_ = wire::ReduceOp::kSum;
  std::vector<size_t> staging_offset_;  // node id -> first staging buffer's offset (slots follow)
  std::vector<int> owner_;              // node id -> rank
};

}  // namespace sumcast::topo
