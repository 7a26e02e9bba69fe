// packet.h: header encode/decode, frame builders and the structural parser (docs/protocol.md
// §2–§6). Truncated inputs are copied into exactly-sized heap buffers so that any read past the
// end shows up under AddressSanitizer or valgrind.
#include "sumcast/wire/packet.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "wire_test_util.h"

namespace sumcast::wire {
namespace {

using testing::build_frame;
using testing::exact_copy;
using testing::icrc_of_frame;
using testing::stamp_icrc;

constexpr uint64_t kSeed = 0x53C457;  // fixed: failures reproduce

std::string name_of(ParseError e) { return parse_error_name(e); }

ParseError parse(std::span<const uint8_t> bytes, ParsedPacket* out = nullptr) {
  ParsedPacket scratch;
  return parse_frame(bytes, out ? out : &scratch);
}

// Parses an exactly-sized heap copy of the first `len` bytes.
ParseError parse_prefix(std::span<const uint8_t> bytes, size_t len) {
  auto buf = exact_copy(bytes, len);
  ParsedPacket pp;
  return parse_frame(std::span<const uint8_t>(buf.get(), len), &pp);
}

Addressing test_addressing() {
  Addressing a;
  const uint8_t smac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  const uint8_t dmac[6] = {0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE};
  std::memcpy(a.src_mac, smac, 6);
  std::memcpy(a.dst_mac, dmac, 6);
  a.src_ip = 0x0A000102;  // 10.0.1.2
  a.dst_ip = 0x0A000001;  // 10.0.0.1
  a.src_port = 50000;
  a.dst_port = kRoceUdpPort;
  a.tos = 0x02;
  a.ttl = 17;
  a.dest_qp = 0x000101;
  a.src_qp = 0xABCDEF;
  a.qkey = 0x1234ABCD;
  a.psn = 0x000777;
  return a;
}

SumcastHeader test_header(Dtype d, uint16_t count) {
  SumcastHeader h;
  h.type = MsgType::kContribution;
  h.dtype = d;
  h.op = ReduceOp::kMax;
  h.job_id = 0xC0FFEE01;
  h.rank = 3;
  h.slot = 17;
  h.round = 9;
  h.flags = kFlagSlotVersion;
  h.coll_seq = 0xA5A5A5A5;
  h.elem_count = count;
  h.elem_offset = 123456789;
  return h;
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A valid fp32 contribution with `count` elements and random payload.
std::vector<uint8_t> valid_frame(uint16_t count = 8, Dtype d = Dtype::kFp32) {
  std::mt19937_64 rng(kSeed + count);
  const auto payload = random_bytes(rng, count * dtype_size(d));
  return build_frame(test_addressing(), test_header(d, count), payload);
}

void expect_same_header(const SumcastHeader& a, const SumcastHeader& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.round, b.round);
  EXPECT_EQ(a.coll_seq, b.coll_seq);
  EXPECT_EQ(a.elem_count, b.elem_count);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.elem_offset, b.elem_offset);
}

uint64_t be_at(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | p[i];
  return v;
}

// Rewrites IPv4 total length and UDP length to describe exactly `len` frame bytes.
void fit_lengths(std::vector<uint8_t>& f, size_t len) {
  const size_t total = len - kEthHeaderLen;
  store_be16(f.data() + kIpOffset + 2, static_cast<uint16_t>(total));
  store_be16(f.data() + kUdpOffset + 4, static_cast<uint16_t>(total - kIpv4HeaderLen));
  store_be16(f.data() + kIpOffset + 10, ipv4_header_checksum(f.data() + kIpOffset));
}

// --- Sumcast header ---------------------------------------------------------------------------

TEST(SumcastHeaderCodec, RandomHeadersRoundTripAtTheDocumentedOffsets) {
  std::mt19937_64 rng(kSeed);
  for (int iter = 0; iter < 10000; ++iter) {
    SumcastHeader h;
    h.version = static_cast<uint8_t>(rng());
    h.type = static_cast<MsgType>(rng());
    h.dtype = static_cast<Dtype>(rng());
    h.op = static_cast<ReduceOp>(rng());
    h.job_id = static_cast<uint32_t>(rng());
    h.rank = static_cast<uint16_t>(rng());
    h.slot = static_cast<uint16_t>(rng());
    h.round = static_cast<uint32_t>(rng());
    h.coll_seq = static_cast<uint32_t>(rng());
    h.elem_count = static_cast<uint16_t>(rng());
    h.flags = static_cast<uint8_t>(rng());
    h.status = static_cast<uint8_t>(rng());
    h.elem_offset = rng();
    std::array<uint8_t, kSumcastHeaderLen + 16> buf;
    buf.fill(0x5C);
    uint8_t* p = buf.data() + 8;
    encode_sumcast_header(h, p);
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_EQ(buf[i], 0x5C) << "wrote before the header";
      ASSERT_EQ(buf[8 + kSumcastHeaderLen + i], 0x5C) << "wrote past the header";
    }
    // The §5 table: offset, size, big-endian.
    ASSERT_EQ(p[0], h.version);
    ASSERT_EQ(p[1], static_cast<uint8_t>(h.type));
    ASSERT_EQ(p[2], static_cast<uint8_t>(h.dtype));
    ASSERT_EQ(p[3], static_cast<uint8_t>(h.op));
    ASSERT_EQ(be_at(p + 4, 4), h.job_id);
    ASSERT_EQ(be_at(p + 8, 2), h.rank);
    ASSERT_EQ(be_at(p + 10, 2), h.slot);
    ASSERT_EQ(be_at(p + 12, 4), h.round);
    ASSERT_EQ(be_at(p + 16, 4), h.coll_seq);
    ASSERT_EQ(be_at(p + 20, 2), h.elem_count);
    ASSERT_EQ(p[22], h.flags);
    ASSERT_EQ(p[23], h.status);
    ASSERT_EQ(be_at(p + 24, 8), h.elem_offset);
    expect_same_header(decode_sumcast_header(p), h);
  }
}

