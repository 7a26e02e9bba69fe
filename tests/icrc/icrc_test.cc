// Unit tests of sumcast::icrc: golden vectors from a real NIC, a bitwise reference, single-bit
// flips, masked fields, the kernel-socket (UDP fields) variant and its identification search,
// CRC-32 against zlib, and frames
// built by sumcast::wire.
#include "sumcast/icrc/icrc.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifdef SUMCAST_HAVE_ZLIB
#include <zlib.h>
#endif

#include "icrc_test_support.h"
#include "sumcast/endian.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::icrc {
namespace {

using testing::from_hex;
using testing::is_masked_ip_byte;
using testing::le32;
using testing::reference_crc32;
using testing::reference_icrc;

struct Vector {
  std::string name;
  std::vector<uint8_t> frame;
  std::vector<uint8_t> icrc;  // wire order
};

// Reads tests/data/vectors/roce_icrc_vectors.txt ('name:', 'source:', 'frame:', 'icrc:' blocks).
std::vector<Vector> load_vectors() {
  const std::string path = std::string(SUMCAST_SOURCE_DIR) + "/tests/data/vectors/roce_icrc_vectors.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (key == "name") {
      out.push_back(Vector{value, {}, {}});
    } else if (key == "frame" && !out.empty()) {
      EXPECT_TRUE(from_hex(value, &out.back().frame)) << out.back().name;
    } else if (key == "icrc" && !out.empty()) {
      EXPECT_TRUE(from_hex(value, &out.back().icrc)) << out.back().name;
    }
  }
  return out;
}

std::span<const uint8_t> ip_span(const std::vector<uint8_t>& frame) {
  const size_t total = load_be16(frame.data() + wire::kIpOffset + 2);
  return {frame.data() + wire::kIpOffset, total};
}

std::vector<uint8_t> le_bytes(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}

