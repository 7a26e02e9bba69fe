// NCCL topology XML: the vendor files (switches, NICs, NUMA nodes, link speeds) and what the
// loader must assume and say when a file omits GPU-GPU links or device classes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sumcast/topo/loaders.h"
#include "sumcast/topo/router.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::load;

int count_kind(const HostModel& m, NodeKind k) {
  return static_cast<int>(
      std::count_if(m.nodes().begin(), m.nodes().end(), [&](const Node& n) { return n.kind == k; }));
}

bool has_assumption(const HostModel& m, const std::string& needle) {
  return std::any_of(m.assumptions().begin(), m.assumptions().end(),
                     [&](const std::string& a) { return a.find(needle) != std::string::npos; });
}

TEST(NcclXmlLoader, P4dHasFourSwitchesOfTwoGpusAndOneNic) {
  auto m = load(testing::kP4d);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 8);
  EXPECT_EQ(m->nics().size(), 4u);
  EXPECT_EQ(m->numa_nodes().size(), 2u);
  std::map<int, std::pair<int, int>> per_switch;  // switch -> (gpus, nics)
  for (int g : m->gpus()) ++per_switch[m->top_switch(g)].first;
  for (int c : m->nics()) ++per_switch[m->top_switch(c)].second;
  ASSERT_EQ(per_switch.size(), 4u);
  for (const auto& [sw, counts] : per_switch) {
    ASSERT_GE(sw, 0);
    EXPECT_EQ(counts, std::make_pair(2, 1)) << m->node(sw).name;
    const Link& up = m->link(m->uplink(sw));
    EXPECT_EQ(up.pcie_gen, 3);  // "8 GT/s"
    EXPECT_EQ(up.pcie_width, 16);
    EXPECT_DOUBLE_EQ(up.gbps, pcie_gbps(3, 16));
  }
  // GPUs 0-3 on NUMA 0, 4-7 on NUMA 1, in file order.
  for (int g : m->gpus()) EXPECT_EQ(m->node(m->node(g).numa).index, m->node(g).index / 4);
}

TEST(NcclXmlLoader, P4dAutoAssumesNvSwitchForA100SxmAndSaysSo) {
  auto m = load(testing::kP4d);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(count_kind(*m, NodeKind::kNvSwitch), 1);
  EXPECT_TRUE(has_assumption(*m, "NVSwitch")) << "assumptions must state the invented fabric";
  Router r(*m);
  for (int a : m->gpus()) {
    for (int b : m->gpus()) {
      if (a != b) {
        EXPECT_TRUE(r.nvlink_only(a, b));
      }
    }
  }
  for (const Link& l : m->links()) {
    if (l.kind == LinkKind::kNvswitch) {
      EXPECT_TRUE(l.assumed);
      EXPECT_DOUBLE_EQ(l.gbps, 300);  // A100: 12 NVLinks x 25 GB/s
    }
  }
}

TEST(NcclXmlLoader, PcieOnlyPolicyInventsNothing) {
  LoadOptions o;
  o.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  auto m = load(testing::kP4d, o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(count_kind(*m, NodeKind::kNvSwitch), 0);
  EXPECT_TRUE(has_assumption(*m, "GPU-GPU links unknown"));
  for (const Link& l : m->links()) EXPECT_FALSE(is_nvlink_class(l.kind));
}

TEST(NcclXmlLoader, NdvFilesWithoutDeviceIdsStayPcieUnderAutoAndFollowTheNvSwitchOption) {
  for (const char* f : {testing::kNdv2, testing::kNdv4, testing::kNdv5}) {
    auto m = load(f);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->gpu_count(), 8) << f;
    EXPECT_EQ(count_kind(*m, NodeKind::kNvSwitch), 0) << f;
    EXPECT_TRUE(has_assumption(*m, "GPU-GPU links unknown")) << f;
    LoadOptions o;
    o.unknown_gpu_links = UnknownGpuLinks::kNvSwitch;
    o.nvswitch_gbps_per_gpu = 123;
    auto n = load(f, o);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(count_kind(*n, NodeKind::kNvSwitch), 1) << f;
    EXPECT_EQ(m->gpus().size(), n->gpus().size());
    for (int g : n->gpus()) {
      int plane = -1;
      for (int id : n->links_of(g)) {
        if (n->link(id).kind == LinkKind::kNvswitch) plane = id;
      }
      ASSERT_GE(plane, 0) << f;
      EXPECT_DOUBLE_EQ(n->link(plane).gbps, 123);
    }
  }
}

