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
#include <vector>

#include "sumcast/status.h"
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

// The seam to a UD QP's multicast attachment: the transport passes ibv_attach_mcast /
// ibv_detach_mcast (wrapped: `qp` is the ibv_qp, `gid` the group's GID, `lid` 0 on RoCE);
// tests pass fakes. Each returns 0 or an errno value.
struct McastOps {
  int (*attach)(void* qp, const uint8_t gid[16], uint16_t lid) = nullptr;
  int (*detach)(void* qp, const uint8_t gid[16], uint16_t lid) = nullptr;
};

// The groups one QP is attached to: join() attaches to the IPv4-mapped GID ::ffff:group (once
// per group), leave_all() detaches from each (idempotent; a failed detach is counted, the group
// forgotten all the same: the QP's destruction detaches it too).
class GroupMembership {
 public:
  GroupMembership(McastOps ops, void* qp) : ops_(ops), qp_(qp) {}
  Status join(uint32_t group);
  void leave_all();
  const std::vector<uint32_t>& groups() const { return groups_; }
  uint64_t detach_failures() const { return detach_failures_; }

 private:
  McastOps ops_;
  void* qp_;
  std::vector<uint32_t> groups_;  // host order
  uint64_t detach_failures_ = 0;
};

}  // namespace sumcast::shim::verbs
