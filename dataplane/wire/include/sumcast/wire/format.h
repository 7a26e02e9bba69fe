// The Sumcast wire format: constants, enums and header layout. Specification: docs/protocol.md;
// every constant below cites its section there. Header-only; no dependencies beyond <cstdint>.
//
// Frame: Ethernet | IPv4 (no options) | UDP (dst 4791) | BTH | DETH | Sumcast header | payload | ICRC
// All header fields are big-endian (network order); payload elements are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sumcast::wire {

// docs/protocol.md §2 Framing.
inline constexpr size_t kEthHeaderLen = 14;
inline constexpr size_t kIpv4HeaderLen = 20;
inline constexpr size_t kUdpHeaderLen = 8;
inline constexpr size_t kBthLen = 12;
inline constexpr size_t kDethLen = 8;
inline constexpr size_t kSumcastHeaderLen = 32;
inline constexpr size_t kIcrcLen = 4;
inline constexpr size_t kIpOffset = kEthHeaderLen;
inline constexpr size_t kIpDstOffset = kIpOffset + 16;  // 30: the IPv4 destination address
inline constexpr size_t kUdpOffset = kIpOffset + kIpv4HeaderLen;
inline constexpr size_t kBthOffset = kUdpOffset + kUdpHeaderLen;              // 42
inline constexpr size_t kDethOffset = kBthOffset + kBthLen;                   // 54
inline constexpr size_t kSumcastOffset = kDethOffset + kDethLen;              // 62
inline constexpr size_t kPayloadOffset = kSumcastOffset + kSumcastHeaderLen;  // 94
// Bytes from the start of the BTH to the start of the payload (what a UDP socket sends first).
inline constexpr size_t kRoceHeadersLen = kBthLen + kDethLen + kSumcastHeaderLen;  // 52
// Frame bytes that are not payload.
inline constexpr size_t kFrameOverhead = kPayloadOffset + kIcrcLen;  // 98
inline constexpr size_t kMinPayloadBytes = 0;
inline constexpr size_t kMaxPayloadBytes = 4096;  // §4: RoCE MTU 4096 on jumbo frames
inline constexpr size_t kMaxFrameLen = kFrameOverhead + kMaxPayloadBytes;

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint16_t kRoceUdpPort = 4791;       // IANA RoCEv2
inline constexpr uint8_t kOpcodeUdSendOnly = 0x64;   // §3 BTH: UD SEND_ONLY
inline constexpr uint16_t kDefaultPKey = 0xFFFF;     // §3 BTH: full-membership default partition
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;  // §7 results by multicast
inline constexpr uint8_t kBthTver = 0;               // §3 BTH transport header version
inline constexpr uint8_t kOpcodeCnp = 0x81;          // §3 congestion notification (RoCEv2 CNP)
inline constexpr uint8_t kBthBecn = 0x40;            // §3 BTH byte 4: BECN (set in a CNP)
inline constexpr size_t kCnpReservedLen = 16;        // §3 CNP: zero bytes between the BTH and the ICRC

// §5 Sumcast header.
inline constexpr uint8_t kProtocolVersion = 1;

enum class MsgType : uint8_t {
  kContribution = 1,     // worker -> appliance: one chunk of one rank's data
  kResult = 2,           // appliance -> worker: the reduced chunk
  kAbort = 3,            // appliance -> worker: the job failed; `status` says why, no payload
  kLossNotice = 4,       // appliance -> one worker: its contribution to the open round named is missing; no payload
  kDuplicateNotice = 5,  // appliance -> one worker: the open round named holds its contribution already; no payload
};

enum class Dtype : uint8_t {
  kFp32 = 0,
  kFp16 = 1,   // IEEE binary16, accumulated in fp32, rounded once at completion
  kBf16 = 2,   // bfloat16, accumulated in fp32, rounded once at completion
  kInt32 = 3,  // two's complement, wrapping sum
  kFp64 = 4,
};
inline constexpr int kDtypeCount = 5;

enum class ReduceOp : uint8_t {
  kSum = 0,
  kMin = 1,
  kMax = 2,
};
inline constexpr int kReduceOpCount = 3;

// Reason codes carried in an abort message's `status` field (§8).
enum class AbortReason : uint8_t {
  kNone = 0,
  kTimeout = 1,        // no progress on the job for its timeout
  kMemberLeft = 2,     // a member's control connection closed or it sent leave
  kApplianceStop = 3,  // the appliance is shutting down
  kAdmin = 4,          // an operator aborted the job
};