TEST(NcclXmlLoader, NdvLinkSpeedsAndNics) {
  auto v2 = load(testing::kNdv2);
  auto v4 = load(testing::kNdv4);
  auto v5 = load(testing::kNdv5);
  ASSERT_TRUE(v2.ok() && v4.ok() && v5.ok());
  EXPECT_EQ(v2->nics().size(), 1u);  // class 0x020700 directly on the cpu
  EXPECT_EQ(v2->top_switch(v2->nics()[0]), -1);
  EXPECT_EQ(v4->numa_nodes().size(), 4u);
  EXPECT_EQ(v4->nics().size(), 8u);
  for (int g : v4->gpus()) {
    int sw = v4->top_switch(g);
    ASSERT_GE(sw, 0);
    int nics_below = 0;
    for (int c : v4->nics()) nics_below += v4->top_switch(c) == sw;
    EXPECT_EQ(nics_below, 2);
  }
  for (int g : v5->gpus()) EXPECT_EQ(v5->link(v5->uplink(g)).pcie_gen, 5);  // "32.0 GT/s PCIe"
  for (int g : v2->gpus()) EXPECT_EQ(v2->link(v2->uplink(g)).pcie_gen, 4);  // "16 GT/s"
}

TEST(NcclXmlLoader, Ncv4IgnoresNvlinksToItselfAndReadsTheNetSpeed) {
  auto m = load(testing::kNcv4);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 4);
  EXPECT_EQ(m->numa_nodes().size(), 4u);
  int self_notes =
      static_cast<int>(std::count_if(m->assumptions().begin(), m->assumptions().end(),
                                     [](const std::string& a) { return a.find("itself") != std::string::npos; }));
  EXPECT_EQ(self_notes, 4);
  for (const Link& l : m->links()) EXPECT_FALSE(is_nvlink_class(l.kind));
  ASSERT_EQ(m->nics().size(), 1u);
  EXPECT_EQ(m->node(m->nics()[0]).name, "eth0");
  EXPECT_DOUBLE_EQ(m->link(m->find_link(m->nics()[0], m->network(), LinkKind::kNetwork)).gbps, 12.5);  // 100000 Mb/s
  // GPU index from <gpu dev=...>: GPU i on NUMA i.
  for (int g : m->gpus()) EXPECT_EQ(m->node(m->node(g).numa).index, m->node(g).index);
}

TEST(NcclXmlLoader, G5WithoutClassesFailsWithAHintAndLoadsWhenToldHowManyAreGpus) {
  Result<HostModel> bare = load_file(testing::data_path(testing::kG5), SourceFormat::kDetect, {});
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("--assume-gpus"), std::string::npos) << bare.status().message();
  LoadOptions o;
  o.assume_gpus = 8;
  auto m = load(testing::kG5, o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 8);
  EXPECT_TRUE(has_assumption(*m, "taken as GPUs"));
  EXPECT_TRUE(has_assumption(*m, "0000:00:15.0"));  // the ninth entry stays unidentified
  int numa0 = 0;
  for (int g : m->gpus()) numa0 += m->node(m->node(g).numa).index == 0;
  EXPECT_EQ(numa0, 4);
}

TEST(NcclXmlLoader, ExplicitNvlinksCountOnceAndNvSwitchTargetsMakeAPlane) {
  const char* xml = R"(<system version="1">
  <cpu numaid="0">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="16 GT/s" link_width="16">
      <gpu dev="0"><nvlink target="0000:02:00.0" count="4" tclass="0x030200"/>
                   <nvlink target="ffff:ff:ff.0" count="2" tclass="0x068000"/></gpu>
    </pci>
    <pci busid="0000:02:00.0" class="0x030200" link_speed="16 GT/s" link_width="16">
      <gpu dev="1"><nvlink target="0000:01:00.0" count="4" tclass="0x030200"/>
                   <nvlink target="ffff:ff:ff.0" count="2" tclass="0x068000"/></gpu>
    </pci>
  </cpu>
</system>)";
  auto m = load_nccl_xml(xml, "inline", {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  int direct = m->find_link(m->gpus()[0], m->gpus()[1], LinkKind::kNvlink);
  ASSERT_GE(direct, 0);
  EXPECT_EQ(m->link(direct).nvlinks, 4);
  EXPECT_DOUBLE_EQ(m->link(direct).gbps, 100);
  EXPECT_EQ(count_kind(*m, NodeKind::kNvSwitch), 1);
  EXPECT_TRUE(m->assumptions().empty() || !has_assumption(*m, "GPU-GPU links unknown"));
}

TEST(NcclXmlLoader, RejectsStructuralErrors) {
  EXPECT_FALSE(load_nccl_xml("<topology/>", "t", {}).ok());
  EXPECT_FALSE(load_nccl_xml("<system></system>", "t", {}).ok());
  EXPECT_FALSE(load_nccl_xml(R"(<system><cpu><pci busid="0:1:0.0" class="0x030200"><pci busid="0:2:0.0"
      class="0x030200"/></pci></cpu></system>)",
                             "t", {})
                   .ok());
  Result<HostModel> broken = load_nccl_xml("<system>\n<cpu>\n</system>", "x.xml", {});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("x.xml:3"), std::string::npos) << broken.status().message();
}

}  // namespace
}  // namespace sumcast::topo
