// Fuzzer of the per-packet engine path (sumcast/engine/engine.h): one Engine (core 1 of 2) with
// two live jobs, fed a stream of frames that mixes a legitimate all-reduce built by the harness
// with frames the fuzz input makes.
//
// The jobs:
//   A  the legitimate job: 4 ranks, 8 slots (this core owns 1, 3, 5, 7), dtype and op chosen by
//      the input (every dtype, sum/min/max). The harness plays its 4 workers: for 3 rounds of
//      each owned slot, every rank sends its chunk (integer-valued elements in [-8, 8], so every
//      result is exact in every dtype), a round only after the slot's previous round is complete,
//      as the slot protocol makes workers do. The first round may be 2^32 - 1 (rounds wrap).
//   B  the fuzzer's own job: 3 ranks, 6 slots, dtype/op/payload limit/multicast/loss notices
//      chosen by the input. The fuzzer may forge anything for B (its members' addresses are no secret), to
//      explore the slot machine: duplicates, stale and future rounds, chunk mismatches, version
//      bits, removal with an abort and re-registration.
//
// Threat model, i.e. which frames the fuzzer may deliver (each record of the input is one):
//   - the next legitimate frame(s) of A, in order, into the current burst; a burst boundary;
//   - an exact replay of any legitimate frame already delivered (network duplication, delay);
//   - a corrupted replay: a delivered legitimate frame with arbitrary bytes XORed in and its
//     length changed. If a changed byte is covered by the ICRC, the copy always reaches the engine
//     with a wrong ICRC (the harness breaks it should the fuzzer have fixed it up): corruption is
//     detected by the ICRC, which is the protocol's integrity check. Bytes the ICRC does not cover
//     (Ethernet header, TOS, TTL, IPv4 and UDP checksums, BTH resv8a, Ethernet padding) are
//     free: such a copy is a duplicate as far as the protocol is concerned;
//   - raw bytes, or a frame built from fuzzed header fields and payload (ICRC stamped or not),
//     or an ARP request. These come from a FOREIGN source: when their IPv4 source address field
//     holds the address of a member of A, the harness flips a bit of it. Everything else (Q_Key,
//     job id, rank, MACs, ports, QPNs, ...) is the fuzzer's to choose, so it can learn A's Q_Key.
//   - removal of B (with any abort reason) and its re-registration at another first round.
//
// Invariants checked (any violation aborts):
//   1. Every (slot, round) of A completes exactly in the burst that carries its last legitimate
//      contribution - never earlier (a foreign or corrupted frame was counted) and never later -
//      and after every burst A's progress() counts exactly the rounds completed and opened so far.
//   2. Every frame the engine sends to a member of A is a well-formed result (parse_frame kOk,
//      ICRC valid, from the appliance, A's Q_Key, the member's MAC/port/QPN and rank) of a
//      completed legitimate (slot, round), with that chunk's coll_seq/offset/count and exactly
//      the expected elements. At the end every rank has the result of every (slot, round).
//   3. Every other frame sent is a well-formed result or abort of B to a member of B or to B's
//      group, a loss or duplicate notice to a member of B (when B was granted them), or an ARP
//      reply from this port; the engine never sends anywhere else.
//   4. Every frame received is accounted exactly once: rx_packets == sum of drops +
//      contributions + duplicates + retransmits_answered + arp_replies (the tx pool never runs
//      dry here, so kTxNoBuffer stays 0).
//   5. No crash, no sanitizer finding.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "sumcast/endian.h"
#include "sumcast/engine/engine.h"
#include "sumcast/engine/memory_port.h"
#include "sumcast/engine/testing.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::engine {
namespace {

using wire::Dtype;
using wire::ReduceOp;

constexpr uint8_t kApplianceMac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
constexpr uint32_t kApplianceIp = 0x0A000001;  // 10.0.0.1
constexpr uint32_t kCoreIndex = 1;
constexpr uint32_t kCoreCount = 2;

constexpr uint32_t kJobA = 0xA0000001;
constexpr uint32_t kQkeyA = 0x2A2A2A2A;
constexpr uint32_t kWorldA = 4;
constexpr uint16_t kSlotsA = 8;
constexpr uint16_t kMaxPayloadA = 256;
constexpr uint32_t kRoundsA = 3;
constexpr uint16_t kLegitSlots[] = {1, 3, 5, 7};  // owned by core 1 of 2
constexpr size_t kLegitSlotCount = sizeof(kLegitSlots) / sizeof(kLegitSlots[0]);

constexpr uint32_t kJobB = 0xB0000002;
constexpr uint32_t kQkeyB = 0x3B3B3B3B;
constexpr uint32_t kWorldB = 3;
constexpr uint16_t kSlotsB = 6;
constexpr uint32_t kGroupB = 0xEF020202;  // 239.2.2.2
constexpr uint8_t kGroupMacB[6] = {0x01, 0x00, 0x5E, 0x02, 0x02, 0x02};

constexpr size_t kMaxBurst = 64;      // frames per burst; a burst emits at most 4 frames per frame
constexpr size_t kTxBuffers = 512;    // > 4 * kMaxBurst: the pool never runs dry
constexpr size_t kMaxRecords = 1024;  // records read from one input
constexpr size_t kMaxRawFrame = wire::kMaxFrameLen + 64;

Member member(uint32_t net, uint32_t rank) {
  Member m;
  const uint8_t mac[6] = {0x02, 0x57, 0x4B, static_cast<uint8_t>(net), 0x00, static_cast<uint8_t>(rank)};
  std::memcpy(m.mac, mac, 6);
  m.ip = 0x0A000000 + (net << 16) + rank + 1;  // 10.<net>.0.<rank + 1>
  m.udp_port = static_cast<uint16_t>(40000 + net * 1000 + rank);
  m.qpn = 0x010000 * net + 0x100 + rank;
  return m;
}

EngineOptions appliance() {
  EngineOptions o;
  o.core_index = kCoreIndex;
  o.core_count = kCoreCount;
  std::memcpy(o.local_mac, kApplianceMac, 6);
  o.local_ip = kApplianceIp;
  o.qpn = 0x000101;
  o.max_jobs = 4;
  return o;
}

// Reads the fuzz input front to back; past the end every read gives 0.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return at_ >= n_; }
  uint8_t u8() { return at_ < n_ ? p_[at_++] : 0; }
  uint16_t u16() {  // big-endian; two statements, as operands of | are unsequenced
    const uint16_t hi = u8();
    return static_cast<uint16_t>(hi << 8 | u8());
  }
  uint32_t u32() {
    const uint32_t hi = u16();
    return hi << 16 | u16();
  }
  // Up to `n` bytes (fewer at the end of the input).
  std::span<const uint8_t> bytes(size_t n) {
    const size_t k = std::min(n, n_ - std::min(at_, n_));
    const std::span<const uint8_t> out(p_ + at_, k);
    at_ += k;
    return out;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

// Rank r's element i of chunk (slot, round k): an integer in [-8, 8].
double legit_value(uint32_t rank, uint32_t slot, uint32_t k, size_t i) {
  return static_cast<double>(static_cast<int>((rank * 7 + slot * 3 + k * 5 + i * 11 + rank * i) % 17) - 8);
}

uint16_t legit_count(size_t slot_index, Dtype dtype) {
  const uint16_t max = static_cast<uint16_t>(kMaxPayloadA / wire::dtype_size(dtype));
  const uint16_t counts[kLegitSlotCount] = {1, 7, 16, max};
  return counts[slot_index];
}

// One legitimate (slot, round) of A.
struct Chunk {
  uint16_t slot = 0;
  uint32_t round = 0;
  uint32_t coll_seq = 0;
  uint64_t offset = 0;
  uint16_t count = 0;
  std::vector<double> expected;
  size_t first_frame = 0;  // indices in the legitimate sequence
  size_t last_frame = 0;
  int64_t open_burst = -1;                      // the burst that carried first_frame
  int64_t complete_burst = -1;                  // the burst that carried last_frame
  std::array<int64_t, kWorldA> first_result{};  // burst of each rank's first result, -1: none
};

struct Frame {
  std::unique_ptr<uint8_t[]> bytes;  // exactly `len` bytes: reads past the end are caught
  uint32_t len = 0;
};

Frame copy_frame(std::span<const uint8_t> b) {
  Frame f;
  f.len = static_cast<uint32_t>(b.size());
  f.bytes = std::make_unique<uint8_t[]>(std::max<size_t>(b.size(), 1));
  if (!b.empty()) std::memcpy(f.bytes.get(), b.data(), b.size());
  return f;
}

// True when byte `i` of a frame (with its IPv4 header at 14) is masked or outside the ICRC.
bool icrc_ignores(size_t i) {
  constexpr size_t ip = wire::kIpOffset;
  return i < ip || i == ip + 1 || i == ip + 8 || i == ip + 10 || i == ip + 11 || i == wire::kUdpOffset + 6 ||
         i == wire::kUdpOffset + 7 || i == wire::kBthOffset + 4;
}

class Harness {
 public:
  explicit Harness(Input& in) : in_(in), opt_(appliance()), engine_(opt_) {
    const uint8_t sel = in_.u8();
    const uint8_t sel_b = in_.u8();
    a_.job_id = kJobA;
    a_.qkey = kQkeyA;
    a_.dtype = static_cast<Dtype>(sel % wire::kDtypeCount);
    a_.op = static_cast<ReduceOp>((sel >> 3) % wire::kReduceOpCount);
    a_.slot_count = kSlotsA;
    a_.max_payload_bytes = kMaxPayloadA;
    a_.first_round = (sel & 0x80) != 0 ? 0xFFFFFFFFu : 0u;
    for (uint32_t r = 0; r < kWorldA; ++r) a_.members.push_back(member(1, r));

    b_.job_id = kJobB;
    b_.qkey = kQkeyB;
    b_.dtype = static_cast<Dtype>(sel_b % wire::kDtypeCount);
    b_.op = static_cast<ReduceOp>((sel_b >> 3) % wire::kReduceOpCount);
    b_.slot_count = kSlotsB;
    b_.max_payload_bytes = static_cast<uint16_t>(std::max<size_t>(8, ((sel_b >> 5) & 3) * 512));
    b_.multicast = (sel_b & 0x80) != 0;
    b_.loss_notices = ((sel ^ sel_b) & 0x01) != 0;
    b_.mcast_ip = kGroupB;
    std::memcpy(b_.mcast_mac, kGroupMacB, 6);
    b_.first_round = sel & 0x60;
    for (uint32_t r = 0; r < kWorldB; ++r) b_.members.push_back(member(2, r));

    SUMCAST_FUZZ_CHECK(engine_.add_job(a_).ok(), "add_job A");
    SUMCAST_FUZZ_CHECK(engine_.add_job(b_).ok(), "add_job B");
    build_legit();
  }

  void run() {
    for (size_t records = 0; records < kMaxRecords && !in_.empty(); ++records) {
      const uint8_t op = in_.u8();
      switch (op % 10) {
        case 0:
          deliver_legit(1);
          break;
        case 1:
          deliver_legit(static_cast<size_t>(in_.u8() % 8) + 1);
          break;
        case 2:
          flush();
          break;
        case 3:
          replay();
          break;
        case 4:
          corrupted_replay();
          break;
        case 5:
          raw_frame();
          break;
        case 6:
        case 7:
          built_frame();
          break;
        case 8:
          arp_request();
          break;
        case 9:
          reregister_b();
          break;
      }
    }
    while (next_legit_ < legit_.size()) deliver_legit(5);
    flush();
    finish();
  }

 private:
  // ---- The legitimate all-reduce of job A -------------------------------------------------------

  void build_legit() {
    std::vector<uint8_t> buf(wire::kMaxFrameLen);
    for (uint32_t k = 0; k < kRoundsA; ++k) {
      for (size_t si = 0; si < kLegitSlotCount; ++si) {
        Chunk c;
        c.slot = kLegitSlots[si];
        c.round = a_.first_round + k;
        c.coll_seq = 100 + k;
        c.offset = uint64_t{c.slot} * 4096 + uint64_t{k} * 65536;
        c.count = legit_count(si, a_.dtype);
        c.first_result.fill(-1);
        c.expected.resize(c.count);
        for (size_t i = 0; i < c.count; ++i) {
          double acc = legit_value(0, c.slot, k, i);
          for (uint32_t r = 1; r < kWorldA; ++r) {
            const double x = legit_value(r, c.slot, k, i);
            acc = a_.op == ReduceOp::kSum ? acc + x : a_.op == ReduceOp::kMin ? std::min(acc, x) : std::max(acc, x);
          }
          c.expected[i] = acc;
        }
        c.first_frame = legit_.size();
        // The ranks send in an order that differs per chunk.
        for (uint32_t j = 0; j < kWorldA; ++j) {
          const auto rank = static_cast<uint16_t>((j + si + k) % kWorldA);
          std::vector<double> values(c.count);
          for (size_t i = 0; i < c.count; ++i) values[i] = legit_value(rank, c.slot, k, i);
          const std::vector<uint8_t> payload = encode_elements(a_.dtype, values);
          const size_t len =
              write_contribution_frame(buf.data(), a_, opt_, {rank, c.slot, c.round, c.coll_seq, c.offset}, payload);
          legit_.push_back(copy_frame(std::span<const uint8_t>(buf.data(), len)));
          legit_chunk_.push_back(chunks_.size());
        }
        c.last_frame = legit_.size() - 1;
        chunks_.push_back(std::move(c));
      }
    }
  }

  void deliver_legit(size_t n) {
    for (size_t i = 0; i < n && next_legit_ < legit_.size(); ++i) {
      const Frame& f = legit_[next_legit_];
      Chunk& c = chunks_[legit_chunk_[next_legit_]];
      if (c.first_frame == next_legit_) c.open_burst = static_cast<int64_t>(burst_index_);
      if (c.last_frame == next_legit_) c.complete_burst = static_cast<int64_t>(burst_index_);
      ++next_legit_;
      add(copy_frame(std::span<const uint8_t>(f.bytes.get(), f.len)));
    }
  }

  // ---- Frames the fuzzer makes ------------------------------------------------------------------

  const Frame* delivered_legit() {
    if (next_legit_ == 0) return nullptr;
    return &legit_[in_.u16() % next_legit_];
  }

  void replay() {
    const Frame* f = delivered_legit();
    if (f != nullptr) add(copy_frame(std::span<const uint8_t>(f->bytes.get(), f->len)));
  }

  // A delivered legitimate frame with bytes XORed in and its length changed; a change the ICRC
  // covers always arrives with a wrong ICRC (see the threat model above).
  void corrupted_replay() {
    const Frame* f = delivered_legit();
    const uint8_t edits = in_.u8();
    const int8_t grow = static_cast<int8_t>(in_.u8());
    if (f == nullptr) return;
    const size_t len = static_cast<size_t>(std::max<int64_t>(0, int64_t{f->len} + grow));
    std::vector<uint8_t> m(len, 0);
    if (len != 0) std::memcpy(m.data(), f->bytes.get(), std::min<size_t>(len, f->len));
    for (unsigned e = 0; e < (edits & 7u) + 1 && !m.empty(); ++e) {
      const size_t pos = in_.u16() % m.size();
      m[pos] ^= in_.u8();
    }
    wire::ParsedPacket p;
    if (wire::parse_frame(m, &p) == wire::ParseError::kOk) {
      const std::span<const uint8_t> orig(f->bytes.get(), f->len);
      const size_t covered_end = wire::kIpOffset + p.ip_len - wire::kIcrcLen;
      bool changed = load_be16(orig.data() + wire::kIpOffset + 2) != p.ip_len;
      for (size_t i = 0; !changed && i < covered_end; ++i) changed = !icrc_ignores(i) && m[i] != orig[i];
      if (changed && icrc::verify_frame(m)) m[covered_end] ^= 0x01;  // corruption is always detected
    }
    add(copy_frame(m));
  }

  // The IPv4 source of a foreign frame is never that of a member of A.
  void make_foreign(std::span<uint8_t> frame) const {
    constexpr size_t kSrcIp = wire::kIpOffset + 12;
    if (frame.size() < kSrcIp + 4) return;
    const uint32_t src = load_be32(frame.data() + kSrcIp);
    for (const Member& m : a_.members) {
      if (src == m.ip) frame[kSrcIp + 3] ^= 0x80;
    }
  }

  void stamp_if_parsable(std::span<uint8_t> frame) {
    wire::ParsedPacket p;
    if (wire::parse_frame(frame, &p) == wire::ParseError::kOk) icrc::stamp_frame(frame);
  }

  void raw_frame() {
    const uint16_t spec = in_.u16();
    const std::span<const uint8_t> b = in_.bytes(std::min<size_t>(spec & 0x7FFF, kMaxRawFrame));
    std::vector<uint8_t> m(b.begin(), b.end());
    make_foreign(m);
    if ((spec & 0x8000) != 0) stamp_if_parsable(m);
    add(copy_frame(m));
  }

  // A frame from fuzzed fields: job A (foreign source), job B (a member's source) or another job.
  void built_frame() {
    const uint8_t which = in_.u8();
    const uint8_t tweak = in_.u8();
    const JobSpec& job = (which & 1) != 0 ? b_ : a_;
    const auto rank = static_cast<uint16_t>(in_.u8() % (job.members.size() + 1));
    wire::SumcastHeader h;
    h.type = (tweak & 0x01) != 0 ? static_cast<wire::MsgType>(in_.u8() % 5) : wire::MsgType::kContribution;
    h.dtype = (tweak & 0x02) != 0 ? static_cast<Dtype>(in_.u8() % wire::kDtypeCount) : job.dtype;
    h.op = (tweak & 0x04) != 0 ? static_cast<ReduceOp>(in_.u8() % wire::kReduceOpCount) : job.op;
    h.job_id = (which & 2) != 0 ? in_.u32() : job.job_id;
    h.rank = rank;
    h.slot = in_.u8() % (job.slot_count + 2);
    h.round = (tweak & 0x08) != 0 ? in_.u32() : job.first_round + static_cast<uint32_t>(in_.u8() % 8);
    h.coll_seq = in_.u8() % 4;
    h.elem_offset = (tweak & 0x10) != 0 ? uint64_t{in_.u32()} << 8 : in_.u8() % 4;
    h.elem_count = static_cast<uint16_t>(in_.u16() % 1200);
    h.flags = static_cast<uint8_t>(h.round & 1) ^ ((tweak & 0x20) != 0 ? in_.u8() : 0);
    const size_t payload_len = std::min(size_t{h.elem_count} * wire::dtype_size(h.dtype), wire::kMaxPayloadBytes);
    h.elem_count = static_cast<uint16_t>(payload_len / wire::dtype_size(h.dtype));

    wire::Addressing a;
    const Member& m = job.members[rank % job.members.size()];
    std::memcpy(a.src_mac, m.mac, 6);
    std::memcpy(a.dst_mac, opt_.local_mac, 6);
    a.src_ip = m.ip;
    a.dst_ip = opt_.local_ip;
    a.src_port = m.udp_port;
    a.dest_qp = opt_.qpn;
    a.src_qp = m.qpn;
    a.qkey = (which & 4) != 0 ? in_.u32() : job.qkey;
    std::vector<uint8_t> buf(wire::frame_len(payload_len));
    uint8_t* payload = wire::write_frame_headers(buf.data(), a, h, payload_len);
    const std::span<const uint8_t> src = in_.bytes(payload_len);
    if (!src.empty()) std::memcpy(payload, src.data(), src.size());
    make_foreign(buf);
    if ((tweak & 0x40) == 0) icrc::stamp_frame(buf);
    add(copy_frame(buf));
  }

  void arp_request() {
    const uint8_t how = in_.u8();
    std::vector<uint8_t> f(60, 0);
    const std::span<const uint8_t> mac = in_.bytes(6);
    std::memcpy(f.data() + 6, mac.data(), mac.size());
    std::memset(f.data(), 0xFF, 6);
    store_be16(f.data() + 12, wire::kEtherTypeArp);
    uint8_t* a = f.data() + wire::kEthHeaderLen;
    store_be16(a, 1);
    store_be16(a + 2, wire::kEtherTypeIpv4);
    a[4] = 6;
    a[5] = 4;
    store_be16(a + 6, (how & 1) != 0 ? 2 : 1);
    std::memcpy(a + 8, f.data() + 6, 6);
    store_be32(a + 14, in_.u32());
    store_be32(a + 24, (how & 2) != 0 ? in_.u32() : opt_.local_ip);
    f.resize(std::max<size_t>(wire::kEthHeaderLen, 60 - (how >> 4)));  // short frames happen
    add(copy_frame(f));
  }

  // Removes B (with an abort when the reason is not kNone) and registers it again.
  void reregister_b() {
    const auto reason = static_cast<wire::AbortReason>(in_.u8() % 5);
    const uint8_t first = in_.u8();
    flush();
    engine_.remove_job(kJobB, reason, tx_);
    check_tx(true);
    b_.first_round = first;
    SUMCAST_FUZZ_CHECK(engine_.add_job(b_).ok(), "re-adding B");
  }

  // ---- Bursts and the checks of what comes out ---------------------------------------------------

  void add(Frame f) {
    burst_.push_back(std::move(f));
    if (burst_.size() == kMaxBurst) flush();
  }

  void flush() {
    if (!burst_.empty()) {
      std::vector<PacketView> views;
      views.reserve(burst_.size());
      for (const Frame& f : burst_) views.push_back({f.bytes.get(), f.len});
      engine_.process_burst(views, tx_);
      received_ += burst_.size();
      burst_.clear();
      check_tx(false);
    }
    ++burst_index_;
  }

  void check_tx(bool removing_b) {
    for (const MemoryTxSink::Frame& f : tx_.frames()) check_sent(f.bytes(), removing_b);
    tx_.clear();
    // Invariant 1: A's completions so far.
    uint64_t expected_done = 0;
    uint64_t expected_opened = 0;
    for (const Chunk& c : chunks_) {
      if (c.complete_burst >= 0 && static_cast<uint64_t>(c.complete_burst) <= burst_index_) ++expected_done;
      if (c.open_burst >= 0 && static_cast<uint64_t>(c.open_burst) <= burst_index_) ++expected_opened;
    }
    uint64_t done = 0;
    uint64_t opened = 0;
    for (const JobProgress& p : engine_.progress()) {
      if (p.job_id == kJobA) {
        done = p.slots_completed;
        opened = p.rounds_opened;
      }
    }
    SUMCAST_FUZZ_CHECK(done == expected_done && opened == expected_opened,
                       "job A completed %llu and opened %llu slot rounds, expected %llu and %llu",
                       static_cast<unsigned long long>(done), static_cast<unsigned long long>(opened),
                       static_cast<unsigned long long>(expected_done),
                       static_cast<unsigned long long>(expected_opened));
  }

  void check_sent(std::span<const uint8_t> f, bool removing_b) {
    SUMCAST_FUZZ_CHECK(f.size() >= wire::kEthHeaderLen && f.size() <= wire::kMaxFrameLen, "sent %zu bytes", f.size());
    SUMCAST_FUZZ_CHECK(std::memcmp(f.data() + 6, opt_.local_mac, 6) == 0, "sent from another MAC");
    if (load_be16(f.data() + 12) == wire::kEtherTypeArp) {
      SUMCAST_FUZZ_CHECK(f.size() == 60 && load_be16(f.data() + 20) == 2 &&
                             load_be32(f.data() + wire::kEthHeaderLen + 14) == opt_.local_ip,
                         "malformed ARP reply");
      return;
    }
    // Results go to each member's own UDP port (a kernel-socket worker's), which parse_frame, made
    // for frames to the appliance, rejects: parse a copy with port 4791 there.
    std::vector<uint8_t> copy(f.begin(), f.end());
    if (copy.size() >= wire::kUdpOffset + 4) store_be16(copy.data() + wire::kUdpOffset + 2, wire::kRoceUdpPort);
    wire::ParsedPacket p;
    const wire::ParseError e = wire::parse_frame(copy, &p);
    SUMCAST_FUZZ_CHECK(e == wire::ParseError::kOk, "sent a frame that does not parse: %s", wire::parse_error_name(e));
    p.dst_port = load_be16(f.data() + wire::kUdpOffset + 2);
    SUMCAST_FUZZ_CHECK(icrc::verify_frame(f), "sent a frame with a bad ICRC");
    SUMCAST_FUZZ_CHECK(p.src_ip == opt_.local_ip && p.src_qp == opt_.qpn, "sent from another address");
    const wire::SumcastHeader& h = p.hdr;
    for (uint32_t r = 0; r < kWorldA; ++r) {
      if (p.dst_ip == a_.members[r].ip) {
        check_result_a(p, r);
        return;
      }
    }
    SUMCAST_FUZZ_CHECK(h.job_id == kJobB && p.qkey == kQkeyB, "sent job %08x to %08x, not a member of A or B", h.job_id,
                       p.dst_ip);
    // To B's group (results and aborts of a multicast job) or to one member (results of a
    // per-member job, and the answer to a retransmission, which goes to the sender alone).
    if (h.rank == wire::kRankMulticast) {
      SUMCAST_FUZZ_CHECK(b_.multicast && p.dst_ip == kGroupB && std::memcmp(p.dst_mac, kGroupMacB, 6) == 0 &&
                             p.dest_qp == wire::kMulticastQpn,
                         "B frame to the group %08x (multicast %d)", p.dst_ip, b_.multicast ? 1 : 0);
    } else {
      SUMCAST_FUZZ_CHECK(h.rank < kWorldB, "B frame to rank %u", h.rank);
      const Member& m = b_.members[h.rank];
      SUMCAST_FUZZ_CHECK(
          p.dst_ip == m.ip && p.dst_port == m.udp_port && p.dest_qp == m.qpn && std::memcmp(p.dst_mac, m.mac, 6) == 0,
          "B frame for rank %u sent elsewhere", h.rank);
    }
    SUMCAST_FUZZ_CHECK(h.dtype == b_.dtype && h.op == b_.op, "B frame with another dtype/op");
    if (h.type == wire::MsgType::kAbort) {
      SUMCAST_FUZZ_CHECK(removing_b && h.status != 0, "abort of B outside its removal");
      return;
    }
    if (h.type == wire::MsgType::kLossNotice) {  // to the one rank whose transmission went missing
      SUMCAST_FUZZ_CHECK(b_.loss_notices && !removing_b && h.rank != wire::kRankMulticast && p.payload_len == 0 &&
                             h.flags == (wire::kFlagNoticeSeq | (h.round & 1)) && h.round <= wire::kTxSeqMask &&
                             h.slot == 0 && h.coll_seq == 0 && h.elem_count == 0 && h.elem_offset == 0,
                         "malformed B loss notice (notices %d)", b_.loss_notices ? 1 : 0);
      return;
    }
    if (h.type == wire::MsgType::kDuplicateNotice) {  // to the one rank whose resend an open round held
      SUMCAST_FUZZ_CHECK(b_.loss_notices && !removing_b && h.rank != wire::kRankMulticast && p.payload_len == 0 &&
                             h.flags == (h.round & 1) && h.status == 0 && h.slot < kSlotsB &&
                             h.slot % kCoreCount == kCoreIndex,
                         "malformed B duplicate notice (notices %d)", b_.loss_notices ? 1 : 0);
      return;
    }
    SUMCAST_FUZZ_CHECK(h.type == wire::MsgType::kResult && !removing_b, "B frame of type %u",
                       static_cast<unsigned>(h.type));
    SUMCAST_FUZZ_CHECK(p.payload_len <= b_.max_payload_bytes && (h.flags & 1) == (h.round & 1) && h.slot < kSlotsB &&
                           h.slot % kCoreCount == kCoreIndex,
                       "malformed B result");
  }

  void check_result_a(const wire::ParsedPacket& p, uint32_t rank) {
    const wire::SumcastHeader& h = p.hdr;
    const Member& m = a_.members[rank];
    SUMCAST_FUZZ_CHECK(h.type == wire::MsgType::kResult && h.job_id == kJobA && p.qkey == kQkeyA && h.rank == rank,
                       "frame to A's rank %u: type %u job %08x rank %u", rank, static_cast<unsigned>(h.type), h.job_id,
                       h.rank);
    SUMCAST_FUZZ_CHECK(p.dst_port == m.udp_port && p.dest_qp == m.qpn && std::memcmp(p.dst_mac, m.mac, 6) == 0,
                       "A result for rank %u misaddressed", rank);
    Chunk* c = nullptr;
    for (Chunk& x : chunks_) {
      if (x.slot == h.slot && x.round == h.round) c = &x;
    }
    SUMCAST_FUZZ_CHECK(c != nullptr, "A result for slot %u round %u, which never ran", h.slot, h.round);
    SUMCAST_FUZZ_CHECK(h.coll_seq == c->coll_seq && h.elem_offset == c->offset && h.elem_count == c->count &&
                           h.dtype == a_.dtype && h.op == a_.op && h.flags == (h.round & 1),
                       "A result for slot %u round %u names another chunk", h.slot, h.round);
    SUMCAST_FUZZ_CHECK(c->complete_burst >= 0 && static_cast<uint64_t>(c->complete_burst) <= burst_index_,
                       "A slot %u round %u completed before its last contribution", h.slot, h.round);
    const std::vector<double> got = decode_elements(a_.dtype, std::span<const uint8_t>(p.payload, p.payload_len));
    SUMCAST_FUZZ_CHECK(got.size() == c->expected.size(), "A result of %zu elements", got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SUMCAST_FUZZ_CHECK(got[i] == c->expected[i], "A slot %u round %u element %zu: %g, expected %g", h.slot, h.round,
                         i, got[i], c->expected[i]);
    }
    if (c->first_result[rank] < 0) {
      c->first_result[rank] = static_cast<int64_t>(burst_index_);
      SUMCAST_FUZZ_CHECK(c->first_result[rank] == c->complete_burst,
                         "A slot %u round %u: rank %u's first result in burst %lld, completion in %lld", h.slot,
                         h.round, rank, static_cast<long long>(c->first_result[rank]),
                         static_cast<long long>(c->complete_burst));
    }
  }

  void finish() {
    for (const Chunk& c : chunks_) {
      for (uint32_t r = 0; r < kWorldA; ++r) {
        SUMCAST_FUZZ_CHECK(c.first_result[r] >= 0, "A slot %u round %u: rank %u never got its result", c.slot, c.round,
                           r);
      }
    }
    const CoreCounters& k = engine_.counters();
    auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    SUMCAST_FUZZ_CHECK(get(k.drops[static_cast<size_t>(DropReason::kTxNoBuffer)]) == 0, "tx pool ran dry");
    uint64_t accounted = get(k.contributions) + get(k.duplicates) + get(k.retransmits_answered) + get(k.arp_replies);
    for (const auto& d : k.drops) accounted += get(d);
    SUMCAST_FUZZ_CHECK(get(k.rx_packets) == received_ && accounted == received_,
                       "%llu frames received, rx_packets %llu, accounted for %llu",
                       static_cast<unsigned long long>(received_), static_cast<unsigned long long>(get(k.rx_packets)),
                       static_cast<unsigned long long>(accounted));
  }

  Input& in_;
  EngineOptions opt_;
  Engine engine_;
  JobSpec a_;
  JobSpec b_;
  std::vector<Frame> legit_;
  std::vector<size_t> legit_chunk_;  // legit_[i] belongs to chunks_[legit_chunk_[i]]
  std::vector<Chunk> chunks_;
  size_t next_legit_ = 0;
  std::vector<Frame> burst_;
  uint64_t burst_index_ = 0;
  uint64_t received_ = 0;
  static MemoryTxSink tx_;
};

MemoryTxSink Harness::tx_(kTxBuffers);

}  // namespace
}  // namespace sumcast::engine

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sumcast::engine::Input in(data, size);
  sumcast::engine::Harness h(in);
  h.run();
  return 0;
}
