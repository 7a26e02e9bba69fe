// Text views (report.h).
#include "sumcast/topo/report.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace sumcast::topo {
namespace {

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string numa_name(const HostModel& model, int node) {
  int n = model.node(node).numa;
  return n >= 0 ? model.node(n).name : "?";
}

std::string buffer_name(const HostModel& model, const BufferRef& b) {
  const Node& n = model.node(b.node);
  return n.kind == NodeKind::kNuma ? n.name + ".host" + std::to_string(b.slot) : n.name;
}

}  // namespace

std::string relation(const Router& router, int a, int b) {
  const HostModel& model = router.model();
  if (a == b) return "X";
  if (router.nvlink_only(a, b)) {
    int count = 0;
    for (const LinkDir& h : router.route(a, b).hops) {
      int c = model.link(h.link).nvlinks;
      if (c > 0) count = count == 0 ? c : std::min(count, c);
    }
    return "NV" + std::to_string(count);
  }
  if (model.node(a).numa != model.node(b).numa) return "SYS";
  std::vector<int> up_a = model.pcie_ancestors(a), up_b = model.pcie_ancestors(b);
  int lca = -1;
  for (int x : up_a) {
    if (std::find(up_b.begin(), up_b.end(), x) != up_b.end()) {
      lca = x;
      break;
    }
  }
  if (lca < 0) return "SYS";
  switch (model.node(lca).kind) {
    case NodeKind::kPciSwitch:
      return model.node(a).parent == lca && model.node(b).parent == lca ? "PIX" : "PXB";
    case NodeKind::kHostBridge:
      return "PHB";
    default:
      break;
  }
  auto has_bridge = [&](const std::vector<int>& up) {
    return std::any_of(up.begin(), up.end(), [&](int x) { return model.node(x).kind == NodeKind::kHostBridge; });
  };
  return has_bridge(up_a) && has_bridge(up_b) ? "NODE" : "PHB";
}

std::string format_topo_matrix(const Router& router) {
  const HostModel& model = router.model();
  std::vector<int> devs = model.gpus();
  devs.insert(devs.end(), model.nics().begin(), model.nics().end());
  size_t w = 6;
  for (int d : devs) w = std::max(w, model.node(d).name.size() + 2);
  std::string out = pad("", w);
  for (int d : devs) out += pad(model.node(d).name, w);
  out += "NUMA\n";
  for (int a : devs) {
    out += pad(model.node(a).name, w);
    for (int b : devs) out += pad(relation(router, a, b), w);
    out += numa_name(model, a) + "\n";
  }
  out +=
      "\nLegend:\n"
      "  X    = Self\n"
      "  SYS  = Through the SMP interconnect between NUMA nodes\n"
      "  NODE = Through host bridges within a NUMA node\n"
      "  PHB  = Through a PCIe host bridge (root complex)\n"
      "  PXB  = Through several PCIe bridges, no host bridge\n"
      "  PIX  = Through one PCIe switch\n"
      "  NV#  = NVLink only (# bonded links; through an NVSwitch plane where there is one)\n";
  return out;
}

std::string format_host_summary(const HostModel& model) {
  std::string out = "Host: " + model.source() + "\n";
  out += "  " + std::to_string(model.gpu_count()) + " GPUs, " + std::to_string(model.nics().size()) + " NICs, " +
         std::to_string(model.numa_nodes().size()) + " NUMA nodes\n";
  for (int numa : model.numa_nodes()) {
    const Node& n = model.node(numa);
    out += "  " + n.name + (n.socket >= 0 ? " (socket " + std::to_string(n.socket) + ")" : "") + "\n";
  }
  // PCIe switches and bridges with their children.
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const Node& n = model.nodes()[i];
    if (n.kind != NodeKind::kPciSwitch && n.kind != NodeKind::kHostBridge) continue;
    std::string children;
    for (size_t j = 0; j < model.nodes().size(); ++j) {
      if (model.nodes()[j].parent == static_cast<int>(i)) children += " " + model.nodes()[j].name;
    }
    int up = model.uplink(static_cast<int>(i));
    std::string upl = up >= 0 ? format_gbps(model.link(up).gbps) + " GB/s" : "-";
    out += "  " + std::string(n.kind == NodeKind::kPciSwitch ? "switch " : "bridge ") + pad(n.name, 18) + " under " +
           pad(model.node(n.parent).name, 18) + " uplink " + pad(upl, 16) + " below:" + children + "\n";
  }
  for (const Node& n : model.nodes()) {
    if (n.kind != NodeKind::kNvSwitch) continue;
    out += "  " + n.name + "\n";
  }
  for (int c : model.nics()) {
    const Node& n = model.node(c);
    int sw = model.top_switch(c);
    int net = model.find_link(c, model.network(), LinkKind::kNetwork);
    out += "  NIC " + pad(n.name, 10) + " " + numa_name(model, c) + ", " +
           (sw >= 0 ? "behind " + model.node(sw).name : std::string("on the root complex")) + ", " +
           (net >= 0 ? format_gbps(model.link(net).gbps) : std::string("?")) + " GB/s\n";
  }
  std::map<std::string, int> kinds;
  for (const Link& l : model.links()) ++kinds[link_kind_name(l.kind)];
  out += "  links:";
  for (const auto& [k, n] : kinds) out += " " + std::to_string(n) + " " + k;
  out += "\n";
  if (!model.assumptions().empty()) {
    out += "Assumptions:\n";
    for (const std::string& a : model.assumptions()) out += "  - " + a + "\n";
  }
  return out;
}

