#include "sumcast/nic_offload/flow_installer.h"

#include <rte_errno.h>
#include <rte_flow.h>

namespace sumcast::nic_offload {

FlowInstaller::~FlowInstaller() { remove(); }

Status FlowInstaller::install(uint16_t port_id, const std::vector<FlowRule>& rules) {
  remove();
  port_id_ = port_id;
  for (const FlowRule& r : rules) {
    rte_flow_error err{};
    rte_flow* f = rte_flow_create(port_id, &r.attr, r.pattern.data(), r.actions.data(), &err);
    if (f == nullptr) {
      const std::string msg = "port " + std::to_string(port_id) + ": rte_flow_create \"" + r.name +
                              "\": " + (err.message != nullptr ? err.message : "failed") + " (" +
                              rte_strerror(rte_errno) + ")";
      remove();
      return Status::unavailable(msg);
    }
    flows_.push_back(f);
  }
  return {};
}

void FlowInstaller::remove() {
  for (auto it = flows_.rbegin(); it != flows_.rend(); ++it) {
    rte_flow_error err{};
    (void)rte_flow_destroy(port_id_, *it, &err);
  }
  flows_.clear();
}

}  // namespace sumcast::nic_offload
