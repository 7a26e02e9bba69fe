// `nvidia-smi topo -m`: the PCIe tree built from the matrix must reproduce every relation the
// matrix states (checked against the file itself), NV# become NVLinks, and what the matrix hides
// or contradicts is stated.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "sumcast/topo/loaders.h"
#include "sumcast/topo/report.h"
#include "sumcast/topo/router.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

using testing::load;

// The matrix as the test reads it: row name -> column name -> code.
std::map<std::string, std::map<std::string, std::string>> read_matrix(const std::string& rel) {
  std::ifstream in(testing::data_path(rel));
  std::string line;
  std::vector<std::string> cols;
  std::map<std::string, std::map<std::string, std::string>> out;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    if (cols.empty() && tok[0] == "GPU0") {
      for (const std::string& t : tok) {
        if (t == "CPU") break;
        cols.push_back(t);
      }
      continue;
    }
    if (cols.empty() || out.size() == cols.size() || tok[0] == "Legend:") continue;
    for (size_t j = 0; j < cols.size(); ++j) out[tok[0]][cols[j]] = tok[j + 1];
  }
  return out;
}

int node_named(const HostModel& m, const std::string& name) {
  for (size_t i = 0; i < m.nodes().size(); ++i) {
    if (m.nodes()[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(SmiMatrixLoader, Dgx1ModelReproducesEveryRelationOfTheMatrix) {
  auto m = load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 8);
  EXPECT_EQ(m->nics().size(), 1u);
  Router r(*m);
  auto matrix = read_matrix(testing::kDgx1);
  ASSERT_EQ(matrix.size(), 9u);
  int checked = 0;
  for (const auto& [a, row] : matrix) {
    for (const auto& [b, code] : row) {
      int na = node_named(*m, a), nb = node_named(*m, b);
      ASSERT_GE(na, 0) << a;
      ASSERT_GE(nb, 0) << b;
      EXPECT_EQ(relation(r, na, nb), code) << a << " vs " << b;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 81);
}

TEST(SmiMatrixLoader, Dgx1NvlinksAreBondedCountsAndTheHiddenPcieIsStated) {
  auto m = load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  const auto& g = m->gpus();
  int nv2 = m->find_link(g[0], g[3], LinkKind::kNvlink);
  int nv1 = m->find_link(g[0], g[1], LinkKind::kNvlink);
  ASSERT_GE(nv2, 0);
  ASSERT_GE(nv1, 0);
  EXPECT_EQ(m->link(nv2).nvlinks, 2);
  EXPECT_DOUBLE_EQ(m->link(nv2).gbps, 50);
  EXPECT_EQ(m->link(nv1).nvlinks, 1);
  EXPECT_LT(m->find_link(g[0], g[5], LinkKind::kNvlink), 0);
  // Each GPU: 6 NVLinks to 4 peers.
  for (int gpu : g) {
    int links = 0, peers = 0;
    for (int id : m->links_of(gpu)) {
      if (m->link(id).kind == LinkKind::kNvlink) {
        links += m->link(id).nvlinks;
        ++peers;
      }
    }
    EXPECT_EQ(links, 6);
    EXPECT_EQ(peers, 4);
  }
  EXPECT_TRUE(std::any_of(m->assumptions().begin(), m->assumptions().end(),
                          [](const std::string& a) { return a.find("hidden") != std::string::npos; }));
  // GPU2, GPU3 and the NIC share one switch (PIX).
  int nic = m->nics()[0];
  EXPECT_EQ(m->node(nic).name, "mlx5_0");
  EXPECT_GE(m->top_switch(nic), 0);
  EXPECT_EQ(m->top_switch(g[2]), m->top_switch(nic));
  EXPECT_EQ(m->top_switch(g[3]), m->top_switch(nic));
}

TEST(SmiMatrixLoader, Rtx4090KeepsSocketsNicsAndStatesTheSysWithinANumaNode) {
  auto m = load(testing::kRtx4090);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->gpu_count(), 8);
  EXPECT_EQ(m->nics().size(), 2u);
  Router r(*m);
  auto matrix = read_matrix(testing::kRtx4090);
  int sys_same_numa = 0;
  for (const auto& [a, row] : matrix) {
    for (const auto& [b, code] : row) {
      int na = node_named(*m, a), nb = node_named(*m, b);
      ASSERT_GE(na, 0);
      ASSERT_GE(nb, 0);
      std::string got = relation(r, na, nb);
      if (code == "SYS" && m->node(na).numa == m->node(nb).numa) {
        EXPECT_EQ(got, "NODE") << a << " vs " << b << ": the stated deviation";
        ++sys_same_numa;
      } else {
        EXPECT_EQ(got, code) << a << " vs " << b;
      }
    }
  }
  EXPECT_GT(sys_same_numa, 0);
  EXPECT_TRUE(std::any_of(m->assumptions().begin(), m->assumptions().end(),
                          [](const std::string& a) { return a.find("same NUMA node") != std::string::npos; }));
  for (const Link& l : m->links()) EXPECT_FALSE(is_nvlink_class(l.kind));
  for (int gpu : m->gpus()) EXPECT_EQ(m->node(m->node(gpu).numa).index, m->node(gpu).index / 4);
}

TEST(SmiMatrixLoader, RejectsBrokenMatrices) {
  EXPECT_FALSE(load_smi_matrix("nothing here\n", "t", {}).ok());
  EXPECT_FALSE(load_smi_matrix("\tGPU0\tGPU1\nGPU0\t X \tQQQ\nGPU1\tQQQ\t X \n", "t", {}).ok());
  EXPECT_FALSE(load_smi_matrix("\tGPU0\tGPU1\nGPU0\t X \tSYS\n", "t", {}).ok());
  EXPECT_FALSE(load_smi_matrix("\tGPU0\tGPU1\nGPU1\t X \tSYS\nGPU0\tSYS\t X \n", "t", {}).ok());
  auto ok = load_smi_matrix("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\nGPU1\tNV4\t X \t0-3\n", "t", {});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->link(ok->find_link(ok->gpus()[0], ok->gpus()[1], LinkKind::kNvlink)).nvlinks, 4);
}

TEST(SmiMatrixLoader, NicLegendNamesTheNics) {
  const char* text =
      "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tPIX\tPIX\t0-7\t0\n"
      "GPU1\tPIX\t X \tPIX\t0-7\t0\n"
      "NIC0\tPIX\tPIX\t X \n"
      "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_3\n";
  auto m = load_smi_matrix(text, "t", {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->nics().size(), 1u);
  EXPECT_EQ(m->node(m->nics()[0]).name, "mlx5_3");
  int sw = m->top_switch(m->gpus()[0]);
  ASSERT_GE(sw, 0);
  EXPECT_EQ(m->top_switch(m->gpus()[1]), sw);
  EXPECT_EQ(m->top_switch(m->nics()[0]), sw);
}

}  // namespace
}  // namespace sumcast::topo
