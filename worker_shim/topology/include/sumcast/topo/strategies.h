// The plan builders the planner compares (docs/topology.md §3). Each returns a complete, valid
// plan for the host, or a Status saying why the strategy does not apply.
#pragma once

#include <cstdint>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/cost_model.h"
#include "sumcast/topo/plan.h"
#include "sumcast/topo/router.h"
#include "sumcast/topo/trees.h"

namespace sumcast::topo {

struct PlanRequest {
  uint64_t bytes = 64ull << 20;  // per GPU; rounded down to elem_size. Default 64 MiB.
  uint32_t elem_size = 4;        // fp32
  // Include the round trip of the reduced data through the NICs (to the aggregation appliance and
  // back) between the reduce and the broadcast. Default off: a pure intra-host all-reduce.
  bool network = false;
  TreeOptions trees;
  CostOptions cost;
  std::vector<Strategy> strategies;  // the candidates; empty (default): all of them
};

// MXNet-style trees: one balanced max-weight binary tree per root GPU (NVLink-only edges when
// such trees exist), the buffer split evenly across them; reduce up every tree, broadcast down.
Result<Plan> make_tree_plan(const Router& router, const PlanRequest& request);
// Two rings in opposite directions, each over half the buffer: reduce-scatter, all-gather. The
// ring order minimises the cost model's time for one pass (exhaustive up to 9 GPUs, else greedy
// plus 2-opt).
Result<Plan> make_ring_plan(const Router& router, const PlanRequest& request);
// Every GPU owns 1/n of the buffer: all others send it their part at once (reduce-scatter), then
// it sends the sum to all (all-gather). Two stages; wins where every pair has its own path.
Result<Plan> make_flat_plan(const Router& router, const PlanRequest& request);
// BytePS-style CPU-assisted aggregation: GPUs under one PCIe switch reduce-scatter among
// themselves, copy their partial sums to host memory, the CPUs sum across switches (per NUMA node,
// then across NUMA nodes) and the result goes back down the same way. No GPU-to-GPU copy crosses
// a switch. With the network, the shard each NIC carries is completed on the GPUs under that NIC's
// switch, so every switch uplink carries at most the buffer size in each direction.
Result<Plan> make_cpu_assisted_plan(const Router& router, const PlanRequest& request);

}  // namespace sumcast::topo