TEST(SumcastHeaderCodec, EveryByteStringDecodesAndReencodesToItself) {
  std::mt19937_64 rng(kSeed + 1);
  for (int iter = 0; iter < 10000; ++iter) {
    const auto in = random_bytes(rng, kSumcastHeaderLen);
    std::array<uint8_t, kSumcastHeaderLen> out{};
    encode_sumcast_header(decode_sumcast_header(in.data()), out.data());
    ASSERT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
  }
}

// --- Builders and the happy path ----------------------------------------------------------------

TEST(ParseFrame, AcceptsBuiltFramesForEveryDtypeAndPayloadSize) {
  const Addressing a = test_addressing();
  std::mt19937_64 rng(kSeed + 2);
  for (int di = 0; di < kDtypeCount; ++di) {
    const auto d = static_cast<Dtype>(di);
    const size_t es = dtype_size(d);
    for (size_t bytes = 0; bytes <= kMaxPayloadBytes; bytes += es) {
      const auto count = static_cast<uint16_t>(bytes / es);
      SumcastHeader h = test_header(d, count);
      h.op = static_cast<ReduceOp>(bytes % kReduceOpCount);
      const auto payload = random_bytes(rng, bytes);
      const size_t pad = (4 - bytes % 4) % 4;
      // Build into a larger buffer pre-filled with a canary: the builder must stop at frame_len.
      std::vector<uint8_t> buf(frame_len(bytes) + 64, 0xAA);
      ASSERT_EQ(frame_len(bytes), kFrameOverhead + bytes + pad);
      uint8_t* pl = write_frame_headers(buf.data(), a, h, bytes);
      ASSERT_EQ(pl, buf.data() + kPayloadOffset);
      for (size_t i = bytes; i < bytes + pad + kIcrcLen; ++i) ASSERT_EQ(pl[i], 0) << "pad/ICRC not zeroed";
      for (size_t i = frame_len(bytes); i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xAA) << "wrote past frame_len";
      if (bytes) std::memcpy(pl, payload.data(), bytes);
      buf.resize(frame_len(bytes));
      stamp_icrc(buf);

      auto exact = exact_copy(buf, buf.size());
      ParsedPacket pp;
      ASSERT_EQ(name_of(parse_frame(std::span<const uint8_t>(exact.get(), buf.size()), &pp)), "ok")
          << dtype_name(d) << " " << bytes << " bytes";
      EXPECT_EQ(std::memcmp(pp.dst_mac, a.dst_mac, 6), 0);
      EXPECT_EQ(std::memcmp(pp.src_mac, a.src_mac, 6), 0);
      EXPECT_EQ(pp.src_ip, a.src_ip);
      EXPECT_EQ(pp.dst_ip, a.dst_ip);
      EXPECT_EQ(pp.src_port, a.src_port);
      EXPECT_EQ(pp.dst_port, kRoceUdpPort);
      EXPECT_EQ(size_t{(pp.bth_flags >> 4) & 3u}, pad) << bytes;
      EXPECT_EQ(pp.bth_flags & 0x0F, 0);
      EXPECT_EQ(pp.dest_qp, a.dest_qp);
      EXPECT_EQ(pp.psn, a.psn);
      EXPECT_EQ(pp.qkey, a.qkey);
      EXPECT_EQ(pp.src_qp, a.src_qp);
      expect_same_header(pp.hdr, h);
      EXPECT_EQ(pp.ip, exact.get() + kIpOffset);
      EXPECT_EQ(pp.ip_len, buf.size() - kEthHeaderLen);
      EXPECT_EQ(pp.payload, exact.get() + kPayloadOffset);
      ASSERT_EQ(pp.payload_len, bytes);
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), pp.payload));
      // The IPv4 header is complete and correct: version/IHL, DF, no fragment, UDP, checksum.
      const uint8_t* ip = exact.get() + kIpOffset;
      EXPECT_EQ(ip[1], a.tos);
      EXPECT_EQ(be_at(ip + 4, 2), a.ip_id);
      EXPECT_EQ(be_at(ip + 6, 2), 0x4000u);
      EXPECT_EQ(ip[8], a.ttl);
      EXPECT_EQ(be_at(ip + 10, 2), ipv4_header_checksum(ip));
      EXPECT_EQ(be_at(ip + 20 + 4, 2), buf.size() - kUdpOffset);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ParseFrame, AcceptsResultsAndPayloadlessAborts) {
  Addressing a = test_addressing();
  a.dest_qp = kMulticastQpn;
  SumcastHeader r = test_header(Dtype::kBf16, 3);  // odd fp16-width count: pad 2
  r.type = MsgType::kResult;
  r.rank = kRankMulticast;
  const std::vector<uint8_t> six = {1, 2, 3, 4, 5, 6};
  ParsedPacket pp;
  auto f = build_frame(a, r, six);
  ASSERT_EQ(name_of(parse(f, &pp)), "ok");
  EXPECT_EQ(pp.dest_qp, kMulticastQpn);
  EXPECT_EQ(pp.hdr.rank, kRankMulticast);
  EXPECT_EQ(pp.hdr.type, MsgType::kResult);
  EXPECT_EQ(pp.payload_len, 6u);

  SumcastHeader ab = test_header(Dtype::kFp32, 0);
  ab.type = MsgType::kAbort;
  ab.status = static_cast<uint8_t>(AbortReason::kTimeout);
  f = build_frame(a, ab, {});
  ASSERT_EQ(name_of(parse(f, &pp)), "ok");
  EXPECT_EQ(pp.hdr.type, MsgType::kAbort);
  EXPECT_EQ(pp.hdr.status, static_cast<uint8_t>(AbortReason::kTimeout));
  EXPECT_EQ(pp.payload_len, 0u);
}

