// CRC-32 arithmetic (zlib's polynomial, reflected). The engine stamps one result to n destinations
// with one CRC of the payload: the payload's CRC is computed once and combined with each
// destination's header CRC, so sending a result to n ranks does not read its payload n times. A
// kernel-socket receiver finds the IPv4 identification a datagram's ICRC was stamped for with one
// CRC (icrc.h, match_udp_ip_id).
//
// Values are CRC-32 remainders as crc32() returns them: bit 31 holds the coefficient of x^0,
// bit 0 that of x^31. For byte strings A and B (crc = zlib's crc32, conditioning included):
//   crc(A || B) = multiply(crc(A), shift_for(|B|)) ^ crc(B)
// and, for two strings of equal length that differ in some bytes, crc(A) ^ crc(A') depends on
// the differing bytes only (the CRC is affine), which is how per-destination header CRCs are
// derived from one header's.
//
// Thread-safe, allocation-free. multiply() uses PCLMULQDQ when the CPU has it (chosen once at
// load time; ~10 cycles), else a 32-step shift-and-add.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sumcast::icrc::crc {

// a * b mod P.
uint32_t multiply(uint32_t a, uint32_t b);
// x^(8 * bytes) mod P: what multiply() needs to move a CRC past `bytes` more bytes.
uint32_t shift_for(uint64_t bytes);

}  // namespace sumcast::icrc::crc
