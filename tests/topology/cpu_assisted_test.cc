// BytePS-style CPU-assisted aggregation on the PCIe-switch machines: no GPU-to-GPU copy crosses a
// switch, every switch uplink (the NIC's included) carries at most the buffer size M in each
// direction, with and without the network round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sumcast/topo/cost_model.h"
#include "sumcast/topo/strategies.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

struct Case {
  const char* label;
  const char* file;
  UnknownGpuLinks links;
  int assume_gpus;
};

class CpuAssisted : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(CpuAssisted, StaysUnderSwitchesAndKeepsUplinksAtMostM) {
  auto [c, network] = GetParam();
  LoadOptions o;
  o.unknown_gpu_links = c.links;
  o.assume_gpus = c.assume_gpus;
  auto m = testing::load(c.file, o);
  ASSERT_TRUE(m.ok());
  Router r(*m);
  PlanRequest req;
  req.bytes = 3 * 5 * 7 * 64 * 4;  // odd shard boundaries
  req.network = network;
  Result<Plan> plan = make_cpu_assisted_plan(r, req);
  if (network && m->nics().empty()) {  // DGX-2's and g5's files list no NIC
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable);
    return;
  }
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_TRUE(validate_plan(*m, *plan).ok()) << validate_plan(*m, *plan).to_string();
  const double kM = static_cast<double>(plan->bytes);

  // Groups are exactly the GPUs under one top-level switch.
  for (const auto& group : plan->groups) {
    std::set<int> switches;
    for (int g : group) switches.insert(m->top_switch(m->gpus()[static_cast<size_t>(g)]));
    EXPECT_EQ(switches.size(), 1u);
    if (group.size() > 1) {
      EXPECT_GE(*switches.begin(), 0);
    }
  }
  int gpu_to_gpu = 0;
  for (const Stage& st : plan->stages) {
    for (const Step& s : st.steps) {
      bool src_gpu = m->node(s.src.node).kind == NodeKind::kGpu, dst_gpu = m->node(s.dst.node).kind == NodeKind::kGpu;
      if (s.op == StepOp::kExchange) {
        if (dst_gpu && m->top_switch(s.dst.node) >= 0) {
          EXPECT_EQ(m->top_switch(s.dst.node), m->top_switch(s.nic))
              << "an owner GPU sends through its own switch's NIC";
        }
        continue;
      }
      if (!src_gpu || !dst_gpu) continue;
      ++gpu_to_gpu;
      int sw = m->top_switch(s.src.node);
      ASSERT_GE(sw, 0) << st.label;
      EXPECT_EQ(sw, m->top_switch(s.dst.node))
          << st.label << ": " << m->node(s.src.node).name << " -> " << m->node(s.dst.node).name << " crosses switches";
      for (const LinkDir& h : r.route(s.src.node, s.dst.node).hops) {
        const Link& l = m->link(h.link);
        for (int n : {l.a, l.b}) {
          NodeKind k = m->node(n).kind;
          EXPECT_TRUE(k == NodeKind::kPciSwitch || k == NodeKind::kGpu || k == NodeKind::kNvSwitch)
              << st.label << ": route through " << m->node(n).name;
        }
      }
    }
  }
  CostOptions co;
  Prediction p = predict(r, *plan, co);
  int nic_switches = 0;
  for (size_t i = 0; i < m->nodes().size(); ++i) {
    if (m->nodes()[i].kind != NodeKind::kPciSwitch || m->top_switch(static_cast<int>(i)) >= 0) continue;
    int up = m->uplink(static_cast<int>(i));
    EXPECT_LE(link_bytes(p, up, true), kM) << m->node(static_cast<int>(i)).name << " downlink";
    EXPECT_LE(link_bytes(p, up, false), kM) << m->node(static_cast<int>(i)).name << " uplink";
    for (int nic : m->nics()) nic_switches += m->top_switch(nic) == static_cast<int>(i);
  }
  if (network && nic_switches > 0) {
    // The NIC switches carry the network traffic: exactly M each way, nothing more.
    for (int nic : m->nics()) {
      int sw = m->top_switch(nic);
      if (sw < 0) continue;
      EXPECT_LE(link_bytes(p, m->uplink(sw), true), kM);
      EXPECT_LE(link_bytes(p, m->uplink(sw), false), kM);
    }
  }
  if (m->gpu_count() > static_cast<int>(plan->groups.size())) {
    EXPECT_GT(gpu_to_gpu, 0);
  }
}

const Case kCases[] = {
    {"p4d_pcie_only", testing::kP4d, UnknownGpuLinks::kPcieOnly, 0},
    {"ndv4", testing::kNdv4, UnknownGpuLinks::kAuto, 0},
    {"ndv5", testing::kNdv5, UnknownGpuLinks::kAuto, 0},
    {"ndv2", testing::kNdv2, UnknownGpuLinks::kAuto, 0},
    {"ncv4", testing::kNcv4, UnknownGpuLinks::kAuto, 0},
    {"g5", testing::kG5, UnknownGpuLinks::kAuto, 8},
    {"dgx2_pcie_only", testing::kDgx2, UnknownGpuLinks::kPcieOnly, 0},
    {"dgx1", testing::kDgx1, UnknownGpuLinks::kAuto, 0},
    {"rtx4090", testing::kRtx4090, UnknownGpuLinks::kAuto, 0},
    {"wholeio", testing::kWholeIo, UnknownGpuLinks::kAuto, 0},
};

INSTANTIATE_TEST_SUITE_P(PcieMachines, CpuAssisted, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).label) +
                                  (std::get<1>(param_info.param) ? "_network" : "_local");
                         });

TEST(CpuAssistedPlan, P4dGroupsAreTheFourSwitchesAndEachNicSwitchOwnsItsShard) {
  LoadOptions o;
  o.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  auto m = testing::load(testing::kP4d, o);
  ASSERT_TRUE(m.ok());
  Router r(*m);
  PlanRequest req;
  req.bytes = 1 << 20;
  req.network = true;
  auto plan = make_cpu_assisted_plan(r, req);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->groups, (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  Prediction p = predict(r, *plan, CostOptions{});
  for (int nic : m->nics()) {
    int up = m->uplink(m->top_switch(nic));
    EXPECT_DOUBLE_EQ(link_bytes(p, up, true), static_cast<double>(plan->bytes)) << "exactly M down";
    EXPECT_DOUBLE_EQ(link_bytes(p, up, false), static_cast<double>(plan->bytes)) << "exactly M up";
  }
  // The property is not free: a ring on the same host loads some switch uplink beyond M.
  auto ring = make_ring_plan(r, req);
  ASSERT_TRUE(ring.ok());
  Prediction rp = predict(r, *ring, CostOptions{});
  double worst = 0;
  for (int nic : m->nics()) {
    int up = m->uplink(m->top_switch(nic));
    worst = std::max({worst, link_bytes(rp, up, true), link_bytes(rp, up, false)});
  }
  EXPECT_GT(worst, static_cast<double>(plan->bytes));
}

TEST(CpuAssistedPlan, NetworkNeedsANic) {
  auto m = testing::load(testing::kP3);
  ASSERT_TRUE(m.ok());
  Router r(*m);
  PlanRequest req;
  req.network = true;
  EXPECT_FALSE(make_cpu_assisted_plan(r, req).ok());
  EXPECT_FALSE(make_tree_plan(r, req).ok());
}

}  // namespace
}  // namespace sumcast::topo
