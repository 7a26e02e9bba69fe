// Parsing and building Sumcast RoCEv2 frames (docs/protocol.md §2–§6).
//
// parse_frame() and parse_roce() check structure only (lengths, versions, known enums,
// consistency of the element count with the payload length) and never read past the span given. Checks against a
// job (Q_Key, source, rank, slot range, dtype/op) and the ICRC belong to the caller.
// Builders write headers into a caller buffer; the ICRC is stamped afterwards by sumcast::icrc.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "sumcast/endian.h"
#include "sumcast/wire/format.h"

namespace sumcast::wire {

// Every structural rejection has a name (docs/protocol.md §6). X-macro: enum and names.
#define SUMCAST_PARSE_ERRORS(X)                                                \
  X(kOk, "ok")                                                                 \
  X(kTruncatedEth, "truncated_eth") /* shorter than an Ethernet header */      \
  X(kNotIpv4, "not_ipv4")           /* other EtherType (IPv6, LLDP, VLAN) */   \
  X(kTruncatedIp, "truncated_ip")   /* frame ends inside the IPv4 header */    \
  X(kBadIpHeader, "bad_ip_header")  /* version, IHL, total, UDP options */     \
  X(kIpFragment, "ip_fragment")     /* MF set or fragment offset != 0 */       \
  X(kNotUdp, "not_udp")             /* IP protocol is not UDP */               \
  X(kTruncatedUdp, "truncated_udp")                                            \
  X(kBadUdpLength, "bad_udp_length") /* UDP length != IP payload length */     \
  X(kNotRocePort, "not_roce_port")   /* UDP destination port != 4791 */        \
  X(kTruncatedBth, "truncated_bth")                                            \
  X(kBadOpcode, "bad_opcode") /* BTH opcode is not UD SEND_ONLY */             \
  X(kBadBth, "bad_bth")       /* TVer != 0 or P_Key not default */             \
  X(kTruncatedDeth, "truncated_deth")                                          \
  X(kTruncatedHeader, "truncated_header") /* ends inside the Sumcast header */ \
  X(kBadVersion, "bad_version")           /* Sumcast header version unknown */ \
  X(kBadType, "bad_type")                 /* message type unknown */           \
  X(kBadDtype, "bad_dtype")               /* dtype unknown */                  \
  X(kBadOp, "bad_op")                     /* reduction op unknown */           \
  X(kBadLength, "bad_length")             /* payload length != count * size */ \
  X(kBadRange, "bad_range")               /* offset + count beyond 2^40 */

enum class ParseError : uint8_t {
#define SUMCAST_X(name, str) name,
  SUMCAST_PARSE_ERRORS(SUMCAST_X)
#undef SUMCAST_X
};
inline constexpr int kParseErrorCount = 0
#define SUMCAST_X(name, str) +1
    SUMCAST_PARSE_ERRORS(SUMCAST_X)
#undef SUMCAST_X
    ;
inline const char* parse_error_name(ParseError e) {
  static constexpr const char* kNames[] = {
#define SUMCAST_X(name, str) str,
      SUMCAST_PARSE_ERRORS(SUMCAST_X)
#undef SUMCAST_X
  };
  auto i = static_cast<size_t>(e);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

// What parse_frame()/parse_roce() found. Pointers point into the parsed span.
struct ParsedPacket {
  uint8_t dst_mac[6];
  uint8_t src_mac[6];
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;  // host order
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t bth_flags = 0;  // SE|M|PadCnt|TVer
  uint32_t dest_qp = 0;   // BTH destination QP (24 bits)
  uint32_t psn = 0;       // BTH PSN (24 bits)
  uint32_t qkey = 0;      // DETH Q_Key
  uint32_t src_qp = 0;    // DETH source QP (24 bits)
  SumcastHeader hdr;
  const uint8_t* ip = nullptr;       // start of the IPv4 header (ICRC coverage starts here)
  size_t ip_len = 0;                 // IPv4 total length (through the ICRC)
  const uint8_t* payload = nullptr;  // first payload byte
  size_t payload_len = 0;            // bytes of payload (elem_count * dtype_size)
};

// Decodes the 32-byte Sumcast header at `p` (no validation).
inline SumcastHeader decode_sumcast_header(const uint8_t* p) {
  SumcastHeader h;
  h.version = p[0];
  h.type = static_cast<MsgType>(p[1]);
  h.dtype = static_cast<Dtype>(p[2]);
  h.op = static_cast<ReduceOp>(p[3]);
  h.job_id = load_be32(p + 4);
  h.rank = load_be16(p + 8);
  h.slot = load_be16(p + 10);
  h.round = load_be32(p + 12);
  h.coll_seq = load_be32(p + 16);
  h.elem_count = load_be16(p + 20);
  h.flags = p[22];
  h.status = p[23];
  h.elem_offset = load_be64(p + 24);
  return h;
}

inline void encode_sumcast_header(const SumcastHeader& h, uint8_t* p) {
  p[0] = h.version;
  p[1] = static_cast<uint8_t>(h.type);
  p[2] = static_cast<uint8_t>(h.dtype);
  p[3] = static_cast<uint8_t>(h.op);
  store_be32(p + 4, h.job_id);
  store_be16(p + 8, h.rank);
  store_be16(p + 10, h.slot);
  store_be32(p + 12, h.round);
  store_be32(p + 16, h.coll_seq);
  store_be16(p + 20, h.elem_count);
  p[22] = h.flags;
  p[23] = h.status;
  store_be64(p + 24, h.elem_offset);
}

// Validates the BTH..payload part (`roce` starts at the BTH and ends after the ICRC), as both the
// appliance (from a frame) and a kernel-socket worker (from a UDP datagram) receive it.
inline ParseError parse_roce(std::span<const uint8_t> roce, ParsedPacket* out) {
  const uint8_t* p = roce.data();
  const size_t n = roce.size();
  if (n < kBthLen) return ParseError::kTruncatedBth;
  if (p[0] != kOpcodeUdSendOnly) return ParseError::kBadOpcode;
  out->bth_flags = p[1];
  if ((p[1] & 0x0F) != kBthTver || load_be16(p + 2) != kDefaultPKey) return ParseError::kBadBth;
  out->dest_qp = load_be24(p + 5);
  out->psn = load_be24(p + 9);
  if (n < kBthLen + kDethLen) return ParseError::kTruncatedDeth;
  out->qkey = load_be32(p + kBthLen);
  out->src_qp = load_be24(p + kBthLen + 5);
  if (n < kRoceHeadersLen + kIcrcLen) return ParseError::kTruncatedHeader;
  const uint8_t* h = p + kBthLen + kDethLen;
  if (h[0] != kProtocolVersion) return ParseError::kBadVersion;
  if (!is_valid_msg_type(h[1])) return ParseError::kBadType;
  if (!is_valid_dtype(h[2])) return ParseError::kBadDtype;
  if (!is_valid_op(h[3])) return ParseError::kBadOp;
  out->hdr = decode_sumcast_header(h);
  const size_t pad = (p[1] >> 4) & 0x3;  // BTH PadCnt
  const size_t body = n - kRoceHeadersLen - kIcrcLen;
  if (pad > body) return ParseError::kBadLength;
  const size_t payload_len = body - pad;
  const uint64_t want = uint64_t{out->hdr.elem_count} * dtype_size(out->hdr.dtype);
  if (carries_payload(out->hdr.type) ? payload_len != want : payload_len != 0) return ParseError::kBadLength;
  if (payload_len > kMaxPayloadBytes) return ParseError::kBadLength;
  if (out->hdr.elem_offset > kMaxElementIndex || out->hdr.elem_offset + out->hdr.elem_count > kMaxElementIndex) {
    return ParseError::kBadRange;
  }
  out->payload = h + kSumcastHeaderLen;
  out->payload_len = payload_len;
  return ParseError::kOk;
}

// A RoCEv2 CNP's BTH..ICRC (docs/protocol.md §3): BTH (OpCode 0x81, P_Key default, BECN,
// DestQP, PSN 0) | kCnpReservedLen zero bytes | ICRC.
inline constexpr size_t kCnpRoceLen = kBthLen + kCnpReservedLen + kIcrcLen;  // 32

// Writes a CNP to `dest_qp` at `p` (kCnpRoceLen bytes) with the ICRC field zero; the caller stamps it.
inline void write_cnp(uint8_t* p, uint32_t dest_qp) {
  std::memset(p, 0, kCnpRoceLen);
  p[0] = kOpcodeCnp;
  p[1] = kBthTver;
  store_be16(p + 2, kDefaultPKey);
  p[4] = kBthBecn;
  store_be24(p + 5, dest_qp);
}

// Whether `roce` (BTH..ICRC) is a CNP: opcode 0x81 and the CNP's length and BTH. Sets *dest_qp.
// The ICRC is not checked here.
inline bool parse_cnp(std::span<const uint8_t> roce, uint32_t* dest_qp) {
  const uint8_t* p = roce.data();
  if (roce.size() != kCnpRoceLen || p[0] != kOpcodeCnp) return false;
  if ((p[1] & 0x0F) != kBthTver || load_be16(p + 2) != kDefaultPKey) return false;
  *dest_qp = load_be24(p + 5);
  return true;
}

// Validates a whole Ethernet frame. Trailing bytes past the IPv4 total length (Ethernet padding)
// are ignored. The UDP checksum is never checked (§2: the ICRC is the integrity check).
inline ParseError parse_frame(std::span<const uint8_t> frame, ParsedPacket* out) {
  const uint8_t* p = frame.data();
  const size_t n = frame.size();
  if (n < kEthHeaderLen) return ParseError::kTruncatedEth;
  std::memcpy(out->dst_mac, p, 6);
  std::memcpy(out->src_mac, p + 6, 6);
  if (load_be16(p + 12) != kEtherTypeIpv4) return ParseError::kNotIpv4;
  if (n < kIpOffset + kIpv4HeaderLen) return ParseError::kTruncatedIp;
  const uint8_t* ip = p + kIpOffset;
  const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
  if ((ip[0] >> 4) != 4 || ihl < kIpv4HeaderLen) return ParseError::kBadIpHeader;
  const size_t total = load_be16(ip + 2);
  if (total < ihl || kIpOffset + total > n) {
    return total < ihl ? ParseError::kBadIpHeader : ParseError::kTruncatedIp;
  }
  if ((load_be16(ip + 6) & 0x3FFF) != 0) return ParseError::kIpFragment;
  // A sound header with options carrying another protocol is not malformed: IGMP (Router Alert,
  // IHL 6), which every multicast querier and member sends and switches flood to the appliance.
  if (ip[9] != kIpProtoUdp) return ParseError::kNotUdp;
  if (ihl != kIpv4HeaderLen) return ParseError::kBadIpHeader;  // RoCEv2 datagrams carry no options
  out->src_ip = load_be32(ip + 12);
  out->dst_ip = load_be32(p + kIpDstOffset);
  if (total < kIpv4HeaderLen + kUdpHeaderLen) return ParseError::kTruncatedUdp;
  const uint8_t* udp = ip + kIpv4HeaderLen;
  out->src_port = load_be16(udp);
  out->dst_port = load_be16(udp + 2);
  if (load_be16(udp + 4) != total - kIpv4HeaderLen) return ParseError::kBadUdpLength;
  if (out->dst_port != kRoceUdpPort) return ParseError::kNotRocePort;
  out->ip = ip;
  out->ip_len = total;
  return parse_roce(std::span<const uint8_t>(udp + kUdpHeaderLen, total - kIpv4HeaderLen - kUdpHeaderLen), out);
}

// RFC 1071 checksum of an IPv4 header (20 bytes), with the checksum field taken as zero.
inline uint16_t ipv4_header_checksum(const uint8_t* ip) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4HeaderLen; i += 2) {
    if (i == 10) continue;
    sum += load_be16(ip + i);
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The UDP checksum (RFC 768, RFC 1071) of a frame as write_frame_headers lays it out, with its
// checksum field zero: the pseudo-header (addresses, protocol, UDP length), the UDP header and
// everything after it, the ICRC included, so the ICRC is stamped first. A zero sum is sent as
// 0xFFFF. §2: senders may leave the field zero; an appliance whose peers are kernel UDP sockets
// fills it, since Linux coalesces (UDP GRO) only datagrams that carry one.
inline uint16_t fold_checksum(uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
inline uint16_t udp_checksum(const uint8_t* frame) {
  const uint8_t* ip = frame + kIpOffset;
  const uint8_t* udp = ip + kIpv4HeaderLen;
  const size_t n = load_be16(udp + 4);
  // Sums of 32-bit words in host order, folded, are the byte-swapped sum of 16-bit big-endian
  // words (RFC 1071 §2(B)); the compiler vectorises this loop.
  uint64_t wide = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    uint32_t w;
    std::memcpy(&w, udp + i, 4);
    wide += w;
  }
  uint64_t sum = 0;
  for (; i + 2 <= n; i += 2) sum += load_be16(udp + i);
  if (i < n) sum += uint32_t{udp[i]} << 8;
  uint16_t folded = fold_checksum(wide);
  if constexpr (std::endian::native == std::endian::little)
    folded = static_cast<uint16_t>((folded >> 8) | (folded << 8));
  sum += folded;
  for (size_t k = 12; k < 20; k += 2) sum += load_be16(ip + k);
  sum += kIpProtoUdp + n;
  const auto c = static_cast<uint16_t>(~fold_checksum(sum));
  return c != 0 ? c : 0xFFFF;
}
// RFC 1624 eqn. 3: the checksum `check` after the `n` bytes `before` (at an even offset from the
// UDP header or in the pseudo-header; n even) became `after`.
inline uint16_t udp_checksum_update(uint16_t check, const uint8_t* before, const uint8_t* after, size_t n) {
  uint64_t sum = static_cast<uint16_t>(~check);
  for (size_t i = 0; i + 2 <= n; i += 2) sum += static_cast<uint16_t>(~load_be16(before + i)) + load_be16(after + i);
  const auto c = static_cast<uint16_t>(~fold_checksum(sum));
  return c != 0 ? c : 0xFFFF;
}

// Where a frame goes and where it comes from.
struct Addressing {
  uint8_t src_mac[6] = {};
  uint8_t dst_mac[6] = {};
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;  // host order
  uint16_t src_port = kRoceUdpPort;
  uint16_t dst_port = kRoceUdpPort;
  uint8_t tos = 0;
  uint8_t ttl = 64;
  uint16_t ip_id = 0;    // 0 with DF set, as Linux sends from unconnected UDP sockets (§2)
  uint32_t dest_qp = 0;  // BTH destination QP
  uint32_t src_qp = 0;   // DETH source QP
  uint32_t qkey = 0;     // DETH Q_Key
  uint32_t psn = 0;
};

// Writes BTH | DETH | Sumcast header for a payload of `payload_len` bytes at `p` (kRoceHeadersLen
// bytes). PadCnt is set so that payload + pad is a multiple of 4.
inline void write_roce_headers(uint8_t* p, const Addressing& a, const SumcastHeader& h, size_t payload_len) {
  const uint8_t pad = static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
  p[0] = kOpcodeUdSendOnly;
  p[1] = static_cast<uint8_t>((pad << 4) | kBthTver);
  store_be16(p + 2, kDefaultPKey);
  p[4] = 0;
  store_be24(p + 5, a.dest_qp);
  p[8] = 0;
  store_be24(p + 9, a.psn & 0xFFFFFF);
  store_be32(p + kBthLen, a.qkey);
  p[kBthLen + 4] = 0;
  store_be24(p + kBthLen + 5, a.src_qp);
  encode_sumcast_header(h, p + kBthLen + kDethLen);
}

// Bytes of BTH..ICRC for a payload of `payload_len` bytes (including the pad).
constexpr size_t roce_len(size_t payload_len) {
  return kRoceHeadersLen + payload_len + ((4 - (payload_len & 3)) & 3) + kIcrcLen;
}
// Bytes of a whole frame for a payload of `payload_len` bytes.
constexpr size_t frame_len(size_t payload_len) { return kBthOffset + roce_len(payload_len); }

// Writes Ethernet | IPv4 | UDP | BTH | DETH | Sumcast header into `frame` (at least
// frame_len(payload_len) bytes), zeroes the pad and the ICRC field, and returns a pointer to the
// payload area. The caller writes the payload, then stamps the ICRC (sumcast::icrc::stamp_frame).
inline uint8_t* write_frame_headers(uint8_t* frame, const Addressing& a, const SumcastHeader& h, size_t payload_len) {
  const size_t rlen = roce_len(payload_len);
  std::memcpy(frame, a.dst_mac, 6);
  std::memcpy(frame + 6, a.src_mac, 6);
  store_be16(frame + 12, kEtherTypeIpv4);
  uint8_t* ip = frame + kIpOffset;
  ip[0] = 0x45;
  ip[1] = a.tos;
  store_be16(ip + 2, static_cast<uint16_t>(kIpv4HeaderLen + kUdpHeaderLen + rlen));
  store_be16(ip + 4, a.ip_id);
  store_be16(ip + 6, 0x4000);  // DF
  ip[8] = a.ttl;
  ip[9] = kIpProtoUdp;
  store_be32(ip + 12, a.src_ip);
  store_be32(ip + 16, a.dst_ip);
  store_be16(ip + 10, ipv4_header_checksum(ip));
  uint8_t* udp = ip + kIpv4HeaderLen;
  store_be16(udp, a.src_port);
  store_be16(udp + 2, a.dst_port);
  store_be16(udp + 4, static_cast<uint16_t>(kUdpHeaderLen + rlen));
  store_be16(udp + 6, 0);  // §2: UDP checksum 0 (RoCEv2 senders may leave it zero)
  write_roce_headers(udp + kUdpHeaderLen, a, h, payload_len);
  uint8_t* payload = frame + kPayloadOffset;
  std::memset(payload + payload_len, 0, rlen - kRoceHeadersLen - payload_len);
  return payload;
}

}  // namespace sumcast::wire
