// hwloc (live machine or XML export) -> HostModel (loaders.h).
//
// hwloc shows every PCIe bridge: a root port under its host bridge, then for each switch an
// upstream port whose children are its downstream ports. The model wants one node per switch:
// root ports merge into their host bridge (two GPUs on different root ports of one host bridge
// are PHB, as nvidia-smi says), downstream ports merge into their switch's upstream port, and
// the roles alternate down the tree (root port -> upstream -> downstream -> upstream ...).
// GPUs, NICs and NVSwitch chips are the PCI devices kept; everything else is left out. NVLink
// comes from the "NVLinkBandwidth" distances (MB/s; GPU OS devices, NVSwitch PCI devices,
// packages for NVLink-to-CPU machines). NVSwitch chips that reach the same GPUs merge into one
// plane; planes the distances do not link to each other get a trunk per UnknownGpuLinks.
#include <hwloc.h>

#if defined(__SANITIZE_ADDRESS__)
#define SUMCAST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SUMCAST_LSAN 1
#endif
#endif
#if defined(SUMCAST_LSAN)
#include <sanitizer/lsan_interface.h>
#endif

#include <cmath>
#include <cstring>
#include <map>

#include "builder_util.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo {
namespace {

using internal::add_pcie_child;

enum class BridgeRole : uint8_t { kHost, kRoot, kUpstream, kDownstream };

std::string busid_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(p.domain), p.bus, p.dev, p.func);
  return buf;
}

bool is_bridge(hwloc_obj_t o) { return o && o->type == HWLOC_OBJ_BRIDGE; }

class HwlocBuilder {
 public:
  HwlocBuilder(hwloc_topology_t topo, const LoadOptions& options, std::string source) : topo_(topo), options_(options) {
    model_.set_source(std::move(source));
  }

