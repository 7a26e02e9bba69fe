// Rule construction (nic_offload/flow_rules.h): the exact pattern and action lists per steering
// mode, checked field by field and against where a real frame carries the matched bytes.
#include "sumcast/nic_offload/flow_rules.h"

#include <gtest/gtest.h>
#include <rte_byteorder.h>
#include <rte_ethdev.h>

#include <cstring>
#include <vector>

#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::nic_offload {
namespace {

constexpr uint32_t kApplianceIp = 0x0A000001;  // 10.0.0.1
constexpr uint32_t kQpnBase = 0x100;

std::vector<rte_flow_item_type> item_types(const FlowRule& r) {
  std::vector<rte_flow_item_type> t;
  for (const auto& i : r.pattern) t.push_back(i.type);
  return t;
}
std::vector<rte_flow_action_type> action_types(const FlowRule& r) {
  std::vector<rte_flow_action_type> t;
  for (const auto& a : r.actions) t.push_back(a.type);
  return t;
}

// ETH(type 0x0800) / IPV4(dst, UDP) / UDP(dst 4791), all exact-masked.
void expect_roce_items(const FlowRule& r) {
  ASSERT_GE(r.pattern.size(), 4u);
  const auto* eth = static_cast<const rte_flow_item_eth*>(r.pattern[0].spec);
  const auto* eth_m = static_cast<const rte_flow_item_eth*>(r.pattern[0].mask);
  ASSERT_NE(eth, nullptr);
  ASSERT_NE(eth_m, nullptr);
  EXPECT_EQ(eth->hdr.ether_type, rte_cpu_to_be_16(0x0800));
  EXPECT_EQ(eth_m->hdr.ether_type, 0xFFFF);
  const uint8_t zero_mac[6] = {};
  EXPECT_EQ(std::memcmp(eth_m->hdr.dst_addr.addr_bytes, zero_mac, 6), 0) << "MACs are not matched";
  const auto* ip = static_cast<const rte_flow_item_ipv4*>(r.pattern[1].spec);
  const auto* ip_m = static_cast<const rte_flow_item_ipv4*>(r.pattern[1].mask);
  ASSERT_NE(ip, nullptr);
  ASSERT_NE(ip_m, nullptr);
  EXPECT_EQ(rte_be_to_cpu_32(ip->hdr.dst_addr), kApplianceIp);
  EXPECT_EQ(ip_m->hdr.dst_addr, 0xFFFFFFFFu);
  EXPECT_EQ(ip_m->hdr.src_addr, 0u) << "any worker";
  EXPECT_EQ(ip->hdr.next_proto_id, 17);
  EXPECT_EQ(ip_m->hdr.next_proto_id, 0xFF);
  const auto* udp = static_cast<const rte_flow_item_udp*>(r.pattern[2].spec);
  const auto* udp_m = static_cast<const rte_flow_item_udp*>(r.pattern[2].mask);
  ASSERT_NE(udp, nullptr);
  ASSERT_NE(udp_m, nullptr);
  EXPECT_EQ(rte_be_to_cpu_16(udp->hdr.dst_port), 4791);
  EXPECT_EQ(udp_m->hdr.dst_port, 0xFFFF);
  EXPECT_EQ(udp_m->hdr.src_port, 0) << "RoCE NICs pick the source port per flow: never matched";
}

TEST(FlowRulesTest, SteerRuleMatchesDestQpnAfterUdpAndQueuesToTheCore) {
  const FlowRule r = steer_rule(kApplianceIp, 0x000101, 1);
  EXPECT_EQ(r.attr.ingress, 1u);
  EXPECT_EQ(r.attr.egress, 0u);
  EXPECT_EQ(r.attr.group, 0u);
  EXPECT_EQ(r.attr.priority, kPrioritySteer);
  EXPECT_EQ(item_types(r),
            (std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP,
                                             RTE_FLOW_ITEM_TYPE_RAW, RTE_FLOW_ITEM_TYPE_END}));
  expect_roce_items(r);
  const auto* raw = static_cast<const rte_flow_item_raw*>(r.pattern[3].spec);
  const auto* raw_m = static_cast<const rte_flow_item_raw*>(r.pattern[3].mask);
  ASSERT_NE(raw, nullptr);
  ASSERT_NE(raw_m, nullptr);
  EXPECT_EQ(raw->relative, 1u);
  EXPECT_EQ(raw->search, 0u);
  EXPECT_EQ(raw->offset, 5);
  EXPECT_EQ(raw->length, 3);
  ASSERT_NE(raw->pattern, nullptr);
  EXPECT_EQ(raw->pattern[0], 0x00);
  EXPECT_EQ(raw->pattern[1], 0x01);
  EXPECT_EQ(raw->pattern[2], 0x01);
  ASSERT_NE(raw_m->pattern, nullptr);
  EXPECT_EQ(raw_m->pattern[0] & raw_m->pattern[1] & raw_m->pattern[2], 0xFF);
  EXPECT_EQ(action_types(r), (std::vector<rte_flow_action_type>{RTE_FLOW_ACTION_TYPE_QUEUE, RTE_FLOW_ACTION_TYPE_END}));
  EXPECT_EQ(static_cast<const rte_flow_action_queue*>(r.actions[0].conf)->index, 1);
}

