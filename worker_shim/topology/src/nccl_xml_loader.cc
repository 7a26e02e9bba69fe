// NCCL topology XML -> HostModel (loaders.h). The format: <system> holds <cpu numaid=...> elements;
// a <cpu> holds nested <pci busid class link_speed link_width vendor device> elements (class
// 0x0604xx: a PCIe switch, ffff:... bus ids are virtual ones; 0x03xxxx: a GPU; 0x02xxxx: a NIC)
// and <nic><net .../></nic> for NICs without a PCI path. A GPU's <pci> may hold <gpu> with
// <nvlink target count tclass> children (tclass 0x068000: an NVSwitch). Most vendor files list
// no NVLink at all: resolve_unknown_gpu_links() states what is assumed instead.
#include <cstdlib>
#include <map>
#include <set>

#include "builder_util.h"
#include "sumcast/topo/loaders.h"
#include "sumcast/topo/xml_reader.h"

namespace sumcast::topo {
namespace {

using internal::add_pcie_child;

struct PendingNvlink {
  int gpu = -1;
  std::string target;
  int count = 0;
  std::string tclass;
  int line = 0;
};

uint32_t parse_hex(const std::string& s) { return static_cast<uint32_t>(std::strtoul(s.c_str(), nullptr, 16)); }

class NcclBuilder {
 public:
  NcclBuilder(std::string_view what, const LoadOptions& options) : what_(what), options_(options) {}

  Result<HostModel> build(const XmlElement& root) {
    if (root.name != "system")
      return Status::invalid_argument(std::string(what_) + ": root element is <" + root.name + ">, not <system>");
    model_.set_source("NCCL topology XML " + std::string(what_));
    int order = 0;
    for (const XmlElement& cpu : root.children) {
      if (cpu.name != "cpu") continue;
      Node numa;
      numa.kind = NodeKind::kNuma;
      const std::string* id = cpu.attribute("numaid");
      numa.index = id ? std::atoi(id->c_str()) : order;
      numa.name = "NUMA" + std::to_string(numa.index);
      ++order;
      int numa_id = model_.add_node(numa);
      for (const XmlElement& child : cpu.children) {
        if (child.name == "pci") {
          SUMCAST_RETURN_IF_ERROR(pci(child, numa_id));
        } else if (child.name == "nic") {
          nic_without_pci(child, numa_id);
        }
      }
    }
    if (order == 0) return Status::invalid_argument(std::string(what_) + ": no <cpu> element");
    if (pcie_assumed_) {
      model_.add_assumption("PCIe links without link_speed/link_width: assumed Gen" +
                            std::to_string(options_.assumed_pcie_gen) + " x" +
                            std::to_string(options_.assumed_pcie_width));
    }
    SUMCAST_RETURN_IF_ERROR(resolve_nvlinks());
    if (!unclassified_.empty()) {
      std::string list;
      for (const std::string& b : unclassified_) list += (list.empty() ? "" : " ") + b;
      model_.add_assumption(std::to_string(unclassified_.size()) + " PCI entries without a class (bus ids only: " +
                            list + "): not identified, left out; --assume-gpus N takes the first N as GPUs");
    }
    if (assumed_gpus_ > 0) {
      model_.add_assumption("the first " + std::to_string(assumed_gpus_) +
                            " PCI entries without a class taken as GPUs (as asked), in document order");
    }
    if (nic_speed_assumed_) {
      model_.add_assumption("NIC speed not in the source: assumed " + format_gbps(options_.nic_gbps) + " GB/s");
    }
    bool any_gpu = false;
    for (const Node& n : model_.nodes()) any_gpu = any_gpu || n.kind == NodeKind::kGpu;
    if (!any_gpu) {
      std::string msg = std::string(what_) + ": no GPU in the file";
      if (!unclassified_.empty()) {
        msg += " (" + std::to_string(unclassified_.size()) +
               " PCI entries have no class; --assume-gpus N takes the first N as GPUs)";
      }
      return Status::not_found(msg);
    }
    internal::add_smp_mesh(model_, options_);
    internal::resolve_unknown_gpu_links(model_, options_);
    SUMCAST_RETURN_IF_ERROR(model_.finish(options_.nic_gbps));
    return std::move(model_);
  }

