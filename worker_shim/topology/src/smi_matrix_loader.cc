// `nvidia-smi topo -m` -> HostModel (loaders.h). The matrix gives, for each pair of GPUs/NICs, the
// closest thing their path crosses: X (self), NV# (# bonded NVLinks), PIX (one PCIe bridge), PXB
// (several bridges, no host bridge), PHB (a host bridge), NODE (host bridges within a NUMA node),
// SYS (the SMP interconnect; SOC in old versions). A PCIe tree that reproduces those relations is
// built level by level (union-find over "at most PIX", "at most PXB", "at most PHB"); pairs shown
// as NV# hide their PCIe relation, and the tree places them by their other relations (stated).
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <sstream>

#include "builder_util.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo {
namespace {

using internal::add_pcie_child;

enum Level : int { kSelf = 0, kPix = 1, kPxb = 2, kPhb = 3, kNode = 4, kSys = 5, kHidden = -1 };

struct Device {
  std::string name;
  bool gpu = false;
  std::vector<std::string> codes;
  std::string cpu_affinity;
  int numa_affinity = -1;
};

struct UnionFind {
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void unite(size_t a, size_t b) { parent[find(a)] = find(b); }
  std::vector<size_t> parent;
};

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_gpu_name(const std::string& s) {
  return s.size() > 3 && s.compare(0, 3, "GPU") == 0 && std::all_of(s.begin() + 3, s.end(), ::isdigit);
}

class SmiBuilder {
 public:
  SmiBuilder(std::string_view what, const LoadOptions& options) : what_(what), options_(options) {}

  Result<HostModel> build(std::string_view text) {
    SUMCAST_RETURN_IF_ERROR(parse(text));
    size_t n = devs_.size();
    level_.assign(n, std::vector<int>(n, kSys));
    nvlinks_.assign(n, std::vector<int>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        Result<int> lv = code_level(devs_[i].codes[j], i, j);
        if (!lv.ok()) return lv.status();
        level_[i][j] = *lv;
      }
    }
    model_.set_source("nvidia-smi topo -m " + std::string(what_));
    place_numa();
    build_tree();
    add_nvlinks();
    internal::add_smp_mesh(model_, options_);
    if (std::any_of(devs_.begin(), devs_.end(), [](const Device& d) { return !d.gpu; })) {
      model_.add_assumption("NIC speed not in nvidia-smi output: assumed " + format_gbps(options_.nic_gbps) + " GB/s");
    }
    internal::resolve_unknown_gpu_links(model_, options_);
    SUMCAST_RETURN_IF_ERROR(model_.finish(options_.nic_gbps));
    return std::move(model_);
  }

 private:
  Status error(int line, const std::string& msg) const {
    return Status::invalid_argument(std::string(what_) + ":" + std::to_string(line) + ": " + msg);
  }

