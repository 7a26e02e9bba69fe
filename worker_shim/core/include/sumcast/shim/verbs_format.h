// What a verbs UD transport needs to know about the bytes, with no libibverbs dependency (so it
// is compiled and tested everywhere). With a UD QP the NIC writes and checks BTH, DETH and the
// ICRC; the message is Sumcast header | payload (docs/protocol.md §3), and a receive buffer
// starts with the 40-byte GRH area, whose last 20 bytes hold the IPv4 header for RoCEv2.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim::verbs {

inline constexpr size_t kGrhLen = 40;
inline constexpr size_t kGrhIpv4Offset = 20;  // RoCEv2: the IPv4 header fills the GRH's last 20 bytes
// build_message() output: the destination QPN (4 bytes, host order; the transport reads it at
// send time, it is not sent) | Sumcast header | payload.
inline constexpr size_t kTagLen = 4;

// The IPv4-mapped GID ::ffff:a.b.c.d of a host-order address (RoCEv2 addressing).
void ipv4_mapped_gid(uint32_t ip, uint8_t gid[16]);
// True if `gid` is IPv4-mapped; then *ip is the address (host order).
bool gid_ipv4(const uint8_t gid[16], uint32_t* ip);
// Source IPv4 (host order) of a RoCEv2 UD receive: from the IPv4 header in the GRH area.
uint32_t grh_ipv4_source(const uint8_t* grh);

// Bytes build_message() writes for a payload of `payload_len` bytes.
constexpr size_t message_capacity(size_t payload_len) { return kTagLen + wire::kSumcastHeaderLen + payload_len; }
// Writes tag | header | payload; returns the length (message_capacity of the header's payload).
size_t build_message(uint8_t* buf, uint32_t dest_qp, const wire::SumcastHeader& hdr, const uint8_t* payload);
// The destination QPN of a build_message() buffer.
uint32_t message_dest_qp(const uint8_t* buf);

// Validates a received message (Sumcast header | payload, GRH stripped) as wire::parse_roce
// validates the same bytes after the DETH: version, type, dtype, op, length, range.
wire::ParseError parse_message(std::span<const uint8_t> msg, wire::SumcastHeader* hdr, const uint8_t** payload,
                               size_t* payload_len);

}  // namespace sumcast::shim::verbs
