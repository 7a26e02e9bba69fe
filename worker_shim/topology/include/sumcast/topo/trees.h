// Balanced maximum-weight binary trees over GPUs, as in MXNet's topology-aware all-reduce
// (docs/topology.md §3.1). One tree per root GPU. A tree over a set S rooted at r splits S into
// two halves, A (with r, ceil(|S|/2) GPUs) and B, joins them by the heaviest edge from r into B
// (r receives from b's subtree in the top round), and recurses. Halves are chosen by exhaustive
// search (a memoised backtracking over all splits) while |S| <= exhaustive_max, by Kernighan-Lin
// bisection (maximum weight inside the halves) above. After each tree, every GPU pair it used has
// its weight multiplied by `penalty`, so the next trees prefer other links.
//
// Edges may be restricted to `allowed` pairs (the planner allows NVLink-only pairs first); when no
// balanced tree exists with allowed edges only, any pair may be used.
#pragma once

#include <vector>

#include "sumcast/topo/plan.h"
#include "sumcast/topo/router.h"

namespace sumcast::topo {

using Matrix = std::vector<std::vector<double>>;

struct TreeOptions {
  double penalty = 0.7;    // MXNet's default link-usage penalty
  int exhaustive_max = 8;  // backtracking up to this many GPUs, Kernighan-Lin above
};

// GPU-index weights: the bottleneck bandwidth (GB/s) of the route between each pair; 0 on the diagonal.
Matrix gpu_weight_matrix(const Router& router);
// GPU pairs whose route is NVLink/NVSwitch only.
std::vector<std::vector<bool>> nvlink_pairs(const Router& router);

// Total weight of a tree's edges under `w`.
double tree_weight(const BinaryTree& tree, const Matrix& w);

// The best tree rooted at `root` over all GPUs of `w` (exhaustive up to options.exhaustive_max).
// `allowed` may be empty (all pairs allowed).
BinaryTree best_tree(int root, const Matrix& w, const std::vector<std::vector<bool>>& allowed,
                     const TreeOptions& options);

// One tree per root 0..n-1, in root order, penalising used pairs between trees. `weights_used`,
// when given, receives the (penalised) matrix each tree was chosen under.
std::vector<BinaryTree> build_trees(const Matrix& w, const std::vector<std::vector<bool>>& allowed,
                                    const TreeOptions& options, std::vector<Matrix>* weights_used = nullptr);

// Kernighan-Lin bisection of `set` (GPU indexes) into (A, B) with |A| = ceil(|set|/2), `fixed` in A,
// maximising the weight inside the halves (minimising the cut). Deterministic.
std::pair<std::vector<int>, std::vector<int>> kernighan_lin_bisect(const std::vector<int>& set, int fixed,
                                                                   const Matrix& w);

}  // namespace sumcast::topo
