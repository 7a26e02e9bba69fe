#include "sumcast/dpdk/port.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_version.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sumcast/dpdk/lcore.h"
#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "sumcast/nic_offload/flow_rules.h"
#include "sumcast/wire/format.h"

namespace sumcast::dpdk {
namespace {

std::string errno_text(int err) { return rte_strerror(err < 0 ? -err : err); }

std::string port_names() {
  std::string names;
  uint16_t p = 0;
  RTE_ETH_FOREACH_DEV(p) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    if (rte_eth_dev_get_name_by_port(p, name) == 0) {
      if (!names.empty()) names += ", ";
      names += name;
    }
  }
  return names.empty() ? "none" : names;
}

rte_mempool* create_pool(const std::string& name, uint32_t count, uint32_t data_room, int socket) {
  const uint32_t cache = std::min<uint32_t>(256, count / 2);
  return rte_pktmbuf_pool_create(name.c_str(), count, cache, 0, static_cast<uint16_t>(data_room), socket);
}

// DPDK's net_af_packet reports its sockets' kernel drops itself from 25.03 on (as imissed; reading
// them resets them, so only one of us may).
constexpr bool kPmdReportsRingDrops = RTE_VERSION >= RTE_VERSION_NUM(25, 3, 0, 0);

// This process's AF_PACKET sockets bound to interface `if_index`: the af_packet PMD's, one per
// queue pair (the PMD keeps its descriptors private).
std::vector<int> packet_sockets(int if_index) {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET) continue;
    sockaddr_ll sll{};
    len = sizeof(sll);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&sll), &len) != 0) continue;
    if (sll.sll_ifindex == if_index) fds.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  return fds;
}

std::string stat_name(const char* raw) {
  std::string n = raw;
  for (char& ch : n) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    if (!ok) ch = '_';
  }
  return n;
}

// SIOCGIFMTU / SIOCSIFMTU: the kernel interface `iface` gets an MTU of at least `mtu`.
Status raise_interface_mtu(const std::string& iface, uint32_t mtu) {
  if (iface.empty() || iface.size() >= IFNAMSIZ) return Status::invalid_argument("no usable iface= in its vdev");
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Status::from_errno("socket for SIOCGIFMTU");
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.c_str(), iface.size());
  Status st;
  if (ioctl(s, SIOCGIFMTU, &ifr) != 0) {
    st = Status::from_errno("MTU of interface " + iface);
  } else if (static_cast<uint32_t>(ifr.ifr_mtu) < mtu) {
    ifr.ifr_mtu = static_cast<int>(mtu);
    if (ioctl(s, SIOCSIFMTU, &ifr) != 0) {
      st = Status::from_errno("setting interface " + iface + "'s MTU to " + std::to_string(mtu));
    }
  }
  ::close(s);
  return st;
}

}  // namespace

