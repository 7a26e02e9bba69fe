// Text views of a host and its plans, as sumcast-topo prints them (docs/topology.md §4):
// an `nvidia-smi topo -m`-style matrix computed from the model, the host's switches, NICs and
// assumptions, and a plan with its per-link bytes and predicted time.
#pragma once

#include <string>

#include "sumcast/topo/host_model.h"
#include "sumcast/topo/planner.h"
#include "sumcast/topo/router.h"

namespace sumcast::topo {

// nvidia-smi's relation between two GPUs/NICs in the model: "X", "NV#" (an NVLink-only route; #
// the fewest bonded links on it), "PIX" (both directly below one switch), "PXB" (below one
// switch, deeper), "PHB" (one host bridge, or one root complex without host bridges), "NODE"
// (host bridges within a NUMA node), "SYS" (different NUMA nodes).
std::string relation(const Router& router, int a, int b);

// The matrix over GPUs then NICs, with each row's NUMA node, and the legend.
std::string format_topo_matrix(const Router& router);
// Source, NUMA nodes, PCIe switches and what hangs below them, NVSwitch planes, NICs, link
// counts by kind, and the assumptions.
std::string format_host_summary(const HostModel& model);
// Every candidate's predicted time and bottleneck, the chosen one marked.
std::string format_candidates(const PlannerResult& result);
// The plan: strategy and parameters, why it won, per-link bytes and times (every loaded
// resource), its stages; with `steps`, every step too.
std::string format_plan(const HostModel& model, const PlannerResult& result, const Candidate& c, bool steps);

}  // namespace sumcast::topo
