// Builders of a HostModel (docs/topology.md §1): the live machine through hwloc, an hwloc XML
// export, an NCCL topology XML, an `nvidia-smi topo -m` matrix and a plain GPU link-weight matrix.
//
// Every builder reads what its source says and states everything else it needs as an assumption
// (HostModel::assumptions(), links flagged `assumed`): PCIe generations a source omits, the SMP
// bandwidth, NIC speeds, and above all GPU-GPU links a source does not list (NCCL files of
// NVSwitch machines usually list no NVLink; NCCL discovers them at run time). UnknownGpuLinks
// decides what to assume for those.
#pragma once

#include <string>
#include <string_view>

#include "sumcast/status.h"
#include "sumcast/topo/host_model.h"

namespace sumcast::topo {

enum class UnknownGpuLinks : uint8_t {
  // NVSwitch when the source names an NVSwitch-only GPU part (A100/H100/H200 SXM, V100-SXM3) or
  // shows NVSwitch planes without the trunk between them; PCIe only otherwise. Always stated.
  kAuto = 0,
  kPcieOnly = 1,  // never invent NVLink: GPUs the source links to nothing talk over PCIe/SMP
  kNvSwitch = 2,  // all GPUs sit on one non-blocking NVSwitch fabric (nvswitch_gbps_per_gpu each)
};

struct LoadOptions {
  UnknownGpuLinks unknown_gpu_links = UnknownGpuLinks::kAuto;
  // Per-GPU bandwidth into an assumed NVSwitch fabric, GB/s per direction. 0 (default): from the
  // GPU part (A100 300, H100/H200 450, V100-SXM3 150), else 300.
  double nvswitch_gbps_per_gpu = 0;
  // Per-direction bandwidth of one NVLink when the source gives link counts only. 0 (default):
  // from the GPU model (nvlink_gbps_per_link), 25 when unknown.
  double nvlink_gbps_per_link = 0;
  // PCIe links whose generation/width the source does not give. Default Gen3 x16 (15.75 GB/s).
  int assumed_pcie_gen = 3;
  int assumed_pcie_width = 16;
  // Socket/NUMA interconnect per direction when the source does not say. Default 20 GB/s.
  double smp_gbps = 20;
  // NIC port speed when the source does not say, GB/s. Default 12.5 (100 Gb/s).
  double nic_gbps = 12.5;
  // NCCL XML entries without a class (bus ids only): the first `assume_gpus` are taken as GPUs,
  // in document order; the rest stay unknown and are dropped. Default 0: none.
  int assume_gpus = 0;
};

// The live machine (hwloc with PCI and OS devices, NVLink distances when NVML is present).
Result<HostModel> load_live(const LoadOptions& options);
// An hwloc XML export (hwloc_topology_set_xml): same reading as the live machine.
Result<HostModel> load_hwloc_xml_file(const std::string& path, const LoadOptions& options);
// An NCCL topology XML (<system><cpu><pci><gpu><nvlink/></gpu></pci><nic><net/></nic></cpu>).
Result<HostModel> load_nccl_xml(std::string_view text, std::string_view what, const LoadOptions& options);
// `nvidia-smi topo -m` output: GPU and NIC rows, X/NV#/PIX/PXB/PHB/NODE/SYS, CPU and NUMA affinity.
Result<HostModel> load_smi_matrix(std::string_view text, std::string_view what, const LoadOptions& options);
// A square GPU link-weight matrix (MXNet's kvstore format: 0 self, 1 PCIe only, k >= 2: k-1
// bonded NVLinks); '#' starts a comment.
Result<HostModel> load_weight_matrix(std::string_view text, std::string_view what, const LoadOptions& options);

enum class SourceFormat : uint8_t { kDetect = 0, kHwlocXml, kNcclXml, kSmiMatrix, kWeightMatrix };
// Loads a file in `format`; kDetect looks at the content (<topology → hwloc, <system → NCCL,
// a "GPU0" header → nvidia-smi, digits only → weight matrix).
Result<HostModel> load_file(const std::string& path, SourceFormat format, const LoadOptions& options);

}  // namespace sumcast::topo
