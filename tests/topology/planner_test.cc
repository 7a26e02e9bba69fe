// The planner on every real machine (valid plans, the cheapest chosen, a reason given), on the
// machine classes the literature names (NVLink cube mesh: trees; NVSwitch: flat or ring), and on
// synthetic hosts where the test derives by hand where the choice must flip.
#include "sumcast/topo/planner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::SyntheticHost;

class RealMachinePlans : public ::testing::TestWithParam<testing::Machine> {};

TEST_P(RealMachinePlans, EveryCandidateIsValidAndTheCheapestIsChosen) {
  const testing::Machine& mc = GetParam();
  auto m = testing::load(mc.file, mc.options);
  ASSERT_TRUE(m.ok());
  for (bool network : {false, true}) {
    if (network && m->nics().empty()) continue;
    for (uint64_t bytes : {uint64_t{4} << 10, uint64_t{64} << 20}) {
      SCOPED_TRACE(std::string(network ? "network " : "local ") + std::to_string(bytes));
      PlanRequest req;
      req.bytes = bytes;
      req.network = network;
      auto res = plan_host(*m, req);
      ASSERT_TRUE(res.ok()) << res.status().to_string();
      ASSERT_EQ(res->candidates.size(), 4u);
      double best = kUnlimited;
      for (const Candidate& c : res->candidates) {
        ASSERT_TRUE(c.status.ok()) << strategy_name(c.strategy) << ": " << c.status.to_string();
        EXPECT_TRUE(validate_plan(*m, c.plan).ok());
        EXPECT_GT(c.prediction.seconds, 0);
        best = std::min(best, c.prediction.seconds);
      }
      EXPECT_LE(res->best().prediction.seconds, best * 1.005);
      EXPECT_NE(res->why.find(strategy_name(res->best().strategy)), std::string::npos) << res->why;
      EXPECT_NE(res->why.find("bottleneck"), std::string::npos) << res->why;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, RealMachinePlans, ::testing::ValuesIn(testing::real_machines()),
                         [](const auto& param_info) { return param_info.param.label; });

Strategy chosen_for(const testing::Machine& mc, uint64_t bytes) {
  auto m = testing::load(mc.file, mc.options);
  EXPECT_TRUE(m.ok());
  PlanRequest req;
  req.bytes = bytes;
  auto res = plan_host(*m, req);
  EXPECT_TRUE(res.ok());
  return res->best().strategy;
}

TEST(Planner, HybridCubeMeshPicksTreesForLargeBuffers) {
  for (const char* f : {testing::kDgx1, testing::kP3}) {
    EXPECT_EQ(chosen_for({f, f, {}}, 64 << 20), Strategy::kTrees) << f;
  }
}

TEST(Planner, NvSwitchMachinesPickFlatOrRing) {
  LoadOptions nvs;
  nvs.unknown_gpu_links = UnknownGpuLinks::kNvSwitch;
  for (const testing::Machine& mc :
       {testing::Machine{"p4d", testing::kP4d, {}}, testing::Machine{"dgx2", testing::kDgx2, {}},
        testing::Machine{"ndv4", testing::kNdv4, nvs}}) {
    Strategy s = chosen_for(mc, 64 << 20);
    EXPECT_TRUE(s == Strategy::kFlat || s == Strategy::kRing) << mc.label << ": " << strategy_name(s);
  }
}

// Four GPUs, each on its own x16 link (P GB/s) to one NUMA node, no NVLink.
//  - ring, flat and trees move 1.5 M over each GPU link in each direction: 1.5 M / P
//    (flat: 3 shards of M/4 out in the reduce-scatter, 3 in the all-gather);
//  - CPU-assisted moves M up and M down each link and its CPU sums three partials: max(M/P, 3M/C).
// So CPU-assisted wins exactly when 3M/C < 1.5M/P, i.e. C > 2P.
HostModel four_root_port_gpus(double p) {
  SyntheticHost h;
  int numa = h.numa(0);
  for (int i = 0; i < 4; ++i) h.gpu(numa, p, i);
  return h.finish();
}

TEST(Planner, ChoiceFlipsWhereCpuSumBandwidthCrossesTwiceThePcieBandwidth) {
  const double kP = 16;
  HostModel m = four_root_port_gpus(kP);
  auto choose = [&](double cpu_gbps) {
    PlanRequest req;
    req.bytes = 64 << 20;
    req.cost.step_latency_us = 0;
    req.cost.cpu_sum_gbps = cpu_gbps;
    auto res = plan_host(m, req);
    EXPECT_TRUE(res.ok());
    return res->best().strategy;
  };
  EXPECT_NE(choose(2 * kP * 0.98), Strategy::kCpuAssisted);
  EXPECT_EQ(choose(2 * kP * 1.02), Strategy::kCpuAssisted);
  // Bisect the flip point: it must sit at 2P.
  double lo = kP, hi = 4 * kP;
  for (int i = 0; i < 40; ++i) {
    double mid = (lo + hi) / 2;
    (choose(mid) == Strategy::kCpuAssisted ? hi : lo) = mid;
  }
  EXPECT_NEAR(hi, 2 * kP, 2 * kP * 0.006);
}

// Same host, CPU fast (C = 100P): on bandwidth CPU-assisted wins (M/P against 1.5 M/P), but it
// has 3 stages (copy up, CPU sum, copy down) against flat's 2. With a latency L per stage, flat
// wins while 1.5 M/P + 2L < M/P + 3L, i.e. below M* = 2 L P.
TEST(Planner, ChoiceFlipsWithTheDataSizeWhereTheLatencyTermSaysSo) {
  const double kP = 16, kLatencyUs = 10;
  HostModel m = four_root_port_gpus(kP);
  const double m_star = 2 * kLatencyUs * 1e-6 * kP * 1e9;  // bytes
  auto choose = [&](double bytes) {
    PlanRequest req;
    req.bytes = static_cast<uint64_t>(bytes) / 16 * 16;
    req.cost.step_latency_us = kLatencyUs;
    req.cost.cpu_sum_gbps = 100 * kP;
    auto res = plan_host(m, req);
    EXPECT_TRUE(res.ok());
    return res->best().strategy;
  };
  EXPECT_EQ(choose(m_star * 0.9), Strategy::kFlat);
  EXPECT_EQ(choose(m_star * 1.1), Strategy::kCpuAssisted);
  EXPECT_EQ(choose(1024), Strategy::kFlat);
  EXPECT_EQ(choose(1e9), Strategy::kCpuAssisted);
}

TEST(Planner, OnlyTheAskedStrategiesAndTinyBuffersStayValid) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.bytes = 3 * 4;  // 3 elements for 8 GPUs: most shards empty
  req.strategies = {Strategy::kRing, Strategy::kTrees};
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->candidates.size(), 2u);
  EXPECT_EQ(res->candidates[0].strategy, Strategy::kRing);
  for (const Candidate& c : res->candidates) EXPECT_TRUE(validate_plan(*m, c.plan).ok());
}

TEST(Planner, NoStrategyWithoutANicWhenTheNetworkIsAsked) {
  auto m = testing::load(testing::kP3);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.network = true;
  auto res = plan_host(*m, req);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("no NIC"), std::string::npos) << res.status().message();
}

}  // namespace
}  // namespace sumcast::topo
