// The host model: one GPU server as a graph of NUMA nodes (CPU + memory), PCIe host bridges and
// switches, GPUs, NICs and NVSwitch planes, joined by typed links with a bandwidth each
// (docs/topology.md §1). Every loader (hwloc live/XML, NCCL XML, `nvidia-smi topo -m`, weight
// matrix) builds one; the router, planner, renderers and executors only read it.
//
// PCIe is a tree: every PCIe node has a `parent` (a switch, a host bridge or its NUMA node); NVLink,
// NVSwitch and SMP links are extra edges. Bandwidths are GB/s (1e9 bytes/s) per direction; links
// are full duplex. What a loader could not read and had to assume is listed in assumptions(),
// one sentence each, and the links it invented carry `assumed`.
//
// Thread safety: build on one thread; a finished model is read-only and may be shared.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::topo {

enum class NodeKind : uint8_t {
  kNuma = 0,        // a NUMA node: its CPU cores and memory (host staging buffers live here)
  kHostBridge = 1,  // a PCIe root complex / root port
  kPciSwitch = 2,   // a PCIe switch (upstream port with its downstream ports) or a bridge
  kGpu = 3,
  kNic = 4,
  kNvSwitch = 5,  // one NVSwitch plane (NVSwitch chips that reach the same GPUs, merged)
  kNetwork = 6,   // the world outside the host, behind the NICs
};
const char* node_kind_name(NodeKind kind);

enum class LinkKind : uint8_t {
  kPcie = 0,
  kNvlink = 1,    // bonded NVLinks between two GPUs or a GPU and a CPU
  kNvswitch = 2,  // NVLinks between a GPU and an NVSwitch plane, or between planes
  kSmp = 3,       // socket / NUMA interconnect (UPI, QPI, Infinity Fabric, X-bus)
  kNetwork = 4,   // NIC port to the network
};
const char* link_kind_name(LinkKind kind);
inline bool is_nvlink_class(LinkKind kind) { return kind == LinkKind::kNvlink || kind == LinkKind::kNvswitch; }

inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// PCIe bandwidth per direction in GB/s after line coding: gen 1..6 x width. 0 when unknown.
double pcie_gbps(int gen, int width);
// The PCIe generation of a transfer rate in GT/s (2.5, 5, 8, 16, 32, 64), 0 when unknown.
int pcie_gen_from_gts(double gts);
// Per-direction bandwidth of one NVLink for a GPU model name ("Tesla P100-SXM2-16GB": 20 GB/s,
// V100/A100/H100: 25 GB/s, B200: 50 GB/s); 25 when the model is unknown or empty.
double nvlink_gbps_per_link(std::string_view gpu_model);

struct Node {
  NodeKind kind = NodeKind::kNuma;
  std::string name;       // "GPU0", "NUMA1", "mlx5_0", "SW 0000:2c:00.0", "NVSwitch A"
  std::string pci_busid;  // "dddd:bb:dd.f" when known
  int parent = -1;        // PCIe parent node (switch, host bridge or NUMA node); -1 for NUMA/network
  int numa = -1;          // the NUMA node (node id) whose PCIe tree this node hangs off
  int index = -1;         // GPU index (0..), NIC index (0..), NUMA os index
  int socket = -1;        // package of a NUMA node, when known
  std::string model;      // GPU or NIC model, when known
  uint16_t pci_vendor = 0;
  uint16_t pci_device = 0;
  int nvswitch_chips = 0;  // kNvSwitch: how many chips were merged into this plane
  double nic_gbps = 0;     // kNic: port speed in GB/s when the source gives it (0: finish()'s default)
};

struct Link {
  int a = -1;  // for PCIe: the upstream (parent) side
  int b = -1;
  LinkKind kind = LinkKind::kPcie;
  double gbps = 0;   // per direction; kUnlimited for links that never limit (inside a root complex)
  int nvlinks = 0;   // NVLink/NVSwitch: bonded links
  int pcie_gen = 0;  // PCIe: 0 when unknown
  int pcie_width = 0;
  bool assumed = false;  // not read from the source: invented by a stated assumption
};

// A link and a direction: forward = from a to b.
struct LinkDir {
  int link = -1;
  bool forward = true;
  bool operator==(const LinkDir&) const = default;
};

class HostModel {
 public:
  // Adds a node and returns its id. GPU and NIC indexes are assigned by finish().
  int add_node(Node node);
  // Adds a link between existing nodes and returns its id; a second link between the same pair
  // of the same kind is merged into the first (bandwidths and NVLink counts add up: parallel
  // NVSwitch chips). Loaders that see each link twice (from both ends) check find_link first.
  int add_link(Link link);
  // Records a sentence about something the loader assumed (shown by sumcast-topo).
  void add_assumption(std::string text) { assumptions_.push_back(std::move(text)); }
  void set_source(std::string source) { source_ = std::move(source); }

  // Completes the model: numbers GPUs/NICs (keeping the loader's order), fills `numa` from the
  // PCIe parents, adds the network node behind the NICs (NIC speed, else nic_gbps_default), drops PCIe switches and
  // bridges that lead to no GPU or NIC, and checks that every GPU can reach every other GPU and a NUMA node.
  Status finish(double nic_gbps_default);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  Node& mutable_node(int id) { return nodes_[static_cast<size_t>(id)]; }
  const Link& link(int id) const { return links_[static_cast<size_t>(id)]; }
  Link& mutable_link(int id) { return links_[static_cast<size_t>(id)]; }
  const std::vector<int>& links_of(int node) const { return adjacency_[static_cast<size_t>(node)]; }
  // The link of `kind` between a and b (either order), or -1.
  int find_link(int a, int b, LinkKind kind) const;
  // Any link between a and b, NVLink-class first, or -1.
  int find_any_link(int a, int b) const;

  // Node ids in index order.
  const std::vector<int>& gpus() const { return gpus_; }
  const std::vector<int>& nics() const { return nics_; }
  std::vector<int> numa_nodes() const;
  int gpu_count() const { return static_cast<int>(gpus_.size()); }
  int network() const { return network_; }  // the network node, -1 when the host has no NIC

  // PCIe ancestors of a node, nearest first (its parent, ..., its NUMA node).
  std::vector<int> pcie_ancestors(int node) const;
  // The switch nearest the root on the node's PCIe path (the one whose uplink leads to a host
  // bridge or NUMA node), or -1 when no switch lies between the node and the root complex.
  int top_switch(int node) const;
  // The PCIe link from a node to its parent, or -1.
  int uplink(int node) const;

  const std::vector<std::string>& assumptions() const { return assumptions_; }
  const std::string& source() const { return source_; }

 private:
  void rebuild_adjacency();
  void prune_dead_branches();

  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> adjacency_;
  std::vector<int> gpus_;
  std::vector<int> nics_;
  int network_ = -1;
  std::vector<std::string> assumptions_;
  std::string source_;
};

// Formats a bandwidth in GB/s ("15.75", "300", "unlimited").
std::string format_gbps(double gbps);
// Formats a byte count with a binary unit ("64 MiB", "1.5 KiB", "17 B").
std::string format_bytes(double bytes);

}  // namespace sumcast::topo
