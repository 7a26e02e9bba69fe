// Balanced max-weight binary trees (trees.h): memoised exhaustive search over splits for small
// sets, Kernighan-Lin bisection for large ones, link-usage penalty between trees.
#include "sumcast/topo/trees.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

namespace sumcast::topo {

Matrix gpu_weight_matrix(const Router& router) {
  const auto& gpus = router.model().gpus();
  size_t n = gpus.size();
  Matrix w(n, std::vector<double>(n, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j) w[i][j] = std::min(router.route(gpus[i], gpus[j]).gbps, router.route(gpus[j], gpus[i]).gbps);
    }
  }
  return w;
}

std::vector<std::vector<bool>> nvlink_pairs(const Router& router) {
  const auto& gpus = router.model().gpus();
  size_t n = gpus.size();
  std::vector<std::vector<bool>> out(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) out[i][j] = i != j && router.nvlink_only(gpus[i], gpus[j]);
  }
  return out;
}

double tree_weight(const BinaryTree& tree, const Matrix& w) {
  double sum = 0;
  for (auto [p, c] : tree.edges()) sum += w[static_cast<size_t>(p)][static_cast<size_t>(c)];
  return sum;
}

namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();

// Joins two subtrees: `a` rooted at the tree's root, `b` rooted at the child received from at the
// top. Both are padded to the same height (a subtree that is done early just keeps its nodes).
BinaryTree join(const BinaryTree& a, const BinaryTree& b) {
  BinaryTree t;
  t.root = a.root;
  int h = std::max(a.height(), b.height()) + 1;
  t.levels.push_back({a.root});
  auto level_of = [](const BinaryTree& s, int d) {
    std::vector<int> out(size_t{1} << d, -1);
    if (d <= s.height()) return s.levels[static_cast<size_t>(d)];
    const std::vector<int>& last = s.levels.back();
    size_t stride = out.size() / last.size();
    for (size_t i = 0; i < last.size(); ++i) out[i * stride] = last[i];
    return out;
  };
  for (int d = 0; d < h; ++d) {
    std::vector<int> la = level_of(a, d), lb = level_of(b, d);
    // Level d+1 of the joined tree is a's level d followed by b's level d: entry 2i still repeats
    // entry i of the level above, in both halves.
    std::vector<int> next;
    next.insert(next.end(), la.begin(), la.end());
    next.insert(next.end(), lb.begin(), lb.end());
    t.levels.push_back(std::move(next));
  }
  return t;
}

BinaryTree leaf(int g) { return BinaryTree{g, {{g}}}; }

// Exhaustive search: best tree over `mask` (bit i = GPU i) rooted at `root`, memoised.
class Exhaustive {
 public:
  Exhaustive(const Matrix& w, const std::vector<std::vector<bool>>* allowed) : w_(w), allowed_(allowed) {}

  double best(uint32_t mask, int root) {
    if (std::popcount(mask) == 1) return 0;
    auto key = std::make_pair(mask, root);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second.first;
    int size = std::popcount(mask);
    int b_size = size / 2;
    uint32_t others = mask & ~(1u << root);
    double best_w = kNone;
    std::pair<uint32_t, int> best_choice{0, -1};
    // Every subset B of `others` with b_size members, in increasing mask order.
    for (uint32_t b = others; b; b = (b - 1) & others) {
      if (std::popcount(b) != b_size) continue;
      double wa = best(mask & ~b, root);
      if (wa == kNone) continue;
      for (uint32_t bits = b; bits; bits &= bits - 1) {
        int child = std::countr_zero(bits);
        if (allowed_ && !(*allowed_)[static_cast<size_t>(root)][static_cast<size_t>(child)]) continue;
        double wb = best(b, child);
        if (wb == kNone) continue;
        double total = w_[static_cast<size_t>(root)][static_cast<size_t>(child)] + wa + wb;
        // The first candidate always counts: with unlimited (infinite) weights the tolerance term
        // is inf - inf and no comparison would ever hold.
        if (best_choice.second < 0 || total > best_w + 1e-12 * std::fabs(total)) {
          best_w = total;
          best_choice = {b, child};
        }
      }
    }
    memo_[key] = {best_w, best_choice};
    return best_w;
  }

  BinaryTree tree(uint32_t mask, int root) {
    if (std::popcount(mask) == 1) return leaf(root);
    best(mask, root);
    auto [b, child] = memo_[{mask, root}].second;
    return join(tree(mask & ~b, root), tree(b, child));
  }

 private:
  const Matrix& w_;
  const std::vector<std::vector<bool>>* allowed_;
  std::map<std::pair<uint32_t, int>, std::pair<double, std::pair<uint32_t, int>>> memo_;
};

