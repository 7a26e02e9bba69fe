// The cost model on hand-written plans: bytes land on every link of a route in its direction,
// host reductions load the CPU, exchanges cross the network both ways, the slowest resource plus
// the per-stage latency gives the time, unlimited links never decide.
#include "sumcast/topo/cost_model.h"

#include <gtest/gtest.h>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::SyntheticHost;

struct Host {
  HostModel model;
  int numa, sw, g0, g1, nic;
};

Host two_gpus_and_a_nic() {
  SyntheticHost h;
  Host out{};
  out.numa = h.numa(0);
  int hb = h.bridge(out.numa, kUnlimited, "HB");
  out.sw = h.pci_switch(hb, 10, "SW");
  out.g0 = h.gpu(out.sw, 20, 0);
  out.g1 = h.gpu(out.sw, 20, 1);
  out.nic = h.nic(out.sw, 20, 5);
  out.model = h.finish();
  return out;
}

Plan one_stage(std::vector<Step> steps, uint64_t bytes, int host_slots_on = -1) {
  Plan p;
  p.name = "hand";
  p.bytes = bytes;
  p.elem_size = 4;
  p.stages.push_back({"only", std::move(steps)});
  if (host_slots_on >= 0) p.host_slots[host_slots_on] = 1;
  return p;
}

TEST(CostModel, CopyLoadsEveryLinkOfItsRouteInOneDirection) {
  Host h = two_gpus_and_a_nic();
  Router r(h.model);
  const uint64_t kBytes = 1000000000;
  Plan p = one_stage({{StepOp::kCopy, {h.g1, 0}, {h.g0, 0}, 0, kBytes, -1}}, kBytes);
  ASSERT_TRUE(validate_plan(h.model, p).ok());
  CostOptions o;
  o.step_latency_us = 0;
  Prediction pr = predict(r, p, o);
  int up0 = h.model.uplink(h.g0), up1 = h.model.uplink(h.g1);
  EXPECT_DOUBLE_EQ(link_bytes(pr, up0, false), 1e9);  // GPU0 -> switch (links are stored parent -> child)
  EXPECT_DOUBLE_EQ(link_bytes(pr, up0, true), 0);
  EXPECT_DOUBLE_EQ(link_bytes(pr, up1, true), 1e9);
  EXPECT_DOUBLE_EQ(link_bytes(pr, h.model.uplink(h.sw), false), 0) << "never leaves the switch";
  EXPECT_DOUBLE_EQ(pr.seconds, 1e9 / 20e9);
  EXPECT_EQ(pr.resources.size(), 2u);
}

TEST(CostModel, SlowestResourceDecidesAndLatencyIsPerStage) {
  Host h = two_gpus_and_a_nic();
  Router r(h.model);
  const uint64_t kBytes = 1000000000;
  Plan p = one_stage({{StepOp::kCopy, {h.numa, 0}, {h.g0, 0}, 0, kBytes, -1}}, kBytes, h.numa);
  p.stages.push_back({"second", {{StepOp::kCopy, {h.g1, 0}, {h.numa, 0}, 0, kBytes, -1}}});
  CostOptions o;
  o.step_latency_us = 7;
  Prediction pr = predict(r, p, o);
  EXPECT_EQ(pr.stages, 2);
  EXPECT_EQ(pr.bottleneck.link, h.model.uplink(h.sw)) << "the 10 GB/s switch uplink, not the 20 GB/s GPU links";
  EXPECT_DOUBLE_EQ(pr.bandwidth_seconds, 1e9 / 10e9);
  EXPECT_DOUBLE_EQ(pr.latency_seconds, 2 * 7e-6);
  EXPECT_DOUBLE_EQ(pr.seconds, 0.1 + 14e-6);
  // The host-bridge -> NUMA link is unlimited: it carries the bytes and never decides.
  int hb_link = h.model.uplink(h.model.node(h.sw).parent);
  EXPECT_DOUBLE_EQ(link_bytes(pr, hb_link, false), 1e9);
}

