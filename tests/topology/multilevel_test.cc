// CPU-assisted aggregation on PCIe trees with switches under switches (8- and 10-GPU PCIe servers):
// synthetic 2- and 3-level trees, built in code and read from the NCCL XML, hwloc XML and
// `nvidia-smi topo -m` files of tests/data/topologies/synthetic/ (the link-weight format has no
// PCIe tree; `nvidia-smi topo -m` has no relation deeper than PXB/PIX, so 2 levels only). The plan reduces level by
// level, lowest switches first: each top-level switch uplink carries exactly M (the buffer) each way, the reduce stages
// put exactly M up every lower uplink and the broadcast stages exactly M down (over the whole plan a child switch
// owning the share f = 1/k of its parent's range carries (1 + f) M each way: its results are forwarded to its
// siblings); the result is exact on host memory. On small trees a brute force over every placement of the reduction
// (per chunk, which GPU below each switch collects the chunk's partial, or none) checks the plan: on the balanced
// 2-level tree nothing beats it, by the busiest switch uplink, then the busiest GPU link, and by the busiest link of
// either kind; on an uneven 3-level tree it is beaten, which the test prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "sumcast/topo/cost_model.h"
#include "sumcast/topo/cpu_executor.h"
#include "sumcast/topo/planner.h"
#include "sumcast/topo/strategies.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

constexpr const char* k2LevelXml = "synthetic/pcie-2level-8gpu-2nic.xml";
constexpr const char* k2LevelSmi = "synthetic/pcie-2level-8gpu-2nic-smi.txt";
constexpr const char* k3LevelXml = "synthetic/pcie-3level-12gpu-2nic.xml";
constexpr const char* k2LevelHwloc = "synthetic/pcie-2level-8gpu-2nic-hwloc.xml";
constexpr const char* k3LevelHwloc = "synthetic/pcie-3level-12gpu-2nic-hwloc.xml";

// The 2-level host of k2LevelXml, built in code: per socket a top switch over two sub-switches of
// two GPUs, a NIC under the first sub-switch.
HostModel two_level_in_code(double gbps) {
  testing::SyntheticHost h;
  int idx = 0;
  int numas[2];
  for (int s = 0; s < 2; ++s) {
    int numa = numas[s] = h.numa(s);
    int top = h.pci_switch(numa, gbps, "SW" + std::to_string(s));
    for (int k = 0; k < 2; ++k) {
      int sub = h.pci_switch(top, gbps, "SW" + std::to_string(s) + std::to_string(k));
      h.gpu(sub, gbps, idx++);
      h.gpu(sub, gbps, idx++);
      if (k == 0) h.nic(sub, gbps, 12.5);
    }
  }
  h.link(numas[0], numas[1], LinkKind::kSmp, 20);
  return h.finish();
}

int depth_below(const HostModel& m, int sw) {
  int d = 0;
  for (int g : m.gpus()) {
    auto up = m.pcie_ancestors(g);
    auto it = std::find(up.begin(), up.end(), sw);
    if (it != up.end()) d = std::max(d, static_cast<int>(it - up.begin()) + 1);
  }
  return d;
}

bool has_gpu_below(const HostModel& m, int node) {
  for (int g : m.gpus()) {
    auto up = m.pcie_ancestors(g);
    if (std::find(up.begin(), up.end(), node) != up.end()) return true;
  }
  return false;
}

std::vector<int> switches(const HostModel& m) {
  std::vector<int> out;
  for (size_t i = 0; i < m.nodes().size(); ++i) {
    if (m.nodes()[i].kind == NodeKind::kPciSwitch) out.push_back(static_cast<int>(i));
  }
  return out;
}