  Result<HostModel> build() {
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, n)) != nullptr;) {
      Node numa;
      numa.kind = NodeKind::kNuma;
      numa.index = static_cast<int>(n->os_index);
      numa.name = "NUMA" + std::to_string(n->os_index);
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, n);
      if (pkg) numa.socket = static_cast<int>(pkg->os_index);
      numa_by_os_[n->os_index] = model_.add_node(numa);
    }
    if (numa_by_os_.empty()) return Status::internal("hwloc reported no NUMA node");
    for (hwloc_obj_t d = nullptr; (d = hwloc_get_next_pcidev(topo_, d)) != nullptr;) add_device(d);
    if (pcie_assumed_) {
      model_.add_assumption("PCIe links hwloc gives no speed for: assumed Gen" +
                            std::to_string(options_.assumed_pcie_gen) + " x" +
                            std::to_string(options_.assumed_pcie_width));
    }
    if (!other_displays_.empty()) {
      model_.add_assumption("display controllers not from NVIDIA left out (" + other_displays_ + ")");
    }
    add_nvlink_distances();
    internal::add_smp_mesh(model_, options_);
    if (has_nic_) {
      model_.add_assumption("NIC speed not known to hwloc: assumed " + format_gbps(options_.nic_gbps) + " GB/s");
    }
    internal::resolve_unknown_gpu_links(model_, options_);
    SUMCAST_RETURN_IF_ERROR(model_.finish(options_.nic_gbps));
    return std::move(model_);
  }

 private:
  int numa_for(hwloc_obj_t obj) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo_, obj);
    if (anc && anc->nodeset) {
      int first = hwloc_bitmap_first(anc->nodeset);
      auto it = numa_by_os_.find(static_cast<unsigned>(first));
      if (first >= 0 && it != numa_by_os_.end()) return it->second;
    }
    return numa_by_os_.begin()->second;
  }

  BridgeRole role(hwloc_obj_t b) {
    if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return BridgeRole::kHost;
    if (!is_bridge(b->parent)) return BridgeRole::kRoot;
    switch (role(b->parent)) {
      case BridgeRole::kHost:
        return BridgeRole::kRoot;
      case BridgeRole::kRoot:
      case BridgeRole::kDownstream:
        return BridgeRole::kUpstream;
      case BridgeRole::kUpstream:
        return BridgeRole::kDownstream;
    }
    return BridgeRole::kUpstream;
  }

  // The model node standing for a bridge (created on first use).
  int bridge_node(hwloc_obj_t b) {
    auto it = bridge_nodes_.find(b);
    if (it != bridge_nodes_.end()) return it->second;
    int id = -1;
    BridgeRole r = role(b);
    if (r == BridgeRole::kHost || (r == BridgeRole::kRoot && !is_bridge(b->parent))) {
      Node hb;
      hb.kind = NodeKind::kHostBridge;
      char buf[48];
      std::snprintf(buf, sizeof buf, "HB %04x:[%02x-%02x]",
                    static_cast<unsigned>(b->attr->bridge.downstream.pci.domain),
                    b->attr->bridge.downstream.pci.secondary_bus, b->attr->bridge.downstream.pci.subordinate_bus);
      hb.name = buf;
      hb.parent = numa_for(b);
      id = model_.add_node(hb);
      Link l;
      l.a = hb.parent;
      l.b = id;
      l.gbps = kUnlimited;
      model_.add_link(l);
    } else if (r == BridgeRole::kRoot || r == BridgeRole::kDownstream) {
      id = bridge_node(b->parent);  // merged into its host bridge / its switch
    } else {
      Node sw;
      sw.kind = NodeKind::kPciSwitch;
      sw.pci_busid = busid_of(b->attr->bridge.upstream.pci);
      sw.name = "SW " + sw.pci_busid;
      sw.pci_vendor = b->attr->bridge.upstream.pci.vendor_id;
      sw.pci_device = b->attr->bridge.upstream.pci.device_id;
      id = add_pcie_child(model_, bridge_node(b->parent), sw,
                          static_cast<double>(b->attr->bridge.upstream.pci.linkspeed), 0, 0, options_, &pcie_assumed_);
    }
    bridge_nodes_[b] = id;
    return id;
  }

  int attach_point(hwloc_obj_t parent) {
    if (is_bridge(parent)) return bridge_node(parent);
    if (parent && parent->type == HWLOC_OBJ_PCI_DEVICE) return attach_point(parent->parent);
    return numa_for(parent);
  }

  void add_device(hwloc_obj_t d) {
    const auto& p = d->attr->pcidev;
    unsigned cls = p.class_id;
    bool nvswitch =
        (d->subtype && std::strcmp(d->subtype, "NVSwitch") == 0) || (p.vendor_id == 0x10de && cls == 0x0680);
    if (nvswitch) {
      chips_[d] = static_cast<int>(chips_.size());
      return;
    }
    Node n;
    n.pci_busid = busid_of(p);
    n.pci_vendor = p.vendor_id;
    n.pci_device = p.device_id;
    // GPUs: NVIDIA display/3D controllers (the executors are CUDA's). Others (a BMC's VGA, another
    // vendor's card) are left out, and said so.
    if ((cls >> 8) == 0x03 && p.vendor_id != 0x10de) {
      other_displays_ += (other_displays_.empty() ? "" : ", ") + busid_of(p);
      return;
    }
    if ((cls >> 8) == 0x03) {
      n.kind = NodeKind::kGpu;
      int cuda = -1, nvml = -1;
      for (hwloc_obj_t o = d->io_first_child; o; o = o->next_sibling) {
        if (o->type != HWLOC_OBJ_OS_DEVICE || !o->name) continue;
        int v = -1;
        if (std::sscanf(o->name, "cuda%d", &v) == 1) cuda = v;
        if (std::sscanf(o->name, "nvml%d", &v) == 1) nvml = v;
        const char* m = hwloc_obj_get_info_by_name(o, "GPUModel");
        if (m && n.model.empty()) n.model = m;
      }
      n.index = cuda >= 0 ? cuda : nvml;
    } else if ((cls >> 8) == 0x02) {
      n.kind = NodeKind::kNic;
      has_nic_ = true;
      for (hwloc_obj_t o = d->io_first_child; o; o = o->next_sibling) {
        if (o->type != HWLOC_OBJ_OS_DEVICE || !o->name) continue;
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS || n.name.empty()) n.name = o->name;
      }
      if (n.name.empty()) n.name = "NIC " + n.pci_busid;
    } else {
      return;
    }
    int id = add_pcie_child(model_, attach_point(d->parent), n, static_cast<double>(p.linkspeed), 0, 0, options_,
                            &pcie_assumed_);
    if (n.kind == NodeKind::kGpu) gpu_nodes_[d] = id;
  }

  // The model node of an object in the NVLink distances, or -1.
  int distance_node(hwloc_obj_t o, int* chip) {
    *chip = -1;
    if (o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
    if (o->type == HWLOC_OBJ_PCI_DEVICE) {
      auto g = gpu_nodes_.find(o);
      if (g != gpu_nodes_.end()) return g->second;
      auto c = chips_.find(o);
      if (c != chips_.end()) *chip = c->second;
      return -1;
    }
    if (o->type == HWLOC_OBJ_PACKAGE || o->type == HWLOC_OBJ_NUMANODE) {
      int first = o->nodeset ? hwloc_bitmap_first(o->nodeset) : -1;
      auto it = numa_by_os_.find(static_cast<unsigned>(first));
      return first >= 0 && it != numa_by_os_.end() ? it->second : -1;
    }
    return -1;
  }

  void add_nvlink_distances() {
    unsigned nr = 1;
    hwloc_distances_s* dist = nullptr;
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, &dist, 0) != 0 || nr == 0 || !dist) return;
    unsigned n = dist->nbobjs;
    std::vector<int> node(n), chip(n);
    for (unsigned i = 0; i < n; ++i) node[i] = distance_node(dist->objs[i], &chip[i]);
    // chip -> (GPU node -> GB/s); chip pairs -> GB/s
    std::map<int, std::map<int, double>> chip_gpus;
    std::map<std::pair<int, int>, double> chip_trunks;
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned j = i + 1; j < n; ++j) {
        double gbps = static_cast<double>(std::max(dist->values[i * n + j], dist->values[j * n + i])) / 1000.0;
        if (gbps <= 0) continue;
        if (node[i] >= 0 && node[j] >= 0) {
          const Node& a = model_.node(node[i]);
          const Node& b = model_.node(node[j]);
          const std::string& gpu_model = a.kind == NodeKind::kGpu ? a.model : b.model;
          Link l;
          l.a = node[i];
          l.b = node[j];
          l.kind = LinkKind::kNvlink;
          l.gbps = gbps;
          l.nvlinks = static_cast<int>(std::lround(gbps / internal::nvlink_link_gbps(options_, gpu_model)));
          model_.add_link(l);
        } else if (chip[i] >= 0 && chip[j] >= 0) {
          chip_trunks[{chip[i], chip[j]}] += gbps;
        } else if (chip[i] >= 0 && node[j] >= 0) {
          chip_gpus[chip[i]][node[j]] += gbps;
        } else if (chip[j] >= 0 && node[i] >= 0) {
          chip_gpus[chip[j]][node[i]] += gbps;
        }
      }
    }
    hwloc_distances_release(topo_, dist);
    merge_planes(chip_gpus, chip_trunks);
  }

  void merge_planes(const std::map<int, std::map<int, double>>& chip_gpus,
                    const std::map<std::pair<int, int>, double>& chip_trunks) {
    std::map<std::map<int, double>, int> plane_of_set;
    std::map<int, int> plane_of_chip;
    for (const auto& [c, gpus] : chip_gpus) {
      auto it = plane_of_set.find(gpus);
      if (it == plane_of_set.end()) {
        Node sw;
        sw.kind = NodeKind::kNvSwitch;
        sw.name = "NVSwitch " + std::string(1, static_cast<char>('A' + plane_of_set.size() % 26));
        it = plane_of_set.emplace(gpus, model_.add_node(sw)).first;
      }
      int plane = it->second;
      plane_of_chip[c] = plane;
      ++model_.mutable_node(plane).nvswitch_chips;
      for (const auto& [g, gbps] : gpus) {
        Link l;
        l.a = g;
        l.b = plane;
        l.kind = LinkKind::kNvswitch;
        l.gbps = gbps;
        l.nvlinks = static_cast<int>(std::lround(gbps / internal::nvlink_link_gbps(options_, model_.node(g).model)));
        model_.add_link(l);
      }
    }
    for (const auto& [pair, gbps] : chip_trunks) {
      auto a = plane_of_chip.find(pair.first), b = plane_of_chip.find(pair.second);
      if (a == plane_of_chip.end() || b == plane_of_chip.end() || a->second == b->second) continue;
      Link l;
      l.a = a->second;
      l.b = b->second;
      l.kind = LinkKind::kNvswitch;
      l.gbps = gbps;
      model_.add_link(l);
    }
    std::vector<int> planes;
    for (const auto& [set, plane] : plane_of_set) planes.push_back(plane);
    for (int plane : planes) {
      const Node& n = model_.node(plane);
      if (n.nvswitch_chips > 1) model_.mutable_node(plane).name += " (" + std::to_string(n.nvswitch_chips) + " chips)";
    }
    if (planes.size() < 2) return;
    bool any_trunk = false;
    for (int p : planes) {
      for (int q : planes) any_trunk = any_trunk || (p != q && model_.find_link(p, q, LinkKind::kNvswitch) >= 0);
    }
    if (any_trunk) return;
    std::string text =
        std::to_string(planes.size()) + " NVSwitch planes and no NVLink between them in the NVLinkBandwidth distances";
    if (options_.unknown_gpu_links == UnknownGpuLinks::kPcieOnly) {
      model_.add_assumption(text + ": GPUs on different planes talk over PCIe/SMP (as asked)");
      return;
    }
    auto plane_gbps = [&](int plane) {
      double sum = 0;
      for (int id : model_.links_of(plane))
        sum += model_.link(id).kind == LinkKind::kNvswitch ? model_.link(id).gbps : 0;
      return sum;
    };
    double trunk = 0;
    for (size_t i = 0; i < planes.size(); ++i) {
      for (size_t j = i + 1; j < planes.size(); ++j) {
        Link l;
        l.a = planes[i];
        l.b = planes[j];
        l.kind = LinkKind::kNvswitch;
        l.gbps = std::min(plane_gbps(planes[i]), plane_gbps(planes[j]));
        l.assumed = true;
        trunk = l.gbps;
        model_.add_link(l);
      }
    }
    model_.add_assumption(text + ": assumed non-blocking trunks between the planes (" + format_gbps(trunk) +
                          " GB/s per direction), as on DGX-2/HGX-2 baseboards; --assume-pcie-only says otherwise");
  }

  hwloc_topology_t topo_;
  const LoadOptions& options_;
  HostModel model_;
  std::map<unsigned, int> numa_by_os_;
  std::map<hwloc_obj_t, int> bridge_nodes_;
  std::map<hwloc_obj_t, int> gpu_nodes_;
  std::map<hwloc_obj_t, int> chips_;
  bool pcie_assumed_ = false;
  bool has_nic_ = false;
  std::string other_displays_;
};

