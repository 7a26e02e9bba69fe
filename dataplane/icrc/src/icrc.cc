// RoCEv2 ICRC with ISA-L's CRC-32 (see icrc.h for the definition).
//
// Per packet: the 48 bytes the ICRC masks (8 x 0xFF | IPv4 | UDP | BTH) are copied to the stack
// and masked, then two ISA-L calls: one over that prefix, one chained over the rest of the packet
// up to the ICRC field. No allocation, no branches on packet content beyond the length guards.
#include "sumcast/icrc/icrc.h"

#include <isa-l/crc.h>

#include <cassert>
#include <cstring>

#include "sumcast/endian.h"
#include "sumcast/wire/format.h"

namespace sumcast::icrc {
namespace {

constexpr size_t kLrhMaskLen = 8;  // the 8 bytes of 0xFF that stand for the IB LRH
// Layout of the masked prefix.
constexpr size_t kPrefixIp = kLrhMaskLen;
constexpr size_t kPrefixUdp = kPrefixIp + wire::kIpv4HeaderLen;
constexpr size_t kPrefixBth = kPrefixUdp + wire::kUdpHeaderLen;
constexpr size_t kPrefixLen = kPrefixBth + wire::kBthLen;  // 48
// IPv4 | UDP | BTH: the headers the prefix copies from the packet.
constexpr size_t kCoveredHeadersLen = kPrefixLen - kLrhMaskLen;  // 40
// Smallest IPv4 packet the ICRC is defined on: headers up to the BTH, then the ICRC itself.
constexpr size_t kMinIpLen = kCoveredHeadersLen + wire::kIcrcLen;  // 44

// Field offsets inside the headers (RFC 791, RFC 768, IBA BTH).
constexpr size_t kIpTos = 1;
constexpr size_t kIpTotalLength = 2;
constexpr size_t kIpId = 4;
constexpr size_t kIpFlagsFrag = 6;
constexpr size_t kIpTtl = 8;
constexpr size_t kIpProto = 9;
constexpr size_t kIpChecksum = 10;
constexpr size_t kIpSrc = 12;
constexpr size_t kIpDst = 16;
constexpr size_t kUdpSrcPort = 0;
constexpr size_t kUdpDstPort = 2;
constexpr size_t kUdpLength = 4;
constexpr size_t kUdpChecksum = 6;
constexpr size_t kBthResv8a = 4;  // FECN | BECN | resv6

constexpr uint8_t kIpv4NoOptions = 0x45;  // version 4, IHL 5
constexpr uint16_t kIpDontFragment = 0x4000;

inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// Masks the variant fields of a prefix whose IPv4 | UDP | BTH are already in place, and CRCs it
// followed by `rest_len` bytes at `rest`.
inline uint32_t crc_masked(uint8_t* prefix, const uint8_t* rest, size_t rest_len) {
  std::memset(prefix, 0xFF, kLrhMaskLen);
  prefix[kPrefixIp + kIpTos] = 0xFF;  // DSCP and ECN
  prefix[kPrefixIp + kIpTtl] = 0xFF;
  prefix[kPrefixIp + kIpChecksum] = 0xFF;
  prefix[kPrefixIp + kIpChecksum + 1] = 0xFF;
  prefix[kPrefixUdp + kUdpChecksum] = 0xFF;
  prefix[kPrefixUdp + kUdpChecksum + 1] = 0xFF;
  prefix[kPrefixBth + kBthResv8a] = 0xFF;  // FECN and BECN live here
  const uint32_t crc = crc32_gzip_refl(0, prefix, kPrefixLen);
  return crc32_gzip_refl(crc, rest, rest_len);
}

// The IPv4 packet inside `frame` (by its total length), or an empty span if the frame is too
// short for it or for an ICRC.
inline std::span<const uint8_t> ip_of_frame(std::span<const uint8_t> frame) {
  if (frame.size() < wire::kIpOffset + kMinIpLen) return {};
  const uint8_t* ip = frame.data() + wire::kIpOffset;
  const size_t total = load_be16(ip + kIpTotalLength);
  if (ip[0] != kIpv4NoOptions || total < kMinIpLen || wire::kIpOffset + total > frame.size()) return {};
  return {ip, total};
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t len) {
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), len);
}

