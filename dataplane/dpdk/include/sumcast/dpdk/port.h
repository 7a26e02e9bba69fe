// The appliance's data port: found by DPDK device name, configured with one rx/tx queue pair per
// worker core (fewer when the PMD offers fewer: the lcores then dispatch in software), RSS when
// more than one queue and the PMD hashes, the configured MTU, promiscuous mode off unless the
// configured MAC cannot be programmed, and two mbuf pools: rx buffers sized for the MTU and tx
// buffers that hold any frame the engine builds (wire::kMaxFrameLen). On net_af_packet, whose
// DPDK 22.11 PMD takes no MTU above 1500 although its rings carry larger frames, an MTU above 1500
// is the kernel interface's (raised by open() when lower) and rx buffers hold a whole ring frame
// (docs/agg.conf.md, "Jumbo frames on net_af_packet").
//
// NIC offloads (nic_offload, docs/nic_offload.md): open() probes the port's capabilities
// (dev_info, then rte_flow_validate of the steering and filter rules once the queues exist) and
// chooses the offload plan: rte_flow DestQP steering (no software dispatch), RSS + software
// dispatch, or the XDP program of an af_xdp port; TX IPv4 checksum offload when offered. start()
// installs the plan's rte_flow rules (and writes the appliance address into the XDP program's
// map); stop() removes the rules.
//
// The port's own counters (stats()): what the PMD counted before any engine saw a frame, so that
// every frame sent at the appliance is accounted for from its own counters: rte_eth_stats, the
// extended stats, and on net_af_packet the kernel's drops on the PMD's packet sockets (rx ring
// full). DPDK 22.11's net_af_packet fills neither imissed nor xstats (25.03 reports the ring
// drops as imissed): sumcastd reads PACKET_STATISTICS itself from the PMD's sockets, found among
// its own file descriptors by domain (AF_PACKET) and bound interface (dev_info.if_index).
//
// Thread safety: open/start/stop/close from the main thread only, before lcores launch or after
// they returned. stats() from any thread while the port exists.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sumcast/config/agg_config.h"
#include "sumcast/nic_offload/capabilities.h"
#include "sumcast/nic_offload/flow_installer.h"
#include "sumcast/nic_offload/xdp_program.h"
#include "sumcast/status.h"

struct rte_mempool;

namespace sumcast::dpdk {

struct PortInfo {
  uint16_t port_id = 0;
  std::string device;              // port.device
  std::string driver;              // PMD name, e.g. net_af_packet
  uint16_t queues = 0;             // rx/tx queue pairs configured (<= worker cores)
  uint16_t max_queues = 0;         // what the PMD offers
  bool rss = false;                // RSS configured across the queues
  bool software_dispatch = false;  // frames may reach a core that does not own their slot
  uint8_t mac[6] = {};             // the data MAC (config's or the port's)
  uint32_t ipv4 = 0;               // host order (port.ipv4)
  uint16_t mtu = 0;
  bool promiscuous = false;
  int socket_id = 0;          // NUMA node of the port (0 when unknown)
  uint32_t rx_data_room = 0;  // bytes of frame an rx mbuf holds
  uint32_t tx_data_room = 0;
  nic_offload::PortCapabilities caps;  // probed at open()
  nic_offload::OffloadPlan plan;       // chosen from caps at open(); plan.software_dispatch == software_dispatch
  uint32_t flow_rules = 0;             // rte_flow rules installed by start()
};

// rte_eth_stats fields exported as port counters, in this order.
// clang-format off
#define SUMCAST_PORT_ETH_STATS(X) \
  X(ipackets) \
  X(opackets) \
  X(ibytes) \
  X(obytes) \
  X(imissed) \
  X(ierrors) \
  X(oerrors) \
  X(rx_nombuf)
// clang-format on

struct PortStat {
  std::string name;
  uint64_t value = 0;
};

class Port {
 public:
  // Finds and configures the port (not started). `worker_cores` is dataplane.worker_cores.
  static Result<std::unique_ptr<Port>> open(const config::AggConfig& config, uint32_t worker_cores);
  ~Port();  // stop() and close()
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  Status start();
  void stop();   // idempotent
  void close();  // idempotent; frees the pools (after every mbuf went back)

  const PortInfo& info() const { return info_; }
  rte_mempool* rx_pool() const { return rx_pool_; }
  rte_mempool* tx_pool() const { return tx_pool_; }
  // "up 10000 Mbps full-duplex" or "down".
  std::string link_text() const;
  // The XDP program's handle after start() on an af_xdp port with xdp_prog=; nullptr otherwise.
  const nic_offload::XdpProgram* xdp() const { return xdp_.get(); }

  // The port's counters: SUMCAST_PORT_ETH_STATS, then kernel_ring_drops (packets the kernel
  // dropped on the PMD's sockets: net_af_packet on DPDK < 25.03, 0 elsewhere), then with `xstats`
  // every extended stat as xstat_<name> (characters other than [A-Za-z0-9_] as '_'). Cold path.
  std::vector<PortStat> stats(bool xstats) const;
  // The PMD's AF_PACKET sockets this port reads kernel_ring_drops from (after start()).
  size_t ring_sockets() const;

 private:
  Port() = default;
  uint64_t kernel_ring_drops() const;  // accumulates what the sockets report (reading resets them)
  PortInfo info_;
  rte_mempool* rx_pool_ = nullptr;
  rte_mempool* tx_pool_ = nullptr;
  bool configured_ = false;
  bool started_ = false;
  std::string xdp_iface_;         // iface= of an af_xdp vdev with xdp_prog=
  std::string kernel_mtu_iface_;  // iface= of an af_packet vdev whose MTU (above DPDK's) open() raised
  nic_offload::FlowInstaller flows_;
  std::unique_ptr<nic_offload::XdpProgram> xdp_;
  mutable std::mutex ring_mu_;       // guards the two below
  std::vector<int> ring_fds_;        // the PMD's sockets, found at start(), forgotten at stop()
  mutable uint64_t ring_drops_ = 0;  // accumulated tp_drops
};

}  // namespace sumcast::dpdk
