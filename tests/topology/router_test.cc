// Routes: widest path then fewest hops; never through a GPU or NIC; NVLink where it is wider;
// through NVSwitch planes; across sockets over SMP.
#include "sumcast/topo/router.h"

#include <gtest/gtest.h>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::SyntheticHost;

std::vector<int> route_nodes(const Router& r, int from, int to) {
  std::vector<int> out{from};
  for (const LinkDir& h : r.route(from, to).hops) {
    const Link& l = r.model().link(h.link);
    out.push_back(h.forward ? l.b : l.a);
  }
  return out;
}

TEST(Router, SameSwitchStaysBelowTheSwitch) {
  SyntheticHost h;
  int n0 = h.numa(0);
  int sw = h.pci_switch(n0, 16, "SW");
  int g0 = h.gpu(sw, 16, 0), g1 = h.gpu(sw, 16, 1);
  HostModel m = h.finish();
  Router r(m);
  EXPECT_EQ(route_nodes(r, g0, g1), (std::vector<int>{g0, sw, g1}));
  EXPECT_DOUBLE_EQ(r.route(g0, g1).gbps, 16);
  const Route& up = r.route(g0, n0);
  ASSERT_EQ(up.hops.size(), 2u);
  EXPECT_TRUE(up.hops[0].forward == false);  // the GPU's uplink is stored parent -> child
}

TEST(Router, WidestPathWinsOverShortest) {
  SyntheticHost h;
  int n0 = h.numa(0);
  int g0 = h.gpu(n0, 16, 0), g1 = h.gpu(n0, 16, 1);
  h.link(g0, g1, LinkKind::kNvlink, 8, 1);  // a thin NVLink: PCIe through the root complex is wider
  HostModel m = h.finish();
  Router r(m);
  EXPECT_EQ(route_nodes(r, g0, g1), (std::vector<int>{g0, n0, g1}));
  EXPECT_FALSE(r.nvlink_only(g0, g1));
}

TEST(Router, NeverTransitsAGpu) {
  SyntheticHost h;
  int n0 = h.numa(0);
  int g0 = h.gpu(n0, 4, 0), g1 = h.gpu(n0, 4, 1), g2 = h.gpu(n0, 4, 2);
  h.link(g0, g1, LinkKind::kNvlink, 100, 4);
  h.link(g1, g2, LinkKind::kNvlink, 100, 4);
  HostModel m = h.finish();
  Router r(m);
  // g0 -> g2 through g1 would be 100 GB/s wide, but GPUs forward nothing.
  EXPECT_EQ(route_nodes(r, g0, g2), (std::vector<int>{g0, n0, g2}));
  EXPECT_DOUBLE_EQ(r.route(g0, g2).gbps, 4);
}

TEST(Router, NvSwitchPlanesAndTrunks) {
  SyntheticHost h;
  int n0 = h.numa(0);
  int a = h.nvswitch("A"), b = h.nvswitch("B");
  int g0 = h.gpu(n0, 16, 0), g1 = h.gpu(n0, 16, 1), g2 = h.gpu(n0, 16, 2);
  h.link(g0, a, LinkKind::kNvswitch, 150, 6);
  h.link(g1, a, LinkKind::kNvswitch, 150, 6);
  h.link(g2, b, LinkKind::kNvswitch, 150, 6);
  h.link(a, b, LinkKind::kNvswitch, 600);
  HostModel m = h.finish();
  Router r(m);
  EXPECT_EQ(route_nodes(r, g0, g1), (std::vector<int>{g0, a, g1}));
  EXPECT_EQ(route_nodes(r, g0, g2), (std::vector<int>{g0, a, b, g2}));
  EXPECT_TRUE(r.nvlink_only(g0, g2));
  EXPECT_DOUBLE_EQ(r.route(g0, g2).gbps, 150);
}

TEST(Router, CrossSocketGoesOverSmp) {
  SyntheticHost h;
  int n0 = h.numa(0), n1 = h.numa(1);
  int hb0 = h.bridge(n0, kUnlimited, "HB0"), hb1 = h.bridge(n1, kUnlimited, "HB1");
  int g0 = h.gpu(hb0, 16, 0), g1 = h.gpu(hb1, 16, 1);
  h.link(n0, n1, LinkKind::kSmp, 20);
  HostModel m = h.finish();
  Router r(m);
  EXPECT_EQ(route_nodes(r, g0, g1), (std::vector<int>{g0, hb0, n0, n1, hb1, g1}));
  EXPECT_DOUBLE_EQ(r.route(g0, g1).gbps, 16);
  EXPECT_TRUE(r.route(g0, g0).hops.empty());
}

TEST(Router, NicsReachTheNetwork) {
  SyntheticHost h;
  int n0 = h.numa(0);
  int sw = h.pci_switch(n0, 16, "SW");
  h.gpu(sw, 16, 0);
  int nic = h.nic(sw, 16, 25);
  HostModel m = h.finish();
  Router r(m);
  ASSERT_GE(m.network(), 0);
  const Route& out = r.route(nic, m.network());
  ASSERT_EQ(out.hops.size(), 1u);
  EXPECT_DOUBLE_EQ(out.gbps, 25);
}

}  // namespace
}  // namespace sumcast::topo
