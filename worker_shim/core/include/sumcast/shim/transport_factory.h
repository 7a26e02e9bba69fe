// Opening a transport by kind: the one place that knows the concrete transports (udp_transport.h,
// verbs_transport.h), so that their users (the communicator) depend on the Transport interface
// alone and a new transport is added here, not in each of them.
//
// TransportConfig says what a transport needs, whatever its kind; each kind takes the fields
// that concern it and ignores the others.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sumcast/shim/transport.h"
#include "sumcast/status.h"

namespace sumcast::shim {

class VerbsOps;  // verbs_ops.h (needs rdma-core's headers, so not included here)

enum class TransportKind : uint8_t {
  kUdp = 0,    // kernel UDP socket, software ICRC (udp_transport.h)
  kVerbs = 1,  // rdma-core UD QP on a RoCEv2 NIC (verbs_transport.h: mind its limits)
};

struct TransportConfig {
  TransportKind kind = TransportKind::kUdp;
  uint32_t bind_ip = 0;  // our IPv4, host order; required (UDP: the ICRC covers it; verbs: selects the GID)
  uint8_t tos = 0;       // IPv4 TOS of what we send: DSCP << 2 | ECN (UDP: IP_TOS; verbs: GRH traffic class)
  int repair_tos = -1;   // TOS of resends, 0..255; -1: tos (UDP only: the verbs transport refuses another)
  // UDP
  uint16_t udp_port = 0;      // 0: ephemeral
  bool verify_icrc = true;    // check the ICRC of every result and CNP
  bool recv_ecn = false;      // flag results that arrive marked CE (Received::ce)
  uint32_t busy_poll_us = 0;  // UDP: SO_BUSY_POLL of its sockets (0: off)
  bool gro = true;            // UDP: UDP_GRO where the kernel allows it
  bool gso = false;           // UDP: UDP_SEGMENT trains (every peer must accept IP ID k: docs/protocol.md §2.2)
  // verbs
  std::string rdma_device;        // device name; "": the one whose GID table holds bind_ip
  std::string rdma_interface;     // network interface whose RoCEv2 GID to use; "": any
  uint32_t max_payload = 0;       // largest payload per message wanted; 0: what the port's MTU allows
  bool payload_explicit = false;  // max_payload was chosen by the user: refuse it if the MTU is smaller
  VerbsOps* verbs_ops = nullptr;  // test seam (verbs_ops.h); nullptr: rdma-core
};

// Opens a transport of config.kind; its error when it cannot (the verbs transport in a build
// without libibverbs: Unavailable), InvalidArgument for a kind that is none of the above.
Result<std::unique_ptr<Transport>> open_transport(const TransportConfig& config);

}  // namespace sumcast::shim