void check_exact(const HostModel& m, const Plan& plan, bool network) {
  const size_t n = plan.bytes / sizeof(int32_t);
  std::vector<std::vector<int32_t>> bufs(static_cast<size_t>(m.gpu_count()), std::vector<int32_t>(n));
  std::vector<void*> ptrs;
  for (size_t g = 0; g < bufs.size(); ++g) {
    for (size_t e = 0; e < n; ++e) bufs[g][e] = static_cast<int32_t>((g + 1) * 1000 + e % 89) - 500;
    ptrs.push_back(bufs[g].data());
  }
  std::vector<int> exchanged(n, 0);
  ExchangeFn ex = [&](void* data, uint64_t offset, uint64_t length) {
    auto* p = static_cast<int32_t*>(data);
    for (size_t i = 0; i < length / sizeof(int32_t); ++i) {
      ++exchanged[offset / sizeof(int32_t) + i];
      p[i] *= 2;  // two identical hosts
    }
    return Status();
  };
  auto exe = CpuExecutor::create(m, plan, wire::Dtype::kInt32, wire::ReduceOp::kSum);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_TRUE(exe->run(ptrs, ex).ok());
  for (size_t e = 0; e < n; ++e) {
    int64_t want = 0;
    for (size_t g = 0; g < bufs.size(); ++g) want += static_cast<int32_t>((g + 1) * 1000 + e % 89) - 500;
    if (network) want *= 2;
    for (size_t g = 0; g < bufs.size(); ++g) ASSERT_EQ(bufs[g][e], want) << "GPU" << g << " element " << e;
    if (network) {
      ASSERT_EQ(exchanged[e], 1) << "element " << e;
    }
  }
}

struct TreeCase {
  const char* label;
  std::function<HostModel()> load;
  int levels;  // switch levels under each socket
};

class MultiLevel : public ::testing::TestWithParam<std::tuple<TreeCase, bool>> {};

TEST_P(MultiLevel, EveryUplinkCarriesExactlyTheBufferAndTheResultIsExact) {
  auto [c, network] = GetParam();
  HostModel m = c.load();
  ASSERT_FALSE(::testing::Test::HasFailure());
  int depth = 0;
  for (int sw : switches(m)) depth = std::max(depth, depth_below(m, sw));
  ASSERT_EQ(depth, c.levels) << "the loader keeps the switch levels";
  Router r(m);
  PlanRequest req;
  req.bytes = 3 * 5 * 7 * 64 * 4;  // odd piece boundaries at every level
  req.elem_size = 4;
  req.network = network;
  auto plan = make_cpu_assisted_plan(r, req);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_TRUE(validate_plan(m, *plan).ok()) << validate_plan(m, *plan).to_string();
  EXPECT_NE(plan->detail.find(std::to_string(c.levels) + " switch levels"), std::string::npos) << plan->detail;
  const double kM = static_cast<double>(plan->bytes);
  Prediction p = predict(r, *plan, CostOptions{});
  // The reduce half (up to the copy to host memory) and the broadcast half, priced apart.
  Plan reduce_half = *plan, bcast_half = *plan;
  size_t split = 0;
  while (split < plan->stages.size() && plan->stages[split].label.rfind("copy results", 0) != 0 &&
         plan->stages[split].label.rfind("owner switch adds", 0) != 0)
    ++split;
  reduce_half.stages.resize(split);
  bcast_half.stages.erase(bcast_half.stages.begin(), bcast_half.stages.begin() + static_cast<long>(split));
  Prediction pr = predict(r, reduce_half, CostOptions{}), pb = predict(r, bcast_half, CostOptions{});
  for (int sw : switches(m)) {
    const int up = m.uplink(sw);
    ASSERT_GE(up, 0);
    if (!has_gpu_below(m, sw)) continue;
    if (m.top_switch(sw) < 0) {
      EXPECT_DOUBLE_EQ(link_bytes(p, up, false), kM) << m.node(sw).name << " top-level uplink up: M";
      EXPECT_DOUBLE_EQ(link_bytes(p, up, true), kM) << m.node(sw).name << " top-level uplink down: M";
    } else if (!network) {
      EXPECT_DOUBLE_EQ(link_bytes(pr, up, false), kM) << m.node(sw).name << " up in the reduce stages: M";
      EXPECT_DOUBLE_EQ(link_bytes(pb, up, true), kM) << m.node(sw).name << " down in the broadcast stages: M";
      // Over the whole plan a child of a top-level switch carries (1 + f) M, f = 1/k its share
      // of its parent's ranges (k children); deeper switches less than 2 M.
      int parent = m.node(sw).parent;
      if (m.top_switch(parent) >= 0) {
        EXPECT_LT(link_bytes(p, up, false), 2 * kM) << m.node(sw).name;
        EXPECT_LT(link_bytes(p, up, true), 2 * kM) << m.node(sw).name;
        continue;
      }
      std::set<int> children;  // the parent's children that lead to GPUs
      for (int g : m.gpus()) {
        int child = g;
        for (int a : m.pcie_ancestors(g)) {
          if (a == parent) {
            children.insert(child);
            break;
          }
          child = a;
        }
      }
      const double f = 1.0 / static_cast<double>(children.size());
      EXPECT_NEAR(link_bytes(p, up, false), (1 + f) * kM, 4 * 64) << m.node(sw).name;
      EXPECT_NEAR(link_bytes(p, up, true), (1 + f) * kM, 4 * 64) << m.node(sw).name;
    }
    // With the network the NIC's shard is completed under the NIC's lowest switch, which then
    // carries more than that (2.4 M on the 3-level file): only the top-level uplinks are claimed.
  }
  // No GPU-to-GPU step leaves its socket's top switch; the reduce levels come lowest first.
  int reduce_levels = 0;
  for (const Stage& st : plan->stages) {
    if (st.label.rfind("reduce-scatter under", 0) == 0) ++reduce_levels;
    for (const Step& s : st.steps) {
      if (m.node(s.src.node).kind != NodeKind::kGpu || m.node(s.dst.node).kind != NodeKind::kGpu) continue;
      if (s.op == StepOp::kExchange) continue;
      EXPECT_EQ(m.top_switch(s.src.node), m.top_switch(s.dst.node)) << st.label;
    }
  }
  EXPECT_EQ(reduce_levels, c.levels);
  check_exact(m, *plan, network);
  if (::testing::Test::HasFailure()) return;

  // The ring on the same host loads the top-level uplinks beyond M.
  auto ring = make_ring_plan(r, req);
  ASSERT_TRUE(ring.ok());
  Prediction rp = predict(r, *ring, CostOptions{});
  double worst = 0;
  for (int sw : switches(m)) {
    if (has_gpu_below(m, sw) && m.top_switch(sw) < 0)
      worst = std::max({worst, link_bytes(rp, m.uplink(sw), false), link_bytes(rp, m.uplink(sw), true)});
  }
  EXPECT_GT(worst, kM);
}