 private:
  Status pci(const XmlElement& el, int parent) {
    std::string busid = internal::normalize_busid(el.attribute_or("busid", ""));
    std::string cls = el.attribute_or("class", "");
    uint32_t class_id = cls.empty() ? 0 : parse_hex(cls) >> 8;  // 0xCCSSPP -> 0xCCSS
    Node n;
    n.pci_busid = busid;
    n.pci_vendor = static_cast<uint16_t>(parse_hex(el.attribute_or("vendor", "0")));
    n.pci_device = static_cast<uint16_t>(parse_hex(el.attribute_or("device", "0")));
    double gts = std::atof(el.attribute_or("link_speed", "").c_str());
    int gen = pcie_gen_from_gts(gts);
    int width = std::atoi(el.attribute_or("link_width", "0").c_str());
    if (cls.empty() && assumed_gpus_ < options_.assume_gpus) {
      class_id = 0x0302;
      ++assumed_gpus_;
    } else if (cls.empty()) {
      unclassified_.push_back(busid);
      return Status();
    }
    if (class_id == 0x0604) {
      n.kind = NodeKind::kPciSwitch;
      n.name = "SW " + busid;
    } else if ((class_id >> 8) == 0x03) {
      n.kind = NodeKind::kGpu;
    } else if ((class_id >> 8) == 0x02) {
      n.kind = NodeKind::kNic;
      double speed = 0;
      for (const XmlElement& c : el.children) {
        if (c.name != "nic") continue;
        for (const XmlElement& net : c.children) {
          if (net.name != "net") continue;
          if (n.name.empty()) n.name = net.attribute_or("name", "");
          speed += std::atof(net.attribute_or("speed", "0").c_str()) / 8000.0;  // Mb/s -> GB/s
        }
      }
      n.nic_gbps = speed;
      if (speed == 0) nic_speed_assumed_ = true;
    } else {
      return Status();  // storage, USB, ...: not part of the reduction picture
    }
    if (n.kind == NodeKind::kGpu && !el.children.empty()) {
      for (const XmlElement& c : el.children) {
        if (c.name == "gpu") {
          const std::string* dev = c.attribute("dev");
          if (dev) n.index = std::atoi(dev->c_str());
        }
      }
    }
    int id = add_pcie_child(model_, parent, n, 0, gen, width, options_, &pcie_assumed_);
    if (!busid.empty()) by_busid_[busid] = id;
    for (const XmlElement& c : el.children) {
      if (c.name == "pci") {
        if (model_.node(id).kind != NodeKind::kPciSwitch) {
          return Status::invalid_argument(std::string(what_) + ":" + std::to_string(c.line) +
                                          ": <pci> nested in a device that is not a bridge");
        }
        SUMCAST_RETURN_IF_ERROR(pci(c, id));
      } else if (c.name == "gpu" && model_.node(id).kind == NodeKind::kGpu) {
        for (const XmlElement& nv : c.children) {
          if (nv.name != "nvlink") continue;
          pending_.push_back({id, internal::normalize_busid(nv.attribute_or("target", "")),
                              std::atoi(nv.attribute_or("count", "1").c_str()), nv.attribute_or("tclass", ""),
                              nv.line});
        }
      }
    }
    return Status();
  }

  void nic_without_pci(const XmlElement& el, int numa_id) {
    for (const XmlElement& net : el.children) {
      if (net.name != "net") continue;
      Node n;
      n.kind = NodeKind::kNic;
      n.name = net.attribute_or("name", "");
      n.nic_gbps = std::atof(net.attribute_or("speed", "0").c_str()) / 8000.0;
      if (n.nic_gbps == 0) nic_speed_assumed_ = true;
      bool assumed = false;
      add_pcie_child(model_, numa_id, n, 0, 0, 0, options_, &assumed);
      model_.add_assumption("NIC " + (n.name.empty() ? std::string("?") : n.name) +
                            " has no PCI path in the source: assumed directly on its NUMA node's root complex, Gen" +
                            std::to_string(options_.assumed_pcie_gen) + " x" +
                            std::to_string(options_.assumed_pcie_width));
    }
  }

  Status resolve_nvlinks() {
    std::map<std::string, int> planes;  // NVSwitch target bus id -> plane node
    for (const PendingNvlink& p : pending_) {
      const Node& gpu = model_.node(p.gpu);
      double per_link = internal::nvlink_link_gbps(options_, gpu.model);
      uint32_t tclass = p.tclass.empty() ? 0x030200 : parse_hex(p.tclass);
      if (p.target == gpu.pci_busid) {
        model_.add_assumption(std::string(what_) + ":" + std::to_string(p.line) + ": an <nvlink> of GPU " +
                              gpu.pci_busid + " points at the GPU itself (count " + std::to_string(p.count) +
                              "): ignored");
        continue;
      }
      Link l;
      l.a = p.gpu;
      l.nvlinks = p.count;
      l.gbps = p.count * per_link;
      if ((tclass >> 8) == 0x0680) {
        auto it = planes.find(p.target);
        if (it == planes.end()) {
          Node sw;
          sw.kind = NodeKind::kNvSwitch;
          sw.name = "NVSwitch";
          sw.nvswitch_chips = 1;
          it = planes.emplace(p.target, model_.add_node(sw)).first;
        }
        l.b = it->second;
        l.kind = LinkKind::kNvswitch;
        model_.add_link(l);
        continue;
      }
      auto t = by_busid_.find(p.target);
      if (t == by_busid_.end()) {
        model_.add_assumption(std::string(what_) + ":" + std::to_string(p.line) + ": NVLink target " + p.target +
                              " is not in the file: ignored");
        continue;
      }
      l.b = t->second;
      l.kind = LinkKind::kNvlink;
      // Each GPU lists its side of a GPU-GPU link: keep one link, with the larger count.
      int existing = model_.find_link(l.a, l.b, LinkKind::kNvlink);
      if (existing >= 0) {
        Link& e = model_.mutable_link(existing);
        e.nvlinks = std::max(e.nvlinks, l.nvlinks);
        e.gbps = std::max(e.gbps, l.gbps);
      } else {
        model_.add_link(l);
      }
    }
    return Status();
  }

  std::string_view what_;
  const LoadOptions& options_;
  HostModel model_;
  std::map<std::string, int> by_busid_;
  std::vector<PendingNvlink> pending_;
  std::vector<std::string> unclassified_;
  int assumed_gpus_ = 0;
  bool pcie_assumed_ = false;
  bool nic_speed_assumed_ = false;
};

}  // namespace

Result<HostModel> load_nccl_xml(std::string_view text, std::string_view what, const LoadOptions& options) {
  Result<XmlElement> root = parse_xml(text, what);
  if (!root.ok()) return root.status();
  return NcclBuilder(what, options).build(*root);
}

}  // namespace sumcast::topo