// A notice (loss or duplicate) may name a chunk (elem_count included) and carries no payload;
// one with the payload its elem_count would have is malformed.
TEST(ParseFrame, AcceptsPayloadlessNoticesThatNameAChunk) {
  for (const MsgType type : {MsgType::kLossNotice, MsgType::kDuplicateNotice}) {
    SCOPED_TRACE(static_cast<int>(type));
    SumcastHeader n = test_header(Dtype::kFp16, 300);
    n.type = type;
    n.slot = 5;
    n.round = 7;
    n.flags = kFlagSlotVersion;
    n.elem_offset = 4096;
    ParsedPacket pp;
    auto f = build_frame(test_addressing(), n, {});
    ASSERT_EQ(name_of(parse(f, &pp)), "ok");
    EXPECT_EQ(pp.hdr.type, type);
    EXPECT_EQ(pp.hdr.elem_count, 300u);
    EXPECT_EQ(pp.hdr.slot, 5u);
    EXPECT_EQ(pp.hdr.round, 7u);
    EXPECT_EQ(pp.hdr.elem_offset, 4096u);
    EXPECT_EQ(pp.payload_len, 0u);
    EXPECT_EQ(f.size(), frame_len(0));
    f = build_frame(test_addressing(), n, std::vector<uint8_t>(600, 0));
    EXPECT_EQ(name_of(parse(f, &pp)), "bad_length");
  }
}

TEST(ParseFrame, PsnAndQpnsAreTwentyFourBits) {
  Addressing a = test_addressing();
  a.psn = 0xFE123456;
  a.dest_qp = 0xFFFFFF;
  a.src_qp = 0x000001;
  ParsedPacket pp;
  const auto f = build_frame(a, test_header(Dtype::kFp32, 1), std::vector<uint8_t>(4, 0));
  ASSERT_EQ(name_of(parse(f, &pp)), "ok");
  EXPECT_EQ(pp.psn, 0x123456u);
  EXPECT_EQ(pp.dest_qp, 0xFFFFFFu);
  EXPECT_EQ(pp.src_qp, 1u);
  // Reserved bytes of BTH (4, 8) and DETH (4) are written as zero.
  EXPECT_EQ(f[kBthOffset + 4], 0);
  EXPECT_EQ(f[kBthOffset + 8], 0);
  EXPECT_EQ(f[kDethOffset + 4], 0);
}

TEST(ParseRoce, AcceptsTheUdpPayloadOfABuiltFrame) {
  // A kernel-socket worker receives BTH..ICRC as one datagram.
  const auto f = valid_frame(5, Dtype::kFp16);  // 10 bytes: pad 2
  const size_t n = f.size() - kBthOffset;
  auto dgram = exact_copy(std::span<const uint8_t>(f).subspan(kBthOffset), n);
  ParsedPacket pp;
  ASSERT_EQ(name_of(parse_roce(std::span<const uint8_t>(dgram.get(), n), &pp)), "ok");
  EXPECT_EQ(pp.payload, dgram.get() + kRoceHeadersLen);
  EXPECT_EQ(pp.payload_len, 10u);
  expect_same_header(pp.hdr, test_header(Dtype::kFp16, 5));
}