HostModel load_or_fail(const char* rel) {
  auto m = testing::load(rel);
  return m.ok() ? std::move(*m) : HostModel();
}

const TreeCase kTrees[] = {
    {"two_level_code", [] { return two_level_in_code(31.5); }, 2},
    {"two_level_nccl_xml", [] { return load_or_fail(k2LevelXml); }, 2},
    {"two_level_smi", [] { return load_or_fail(k2LevelSmi); }, 2},
    {"two_level_hwloc_xml", [] { return load_or_fail(k2LevelHwloc); }, 2},
    {"three_level_nccl_xml", [] { return load_or_fail(k3LevelXml); }, 3},
    {"three_level_hwloc_xml", [] { return load_or_fail(k3LevelHwloc); }, 3},
};

INSTANTIATE_TEST_SUITE_P(Synthetic, MultiLevel, ::testing::Combine(::testing::ValuesIn(kTrees), ::testing::Bool()),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param).label) +
                                  (std::get<1>(param_info.param) ? "_network" : "_local");
                         });

TEST(MultiLevelPlanner, ChoosesTheLevelAwarePlanOnTheGen4Trees) {
  for (const char* f : {k2LevelXml, k3LevelXml, k2LevelHwloc, k3LevelHwloc}) {
    auto m = testing::load(f);
    ASSERT_TRUE(m.ok());
    for (bool network : {false, true}) {
      PlanRequest req;
      req.network = network;
      auto res = plan_host(*m, req);
      ASSERT_TRUE(res.ok()) << res.status().to_string();
      EXPECT_EQ(res->best().strategy, Strategy::kCpuAssisted) << f << (network ? " network: " : " local: ") << res->why;
    }
  }
}

// ---- Brute force over placements ----------------------------------------------------------------

// Per chunk, every switch of the (single) group's tree either collects the chunk's partials of its
// children at one GPU below it, or passes them up unreduced; the top's outputs go to host memory;
// the broadcast retraces the same routes backwards. Loads in chunks per link direction.
struct BruteForce {
  const HostModel& m;
  Router& r;
  std::vector<int> sw;                       // the switches, children before parents
  std::map<int, std::vector<int>> children;  // switch -> its children on the way to GPUs
  std::map<int, std::vector<int>> gpus_below;
  using Load = std::map<std::pair<int, bool>, double>;

