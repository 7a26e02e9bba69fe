// IPv4 address helpers for the worker library: parsing "host:port[@weight]", name resolution,
// and the source address the kernel would pick toward a destination. Cold path only.
//
// Thread safety: all functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sumcast/ipv4.h"
#include "sumcast/status.h"

namespace sumcast::shim {

// An appliance's control address as the user wrote it, resolved.
struct HostPort {
  std::string host;  // as written ("appliance1", "10.0.0.5")
  uint32_t ip = 0;   // resolved IPv4, host order
  uint16_t port = 0;
};

// Parses a dotted quad (sumcast/ipv4.h's rule); "" and names are errors naming the text.
Result<uint32_t> parse_ipv4(std::string_view text);
// Resolves a dotted quad or a host name to its first IPv4 address.
Result<uint32_t> resolve_ipv4(const std::string& host);
// Parses and resolves "host:port" (port 1..65535).
Result<HostPort> parse_host_port(std::string_view text);
// Splits "host:port@weight" into "host:port" and weight (> 0; 1.0 when "@weight" is absent).
Status split_weight(std::string_view text, std::string* host_port, double* weight);
// "a.b.c.d" for a host-order address.
using ::sumcast::format_ipv4;
// The local address the kernel's routing table would use to reach `dst` (no packet is sent).
Result<uint32_t> source_ip_toward(uint32_t dst);
// The IP MTU of the route from local address `src` (0: any) toward `dst`: IP_MTU of a UDP socket
// connected there (the route's or the interface's MTU, or a smaller one path MTU discovery
// learnt; no packet is sent).
Result<uint32_t> path_mtu_toward(uint32_t src, uint32_t dst);
// The MAC address of the interface that owns `ip`; all zero for loopback or when unknown.
void mac_of_local_ip(uint32_t ip, uint8_t mac[6]);
// The hardware address of the interface named `iface`; false when it has none or does not exist.
bool interface_mac(const std::string& iface, uint8_t mac[6]);

}  // namespace sumcast::shim
