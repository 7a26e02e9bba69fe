// The cost model (cost_model.h).
#include "sumcast/topo/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace sumcast::topo {

std::string link_dir_name(const HostModel& model, int link, bool forward) {
  const Link& l = model.link(link);
  int from = forward ? l.a : l.b, to = forward ? l.b : l.a;
  return std::string(link_kind_name(l.kind)) + " " + model.node(from).name + "->" + model.node(to).name;
}

Prediction predict(const Router& router, const Plan& plan, const CostOptions& options) {
  const HostModel& model = router.model();
  std::map<std::pair<int, bool>, double> link_load;
  std::map<int, double> cpu_load;
  auto carry = [&](int from, int to, double bytes) {
    for (const LinkDir& h : router.route(from, to).hops) link_load[{h.link, h.forward}] += bytes;
  };
  for (const Stage& stage : plan.stages) {
    for (const Step& st : stage.steps) {
      double len = static_cast<double>(st.length);
      if (len == 0) continue;
      if (st.op == StepOp::kExchange) {
        carry(st.dst.node, st.nic, len);
        carry(st.nic, model.network(), len);
        carry(model.network(), st.nic, len);
        carry(st.nic, st.dst.node, len);
        continue;
      }
      carry(st.src.node, st.dst.node, len);
      if (st.op == StepOp::kReduce && model.node(st.dst.node).kind == NodeKind::kNuma) cpu_load[st.dst.node] += len;
    }
  }
  Prediction p;
  for (const auto& [key, bytes] : link_load) {
    ResourceLoad r;
    r.link = key.first;
    r.forward = key.second;
    r.name = link_dir_name(model, key.first, key.second);
    r.bytes = bytes;
    r.gbps = model.link(key.first).gbps;
    r.seconds = std::isinf(r.gbps) ? 0 : bytes / (r.gbps * 1e9);
    p.resources.push_back(r);
  }
  for (const auto& [numa, bytes] : cpu_load) {
    ResourceLoad r;
    r.numa = numa;
    r.name = "CPU sum " + model.node(numa).name;
    r.bytes = bytes;
    r.gbps = options.cpu_sum_gbps;
    r.seconds = bytes / (options.cpu_sum_gbps * 1e9);
    p.resources.push_back(r);
  }
  std::stable_sort(p.resources.begin(), p.resources.end(),
                   [](const ResourceLoad& a, const ResourceLoad& b) { return a.seconds > b.seconds; });
  double intra = 0;
  for (const ResourceLoad& r : p.resources) {
    bool network = r.link >= 0 && model.link(r.link).kind == LinkKind::kNetwork;
    if (!network) intra = std::max(intra, r.seconds);
  }
  if (!p.resources.empty()) p.bottleneck = p.resources.front();
  p.stages = static_cast<int>(plan.stages.size());
  p.bandwidth_seconds = p.resources.empty() ? 0 : p.resources.front().seconds;
  p.latency_seconds = p.stages * options.step_latency_us * 1e-6;
  p.seconds = p.bandwidth_seconds + p.latency_seconds;
  p.intra_seconds = intra + p.latency_seconds;
  return p;
}

double link_bytes(const Prediction& p, int link, bool forward) {
  for (const ResourceLoad& r : p.resources) {
    if (r.link == link && r.forward == forward) return r.bytes;
  }
  return 0;
}

}  // namespace sumcast::topo