  BruteForce(const HostModel& model, Router& router) : m(model), r(router) {
    for (int g : m.gpus()) {
      int child = g;
      for (int up : m.pcie_ancestors(g)) {
        if (m.node(up).kind != NodeKind::kPciSwitch) break;
        auto& k = children[up];
        if (std::find(k.begin(), k.end(), child) == k.end()) k.push_back(child);
        gpus_below[up].push_back(g);
        child = up;
      }
    }
    for (auto& [s, _] : children) sw.push_back(s);
    std::sort(sw.begin(), sw.end(), [&](int a, int b) { return depth_below(m, a) < depth_below(m, b); });
  }

  void add_route(Load& load, int from, int to) {
    for (const LinkDir& h : r.route(from, to).hops) {
      load[{h.link, h.forward}] += 1;
      load[{h.link, !h.forward}] += 0;
    }
    for (const LinkDir& h : r.route(to, from).hops) load[{h.link, h.forward}] += 1;  // broadcast back
  }

  // Every placement's load for one chunk.
  std::vector<Load> placements() {
    std::vector<Load> out;
    std::map<int, int> choice;  // switch -> collector GPU, -1: pass up
    std::function<void(size_t)> rec = [&](size_t i) {
      if (i == sw.size()) {
        Load load;
        std::function<std::vector<int>(int)> holders = [&](int node) -> std::vector<int> {
          if (m.node(node).kind == NodeKind::kGpu) return {node};
          std::vector<int> in;
          for (int c : children.at(node)) {
            auto h = holders(c);
            in.insert(in.end(), h.begin(), h.end());
          }
          int c = choice.at(node);
          if (c < 0) return in;
          for (int h : in) {
            if (h != c) add_route(load, h, c);
          }
          return {c};
        };
        int top = sw.back();
        for (int h : holders(top)) add_route(load, h, m.node(top).numa);
        out.push_back(std::move(load));
        return;
      }
      choice[sw[i]] = -1;
      rec(i + 1);
      for (int g : gpus_below.at(sw[i])) {
        choice[sw[i]] = g;
        rec(i + 1);
      }
    };
    rec(0);
    return out;
  }
};

struct Score {
  double uplink = 0;  // busiest switch uplink direction, seconds per chunk unit
  double gpu = 0;     // busiest GPU link direction
  double any = 0;     // busiest of both (brute_force: its own minimum over placements)
  bool operator<(const Score& o) const {
    return uplink < o.uplink * (1 - 1e-9) || (uplink <= o.uplink * (1 + 1e-9) && gpu < o.gpu * (1 - 1e-9));
  }
};

// Loads indexed by 2 x link + forward.
using Dense = std::vector<double>;

Dense dense(const HostModel& m, const std::map<std::pair<int, bool>, double>& load) {
  Dense d(2 * m.links().size(), 0.0);
  for (const auto& [ld, bytes] : load) d[2 * static_cast<size_t>(ld.first) + (ld.second ? 1 : 0)] += bytes;
  return d;
}

Score score(const HostModel& m, const Dense& load) {
  Score s;
  for (size_t i = 0; i < load.size(); ++i) {
    const Link& l = m.link(static_cast<int>(i / 2));
    double t = load[i] / l.gbps;
    bool gpu_link = m.node(l.b).kind == NodeKind::kGpu;
    bool switch_uplink = m.node(l.b).kind == NodeKind::kPciSwitch;
    if (gpu_link) s.gpu = std::max(s.gpu, t);
    if (switch_uplink) s.uplink = std::max(s.uplink, t);
  }
  s.any = std::max(s.uplink, s.gpu);
  return s;
}

// The best multiset of `chunks` placements.
Score brute_force(const HostModel& m, Router& r, int chunks) {
  BruteForce bf(m, r);
  std::vector<Dense> options;
  for (const auto& p : bf.placements()) options.push_back(dense(m, p));
  Score best{kUnlimited, kUnlimited, kUnlimited};
  double best_any = kUnlimited;
  // Chunks are interchangeable: multisets of placements, summed level by level.
  std::vector<Dense> acc(static_cast<size_t>(chunks) + 1, Dense(2 * m.links().size(), 0.0));
  std::function<void(size_t, size_t)> rec = [&](size_t i, size_t from) {
    if (i == static_cast<size_t>(chunks)) {
      Score s = score(m, acc[i]);
      best_any = std::min(best_any, s.any);
      if (s < best) best = s;
      return;
    }
    for (size_t k = from; k < options.size(); ++k) {
      for (size_t e = 0; e < acc[i].size(); ++e) acc[i + 1][e] = acc[i][e] + options[k][e];
      rec(i + 1, k);
    }
  };
  rec(0, 0);
  best.any = best_any;
  return best;
}