TEST(FlowRulesTest, SteerRuleRawBytesAreWhereAFrameCarriesItsDestQp) {
  // A contribution built by the wire code (the same bytes workers send) for core 2's QPN.
  wire::Addressing a;
  a.dst_ip = kApplianceIp;
  a.src_ip = 0x0A000002;
  a.dest_qp = kQpnBase + 2;
  a.src_qp = 0x42;
  std::vector<uint8_t> frame(wire::frame_len(16));
  wire::write_frame_headers(frame.data(), a, wire::SumcastHeader{}, 16);
  const FlowRule r = steer_rule(kApplianceIp, kQpnBase + 2, 2);
  const auto* raw = static_cast<const rte_flow_item_raw*>(r.pattern[3].spec);
  // RAW is relative to the end of the UDP item, i.e. the UDP payload.
  const size_t at = wire::kUdpOffset + wire::kUdpHeaderLen + static_cast<size_t>(raw->offset);
  ASSERT_LE(at + raw->length, frame.size());
  EXPECT_EQ(std::memcmp(frame.data() + at, raw->pattern, raw->length), 0);
  // And another core's rule does not match this frame.
  const FlowRule other = steer_rule(kApplianceIp, kQpnBase + 3, 3);
  EXPECT_NE(std::memcmp(frame.data() + at, static_cast<const rte_flow_item_raw*>(other.pattern[3].spec)->pattern, 3),
            0);
}

TEST(FlowRulesTest, AcceptRoceSpreadsByRssOverEveryQueue) {
  const FlowRule r = accept_roce_rule(kApplianceIp, 4, true);
  EXPECT_EQ(r.attr.priority, kPriorityAccept);
  EXPECT_EQ(item_types(r), (std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_IPV4,
                                                            RTE_FLOW_ITEM_TYPE_UDP, RTE_FLOW_ITEM_TYPE_END}));
  expect_roce_items(r);
  ASSERT_EQ(action_types(r), (std::vector<rte_flow_action_type>{RTE_FLOW_ACTION_TYPE_RSS, RTE_FLOW_ACTION_TYPE_END}));
  const auto* rss = static_cast<const rte_flow_action_rss*>(r.actions[0].conf);
  ASSERT_EQ(rss->queue_num, 4u);
  for (uint16_t q = 0; q < 4; ++q) EXPECT_EQ(rss->queue[q], q);
  EXPECT_EQ(rss->types, RTE_ETH_RSS_NONFRAG_IPV4_UDP);
  EXPECT_EQ(rss->key_len, 0u);
}

TEST(FlowRulesTest, AcceptRoceWithOneQueueOrWithoutRssGoesToQueueZero) {
  for (const FlowRule& r : {accept_roce_rule(kApplianceIp, 1, true), accept_roce_rule(kApplianceIp, 4, false)}) {
    ASSERT_EQ(action_types(r),
              (std::vector<rte_flow_action_type>{RTE_FLOW_ACTION_TYPE_QUEUE, RTE_FLOW_ACTION_TYPE_END}));
    EXPECT_EQ(static_cast<const rte_flow_action_queue*>(r.actions[0].conf)->index, 0);
  }
}

