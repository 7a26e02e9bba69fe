// Fuzzer of the frame parser (sumcast/wire/packet.h): wire::parse_frame and wire::parse_roce on
// arbitrary bytes, plus engine::Engine::owner_core and the ICRC helpers on what they accept.
//
// Invariants checked on every input (any violation aborts):
//   - Nothing reads outside the input (AddressSanitizer: libFuzzer hands over an exactly-sized
//     heap copy, so one byte too far is a heap-buffer-overflow).
//   - parse_frame -> kOk implies: the IPv4 header is at byte 14 and its total length fits in the
//     input; the payload starts at byte 94 and payload + payload_len + BTH pad + ICRC ends exactly
//     at the IPv4 total length; payload_len == elem_count * dtype_size (0 for an abort) and
//     <= kMaxPayloadBytes; version, type, dtype and op are known; elem_offset + elem_count <=
//     2^40; every address field equals the bytes it came from; re-encoding the decoded Sumcast
//     header gives back its 32 bytes.
//   - parse_roce on the UDP payload of an accepted frame accepts it with the same result, and
//     cutting the Ethernet padding off (the first 14 + total length bytes) changes nothing.
//   - A frame rebuilt from what was parsed (write_frame_headers + stamp_frame) parses to the same
//     fields and payload, and its ICRC verifies.
//   - owner_core of an accepted contribution is slot % core_count for several core counts.
//   - parse_roce on the raw input obeys the same payload/length rules relative to its span.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "sumcast/endian.h"
#include "sumcast/engine/engine.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::wire {
namespace {

// An exactly-sized heap copy, so that reading past `n` is caught by AddressSanitizer.
std::unique_ptr<uint8_t[]> exact_copy(const uint8_t* p, size_t n) {
  auto out = std::make_unique<uint8_t[]>(std::max<size_t>(n, 1));
  if (n != 0) std::memcpy(out.get(), p, n);
  return out;
}

bool same_header(const SumcastHeader& a, const SumcastHeader& b) {
  return a.version == b.version && a.type == b.type && a.dtype == b.dtype && a.op == b.op && a.job_id == b.job_id &&
         a.rank == b.rank && a.slot == b.slot && a.round == b.round && a.coll_seq == b.coll_seq &&
         a.elem_count == b.elem_count && a.flags == b.flags && a.status == b.status && a.elem_offset == b.elem_offset;
}

// The BTH..ICRC fields of two parses, of inputs starting at `a_base` and `b_base`.
bool same_roce(const ParsedPacket& a, const uint8_t* a_base, const ParsedPacket& b, const uint8_t* b_base) {
  return a.bth_flags == b.bth_flags && a.dest_qp == b.dest_qp && a.psn == b.psn && a.qkey == b.qkey &&
         a.src_qp == b.src_qp && same_header(a.hdr, b.hdr) && a.payload - a_base == b.payload - b_base &&
         a.payload_len == b.payload_len;
}

// The structural rules of an accepted BTH..ICRC span [begin, end).
void check_roce_accepted(const ParsedPacket& p, const uint8_t* begin, const uint8_t* end) {
  const SumcastHeader& h = p.hdr;
  SUMCAST_FUZZ_CHECK(h.version == kProtocolVersion, "version %u", h.version);
  SUMCAST_FUZZ_CHECK(is_valid_msg_type(static_cast<uint8_t>(h.type)), "type %u", static_cast<unsigned>(h.type));
  SUMCAST_FUZZ_CHECK(is_valid_dtype(static_cast<uint8_t>(h.dtype)), "dtype %u", static_cast<unsigned>(h.dtype));
  SUMCAST_FUZZ_CHECK(is_valid_op(static_cast<uint8_t>(h.op)), "op %u", static_cast<unsigned>(h.op));
  const size_t want = carries_payload(h.type) ? size_t{h.elem_count} * dtype_size(h.dtype) : 0;
  SUMCAST_FUZZ_CHECK(p.payload_len == want, "payload_len %zu, elem_count %u", p.payload_len, h.elem_count);
  SUMCAST_FUZZ_CHECK(p.payload_len <= kMaxPayloadBytes, "payload_len %zu", p.payload_len);
  SUMCAST_FUZZ_CHECK(h.elem_offset <= kMaxElementIndex && h.elem_offset + h.elem_count <= kMaxElementIndex,
                     "range %llu+%u", static_cast<unsigned long long>(h.elem_offset), h.elem_count);
  SUMCAST_FUZZ_CHECK(p.payload == begin + kRoceHeadersLen, "payload at %td", p.payload - begin);
  const size_t pad = (p.bth_flags >> 4) & 3;
  SUMCAST_FUZZ_CHECK(p.payload + p.payload_len + pad + kIcrcLen == end, "payload + %zu + pad %zu + icrc != end",
                     p.payload_len, pad);
  SUMCAST_FUZZ_CHECK(begin[0] == kOpcodeUdSendOnly && load_be16(begin + 2) == kDefaultPKey, "BTH");
  SUMCAST_FUZZ_CHECK(p.dest_qp == load_be24(begin + 5) && p.psn == load_be24(begin + 9), "BTH fields");
  SUMCAST_FUZZ_CHECK(p.qkey == load_be32(begin + kBthLen) && p.src_qp == load_be24(begin + kBthLen + 5), "DETH");
  uint8_t encoded[kSumcastHeaderLen];
  encode_sumcast_header(h, encoded);
  SUMCAST_FUZZ_CHECK(std::memcmp(encoded, begin + kBthLen + kDethLen, kSumcastHeaderLen) == 0,
                     "header does not re-encode to its bytes");
}

// Rebuilds the frame from what was parsed and parses it again.
void check_rebuild(const ParsedPacket& p) {
  Addressing a;
  std::memcpy(a.src_mac, p.src_mac, 6);
  std::memcpy(a.dst_mac, p.dst_mac, 6);
  a.src_ip = p.src_ip;
  a.dst_ip = p.dst_ip;
  a.src_port = p.src_port;
  a.dst_port = p.dst_port;
  a.dest_qp = p.dest_qp;
  a.src_qp = p.src_qp;
  a.qkey = p.qkey;
  a.psn = p.psn;
  std::vector<uint8_t> buf(frame_len(p.payload_len));
  uint8_t* payload = write_frame_headers(buf.data(), a, p.hdr, p.payload_len);
  if (p.payload_len != 0) std::memcpy(payload, p.payload, p.payload_len);
  icrc::stamp_frame(buf);
  SUMCAST_FUZZ_CHECK(icrc::verify_frame(buf), "a stamped rebuilt frame does not verify");
  ParsedPacket q;
  const ParseError e = parse_frame(buf, &q);
  SUMCAST_FUZZ_CHECK(e == ParseError::kOk, "rebuilt frame: %s", parse_error_name(e));
  SUMCAST_FUZZ_CHECK(same_header(p.hdr, q.hdr), "rebuilt header differs");
  SUMCAST_FUZZ_CHECK(
      q.payload_len == p.payload_len && (p.payload_len == 0 || std::memcmp(q.payload, p.payload, p.payload_len) == 0),
      "rebuilt payload differs");
  SUMCAST_FUZZ_CHECK(q.src_ip == p.src_ip && q.dst_ip == p.dst_ip && q.src_port == p.src_port &&
                         q.dst_port == p.dst_port && q.qkey == p.qkey && q.src_qp == p.src_qp &&
                         q.dest_qp == p.dest_qp && q.psn == p.psn,
                     "rebuilt addressing differs");
  SUMCAST_FUZZ_CHECK(std::memcmp(q.src_mac, p.src_mac, 6) == 0 && std::memcmp(q.dst_mac, p.dst_mac, 6) == 0,
                     "rebuilt MACs differ");
}

void check_frame(const uint8_t* data, size_t size) {
  ParsedPacket p;
  const ParseError e = parse_frame(std::span<const uint8_t>(data, size), &p);
  SUMCAST_FUZZ_CHECK(static_cast<int>(e) < kParseErrorCount, "error %d", static_cast<int>(e));
  if (e != ParseError::kOk) return;

  // Ethernet, IPv4 and UDP.
  SUMCAST_FUZZ_CHECK(size >= kFrameOverhead, "accepted %zu bytes", size);
  SUMCAST_FUZZ_CHECK(p.ip == data + kIpOffset, "ip at %td", p.ip - data);
  SUMCAST_FUZZ_CHECK(p.ip_len == load_be16(data + kIpOffset + 2), "ip_len %zu", p.ip_len);
  SUMCAST_FUZZ_CHECK(kIpOffset + p.ip_len <= size, "ip_len %zu of %zu bytes", p.ip_len, size);
  SUMCAST_FUZZ_CHECK(load_be16(data + 12) == kEtherTypeIpv4 && data[kIpOffset] == 0x45, "not IPv4 without options");
  SUMCAST_FUZZ_CHECK(data[kIpOffset + 9] == kIpProtoUdp, "not UDP");
  SUMCAST_FUZZ_CHECK((load_be16(data + kIpOffset + 6) & 0x3FFF) == 0, "a fragment");
  SUMCAST_FUZZ_CHECK(std::memcmp(p.dst_mac, data, 6) == 0 && std::memcmp(p.src_mac, data + 6, 6) == 0, "MACs");
  SUMCAST_FUZZ_CHECK(p.src_ip == load_be32(data + kIpOffset + 12) && p.dst_ip == load_be32(data + kIpOffset + 16),
                     "IPv4 addresses");
  SUMCAST_FUZZ_CHECK(p.src_port == load_be16(data + kUdpOffset) && p.dst_port == kRoceUdpPort &&
                         load_be16(data + kUdpOffset + 2) == kRoceUdpPort,
                     "UDP ports");
  SUMCAST_FUZZ_CHECK(load_be16(data + kUdpOffset + 4) == p.ip_len - kIpv4HeaderLen, "UDP length");
  const uint8_t* roce_begin = data + kBthOffset;
  const uint8_t* roce_end = p.ip + p.ip_len;
  check_roce_accepted(p, roce_begin, roce_end);

  // parse_roce on the UDP payload alone agrees.
  ParsedPacket r;
  const ParseError re = parse_roce(std::span<const uint8_t>(roce_begin, roce_end), &r);
  SUMCAST_FUZZ_CHECK(re == ParseError::kOk, "parse_roce on the UDP payload: %s", parse_error_name(re));
  SUMCAST_FUZZ_CHECK(same_roce(p, data, r, data), "parse_roce disagrees with parse_frame");

  // Without the Ethernet padding (an exactly-sized copy) nothing changes.
  const size_t trimmed = kIpOffset + p.ip_len;
  auto copy = exact_copy(data, trimmed);
  ParsedPacket t;
  const ParseError te = parse_frame(std::span<const uint8_t>(copy.get(), trimmed), &t);
  SUMCAST_FUZZ_CHECK(te == ParseError::kOk, "without padding: %s", parse_error_name(te));
  SUMCAST_FUZZ_CHECK(same_roce(p, data, t, copy.get()) && t.ip_len == p.ip_len, "padding changed the parse");

  // The ICRC helpers accept what the parser accepted; stamping makes it verify.
  const bool verified = icrc::verify_frame(std::span<const uint8_t>(data, size));
  auto stamped = exact_copy(data, size);
  icrc::stamp_frame(std::span<uint8_t>(stamped.get(), size));
  SUMCAST_FUZZ_CHECK(icrc::verify_frame(std::span<const uint8_t>(stamped.get(), size)), "stamped frame fails");
  SUMCAST_FUZZ_CHECK(verified == (std::memcmp(stamped.get(), data, size) == 0),
                     "verify_frame %d but stamping %s the frame", verified ? 1 : 0,
                     verified ? "changed" : "did not change");

  // The dispatcher sends a contribution to the core that owns its slot.
  if (p.hdr.type == MsgType::kContribution) {
    for (uint32_t cores : {1u, 2u, 3u, 4u, 7u}) {
      const int owner = engine::Engine::owner_core(data, static_cast<uint32_t>(size), cores);
      SUMCAST_FUZZ_CHECK(owner == static_cast<int>(p.hdr.slot % cores), "owner_core %d for slot %u of %u cores", owner,
                         p.hdr.slot, cores);
    }
  }
  check_rebuild(p);
}

void check_roce(const uint8_t* data, size_t size) {
  ParsedPacket p;
  const ParseError e = parse_roce(std::span<const uint8_t>(data, size), &p);
  if (e != ParseError::kOk) return;
  check_roce_accepted(p, data, data + size);
}

}  // namespace
}  // namespace sumcast::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sumcast::wire::check_frame(data, size);
  sumcast::wire::check_roce(data, size);
  // Any bytes, any core count: owner_core must stay inside the frame.
  for (uint32_t cores : {0u, 1u, 5u}) {
    const int owner = sumcast::engine::Engine::owner_core(data, static_cast<uint32_t>(size), cores);
    SUMCAST_FUZZ_CHECK(owner >= -1 && owner < static_cast<int>(cores == 0 ? 1 : cores), "owner_core %d", owner);
  }
  return 0;
}
