// The NICs the plugin offers NCCL: up IPv4 interfaces chosen by SUMCAST_NCCL_IFNAME, with what
// NCCL wants to know of each (name, PCI path for its topology, speed). Cold path.
//
// Thread safety: net_devices_list() is computed once and read-only afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
#include "sumcast/status.h"

namespace sumcast::nccl {

struct NetDevice {
  std::string name;      // "eth0"
  uint32_t ipv4 = 0;     // host order
  std::string pci_path;  // realpath of /sys/class/net/<name>/device; "" for virtual NICs
  int speed_mbps = 0;    // /sys/class/net/<name>/speed, 10000 when unknown
  uint64_t guid = 0;     // from the MAC address (or the interface index)
};

// Up interfaces with an IPv4 address, filtered by the config, in name order. Loopback only when
// asked for by name or when nothing else is up.
Result<std::vector<NetDevice>> discover_net_devices(const PluginConfig& config);

// discover_net_devices(plugin_config()), once per process.
Result<const std::vector<NetDevice>*> net_devices_list();

}  // namespace sumcast::nccl
