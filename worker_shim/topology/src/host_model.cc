// HostModel: graph bookkeeping, finishing (indexes, network node, pruning, checks) and the
// bandwidth tables the loaders share.
#include "sumcast/topo/host_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <set>

namespace sumcast::topo {

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::kNuma:
      return "numa";
    case NodeKind::kHostBridge:
      return "host-bridge";
    case NodeKind::kPciSwitch:
      return "pci-switch";
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kNic:
      return "nic";
    case NodeKind::kNvSwitch:
      return "nvswitch";
    case NodeKind::kNetwork:
      return "network";
  }
  return "?";
}

const char* link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::kPcie:
      return "PCIe";
    case LinkKind::kNvlink:
      return "NVLink";
    case LinkKind::kNvswitch:
      return "NVSwitch";
    case LinkKind::kSmp:
      return "SMP";
    case LinkKind::kNetwork:
      return "network";
  }
  return "?";
}

double pcie_gbps(int gen, int width) {
  // Per-lane payload rate after 8b/10b (gen 1-2) or 128b/130b (gen 3+) coding, GB/s.
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.984615, 1.969231, 3.938462, 7.876923};
  if (gen < 1 || gen > 6 || width <= 0) return 0;
  return kLane[gen] * width;
}

int pcie_gen_from_gts(double gts) {
  static constexpr double kRates[] = {2.5, 5, 8, 16, 32, 64};
  for (int i = 0; i < 6; ++i) {
    if (std::fabs(gts - kRates[i]) < 0.3) return i + 1;
  }
  return 0;
}

double nvlink_gbps_per_link(std::string_view gpu_model) {
  if (gpu_model.find("P100") != std::string_view::npos) return 20;
  if (gpu_model.find("B100") != std::string_view::npos || gpu_model.find("B200") != std::string_view::npos) return 50;
  return 25;  // NVLink 2-4: V100, A100, H100, H200
}

int HostModel::add_node(Node node) {
  nodes_.push_back(std::move(node));
  adjacency_.emplace_back();
  return static_cast<int>(nodes_.size()) - 1;
}

int HostModel::add_link(Link link) {
  if (link.a == link.b) return -1;
  int existing = find_link(link.a, link.b, link.kind);
  if (existing >= 0) {
    Link& l = links_[static_cast<size_t>(existing)];
    l.gbps += link.gbps;
    l.nvlinks += link.nvlinks;
    l.assumed = l.assumed || link.assumed;
    return existing;
  }
  links_.push_back(link);
  int id = static_cast<int>(links_.size()) - 1;
  adjacency_[static_cast<size_t>(link.a)].push_back(id);
  adjacency_[static_cast<size_t>(link.b)].push_back(id);
  return id;
}

int HostModel::find_link(int a, int b, LinkKind kind) const {
  if (a < 0 || static_cast<size_t>(a) >= adjacency_.size()) return -1;
  for (int id : adjacency_[static_cast<size_t>(a)]) {
    const Link& l = links_[static_cast<size_t>(id)];
    if (l.kind == kind && ((l.a == a && l.b == b) || (l.a == b && l.b == a))) return id;
  }
  return -1;
}

int HostModel::find_any_link(int a, int b) const {
  for (LinkKind k : {LinkKind::kNvlink, LinkKind::kNvswitch, LinkKind::kPcie, LinkKind::kSmp, LinkKind::kNetwork}) {
    int id = find_link(a, b, k);
    if (id >= 0) return id;
  }
  return -1;
}

std::vector<int> HostModel::numa_nodes() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == NodeKind::kNuma) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> HostModel::pcie_ancestors(int node) const {
  std::vector<int> out;
  for (int p = nodes_[static_cast<size_t>(node)].parent; p >= 0 && out.size() < nodes_.size();
       p = nodes_[static_cast<size_t>(p)].parent) {
    out.push_back(p);
  }
  return out;
}

int HostModel::top_switch(int node) const {
  int top = -1;
  for (int p : pcie_ancestors(node)) {
    if (nodes_[static_cast<size_t>(p)].kind == NodeKind::kPciSwitch) top = p;
  }
  return top;
}

int HostModel::uplink(int node) const {
  int p = nodes_[static_cast<size_t>(node)].parent;
  return p < 0 ? -1 : find_link(p, node, LinkKind::kPcie);
}

void HostModel::rebuild_adjacency() {
  adjacency_.assign(nodes_.size(), {});
  for (size_t i = 0; i < links_.size(); ++i) {
    adjacency_[static_cast<size_t>(links_[i].a)].push_back(static_cast<int>(i));
    adjacency_[static_cast<size_t>(links_[i].b)].push_back(static_cast<int>(i));
  }
}

