#include "sumcast/nic_offload/flow_rules.h"

#include <rte_byteorder.h>
#include <rte_ethdev.h>

#include <cstdio>

#include "sumcast/ipv4.h"
#include "sumcast/wire/format.h"

namespace sumcast::nic_offload {
namespace {

rte_flow_item item(rte_flow_item_type type, const void* spec, const void* mask) {
  rte_flow_item i{};
  i.type = type;
  i.spec = spec;
  i.mask = mask;
  return i;
}

rte_flow_action action(rte_flow_action_type type, const void* conf) {
  rte_flow_action a{};
  a.type = type;
  a.conf = conf;
  return a;
}

FlowRule make_rule(std::string name, uint32_t priority) {
  FlowRule r;
  r.name = std::move(name);
  r.attr.group = 0;
  r.attr.priority = priority;
  r.attr.ingress = 1;
  return r;
}

// ETH(type IPv4) / IPV4(dst, proto UDP) / UDP(dst 4791): the items every RoCEv2 rule starts with.
void push_roce_items(FlowRule& r, uint32_t appliance_ipv4) {
  FlowRule::Storage& s = *r.storage;
  s.eth_spec.hdr.ether_type = rte_cpu_to_be_16(wire::kEtherTypeIpv4);
  s.eth_mask.hdr.ether_type = RTE_BE16(0xFFFF);
  s.ipv4_spec.hdr.dst_addr = rte_cpu_to_be_32(appliance_ipv4);
  s.ipv4_mask.hdr.dst_addr = RTE_BE32(0xFFFFFFFF);
  s.ipv4_spec.hdr.next_proto_id = wire::kIpProtoUdp;
  s.ipv4_mask.hdr.next_proto_id = 0xFF;
  s.udp_spec.hdr.dst_port = rte_cpu_to_be_16(wire::kRoceUdpPort);
  s.udp_mask.hdr.dst_port = RTE_BE16(0xFFFF);
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_ETH, &s.eth_spec, &s.eth_mask));
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_IPV4, &s.ipv4_spec, &s.ipv4_mask));
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_UDP, &s.udp_spec, &s.udp_mask));
}

void push_queue(FlowRule& r, uint16_t queue) {
  r.storage->queue.index = queue;
  r.actions.push_back(action(RTE_FLOW_ACTION_TYPE_QUEUE, &r.storage->queue));
}

void finish(FlowRule& r) {
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr));
  r.actions.push_back(action(RTE_FLOW_ACTION_TYPE_END, nullptr));
}

std::string hex_qpn(uint32_t qpn) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%06x", qpn & 0xFFFFFFu);
  return buf;
}

std::string describe_item(const rte_flow_item& i) {
  char buf[96];
  switch (i.type) {
    case RTE_FLOW_ITEM_TYPE_ETH: {
      const auto* spec = static_cast<const rte_flow_item_eth*>(i.spec);
      const auto* mask = static_cast<const rte_flow_item_eth*>(i.mask);
      if (spec == nullptr || mask == nullptr || mask->hdr.ether_type == 0) return "ETH";
      std::snprintf(buf, sizeof(buf), "ETH(type=0x%04x)", rte_be_to_cpu_16(spec->hdr.ether_type));
      return buf;
    }
    case RTE_FLOW_ITEM_TYPE_IPV4: {
      const auto* spec = static_cast<const rte_flow_item_ipv4*>(i.spec);
      if (spec == nullptr) return "IPV4";
      return "IPV4(dst=" + format_ipv4(rte_be_to_cpu_32(spec->hdr.dst_addr)) +
             ",proto=" + std::to_string(spec->hdr.next_proto_id) + ")";
    }
    case RTE_FLOW_ITEM_TYPE_UDP: {
      const auto* spec = static_cast<const rte_flow_item_udp*>(i.spec);
      if (spec == nullptr) return "UDP";
      return "UDP(dst=" + std::to_string(rte_be_to_cpu_16(spec->hdr.dst_port)) + ")";
    }
    case RTE_FLOW_ITEM_TYPE_RAW: {
      const auto* spec = static_cast<const rte_flow_item_raw*>(i.spec);
      if (spec == nullptr) return "RAW";
      std::string s =
          std::string("RAW(") + (spec->relative ? "rel," : "") + "off=" + std::to_string(spec->offset) + ",";
      for (uint16_t k = 0; k < spec->length; ++k) {
        std::snprintf(buf, sizeof(buf), "%s%02x", k == 0 ? "" : ":", spec->pattern[k]);
        s += buf;
      }
      return s + ")";
    }
    case RTE_FLOW_ITEM_TYPE_END:
      return "END";
    default:
      return "ITEM(" + std::to_string(static_cast<int>(i.type)) + ")";
  }
}

std::string describe_action(const rte_flow_action& a) {
  switch (a.type) {
    case RTE_FLOW_ACTION_TYPE_QUEUE:
      return "QUEUE(" + std::to_string(static_cast<const rte_flow_action_queue*>(a.conf)->index) + ")";
    case RTE_FLOW_ACTION_TYPE_RSS: {
      const auto* rss = static_cast<const rte_flow_action_rss*>(a.conf);
      return "RSS(queues=" + std::to_string(rss->queue_num) + ")";
    }
    case RTE_FLOW_ACTION_TYPE_DROP:
      return "DROP";
    case RTE_FLOW_ACTION_TYPE_END:
      return "END";
    default:
      return "ACTION(" + std::to_string(static_cast<int>(a.type)) + ")";
  }
}

}  // namespace