  Status parse(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::string line;
    std::vector<std::string> header;
    bool numa_column = false;
    bool in_nic_legend = false;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (!line.empty() && line[0] == '#') continue;
      std::vector<std::string> tok = split_ws(line);
      if (tok.empty()) continue;
      if (tok[0] == "NIC" && tok.size() > 1 && tok[1] == "Legend:") {
        in_nic_legend = true;
        continue;
      }
      if (in_nic_legend && tok.size() == 2 && tok[0].back() == ':') {  // "NIC0: mlx5_0"
        legend_[tok[0].substr(0, tok[0].size() - 1)] = tok[1];
        continue;
      }
      if (header.empty()) {
        if (!is_gpu_name(tok[0])) continue;  // text before the matrix
        for (const std::string& t : tok) {
          if (t == "CPU") break;
          header.push_back(t);
        }
        numa_column = line.find("NUMA Affinity") != std::string::npos;
        continue;
      }
      if (devs_.size() == header.size()) continue;  // the legend and anything after the matrix
      if (tok[0] != header[devs_.size()]) {
        return error(lineno, "row " + tok[0] + " where " + header[devs_.size()] + " was expected");
      }
      if (tok.size() < header.size() + 1) return error(lineno, "row " + tok[0] + " has too few columns");
      Device d;
      d.name = tok[0];
      d.gpu = is_gpu_name(tok[0]);
      d.codes.assign(tok.begin() + 1, tok.begin() + 1 + static_cast<long>(header.size()));
      if (tok.size() > header.size() + 1) d.cpu_affinity = tok[header.size() + 1];
      if (numa_column && tok.size() > header.size() + 2 &&
          std::all_of(tok[header.size() + 2].begin(), tok[header.size() + 2].end(), ::isdigit)) {
        d.numa_affinity = std::stoi(tok[header.size() + 2]);
      }
      devs_.push_back(std::move(d));
    }
    if (header.empty()) return Status::invalid_argument(std::string(what_) + ": no GPU0 header line");
    if (devs_.size() != header.size()) {
      return Status::invalid_argument(std::string(what_) + ": " + std::to_string(devs_.size()) + " rows for " +
                                      std::to_string(header.size()) + " columns");
    }
    return Status();
  }

  Result<int> code_level(const std::string& c, size_t i, size_t j) {
    if (c == "X") return i == j ? kSelf : kSys;
    if (c == "PIX") return kPix;
    if (c == "PXB") return kPxb;
    if (c == "PHB") return kPhb;
    if (c == "NODE") return kNode;
    if (c == "SYS" || c == "SOC") return kSys;
    if (c.size() > 2 && c.compare(0, 2, "NV") == 0 && std::all_of(c.begin() + 2, c.end(), ::isdigit)) {
      nvlinks_[i][j] = std::stoi(c.substr(2));
      return kHidden;
    }
    return Status::invalid_argument(std::string(what_) + ": unknown relation '" + c + "' between " + devs_[i].name +
                                    " and " + devs_[j].name);
  }

  // The relation of i and j as far as the matrix tells (the smaller of both triangles' entries).
  int rel(size_t i, size_t j) const {
    int a = level_[i][j], b = level_[j][i];
    if (a == kHidden) return b;
    if (b == kHidden) return a;
    return std::min(a, b);
  }

  // NUMA node of every device: the NUMA affinity column, else groups of equal CPU affinity, else
  // (NICs) the NUMA node of a device at most NODE away.
  void place_numa() {
    size_t n = devs_.size();
    std::map<std::string, int> by_affinity;
    numa_of_.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (devs_[i].numa_affinity >= 0) {
        numa_of_[i] = devs_[i].numa_affinity;
      } else if (!devs_[i].cpu_affinity.empty() && devs_[i].cpu_affinity != "N/A") {
        auto it = by_affinity.emplace(devs_[i].cpu_affinity, static_cast<int>(by_affinity.size())).first;
        numa_of_[i] = it->second;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (numa_of_[i] >= 0) continue;
      for (size_t j = 0; j < n && numa_of_[i] < 0; ++j) {
        int r = rel(i, j);
        if (j != i && numa_of_[j] >= 0 && r >= kPix && r <= kNode) numa_of_[i] = numa_of_[j];
      }
      if (numa_of_[i] < 0) {
        numa_of_[i] = 0;
        model_.add_assumption(devs_[i].name +
                              ": NUMA node unknown (no affinity, nothing at most NODE away): assumed 0");
      }
    }
    std::string sys_same_numa;
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (numa_of_[i] == numa_of_[j] && rel(i, j) == kSys) {
          sys_same_numa += (sys_same_numa.empty() ? "" : ", ") + devs_[i].name + "-" + devs_[j].name;
        }
      }
    }
    if (!sys_same_numa.empty()) {
      model_.add_assumption("pairs shown SYS although their affinity gives the same NUMA node (" + sys_same_numa +
                            "): placed on separate host bridges of that node (the model says NODE)");
    }
  }

  void build_tree() {
    size_t n = devs_.size();
    std::map<int, int> numa_nodes;
    for (size_t i = 0; i < n; ++i) {
      if (numa_nodes.count(numa_of_[i])) continue;
      Node numa;
      numa.kind = NodeKind::kNuma;
      numa.index = numa_of_[i];
      numa.name = "NUMA" + std::to_string(numa.index);
      numa_nodes[numa_of_[i]] = model_.add_node(numa);
    }
    auto classes = [&](int max_level) {
      UnionFind uf(n);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
          int r = rel(i, j);
          if (numa_of_[i] == numa_of_[j] && r >= kPix && r <= max_level) uf.unite(i, j);
        }
      }
      std::vector<size_t> cls(n);
      for (size_t i = 0; i < n; ++i) cls[i] = uf.find(i);
      return cls;
    };
    std::vector<size_t> hb = classes(kPhb), pxb = classes(kPxb), pix = classes(kPix);
    bool assumed = false;
    std::map<size_t, int> hb_node, pxb_node, pix_node;
    auto count = [&](const std::vector<size_t>& cls, size_t c) { return std::count(cls.begin(), cls.end(), c); };
    dev_node_.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (!hb_node.count(hb[i])) {
        Node b;
        b.kind = NodeKind::kHostBridge;
        b.name = "HB" + std::to_string(hb_node.size());
        int id = model_.add_node(b);
        b.parent = numa_nodes[numa_of_[i]];
        model_.mutable_node(id).parent = b.parent;
        Link l;
        l.a = b.parent;
        l.b = id;
        l.gbps = kUnlimited;
        model_.add_link(l);
        hb_node[hb[i]] = id;
      }
      int parent = hb_node[hb[i]];
      if (count(pxb, pxb[i]) > 1) {
        if (!pxb_node.count(pxb[i])) {
          Node s;
          s.kind = NodeKind::kPciSwitch;
          s.name = "SW" + std::to_string(pxb_node.size() + pix_node.size());
          pxb_node[pxb[i]] = add_pcie_child(model_, parent, s, 0, 0, 0, options_, &assumed);
        }
        parent = pxb_node[pxb[i]];
        // Several PIX groups under one PXB switch: each group behind its own bridge.
        bool split = false;
        for (size_t j = 0; j < n; ++j) split = split || (pxb[j] == pxb[i] && pix[j] != pix[i]);
        if (split) {
          if (!pix_node.count(pix[i])) {
            Node s;
            s.kind = NodeKind::kPciSwitch;
            s.name = "SW" + std::to_string(pxb_node.size() + pix_node.size());
            pix_node[pix[i]] = add_pcie_child(model_, parent, s, 0, 0, 0, options_, &assumed);
          }
          parent = pix_node[pix[i]];
        }
      }
      Node d;
      d.kind = devs_[i].gpu ? NodeKind::kGpu : NodeKind::kNic;
      d.name = devs_[i].name;
      if (!devs_[i].gpu && legend_.count(d.name)) d.name = legend_[d.name];
      if (devs_[i].gpu) d.index = std::stoi(devs_[i].name.substr(3));
      dev_node_[i] = add_pcie_child(model_, parent, d, 0, 0, 0, options_, &assumed);
    }
    if (assumed) {
      model_.add_assumption("PCIe generation and width not in nvidia-smi output: assumed Gen" +
                            std::to_string(options_.assumed_pcie_gen) + " x" +
                            std::to_string(options_.assumed_pcie_width));
    }
  }

  void add_nvlinks() {
    size_t n = devs_.size();
    std::string hidden;
    int hidden_pairs = 0;
    double per_link = options_.nvlink_gbps_per_link > 0 ? options_.nvlink_gbps_per_link : 25;
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        int count = std::max(nvlinks_[i][j], nvlinks_[j][i]);
        if (count == 0) continue;
        Link l;
        l.a = dev_node_[i];
        l.b = dev_node_[j];
        l.kind = LinkKind::kNvlink;
        l.nvlinks = count;
        l.gbps = count * per_link;
        model_.add_link(l);
        ++hidden_pairs;
        hidden += (hidden.empty() ? "" : " ") + devs_[i].name + "-" + devs_[j].name;
      }
    }
    if (hidden_pairs > 0) {
      model_.add_assumption("NVLink counts only: assumed " + format_gbps(per_link) +
                            " GB/s per link and direction (NVLink 2/3/4); the PCIe relation of " +
                            std::to_string(hidden_pairs) +
                            " NV# pairs is hidden and placed by their other relations (" + hidden + ")");
    }
  }

  std::string_view what_;
  const LoadOptions& options_;
  HostModel model_;
  std::vector<Device> devs_;
  std::map<std::string, std::string> legend_;
  std::vector<std::vector<int>> level_;
  std::vector<std::vector<int>> nvlinks_;
  std::vector<int> numa_of_;
  std::vector<int> dev_node_;
};

}  // namespace

Result<HostModel> load_smi_matrix(std::string_view text, std::string_view what, const LoadOptions& options) {
  return SmiBuilder(what, options).build(text);
}

}  // namespace sumcast::topo
