// A RoCEv2 CNP as a kernel-socket worker receives it: BTH..ICRC, stamped for the IPv4/UDP headers
// the kernel writes when it is sent from src_ip:src_port (with DF, IP ID 0) to `to`.
#pragma once

#include <cstdint>
#include <vector>

#include "sumcast/icrc/icrc.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim::testing {

inline std::vector<uint8_t> cnp_datagram(uint32_t src_ip, uint16_t src_port, const Endpoint& to, uint32_t dest_qp) {
  std::vector<uint8_t> b(wire::kCnpRoceLen);
  wire::write_cnp(b.data(), dest_qp);
  icrc::UdpFields f;
  f.src_ip = src_ip;
  f.dst_ip = to.ip;
  f.src_port = src_port;
  f.dst_port = to.udp_port;
  icrc::stamp_udp(f, std::span<uint8_t>(b.data(), b.size()));
  return b;
}

}  // namespace sumcast::shim::testing