const char* steering_mode_name(SteeringMode mode) {
  switch (mode) {
    case SteeringMode::kSingleCore:
      return "single_core";
    case SteeringMode::kFlowDestQpn:
      return "rte_flow_dest_qpn";
    case SteeringMode::kRssSoftwareDispatch:
      return "rss_software_dispatch";
    case SteeringMode::kXdpProgram:
      return "xdp_program";
  }
  return "?";
}

FlowRule steer_rule(uint32_t appliance_ipv4, uint32_t qpn, uint16_t queue) {
  FlowRule r = make_rule("steer qpn " + hex_qpn(qpn) + " -> queue " + std::to_string(queue), kPrioritySteer);
  push_roce_items(r, appliance_ipv4);
  FlowRule::Storage& s = *r.storage;
  s.raw_pattern[0] = static_cast<uint8_t>(qpn >> 16);
  s.raw_pattern[1] = static_cast<uint8_t>(qpn >> 8);
  s.raw_pattern[2] = static_cast<uint8_t>(qpn);
  s.raw_pattern_mask[0] = s.raw_pattern_mask[1] = s.raw_pattern_mask[2] = 0xFF;
  s.raw_spec.relative = 1;
  s.raw_spec.search = 0;
  s.raw_spec.offset = kDestQpOffsetInUdpPayload;
  s.raw_spec.limit = 0;
  s.raw_spec.length = kDestQpLen;
  s.raw_spec.pattern = s.raw_pattern;
  // The RAW mask: every field of the spec is exact; the pattern mask selects all 3 bytes.
  s.raw_mask.relative = 1;
  s.raw_mask.search = 1;
  s.raw_mask.offset = -1;
  s.raw_mask.limit = 0xFFFF;
  s.raw_mask.length = 0xFFFF;
  s.raw_mask.pattern = s.raw_pattern_mask;
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_RAW, &s.raw_spec, &s.raw_mask));
  push_queue(r, queue);
  finish(r);
  return r;
}

FlowRule accept_roce_rule(uint32_t appliance_ipv4, uint16_t queues, bool rss) {
  const bool spread = rss && queues > 1;
  FlowRule r = make_rule(spread ? "accept roce -> rss" : "accept roce -> queue 0", kPriorityAccept);
  push_roce_items(r, appliance_ipv4);
  if (spread) {
    FlowRule::Storage& s = *r.storage;
    const uint16_t n = static_cast<uint16_t>(queues > kMaxRssQueues ? kMaxRssQueues : queues);
    for (uint16_t q = 0; q < n; ++q) s.rss_queues[q] = q;
    s.rss.func = RTE_ETH_HASH_FUNCTION_DEFAULT;
    s.rss.level = 0;
    s.rss.types = RTE_ETH_RSS_NONFRAG_IPV4_UDP;
    s.rss.key_len = 0;
    s.rss.key = nullptr;
    s.rss.queue_num = n;
    s.rss.queue = s.rss_queues;
    r.actions.push_back(action(RTE_FLOW_ACTION_TYPE_RSS, &s.rss));
  } else {
    push_queue(r, 0);
  }
  finish(r);
  return r;
}

FlowRule accept_arp_rule() {
  FlowRule r = make_rule("accept arp -> queue 0", kPriorityAccept);
  FlowRule::Storage& s = *r.storage;
  s.eth_spec.hdr.ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
  s.eth_mask.hdr.ether_type = RTE_BE16(0xFFFF);
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_ETH, &s.eth_spec, &s.eth_mask));
  push_queue(r, 0);
  finish(r);
  return r;
}

FlowRule drop_rule() {
  FlowRule r = make_rule("drop other", kPriorityDrop);
  r.pattern.push_back(item(RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr));
  r.actions.push_back(action(RTE_FLOW_ACTION_TYPE_DROP, nullptr));
  finish(r);
  return r;
}

std::vector<FlowRule> filter_rules(uint32_t appliance_ipv4, uint16_t queues, bool rss) {
  std::vector<FlowRule> rules;
  rules.push_back(accept_roce_rule(appliance_ipv4, queues, rss));
  rules.push_back(accept_arp_rule());
  rules.push_back(drop_rule());
  return rules;
}

std::vector<FlowRule> rules_for(SteeringMode mode, uint32_t appliance_ipv4, uint32_t cores, uint16_t queues,
                                uint32_t core_qpn_base) {
  std::vector<FlowRule> rules;
  switch (mode) {
    case SteeringMode::kFlowDestQpn:
      for (uint32_t c = 0; c < cores; ++c) {
        rules.push_back(steer_rule(appliance_ipv4, core_qpn_base + c, static_cast<uint16_t>(c)));
      }
      for (FlowRule& r : filter_rules(appliance_ipv4, queues, false)) rules.push_back(std::move(r));
      break;
    case SteeringMode::kRssSoftwareDispatch:
      rules = filter_rules(appliance_ipv4, queues, true);
      break;
    case SteeringMode::kSingleCore:
      rules = filter_rules(appliance_ipv4, 1, false);
      break;
    case SteeringMode::kXdpProgram:
      break;
  }
  return rules;
}

std::string describe(const FlowRule& rule) {
  std::string s;
  for (const rte_flow_item& i : rule.pattern) {
    if (i.type == RTE_FLOW_ITEM_TYPE_END) break;
    if (!s.empty()) s += " / ";
    s += describe_item(i);
  }
  s += " ->";
  for (const rte_flow_action& a : rule.actions) {
    if (a.type == RTE_FLOW_ACTION_TYPE_END) break;
    s += " " + describe_action(a);
  }
  return s + " (priority " + std::to_string(rule.attr.priority) + ")";
}

}  // namespace sumcast::nic_offload
