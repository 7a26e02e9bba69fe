// Graphviz output (dot.h).
#include "sumcast/topo/dot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

extern char** environ;

namespace sumcast::topo {
namespace {

std::string id(int node) { return "n" + std::to_string(node); }

// A DOT string: quotes and backslashes escaped, newlines as DOT's centred line break.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string node_attrs(const Node& n) {
  switch (n.kind) {
    case NodeKind::kNuma:
      return "shape=box3d, style=filled, fillcolor=\"#dde8f5\"";
    case NodeKind::kHostBridge:
      return "shape=box, style=\"rounded\", fontsize=10";
    case NodeKind::kPciSwitch:
      return "shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", fontsize=10";
    case NodeKind::kGpu:
      return "shape=box, style=filled, fillcolor=\"#c8eac0\", penwidth=1.5";
    case NodeKind::kNic:
      return "shape=cds, style=filled, fillcolor=\"#f7e2b8\"";
    case NodeKind::kNvSwitch:
      return "shape=hexagon, style=filled, fillcolor=\"#b8e0e0\"";
    case NodeKind::kNetwork:
      return "shape=ellipse, style=dashed";
  }
  return "";
}

std::string link_label(const Link& l) {
  switch (l.kind) {
    case LinkKind::kPcie:
      if (std::isinf(l.gbps)) return "";
      if (l.pcie_gen > 0) return "Gen" + std::to_string(l.pcie_gen) + " x" + std::to_string(l.pcie_width);
      return format_gbps(l.gbps) + " GB/s";
    case LinkKind::kNvlink:
    case LinkKind::kNvswitch:
      return (l.nvlinks > 0 ? "NV" + std::to_string(l.nvlinks) : format_gbps(l.gbps) + " GB/s");
    case LinkKind::kSmp:
    case LinkKind::kNetwork:
      return format_gbps(l.gbps) + " GB/s";
  }
  return "";
}

std::string link_style(const Link& l) {
  std::string s;
  switch (l.kind) {
    case LinkKind::kPcie:
      s = "color=\"#555555\"";
      break;
    case LinkKind::kNvlink:
      s = "color=\"#3a9a3a\", penwidth=" + std::to_string(1 + std::min(l.nvlinks, 6));
      break;
    case LinkKind::kNvswitch:
      s = "color=\"#2a8a8a\", penwidth=2";
      break;
    case LinkKind::kSmp:
      s = "color=\"#4466aa\", style=dashed, penwidth=2";
      break;
    case LinkKind::kNetwork:
      s = "color=\"#aa7733\", style=dotted";
      break;
  }
  if (l.assumed) s += ", style=\"dashed\"";
  return s;
}

const char* const kTreeColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace

std::string host_dot(const HostModel& model, const Plan* plan, const Prediction* prediction) {
  std::string out = "graph host {\n  graph [fontname=\"Helvetica\", fontsize=11, rankdir=TB, newrank=true";
  std::string legend = "green: NVLink (thicker: more links), teal: NVSwitch, grey: PCIe, blue: SMP, dashed: assumed";
  if (prediction)
    legend += "\nlabels: width, then bytes on the busier direction; redder and thicker: closer to the bottleneck";
  out += ", label=" + quote(model.source() + (plan ? " | plan: " + plan->name : std::string()) + "\n" + legend) +
         ", labelloc=t];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=11];\n  edge [fontname=\"Helvetica\", fontsize=9];\n";
  std::map<int, std::vector<int>> by_numa;
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const Node& n = model.nodes()[i];
    if (n.kind == NodeKind::kNvSwitch || n.kind == NodeKind::kNetwork || n.numa < 0) continue;
    by_numa[n.numa].push_back(static_cast<int>(i));
  }
  for (const auto& [numa, members] : by_numa) {
    out += "  subgraph cluster_" + id(numa) + " {\n    label=" + quote(model.node(numa).name) +
           "; style=rounded; color=\"#9999bb\";\n";
    for (int m : members)
      out += "    " + id(m) + " [label=" + quote(model.node(m).name) + ", " + node_attrs(model.node(m)) + "];\n";
    out += "  }\n";
  }
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const Node& n = model.nodes()[i];
    if (n.kind == NodeKind::kNvSwitch || n.kind == NodeKind::kNetwork || n.numa < 0) {
      out += "  " + id(static_cast<int>(i)) + " [label=" + quote(n.name) + ", " + node_attrs(n) + "];\n";
    }
  }
  double worst = prediction ? prediction->bandwidth_seconds : 0;
  for (size_t i = 0; i < model.links().size(); ++i) {
    const Link& l = model.links()[i];
    std::string label = link_label(l);
    std::string style = link_style(l);
    if (prediction) {
      double fwd = link_bytes(*prediction, static_cast<int>(i), true),
             back = link_bytes(*prediction, static_cast<int>(i), false);
      double bytes = std::max(fwd, back);
      if (bytes > 0) {
        label += (label.empty() ? "" : "\n") + format_bytes(bytes);
        double ratio = worst > 0 && !std::isinf(l.gbps) ? bytes / (l.gbps * 1e9) / worst : 0;
        char color[16];
        std::snprintf(color, sizeof color, "#%02x3030", static_cast<int>(80 + 175 * std::min(1.0, ratio)));
        style += ", color=\"" + std::string(color) + "\", penwidth=" + std::to_string(1.5 + 4 * std::min(1.0, ratio));
      }
    }
    out += "  " + id(l.a) + " -- " + id(l.b) + " [" + style + (label.empty() ? "" : ", label=" + quote(label)) + "];\n";
  }
  out += "}\n";
  return out;
}