// Trees over sets larger than the exhaustive limit: KL halves, heaviest (allowed) edge from the root.
BinaryTree kl_tree(const std::vector<int>& set, int root, const Matrix& w,
                   const std::vector<std::vector<bool>>* allowed, const TreeOptions& options) {
  if (static_cast<int>(set.size()) <= options.exhaustive_max) {
    uint32_t mask = 0;
    for (int g : set) mask |= 1u << g;
    Exhaustive ex(w, allowed);
    if (ex.best(mask, root) == kNone) {
      Exhaustive any(w, nullptr);
      any.best(mask, root);
      return any.tree(mask, root);
    }
    return ex.tree(mask, root);
  }
  auto [a, b] = kernighan_lin_bisect(set, root, w);
  int child = -1;
  double best = kNone;
  for (int v : b) {
    bool ok = !allowed || (*allowed)[static_cast<size_t>(root)][static_cast<size_t>(v)];
    double score = w[static_cast<size_t>(root)][static_cast<size_t>(v)] + (ok ? 1e9 : 0);
    if (score > best) {
      best = score;
      child = v;
    }
  }
  return join(kl_tree(a, root, w, allowed, options), kl_tree(b, child, w, allowed, options));
}

}  // namespace

std::pair<std::vector<int>, std::vector<int>> kernighan_lin_bisect(const std::vector<int>& set, int fixed,
                                                                   const Matrix& w) {
  size_t n = set.size();
  size_t a_size = (n + 1) / 2;
  auto W = [&](int x, int y) { return w[static_cast<size_t>(x)][static_cast<size_t>(y)]; };
  // Greedy start: grow A from `fixed` by the vertex most attached to A.
  std::vector<int> a{fixed}, b;
  std::vector<bool> in_a(n, false);
  for (size_t i = 0; i < n; ++i) in_a[i] = set[i] == fixed;
  while (a.size() < a_size) {
    size_t pick = n;
    double best = kNone;
    for (size_t i = 0; i < n; ++i) {
      if (in_a[i]) continue;
      double s = 0;
      for (int x : a) s += W(set[i], x);
      if (s > best) {
        best = s;
        pick = i;
      }
    }
    in_a[pick] = true;
    a.push_back(set[pick]);
  }
  b.clear();
  for (size_t i = 0; i < n; ++i) {
    if (!in_a[i]) b.push_back(set[i]);
  }
  // KL passes: swap pairs by best gain, keep the best prefix, until no pass gains.
  for (int pass = 0; pass < 32; ++pass) {
    std::vector<int> pa = a, pb = b;
    std::vector<bool> locked_a(pa.size(), false), locked_b(pb.size(), false);
    for (size_t i = 0; i < pa.size(); ++i) locked_a[i] = pa[i] == fixed;
    auto d_of = [&](int v, const std::vector<int>& own, const std::vector<int>& other) {
      double ext = 0, in = 0;
      for (int x : other) ext += W(v, x);
      for (int x : own) in += x == v ? 0 : W(v, x);
      return ext - in;
    };
    std::vector<std::pair<size_t, size_t>> swaps;
    std::vector<double> cumulative;
    double total = 0;
    for (size_t k = 0; k < pb.size(); ++k) {
      double best = kNone;
      std::pair<size_t, size_t> pick{0, 0};
      bool found = false;
      for (size_t i = 0; i < pa.size(); ++i) {
        if (locked_a[i]) continue;
        double da = d_of(pa[i], pa, pb);
        for (size_t j = 0; j < pb.size(); ++j) {
          if (locked_b[j]) continue;
          double gain = da + d_of(pb[j], pb, pa) - 2 * W(pa[i], pb[j]);
          if (gain > best + 1e-12) {
            best = gain;
            pick = {i, j};
            found = true;
          }
        }
      }
      if (!found) break;
      std::swap(pa[pick.first], pb[pick.second]);
      locked_a[pick.first] = locked_b[pick.second] = true;
      total += best;
      swaps.push_back(pick);
      cumulative.push_back(total);
    }
    size_t best_k = 0;
    double best_gain = 1e-9;
    for (size_t k = 0; k < cumulative.size(); ++k) {
      if (cumulative[k] > best_gain) {
        best_gain = cumulative[k];
        best_k = k + 1;
      }
    }
    if (best_k == 0) break;
    for (size_t k = 0; k < best_k; ++k) std::swap(a[swaps[k].first], b[swaps[k].second]);
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a, b};
}

BinaryTree best_tree(int root, const Matrix& w, const std::vector<std::vector<bool>>& allowed,
                     const TreeOptions& options) {
  std::vector<int> all(w.size());
  for (size_t i = 0; i < w.size(); ++i) all[i] = static_cast<int>(i);
  return kl_tree(all, root, w, allowed.empty() ? nullptr : &allowed, options);
}

std::vector<BinaryTree> build_trees(const Matrix& w, const std::vector<std::vector<bool>>& allowed,
                                    const TreeOptions& options, std::vector<Matrix>* weights_used) {
  Matrix cur = w;
  std::vector<BinaryTree> out;
  for (size_t r = 0; r < w.size(); ++r) {
    if (weights_used) weights_used->push_back(cur);
    BinaryTree t = best_tree(static_cast<int>(r), cur, allowed, options);
    for (auto [p, c] : t.edges()) {
      cur[static_cast<size_t>(p)][static_cast<size_t>(c)] *= options.penalty;
      cur[static_cast<size_t>(c)][static_cast<size_t>(p)] *= options.penalty;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sumcast::topo
