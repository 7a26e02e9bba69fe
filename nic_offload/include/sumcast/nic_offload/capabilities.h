// What the data port can do for the dataplane, probed once at start-up, and the offload plan chosen
// from it (docs/nic_offload.md).
//
// Probing has two stages because DPDK needs some answers before and some after configuration:
//   probe_device()  rte_eth_dev_info: driver, queues, RSS hash functions, rx/tx offload flags
//                   (before rte_eth_dev_configure: the tx offloads to enable come from it);
//   probe_flows()   rte_flow_validate of the DestQP steering rules and of the filter rules
//                   (after the queues are set up: validation names queue indexes).
// choose_plan() is pure: the same capabilities always give the same plan, and tests feed it
// every capability set by hand.
//
// Thread safety: values; probe_* from the main thread (ethdev control path).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/config/vdev.h"
#include "sumcast/nic_offload/flow_rules.h"

namespace sumcast::nic_offload {

enum class FlowSupport : uint8_t {
  kNotProbed,  // probe_flows() not run (one core, or an XDP port)
  kAccepted,   // rte_flow_validate accepted every rule of the set
  kRefused,    // it refused one (the message says which and why)
};
const char* flow_support_name(FlowSupport s);

struct PortCapabilities {
  std::string driver;  // PMD name, e.g. net_mlx5, net_ice, net_af_xdp
  uint16_t max_rx_queues = 0;
  uint16_t max_tx_queues = 0;
  uint64_t rss_hash = 0;                           // dev_info.flow_type_rss_offloads (RTE_ETH_RSS_*)
  uint64_t rx_offloads = 0;                        // dev_info.rx_offload_capa (RTE_ETH_RX_OFFLOAD_*)
  uint64_t tx_offloads = 0;                        // dev_info.tx_offload_capa (RTE_ETH_TX_OFFLOAD_*)
  bool xdp_program = false;                        // net_af_xdp with xdp_prog= (the Sumcast XDP program filters)
  FlowSupport steering = FlowSupport::kNotProbed;  // the per-core DestQP rules
  FlowSupport filter = FlowSupport::kNotProbed;    // accept roce / accept arp / drop other
  std::string steering_refusal;                    // "steer qpn 0x000100 -> queue 0: <PMD's message> (errno ...)"
  std::string filter_refusal;
};

struct OffloadPlan {
  SteeringMode mode = SteeringMode::kSingleCore;
  bool software_dispatch = false;  // rx cores hand foreign slots' frames to their owners
  bool install_steering = false;   // the per-core DestQP rules go into the NIC
  bool install_filter = false;     // accept roce / accept arp / drop other go into the NIC
  bool tx_ipv4_cksum = false;      // the NIC fills the IPv4 header checksum of sent frames
  // Why this plan, one line for the start-up log (said once).
  std::string reason;
};

// RTE_ETH_TX_OFFLOAD_* bits sumcastd enables on a port with these capabilities (IPv4 checksum when
// offered; never UDP checksum: RoCEv2 frames carry UDP checksum 0, docs/protocol.md §2).
uint64_t tx_offloads_to_enable(const PortCapabilities& caps);

// The plan for `cores` worker cores on `queues` rx queues. Rules, in order:
//   XDP program on the port      -> kXdpProgram (software dispatch when cores > 1)
//   cores == 1                   -> kSingleCore (filter rules if validated)
//   steering accepted, queues >= cores -> kFlowDestQpn, no software dispatch
//   otherwise                    -> kRssSoftwareDispatch (filter rules if validated), and the
//                                   reason names the refusal
OffloadPlan choose_plan(const PortCapabilities& caps, uint32_t cores, uint16_t queues);

// name/value rows for logs and telemetry: driver, queues, rss hash functions, rx/tx offloads (names
// from ethdev), the checksum/multi-segment/VLAN booleans, flow support and refusals.
std::vector<std::pair<std::string, std::string>> describe(const PortCapabilities& caps);
// "ipv4 nonfrag_ipv4_udp ..." for RTE_ETH_RSS_* bits (the ones Sumcast cares about, then "0x.." for
// the rest).
std::string rss_hash_names(uint64_t rss_hash);
std::string rx_offload_names(uint64_t offloads);
std::string tx_offload_names(uint64_t offloads);

// The port's vdev arguments (parsed by config, which validates eal.vdevs).
using config::find_vdev;
using config::parse_vdev;
using config::VdevArgs;

// --- Runtime (needs the EAL and a configured port). ---

// Stage 1: rte_eth_dev_info_get. `vdev` is the port's parsed vdev (for xdp_prog=), possibly empty.
PortCapabilities probe_device(uint16_t port_id, const VdevArgs& vdev);
// Stage 2: rte_flow_validate of the steering rules (when cores > 1) and the filter rules, into
// caps->steering/filter and their refusal messages.
void probe_flows(uint16_t port_id, uint32_t appliance_ipv4, uint32_t cores, uint16_t queues, uint32_t core_qpn_base,
                 bool rss, PortCapabilities* caps);

}  // namespace sumcast::nic_offload
