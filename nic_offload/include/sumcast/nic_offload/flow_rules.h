// rte_flow rules for the appliance's data port, built as plain data (pure functions: no port, no
// EAL), so that tests can compare the exact pattern and action lists (docs/nic_offload.md §2).
//
// The protocol steers by the BTH DestQP (docs/protocol.md §3: a contribution's DestQP is the QPN of
// the core that owns its slot, kCoreQpnBase + core). DPDK 22.11 has no BTH item, so the QPN is
// matched with a RAW item relative to the UDP header: the 3 bytes at offset 5 of the UDP payload
// (BTH bytes 5..7).
//
// Priorities (lower value wins; group 0, ingress):
//   0  kPrioritySteer   ETH / IPV4 dst=appliance proto=UDP / UDP dst=4791 / RAW DestQP=core's
//                       -> QUEUE core's queue                       (steering mode only)
//   1  kPriorityAccept  ETH / IPV4 dst=appliance proto=UDP / UDP dst=4791
//                       -> QUEUE 0 (steering) or RSS over every queue (RSS + software dispatch)
//   1  kPriorityAccept  ETH type=ARP -> QUEUE 0 (the appliance answers ARP itself)
//   2  kPriorityDrop    ETH (anything) -> DROP
//
// Lifetime: a FlowRule owns the specs and masks its items point to (heap storage that does not
// move when the FlowRule does). Thread safety: none needed (values).
#pragma once

#include <rte_flow.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sumcast::nic_offload {

inline constexpr uint32_t kPrioritySteer = 0;
inline constexpr uint32_t kPriorityAccept = 1;
inline constexpr uint32_t kPriorityDrop = 2;
// The BTH DestQP sits at bytes 5..7 of the BTH, i.e. of the UDP payload (docs/protocol.md §3).
inline constexpr int32_t kDestQpOffsetInUdpPayload = 5;
inline constexpr uint16_t kDestQpLen = 3;
// Queues an RSS action may name (one per worker core).
inline constexpr uint32_t kMaxRssQueues = 256;

// How the port delivers each slot's frames to the core that owns the slot.
enum class SteeringMode : uint8_t {
  kSingleCore,           // one worker core: nothing to steer
  kFlowDestQpn,          // rte_flow RAW match on BTH DestQP -> the owner's queue; no software dispatch
  kRssSoftwareDispatch,  // RSS (or one queue) spreads frames; rx cores dispatch to owners in software
  kXdpProgram,           // AF_XDP with the Sumcast XDP program filtering; software dispatch when > 1 core
};
const char* steering_mode_name(SteeringMode mode);

struct FlowRule {
  std::string name;  // "steer core 1 (qpn 0x000101)", "accept roce", "accept arp", "drop other"
  rte_flow_attr attr{};
  std::vector<rte_flow_item> pattern;    // ends with RTE_FLOW_ITEM_TYPE_END
  std::vector<rte_flow_action> actions;  // ends with RTE_FLOW_ACTION_TYPE_END

  // Backing storage for every spec/mask/conf pointer above (stable address).
  struct Storage {
    rte_flow_item_eth eth_spec{}, eth_mask{};
    rte_flow_item_ipv4 ipv4_spec{}, ipv4_mask{};
    rte_flow_item_udp udp_spec{}, udp_mask{};
    rte_flow_item_raw raw_spec{}, raw_mask{};
    uint8_t raw_pattern[kDestQpLen] = {};
    uint8_t raw_pattern_mask[kDestQpLen] = {};
    rte_flow_action_queue queue{};
    rte_flow_action_rss rss{};
    uint16_t rss_queues[kMaxRssQueues] = {};
  };
  std::unique_ptr<Storage> storage = std::make_unique<Storage>();
};

// Core `core`'s steering rule: RoCEv2 to `appliance_ipv4` (host order) whose BTH DestQP is `qpn`
// goes to rx queue `queue`.
FlowRule steer_rule(uint32_t appliance_ipv4, uint32_t qpn, uint16_t queue);
// Every other RoCEv2 frame to the appliance: to queue 0 when `queues` == 1 or `rss` is false,
// else an RSS action (IPv4/UDP hash) over queues 0..queues-1.
FlowRule accept_roce_rule(uint32_t appliance_ipv4, uint16_t queues, bool rss);
// ARP to queue 0 (sumcastd's core 0 answers ARP for the appliance address).
FlowRule accept_arp_rule();
// Anything else is dropped in the NIC.
FlowRule drop_rule();

// The whole rule list of a mode, in installation order (highest priority first):
//   kFlowDestQpn: steer_rule per core (qpn kCoreQpnBase + i -> queue i), accept roce -> queue 0,
//                 accept arp, drop.
//   kRssSoftwareDispatch: accept roce (RSS when queues > 1), accept arp, drop.
//   kSingleCore: accept roce -> queue 0, accept arp, drop.
//   kXdpProgram: none (the XDP program filters).
// `core_qpn_base` is dpdk::kCoreQpnBase (passed in: nic_offload does not depend on the lcore layer).
std::vector<FlowRule> rules_for(SteeringMode mode, uint32_t appliance_ipv4, uint32_t cores, uint16_t queues,
                                uint32_t core_qpn_base);

// The filter rules only (accept roce, accept arp, drop) for `queues` queues.
std::vector<FlowRule> filter_rules(uint32_t appliance_ipv4, uint16_t queues, bool rss);

// "ETH(type=0x0800) / IPV4(dst=10.0.0.1,proto=17) / UDP(dst=4791) / RAW(rel,off=5,00:01:01) ->
// QUEUE(1)" (logs and test failure messages).
std::string describe(const FlowRule& rule);

}  // namespace sumcast::nic_offload