TEST(ParseFrame, IgnoresEthernetPaddingPastTheIpTotalLength) {
  auto f = valid_frame(4);
  ParsedPacket pp0;
  ASSERT_EQ(name_of(parse(f, &pp0)), "ok");
  for (size_t extra : {1, 2, 3, 4, 46, 60}) {
    auto g = f;
    for (size_t i = 0; i < extra; ++i) g.push_back(static_cast<uint8_t>(0xE0 + i));
    ParsedPacket pp;
    ASSERT_EQ(name_of(parse(g, &pp)), "ok") << extra;
    EXPECT_EQ(pp.ip_len, f.size() - kEthHeaderLen);
    EXPECT_EQ(pp.payload_len, 16u);
    EXPECT_EQ(icrc_of_frame(g), icrc_of_frame(f));
  }
}

TEST(ParseFrame, AcceptsAnyUdpChecksum) {
  auto f = valid_frame(4);
  std::mt19937_64 rng(kSeed + 3);
  for (uint32_t csum : {0x0000u, 0xFFFFu, 0x1234u, static_cast<uint32_t>(rng() & 0xFFFF)}) {
    store_be16(f.data() + kUdpOffset + 6, static_cast<uint16_t>(csum));
    EXPECT_EQ(name_of(parse(f)), "ok") << std::hex << csum;
    // The ICRC masks the UDP checksum, so the one stamped before still holds.
    const size_t n = f.size();
    const uint32_t stored =
        uint32_t{f[n - 4]} | uint32_t{f[n - 3]} << 8 | uint32_t{f[n - 2]} << 16 | uint32_t{f[n - 1]} << 24;
    EXPECT_EQ(icrc_of_frame(f), stored);
  }
}

// --- UDP checksum ---------------------------------------------------------------------------------

