// Pieces every loader shares: PCIe children with stated assumptions, the SMP mesh between NUMA
// nodes, the unknown-GPU-link policy (UnknownGpuLinks) and file reading.
#pragma once

#include <string>
#include <string_view>

#include "sumcast/status.h"
#include "sumcast/topo/host_model.h"
#include "sumcast/topo/loaders.h"

namespace sumcast::topo::internal {

// Adds `child` below `parent` with a PCIe link. gbps > 0: that bandwidth (gen/width as given,
// possibly 0); otherwise gen x width when both are known, else the assumed generation and width,
// and the link is flagged `assumed` (the caller states the assumption once).
int add_pcie_child(HostModel& model, int parent, Node child, double gbps, int gen, int width,
                   const LoadOptions& options, bool* assumed_out);

// Links every pair of NUMA nodes by an SMP link of options.smp_gbps (assumed, and stated) when
// the model has more than one NUMA node and they are not linked yet.
void add_smp_mesh(HostModel& model, const LoadOptions& options);

// The per-GPU NVSwitch bandwidth for a GPU part (PCI device id, model name), or 0 when the part
// is not known to live only on NVSwitch baseboards.
double nvswitch_part_gbps(uint16_t pci_device, std::string_view model);

// Applies options.unknown_gpu_links to GPUs the source links to no other GPU by NVLink, adding an
// NVSwitch plane when the policy says so, and states what was assumed either way.
void resolve_unknown_gpu_links(HostModel& model, const LoadOptions& options);

// The NVLink per-link bandwidth to use for a GPU model (options override, else the table).
double nvlink_link_gbps(const LoadOptions& options, std::string_view gpu_model);

Status read_text_file(const std::string& path, std::string& out);

// "dddd:bb:dd.f" normalised to lower case with a 4-digit domain ("0:1b:0.0" stays as given).
std::string normalize_busid(std::string_view busid);

}  // namespace sumcast::topo::internal
