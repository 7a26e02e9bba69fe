// The plugin's settings. NCCL gives a net plugin no configuration of its own, so they come from
// the environment, or from a file of KEY=VALUE lines with the same keys (SUMCAST_NCCL_CONF,
// default /etc/sumcast/nccl.conf, optional) so that an administrator can set the appliance once
// and users set only NCCL_NET_PLUGIN=sumcast NCCL_COLLNET_ENABLE=1. The environment wins over the
// file. Every key, its default and its meaning is in the table in config.cc and in docs/nccl.md.
//
// Thread safety: plugin_config() is loaded once (the first init) and read-only afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sumcast/shim/communicator.h"
#include "sumcast/status.h"

namespace sumcast::nccl {

// A traffic class (an IP TOS byte, as NCCL's ncclConfig_t.trafficClass and NCCL_IB_TC are): the
// DSCP in its upper six bits, and whether its two ECN bits ask for ECN at all.
constexpr uint8_t traffic_class_dscp(int traffic_class) { return static_cast<uint8_t>(traffic_class >> 2); }
constexpr bool traffic_class_ecn(int traffic_class) { return (traffic_class & 3) != 0; }

struct PluginConfig {
  // SUMCAST_NCCL_IFNAME (else NCCL_SOCKET_IFNAME): comma-separated interface name prefixes for
  // ncclNet and CollNet devices; a leading '^' excludes them instead; a leading '=' makes them
  // exact names. Default "": every up IPv4 interface but loopback and docker*/virbr* (loopback
  // when there is nothing else).
  std::vector<std::string> if_names;
  bool if_exclude = false;
  bool if_exact = false;
  // SUMCAST_APPLIANCES: "host:port[@weight],..." control endpoints; empty: no CollNet devices.
  std::vector<shim::ApplianceAddress> appliances;
  std::string token;                     // SUMCAST_TOKEN, or the first line of SUMCAST_TOKEN_FILE; default ""
  std::string bind_ip;                   // SUMCAST_BIND_IP: local IPv4 of the data socket; "": routed
  uint32_t payload_bytes = 1024;         // SUMCAST_PAYLOAD_BYTES: 8..4096
  bool payload_explicit = false;         // SUMCAST_PAYLOAD_BYTES was set (else the path MTU decides)
  uint32_t slots = 0;                    // SUMCAST_SLOTS: window slots per appliance; 0: the appliance's
  bool multicast = false;                // SUMCAST_MULTICAST: 1 asks for results by multicast
  uint32_t rto_us = 5000;                // SUMCAST_RTO_US: first retransmission timeout
  uint32_t busy_poll_us = 0;             // SUMCAST_BUSY_POLL_US: SO_BUSY_POLL of the data sockets (0: off)
  bool udp_gro = true;                   // SUMCAST_UDP_GRO: coalesced results (UDP_GRO) where the kernel allows it
  bool udp_gso = false;                  // SUMCAST_UDP_GSO: UDP_SEGMENT trains (segment k with IP ID k)
  uint32_t send_queue_us = 2000;         // SUMCAST_SEND_QUEUE_US: queue below the socket that holds new chunks
  bool loss_notices = true;              // SUMCAST_LOSS_NOTICES: loss notices wanted (same on every node)
  uint8_t dscp = 0;                      // SUMCAST_DSCP: DSCP of the contributions, 0..63 (or NCCL_IB_TC's)
  bool ecn = false;                      // SUMCAST_ECN: contributions marked ECT(0) (or NCCL_IB_TC's ECN bits)
  int repair_dscp = -1;                  // SUMCAST_REPAIR_DSCP: DSCP of resends, 0..63; -1 (unset): dscp
  bool cnp_reaction = true;              // SUMCAST_CNP_REACTION: CNPs cut the window (shim/communicator.h)
  uint32_t window_cut_percent = 50;      // SUMCAST_WINDOW_CUT: percent of the window a CNP leaves, 1..99
  uint32_t window_step = 1;              // SUMCAST_WINDOW_STEP: slots regrown per window of clean results
  uint32_t op_timeout_ms = 30000;        // SUMCAST_OP_TIMEOUT_MS: no result this long fails (0: never)
  uint32_t register_timeout_ms = 60000;  // SUMCAST_REGISTER_TIMEOUT_MS: all nodes must register within
  std::string source;                    // where the settings came from, for the log
};

// Reads the settings through `get` (getenv in production); KEY=VALUE lines of the file named by
// SUMCAST_NCCL_CONF (default /etc/sumcast/nccl.conf, skipped when absent) fill keys `get` leaves
// unset. Unknown keys in the file and malformed values are errors that name the key.
Result<PluginConfig> load_config(const std::function<const char*(const char*)>& get);

// The process-wide settings, loaded on first use from the environment. A load error is kept and
// returned by every later call.
Result<const PluginConfig*> plugin_config();

}  // namespace sumcast::nccl
