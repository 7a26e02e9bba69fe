// format.h: the layout constants, enums and per-dtype sizes against docs/protocol.md §2, §4, §5.
#include "sumcast/wire/format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>

namespace sumcast::wire {
namespace {

TEST(WireFormat, OffsetsFollowTheHeaderSizesOfTheFramingSpec) {
  // Sizes from IEEE 802.3, RFC 791 (no options), RFC 768, IBA vol. 1 (BTH 12, DETH 8) and §5.
  const size_t eth = 6 + 6 + 2, ip = 5 * 4, udp = 4 * 2, bth = 12, deth = 8, sumcast = 32, icrc = 4;
  EXPECT_EQ(kEthHeaderLen, eth);
  EXPECT_EQ(kIpv4HeaderLen, ip);
  EXPECT_EQ(kUdpHeaderLen, udp);
  EXPECT_EQ(kBthLen, bth);
  EXPECT_EQ(kDethLen, deth);
  EXPECT_EQ(kSumcastHeaderLen, sumcast);
  EXPECT_EQ(kIcrcLen, icrc);
  EXPECT_EQ(kUdpOffset, eth + ip);
  EXPECT_EQ(kBthOffset, eth + ip + udp);
  EXPECT_EQ(kDethOffset, eth + ip + udp + bth);
  EXPECT_EQ(kSumcastOffset, eth + ip + udp + bth + deth);
  EXPECT_EQ(kPayloadOffset, eth + ip + udp + bth + deth + sumcast);
  EXPECT_EQ(kRoceHeadersLen, bth + deth + sumcast);
  EXPECT_EQ(kFrameOverhead, kPayloadOffset + icrc);
  EXPECT_EQ(kMaxFrameLen, kFrameOverhead + 4096);
  // A maximal frame's IPv4 total length must fit its 16-bit field.
  EXPECT_LT(kMaxFrameLen - eth, size_t{65536});
}

TEST(WireFormat, RoceConstantsAreTheStandardOnes) {
  EXPECT_EQ(kRoceUdpPort, 4791);       // IANA "roce"
  EXPECT_EQ(kOpcodeUdSendOnly, 0x64);  // IBA: UD (0b011) SEND_ONLY (0b00100)
  EXPECT_EQ(kOpcodeUdSendOnly >> 5, 0b011);
  EXPECT_EQ(kOpcodeUdSendOnly & 0x1F, 0b00100);
  EXPECT_EQ(kDefaultPKey, 0xFFFF);
  EXPECT_EQ(kMulticastQpn, 0xFFFFFFu);
  EXPECT_EQ(kBthTver, 0);
  EXPECT_EQ(kEtherTypeIpv4, 0x0800);
  EXPECT_EQ(kEtherTypeIpv6, 0x86DD);
  EXPECT_EQ(kEtherTypeArp, 0x0806);
  EXPECT_EQ(kEtherTypeVlan, 0x8100);
  EXPECT_EQ(kIpProtoUdp, 17);
}

TEST(WireFormat, DtypeSizeIsTheWidthOfTheWireElement) {
  EXPECT_EQ(dtype_size(Dtype::kFp32), sizeof(float));
  EXPECT_EQ(dtype_size(Dtype::kFp16), sizeof(uint16_t));
  EXPECT_EQ(dtype_size(Dtype::kBf16), sizeof(uint16_t));
  EXPECT_EQ(dtype_size(Dtype::kInt32), sizeof(int32_t));
  EXPECT_EQ(dtype_size(Dtype::kFp64), sizeof(double));
  EXPECT_EQ(dtype_size(static_cast<Dtype>(kDtypeCount)), 0u);
}

TEST(WireFormat, HalfWidthTypesAccumulateInFp32) {
  EXPECT_EQ(accumulator_size(Dtype::kFp16), sizeof(float));
  EXPECT_EQ(accumulator_size(Dtype::kBf16), sizeof(float));
  EXPECT_EQ(accumulator_size(Dtype::kFp32), sizeof(float));
  EXPECT_EQ(accumulator_size(Dtype::kInt32), sizeof(int32_t));
  EXPECT_EQ(accumulator_size(Dtype::kFp64), sizeof(double));
  for (int d = 0; d < kDtypeCount; ++d) {
    EXPECT_GE(accumulator_size(static_cast<Dtype>(d)), dtype_size(static_cast<Dtype>(d))) << d;
  }
}

TEST(WireFormat, ValidityPredicatesStopAtTheLastEnumerator) {
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    EXPECT_EQ(is_valid_dtype(b), v <= static_cast<int>(Dtype::kFp64)) << v;
    EXPECT_EQ(is_valid_op(b), v <= static_cast<int>(ReduceOp::kMax)) << v;
    EXPECT_EQ(is_valid_msg_type(b),
              v >= static_cast<int>(MsgType::kContribution) && v <= static_cast<int>(MsgType::kDuplicateNotice))
        << v;
  }
}

// A contribution's transmission number (loss notices, protocol.md §7): 15 bits, the low 8 in
// status and the high 7 in flags bits 1..7, flags bit 0 (the version bit) untouched; only
// contributions and results carry elements.
TEST(WireFormat, TransmissionNumbersTakeStatusAndTheFlagsAboveTheVersionBit) {
  for (const uint32_t seq : {0u, 1u, 0xFFu, 0x100u, 0x1234u, 0x4000u, kTxSeqMask}) {
    for (const uint8_t version : {uint8_t{0}, uint8_t{1}}) {
      SumcastHeader h;
      h.flags = version;
      set_contribution_tx_seq(&h, seq);
      EXPECT_EQ(contribution_tx_seq(h), seq) << seq;
      EXPECT_EQ(h.flags & kFlagSlotVersion, version) << seq;
      EXPECT_EQ(h.status, seq & 0xFF) << seq;
      EXPECT_EQ(h.flags >> 1, seq >> 8) << seq;
    }
  }
  SumcastHeader h;
  set_contribution_tx_seq(&h, kTxSeqMask + 1);  // only 15 bits are kept
  EXPECT_EQ(contribution_tx_seq(h), 0u);
  EXPECT_EQ(kTxSeqHalf, (kTxSeqMask + 1) / 2);
  EXPECT_EQ(kFlagNoticeSeq & kFlagSlotVersion, 0);
  EXPECT_TRUE(carries_payload(MsgType::kContribution));
  EXPECT_TRUE(carries_payload(MsgType::kResult));
  EXPECT_FALSE(carries_payload(MsgType::kAbort));
  EXPECT_FALSE(carries_payload(MsgType::kLossNotice));
  EXPECT_FALSE(carries_payload(MsgType::kDuplicateNotice));
}

TEST(WireFormat, NamesAreDistinctAndKnown) {
  std::set<std::string> dtypes;
  for (int d = 0; d < kDtypeCount; ++d) dtypes.insert(dtype_name(static_cast<Dtype>(d)));
  EXPECT_EQ(dtypes, (std::set<std::string>{"fp32", "fp16", "bf16", "int32", "fp64"}));
  EXPECT_STREQ(dtype_name(static_cast<Dtype>(kDtypeCount)), "?");
  std::set<std::string> ops;
  for (int o = 0; o < kReduceOpCount; ++o) ops.insert(reduce_op_name(static_cast<ReduceOp>(o)));
  EXPECT_EQ(ops, (std::set<std::string>{"sum", "min", "max"}));
  EXPECT_STREQ(reduce_op_name(static_cast<ReduceOp>(kReduceOpCount)), "?");
}

TEST(WireFormat, DefaultHeaderIsAVersionOneFp32SumContribution) {
  const SumcastHeader h;
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.type, MsgType::kContribution);
  EXPECT_EQ(h.dtype, Dtype::kFp32);
  EXPECT_EQ(h.op, ReduceOp::kSum);
  EXPECT_EQ(h.flags, 0);
  EXPECT_EQ(h.status, 0);
}

TEST(WireFormat, ElementIndexLimitIsTwoToTheForty) {
  EXPECT_EQ(kMaxElementIndex, uint64_t{1099511627776});
  // A u16 count added to any accepted offset cannot overflow u64.
  EXPECT_LT(kMaxElementIndex + 0xFFFF, kMaxElementIndex * 2);
}

}  // namespace
}  // namespace sumcast::wire
