#include "sumcast/nic_offload/capabilities.h"

#include <rte_ethdev.h>
#include <rte_flow.h>

#include <cstdio>
#include <cstring>

namespace sumcast::nic_offload {
namespace {

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

template <typename NameFn>
std::string bit_names(uint64_t bits, NameFn name_of) {
  std::string s;
  for (int b = 0; b < 64; ++b) {
    const uint64_t bit = uint64_t{1} << b;
    if ((bits & bit) == 0) continue;
    const char* n = name_of(bit);
    if (!s.empty()) s += " ";
    s += (n != nullptr && std::strcmp(n, "UNKNOWN") != 0) ? std::string(n) : hex64(bit);
  }
  return s.empty() ? "none" : s;
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

// Validates every rule; on the first refusal returns kRefused with "<rule>: <message> (<errno>)".
FlowSupport validate_all(uint16_t port_id, const std::vector<FlowRule>& rules, std::string* refusal) {
  for (const FlowRule& r : rules) {
    rte_flow_error err{};
    const int rc = rte_flow_validate(port_id, &r.attr, r.pattern.data(), r.actions.data(), &err);
    if (rc != 0) {
      *refusal = r.name + ": " + (err.message != nullptr ? err.message : "refused") + " (" + rte_strerror(-rc) + ")";
      return FlowSupport::kRefused;
    }
  }
  return FlowSupport::kAccepted;
}

}  // namespace

const char* flow_support_name(FlowSupport s) {
  switch (s) {
    case FlowSupport::kNotProbed:
      return "not_probed";
    case FlowSupport::kAccepted:
      return "accepted";
    case FlowSupport::kRefused:
      return "refused";
  }
  return "?";
}

uint64_t tx_offloads_to_enable(const PortCapabilities& caps) {
  return caps.tx_offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
}

OffloadPlan choose_plan(const PortCapabilities& caps, uint32_t cores, uint16_t queues) {
  OffloadPlan p;
  p.tx_ipv4_cksum = (tx_offloads_to_enable(caps) & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
  const std::string cksum =
      p.tx_ipv4_cksum ? "; tx IPv4 checksum in the NIC" : "; tx IPv4 checksum in software (not offered)";
  if (caps.xdp_program) {
    p.mode = SteeringMode::kXdpProgram;
    p.software_dispatch = cores > 1;
    p.reason = std::string("XDP program on ") + caps.driver +
               ": the kernel hands only RoCEv2 and ARP for the appliance address to the socket and passes the "
               "rest to its own stack" +
               (cores > 1 ? "; software dispatch to slot owners" : "") + cksum;
    return p;
  }
  const bool filter = caps.filter == FlowSupport::kAccepted;
  const std::string filter_text =
      filter ? "; rte_flow filter (accept RoCEv2 and ARP for the appliance, drop the rest) in the NIC"
             : (caps.filter == FlowSupport::kRefused
                    ? "; no NIC filter (rte_flow_validate refused: " + caps.filter_refusal + ")"
                    : "; no NIC filter");
  if (cores <= 1) {
    p.mode = SteeringMode::kSingleCore;
    p.install_filter = filter;
    p.reason = "one worker core: nothing to steer" + filter_text + cksum;
    return p;
  }
  if (caps.steering == FlowSupport::kAccepted && queues >= cores) {
    p.mode = SteeringMode::kFlowDestQpn;
    p.install_steering = true;
    p.install_filter = filter;
    p.reason = "rte_flow steers each core's DestQP to its own queue; no software dispatch" + filter_text + cksum;
    return p;
  }
  p.mode = SteeringMode::kRssSoftwareDispatch;
  p.software_dispatch = true;
  p.install_filter = filter;
  std::string why;
  if (caps.steering == FlowSupport::kRefused) {
    why = "rte_flow_validate refused the DestQP steering rule (" + caps.steering_refusal + ")";
  } else if (queues < cores) {
    why = caps.driver + " gives " + std::to_string(queues) + " rx queue(s) for " + std::to_string(cores) + " cores";
  } else {
    why = "DestQP steering not probed";
  }
  p.reason = "falling back to RSS + software dispatch: " + why + filter_text + cksum;
  return p;
}

std::string rss_hash_names(uint64_t rss_hash) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {RTE_ETH_RSS_IPV4, "ipv4"},
      {RTE_ETH_RSS_FRAG_IPV4, "frag_ipv4"},
      {RTE_ETH_RSS_NONFRAG_IPV4_TCP, "nonfrag_ipv4_tcp"},
      {RTE_ETH_RSS_NONFRAG_IPV4_UDP, "nonfrag_ipv4_udp"},
      {RTE_ETH_RSS_NONFRAG_IPV4_OTHER, "nonfrag_ipv4_other"},
      {RTE_ETH_RSS_IPV6, "ipv6"},
      {RTE_ETH_RSS_NONFRAG_IPV6_UDP, "nonfrag_ipv6_udp"},
      {RTE_ETH_RSS_L2_PAYLOAD, "l2_payload"},
      {RTE_ETH_RSS_PORT, "port"},
  };
  std::string s;
  uint64_t rest = rss_hash;
  for (const auto& [bit, name] : kNames) {
    if ((rss_hash & bit) == 0) continue;
    rest &= ~bit;
    if (!s.empty()) s += " ";
    s += name;
  }
  if (rest != 0) s += (s.empty() ? "" : " ") + std::string("other:") + hex64(rest);
  return s.empty() ? "none" : s;
}

std::string rx_offload_names(uint64_t offloads) { return bit_names(offloads, rte_eth_dev_rx_offload_name); }
std::string tx_offload_names(uint64_t offloads) { return bit_names(offloads, rte_eth_dev_tx_offload_name); }

std::vector<std::pair<std::string, std::string>> describe(const PortCapabilities& caps) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("driver", caps.driver);
  rows.emplace_back("max_queues",
                    std::to_string(caps.max_rx_queues) + " rx, " + std::to_string(caps.max_tx_queues) + " tx");
  rows.emplace_back("rss_hash", rss_hash_names(caps.rss_hash));
  rows.emplace_back("rx_offloads", rx_offload_names(caps.rx_offloads));
  rows.emplace_back("tx_offloads", tx_offload_names(caps.tx_offloads));
  rows.emplace_back("tx_ipv4_cksum", yes_no((caps.tx_offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0));
  rows.emplace_back("tx_udp_cksum", yes_no((caps.tx_offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0));
  rows.emplace_back("rx_ipv4_cksum", yes_no((caps.rx_offloads & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0));
  rows.emplace_back("rx_udp_cksum", yes_no((caps.rx_offloads & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) != 0));
  rows.emplace_back("tx_multi_segs", yes_no((caps.tx_offloads & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0));
  rows.emplace_back("rx_scatter", yes_no((caps.rx_offloads & RTE_ETH_RX_OFFLOAD_SCATTER) != 0));
  rows.emplace_back("rx_vlan_strip", yes_no((caps.rx_offloads & RTE_ETH_RX_OFFLOAD_VLAN_STRIP) != 0));
  rows.emplace_back("tx_vlan_insert", yes_no((caps.tx_offloads & RTE_ETH_TX_OFFLOAD_VLAN_INSERT) != 0));
  rows.emplace_back("xdp_program", yes_no(caps.xdp_program));
  rows.emplace_back("flow_steering", flow_support_name(caps.steering));
  if (!caps.steering_refusal.empty()) rows.emplace_back("flow_steering_refusal", caps.steering_refusal);
  rows.emplace_back("flow_filter", flow_support_name(caps.filter));
  if (!caps.filter_refusal.empty()) rows.emplace_back("flow_filter_refusal", caps.filter_refusal);
  return rows;
}

PortCapabilities probe_device(uint16_t port_id, const VdevArgs& vdev) {
  PortCapabilities caps;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0) return caps;
  caps.driver = info.driver_name != nullptr ? info.driver_name : "?";
  caps.max_rx_queues = info.max_rx_queues;
  caps.max_tx_queues = info.max_tx_queues;
  caps.rss_hash = info.flow_type_rss_offloads;
  caps.rx_offloads = info.rx_offload_capa;
  caps.tx_offloads = info.tx_offload_capa;
  caps.xdp_program = caps.driver == "net_af_xdp" && !vdev.get("xdp_prog").empty();
  return caps;
}

void probe_flows(uint16_t port_id, uint32_t appliance_ipv4, uint32_t cores, uint16_t queues, uint32_t core_qpn_base,
                 bool rss, PortCapabilities* caps) {
  if (caps->xdp_program) return;  // the XDP program filters; the af_xdp PMD has no rte_flow
  if (cores > 1) {
    std::vector<FlowRule> steer;
    for (uint32_t c = 0; c < cores && c < queues; ++c) {
      steer.push_back(steer_rule(appliance_ipv4, core_qpn_base + c, static_cast<uint16_t>(c)));
    }
    caps->steering = validate_all(port_id, steer, &caps->steering_refusal);
  }
  const bool steering = caps->steering == FlowSupport::kAccepted && queues >= cores;
  caps->filter = validate_all(port_id, filter_rules(appliance_ipv4, queues, rss && !steering), &caps->filter_refusal);
}

}  // namespace sumcast::nic_offload
