// The planner (docs/topology.md §2-3): builds every candidate plan for the host, prices each with
// the one cost model and picks the fastest. Ties (within 0.5%: a NIC bottleneck every plan shares)
// go to the plan whose intra-host part is faster, then to the earlier strategy in Strategy order.
#pragma once

#include <string>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/cost_model.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo {

struct Candidate {
  Strategy strategy = Strategy::kTrees;
  Status status;  // not OK: the strategy does not apply here (why)
  Plan plan;
  Prediction prediction;
};

struct PlannerResult {
  std::vector<Candidate> candidates;  // in Strategy order
  int chosen = -1;                    // index into candidates
  std::string why;                    // one paragraph: the winner, its bottleneck, the runners-up

  const Candidate& best() const { return candidates[static_cast<size_t>(chosen)]; }
  const Candidate* find(Strategy s) const;
};

// Plans the host's reduce and broadcast of request.bytes per GPU. Fails only when no strategy
// applies (and then says why each does not).
Result<PlannerResult> plan_host(const HostModel& model, const PlanRequest& request);

}  // namespace sumcast::topo
