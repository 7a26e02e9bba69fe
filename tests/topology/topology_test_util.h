// Test helpers for tests/topology: the real machine descriptions in tests/data/topologies/ (see
// its SOURCES.md) and a loader that fails the test with the loader's message.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sumcast/topo/host_model.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo::testing {

inline std::string data_path(const std::string& rel) {
  return std::string(SUMCAST_SOURCE_DIR) + "/tests/data/topologies/" + rel;
}

inline constexpr const char* kDgx2 = "hwloc-xml/hwloc-tests-nvidiaDGX2.xml";
inline constexpr const char* kMinsky = "hwloc-xml/hwloc-tests-power8gpudistances.xml";
inline constexpr const char* kWholeIo = "hwloc-xml/hwloc-tests-32em64t-2n8c2t-pci-wholeio.xml";
inline constexpr const char* kG5 = "nccl-xml/aws-g5.48xlarge-topo.xml";
inline constexpr const char* kP4d = "nccl-xml/aws-p4d.24xlarge-topo.xml";
inline constexpr const char* kNcv4 = "nccl-xml/azure-ncv4-topo.xml";
inline constexpr const char* kNdv2 = "nccl-xml/azure-ndv2-topo.xml";
inline constexpr const char* kNdv4 = "nccl-xml/azure-ndv4-topo.xml";
inline constexpr const char* kNdv5 = "nccl-xml/azure-ndv5-topo.xml";
inline constexpr const char* kDgx1 = "nvidia-smi-topo/dgx1-class-v100-sxm2-8gpu-1nic_oneflow-dlperf.txt";
inline constexpr const char* kRtx4090 = "nvidia-smi-topo/pcie-only-8x4090-no-switch-2nic_go-gpuallocator-issue-17.txt";
inline constexpr const char* kP3 = "matrices/mxnet-p3.16xlarge-p2p-perfrank-matrix.txt";

// Loads a file of tests/data/topologies with the given options; ADD_FAILURE and an empty
// optional-like result on error (check HasFailure()).
inline Result<HostModel> load(const std::string& rel, const LoadOptions& options = {}) {
  Result<HostModel> m = load_file(data_path(rel), SourceFormat::kDetect, options);
  if (!m.ok()) ADD_FAILURE() << rel << ": " << m.status().to_string();
  return m;
}

struct Machine {
  std::string label;
  std::string file;
  LoadOptions options;
};

// Every real machine, with the options that make each loadable (g5: its 8 unclassified root
// ports taken as GPUs), plus the NVSwitch/PCIe-only readings where the assumption matters.
inline std::vector<Machine> real_machines() {
  LoadOptions g5;
  g5.assume_gpus = 8;
  LoadOptions pcie_only;
  pcie_only.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  LoadOptions nvswitch;
  nvswitch.unknown_gpu_links = UnknownGpuLinks::kNvSwitch;
  return {
      {"dgx2", kDgx2, {}},
      {"dgx2_pcie_only", kDgx2, pcie_only},
      {"minsky", kMinsky, {}},
      {"wholeio", kWholeIo, {}},
      {"g5", kG5, g5},
      {"p4d", kP4d, {}},
      {"p4d_pcie_only", kP4d, pcie_only},
      {"ncv4", kNcv4, {}},
      {"ndv2", kNdv2, {}},
      {"ndv4", kNdv4, {}},
      {"ndv4_nvswitch", kNdv4, nvswitch},
      {"ndv5", kNdv5, {}},
      {"dgx1", kDgx1, {}},
      {"rtx4090", kRtx4090, {}},
      {"p3", kP3, {}},
  };
}

}  // namespace sumcast::topo::testing

namespace sumcast::topo::testing {

// Builds small hosts by hand for tests: NUMA nodes, switches, GPUs, NICs and links.
class SyntheticHost {
 public:
  int numa(int index) {
    Node n;
    n.kind = NodeKind::kNuma;
    n.index = index;
    n.name = "NUMA" + std::to_string(index);
    return model_.add_node(n);
  }
  int bridge(int parent, double gbps, const std::string& name) {
    return child(NodeKind::kHostBridge, parent, gbps, name);
  }
  int pci_switch(int parent, double gbps, const std::string& name) {
    return child(NodeKind::kPciSwitch, parent, gbps, name);
  }
  int gpu(int parent, double gbps, int index) { return child(NodeKind::kGpu, parent, gbps, "", index); }
  int nic(int parent, double gbps, double port_gbps) {
    int id = child(NodeKind::kNic, parent, gbps, "");
    model_.mutable_node(id).nic_gbps = port_gbps;
    return id;
  }
  int nvswitch(const std::string& name) {
    Node n;
    n.kind = NodeKind::kNvSwitch;
    n.name = name;
    return model_.add_node(n);
  }
  void link(int a, int b, LinkKind kind, double gbps, int nvlinks = 0) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = kind;
    l.gbps = gbps;
    l.nvlinks = nvlinks;
    model_.add_link(l);
  }
  HostModel finish() {
    model_.set_source("synthetic");
    Status st = model_.finish(12.5);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return std::move(model_);
  }

 private:
  int child(NodeKind kind, int parent, double gbps, const std::string& name, int index = -1) {
    Node n;
    n.kind = kind;
    n.name = name;
    n.parent = parent;
    n.index = index;
    int id = model_.add_node(n);
    link(parent, id, LinkKind::kPcie, gbps);
    return id;
  }
  HostModel model_;
};

}  // namespace sumcast::topo::testing