TEST(FlowRulesTest, ArpGoesToQueueZeroAndEverythingElseIsDroppedAtLowestPriority) {
  const FlowRule arp = accept_arp_rule();
  EXPECT_EQ(arp.attr.priority, kPriorityAccept);
  ASSERT_EQ(item_types(arp), (std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(static_cast<const rte_flow_item_eth*>(arp.pattern[0].spec)->hdr.ether_type, rte_cpu_to_be_16(0x0806));
  EXPECT_EQ(static_cast<const rte_flow_item_eth*>(arp.pattern[0].mask)->hdr.ether_type, 0xFFFF);
  EXPECT_EQ(static_cast<const rte_flow_action_queue*>(arp.actions[0].conf)->index, 0);

  const FlowRule drop = drop_rule();
  EXPECT_GT(drop.attr.priority, kPriorityAccept);
  EXPECT_GT(drop.attr.priority, kPrioritySteer);
  ASSERT_EQ(item_types(drop), (std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_ETH, RTE_FLOW_ITEM_TYPE_END}));
  EXPECT_EQ(drop.pattern[0].spec, nullptr) << "matches every Ethernet frame";
  EXPECT_EQ(action_types(drop),
            (std::vector<rte_flow_action_type>{RTE_FLOW_ACTION_TYPE_DROP, RTE_FLOW_ACTION_TYPE_END}));
}

TEST(FlowRulesTest, DestQpnModeHasOneSteerRulePerCoreThenTheFilter) {
  const auto rules = rules_for(SteeringMode::kFlowDestQpn, kApplianceIp, 3, 3, kQpnBase);
  ASSERT_EQ(rules.size(), 6u);
  for (uint32_t c = 0; c < 3; ++c) {
    const FlowRule& r = rules[c];
    ASSERT_EQ(r.pattern[3].type, RTE_FLOW_ITEM_TYPE_RAW) << r.name;
    const uint8_t* p = static_cast<const rte_flow_item_raw*>(r.pattern[3].spec)->pattern;
    EXPECT_EQ((uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2], kQpnBase + c);
    EXPECT_EQ(static_cast<const rte_flow_action_queue*>(r.actions[0].conf)->index, c);
  }
  EXPECT_EQ(rules[3].actions[0].type, RTE_FLOW_ACTION_TYPE_QUEUE) << "unsteered RoCE to queue 0, not RSS";
  EXPECT_EQ(rules[4].name, accept_arp_rule().name);
  EXPECT_EQ(rules[5].actions[0].type, RTE_FLOW_ACTION_TYPE_DROP);
  for (size_t i = 1; i < rules.size(); ++i) EXPECT_LE(rules[i - 1].attr.priority, rules[i].attr.priority);
}

TEST(FlowRulesTest, OtherModesHaveNoSteerRules) {
  const auto rss = rules_for(SteeringMode::kRssSoftwareDispatch, kApplianceIp, 2, 2, kQpnBase);
  ASSERT_EQ(rss.size(), 3u);
  EXPECT_EQ(rss[0].actions[0].type, RTE_FLOW_ACTION_TYPE_RSS);
  EXPECT_EQ(rss[2].actions[0].type, RTE_FLOW_ACTION_TYPE_DROP);
  const auto single = rules_for(SteeringMode::kSingleCore, kApplianceIp, 1, 1, kQpnBase);
  ASSERT_EQ(single.size(), 3u);
  EXPECT_EQ(single[0].actions[0].type, RTE_FLOW_ACTION_TYPE_QUEUE);
  EXPECT_TRUE(rules_for(SteeringMode::kXdpProgram, kApplianceIp, 2, 1, kQpnBase).empty());
}

TEST(FlowRulesTest, SpecsStayValidWhenRulesMove) {
  std::vector<FlowRule> rules = rules_for(SteeringMode::kFlowDestQpn, kApplianceIp, 2, 2, kQpnBase);
  std::vector<FlowRule> moved = std::move(rules);
  moved.push_back(drop_rule());  // may reallocate the vector
  EXPECT_EQ(moved[1].pattern[1].spec, &moved[1].storage->ipv4_spec);
  EXPECT_EQ(moved[1].actions[0].conf, &moved[1].storage->queue);
  EXPECT_EQ(rte_be_to_cpu_32(moved[1].storage->ipv4_spec.hdr.dst_addr), kApplianceIp);
}

TEST(FlowRulesTest, DescribeNamesEveryItemAndAction) {
  EXPECT_EQ(describe(steer_rule(kApplianceIp, 0x101, 1)),
            "ETH(type=0x0800) / IPV4(dst=10.0.0.1,proto=17) / UDP(dst=4791) / RAW(rel,off=5,00:01:01) -> QUEUE(1) "
            "(priority 0)");
  EXPECT_EQ(describe(drop_rule()), "ETH -> DROP (priority 2)");
  EXPECT_EQ(describe(accept_roce_rule(kApplianceIp, 2, true)),
            "ETH(type=0x0800) / IPV4(dst=10.0.0.1,proto=17) / UDP(dst=4791) -> RSS(queues=2) (priority 1)");
}

}  // namespace
}  // namespace sumcast::nic_offload
