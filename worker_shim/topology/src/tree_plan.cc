// make_tree_plan (strategies.h): MXNet-style trees, one per root GPU, buffer split across them.
#include <algorithm>

#include "strategy_util.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo {

Result<Plan> make_tree_plan(const Router& router, const PlanRequest& request) {
  const HostModel& model = router.model();
  const std::vector<int>& gpus = model.gpus();
  Plan plan = internal::new_plan(Strategy::kTrees, request);
  Matrix w = gpu_weight_matrix(router);
  std::vector<std::vector<bool>> nv = nvlink_pairs(router);
  bool any_nvlink = false;
  for (const auto& row : nv) any_nvlink = any_nvlink || std::find(row.begin(), row.end(), true) != row.end();
  plan.trees = build_trees(w, any_nvlink ? nv : std::vector<std::vector<bool>>{}, request.trees);
  int n = static_cast<int>(gpus.size());
  plan.tree_ranges = split_range(0, plan.bytes, plan.elem_size, n);
  int height = 0;
  for (const BinaryTree& t : plan.trees) height = std::max(height, t.height());
  auto node_of = [&](int gpu_index) { return BufferRef{gpus[static_cast<size_t>(gpu_index)], 0}; };
  // The stage of one round between tree levels d and d + 1 of every tree: each (parent, child)
  // edge becomes a step, child into parent (reduce) or parent into child (broadcast).
  const auto level_stage = [&](int d, StepOp op, std::string label) {
    Stage st;
    st.label = std::move(label);
    for (size_t t = 0; t < plan.trees.size(); ++t) {
      const auto& lv = plan.trees[t].levels;
      if (static_cast<size_t>(d + 1) >= lv.size() || plan.tree_ranges[t].second == 0) continue;
      for (size_t i = 0; i < lv[static_cast<size_t>(d)].size(); ++i) {
        int parent = lv[static_cast<size_t>(d)][i], child = lv[static_cast<size_t>(d) + 1][2 * i + 1];
        if (parent < 0 || child < 0) continue;
        const bool reduce = op == StepOp::kReduce;
        st.steps.push_back({op, node_of(reduce ? parent : child), node_of(reduce ? child : parent),
                            plan.tree_ranges[t].first, plan.tree_ranges[t].second, -1});
      }
    }
    plan.stages.push_back(std::move(st));
  };
  // Reduce: deepest round first.
  for (int d = height - 1; d >= 0; --d) {
    level_stage(d, StepOp::kReduce,
                "reduce round " + std::to_string(height - d) + " (tree level " + std::to_string(d + 1) + " -> " +
                    std::to_string(d) + ")");
  }
  if (request.network) {
    std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>> owned;
    for (size_t t = 0; t < plan.trees.size(); ++t)
      owned.push_back({node_of(plan.trees[t].root).node, plan.tree_ranges[t]});
    SUMCAST_RETURN_IF_ERROR(internal::add_gpu_exchange_stage(router, plan, owned));
  }
  for (int d = 0; d < height; ++d) {
    level_stage(d, StepOp::kCopy,
                "broadcast round " + std::to_string(d + 1) + " (tree level " + std::to_string(d) + " -> " +
                    std::to_string(d + 1) + ")");
  }
  internal::drop_empty_stages(plan);
  plan.detail = std::to_string(n) + " trees (one per root GPU), penalty " + format_gbps(request.trees.penalty) + ", " +
                (n <= request.trees.exhaustive_max ? "exhaustive search" : "Kernighan-Lin bisection") +
                (any_nvlink ? ", NVLink edges first" : ", no NVLink");
  return plan;
}

}  // namespace sumcast::topo
