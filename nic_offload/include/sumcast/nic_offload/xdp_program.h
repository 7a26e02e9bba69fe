// sumcastd's handle on the Sumcast XDP program (nic_offload/xdp/sumcast_xdp.c) that DPDK's af_xdp
// PMD attached to the port's interface (vdev option xdp_prog=): finds the program attached to the
// interface, writes the appliance address into its "sumcast_cfg" map (until then the program
// passes everything to the kernel) and reads its per-CPU verdict counters.
//
// Needs CAP_BPF/CAP_NET_ADMIN (root) and the network namespace of the interface.
// Thread safety: counters() may be called from any thread; open() from the main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sumcast/status.h"

namespace sumcast::nic_offload {

struct XdpCounters {
  uint64_t redirected = 0;       // RoCEv2 and ARP for the appliance, into the AF_XDP socket
  uint64_t passed = 0;           // everything else, to the kernel
  uint64_t redirect_failed = 0;  // meant for the socket but no socket at that queue (passed)
};

class XdpProgram {
 public:
  // `iface`: the af_xdp vdev's iface=; `appliance_ipv4` host order.
  static Result<std::unique_ptr<XdpProgram>> open(const std::string& iface, uint32_t appliance_ipv4);
  ~XdpProgram();
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;

  uint32_t prog_id() const { return prog_id_; }
  const std::string& iface() const { return iface_; }
  XdpCounters counters() const;

 private:
  XdpProgram() = default;
  std::string iface_;
  uint32_t prog_id_ = 0;
  int cfg_fd_ = -1;
  int stats_fd_ = -1;
};

}  // namespace sumcast::nic_offload