std::string plan_dot(const HostModel& model, const Plan& plan) {
  std::string out = "digraph plan {\n  graph [fontname=\"Helvetica\", fontsize=11, compound=true, label=" +
                    quote(std::string(strategy_name(plan.strategy)) + ": " + plan.detail) + ", labelloc=t];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=filled, fillcolor=\"#c8eac0\"];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  const auto& gpus = model.gpus();
  auto gname = [&](int idx) { return model.node(gpus[static_cast<size_t>(idx)]).name; };
  for (size_t t = 0; t < plan.trees.size(); ++t) {
    const BinaryTree& tree = plan.trees[t];
    std::string color = kTreeColors[t % 10];
    out += "  subgraph cluster_t" + std::to_string(t) + " {\n    label=" + quote("root " + gname(tree.root)) +
           "; color=\"" + color + "\";\n";
    for (int g : tree.levels.back()) {
      if (g >= 0) out += "    t" + std::to_string(t) + "_" + std::to_string(g) + " [label=" + quote(gname(g)) + "];\n";
    }
    for (auto [parent, child] : tree.edges()) {
      int lk = model.find_any_link(gpus[static_cast<size_t>(parent)], gpus[static_cast<size_t>(child)]);
      std::string attrs = "color=\"" + color + "\"";
      attrs += lk >= 0 ? ", label=" + quote(link_label(model.link(lk))) : std::string(", style=dashed");
      out += "    t" + std::to_string(t) + "_" + std::to_string(child) + " -> t" + std::to_string(t) + "_" +
             std::to_string(parent) + " [" + attrs + "];\n";
    }
    out += "  }\n";
  }
  if (!plan.ring.empty()) {
    for (size_t i = 0; i < plan.ring.size(); ++i) {
      out += "  r" + std::to_string(plan.ring[i]) + " [label=" + quote(gname(plan.ring[i])) + "];\n";
    }
    for (size_t i = 0; i < plan.ring.size(); ++i) {
      out += "  r" + std::to_string(plan.ring[i]) + " -> r" + std::to_string(plan.ring[(i + 1) % plan.ring.size()]) +
             " [dir=both, color=\"#1f77b4\"];\n";
    }
  }
  if (plan.strategy == Strategy::kFlat) {
    for (int i = 0; i < model.gpu_count(); ++i)
      out += "  f" + std::to_string(i) + " [label=" + quote(gname(i)) + "];\n";
    out += "  fabric [label=\"all pairs\", shape=hexagon, fillcolor=\"#b8e0e0\"];\n";
    for (int i = 0; i < model.gpu_count(); ++i) out += "  f" + std::to_string(i) + " -> fabric [dir=both];\n";
  }
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    int numa = model.node(gpus[static_cast<size_t>(plan.groups[g].front())]).numa;
    out += "  subgraph cluster_g" + std::to_string(g) + " {\n    label=\"switch group " + std::to_string(g) +
           "\"; color=\"#888888\";\n";
    // Switches under the group's top switch (trees of several levels) as nested clusters, in the
    // GPU order.
    const int top = model.top_switch(gpus[static_cast<size_t>(plan.groups[g].front())]);
    std::map<int, std::vector<int>> below;  // switch -> sub-switches and GPU indexes (as -1 - i)
    for (int i : plan.groups[g]) {
      int child = -1 - i;
      for (int up : model.pcie_ancestors(gpus[static_cast<size_t>(i)])) {
        if (top < 0 || up == top) break;
        auto& k = below[up];
        if (std::find(k.begin(), k.end(), child) == k.end()) k.push_back(child);
        child = up;
      }
      if (top >= 0) {
        auto& k = below[top];
        if (std::find(k.begin(), k.end(), child) == k.end()) k.push_back(child);
      }
    }
    std::function<void(int, const std::string&)> draw = [&](int node, const std::string& indent) {
      for (int c : below[node]) {
        if (c < 0) {
          out += indent + "g" + std::to_string(-1 - c) + " [label=" + quote(gname(-1 - c)) + "];\n";
          continue;
        }
        out += indent + "subgraph cluster_s" + std::to_string(c) + " {\n" + indent +
               "  label=" + quote(model.node(c).name) + "; color=\"#bbbbbb\";\n";
        draw(c, indent + "  ");
        out += indent + "}\n";
      }
    };
    if (top >= 0) {
      draw(top, "    ");
    } else {
      for (int i : plan.groups[g]) out += "    g" + std::to_string(i) + " [label=" + quote(gname(i)) + "];\n";
    }
    out += "  }\n";
    out += "  mem" + std::to_string(numa) + " [label=" + quote(model.node(numa).name + " memory (CPU sums)") +
           ", shape=box3d, fillcolor=\"#dde8f5\"];\n";
    out += "  g" + std::to_string(plan.groups[g].front()) + " -> mem" + std::to_string(numa) +
           " [dir=both, ltail=cluster_g" + std::to_string(g) + ", label=\"partials up, results down\"];\n";
  }
  out += "}\n";
  return out;
}

bool dot_available() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty() && access((dir + "/dot").c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

Status render_dot(const std::string& in, const std::string& out, const std::string& format) {
  if (!dot_available()) return Status::unavailable("graphviz `dot` is not on PATH (apt-get install graphviz)");
  std::string t = "-T" + format;
  std::vector<char*> argv;
  std::string prog = "dot", o = "-o";
  argv.push_back(prog.data());
  argv.push_back(t.data());
  argv.push_back(o.data());
  argv.push_back(const_cast<char*>(out.c_str()));
  argv.push_back(const_cast<char*>(in.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) return Status::from_errno("posix_spawnp dot", rc);
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return Status::from_errno("waitpid dot");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::io_error("dot -T" + format + " " + in + " failed (status " + std::to_string(status) + ")");
  }
  return Status();
}

}  // namespace sumcast::topo
