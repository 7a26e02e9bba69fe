// Helpers shared by the ICRC tests: hex decoding, a bitwise reference CRC-32 and a reference
// ICRC built the slow, obvious way (copy the whole packet, mask it, CRC it bit by bit). Nothing
// here calls sumcast::icrc, so the tests compare the library with an independent computation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sumcast::icrc::testing {

// Decodes lowercase or uppercase hex; returns false on an odd length or a non-hex character.
inline bool from_hex(std::string_view hex, std::vector<uint8_t>* out) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  out->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>((hi << 4) | lo));
  }
  return true;
}

// CRC-32 (reflected polynomial 0xEDB88320), one bit at a time; chainable like zlib's crc32.
inline uint32_t reference_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Byte offsets, within an IPv4 packet (IHL 5), of the bytes the ICRC masks: TOS, TTL, IPv4
// checksum, UDP checksum, BTH byte 4 (FECN | BECN | resv6).
inline bool is_masked_ip_byte(size_t i) {
  return i == 1 || i == 8 || i == 10 || i == 11 || i == 20 + 6 || i == 20 + 7 || i == 20 + 8 + 4;
}

// The ICRC of an IPv4 packet (through its ICRC field), straight from the definition.
inline uint32_t reference_icrc(const uint8_t* ip, size_t ip_len) {
  std::vector<uint8_t> buf(8, 0xFF);
  buf.insert(buf.end(), ip, ip + ip_len - 4);
  for (size_t i = 0; i < 40; ++i) {
    if (is_masked_ip_byte(i)) buf[8 + i] = 0xFF;
  }
  return reference_crc32(0, buf.data(), buf.size());
}

inline uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

inline std::string to_hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

}  // namespace sumcast::icrc::testing
