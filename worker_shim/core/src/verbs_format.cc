#include "sumcast/shim/verbs_format.h"

#include <cstring>

#include "sumcast/endian.h"

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
  if (hdr->type == wire::MsgType::kAbort ? len != 0 : len != want) return wire::ParseError::kBadLength;
  if (len > wire::kMaxPayloadBytes) return wire::ParseError::kBadLength;
  if (hdr->elem_offset > wire::kMaxElementIndex || hdr->elem_offset + hdr->elem_count > wire::kMaxElementIndex) {
    return wire::ParseError::kBadRange;
  }
  *payload = h + wire::kSumcastHeaderLen;
  *payload_len = len;
  return wire::ParseError::kOk;
}

}  // namespace sumcast::shim::verbs
