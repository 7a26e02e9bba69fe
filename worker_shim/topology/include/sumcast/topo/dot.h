// Pictures of a host and its plan as Graphviz DOT (docs/topology.md §4), and rendering them with
// the `dot` program when it is installed.
#pragma once

#include <string>

#include "sumcast/status.h"
#include "sumcast/topo/cost_model.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"

namespace sumcast::topo {

// The host: NUMA nodes as clusters holding their PCIe trees, NVLink/NVSwitch/SMP/network links
// styled by kind and labelled with their width. With a prediction, every loaded link is also
// labelled with its bytes (the busier direction) and drawn thicker and redder as its time nears
// the bottleneck's.
std::string host_dot(const HostModel& model, const Plan* plan, const Prediction* prediction);
// The plan's structure over the GPUs: one small graph per tree (edges child -> parent), the ring,
// or the CPU-assisted groups with the host memory they reduce into.
std::string plan_dot(const HostModel& model, const Plan& plan);

// True when `dot` is on PATH.
bool dot_available();
// Runs `dot -T<format> -o <out> <in>` (format: svg, png, ...).
Status render_dot(const std::string& in, const std::string& out, const std::string& format);

}  // namespace sumcast::topo