uint32_t compute(std::span<const uint8_t> ip_packet) {
  assert(ip_packet.size() >= kMinIpLen);
  alignas(16) uint8_t prefix[kPrefixLen];
  std::memcpy(prefix + kPrefixIp, ip_packet.data(), kCoveredHeadersLen);
  return crc_masked(prefix, ip_packet.data() + kCoveredHeadersLen,
                    ip_packet.size() - kCoveredHeadersLen - wire::kIcrcLen);
}

bool verify(std::span<const uint8_t> ip_packet) {
  if (ip_packet.size() < kMinIpLen) return false;
  return compute(ip_packet) == load_le32(ip_packet.data() + ip_packet.size() - wire::kIcrcLen);
}

void stamp(std::span<uint8_t> ip_packet) {
  assert(ip_packet.size() >= kMinIpLen);
  if (ip_packet.size() < kMinIpLen) return;
  store_le32(ip_packet.data() + ip_packet.size() - wire::kIcrcLen, compute(ip_packet));
}

bool verify_frame(std::span<const uint8_t> frame) {
  const std::span<const uint8_t> ip = ip_of_frame(frame);
  return !ip.empty() && verify(ip);
}

void stamp_frame(std::span<uint8_t> frame) {
  const std::span<const uint8_t> ip = ip_of_frame(frame);
  assert(!ip.empty());
  if (ip.empty()) return;
  stamp(frame.subspan(wire::kIpOffset, ip.size()));
}

uint32_t compute_udp(const UdpFields& f, std::span<const uint8_t> roce) {
  assert(roce.size() >= wire::kBthLen + wire::kIcrcLen);
  alignas(16) uint8_t prefix[kPrefixLen];
  uint8_t* ip = prefix + kPrefixIp;
  // TOS, TTL and both checksums are masked by crc_masked(); they need no value here.
  ip[0] = kIpv4NoOptions;
  store_be16(ip + kIpTotalLength, static_cast<uint16_t>(wire::kIpv4HeaderLen + wire::kUdpHeaderLen + roce.size()));
  store_be16(ip + kIpId, f.ip_id);
  store_be16(ip + kIpFlagsFrag, f.dont_fragment ? kIpDontFragment : 0);
  ip[kIpProto] = wire::kIpProtoUdp;
  store_be32(ip + kIpSrc, f.src_ip);
  store_be32(ip + kIpDst, f.dst_ip);
  uint8_t* udp = prefix + kPrefixUdp;
  store_be16(udp + kUdpSrcPort, f.src_port);
  store_be16(udp + kUdpDstPort, f.dst_port);
  store_be16(udp + kUdpLength, static_cast<uint16_t>(wire::kUdpHeaderLen + roce.size()));
  std::memcpy(prefix + kPrefixBth, roce.data(), wire::kBthLen);
  return crc_masked(prefix, roce.data() + wire::kBthLen, roce.size() - wire::kBthLen - wire::kIcrcLen);
}

bool verify_udp(const UdpFields& f, std::span<const uint8_t> roce) {
  if (roce.size() < wire::kBthLen + wire::kIcrcLen) return false;
  return compute_udp(f, roce) == load_le32(roce.data() + roce.size() - wire::kIcrcLen);
}

void stamp_udp(const UdpFields& f, std::span<uint8_t> roce) {
  assert(roce.size() >= wire::kBthLen + wire::kIcrcLen);
  if (roce.size() < wire::kBthLen + wire::kIcrcLen) return;
  store_le32(roce.data() + roce.size() - wire::kIcrcLen, compute_udp(f, roce));
}

}  // namespace sumcast::icrc
