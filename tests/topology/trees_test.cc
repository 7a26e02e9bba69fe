// MXNet-style trees on the hybrid cube mesh (DGX-1 from nvidia-smi, p3.16xlarge from MXNet's
// weight matrix): balanced, NVLink only, optimal by brute force under the penalised weights each
// tree was chosen with, and spread over links by the penalty. Kernighan-Lin above 8 GPUs.
#include "sumcast/topo/trees.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

// The tree whose last level is `p` (p[0] the root): each level up keeps every other entry.
BinaryTree tree_from_bottom(const std::vector<int>& p) {
  BinaryTree t;
  t.root = p[0];
  std::vector<int> cur = p;
  t.levels.insert(t.levels.begin(), cur);
  while (cur.size() > 1) {
    std::vector<int> up;
    for (size_t i = 0; i < cur.size(); i += 2) up.push_back(cur[i]);
    cur = up;
    t.levels.insert(t.levels.begin(), cur);
  }
  return t;
}

// Brute force over all 7! orders of the other GPUs (every balanced tree on 8 GPUs rooted at
// `root` is exactly one such order).
double brute_force_best(int root, const Matrix& w, const std::vector<std::vector<bool>>& allowed) {
  std::vector<int> others;
  for (int i = 0; i < static_cast<int>(w.size()); ++i) {
    if (i != root) others.push_back(i);
  }
  double best = -1;
  do {
    std::vector<int> p{root};
    p.insert(p.end(), others.begin(), others.end());
    BinaryTree t = tree_from_bottom(p);
    bool ok = true;
    for (auto [a, b] : t.edges())
      ok = ok && (allowed.empty() || allowed[static_cast<size_t>(a)][static_cast<size_t>(b)]);
    if (ok) best = std::max(best, tree_weight(t, w));
  } while (std::next_permutation(others.begin(), others.end()));
  return best;
}

void expect_balanced(const BinaryTree& t, int n) {
  int h = static_cast<int>(std::ceil(std::log2(n)));
  ASSERT_EQ(t.height(), h);
  for (int d = 0; d <= h; ++d) {
    ASSERT_EQ(t.levels[static_cast<size_t>(d)].size(), size_t{1} << d);
    if (d == 0) continue;
    for (size_t i = 0; i < t.levels[static_cast<size_t>(d) - 1].size(); ++i) {
      EXPECT_EQ(t.levels[static_cast<size_t>(d)][2 * i], t.levels[static_cast<size_t>(d) - 1][i]);
    }
  }
  EXPECT_EQ(t.levels[0][0], t.root);
  std::vector<int> bottom;
  for (int g : t.levels.back()) {
    if (g >= 0) bottom.push_back(g);
  }
  std::sort(bottom.begin(), bottom.end());
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(bottom, all) << "every GPU exactly once";
  EXPECT_EQ(t.edges().size(), static_cast<size_t>(n - 1));
}

class HybridCubeMeshTrees : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridCubeMeshTrees, BalancedNvlinkOnlyAndOptimalUnderThePenalisedWeights) {
  auto m = testing::load(GetParam());
  ASSERT_TRUE(m.ok());
  Router r(*m);
  Matrix w = gpu_weight_matrix(r);
  auto nv = nvlink_pairs(r);
  std::vector<Matrix> used;
  TreeOptions opt;
  std::vector<BinaryTree> trees = build_trees(w, nv, opt, &used);
  ASSERT_EQ(trees.size(), 8u);
  Matrix expected = w;  // the test's own bookkeeping of the penalty
  for (size_t k = 0; k < trees.size(); ++k) {
    SCOPED_TRACE("tree " + std::to_string(k));
    const BinaryTree& t = trees[k];
    EXPECT_EQ(t.root, static_cast<int>(k));
    expect_balanced(t, 8);
    for (auto [a, b] : t.edges())
      EXPECT_TRUE(r.nvlink_only(m->gpus()[static_cast<size_t>(a)], m->gpus()[static_cast<size_t>(b)]));
    EXPECT_EQ(used[k], expected) << "tree chosen under the penalised weights";
    EXPECT_NEAR(tree_weight(t, expected), brute_force_best(t.root, expected, nv), 1e-9);
    if (k == 0) {
      // On the hybrid cube mesh the best tree uses NVLink only even when PCIe edges are allowed.
      EXPECT_NEAR(brute_force_best(0, expected, nv), brute_force_best(0, expected, {}), 1e-9);
    }
    for (auto [a, b] : t.edges()) {
      expected[static_cast<size_t>(a)][static_cast<size_t>(b)] *= opt.penalty;
      expected[static_cast<size_t>(b)][static_cast<size_t>(a)] *= opt.penalty;
    }
  }
}

// How many trees use each GPU pair.
std::map<std::pair<int, int>, int> pair_use(const std::vector<BinaryTree>& trees) {
  std::map<std::pair<int, int>, int> use;
  for (const BinaryTree& t : trees) {
    for (auto [a, b] : t.edges()) ++use[{std::min(a, b), std::max(a, b)}];
  }
  return use;
}

