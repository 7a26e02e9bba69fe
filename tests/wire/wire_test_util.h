// Helpers shared by the wire tests: an independent bitwise CRC-32 / ICRC (checked against the
// hardware-made golden vectors by TestIcrc.ReproducesTheGoldenVectors), the golden-vector reader,
// and frame builders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::wire::testing {

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32(0, p, n)), one bit at a time: slow and obvious.
inline uint32_t crc32_bitwise(std::span<const uint8_t> bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t b : bytes) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// The RoCEv2 ICRC of a frame (docs/protocol.md §2.1), written from the definition: 8 bytes of 0xFF,
// then IPv4 (TOS, TTL, checksum = 0xFF), UDP (checksum = 0xFFFF), BTH (byte 4 = 0xFF), rest up to
// the ICRC. The IPv4 total length decides where the ICRC is. Returns the CRC value (its
// least-significant byte goes first on the wire).
inline uint32_t icrc_of_frame(std::span<const uint8_t> frame) {
  const size_t ip = kEthHeaderLen;
  const size_t total = (size_t{frame[ip + 2]} << 8) | frame[ip + 3];
  std::vector<uint8_t> m(8 + total - kIcrcLen, 0xFF);
  std::memcpy(m.data() + 8, frame.data() + ip, total - kIcrcLen);
  uint8_t* q = m.data() + 8;
  q[1] = 0xFF;                   // TOS
  q[8] = 0xFF;                   // TTL
  q[10] = q[11] = 0xFF;          // header checksum
  q[20 + 6] = q[20 + 7] = 0xFF;  // UDP checksum
  q[20 + 8 + 4] = 0xFF;          // BTH byte 4: FECN | BECN | resv6
  return crc32_bitwise(m);
}

// Writes the ICRC into the last 4 bytes covered by the IPv4 total length.
inline void stamp_icrc(std::span<uint8_t> frame) {
  const size_t total = (size_t{frame[kEthHeaderLen + 2]} << 8) | frame[kEthHeaderLen + 3];
  const uint32_t c = icrc_of_frame(frame);
  uint8_t* at = frame.data() + kEthHeaderLen + total - kIcrcLen;
  for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(c >> (8 * i));
}

inline std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char ch : hex) {
    int v;
    if (ch >= '0' && ch <= '9')
      v = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
      v = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F')
      v = ch - 'A' + 10;
    else
      continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

struct GoldenVector {
  std::string name;
  std::vector<uint8_t> frame;
  std::vector<uint8_t> icrc;  // wire order
};

// Reads tests/data/vectors/roce_icrc_vectors.txt (empty when it cannot be read: callers assert on
// the count).
inline std::vector<GoldenVector> read_golden_vectors() {
  std::ifstream in(SUMCAST_SOURCE_DIR "/tests/data/vectors/roce_icrc_vectors.txt");
  std::vector<GoldenVector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("name:", 0) == 0) {
      out.push_back({line.substr(line.find_first_not_of(' ', 5)), {}, {}});
    } else if (line.rfind("frame:", 0) == 0 && !out.empty()) {
      out.back().frame = from_hex(line.substr(6));
    } else if (line.rfind("icrc:", 0) == 0 && !out.empty()) {
      out.back().icrc = from_hex(line.substr(5));
    }
  }
  return out;
}

// A frame built by write_frame_headers, payload filled by the caller's bytes, ICRC stamped.
inline std::vector<uint8_t> build_frame(const Addressing& a, const SumcastHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> f(frame_len(payload.size()));
  uint8_t* p = write_frame_headers(f.data(), a, h, payload.size());
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  stamp_icrc(f);
  return f;
}

// An exactly-sized heap copy of the first `len` bytes: any read past it is a heap overflow that
// AddressSanitizer and valgrind report.
inline std::unique_ptr<uint8_t[]> exact_copy(std::span<const uint8_t> bytes, size_t len) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[len]);
  if (len != 0) std::memcpy(buf.get(), bytes.data(), len);
  return buf;
}

}  // namespace sumcast::wire::testing
