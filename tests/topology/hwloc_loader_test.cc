// hwloc XML (and the live machine): switch merging, GPU/NIC/NVSwitch recognition, NVLink
// bandwidth distances (DGX-2 NVSwitch planes, POWER8 Minsky NVLink to the CPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sumcast/topo/loaders.h"
#include "sumcast/topo/report.h"
#include "sumcast/topo/router.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::load;

std::vector<int> nvswitch_planes(const HostModel& m) {
  std::vector<int> out;
  for (size_t i = 0; i < m.nodes().size(); ++i) {
    if (m.nodes()[i].kind == NodeKind::kNvSwitch) out.push_back(static_cast<int>(i));
  }
  return out;
}

TEST(HwlocLoader, Dgx2HasSixteenGpusOnTwoPlanesOfSixNvSwitches) {
  auto m = load(testing::kDgx2);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 16);
  EXPECT_EQ(m->numa_nodes().size(), 2u);
  std::vector<int> planes = nvswitch_planes(*m);
  ASSERT_EQ(planes.size(), 2u);
  std::map<int, int> gpus_per_plane;
  for (int g : m->gpus()) {
    int linked = 0;
    for (int id : m->links_of(g)) {
      const Link& l = m->link(id);
      if (l.kind != LinkKind::kNvswitch) continue;
      ++linked;
      ++gpus_per_plane[l.a == g ? l.b : l.a];
      EXPECT_DOUBLE_EQ(l.gbps, 150);  // 6 links x 25000 MB/s
      EXPECT_EQ(l.nvlinks, 6);
      EXPECT_FALSE(l.assumed);
    }
    EXPECT_EQ(linked, 1) << m->node(g).name;
  }
  for (int p : planes) {
    EXPECT_EQ(m->node(p).nvswitch_chips, 6);
    EXPECT_EQ(gpus_per_plane[p], 8);
  }
  // GPUs 0-7 (nvml0-7) on the first plane and NUMA 0.
  for (int g : m->gpus()) EXPECT_EQ(m->node(m->node(g).numa).index, m->node(g).index / 8);
}

TEST(HwlocLoader, Dgx2PlanesGetAnAssumedTrunkUnlessPcieOnly) {
  auto m = load(testing::kDgx2);
  ASSERT_TRUE(m.ok());
  std::vector<int> planes = nvswitch_planes(*m);
  int trunk = m->find_link(planes[0], planes[1], LinkKind::kNvswitch);
  ASSERT_GE(trunk, 0);
  EXPECT_TRUE(m->link(trunk).assumed);
  EXPECT_DOUBLE_EQ(m->link(trunk).gbps, 8 * 150);
  Router r(*m);
  EXPECT_EQ(relation(r, m->gpus()[0], m->gpus()[8]), "NV6");

  LoadOptions o;
  o.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  auto p = load(testing::kDgx2, o);
  ASSERT_TRUE(p.ok());
  std::vector<int> pp = nvswitch_planes(*p);
  EXPECT_LT(p->find_link(pp[0], pp[1], LinkKind::kNvswitch), 0);
  Router rp(*p);
  EXPECT_EQ(relation(rp, p->gpus()[0], p->gpus()[8]), "SYS");
  EXPECT_EQ(relation(rp, p->gpus()[0], p->gpus()[7]), "NV6");
}

