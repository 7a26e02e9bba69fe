// The MXNet link-weight matrix: weights become NVLink counts (w - 1), 1 stays PCIe, and the
// layout the matrix cannot give is stated.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sumcast/topo/loaders.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

TEST(WeightMatrixLoader, P3WeightsBecomeNvlinkCounts) {
  auto m = testing::load(testing::kP3);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->gpu_count(), 8);
  std::ifstream in(testing::data_path(testing::kP3));
  std::vector<std::vector<int>> w;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::vector<int> row;
    for (int v; ls >> v;) row.push_back(v);
    w.push_back(row);
  }
  ASSERT_EQ(w.size(), 8u);
  const auto& g = m->gpus();
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      int id = m->find_link(g[i], g[j], LinkKind::kNvlink);
      if (w[i][j] >= 2) {
        ASSERT_GE(id, 0) << i << "," << j;
        EXPECT_EQ(m->link(id).nvlinks, w[i][j] - 1);
      } else {
        EXPECT_LT(id, 0) << i << "," << j;
      }
    }
  }
  EXPECT_FALSE(m->assumptions().empty());
  EXPECT_TRUE(m->nics().empty());
}

TEST(WeightMatrixLoader, RejectsNonSquareAndNonNumbers) {
  EXPECT_FALSE(load_weight_matrix("0 1\n1 0 1\n", "t", {}).ok());
  EXPECT_FALSE(load_weight_matrix("0 x\nx 0\n", "t", {}).ok());
  EXPECT_FALSE(load_weight_matrix("0 -1\n-1 0\n", "t", {}).ok());
  EXPECT_FALSE(load_weight_matrix("# nothing\n", "t", {}).ok());
  auto two = load_weight_matrix("# comment\n0 3 # trailing\n3 0\n", "t", {});
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(two->link(two->find_link(two->gpus()[0], two->gpus()[1], LinkKind::kNvlink)).nvlinks, 2);
}

}  // namespace
}  // namespace sumcast::topo
