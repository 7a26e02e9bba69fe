// A plain UDP socket playing an appliance toward a kernel-socket worker: it sends datagrams
// stamped with the ICRC of the IPv4/UDP headers the kernel writes for them (DF, IP ID 0: the
// socket sets IP_PMTUDISC_DO), results or RoCEv2 CNPs.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <span>
#include <vector>

#include "sumcast/icrc/icrc.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim::testing {

struct ApplianceSocket {
  int fd = -1;
  uint32_t ip = 0;  // host order
  uint16_t port = 0;
  explicit ApplianceSocket(uint32_t bind_ip) : ip(bind_ip) {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(ip);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    const int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
  }
  ~ApplianceSocket() { close(fd); }
  ApplianceSocket(const ApplianceSocket&) = delete;
  ApplianceSocket& operator=(const ApplianceSocket&) = delete;

  void send_to(const Endpoint& to, const std::vector<uint8_t>& bytes) const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(to.udp_port);
    a.sin_addr.s_addr = htonl(to.ip);
    ASSERT_EQ(sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a)),
              static_cast<ssize_t>(bytes.size()));
  }
  // Stamps the ICRC of `roce` (BTH..ICRC) as sent from this socket to `to`, for IP ID `ip_id`
  // (0: a datagram sent alone; k: the k-th of a UDP_SEGMENT train).
  void stamp(const Endpoint& to, std::span<uint8_t> roce, uint16_t ip_id = 0) const {
    icrc::UdpFields f;
    f.src_ip = ip;
    f.dst_ip = to.ip;
    f.src_port = port;
    f.dst_port = to.udp_port;
    f.ip_id = ip_id;
    icrc::stamp_udp(f, roce);
  }
  // A CNP to `dest_qp` of the worker at `to`.
  std::vector<uint8_t> cnp(const Endpoint& to, uint32_t dest_qp) const {
    std::vector<uint8_t> b(wire::kCnpRoceLen);
    wire::write_cnp(b.data(), dest_qp);
    stamp(to, b);
    return b;
  }
};

}  // namespace sumcast::shim::testing
