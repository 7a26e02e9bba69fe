#include "sumcast/shim/verbs_format.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "sumcast/endian.h"
#include "sumcast/shim/address.h"

namespace sumcast::shim::verbs {

void ipv4_mapped_gid(uint32_t ip, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = 0xFF;
  gid[11] = 0xFF;
  store_be32(gid + 12, ip);
}

bool gid_ipv4(const uint8_t gid[16], uint32_t* ip) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (std::memcmp(gid, kPrefix, sizeof(kPrefix)) != 0) return false;
  *ip = load_be32(gid + 12);
  return true;
}

Status GroupMembership::join(uint32_t group) {
  const std::string what = "verbs: multicast group " + format_ipv4(group);
  if ((group >> 28) != 0xE) return Status::invalid_argument(what + " is not in 224.0.0.0/4");
  if (std::find(groups_.begin(), groups_.end(), group) != groups_.end()) return {};
  if (ops_.attach == nullptr) return Status::internal(what + ": no attach operation");
  uint8_t gid[16];
  ipv4_mapped_gid(group, gid);
  const int rc = ops_.attach(qp_, gid, 0);
  if (rc != 0) return Status::from_errno(what + ": ibv_attach_mcast", rc);
  groups_.push_back(group);
  return {};
}

void GroupMembership::leave_all() {
  for (uint32_t group : groups_) {
    uint8_t gid[16];
    ipv4_mapped_gid(group, gid);
    if (ops_.detach == nullptr || ops_.detach(qp_, gid, 0) != 0) ++detach_failures_;
  }
  groups_.clear();
}

uint32_t grh_ipv4_source(const uint8_t* grh) { return load_be32(grh + kGrhIpv4Offset + 12); }

size_t build_message(uint8_t* buf, uint32_t dest_qp, const wire::SumcastHeader& hdr, const uint8_t* payload) {
  std::memcpy(buf, &dest_qp, kTagLen);
  wire::encode_sumcast_header(hdr, buf + kTagLen);
  const size_t payload_len = size_t{hdr.elem_count} * wire::dtype_size(hdr.dtype);
  if (payload_len != 0) std::memcpy(buf + kTagLen + wire::kSumcastHeaderLen, payload, payload_len);
  return message_capacity(payload_len);
}

uint32_t message_dest_qp(const uint8_t* buf) {
  uint32_t q;
  std::memcpy(&q, buf, kTagLen);
  return q;
}

wire::ParseError parse_message(std::span<const uint8_t> msg, wire::SumcastHeader* hdr, const uint8_t** payload,
                               size_t* payload_len) {
  if (msg.size() < wire::kSumcastHeaderLen) return wire::ParseError::kTruncatedHeader;
  const uint8_t* h = msg.data();
  if (h[0] != wire::kProtocolVersion) return wire::ParseError::kBadVersion;
  if (!wire::is_valid_msg_type(h[1])) return wire::ParseError::kBadType;
  if (!wire::is_valid_dtype(h[2])) return wire::ParseError::kBadDtype;
  if (!wire::is_valid_op(h[3])) return wire::ParseError::kBadOp;
  *hdr = wire::decode_sumcast_header(h);
  const size_t len = msg.size() - wire::kSumcastHeaderLen;
  const uint64_t want = uint64_t{hdr->elem_count} * wire::dtype_size(hdr->dtype);
  if (wire::carries_payload(hdr->type) ? len != want : len != 0) return wire::ParseError::kBadLength;
  if (len > wire::kMaxPayloadBytes) return wire::ParseError::kBadLength;
  if (hdr->elem_offset > wire::kMaxElementIndex || hdr->elem_offset + hdr->elem_count > wire::kMaxElementIndex) {
    return wire::ParseError::kBadRange;
  }
  *payload = h + wire::kSumcastHeaderLen;
  *payload_len = len;
  return wire::ParseError::kOk;
}

}  // namespace sumcast::shim::verbs