// Size in bytes of one element on the wire.
constexpr size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return 4;
    case Dtype::kFp16:
      return 2;
    case Dtype::kBf16:
      return 2;
    case Dtype::kInt32:
      return 4;
    case Dtype::kFp64:
      return 8;
  }
  return 0;
}
// Size in bytes of one element of the appliance's accumulator for this dtype.
constexpr size_t accumulator_size(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kFp16:
    case Dtype::kBf16:
      return 4;
    case Dtype::kInt32:
      return 4;
    case Dtype::kFp64:
      return 8;
  }
  return 0;
}
constexpr bool is_valid_dtype(uint8_t d) { return d < kDtypeCount; }
constexpr bool is_valid_op(uint8_t o) { return o < kReduceOpCount; }
constexpr bool is_valid_msg_type(uint8_t t) { return t >= 1 && t <= 5; }
// Whether frames of type `t` carry elem_count elements (§5); aborts and notices carry none.
constexpr bool carries_payload(MsgType t) { return t == MsgType::kContribution || t == MsgType::kResult; }
constexpr const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kInt32:
      return "int32";
    case Dtype::kFp64:
      return "fp64";
  }
  return "?";
}
constexpr const char* reduce_op_name(ReduceOp o) {
  switch (o) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";
}

// Sumcast header flags (§5).
inline constexpr uint8_t kFlagSlotVersion = 0x01;  // the slot's version bit == round & 1

// Loss notices (§7). In a job granted them, a contribution carries the sender's number of its
// first transmission to that appliance core, modulo 2^15: the low 8 bits in its status byte, the
// high 7 in flags bits 1..7 (a retransmission repeats its number). One number is ahead of another
// when it is less than kTxSeqHalf after it. A loss notice names the number of the lost
// contribution in its round field and carries kFlagNoticeSeq; a notice without it (from an
// appliance of the revision that named chunks instead) names nothing a worker can use.
inline constexpr uint32_t kTxSeqMask = 0x7FFF;
inline constexpr uint32_t kTxSeqHalf = 0x4000;
inline constexpr uint8_t kFlagNoticeSeq = 0x02;

// Largest element offset accepted (§5): offset + count must not exceed 2^40 elements.
inline constexpr uint64_t kMaxElementIndex = uint64_t{1} << 40;

// The Sumcast header in host order (§5). On the wire (32 bytes, big-endian):
//   0 version u8 | 1 type u8 | 2 dtype u8 | 3 op u8 | 4 job_id u32 | 8 rank u16 | 10 slot u16 |
//   12 round u32 | 16 coll_seq u32 | 20 elem_count u16 | 22 flags u8 | 23 status u8 |
//   24 elem_offset u64
struct SumcastHeader {
  uint8_t version = kProtocolVersion;
  MsgType type = MsgType::kContribution;
  Dtype dtype = Dtype::kFp32;
  ReduceOp op = ReduceOp::kSum;
  uint32_t job_id = 0;
  uint16_t rank = 0;         // sender (contribution) or receiver (result; 0xFFFF for multicast)
  uint16_t slot = 0;         // index within the job's slot range
  uint32_t round = 0;        // per-slot round number; the slot version bit is round & 1
  uint32_t coll_seq = 0;     // the collective call this chunk belongs to
  uint16_t elem_count = 0;   // elements in the payload
  uint8_t flags = 0;         // kFlag*
  uint8_t status = 0;        // AbortReason for kAbort, else 0
  uint64_t elem_offset = 0;  // element offset of the chunk in the collective's buffer
};

// A contribution's transmission number (loss notices, above): read, and written into a header
// whose flags bit 0 (the round's version bit) is set already.
constexpr uint32_t contribution_tx_seq(const SumcastHeader& h) {
  return uint32_t{h.status} | uint32_t{static_cast<uint8_t>(h.flags >> 1)} << 8;
}
constexpr void set_contribution_tx_seq(SumcastHeader* h, uint32_t seq) {
  h->status = static_cast<uint8_t>(seq);
  h->flags = static_cast<uint8_t>((h->flags & kFlagSlotVersion) | ((seq >> 8) & 0x7F) << 1);
}

inline constexpr uint16_t kRankMulticast = 0xFFFF;

}  // namespace sumcast::wire
