// RoCEv2 invariant CRC (docs/protocol.md §2.1), computed with ISA-L's CRC-32.
//
// ICRC = CRC-32 (as zlib's crc32, initial value 0) over: 8 bytes of 0xFF (standing for the IB
// LRH) | IPv4 header with TOS (DSCP and ECN) = 0xFF, TTL = 0xFF and header checksum = 0xFFFF |
// UDP header with checksum = 0xFFFF | BTH with byte 4 = 0xFF | everything after the BTH up to
// (not including) the ICRC. BTH byte 4 is the IBA's resv8a; RoCEv2 congestion control put FECN
// and BECN in its top two bits (F|B|resv6), so they are masked with it. BTH byte 8 (AckReq|resv7)
// is covered, as are the IPv4 ID, flags and lengths and the UDP ports and length. This is what
// scapy.contrib.roce computes (fecn = becn = 1, resv6 = all ones). The ICRC field holds the CRC
// value least-significant byte first. The functions only mask and CRC: any BTH opcode works
// (UD, RC, UC, CNP). All functions are thread-safe and allocation-free.
//
// Two implementations of the masked CRC, chosen once at load time: "avx512", one pass of
// carry-less multiplication over the masked headers (kept in registers) and the rest, where the
// CPU has AVX-512 BW/VL and VPCLMULQDQ; "isal", the masked headers stored on the stack and two
// ISA-L calls, everywhere. SUMCAST_ICRC=isal|avx512 in the environment picks one (an unknown or
// unsupported value is reported on stderr and the default kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sumcast::icrc {

enum class Impl : uint8_t { kIsal = 0, kAvx512 = 1 };
const char* impl_name(Impl impl);
bool impl_supported(Impl impl);  // this CPU runs it
Impl active_impl();              // what compute/verify/stamp use

// zlib-compatible CRC-32: crc32(0, p, n) == zlib crc32(0, p, n); chainable.
uint32_t crc32(uint32_t crc, const void* data, size_t len);

// `ip_packet` runs from the first byte of the IPv4 header to the last byte of the ICRC field
// (IPv4 total length bytes). Precondition: at least 20 + 8 + 12 + 4 bytes, IHL = 5 (verify is
// false for a shorter span). compute returns the CRC value; the wire carries it little-endian.
uint32_t compute(std::span<const uint8_t> ip_packet);
// compute() with a given implementation (tests, benchmarks); impl_supported(impl) must hold.
uint32_t compute_with(Impl impl, std::span<const uint8_t> ip_packet);
bool verify(std::span<const uint8_t> ip_packet);
void stamp(std::span<uint8_t> ip_packet);

// Same, for a whole Ethernet frame (IPv4 starts at byte 14); `frame` may carry Ethernet padding,
// the IPv4 total length decides where the ICRC is. verify_frame takes any bytes: false where they
// hold no IPv4 header without options whose total length fits the frame and covers the ICRC's
// headers (it reads nothing outside `frame`). stamp_frame's precondition: wire::write_frame_headers
// wrote the frame.
bool verify_frame(std::span<const uint8_t> frame);
// verify_frame() with a given implementation (tests, benchmarks); impl_supported(impl) must hold.
bool verify_frame_with(Impl impl, std::span<const uint8_t> frame);
void stamp_frame(std::span<uint8_t> frame);

// Kernel UDP sockets: the kernel writes the IPv4 and UDP headers, so the ICRC is computed over
// headers reconstructed from these fields (§2.2: unconnected socket, DF set, IP ID 0).
struct UdpFields {
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;  // host order
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint16_t ip_id = 0;  // what Linux writes for a DF datagram from an unconnected socket
  bool dont_fragment = true;
};
// `roce` runs from the BTH to the end of the ICRC field (the UDP payload).
uint32_t compute_udp(const UdpFields& f, std::span<const uint8_t> roce);
uint32_t compute_udp_with(Impl impl, const UdpFields& f, std::span<const uint8_t> roce);
bool verify_udp(const UdpFields& f, std::span<const uint8_t> roce);
void stamp_udp(const UdpFields& f, std::span<uint8_t> roce);
// A kernel socket does not show a datagram's IPv4 identification, and a datagram sent in a
// UDP_SEGMENT train carries an ICRC for its index in the train (docs/protocol.md §2.2), a lone
// one for 0. The identification in [0, count) (count <= 65536) that the datagram's ICRC is right
// for, or -1 where there is none; f.ip_id (the expected one, < count) is tried first. One CRC of
// the datagram, as verify_udp; where it does not hold for f.ip_id, CRC arithmetic (combine.h: the
// CRC is affine, so another identification changes it by a value linear in the difference) tries
// the rest without reading the datagram again. Accepting `count` identifications lets `count`
// times as many corruptions through (2^-26 of random ones for count 64).
int match_udp_ip_id(const UdpFields& f, std::span<const uint8_t> roce, uint32_t count);

}  // namespace sumcast::icrc