// The plan's score in the same unit (bytes per chunk).
Score plan_score(const HostModel& m, Router& r, int chunks) {
  PlanRequest req;
  req.bytes = 4ull * 12 * 64;  // divisible by every split below
  req.elem_size = 4;
  auto plan = make_cpu_assisted_plan(r, req);
  EXPECT_TRUE(plan.ok());
  if (!plan.ok()) return {};
  Prediction p = predict(r, *plan, CostOptions{});
  std::map<std::pair<int, bool>, double> load;
  for (const ResourceLoad& res : p.resources) {
    if (res.link >= 0) load[{res.link, res.forward}] = res.bytes / (static_cast<double>(plan->bytes) / chunks);
  }
  return score(m, dense(m, load));
}

TEST(MultiLevelBruteForce, TwoLevelFourGpusNothingBeatsThePlan) {
  testing::SyntheticHost h;
  int numa = h.numa(0);
  int top = h.pci_switch(numa, 16, "TOP");
  int a = h.pci_switch(top, 16, "A"), b = h.pci_switch(top, 16, "B");
  h.gpu(a, 16, 0);
  h.gpu(a, 16, 1);
  h.gpu(b, 16, 2);
  h.gpu(b, 16, 3);
  HostModel m = h.finish();
  Router r(m);
  const int chunks = 4;
  Score plan = plan_score(m, r, chunks), best = brute_force(m, r, chunks);
  EXPECT_NEAR(plan.uplink * 16, 1.5 * chunks, 1e-9) << "the sub-switch uplinks: 1.5 M";
  EXPECT_LE(plan.uplink, best.uplink * (1 + 1e-9));
  EXPECT_LE(plan.gpu, best.gpu * (1 + 1e-9)) << "plan " << plan.gpu << " brute force " << best.gpu;
  EXPECT_GE(plan.uplink, best.uplink * (1 - 1e-9)) << "the brute force reaches the bound too";
  EXPECT_LE(plan.any, best.any * (1 + 1e-9)) << "by the busiest link of either kind too";
}

TEST(MultiLevelBruteForce, ThreeLevelUnevenTreeShowsTheLimit) {
  // TOP > [MID > [LOW > GPU0 GPU1] GPU2] GPU3: the plan gives every child an equal share at each
  // level, so MID forwards half of the results to GPU3 across its uplink (1.5 M), and LOW's uplink
  // adds what LOW forwards to GPU2 at MID's level (1.75 M); a placement that lets the bare GPU3
  // collect everything keeps every switch uplink at M (GPU3's own link then carries 1.75 M).
  // Checked: the brute force finds that optimum (M), the plan is above it by both measures; the
  // figures are printed (docs/topology.md, limits).
  testing::SyntheticHost h;
  int numa = h.numa(0);
  int top = h.pci_switch(numa, 16, "TOP");
  int mid = h.pci_switch(top, 16, "MID");
  int low = h.pci_switch(mid, 16, "LOW");
  h.gpu(low, 16, 0);
  h.gpu(low, 16, 1);
  h.gpu(mid, 16, 2);
  h.gpu(top, 16, 3);
  HostModel m = h.finish();
  Router r(m);
  const int chunks = 4;
  Score plan = plan_score(m, r, chunks), best = brute_force(m, r, chunks);
  EXPECT_NEAR(best.uplink * 16, chunks, 1e-9) << "the optimum: every uplink M";
  EXPECT_GT(plan.uplink, best.uplink * (1 + 1e-9)) << "if the plan reaches the optimum, update the docs' limits";
  EXPECT_GE(plan.any, best.any * (1 - 1e-9));
  std::printf(
      "3-level uneven tree: busiest switch uplink %.3f M (plan) vs %.3f M (best placement, %d chunks); "
      "busiest link of any kind %.3f M vs %.3f M\n",
      plan.uplink * 16 / chunks, best.uplink * 16 / chunks, chunks, plan.any * 16 / chunks, best.any * 16 / chunks);
}

}  // namespace
}  // namespace sumcast::topo