std::string format_candidates(const PlannerResult& result) {
  std::string out = "Candidates:\n";
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    const Candidate& c = result.candidates[i];
    std::string mark = static_cast<int>(i) == result.chosen ? "* " : "  ";
    if (!c.status.ok()) {
      out += mark + pad(strategy_name(c.strategy), 14) + "n/a: " + c.status.message() + "\n";
      continue;
    }
    const Prediction& p = c.prediction;
    out += mark + pad(strategy_name(c.strategy), 14) + pad(fixed(p.seconds * 1e3, 3) + " ms", 13) +
           pad(std::to_string(p.stages) + " stages", 11) +
           (p.resources.empty() ? std::string("nothing to move") : "bottleneck " + p.bottleneck.name) + "\n";
  }
  return out;
}

std::string format_plan(const HostModel& model, const PlannerResult& result, const Candidate& c, bool steps) {
  const Plan& plan = c.plan;
  const Prediction& p = c.prediction;
  std::string out = "Plan: " + plan.name + " — " + plan.detail + "\n";
  out +=
      "  " + format_bytes(static_cast<double>(plan.bytes)) + " per GPU, predicted " + fixed(p.seconds * 1e3, 3) + " ms";
  out += p.seconds > 0
             ? " (" + fixed(static_cast<double>(plan.bytes) / p.seconds / 1e9, 1) + " GB/s algorithm bandwidth)\n"
             : " (nothing to move)\n";
  if (&c == &result.best()) out += "  Why: " + result.why + "\n";
  for (const BinaryTree& t : plan.trees) {
    out += "  tree root GPU" + std::to_string(t.root) + ":";
    for (auto [parent, child] : t.edges()) out += " " + std::to_string(child) + "->" + std::to_string(parent);
    out += "\n";
  }
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    out += "  group " + std::to_string(g) + ":";
    for (int i : plan.groups[g]) out += " GPU" + std::to_string(i);
    out += "\n";
  }
  out += "  Per-link load (each direction; the slowest decides):\n";
  out += "    " + pad("resource", 40) + pad("bytes", 14) + pad("GB/s", 11) + pad("ms", 9) + "of max\n";
  for (const ResourceLoad& r : p.resources) {
    double share = p.bandwidth_seconds > 0 ? r.seconds / p.bandwidth_seconds * 100 : 0;
    out += "    " + pad(r.name, 40) + pad(format_bytes(r.bytes), 14) + pad(format_gbps(r.gbps), 11) +
           pad(fixed(r.seconds * 1e3, 3), 9) + fixed(share, 0) + "%\n";
  }
  out += "  Stages:\n";
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    out += "    " + std::to_string(s + 1) + ". " + st.label + " (" + std::to_string(st.steps.size()) + " steps)\n";
    if (!steps) continue;
    for (const Step& step : st.steps) {
      static constexpr const char* kOps[] = {"copy", "reduce", "exchange"};
      out += "       " + pad(kOps[static_cast<int>(step.op)], 9) + buffer_name(model, step.src) + " -> " +
             buffer_name(model, step.dst) + " [" + std::to_string(step.offset) + ", +" + std::to_string(step.length) +
             ")" + (step.nic >= 0 ? " via " + model.node(step.nic).name : std::string()) + "\n";
    }
  }
  return out;
}

}  // namespace sumcast::topo