// Removes PCIe switches and host bridges with no GPU or NIC below them, renumbering node ids.
void HostModel::prune_dead_branches() {
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    NodeKind k = nodes_[i].kind;
    if (k == NodeKind::kPciSwitch || k == NodeKind::kHostBridge) continue;
    keep[i] = true;
    if (k == NodeKind::kGpu || k == NodeKind::kNic) {
      for (int p : pcie_ancestors(static_cast<int>(i))) keep[static_cast<size_t>(p)] = true;
    }
  }
  std::vector<int> remap(nodes_.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!keep[i]) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  for (Node& n : kept) {
    if (n.parent >= 0) n.parent = remap[static_cast<size_t>(n.parent)];
    if (n.numa >= 0) n.numa = remap[static_cast<size_t>(n.numa)];
  }
  std::vector<Link> kept_links;
  for (Link l : links_) {
    l.a = remap[static_cast<size_t>(l.a)];
    l.b = remap[static_cast<size_t>(l.b)];
    if (l.a >= 0 && l.b >= 0) kept_links.push_back(l);
  }
  nodes_ = std::move(kept);
  links_ = std::move(kept_links);
  rebuild_adjacency();
}

Status HostModel::finish(double nic_gbps_default) {
  prune_dead_branches();
  // NUMA node of every PCIe node: the root of its parent chain.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (n.kind == NodeKind::kNuma) {
      n.numa = static_cast<int>(i);
      continue;
    }
    std::vector<int> up = pcie_ancestors(static_cast<int>(i));
    if (!up.empty() && nodes_[static_cast<size_t>(up.back())].kind == NodeKind::kNuma) n.numa = up.back();
  }
  // GPU and NIC indexes: keep the loader's, number the rest after them in node order.
  auto number = [&](NodeKind kind, std::vector<int>& out) -> Status {
    out.clear();
    std::set<int> used;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].kind != kind || nodes_[i].index < 0) continue;
      if (!used.insert(nodes_[i].index).second) {
        return Status::invalid_argument(std::string("two ") + node_kind_name(kind) + "s with index " +
                                        std::to_string(nodes_[i].index));
      }
    }
    int next = 0;
    for (Node& n : nodes_) {
      if (n.kind != kind || n.index >= 0) continue;
      while (used.count(next)) ++next;
      n.index = next;
      used.insert(next);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].kind == kind) out.push_back(static_cast<int>(i));
    }
    std::sort(out.begin(), out.end(), [&](int x, int y) { return node(x).index < node(y).index; });
    // Dense indexes 0..n-1 in that order (executors index buffers by GPU index).
    for (size_t k = 0; k < out.size(); ++k) mutable_node(out[k]).index = static_cast<int>(k);
    return Status();
  };
  SUMCAST_RETURN_IF_ERROR(number(NodeKind::kGpu, gpus_));
  SUMCAST_RETURN_IF_ERROR(number(NodeKind::kNic, nics_));
  for (int g : gpus_) {
    Node& n = mutable_node(g);
    if (n.name.empty()) n.name = "GPU" + std::to_string(n.index);
  }
  for (int c : nics_) {
    Node& n = mutable_node(c);
    if (n.name.empty()) n.name = "NIC" + std::to_string(n.index);
  }
  // The network behind the NICs.
  network_ = -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == NodeKind::kNetwork) network_ = static_cast<int>(i);
  }
  if (network_ < 0 && !nics_.empty()) {
    Node net;
    net.kind = NodeKind::kNetwork;
    net.name = "network";
    network_ = add_node(net);
    for (int c : nics_) {
      Link l;
      l.a = c;
      l.b = network_;
      l.kind = LinkKind::kNetwork;
      l.gbps = node(c).nic_gbps > 0 ? node(c).nic_gbps : nic_gbps_default;
      add_link(l);
    }
  }
  if (gpus_.empty()) return Status::not_found("the host model has no GPU (" + source_ + ")");
  // Connectivity: every GPU reaches GPU 0 and some NUMA node without passing through GPUs/NICs.
  std::vector<bool> seen(nodes_.size(), false);
  std::deque<int> queue{gpus_[0]};
  seen[static_cast<size_t>(gpus_[0])] = true;
  bool reaches_numa = false;
  while (!queue.empty()) {
    int u = queue.front();
    queue.pop_front();
    NodeKind k = nodes_[static_cast<size_t>(u)].kind;
    if (k == NodeKind::kNuma) reaches_numa = true;
    if ((k == NodeKind::kGpu || k == NodeKind::kNic || k == NodeKind::kNetwork) && u != gpus_[0]) continue;
    for (int id : adjacency_[static_cast<size_t>(u)]) {
      const Link& l = links_[static_cast<size_t>(id)];
      int v = l.a == u ? l.b : l.a;
      if (!seen[static_cast<size_t>(v)]) {
        seen[static_cast<size_t>(v)] = true;
        queue.push_back(v);
      }
    }
  }
  for (int g : gpus_) {
    if (!seen[static_cast<size_t>(g)]) {
      return Status::invalid_argument(node(g).name + " is not connected to " + node(gpus_[0]).name + " (" + source_ +
                                      ")");
    }
  }
  if (!reaches_numa) return Status::invalid_argument("the GPUs reach no NUMA node (" + source_ + ")");
  return Status();
}

std::string format_gbps(double gbps) {
  if (std::isinf(gbps)) return "unlimited";
  char buf[32];
  if (gbps >= 100 || gbps == std::floor(gbps)) {
    std::snprintf(buf, sizeof buf, "%.0f", gbps);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", gbps);
  }
  return buf;
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (bytes == std::floor(bytes)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, kUnits[u]);
  }
  return buf;
}

}  // namespace sumcast::topo