Result<std::unique_ptr<Port>> Port::open(const config::AggConfig& config, uint32_t worker_cores) {
  std::unique_ptr<Port> port(new Port());
  PortInfo& info = port->info_;
  const config::PortConfig& pc = config.port;
  info.device = pc.device;
  const std::string what = "port " + pc.device;

  info.ipv4 = pc.ipv4;
  uint16_t port_id = 0;
  if (rte_eth_dev_get_port_by_name(pc.device.c_str(), &port_id) != 0) {
    return Status::not_found(config.path + ": port.device: no DPDK port named \"" + pc.device +
                             "\" (ports: " + port_names() + "); check eal.vdevs and eal.allow");
  }
  info.port_id = port_id;
  rte_eth_dev_info dev_info{};
  int rc = rte_eth_dev_info_get(port_id, &dev_info);
  if (rc != 0) return Status::io_error(what + ": rte_eth_dev_info_get: " + errno_text(rc));
  info.driver = dev_info.driver_name != nullptr ? dev_info.driver_name : "?";
  info.max_queues = std::min(dev_info.max_rx_queues, dev_info.max_tx_queues);
  if (info.max_queues == 0) return Status::unavailable(what + ": the PMD offers no rx/tx queue");
  info.queues = static_cast<uint16_t>(std::min<uint32_t>(worker_cores, info.max_queues));
  // Until the plan is chosen (below): without flow rules that steer each slot's frames to its
  // owner, RSS or the kernel's fanout spread them by flow, so every rx core dispatches.
  info.software_dispatch = worker_cores > 1;
  const nic_offload::VdevArgs vdev = nic_offload::find_vdev(config.eal.vdevs, pc.device);
  info.caps = nic_offload::probe_device(port_id, vdev);
  if (info.caps.xdp_program) port->xdp_iface_ = vdev.get("iface");
  info.mtu = pc.mtu;
  // The largest MTU rte_eth_dev_configure takes: max_mtu, where the PMD says one, bounded by its
  // max_rx_pktlen (as ethdev checks it).
  const uint32_t pktlen_mtu = dev_info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN
                                  ? dev_info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN
                                  : 0;
  const uint16_t max_mtu = static_cast<uint16_t>(std::min<uint32_t>(dev_info.max_mtu, pktlen_mtu));
  // The MTU DPDK is told; on net_af_packet above 1500 the kernel interface's own (below).
  uint16_t ethdev_mtu = pc.mtu;
  uint32_t ring_frame_data = 0;  // net_af_packet: the frame bytes one ring frame carries
  if (config::is_af_packet(vdev)) {
    // validate_agg_config checked the geometry and that a ring frame holds a frame of port.mtu.
    auto ring = config::af_packet_ring(vdev);
    if (!ring.ok()) return Status::invalid_argument(config.path + ": eal.vdevs: " + ring.status().message());
    ring_frame_data = ring->frame_data();
    if (pc.mtu > max_mtu) {
      // DPDK 22.11's net_af_packet reports a 1518-byte max_rx_pktlen whatever its framesz=, but its
      // rings carry every frame that fits a ring frame, both ways: above 1500 the MTU is the
      // kernel interface's (set below), and DPDK is told its own maximum.
      ethdev_mtu = max_mtu;
      port->kernel_mtu_iface_ = vdev.get("iface");
    }
  }
  if (ethdev_mtu > max_mtu || pc.mtu < dev_info.min_mtu) {
    return Status::invalid_argument(config.path + ": port.mtu: " + std::to_string(pc.mtu) + " outside what " +
                                    info.driver + " supports (" + std::to_string(dev_info.min_mtu) + ".." +
                                    std::to_string(max_mtu) + ")");
  }
  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = static_cast<int>(rte_socket_id());
  if (socket < 0 || socket == SOCKET_ID_ANY) socket = 0;
  info.socket_id = socket;

  // Pools: rx buffers hold one MTU-sized frame (AF_XDP needs them within a page); tx buffers hold
  // any frame the engine builds (TxSink contract: wire::kMaxFrameLen).
  // (net_af_packet copies a ring frame into one mbuf, and refuses a pool whose buffers are smaller.)
  info.rx_data_room =
      RTE_PKTMBUF_HEADROOM +
      std::max({static_cast<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM),
                static_cast<uint32_t>(pc.mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 2 * RTE_VLAN_HLEN),
                ring_frame_data});
  info.tx_data_room = RTE_PKTMBUF_HEADROOM + static_cast<uint32_t>(wire::kMaxFrameLen);
  const uint32_t mbufs = config.dataplane.mbufs;
  port->rx_pool_ = create_pool("sumcast_rx_" + std::to_string(port_id), mbufs, info.rx_data_room, socket);
  if (port->rx_pool_ == nullptr) {
    return Status::unavailable(what + ": rx mbuf pool of " + std::to_string(mbufs) + " x " +
                               std::to_string(info.rx_data_room) + " B: " + errno_text(rte_errno) +
                               " (raise eal.memory_mb or lower dataplane.mbufs)");
  }
  port->tx_pool_ = create_pool("sumcast_tx_" + std::to_string(port_id), mbufs, info.tx_data_room, socket);
  if (port->tx_pool_ == nullptr) {
    return Status::unavailable(what + ": tx mbuf pool of " + std::to_string(mbufs) + " x " +
                               std::to_string(info.tx_data_room) + " B: " + errno_text(rte_errno) +
                               " (raise eal.memory_mb or lower dataplane.mbufs)");
  }

  rte_eth_conf conf{};
  conf.rxmode.mtu = ethdev_mtu;
  conf.txmode.offloads = nic_offload::tx_offloads_to_enable(info.caps);
  if (info.queues > 1 && dev_info.flow_type_rss_offloads != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = nullptr;
    conf.rx_adv_conf.rss_conf.rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & dev_info.flow_type_rss_offloads;
    info.rss = conf.rx_adv_conf.rss_conf.rss_hf != 0;
    if (!info.rss) conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
  }
  rc = rte_eth_dev_configure(port_id, info.queues, info.queues, &conf);
  if (rc != 0) {
    return Status::io_error(what + ": rte_eth_dev_configure(" + std::to_string(info.queues) + " queues, mtu " +
                            std::to_string(pc.mtu) + "): " + errno_text(rc));
  }
  port->configured_ = true;
  uint16_t rx_desc = pc.rx_desc;
  uint16_t tx_desc = pc.tx_desc;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);
  if (rc != 0) return Status::io_error(what + ": rte_eth_dev_adjust_nb_rx_tx_desc: " + errno_text(rc));
  for (uint16_t q = 0; q < info.queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, static_cast<unsigned>(socket), nullptr, port->rx_pool_);
    if (rc != 0) {
      return Status::io_error(what + ": rx queue " + std::to_string(q) + " (" + std::to_string(rx_desc) +
                              " descriptors): " + errno_text(rc));
    }
    rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, static_cast<unsigned>(socket), nullptr);
    if (rc != 0) {
      return Status::io_error(what + ": tx queue " + std::to_string(q) + " (" + std::to_string(tx_desc) +
                              " descriptors): " + errno_text(rc));
    }
  }
  // Stage 2 of the probe (validation names queues, so after their set-up; nothing to validate on
  // an XDP port) and the plan.
  nic_offload::probe_flows(port_id, info.ipv4, worker_cores, info.queues, kCoreQpnBase, info.rss, &info.caps);
  info.plan = nic_offload::choose_plan(info.caps, worker_cores, info.queues);
  info.software_dispatch = info.plan.software_dispatch;

  if (port->kernel_mtu_iface_.empty()) {
    rc = rte_eth_dev_set_mtu(port_id, pc.mtu);
    if (rc != 0 && rc != -ENOTSUP) {
      return Status::io_error(what + ": set MTU " + std::to_string(pc.mtu) + ": " + errno_text(rc));
    }
  } else {
    SUMCAST_RETURN_IF_ERROR(raise_interface_mtu(port->kernel_mtu_iface_, pc.mtu).with_context(what + ": "));
  }

  rte_ether_addr mac{};
  if (!pc.mac) {
    rc = rte_eth_macaddr_get(port_id, &mac);
    if (rc != 0) return Status::io_error(what + ": reading its MAC: " + errno_text(rc));
  } else {
    std::memcpy(mac.addr_bytes, pc.mac->data(), pc.mac->size());
    rte_ether_addr current{};
    if (rte_eth_macaddr_get(port_id, &current) != 0 || !rte_is_same_ether_addr(&current, &mac)) {
      // A MAC the port cannot take is still received in promiscuous mode.
      if (rte_eth_dev_default_mac_addr_set(port_id, &mac) != 0) info.promiscuous = true;
    }
  }
  std::memcpy(info.mac, mac.addr_bytes, 6);
  return port;
}