// A Sumcast frame (UD SEND_ONLY, fp32 payload of `payload_len` bytes) with its ICRC stamped.
std::vector<uint8_t> make_frame(size_t payload_len, uint32_t seed, wire::Addressing* addr_out = nullptr) {
  std::mt19937 rng(seed);
  wire::Addressing a;
  for (auto& b : a.src_mac) b = static_cast<uint8_t>(rng());
  for (auto& b : a.dst_mac) b = static_cast<uint8_t>(rng());
  a.src_ip = 0x0A000000u | (rng() & 0xFFFF);
  a.dst_ip = 0x0A010000u | (rng() & 0xFFFF);
  a.src_port = static_cast<uint16_t>(49152 + (rng() & 0x3FFF));
  a.tos = static_cast<uint8_t>(rng());
  a.ttl = static_cast<uint8_t>(rng() | 1);
  a.dest_qp = rng() & 0xFFFFFF;
  a.src_qp = rng() & 0xFFFFFF;
  a.qkey = static_cast<uint32_t>(rng());
  a.psn = rng() & 0xFFFFFF;
  wire::SumcastHeader h;
  h.job_id = static_cast<uint32_t>(rng());
  h.rank = static_cast<uint16_t>(rng() & 0xFF);
  h.slot = static_cast<uint16_t>(rng() & 0xFFF);
  h.round = rng() & 0xFFFF;
  h.coll_seq = static_cast<uint32_t>(rng());
  h.elem_count = static_cast<uint16_t>(payload_len / wire::dtype_size(wire::Dtype::kFp32));
  h.elem_offset = rng() & 0xFFFFFF;
  std::vector<uint8_t> frame(wire::frame_len(payload_len));
  uint8_t* payload = wire::write_frame_headers(frame.data(), a, h, payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(rng());
  stamp_frame(frame);
  if (addr_out != nullptr) *addr_out = a;
  return frame;
}

UdpFields udp_fields_of(const wire::Addressing& a) {
  UdpFields f;
  f.src_ip = a.src_ip;
  f.dst_ip = a.dst_ip;
  f.src_port = a.src_port;
  f.dst_port = a.dst_port;
  f.ip_id = a.ip_id;
  f.dont_fragment = true;
  return f;
}

TEST(IcrcVectors, GoldenNicVectorsVerifyAndMatchReference) {
  const std::vector<Vector> vectors = load_vectors();
  ASSERT_EQ(vectors.size(), 2u);
  for (const Vector& v : vectors) {
    SCOPED_TRACE(v.name);
    ASSERT_GE(v.frame.size(), wire::kBthOffset + wire::kBthLen + wire::kIcrcLen);
    ASSERT_EQ(v.icrc.size(), 4u);
    const std::span<const uint8_t> ip = ip_span(v.frame);
    ASSERT_LE(wire::kIpOffset + ip.size(), v.frame.size());
    EXPECT_TRUE(std::equal(v.icrc.begin(), v.icrc.end(), ip.end() - 4)) << "icrc: is not the frame's last 4 bytes";
    EXPECT_TRUE(verify_frame(v.frame));
    EXPECT_TRUE(verify(ip));
    EXPECT_EQ(le_bytes(compute(ip)), v.icrc);
    EXPECT_EQ(compute(ip), reference_icrc(ip.data(), ip.size()));
  }
}

TEST(IcrcVectors, CnpVectorIsNotUdAndStillVerifies) {
  const std::vector<Vector> vectors = load_vectors();
  ASSERT_FALSE(vectors.empty());
  const Vector& cnp = vectors[0];
  ASSERT_GT(cnp.frame.size(), wire::kBthOffset);
  EXPECT_EQ(cnp.frame[wire::kBthOffset], 0x81);             // RoCEv2 CNP, an RC-style opcode
  EXPECT_EQ(cnp.frame[wire::kBthOffset + 4] & 0x40, 0x40);  // BECN set, masked by the ICRC
  EXPECT_TRUE(verify_frame(cnp.frame));
}

TEST(IcrcVectors, StampRestoresGoldenIcrc) {
  for (Vector v : load_vectors()) {
    SCOPED_TRACE(v.name);
    const size_t total = ip_span(v.frame).size();
    std::fill_n(v.frame.begin() + static_cast<std::ptrdiff_t>(wire::kIpOffset + total - 4), 4, uint8_t{0});
    EXPECT_FALSE(verify_frame(v.frame));
    stamp_frame(v.frame);
    EXPECT_TRUE(std::equal(v.icrc.begin(), v.icrc.end(),
                           v.frame.begin() + static_cast<std::ptrdiff_t>(wire::kIpOffset + total - 4)));
  }
}

// Flips every bit of the IPv4 packet in turn: a bit in a masked field keeps the ICRC valid, any
// other bit (headers, payload, the ICRC itself) must make verify() fail.
void check_every_bit(std::vector<uint8_t> frame) {
  ASSERT_TRUE(verify_frame(frame));
  const size_t total = ip_span(frame).size();
  uint8_t* ip = frame.data() + wire::kIpOffset;
  size_t wrong = 0;
  size_t masked_bits = 0;
  for (size_t byte = 0; byte < total; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      ip[byte] ^= static_cast<uint8_t>(1u << bit);
      const bool ok = verify(std::span<const uint8_t>(ip, total));
      ip[byte] ^= static_cast<uint8_t>(1u << bit);
      const bool masked = is_masked_ip_byte(byte);
      masked_bits += masked ? 1 : 0;
      if (ok != masked && ++wrong <= 5) {
        ADD_FAILURE() << "byte " << byte << " bit " << bit
                      << (masked ? " is masked but failed" : " is covered but passed");
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << "of " << total * 8 << " bits";
  EXPECT_EQ(masked_bits, 7u * 8u);
  // The Ethernet header is outside the ICRC.
  for (size_t byte = 0; byte < 12; ++byte) {
    frame[byte] ^= 0xA5;
    EXPECT_TRUE(verify_frame(frame)) << "MAC byte " << byte;
    frame[byte] ^= 0xA5;
  }
}

TEST(IcrcBitFlip, EveryCoveredBitFailsEveryMaskedBitPassesOnVectors) {
  for (const Vector& v : load_vectors()) {
    SCOPED_TRACE(v.name);
    check_every_bit(v.frame);
  }
}

TEST(IcrcBitFlip, EveryCoveredBitFailsEveryMaskedBitPassesOnSumcastFrames) {
  for (size_t payload : {size_t{0}, size_t{4}, size_t{1024}}) {
    SCOPED_TRACE(payload);
    check_every_bit(make_frame(payload, static_cast<uint32_t>(payload) + 7));
  }
}

TEST(IcrcMasking, MaskedFieldsTakeAnyValue) {
  std::vector<uint8_t> frame = make_frame(256, 11);
  const uint32_t want = compute(ip_span(frame));
  uint8_t* ip = frame.data() + wire::kIpOffset;
  uint8_t* udp = ip + wire::kIpv4HeaderLen;
  uint8_t* bth = udp + wire::kUdpHeaderLen;
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    ip[1] = static_cast<uint8_t>(rng());  // DSCP and ECN (CE = 3)
    ip[8] = static_cast<uint8_t>(rng());  // TTL
    store_be16(ip + 10, static_cast<uint16_t>(rng()));
    store_be16(udp + 6, static_cast<uint16_t>(rng()));
    bth[4] = static_cast<uint8_t>(rng());
    ASSERT_TRUE(verify_frame(frame)) << "iteration " << i;
    ASSERT_EQ(compute(ip_span(frame)), want);
  }
  for (uint8_t fb : {uint8_t{0x80}, uint8_t{0x40}, uint8_t{0xC0}, uint8_t{0x3F}, uint8_t{0x00}}) {
    bth[4] = fb;  // FECN, BECN, both, resv6 only
    EXPECT_TRUE(verify_frame(frame)) << "BTH byte 4 = " << int{fb};
  }
}

TEST(IcrcMasking, AckReqByteAndIpIdAreCovered) {
  std::vector<uint8_t> frame = make_frame(64, 12);
  uint8_t* ip = frame.data() + wire::kIpOffset;
  uint8_t* bth = ip + wire::kIpv4HeaderLen + wire::kUdpHeaderLen;
  bth[8] ^= 0x80;  // AckReq: not a congestion bit, covered
  EXPECT_FALSE(verify_frame(frame));
  bth[8] ^= 0x80;
  ip[5] ^= 0x01;  // IP ID
  EXPECT_FALSE(verify_frame(frame));
  ip[5] ^= 0x01;
  EXPECT_TRUE(verify_frame(frame));
}

TEST(IcrcLengths, ShortOrTruncatedInputDoesNotVerify) {
  std::vector<uint8_t> frame = make_frame(0, 13);
  ASSERT_TRUE(verify_frame(frame));
  const std::span<const uint8_t> ip = ip_span(frame);
  EXPECT_FALSE(verify(ip.first(43)));
  EXPECT_FALSE(verify_frame(std::span<const uint8_t>(frame).first(frame.size() - 1)));
  EXPECT_FALSE(verify_frame(std::span<const uint8_t>(frame).first(wire::kIpOffset + 10)));
  EXPECT_FALSE(verify_udp(UdpFields{}, ip.subspan(28).first(15)));
  // Ethernet padding after the IPv4 packet is ignored.
  std::vector<uint8_t> padded = frame;
  padded.insert(padded.end(), {0xDE, 0xAD, 0xBE, 0xEF, 0x55});
  EXPECT_TRUE(verify_frame(padded));
}

TEST(IcrcUdp, UdpFieldsAgreeWithFrameForKernelSocketHeaders) {
  for (size_t payload : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{1024}, size_t{4096}}) {
    SCOPED_TRACE(payload);
    wire::Addressing a;
    const std::vector<uint8_t> frame = make_frame(payload, static_cast<uint32_t>(payload) + 100, &a);
    ASSERT_EQ(a.ip_id, 0);
    const UdpFields f = udp_fields_of(a);
    const std::span<const uint8_t> roce(frame.data() + wire::kBthOffset, ip_span(frame).size() - 28);
    EXPECT_EQ(compute_udp(f, roce), compute(ip_span(frame)));
    EXPECT_EQ(compute_udp(f, roce), reference_icrc(ip_span(frame).data(), ip_span(frame).size()));
    EXPECT_TRUE(verify_udp(f, roce));

    std::vector<uint8_t> copy(roce.begin(), roce.end());
    std::fill_n(copy.end() - 4, 4, uint8_t{0});
    EXPECT_FALSE(verify_udp(f, copy));
    stamp_udp(f, copy);
    EXPECT_TRUE(std::equal(copy.begin(), copy.end(), roce.begin()));

    UdpFields wrong = f;
    wrong.src_port ^= 1;
    EXPECT_FALSE(verify_udp(wrong, roce));
    wrong = f;
    wrong.dst_ip ^= 0x100;
    EXPECT_FALSE(verify_udp(wrong, roce));
  }
}

TEST(IcrcUdp, UdpFieldsFollowIpIdAndDontFragment) {
  std::vector<uint8_t> frame = make_frame(128, 21);
  uint8_t* ip = frame.data() + wire::kIpOffset;
  const size_t total = ip_span(frame).size();
  UdpFields f;
  f.src_ip = load_be32(ip + 12);
  f.dst_ip = load_be32(ip + 16);
  f.src_port = load_be16(ip + 20);
  f.dst_port = load_be16(ip + 22);
  f.ip_id = 0x1234;
  f.dont_fragment = false;
  store_be16(ip + 4, 0x1234);
  store_be16(ip + 6, 0);
  stamp_frame(frame);
  const std::span<const uint8_t> roce(frame.data() + wire::kBthOffset, total - 28);
  EXPECT_EQ(compute_udp(f, roce), compute(ip_span(frame)));
  EXPECT_TRUE(verify_udp(f, roce));
  UdpFields defaults = f;
  defaults.ip_id = 0;
  defaults.dont_fragment = true;
  EXPECT_FALSE(verify_udp(defaults, roce));
}

// A datagram stamped for identification id is matched to exactly that one, whichever f.ip_id was
// tried first, when id < count, and to none otherwise; a corrupted one to none.
TEST(IcrcUdp, MatchFindsTheIdentificationTheIcrcWasStampedFor) {
  for (size_t payload : {size_t{0}, size_t{1}, size_t{7}, size_t{1024}, size_t{4096}}) {
    SCOPED_TRACE(payload);
    wire::Addressing a;
    const std::vector<uint8_t> frame = make_frame(payload, static_cast<uint32_t>(payload) + 7, &a);
    const UdpFields f = udp_fields_of(a);
    const std::span<const uint8_t> roce(frame.data() + wire::kBthOffset, ip_span(frame).size() - 28);
    for (uint16_t id : {0, 1, 2, 5, 31, 32, 63, 64, 65, 200, 4097, 65535}) {
      SCOPED_TRACE(id);
      std::vector<uint8_t> copy(roce.begin(), roce.end());
      UdpFields stamped = f;
      stamped.ip_id = id;
      stamp_udp(stamped, copy);
      for (uint16_t expected : {0, 5, 63, 77, 65535}) {  // tried first; any other is found too
        UdpFields other = f;
        other.ip_id = expected;
        EXPECT_EQ(match_udp_ip_id(other, copy, 64), id < 64 ? int{id} : -1) << "expected " << expected;
      }
      EXPECT_EQ(match_udp_ip_id(stamped, copy, 64), id < 64 ? int{id} : -1);
      EXPECT_EQ(match_udp_ip_id(f, copy, 65536), int{id});
      EXPECT_EQ(match_udp_ip_id(f, copy, 1), id == 0 ? 0 : -1);
      EXPECT_EQ(match_udp_ip_id(f, copy, 0), -1);
      EXPECT_EQ(match_udp_ip_id(f, copy, uint32_t{id} + 1), int{id});  // the last one counted
      EXPECT_EQ(match_udp_ip_id(f, copy, id), -1);                     // one short
      copy[copy.size() / 2] ^= 0x10;
      EXPECT_EQ(match_udp_ip_id(f, copy, 64), -1);
      copy[copy.size() / 2] ^= 0x10;
      UdpFields wrong = stamped;
      wrong.src_port ^= 1;
      EXPECT_EQ(match_udp_ip_id(wrong, copy, 64), -1);
    }
  }
  EXPECT_EQ(match_udp_ip_id(UdpFields{}, std::vector<uint8_t>(15), 64), -1);  // shorter than BTH and ICRC
}

TEST(IcrcCrc32, MatchesZlibAndBitwiseReferenceOnRandomBuffers) {
  std::mt19937 rng(5);
  std::vector<uint8_t> buf(9000 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 300; ++i) {
    const size_t off = rng() % 64;
    const size_t len = i < 70 ? static_cast<size_t>(i) : rng() % 9000;
    const uint8_t* p = buf.data() + off;
    const uint32_t got = crc32(0, p, len);
    EXPECT_EQ(got, reference_crc32(0, p, len)) << "len " << len << " off " << off;
#ifdef SUMCAST_HAVE_ZLIB
    EXPECT_EQ(got, ::crc32(0, p, static_cast<uInt>(len))) << "len " << len << " off " << off;
#endif
    const size_t split = len == 0 ? 0 : rng() % len;
    EXPECT_EQ(crc32(crc32(0, p, split), p + split, len - split), got) << "chained at " << split;
    const uint32_t seed = static_cast<uint32_t>(rng());
    EXPECT_EQ(crc32(seed, p, len), reference_crc32(seed, p, len));
  }
  // The CRC-32 check value.
  EXPECT_EQ(crc32(0, "123456789", 9), 0xCBF43926u);
}

// Each implementation this CPU runs, against the bitwise reference, at every IPv4 length from the
// smallest the ICRC is defined on to beyond a 2 KiB payload and at jumbo lengths: the fused
// kernel's block, accumulator and padding cases all change with the length modulo 64 and 256.
TEST(IcrcImpl, EveryImplementationMatchesTheReferenceAtEveryLength) {
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(9100);
  std::vector<size_t> lengths;
  for (size_t len = 44; len <= 2300; ++len) lengths.push_back(len);
  for (size_t len : {4096, 4142, 8192, 9000, 9100}) lengths.push_back(len);
  for (const Impl impl : {Impl::kIsal, Impl::kAvx512}) {
    if (!impl_supported(impl)) {
      std::printf(
          "[  NOTE    ] IcrcImpl: this CPU lacks AVX-512 BW/VL or VPCLMULQDQ: the %s implementation is not "
          "checked here\n",
          impl_name(impl));
      continue;
    }
    SCOPED_TRACE(impl_name(impl));
    for (const size_t len : lengths) {
      for (auto& b : buf) b = static_cast<uint8_t>(rng());
      const std::span<const uint8_t> ip(buf.data(), len);
      ASSERT_EQ(compute_with(impl, ip), reference_icrc(ip.data(), len)) << "IPv4 length " << len;
      // The kernel-socket variant: the same headers rebuilt from fields, over the UDP payload.
      const UdpFields f{.src_ip = load_be32(buf.data() + 12),
                        .dst_ip = load_be32(buf.data() + 16),
                        .src_port = load_be16(buf.data() + 20),
                        .dst_port = load_be16(buf.data() + 22),
                        .ip_id = load_be16(buf.data() + 4),
                        .dont_fragment = (rng() & 1) != 0};
      const std::span<const uint8_t> roce(buf.data() + 28, len - 28);
      ASSERT_EQ(compute_udp_with(impl, f, roce), compute_udp_with(Impl::kIsal, f, roce)) << "UDP payload " << len - 28;
    }
    std::printf("[  NOTE    ] IcrcImpl: %s checked at %zu IPv4 lengths\n", impl_name(impl), lengths.size());
  }
  EXPECT_TRUE(impl_supported(Impl::kIsal));
  EXPECT_TRUE(impl_supported(active_impl()));
}

// One writable page followed by a PROT_NONE one: bytes placed to end at end() fault on any read
// past them.
class GuardedPage {
 public:
  GuardedPage() {
    void* map = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(map);
    guarded_ = mprotect(base_ + page_, page_, PROT_NONE) == 0;
  }
  ~GuardedPage() {
    if (base_ != nullptr) munmap(base_, 2 * page_);
  }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;
  bool ok() const { return base_ != nullptr && guarded_; }
  uint8_t* begin() const { return base_; }
  uint8_t* end() const { return base_ + page_; }

 private:
  size_t page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uint8_t* base_ = nullptr;
  bool guarded_ = false;
};

// A packet that ends where its memory ends: the fused kernel's last block is a masked load, which
// must not touch the bytes past the packet (the next page is PROT_NONE).
TEST(IcrcImpl, ReadsNoBytePastThePacket) {
  const GuardedPage g;
  ASSERT_TRUE(g.ok());
  std::mt19937 rng(12);
  for (uint8_t* b = g.begin(); b < g.end(); ++b) *b = static_cast<uint8_t>(rng());
  for (const Impl impl : {Impl::kIsal, Impl::kAvx512}) {
    if (!impl_supported(impl)) continue;
    for (size_t len = 44; len <= 300; ++len) {
      const std::span<const uint8_t> ip(g.end() - len, len);
      EXPECT_EQ(compute_with(impl, ip), reference_icrc(ip.data(), len)) << impl_name(impl) << " length " << len;
    }
  }
}

// verify_frame_with: each implementation accepts a stamped frame and refuses it after any one bit
// of the covered bytes (header fields the ICRC does not mask, payload, the ICRC itself) flips.
TEST(IcrcImpl, EachImplementationVerifiesFramesAndRefusesFlippedBits) {
  for (const Impl impl : {Impl::kIsal, Impl::kAvx512}) {
    if (!impl_supported(impl)) continue;
    SCOPED_TRACE(impl_name(impl));
    for (size_t payload : {size_t{0}, size_t{64}, size_t{1000}}) {
      wire::Addressing a;
      std::vector<uint8_t> frame = make_frame(payload, static_cast<uint32_t>(payload) + 7, &a);
      ASSERT_TRUE(verify_frame_with(impl, frame)) << "payload " << payload;
      // From the IPv4 source address (ToS, TTL and checksum before it are masked) to the ICRC's
      // last byte, but for the other masked bytes: the UDP checksum and the BTH's FECN/BECN byte.
      for (size_t at = wire::kIpOffset + 12; at < frame.size(); ++at) {
        if (at == wire::kUdpOffset + 6 || at == wire::kUdpOffset + 7 || at == wire::kBthOffset + 4) continue;
        frame[at] ^= 0x10;
        EXPECT_FALSE(verify_frame_with(impl, frame)) << "byte " << at << ", payload " << payload;
        frame[at] ^= 0x10;
      }
      EXPECT_TRUE(verify_frame_with(impl, frame));
      EXPECT_FALSE(verify_frame_with(impl, std::span<const uint8_t>(frame.data(), wire::kIpOffset + 20)));
    }
  }
}

// verify_frame takes any bytes (the engine checks a quad's ICRCs before parsing them): frames
// too short, with another IP version or options, or whose total length runs past their end
// verify false, and none is read past its end (the next page is PROT_NONE).
TEST(IcrcFrame, AnyBytesVerifyFalseAndNothingPastTheFrameIsRead) {
  const GuardedPage g;
  ASSERT_TRUE(g.ok());
  std::mt19937 rng(13);
  for (size_t len = 0; len <= 300; ++len) {
    uint8_t* f = g.end() - len;
    for (int variant = 0; variant < 4; ++variant) {
      for (size_t k = 0; k < len; ++k) f[k] = static_cast<uint8_t>(rng());
      if (len > wire::kIpOffset + 3) {
        f[wire::kIpOffset] = variant == 0 ? 0x46 : 0x45;  // options, or none
        // The total length: past the frame's end, too short for the headers, or random.
        const size_t total = variant == 1   ? len - wire::kIpOffset + 1 + (rng() % 100)
                             : variant == 2 ? rng() % 44
                                            : rng() % 65536;
        store_be16(f + wire::kIpOffset + 2, static_cast<uint16_t>(total));
      }
      EXPECT_FALSE(verify_frame(std::span<const uint8_t>(f, len))) << "length " << len << ", variant " << variant;
    }
  }
}

// SUMCAST_ICRC picks the implementation at load time: ctest runs this binary once without it and
// once with SUMCAST_ICRC=isal (tests/icrc/CMakeLists.txt).
TEST(IcrcImpl, TheEnvironmentPicksTheImplementation) {
  const char* env = std::getenv("SUMCAST_ICRC");
  const Impl best = impl_supported(Impl::kAvx512) ? Impl::kAvx512 : Impl::kIsal;
  if (env == nullptr) {
    EXPECT_EQ(active_impl(), best);
  } else if (std::string(env) == "isal") {
    EXPECT_EQ(active_impl(), Impl::kIsal);
  } else if (std::string(env) == "avx512") {
    EXPECT_EQ(active_impl(), best);
  }
  std::printf("[  NOTE    ] SUMCAST_ICRC=%s: the ICRC runs on %s\n", env == nullptr ? "(unset)" : env,
              impl_name(active_impl()));
}

TEST(IcrcFrame, WireBuiltFrameParsesAndVerifiesAfterStamp) {
  for (size_t payload : {size_t{0}, size_t{4}, size_t{1024}, wire::kMaxPayloadBytes}) {
    SCOPED_TRACE(payload);
    wire::Addressing a;
    std::vector<uint8_t> frame = make_frame(payload, static_cast<uint32_t>(payload) + 200, &a);
    wire::ParsedPacket parsed;
    ASSERT_EQ(wire::parse_frame(frame, &parsed), wire::ParseError::kOk);
    EXPECT_EQ(parsed.ip, frame.data() + wire::kIpOffset);
    EXPECT_TRUE(verify_frame(frame));
    EXPECT_TRUE(verify(std::span<const uint8_t>(parsed.ip, parsed.ip_len)));
    EXPECT_EQ(le32(parsed.ip + parsed.ip_len - 4), reference_icrc(parsed.ip, parsed.ip_len));
    // A stale ICRC is overwritten, not combined.
    std::vector<uint8_t> stale = frame;
    stale[wire::kIpOffset + parsed.ip_len - 1] ^= 0xFF;
    EXPECT_FALSE(verify_frame(stale));
    stamp_frame(stale);
    EXPECT_EQ(stale, frame);
    // Changing one payload element invalidates it.
    if (payload > 0) {
      frame[wire::kPayloadOffset] ^= 0x01;
      EXPECT_FALSE(verify_frame(frame));
    }
  }
}

}  // namespace
}  // namespace sumcast::icrc
