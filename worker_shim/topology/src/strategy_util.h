// Helpers the plan builders share.
#pragma once

#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/plan.h"
#include "sumcast/topo/router.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo::internal {

// The NICs a plan sends through: those with the fastest network link. Empty without NICs.
std::vector<int> fastest_nics(const HostModel& model);
// Of `nics`, the one with the widest route from `node` (then the fewest hops, then the first).
int nearest_nic(const Router& router, int node, const std::vector<int>& nics);
// A plan skeleton: name, sizes (bytes rounded down to the element size).
Plan new_plan(Strategy s, const PlanRequest& request);
// Removes stages without steps.
void drop_empty_stages(Plan& plan);
// Adds one exchange stage: each (GPU node, range) goes out through its nearest NIC. Fails when the
// host has no NIC.
Status add_gpu_exchange_stage(const Router& router, Plan& plan,
                              const std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>>& owned);

}  // namespace sumcast::topo::internal