Status Port::start() {
  const std::string what = "port " + info_.device;
  int rc = rte_eth_dev_start(info_.port_id);
  if (rc != 0) return Status::io_error(what + ": rte_eth_dev_start: " + errno_text(rc));
  started_ = true;
  // AF_PACKET/AF_XDP and NICs programmed with our MAC deliver what we need without it.
  rc = info_.promiscuous ? rte_eth_promiscuous_enable(info_.port_id) : rte_eth_promiscuous_disable(info_.port_id);
  if (rc != 0 && rc != -ENOTSUP && info_.promiscuous) {
    return Status::io_error(what + ": promiscuous mode (needed for MAC " + format_mac(info_.mac) +
                            "): " + errno_text(rc));
  }
  if (rc == 0) info_.promiscuous = rte_eth_promiscuous_get(info_.port_id) == 1;

  if (info_.driver == "net_af_packet" && !kPmdReportsRingDrops) {
    rte_eth_dev_info dev_info{};
    if (rte_eth_dev_info_get(info_.port_id, &dev_info) == 0 && dev_info.if_index != 0) {
      std::lock_guard<std::mutex> lock(ring_mu_);
      ring_fds_ = packet_sockets(static_cast<int>(dev_info.if_index));
      for (const int fd : ring_fds_) {  // drops before the start are not ours to count
        tpacket_stats st{};
        socklen_t len = sizeof(st);
        getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len);
      }
    }
  }

  const nic_offload::OffloadPlan plan = info_.plan;
  std::vector<nic_offload::FlowRule> rules;
  if (plan.install_steering) {
    rules = nic_offload::rules_for(nic_offload::SteeringMode::kFlowDestQpn, info_.ipv4, info_.queues, info_.queues,
                                   kCoreQpnBase);
    if (!plan.install_filter) rules.resize(info_.queues);  // the steering rules alone
  } else if (plan.install_filter) {
    rules = nic_offload::filter_rules(info_.ipv4, info_.queues, info_.rss);
  }
  if (!rules.empty()) {
    Status st = flows_.install(info_.port_id, rules);
    if (!st.ok() && plan.install_steering) {
      // Validated at open(), refused now: the cores were set up without software dispatch, so
      // this cannot fall back any more.
      return Status(st.code(), what + ": " + st.message());
    }
    if (!st.ok()) {
      // The filter only saves cycles: without it the engine drops foreign frames itself.
      info_.plan.install_filter = false;
      info_.plan.reason += "; NIC filter validated but not installed (" + st.message() + ")";
    }
    info_.flow_rules = static_cast<uint32_t>(flows_.installed());
  }
  if (info_.caps.xdp_program) {
    auto xdp = nic_offload::XdpProgram::open(xdp_iface_, info_.ipv4);
    if (!xdp.ok()) return Status(xdp.status().code(), what + ": " + xdp.status().message());
    xdp_ = std::move(xdp.value());
  }
  return {};
}