TEST(CostModel, HostReductionsLoadTheCpu) {
  Host h = two_gpus_and_a_nic();
  Router r(h.model);
  Plan p = one_stage({{StepOp::kReduce, {h.numa, 0}, {h.g0, 0}, 0, 4000, -1}}, 4000, h.numa);
  CostOptions o;
  o.cpu_sum_gbps = 1e-6;  // 1 kB/s: the CPU decides
  o.step_latency_us = 0;
  Prediction pr = predict(r, p, o);
  EXPECT_EQ(pr.bottleneck.numa, h.numa);
  EXPECT_EQ(pr.bottleneck.link, -1);
  EXPECT_DOUBLE_EQ(pr.seconds, 4.0);
}

TEST(CostModel, ExchangeCrossesTheNetworkBothWaysAndIsLeftOutOfTheIntraHostTime) {
  Host h = two_gpus_and_a_nic();
  Router r(h.model);
  Plan p = one_stage({{StepOp::kExchange, {h.g0, 0}, {h.g0, 0}, 0, 1000000000, h.nic}}, 1000000000);
  ASSERT_TRUE(validate_plan(h.model, p).ok());
  CostOptions o;
  o.step_latency_us = 0;
  Prediction pr = predict(r, p, o);
  int net = h.model.find_link(h.nic, h.model.network(), LinkKind::kNetwork);
  EXPECT_DOUBLE_EQ(link_bytes(pr, net, true), 1e9);
  EXPECT_DOUBLE_EQ(link_bytes(pr, net, false), 1e9);
  EXPECT_DOUBLE_EQ(link_bytes(pr, h.model.uplink(h.nic), true), 1e9);  // back down to the NIC
  EXPECT_DOUBLE_EQ(link_bytes(pr, h.model.uplink(h.nic), false), 1e9);
  EXPECT_DOUBLE_EQ(pr.seconds, 1e9 / 5e9);         // the 5 GB/s port
  EXPECT_DOUBLE_EQ(pr.intra_seconds, 1e9 / 20e9);  // without it: the 20 GB/s PCIe links
}

TEST(CostModel, ValidateRejectsConflictsAndBadBuffers) {
  Host h = two_gpus_and_a_nic();
  // Reading a range another step of the same stage writes.
  Plan conflict = one_stage(
      {{StepOp::kCopy, {h.g1, 0}, {h.g0, 0}, 0, 8, -1}, {StepOp::kReduce, {h.g0, 0}, {h.g1, 0}, 4, 8, -1}}, 16);
  EXPECT_FALSE(validate_plan(h.model, conflict).ok());
  // Two writes of one buffer are fine (they run in order).
  Plan writes = one_stage(
      {{StepOp::kReduce, {h.g1, 0}, {h.g0, 0}, 0, 8, -1}, {StepOp::kReduce, {h.g1, 0}, {h.numa, 0}, 0, 8, -1}}, 16,
      h.numa);
  EXPECT_TRUE(validate_plan(h.model, writes).ok()) << validate_plan(h.model, writes).to_string();
  EXPECT_FALSE(validate_plan(h.model, one_stage({{StepOp::kCopy, {h.g1, 0}, {h.g0, 0}, 12, 8, -1}}, 16)).ok());
  EXPECT_FALSE(validate_plan(h.model, one_stage({{StepOp::kCopy, {h.g1, 0}, {h.g0, 0}, 2, 4, -1}}, 16)).ok());
  EXPECT_FALSE(validate_plan(h.model, one_stage({{StepOp::kCopy, {h.numa, 0}, {h.g0, 0}, 0, 4, -1}}, 16)).ok());
  EXPECT_FALSE(validate_plan(h.model, one_stage({{StepOp::kCopy, {h.g0, 0}, {h.g0, 0}, 0, 4, -1}}, 16)).ok());
  EXPECT_FALSE(validate_plan(h.model, one_stage({{StepOp::kExchange, {h.g0, 0}, {h.g0, 0}, 0, 4, -1}}, 16)).ok());
}

}  // namespace
}  // namespace sumcast::topo
