// Routes through a HostModel: which links a copy from one endpoint (GPU, NIC, NUMA node's memory,
// the network) to another crosses, in which direction. A route is the widest path (largest
// bottleneck bandwidth), then the shortest among those; it may pass through PCIe switches, host
// bridges, NUMA nodes (root complexes and the SMP interconnect) and NVSwitch planes, never through
// a GPU or a NIC. That is how DMA engines and peer copies move data: NVLink when there is one,
// else up the PCIe tree and down again.
//
// Lifetime: keeps a reference to the model, which must outlive the router.
// Thread safety: built once, then read-only.
#pragma once

#include <vector>

#include "sumcast/topo/host_model.h"

namespace sumcast::topo {

struct Route {
  std::vector<LinkDir> hops;  // in order from source to destination
  double gbps = 0;            // bottleneck bandwidth; kUnlimited for an empty route
};

class Router {
 public:
  explicit Router(const HostModel& model);

  // The route between two endpoints (node ids). Empty when from == to. Precondition: both are
  // endpoints (GPU, NIC, NUMA or network node) and connected (HostModel::finish checked GPUs).
  const Route& route(int from, int to) const;
  // True when the route uses NVLink/NVSwitch links only.
  bool nvlink_only(int from, int to) const;
  const HostModel& model() const { return model_; }

 private:
  Route compute(int from, int to) const;
  int slot(int node) const { return slot_[static_cast<size_t>(node)]; }

  const HostModel& model_;
  std::vector<int> slot_;  // node id -> endpoint slot, -1 for non-endpoints
  std::vector<int> endpoints_;
  std::vector<Route> routes_;  // slot(from) * endpoints + slot(to)
};

}  // namespace sumcast::topo