// hwloc's PCI plugin (libpciaccess) keeps global state it never frees; under LeakSanitizer
// (the asan preset) that would be blamed on the test calling load_live(). Allocations made while
// this is alive are not reported.
struct IgnoreThirdPartyLeaks {
#if defined(SUMCAST_LSAN)
  IgnoreThirdPartyLeaks() { __lsan_disable(); }
  ~IgnoreThirdPartyLeaks() { __lsan_enable(); }
#endif
};

Result<HostModel> load_hwloc(const std::string* xml_path, const LoadOptions& options) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return Status::from_errno("hwloc_topology_init");
  struct Guard {
    hwloc_topology_t t;
    ~Guard() { hwloc_topology_destroy(t); }
  } guard{topo};
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  std::string source = "live machine (hwloc)";
  if (xml_path) {
    if (hwloc_topology_set_xml(topo, xml_path->c_str()) != 0)
      return Status::from_errno("hwloc cannot read " + *xml_path);
    source = "hwloc XML " + *xml_path;
  }
  int loaded;
  {
    [[maybe_unused]] IgnoreThirdPartyLeaks ignore;
    loaded = hwloc_topology_load(topo);
  }
  if (loaded != 0) {
    return Status::from_errno("hwloc_topology_load" + (xml_path ? " of " + *xml_path : std::string()));
  }
  return HwlocBuilder(topo, options, source).build();
}

}  // namespace

Result<HostModel> load_live(const LoadOptions& options) { return load_hwloc(nullptr, options); }

Result<HostModel> load_hwloc_xml_file(const std::string& path, const LoadOptions& options) {
  return load_hwloc(&path, options);
}

}  // namespace sumcast::topo