// RFC 768 from its definition: the one's-complement sum, as 16-bit big-endian words, of the
// pseudo-header (source and destination address, zero, protocol 17, UDP length) and of the UDP
// header and data with the checksum field zero, an odd last byte padded with zero; complemented.
uint16_t reference_udp_checksum(const std::vector<uint8_t>& f) {
  const uint8_t* ip = f.data() + kIpOffset;
  const uint8_t* udp = ip + kIpv4HeaderLen;
  const size_t n = (size_t{udp[4]} << 8) | udp[5];
  uint64_t sum = 17 + n;
  for (size_t i = 12; i < 20; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  for (size_t i = 0; i < n; ++i) {
    if (i == 6 || i == 7) continue;
    sum += i % 2 == 0 ? uint32_t{udp[i]} << 8 : udp[i];
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// A frame of `udp_len` UDP bytes (header included) of random content, IPv4 addresses random.
std::vector<uint8_t> random_udp_frame(size_t udp_len, std::mt19937_64& rng) {
  std::vector<uint8_t> f(kUdpOffset + udp_len);
  for (auto& b : f) b = static_cast<uint8_t>(rng());
  store_be16(f.data() + kUdpOffset + 4, static_cast<uint16_t>(udp_len));
  store_be16(f.data() + kUdpOffset + 6, 0);
  return f;
}

TEST(UdpChecksum, MatchesTheDefinitionAtEveryLength) {
  std::mt19937_64 rng(kSeed + 11);
  for (size_t n = 8; n <= 80; ++n) {
    for (int k = 0; k < 4; ++k) {
      const auto f = random_udp_frame(n, rng);
      const uint16_t ref = reference_udp_checksum(f);
      EXPECT_EQ(udp_checksum(f.data()), ref == 0 ? 0xFFFF : ref) << "UDP length " << n;
    }
  }
  for (size_t n : {size_t{1023}, size_t{1024} + 60, size_t{4096} + 60, size_t{4096} + 61, size_t{8972}}) {
    const auto f = random_udp_frame(n, rng);
    const uint16_t ref = reference_udp_checksum(f);
    EXPECT_EQ(udp_checksum(f.data()), ref == 0 ? 0xFFFF : ref) << "UDP length " << n;
  }
}

// A sum of zero is sent as 0xFFFF (0 would mean "no checksum"): the header alone, ports 0, and a
// source address whose first word brings the pseudo-header's sum to 0xFFFF (17 + 8 + 8 + 0xFFDE).
TEST(UdpChecksum, AZeroSumIsSentAsAllOnes) {
  std::vector<uint8_t> f(kUdpOffset + 8, 0);
  store_be16(f.data() + kIpOffset + 12, 0xFFDE);
  store_be16(f.data() + kUdpOffset + 4, 8);
  ASSERT_EQ(reference_udp_checksum(f), 0);
  EXPECT_EQ(udp_checksum(f.data()), 0xFFFF);
}

// RFC 1624: the checksum after rewriting an address, a port or a 4-byte field at an even offset
// equals the one computed afresh, and the definition's.
TEST(UdpChecksum, UpdateAfterRewritingFieldsEqualsARecomputation) {
  std::mt19937_64 rng(kSeed + 12);
  for (int trial = 0; trial < 200; ++trial) {
    auto f = random_udp_frame(8 + 2 * (rng() % 600) + rng() % 2, rng);
    const uint16_t before = udp_checksum(f.data());
    auto g = f;
    const size_t udp_len = f.size() - kUdpOffset;
    // One of: the destination address (pseudo-header), the destination port, or 4 bytes at an
    // even offset of the data.
    size_t at = 0;
    size_t len = 4;
    switch (trial % 3) {
      case 0:
        at = kIpOffset + 16;
        break;
      case 1:
        at = kUdpOffset + 2;
        len = 2;
        break;
      default:
        at = kUdpOffset + 8 + 2 * (rng() % ((udp_len - 8) / 2 + 1));
        break;
    }
    if (at + len > g.size()) continue;
    for (size_t i = 0; i < len; ++i) g[at + i] = static_cast<uint8_t>(rng());
    const uint16_t updated = udp_checksum_update(before, f.data() + at, g.data() + at, len);
    EXPECT_EQ(updated, udp_checksum(g.data())) << "trial " << trial << " at " << at;
    const uint16_t ref = reference_udp_checksum(g);
    EXPECT_EQ(updated, ref == 0 ? 0xFFFF : ref) << "trial " << trial << " at " << at;
  }
}

// --- Truncation ---------------------------------------------------------------------------------

// Cutting a frame without touching its length fields: Ethernet, then the IPv4 total length decides.
TEST(ParseFrame, TruncationAtEveryLengthIsTruncatedEthOrIp) {
  for (const auto& f : {valid_frame(3, Dtype::kFp16), valid_frame(256, Dtype::kFp32)}) {
    for (size_t len = 0; len < f.size(); ++len) {
      const std::string want = len < kEthHeaderLen ? "truncated_eth" : "truncated_ip";
      ASSERT_EQ(name_of(parse_prefix(f, len)), want) << "len " << len << " of " << f.size();
    }
    EXPECT_EQ(name_of(parse_prefix(f, f.size())), "ok");
  }
}

// Cutting a frame and making IPv4/UDP lengths agree with the cut: each header boundary has its name.
TEST(ParseFrame, ConsistentTruncationNamesTheHeaderItEndsIn) {
  for (const auto& f : {valid_frame(3, Dtype::kFp16), valid_frame(256, Dtype::kFp32), valid_frame(0)}) {
    for (size_t len = 0; len < f.size(); ++len) {
      auto g = f;
      if (len >= kUdpOffset) fit_lengths(g, len);
      std::string want;
      if (len < kEthHeaderLen)
        want = "truncated_eth";
      else if (len < kUdpOffset)
        want = "truncated_ip";
      else if (len < kBthOffset)
        want = "truncated_udp";
      else if (len < kDethOffset)
        want = "truncated_bth";
      else if (len < kSumcastOffset)
        want = "truncated_deth";
      else if (len < kPayloadOffset + kIcrcLen)
        want = "truncated_header";
      else
        want = "bad_length";  // headers complete, payload shorter than elem_count says
      ASSERT_EQ(name_of(parse_prefix(g, len)), want) << "len " << len << " of " << f.size();
    }
  }
}

TEST(ParseRoce, TruncationAtEveryLengthNamesTheHeaderItEndsIn) {
  const auto f = valid_frame(7, Dtype::kBf16);
  const std::span<const uint8_t> roce = std::span<const uint8_t>(f).subspan(kBthOffset);
  for (size_t len = 0; len < roce.size(); ++len) {
    auto buf = exact_copy(roce, len);
    ParsedPacket pp;
    const ParseError e = parse_roce(std::span<const uint8_t>(buf.get(), len), &pp);
    std::string want = len < kBthLen                      ? "truncated_bth"
                       : len < kBthLen + kDethLen         ? "truncated_deth"
                       : len < kRoceHeadersLen + kIcrcLen ? "truncated_header"
                                                          : "bad_length";
    ASSERT_EQ(name_of(e), want) << "len " << len;
  }
}

// --- Every ParseError from a crafted frame -----------------------------------------------------

struct Crafted {
  const char* what;
  std::function<void(std::vector<uint8_t>&)> mutate;
  const char* want;
};

void set_sumcast(std::vector<uint8_t>& f, size_t field, uint8_t v) { f[kSumcastOffset + field] = v; }

std::vector<Crafted> crafted_cases() {
  auto ip = [](std::vector<uint8_t>& f) { return f.data() + kIpOffset; };
  return {
      {"13-byte frame", [](auto& f) { f.resize(13); }, "truncated_eth"},
      {"IPv6 EtherType",
       [](auto& f) {
         store_be16(f.data() + 12, kEtherTypeIpv6);
         f[kIpOffset] = 0x60;  // an IPv6 header's first byte
       },
       "not_ipv4"},
      {"ARP request",
       [](auto& f) {
         // Ethernet broadcast + a 28-byte ARP request for 10.0.0.1.
         const auto arp = testing::from_hex(
             "ffffffffffff021122334455"
             "0806"
             "0001080006040001"
             "021122334455"
             "0a000102"
             "000000000000"
             "0a000001");
         f = arp;
       },
       "not_ipv4"},
      {"VLAN tag", [](auto& f) { store_be16(f.data() + 12, kEtherTypeVlan); }, "not_ipv4"},
      {"frame ends inside IPv4", [](auto& f) { f.resize(kIpOffset + 19); }, "truncated_ip"},
      {"IPv4 total length beyond frame",
       [ip](auto& f) { store_be16(ip(f) + 2, static_cast<uint16_t>(f.size() - kEthHeaderLen + 1)); }, "truncated_ip"},
      {"IHL 6", [ip](auto& f) { ip(f)[0] = 0x46; }, "bad_ip_header"},
      {"IHL 15, total length 59",
       [ip](auto& f) {
         ip(f)[0] = 0x4F;
         store_be16(ip(f) + 2, 59);
       },
       "bad_ip_header"},
      {"IGMP, IHL 6 (Router Alert)",
       [ip](auto& f) {
         ip(f)[0] = 0x46;
         ip(f)[9] = 2;
       },
       "not_udp"},
      {"TCP, IHL 6",
       [ip](auto& f) {
         ip(f)[0] = 0x46;
         ip(f)[9] = 6;
       },
       "not_udp"},
      {"IHL 4", [ip](auto& f) { ip(f)[0] = 0x44; }, "bad_ip_header"},
      {"IP version 6", [ip](auto& f) { ip(f)[0] = 0x65; }, "bad_ip_header"},
      {"IPv4 total length 19", [ip](auto& f) { store_be16(ip(f) + 2, 19); }, "bad_ip_header"},
      {"MF set", [ip](auto& f) { store_be16(ip(f) + 6, 0x2000); }, "ip_fragment"},
      {"MF and DF set", [ip](auto& f) { store_be16(ip(f) + 6, 0x6000); }, "ip_fragment"},
      {"fragment offset 1", [ip](auto& f) { store_be16(ip(f) + 6, 0x4001); }, "ip_fragment"},
      {"last fragment", [ip](auto& f) { store_be16(ip(f) + 6, 0x00B9); }, "ip_fragment"},
      {"TCP", [ip](auto& f) { ip(f)[9] = 6; }, "not_udp"},
      {"ICMP", [ip](auto& f) { ip(f)[9] = 1; }, "not_udp"},
      {"IPv4 total length 27",
       [](auto& f) {
         fit_lengths(f, kEthHeaderLen + 27);
         f.resize(kEthHeaderLen + 27);
       },
       "truncated_udp"},
      {"UDP length one short",
       [](auto& f) { store_be16(f.data() + kUdpOffset + 4, static_cast<uint16_t>(f.size() - kUdpOffset - 1)); },
       "bad_udp_length"},
      {"UDP length one long",
       [](auto& f) { store_be16(f.data() + kUdpOffset + 4, static_cast<uint16_t>(f.size() - kUdpOffset + 1)); },
       "bad_udp_length"},
      {"UDP length 0", [](auto& f) { store_be16(f.data() + kUdpOffset + 4, 0); }, "bad_udp_length"},
      {"UDP dst port 4790", [](auto& f) { store_be16(f.data() + kUdpOffset + 2, 4790); }, "not_roce_port"},
      {"UDP ports swapped",
       [](auto& f) {
         store_be16(f.data() + kUdpOffset, kRoceUdpPort);
         store_be16(f.data() + kUdpOffset + 2, 50000);
       },
       "not_roce_port"},
      {"UDP payload 11 bytes",
       [](auto& f) {
         fit_lengths(f, kBthOffset + 11);
         f.resize(kBthOffset + 11);
       },
       "truncated_bth"},
      {"RC SEND_ONLY", [](auto& f) { f[kBthOffset] = 0x04; }, "bad_opcode"},
      {"UC SEND_ONLY", [](auto& f) { f[kBthOffset] = 0x24; }, "bad_opcode"},
      {"UD SEND_ONLY with immediate", [](auto& f) { f[kBthOffset] = 0x65; }, "bad_opcode"},
      {"CNP", [](auto& f) { f[kBthOffset] = 0x81; }, "bad_opcode"},
      {"TVer 1", [](auto& f) { f[kBthOffset + 1] |= 0x01; }, "bad_bth"},
      {"TVer 8", [](auto& f) { f[kBthOffset + 1] |= 0x08; }, "bad_bth"},
      {"P_Key 0x7FFF", [](auto& f) { store_be16(f.data() + kBthOffset + 2, 0x7FFF); }, "bad_bth"},
      {"P_Key 0x8001", [](auto& f) { store_be16(f.data() + kBthOffset + 2, 0x8001); }, "bad_bth"},
      {"UDP payload 19 bytes",
       [](auto& f) {
         fit_lengths(f, kDethOffset + 7);
         f.resize(kDethOffset + 7);
       },
       "truncated_deth"},
      {"no room for the ICRC",
       [](auto& f) {
         fit_lengths(f, kPayloadOffset + 3);
         f.resize(kPayloadOffset + 3);
       },
       "truncated_header"},
      {"version 0", [](auto& f) { set_sumcast(f, 0, 0); }, "bad_version"},
      {"version 2", [](auto& f) { set_sumcast(f, 0, 2); }, "bad_version"},
      {"version 255", [](auto& f) { set_sumcast(f, 0, 255); }, "bad_version"},
      {"type 0", [](auto& f) { set_sumcast(f, 1, 0); }, "bad_type"},
      {"type 6", [](auto& f) { set_sumcast(f, 1, 6); }, "bad_type"},
      {"type 255", [](auto& f) { set_sumcast(f, 1, 255); }, "bad_type"},
      {"dtype 5", [](auto& f) { set_sumcast(f, 2, 5); }, "bad_dtype"},
      {"dtype 255", [](auto& f) { set_sumcast(f, 2, 255); }, "bad_dtype"},
      {"op 3", [](auto& f) { set_sumcast(f, 3, 3); }, "bad_op"},
      {"op 255", [](auto& f) { set_sumcast(f, 3, 255); }, "bad_op"},
      {"count one more than payload", [](auto& f) { set_sumcast(f, 21, 9); }, "bad_length"},
      {"count one less than payload", [](auto& f) { set_sumcast(f, 21, 7); }, "bad_length"},
      {"count 0 with payload", [](auto& f) { set_sumcast(f, 21, 0); }, "bad_length"},
      {"abort with payload (count 8)", [](auto& f) { set_sumcast(f, 1, 3); }, "bad_length"},
      {"loss notice with payload (count 8)", [](auto& f) { set_sumcast(f, 1, 4); }, "bad_length"},
      {"abort with payload (count 0)",
       [](auto& f) {
         set_sumcast(f, 1, 3);
         set_sumcast(f, 21, 0);
       },
       "bad_length"},
      {"dtype changed to fp64 (count * size mismatch)", [](auto& f) { set_sumcast(f, 2, 4); }, "bad_length"},
      {"pad count 1 on an aligned payload", [](auto& f) { f[kBthOffset + 1] |= 0x10; }, "bad_length"},
      {"offset 2^40", [](auto& f) { store_be64(f.data() + kSumcastOffset + 24, kMaxElementIndex); }, "bad_range"},
      {"offset + count = 2^40 + 1", [](auto& f) { store_be64(f.data() + kSumcastOffset + 24, kMaxElementIndex - 7); },
       "bad_range"},
      {"offset 2^64 - 1", [](auto& f) { store_be64(f.data() + kSumcastOffset + 24, ~uint64_t{0}); }, "bad_range"},
  };
}

TEST(ParseFrame, EachCraftedFrameGetsItsNamedReason) {
  std::set<std::string> seen;
  for (const Crafted& c : crafted_cases()) {
    auto f = valid_frame(8);  // fp32, 32 payload bytes, pad 0
    ASSERT_EQ(name_of(parse(f)), "ok");
    c.mutate(f);
    EXPECT_EQ(name_of(parse_prefix(f, f.size())), c.want) << c.what;
    seen.insert(c.want);
  }
  // Every ParseError other than kOk has a crafted frame (the size cases below add nothing new).
  for (int i = 1; i < kParseErrorCount; ++i) {
    EXPECT_TRUE(seen.count(parse_error_name(static_cast<ParseError>(i))))
        << parse_error_name(static_cast<ParseError>(i));
  }
}

TEST(ParseFrame, PadCountLargerThanTheBodyIsBadLength) {
  // No payload: the body after the Sumcast header is empty, so any pad count exceeds it.
  for (uint8_t pad = 1; pad <= 3; ++pad) {
    auto f = valid_frame(0);
    f[kBthOffset + 1] = static_cast<uint8_t>(pad << 4);
    EXPECT_EQ(name_of(parse_prefix(f, f.size())), "bad_length") << int{pad};
  }
  // One payload byte (u8 would be the only dtype allowing it; none does): pad 3 > 1 byte.
  auto f = valid_frame(0);
  f.insert(f.begin() + kPayloadOffset, 0x77);
  fit_lengths(f, f.size());
  f[kBthOffset + 1] = 3 << 4;
  EXPECT_EQ(name_of(parse_prefix(f, f.size())), "bad_length");
}

TEST(ParseFrame, PayloadAboveTheMaximumIsBadLength) {
  // Consistent count and length, but more bytes than a RoCE MTU of 4096 allows.
  for (auto [d, count] : {std::pair{Dtype::kFp32, 1025}, std::pair{Dtype::kFp64, 513}, std::pair{Dtype::kFp16, 2050}}) {
    const auto f = valid_frame(static_cast<uint16_t>(count), d);
    EXPECT_EQ(name_of(parse_prefix(f, f.size())), "bad_length") << dtype_name(d);
  }
  const auto ok = valid_frame(512, Dtype::kFp64);  // exactly 4096
  EXPECT_EQ(name_of(parse_prefix(ok, ok.size())), "ok");
}

TEST(ParseFrame, RangeUpToTwoToTheFortyIsAccepted) {
  for (uint16_t count : {0, 1, 8}) {
    auto f = valid_frame(count);
    store_be64(f.data() + kSumcastOffset + 24, kMaxElementIndex - count);
    EXPECT_EQ(name_of(parse(f)), "ok") << count;
  }
}

TEST(ParseFrame, GoldenVectorsFromOtherRoceTrafficAreNotSumcast) {
  const auto vectors = testing::read_golden_vectors();
  ASSERT_GE(vectors.size(), 2u) << "roce_icrc_vectors.txt not found";
  for (const auto& v : vectors) {
    // A CNP (0x81) and a UC SEND_ONLY (0x24): valid RoCEv2, but not UD SEND_ONLY.
    EXPECT_EQ(name_of(parse_prefix(v.frame, v.frame.size())), "bad_opcode") << v.name;
  }
}

TEST(ParseErrorName, NamesAreDistinctAndOutOfRangeIsQuestionMark) {
  std::set<std::string> names;
  for (int i = 0; i < kParseErrorCount; ++i) {
    const std::string n = parse_error_name(static_cast<ParseError>(i));
    EXPECT_NE(n, "?");
    names.insert(n);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kParseErrorCount));
  EXPECT_STREQ(parse_error_name(ParseError::kOk), "ok");
  EXPECT_STREQ(parse_error_name(static_cast<ParseError>(kParseErrorCount)), "?");
}

// --- Checksums -----------------------------------------------------------------------------------

// RFC 1071 the other way round: sum bytes into two 8-bit lanes, fold, complement; a header with a
// correct checksum sums to 0xFFFF including the checksum field.
uint16_t reference_checksum(const uint8_t* ip) {
  uint32_t hi = 0, lo = 0;
  for (size_t i = 0; i < kIpv4HeaderLen; ++i) {
    if (i == 10 || i == 11) continue;
    (i % 2 ? lo : hi) += ip[i];
  }
  uint32_t sum = (hi << 8) + lo;
  while (sum > 0xFFFF) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xFFFF);
}

TEST(Ipv4HeaderChecksum, MatchesPublishedAndCapturedHeaders) {
  // RFC 1071-style example widely used in textbooks: 0xB861.
  const auto h1 = testing::from_hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(ipv4_header_checksum(h1.data()), 0xB861);
  // The headers of the golden vectors (one captured from a ConnectX-4 Lx) carry their checksum.
  const auto vectors = testing::read_golden_vectors();
  ASSERT_GE(vectors.size(), 2u) << "roce_icrc_vectors.txt not found";
  for (const auto& v : vectors) {
    const uint8_t* ip = v.frame.data() + kIpOffset;
    EXPECT_EQ(ipv4_header_checksum(ip), be_at(ip + 10, 2)) << v.name;
  }
}

TEST(Ipv4HeaderChecksum, AgreesWithAnIndependentImplementationOnRandomHeaders) {
  std::mt19937_64 rng(kSeed + 4);
  for (int iter = 0; iter < 100000; ++iter) {
    auto h = random_bytes(rng, kIpv4HeaderLen);
    if (iter % 3 == 0) std::fill(h.begin(), h.begin() + 10, 0xFF);  // exercise carries
    const uint16_t c = ipv4_header_checksum(h.data());
    ASSERT_EQ(c, reference_checksum(h.data())) << iter;
    // The stored checksum field does not matter, and the completed header verifies.
    store_be16(h.data() + 10, static_cast<uint16_t>(rng()));
    ASSERT_EQ(ipv4_header_checksum(h.data()), c);
    store_be16(h.data() + 10, c);
    uint32_t sum = 0;
    for (size_t i = 0; i < kIpv4HeaderLen; i += 2) sum += be_at(h.data() + i, 2);
    while (sum > 0xFFFF) sum = (sum & 0xFFFF) + (sum >> 16);
    ASSERT_EQ(sum, 0xFFFFu) << iter;
  }
}

// The test's own ICRC (used to stamp every frame here) against frames with hardware-made ICRCs.
TEST(TestIcrc, ReproducesTheGoldenVectors) {
  const auto vectors = testing::read_golden_vectors();
  ASSERT_GE(vectors.size(), 2u);
  for (const auto& v : vectors) {
    ASSERT_EQ(v.icrc.size(), 4u);
    const uint32_t c = icrc_of_frame(v.frame);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(v.icrc[i], static_cast<uint8_t>(c >> (8 * i))) << v.name;
  }
  const uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(testing::crc32_bitwise(check), 0xCBF43926u);  // the CRC-32 check value
}

}  // namespace
}  // namespace sumcast::wire
