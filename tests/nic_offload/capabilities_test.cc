// The offload plan chosen from each capability set (nic_offload/capabilities.h), the tx offloads
// asked of the port, the capability rows shown by sumcastctl, and vdev option parsing.
#include "sumcast/nic_offload/capabilities.h"

#include <gtest/gtest.h>
#include <rte_ethdev.h>

namespace sumcast::nic_offload {
namespace {

PortCapabilities nic(FlowSupport steering, FlowSupport filter) {
  PortCapabilities c;
  c.driver = "net_test";
  c.max_rx_queues = c.max_tx_queues = 16;
  c.rss_hash = RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP;
  c.steering = steering;
  c.filter = filter;
  if (steering == FlowSupport::kRefused) c.steering_refusal = "steer qpn 0x000100 -> queue 0: RAW not supported";
  if (filter == FlowSupport::kRefused) c.filter_refusal = "drop other: priority not supported";
  return c;
}

std::string row(const PortCapabilities& c, const std::string& key) {
  for (const auto& [k, v] : describe(c)) {
    if (k == key) return v;
  }
  return "(absent)";
}

TEST(ChoosePlanTest, SteeringAcceptedWithAQueuePerCoreSteersWithoutSoftwareDispatch) {
  const OffloadPlan p = choose_plan(nic(FlowSupport::kAccepted, FlowSupport::kAccepted), 4, 4);
  EXPECT_EQ(p.mode, SteeringMode::kFlowDestQpn);
  EXPECT_FALSE(p.software_dispatch);
  EXPECT_TRUE(p.install_steering);
  EXPECT_TRUE(p.install_filter);
}

TEST(ChoosePlanTest, SteeringRefusedFallsBackToRssAndSoftwareDispatchAndSaysWhy) {
  const OffloadPlan p = choose_plan(nic(FlowSupport::kRefused, FlowSupport::kAccepted), 2, 2);
  EXPECT_EQ(p.mode, SteeringMode::kRssSoftwareDispatch);
  EXPECT_TRUE(p.software_dispatch);
  EXPECT_FALSE(p.install_steering);
  EXPECT_TRUE(p.install_filter) << "the filter was validated on its own";
  EXPECT_NE(p.reason.find("falling back to RSS + software dispatch"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("RAW not supported"), std::string::npos) << p.reason;
}

TEST(ChoosePlanTest, SteeringAcceptedButFewerQueuesThanCoresFallsBack) {
  const OffloadPlan p = choose_plan(nic(FlowSupport::kAccepted, FlowSupport::kAccepted), 4, 2);
  EXPECT_EQ(p.mode, SteeringMode::kRssSoftwareDispatch);
  EXPECT_TRUE(p.software_dispatch);
  EXPECT_FALSE(p.install_steering);
  EXPECT_NE(p.reason.find("2 rx queue(s) for 4 cores"), std::string::npos) << p.reason;
}

TEST(ChoosePlanTest, NoRteFlowAtAllIsRssAndSoftwareDispatchWithoutFilter) {
  const OffloadPlan p = choose_plan(nic(FlowSupport::kRefused, FlowSupport::kRefused), 2, 1);
  EXPECT_EQ(p.mode, SteeringMode::kRssSoftwareDispatch);
  EXPECT_TRUE(p.software_dispatch);
  EXPECT_FALSE(p.install_steering);
  EXPECT_FALSE(p.install_filter);
  EXPECT_NE(p.reason.find("no NIC filter"), std::string::npos) << p.reason;
}

TEST(ChoosePlanTest, OneCoreNeverDispatchesAndFiltersWhenItCan) {
  const OffloadPlan with = choose_plan(nic(FlowSupport::kNotProbed, FlowSupport::kAccepted), 1, 1);
  EXPECT_EQ(with.mode, SteeringMode::kSingleCore);
  EXPECT_FALSE(with.software_dispatch);
  EXPECT_FALSE(with.install_steering);
  EXPECT_TRUE(with.install_filter);
  const OffloadPlan without = choose_plan(nic(FlowSupport::kNotProbed, FlowSupport::kRefused), 1, 1);
  EXPECT_EQ(without.mode, SteeringMode::kSingleCore);
  EXPECT_FALSE(without.install_filter);
}

TEST(ChoosePlanTest, XdpProgramPortFiltersInTheKernelAndDispatchesWithTwoCores) {
  PortCapabilities c = nic(FlowSupport::kNotProbed, FlowSupport::kNotProbed);
  c.driver = "net_af_xdp";
  c.xdp_program = true;
  const OffloadPlan two = choose_plan(c, 2, 1);
  EXPECT_EQ(two.mode, SteeringMode::kXdpProgram);
  EXPECT_TRUE(two.software_dispatch);
  EXPECT_FALSE(two.install_filter);
  EXPECT_FALSE(two.install_steering);
  EXPECT_FALSE(choose_plan(c, 1, 1).software_dispatch);
}

TEST(ChoosePlanTest, TxIpv4ChecksumOffloadOnlyWhenOfferedAndUdpChecksumNever) {
  PortCapabilities c = nic(FlowSupport::kRefused, FlowSupport::kRefused);
  EXPECT_FALSE(choose_plan(c, 1, 1).tx_ipv4_cksum);
  EXPECT_EQ(tx_offloads_to_enable(c), 0u);
  c.tx_offloads = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  EXPECT_TRUE(choose_plan(c, 1, 1).tx_ipv4_cksum);
  EXPECT_EQ(tx_offloads_to_enable(c), RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) << "RoCEv2 sends UDP checksum 0";
  EXPECT_NE(choose_plan(c, 1, 1).reason.find("tx IPv4 checksum in the NIC"), std::string::npos);
}

TEST(DescribeTest, RowsNameOffloadsAndFlowSupport) {
  PortCapabilities c = nic(FlowSupport::kRefused, FlowSupport::kAccepted);
  c.tx_offloads = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_VLAN_INSERT;
  c.rx_offloads = RTE_ETH_RX_OFFLOAD_SCATTER;
  EXPECT_EQ(row(c, "tx_ipv4_cksum"), "yes");
  EXPECT_EQ(row(c, "tx_udp_cksum"), "no");
  EXPECT_EQ(row(c, "tx_vlan_insert"), "yes");
  EXPECT_EQ(row(c, "rx_scatter"), "yes");
  EXPECT_EQ(row(c, "tx_multi_segs"), "no");
  EXPECT_EQ(row(c, "tx_offloads"), "VLAN_INSERT IPV4_CKSUM");
  EXPECT_EQ(row(c, "flow_steering"), "refused");
  EXPECT_EQ(row(c, "flow_steering_refusal"), "steer qpn 0x000100 -> queue 0: RAW not supported");
  EXPECT_EQ(row(c, "flow_filter"), "accepted");
  EXPECT_EQ(row(c, "flow_filter_refusal"), "(absent)");
  EXPECT_EQ(rss_hash_names(RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP), "ipv4 nonfrag_ipv4_udp");
  EXPECT_EQ(rss_hash_names(0), "none");
}

}  // namespace
}  // namespace sumcast::nic_offload
