// Shared loader pieces (builder_util.h).
#include "builder_util.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

namespace sumcast::topo::internal {

int add_pcie_child(HostModel& model, int parent, Node child, double gbps, int gen, int width,
                   const LoadOptions& options, bool* assumed_out) {
  child.parent = parent;
  int id = model.add_node(std::move(child));
  Link l;
  l.a = parent;
  l.b = id;
  l.kind = LinkKind::kPcie;
  l.pcie_gen = gen;
  l.pcie_width = width;
  if (gbps > 0) {
    l.gbps = gbps;
  } else if (pcie_gbps(gen, width) > 0) {
    l.gbps = pcie_gbps(gen, width);
  } else {
    l.pcie_gen = options.assumed_pcie_gen;
    l.pcie_width = options.assumed_pcie_width;
    l.gbps = pcie_gbps(options.assumed_pcie_gen, options.assumed_pcie_width);
    l.assumed = true;
    if (assumed_out) *assumed_out = true;
  }
  model.add_link(l);
  return id;
}

void add_smp_mesh(HostModel& model, const LoadOptions& options) {
  std::vector<int> numa = model.numa_nodes();
  bool added = false;
  for (size_t i = 0; i < numa.size(); ++i) {
    for (size_t j = i + 1; j < numa.size(); ++j) {
      if (model.find_link(numa[i], numa[j], LinkKind::kSmp) >= 0) continue;
      Link l;
      l.a = numa[i];
      l.b = numa[j];
      l.kind = LinkKind::kSmp;
      l.gbps = options.smp_gbps;
      l.assumed = true;
      model.add_link(l);
      added = true;
    }
  }
  if (added) {
    model.add_assumption("SMP interconnect between NUMA nodes: not in the source; assumed " +
                         format_gbps(options.smp_gbps) + " GB/s per direction between every pair");
  }
}

double nvswitch_part_gbps(uint16_t pci_device, std::string_view model) {
  switch (pci_device) {
    case 0x1db8:  // V100-SXM3-32GB(-H): DGX-2 / HGX-2 only
      return 150;
    case 0x20b0:  // A100-SXM4-40GB
    case 0x20b2:  // A100-SXM4-80GB
    case 0x20b3:  // A100-SXM-64GB
      return 300;
    case 0x2330:  // H100-SXM5-80GB
    case 0x2335:  // H200-SXM-141GB
      return 450;
    default:
      break;
  }
  if (model.find("SXM3") != std::string_view::npos) return 150;
  if (model.find("A100-SXM") != std::string_view::npos) return 300;
  if (model.find("H100 80GB HBM3") != std::string_view::npos || model.find("H100-SXM") != std::string_view::npos ||
      model.find("H200") != std::string_view::npos) {
    return 450;
  }
  return 0;
}

double nvlink_link_gbps(const LoadOptions& options, std::string_view gpu_model) {
  return options.nvlink_gbps_per_link > 0 ? options.nvlink_gbps_per_link : nvlink_gbps_per_link(gpu_model);
}

namespace {

std::string gpu_list(const HostModel& model, const std::vector<int>& gpus) {
  std::string out;
  for (int g : gpus) out += (out.empty() ? "" : ", ") + model.node(g).name;
  return out;
}

}  // namespace

void resolve_unknown_gpu_links(HostModel& model, const LoadOptions& options) {
  std::vector<int> gpus;
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    if (model.nodes()[i].kind == NodeKind::kGpu) gpus.push_back(static_cast<int>(i));
  }
  std::vector<int> unlinked;
  for (int g : gpus) {
    bool linked = false;
    for (int id : model.links_of(g)) {
      const Link& l = model.link(id);
      int other = l.a == g ? l.b : l.a;
      NodeKind k = model.node(other).kind;
      if (is_nvlink_class(l.kind) && (k == NodeKind::kGpu || k == NodeKind::kNvSwitch)) linked = true;
    }
    if (!linked) unlinked.push_back(g);
  }
  if (gpus.size() < 2 || unlinked.empty()) return;
  const std::string who =
      unlinked.size() == gpus.size() ? "no GPU-GPU link" : "no NVLink for " + gpu_list(model, unlinked);
  if (unlinked.size() != gpus.size()) {
    model.add_assumption("the source lists " + who + ": those GPUs reach the others over PCIe/SMP only");
    return;
  }
  double part_gbps = 0;
  bool all_nvswitch_parts = true;
  for (int g : gpus) {
    double p = nvswitch_part_gbps(model.node(g).pci_device, model.node(g).model);
    if (p == 0) all_nvswitch_parts = false;
    part_gbps = std::max(part_gbps, p);
  }
  bool fabric = false;
  std::string why;
  switch (options.unknown_gpu_links) {
    case UnknownGpuLinks::kNvSwitch:
      fabric = true;
      why = "as asked (--assume-nvswitch)";
      break;
    case UnknownGpuLinks::kAuto:
      fabric = all_nvswitch_parts && gpus.size() >= 8;
      why = "because every GPU is an NVSwitch-baseboard part (PCI device/model) and there are " +
            std::to_string(gpus.size());
      break;
    case UnknownGpuLinks::kPcieOnly:
      break;
  }
  if (!fabric) {
    model.add_assumption(
        "the source lists " + who + " (GPU-GPU links unknown): assumed PCIe/SMP only" +
        std::string(options.unknown_gpu_links == UnknownGpuLinks::kPcieOnly
                        ? " as asked"
                        : (all_nvswitch_parts ? " (fewer than 8 GPUs)" : " (GPU part not known to be NVSwitch-only)")) +
        "; --assume-nvswitch says otherwise");
    return;
  }
  double per_gpu =
      options.nvswitch_gbps_per_gpu > 0 ? options.nvswitch_gbps_per_gpu : (part_gbps > 0 ? part_gbps : 300);
  Node sw;
  sw.kind = NodeKind::kNvSwitch;
  sw.name = "NVSwitch (assumed)";
  int plane = model.add_node(sw);
  for (int g : gpus) {
    Link l;
    l.a = g;
    l.b = plane;
    l.kind = LinkKind::kNvswitch;
    l.gbps = per_gpu;
    l.nvlinks = static_cast<int>(std::lround(per_gpu / nvlink_link_gbps(options, model.node(g).model)));
    l.assumed = true;
    model.add_link(l);
  }
  model.add_assumption("the source lists " + who +
                       " (GPU-GPU links unknown): assumed one non-blocking NVSwitch fabric, " + format_gbps(per_gpu) +
                       " GB/s per GPU and direction, " + why);
}

Status read_text_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::from_errno("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::from_errno("cannot read " + path);
  out = ss.str();
  return Status();
}

std::string normalize_busid(std::string_view busid) {
  std::string out;
  for (char c : busid) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // "bb:dd.f" without a domain gets domain 0000.
  if (std::count(out.begin(), out.end(), ':') == 1) out = "0000:" + out;
  return out;
}

}  // namespace sumcast::topo::internal
