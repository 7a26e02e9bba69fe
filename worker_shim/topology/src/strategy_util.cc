// Shared builder helpers (strategy_util.h).
#include "strategy_util.h"

#include <algorithm>

namespace sumcast::topo::internal {

std::vector<int> fastest_nics(const HostModel& model) {
  std::vector<int> out;
  double best = 0;
  for (int nic : model.nics()) {
    int id = model.find_link(nic, model.network(), LinkKind::kNetwork);
    double g = id >= 0 ? model.link(id).gbps : 0;
    if (g > best * 1.0001) {
      best = g;
      out.clear();
    }
    if (g >= best * 0.9999) out.push_back(nic);
  }
  return out;
}

int nearest_nic(const Router& router, int node, const std::vector<int>& nics) {
  int best = -1;
  double best_gbps = -1;
  size_t best_hops = 0;
  for (int nic : nics) {
    const Route& r = router.route(node, nic);
    if (r.gbps > best_gbps * 1.0001 || (r.gbps >= best_gbps * 0.9999 && r.hops.size() < best_hops)) {
      best = nic;
      best_gbps = r.gbps;
      best_hops = r.hops.size();
    }
  }
  return best;
}

Plan new_plan(Strategy s, const PlanRequest& request) {
  Plan p;
  p.strategy = s;
  p.name = strategy_name(s);
  p.elem_size = request.elem_size == 0 ? 1 : request.elem_size;
  p.bytes = request.bytes / p.elem_size * p.elem_size;
  return p;
}

void drop_empty_stages(Plan& plan) {
  std::erase_if(plan.stages, [](const Stage& s) { return s.steps.empty(); });
}

Status add_gpu_exchange_stage(const Router& router, Plan& plan,
                              const std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>>& owned) {
  std::vector<int> nics = fastest_nics(router.model());
  if (nics.empty()) return Status::unavailable("the host has no NIC for the network exchange");
  Stage st;
  st.label = "exchange through the NICs";
  for (const auto& [gpu, range] : owned) {
    if (range.second == 0) continue;
    Step s;
    s.op = StepOp::kExchange;
    s.dst = s.src = BufferRef{gpu, 0};
    s.offset = range.first;
    s.length = range.second;
    s.nic = nearest_nic(router, gpu, nics);
    st.steps.push_back(s);
  }
  plan.stages.push_back(std::move(st));
  return Status();
}

}  // namespace sumcast::topo::internal
