// make_ring_plan and make_flat_plan (strategies.h).
#include <algorithm>
#include <map>
#include <numeric>

#include "strategy_util.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo {
namespace {

// The cost model's time for one unit in both directions between ring neighbours: the largest
// per-link load over bandwidth.
double ring_cost(const Router& router, const std::vector<int>& order) {
  std::map<std::pair<int, bool>, double> load;
  size_t n = order.size();
  for (size_t i = 0; i < n; ++i) {
    int a = order[i], b = order[(i + 1) % n];
    for (const LinkDir& h : router.route(a, b).hops) load[{h.link, h.forward}] += 1;
    for (const LinkDir& h : router.route(b, a).hops) load[{h.link, h.forward}] += 1;
  }
  double worst = 0;
  for (const auto& [key, units] : load) worst = std::max(worst, units / router.model().link(key.first).gbps);
  return worst;
}

std::vector<int> best_ring(const Router& router) {
  std::vector<int> order = router.model().gpus();
  if (order.size() <= 3) return order;
  if (order.size() <= 9) {
    std::vector<int> best = order;
    double best_cost = ring_cost(router, order);
    while (std::next_permutation(order.begin() + 1, order.end())) {
      double c = ring_cost(router, order);
      if (c < best_cost * (1 - 1e-9)) {
        best_cost = c;
        best = order;
      }
    }
    return best;
  }
  // Greedy (widest next hop), then 2-opt reversals while they lower the cost.
  std::vector<int> rest(order.begin() + 1, order.end());
  std::vector<int> ring{order.front()};
  while (!rest.empty()) {
    auto it = std::max_element(rest.begin(), rest.end(), [&](int x, int y) {
      return router.route(ring.back(), x).gbps < router.route(ring.back(), y).gbps;
    });
    ring.push_back(*it);
    rest.erase(it);
  }
  double cost = ring_cost(router, ring);
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t i = 1; i + 1 < ring.size(); ++i) {
      for (size_t j = i + 1; j < ring.size(); ++j) {
        std::reverse(ring.begin() + static_cast<long>(i), ring.begin() + static_cast<long>(j) + 1);
        double c = ring_cost(router, ring);
        if (c < cost * (1 - 1e-9)) {
          cost = c;
          improved = true;
        } else {
          std::reverse(ring.begin() + static_cast<long>(i), ring.begin() + static_cast<long>(j) + 1);
        }
      }
    }
  }
  return ring;
}

}  // namespace

Result<Plan> make_ring_plan(const Router& router, const PlanRequest& request) {
  const HostModel& model = router.model();
  Plan plan = internal::new_plan(Strategy::kRing, request);
  std::vector<int> ring = best_ring(router);
  for (int g : ring) plan.ring.push_back(model.node(g).index);
  size_t n = ring.size();
  auto halves = split_range(0, plan.bytes, plan.elem_size, 2);
  std::vector<std::vector<int>> orders{ring, std::vector<int>(ring.rbegin(), ring.rend())};
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> chunks;
  for (int r = 0; r < 2; ++r)
    chunks.push_back(split_range(halves[static_cast<size_t>(r)].first, halves[static_cast<size_t>(r)].second,
                                 plan.elem_size, static_cast<int>(n)));
  auto chunk = [&](int r, size_t c) { return chunks[static_cast<size_t>(r)][c % n]; };
  for (size_t s = 0; s + 1 < n; ++s) {
    Stage st;
    st.label = "reduce-scatter step " + std::to_string(s + 1);
    for (int r = 0; r < 2; ++r) {
      const auto& o = orders[static_cast<size_t>(r)];
      for (size_t i = 0; i < n; ++i) {
        auto [off, len] = chunk(r, i + n - s);
        st.steps.push_back({StepOp::kReduce, {o[(i + 1) % n], 0}, {o[i], 0}, off, len, -1});
      }
    }
    plan.stages.push_back(std::move(st));
  }
  if (request.network) {
    std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>> owned;
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < n; ++i) owned.push_back({orders[static_cast<size_t>(r)][i], chunk(r, i + 1)});
    }
    SUMCAST_RETURN_IF_ERROR(internal::add_gpu_exchange_stage(router, plan, owned));
  }
  for (size_t s = 0; s + 1 < n; ++s) {
    Stage st;
    st.label = "all-gather step " + std::to_string(s + 1);
    for (int r = 0; r < 2; ++r) {
      const auto& o = orders[static_cast<size_t>(r)];
      for (size_t i = 0; i < n; ++i) {
        auto [off, len] = chunk(r, i + 1 + n - s);
        st.steps.push_back({StepOp::kCopy, {o[(i + 1) % n], 0}, {o[i], 0}, off, len, -1});
      }
    }
    plan.stages.push_back(std::move(st));
  }
  internal::drop_empty_stages(plan);
  std::string order;
  for (int g : plan.ring) order += (order.empty() ? "GPU" : " > GPU") + std::to_string(g);
  plan.detail = "two opposite rings over " + order + " (each half the buffer)";
  return plan;
}

Result<Plan> make_flat_plan(const Router& router, const PlanRequest& request) {
  const std::vector<int>& gpus = router.model().gpus();
  Plan plan = internal::new_plan(Strategy::kFlat, request);
  size_t n = gpus.size();
  auto shards = split_range(0, plan.bytes, plan.elem_size, static_cast<int>(n));
  Stage rs, ag;
  rs.label = "reduce-scatter: every GPU sends each owner its shard";
  ag.label = "all-gather: every owner sends its shard to all";
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < n; ++i) {
      if (i == j) continue;
      rs.steps.push_back({StepOp::kReduce, {gpus[j], 0}, {gpus[i], 0}, shards[j].first, shards[j].second, -1});
      ag.steps.push_back({StepOp::kCopy, {gpus[i], 0}, {gpus[j], 0}, shards[j].first, shards[j].second, -1});
    }
  }
  plan.stages.push_back(std::move(rs));
  if (request.network) {
    std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>> owned;
    for (size_t j = 0; j < n; ++j) owned.push_back({gpus[j], shards[j]});
    SUMCAST_RETURN_IF_ERROR(internal::add_gpu_exchange_stage(router, plan, owned));
  }
  plan.stages.push_back(std::move(ag));
  internal::drop_empty_stages(plan);
  plan.detail = "direct reduce-scatter and all-gather among " + std::to_string(n) + " GPUs";
  return plan;
}

}  // namespace sumcast::topo