void Port::stop() {
  if (!started_) return;
  started_ = false;
  {
    // The PMD closes its sockets when stopped (their numbers may be reused): a last reading, then
    // they are forgotten.
    kernel_ring_drops();
    std::lock_guard<std::mutex> lock(ring_mu_);
    ring_fds_.clear();
  }
  flows_.remove();
  info_.flow_rules = 0;
  rte_eth_dev_stop(info_.port_id);
}

void Port::close() {
  stop();
  xdp_.reset();
  if (configured_) {
    configured_ = false;
    rte_eth_dev_close(info_.port_id);
  }
  if (rx_pool_ != nullptr) rte_mempool_free(rx_pool_);
  if (tx_pool_ != nullptr) rte_mempool_free(tx_pool_);
  rx_pool_ = nullptr;
  tx_pool_ = nullptr;
}

Port::~Port() { close(); }

uint64_t Port::kernel_ring_drops() const {
  std::lock_guard<std::mutex> lock(ring_mu_);
  for (const int fd : ring_fds_) {
    tpacket_stats st{};
    socklen_t len = sizeof(st);
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) ring_drops_ += st.tp_drops;
  }
  return ring_drops_;
}

size_t Port::ring_sockets() const {
  std::lock_guard<std::mutex> lock(ring_mu_);
  return ring_fds_.size();
}

std::vector<PortStat> Port::stats(bool xstats) const {
  std::vector<PortStat> out;
  rte_eth_stats st{};
  const bool have = rte_eth_stats_get(info_.port_id, &st) == 0;
#define SUMCAST_X(field) out.push_back({#field, have ? st.field : 0});
  SUMCAST_PORT_ETH_STATS(SUMCAST_X)
#undef SUMCAST_X
  out.push_back({"kernel_ring_drops", kernel_ring_drops()});
  if (!xstats) return out;
  const int n = rte_eth_xstats_get_names(info_.port_id, nullptr, 0);
  if (n <= 0) return out;
  std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
  std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
  const int got_names = rte_eth_xstats_get_names(info_.port_id, names.data(), static_cast<unsigned>(n));
  const int got = rte_eth_xstats_get(info_.port_id, values.data(), static_cast<unsigned>(n));
  if (got_names != n || got != n) return out;
  for (const rte_eth_xstat& x : values) {
    if (x.id < names.size()) out.push_back({"xstat_" + stat_name(names[x.id].name), x.value});
  }
  return out;
}

std::string Port::link_text() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(info_.port_id, &link) != 0) return "unknown";
  if (link.link_status == RTE_ETH_LINK_DOWN) return "down";
  std::string s = "up";
  if (link.link_speed != RTE_ETH_SPEED_NUM_NONE && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN) {
    s += " " + std::to_string(link.link_speed) + " Mbps";
  }
  return s + (link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? " full-duplex" : " half-duplex");
}

}  // namespace sumcast::dpdk
