// Installs a list of FlowRule into a started port (rte_flow_create) and removes them again
// (rte_flow_destroy), in reverse order. The appliance installs the plan's rules at start-up, after
// rte_eth_dev_start, and removes them before rte_eth_dev_stop. The steering rules match the
// per-core QPNs, which do not depend on the job, so jobs need no rules of their own
// (docs/nic_offload.md §2).
//
// Only real NICs with rte_flow (mlx5, ice, ...) exercise install(); the virtual PMDs of the test
// bed refuse at rte_flow_validate and the plan never asks for it.
//
// Thread safety: main thread only (ethdev control path).
#pragma once

#include <cstdint>
#include <vector>

#include "sumcast/nic_offload/flow_rules.h"
#include "sumcast/status.h"

struct rte_flow;

namespace sumcast::nic_offload {

class FlowInstaller {
 public:
  FlowInstaller() = default;
  ~FlowInstaller();  // remove()
  FlowInstaller(const FlowInstaller&) = delete;
  FlowInstaller& operator=(const FlowInstaller&) = delete;

  // Creates every rule on `port_id`; on a failure removes the ones created and returns the error
  // (naming the rule and the PMD's message).
  Status install(uint16_t port_id, const std::vector<FlowRule>& rules);
  // Destroys what install() created. Idempotent.
  void remove();
  size_t installed() const { return flows_.size(); }

 private:
  uint16_t port_id_ = 0;
  std::vector<rte_flow*> flows_;
};

}  // namespace sumcast::nic_offload