TEST_P(HybridCubeMeshTrees, PenaltySpreadsSuccessiveTreesOverMoreLinks) {
  auto m = testing::load(GetParam());
  ASSERT_TRUE(m.ok());
  Router r(*m);
  Matrix w = gpu_weight_matrix(r);
  auto nv = nvlink_pairs(r);
  TreeOptions none;
  none.penalty = 1.0;
  std::vector<BinaryTree> plain = build_trees(w, nv, none);
  std::vector<BinaryTree> spread = build_trees(w, nv, TreeOptions{});
  auto max_use = [](const std::map<std::pair<int, int>, int>& u) {
    int mx = 0;
    for (const auto& [pair, n] : u) mx = std::max(mx, n);
    return mx;
  };
  auto plain_use = pair_use(plain), spread_use = pair_use(spread);
  EXPECT_GT(spread_use.size(), plain_use.size()) << "more distinct links";
  EXPECT_LT(max_use(spread_use), max_use(plain_use)) << "the busiest link carries fewer trees";
  int differ = 0;
  for (size_t k = 1; k < 8; ++k) differ += plain[k].levels != spread[k].levels;
  EXPECT_GT(differ, 0);
  EXPECT_EQ(plain[0].levels, spread[0].levels) << "the first tree sees no penalty";
}

INSTANTIATE_TEST_SUITE_P(RealMachines, HybridCubeMeshTrees, ::testing::Values(testing::kDgx1, testing::kP3));

TEST(Trees, KernighanLinSeparatesTwoCliquesAndKeepsTheFixedVertex) {
  Matrix w(10, std::vector<double>(10, 1));
  std::vector<int> a_side{0, 3, 5, 7, 8};  // interleaved on purpose
  auto in_a = [&](int v) { return std::find(a_side.begin(), a_side.end(), v) != a_side.end(); };
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 10; ++j)
      w[static_cast<size_t>(i)][static_cast<size_t>(j)] = i == j ? 0 : (in_a(i) == in_a(j) ? 10 : 1);
  }
  std::vector<int> all(10);
  std::iota(all.begin(), all.end(), 0);
  for (int fixed : {0, 4}) {
    auto [a, b] = kernighan_lin_bisect(all, fixed, w);
    ASSERT_EQ(a.size(), 5u);
    EXPECT_NE(std::find(a.begin(), a.end(), fixed), a.end());
    std::vector<int> expect_a = a_side;
    if (!in_a(fixed)) {
      expect_a.clear();
      for (int v : all) {
        if (!in_a(v)) expect_a.push_back(v);
      }
    }
    EXPECT_EQ(a, expect_a) << "fixed " << fixed;
  }
}

TEST(Trees, Dgx2SixteenGpusUseKernighanLinAndStayBalancedOnNvlink) {
  auto m = testing::load(testing::kDgx2);
  ASSERT_TRUE(m.ok());
  Router r(*m);
  std::vector<BinaryTree> trees = build_trees(gpu_weight_matrix(r), nvlink_pairs(r), TreeOptions{});
  ASSERT_EQ(trees.size(), 16u);
  for (const BinaryTree& t : trees) {
    expect_balanced(t, 16);
    for (auto [a, b] : t.edges())
      EXPECT_TRUE(r.nvlink_only(m->gpus()[static_cast<size_t>(a)], m->gpus()[static_cast<size_t>(b)]));
  }
}

TEST(Trees, OddGpuCountsGiveCeilLog2Heights) {
  for (int n : {1, 2, 3, 5, 6, 7}) {
    Matrix w(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n), 1));
    for (int i = 0; i < n; ++i) w[static_cast<size_t>(i)][static_cast<size_t>(i)] = 0;
    for (const BinaryTree& t : build_trees(w, {}, TreeOptions{})) {
      SCOPED_TRACE(n);
      expect_balanced(t, n);
    }
  }
}

TEST(Trees, FallsBackToAnyEdgeWhenNoNvlinkTreeExists) {
  Matrix w(4, std::vector<double>(4, 1));
  std::vector<std::vector<bool>> allowed(4, std::vector<bool>(4, false));
  allowed[0][1] = allowed[1][0] = true;  // one NVLink pair cannot make a 4-GPU tree
  for (int i = 0; i < 4; ++i) w[static_cast<size_t>(i)][static_cast<size_t>(i)] = 0;
  BinaryTree t = best_tree(2, w, allowed, TreeOptions{});
  expect_balanced(t, 4);
}

TEST(Trees, UnlimitedWeightsStillGiveBalancedTrees) {
  // Routes that are all unlimited (memory to memory) weigh infinity; the search must still pick.
  for (int n : {2, 4, 7}) {
    Matrix w(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n), kUnlimited));
    for (int i = 0; i < n; ++i) w[static_cast<size_t>(i)][static_cast<size_t>(i)] = 0;
    for (const BinaryTree& t : build_trees(w, {}, TreeOptions{})) {
      SCOPED_TRACE(n);
      expect_balanced(t, n);
    }
  }
}

}  // namespace
}  // namespace sumcast::topo
