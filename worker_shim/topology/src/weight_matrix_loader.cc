// A GPU link-weight matrix -> HostModel (loaders.h). MXNet's kvstore reads link weights as
// cudaDevP2PAttrPerformanceRank + 1: 0 on the diagonal, 1 for PCIe only, k >= 2 for k-1 bonded
// NVLinks. The matrix says nothing about PCIe, NUMA or NICs: all of that is assumed and stated.
#include <cmath>
#include <sstream>

#include "builder_util.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo {

Result<HostModel> load_weight_matrix(std::string_view text, std::string_view what, const LoadOptions& options) {
  std::vector<std::vector<double>> rows;
  std::istringstream in{std::string(text)};
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::vector<double> row;
    for (std::string tok; ls >> tok;) {
      char* end = nullptr;
      double v = std::strtod(tok.c_str(), &end);
      if (*end != '\0' || v < 0 || !std::isfinite(v)) {
        return Status::invalid_argument(std::string(what) + ":" + std::to_string(lineno) + ": '" + tok +
                                        "' is not a link weight");
      }
      row.push_back(v);
    }
    if (!row.empty()) rows.push_back(std::move(row));
  }
  size_t n = rows.size();
  if (n == 0) return Status::invalid_argument(std::string(what) + ": no matrix");
  for (const auto& r : rows) {
    if (r.size() != n) return Status::invalid_argument(std::string(what) + ": the matrix is not square");
  }
  HostModel model;
  model.set_source("link-weight matrix " + std::string(what));
  Node numa;
  numa.kind = NodeKind::kNuma;
  numa.index = 0;
  numa.name = "NUMA0";
  int numa_id = model.add_node(numa);
  std::vector<int> gpu(n);
  for (size_t i = 0; i < n; ++i) {
    Node hb;
    hb.kind = NodeKind::kHostBridge;
    hb.name = "HB" + std::to_string(i);
    hb.parent = numa_id;
    int hb_id = model.add_node(hb);
    Link l;
    l.a = numa_id;
    l.b = hb_id;
    l.gbps = kUnlimited;
    model.add_link(l);
    Node g;
    g.kind = NodeKind::kGpu;
    g.index = static_cast<int>(i);
    gpu[i] = internal::add_pcie_child(model, hb_id, g, 0, 0, 0, options, nullptr);
  }
  double per_link = options.nvlink_gbps_per_link > 0 ? options.nvlink_gbps_per_link : 25;
  int zero_pairs = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      double w = std::max(rows[i][j], rows[j][i]);
      if (w == 0) ++zero_pairs;
      if (w < 2) continue;
      Link l;
      l.a = gpu[i];
      l.b = gpu[j];
      l.kind = LinkKind::kNvlink;
      l.nvlinks = static_cast<int>(std::lround(w - 1));
      l.gbps = l.nvlinks * per_link;
      model.add_link(l);
    }
  }
  model.add_assumption(
      "a link-weight matrix (weight = NVLinks + 1, 1 = PCIe only) gives no PCIe, NUMA or NIC layout: "
      "assumed one NUMA node, every GPU on its own root port, Gen" +
      std::to_string(options.assumed_pcie_gen) + " x" + std::to_string(options.assumed_pcie_width) + ", " +
      format_gbps(per_link) + " GB/s per NVLink and direction, no NIC");
  if (zero_pairs > 0) {
    model.add_assumption(std::to_string(zero_pairs) +
                         " GPU pairs have weight 0 (no P2P): treated as PCIe through the host");
  }
  SUMCAST_RETURN_IF_ERROR(model.finish(options.nic_gbps));
  return model;
}

}  // namespace sumcast::topo