TEST(HwlocLoader, Dgx2SwitchesMergeDownstreamPortsIntoTwoLevels) {
  auto m = load(testing::kDgx2);
  ASSERT_TRUE(m.ok());
  const auto& g = m->gpus();
  // GPU0/1 share a second-level switch, GPU0/2 only the top-level one, GPU0/4 nothing but NUMA 0.
  EXPECT_EQ(m->node(g[0]).parent, m->node(g[1]).parent);
  EXPECT_NE(m->node(g[0]).parent, m->node(g[2]).parent);
  EXPECT_EQ(m->top_switch(g[0]), m->top_switch(g[2]));
  EXPECT_NE(m->top_switch(g[0]), m->top_switch(g[4]));
  EXPECT_EQ(m->node(m->node(m->top_switch(g[0])).parent).kind, NodeKind::kHostBridge);
  // The NVSwitch management switches (PLX 8725 under 2d:10.0) lead to no GPU: pruned.
  for (const Node& n : m->nodes()) EXPECT_EQ(n.name.find("5f:00.0"), std::string::npos);
  EXPECT_NEAR(m->link(m->uplink(g[0])).gbps, pcie_gbps(3, 16), 1e-5);  // hwloc: 15.753846 GB/s
}

TEST(HwlocLoader, MinskyHasNvlinkBetweenGpuPairsAndToItsCpu) {
  auto m = load(testing::kMinsky);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->gpu_count(), 4);
  const auto& g = m->gpus();
  for (auto [a, b] : {std::pair{0, 1}, std::pair{2, 3}}) {
    int id = m->find_link(g[static_cast<size_t>(a)], g[static_cast<size_t>(b)], LinkKind::kNvlink);
    ASSERT_GE(id, 0);
    EXPECT_DOUBLE_EQ(m->link(id).gbps, 40);
    EXPECT_EQ(m->link(id).nvlinks, 2);  // P100: 20 GB/s per link
  }
  EXPECT_LT(m->find_link(g[0], g[2], LinkKind::kNvlink), 0);
  for (int gpu : g) {
    int id = m->find_link(gpu, m->node(gpu).numa, LinkKind::kNvlink);
    ASSERT_GE(id, 0) << m->node(gpu).name << " has NVLink to its POWER8";
    EXPECT_DOUBLE_EQ(m->link(id).gbps, 40);
    EXPECT_EQ(m->node(gpu).model, "Tesla P100-SXM2-16GB");
  }
  EXPECT_EQ(m->node(m->numa_nodes()[0]).socket, 0);
  EXPECT_EQ(m->node(m->numa_nodes()[1]).socket, 1);
  // Copies to host memory use the CPU NVLink, not PCIe.
  Router r(*m);
  EXPECT_TRUE(r.nvlink_only(g[0], m->node(g[0]).numa));
}

TEST(HwlocLoader, WholeIoKeepsComputeGpusAndNicsNotTheBmcVga) {
  auto m = load(testing::kWholeIo);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->gpu_count(), 3);  // 3x Tesla M2075; the Matrox BMC VGA and the Radeon are left out
  for (int g : m->gpus()) {
    EXPECT_EQ(m->node(g).pci_vendor, 0x10de) << m->node(g).name;
    EXPECT_EQ(m->node(g).pci_device, 0x1094) << m->node(g).name;
  }
  EXPECT_TRUE(std::any_of(m->assumptions().begin(), m->assumptions().end(),
                          [](const std::string& a) { return a.find("not from NVIDIA") != std::string::npos; }));
  std::set<std::string> nics;
  for (int c : m->nics()) nics.insert(m->node(c).name);
  EXPECT_TRUE(nics.count("eth0") && nics.count("eth1")) << "OS device names become NIC names";
  EXPECT_EQ(m->numa_nodes().size(), 2u);
}

TEST(HwlocLoader, MissingFileIsAnError) {
  auto m = load_hwloc_xml_file("/nonexistent/topology.xml", {});
  EXPECT_FALSE(m.ok());
}

TEST(HwlocLoader, LiveMachineLoadsOrSaysThereIsNoGpu) {
  Result<HostModel> m = load_live({});
  if (m.ok()) {
    EXPECT_GT(m->gpu_count(), 0);
    EXPECT_FALSE(m->numa_nodes().empty());
  } else {
    EXPECT_EQ(m.status().code(), StatusCode::kNotFound) << m.status().to_string();
    EXPECT_NE(m.status().message().find("no GPU"), std::string::npos);
  }
}

}  // namespace
}  // namespace sumcast::topo
