// Unit tests of sumcast::engine::Engine: completion per dtype/op, addressing of results, bursts
// of every shape, duplicates, retransmissions, round wrap, every drop reason, ARP, limits,
// aborts and tx-pool exhaustion. Inputs are small integer-valued numbers, so that sums are exact
// in any order and in every dtype; expected results are computed here in double.
#include "sumcast/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sumcast/endian.h"
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
constexpr uint8_t kGroupMac[6] = {0x01, 0x00, 0x5E, 0x01, 0x02, 0x03};
constexpr uint32_t kGroupIp = 0xEF010203;  // 239.1.2.3

EngineOptions appliance(uint32_t core_index = 0, uint32_t core_count = 1) {
  EngineOptions o;
  o.core_index = core_index;
  o.core_count = core_count;
  std::memcpy(o.local_mac, kApplianceMac, 6);
  o.local_ip = kApplianceIp;
  o.qpn = 0x000100 + core_index;
  return o;
}

Member member(uint32_t rank) {
  Member m;
  const uint8_t mac[6] = {
      0x02, 0x57, 0x4B, static_cast<uint8_t>(rank >> 16), static_cast<uint8_t>(rank >> 8), static_cast<uint8_t>(rank)};
  std::memcpy(m.mac, mac, 6);
  m.ip = 0x0A010000 + rank + 1;  // 10.1.x.y
  m.udp_port = static_cast<uint16_t>(50000 + rank);
  m.qpn = 0x001000 + rank;
  return m;
}

JobSpec job_spec(uint32_t job_id, Dtype dtype, ReduceOp op, uint32_t world, uint16_t slots,
                 uint16_t max_payload = 1024) {
  JobSpec j;
  j.job_id = job_id;
  j.qkey = 0x51000000u | job_id;
  j.dtype = dtype;
  j.op = op;
  j.slot_count = slots;
  j.max_payload_bytes = max_payload;
  for (uint32_t r = 0; r < world; ++r) j.members.push_back(member(r));
  return j;
}

// The same job with results by multicast, to kGroupIp / kGroupMac.
JobSpec multicast_job_spec(uint32_t job_id, Dtype dtype, ReduceOp op, uint32_t world, uint16_t slots) {
  JobSpec j = job_spec(job_id, dtype, op, world, slots);
  j.multicast = true;
  j.mcast_ip = kGroupIp;
  std::memcpy(j.mcast_mac, kGroupMac, 6);
  return j;
}

uint64_t get(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }
uint64_t drops(const Engine& e, DropReason r) { return get(e.counters().drops[static_cast<size_t>(r)]); }
uint64_t total_drops(const Engine& e) {
  uint64_t n = 0;
  for (const auto& d : e.counters().drops) n += get(d);
  return n;
}

// Rank r's element i of (slot, round): an integer in [-8, 8], different across ranks.
double input(uint32_t rank, uint32_t slot, uint32_t round, size_t i) {
  return static_cast<double>(static_cast<int>((rank * 7 + slot * 3 + round * 5 + i * 11 + rank * i) % 17) - 8);
}

std::vector<double> inputs(uint32_t rank, uint32_t slot, uint32_t round, size_t count) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input(rank, slot, round, i);
  return v;
}

std::vector<double> expected(ReduceOp op, uint32_t world, uint32_t slot, uint32_t round, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = input(0, slot, round, i);
    for (uint32_t r = 1; r < world; ++r) {
      const double x = input(r, slot, round, i);
      acc = op == ReduceOp::kSum ? acc + x : op == ReduceOp::kMin ? std::min(acc, x) : std::max(acc, x);
    }
    out[i] = acc;
  }
  return out;
}

struct Chunk {
  uint16_t slot = 0;
  uint32_t round = 0;
  uint32_t coll_seq = 0;
  uint64_t offset = 0;
  uint16_t count = 0;
};

// Rank `rank`'s contribution to chunk `c`; `tx_seq`: its number of that first transmission to
// this core (loss notices).
std::vector<uint8_t> contribution(const JobSpec& job, const EngineOptions& o, uint16_t rank, const Chunk& c,
                                  uint32_t tx_seq = 0) {
  const auto payload = encode_elements(job.dtype, inputs(rank, c.slot, c.round, c.count));
  return make_contribution_frame(job, o, {rank, c.slot, c.round, c.coll_seq, c.offset, tx_seq}, payload);
}

void feed(Engine& e, MemoryTxSink& tx, const std::vector<std::vector<uint8_t>>& frames) {
  std::vector<PacketView> views;
  for (const auto& f : frames) views.push_back({f.data(), static_cast<uint32_t>(f.size())});
  e.process_burst(views, tx);
}
void feed(Engine& e, MemoryTxSink& tx, const std::vector<uint8_t>& frame) {
  const PacketView v{frame.data(), static_cast<uint32_t>(frame.size())};
  e.process_burst(std::span<const PacketView>(&v, 1), tx);
}

// The IPv4 header checksum verified from its definition: the one's-complement sum of all ten
// 16-bit words (the checksum included) is 0xFFFF.
bool ip_checksum_ok(const uint8_t* ip) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

// The UDP checksum verified from its definition (RFC 768): the one's-complement sum of the
// pseudo-header (addresses, protocol, UDP length) and of the UDP header and data as 16-bit words
// (an odd last byte padded with zero), the checksum included, is 0xFFFF; a sent 0 means none.
bool udp_checksum_ok(std::span<const uint8_t> f) {
  const uint8_t* ip = f.data() + wire::kIpOffset;
  const uint8_t* udp = ip + 20;
  const size_t n = (size_t{udp[4]} << 8) | udp[5];
  uint64_t sum = wire::kIpProtoUdp + n;
  for (int i = 12; i < 20; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  for (size_t i = 0; i < n; ++i) sum += i % 2 == 0 ? uint32_t{udp[i]} << 8 : udp[i];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return load_be16(udp + 6) != 0 && sum == 0xFFFF;
}

// Parses a frame the appliance sent. Results go to the member's UDP port, which need not be 4791
// (kernel-socket workers), so wire::parse_frame (an appliance-side parser) does not apply: the
// Ethernet/IPv4/UDP part is read here and the rest by wire::parse_roce, as a worker does.
wire::ParseError parse_sent(std::span<const uint8_t> f, wire::ParsedPacket* p) {
  if (f.size() < wire::kBthOffset || load_be16(f.data() + 12) != wire::kEtherTypeIpv4) {
    return wire::ParseError::kNotIpv4;
  }
  const uint8_t* ip = f.data() + wire::kIpOffset;
  const size_t total = load_be16(ip + 2);
  if (ip[0] != 0x45 || ip[9] != wire::kIpProtoUdp || wire::kIpOffset + total > f.size() ||
      load_be16(ip + 24) != total - wire::kIpv4HeaderLen) {
    return wire::ParseError::kBadIpHeader;
  }
  std::memcpy(p->dst_mac, f.data(), 6);
  std::memcpy(p->src_mac, f.data() + 6, 6);
  p->src_ip = load_be32(ip + 12);
  p->dst_ip = load_be32(ip + 16);
  p->src_port = load_be16(ip + 20);
  p->dst_port = load_be16(ip + 22);
  return wire::parse_roce(f.subspan(wire::kBthOffset, total - wire::kIpv4HeaderLen - wire::kUdpHeaderLen), p);
}

// Checks everything about a frame the appliance sent to `rank` (kRankMulticast: the group) and
// returns its parse. `type` result or abort.
wire::ParsedPacket check_sent_frame(std::span<const uint8_t> f, const JobSpec& job, const EngineOptions& o,
                                    uint16_t rank, wire::MsgType type) {
  wire::ParsedPacket p;
  EXPECT_EQ(parse_sent(f, &p), wire::ParseError::kOk);
  EXPECT_TRUE(icrc::verify_frame(f));
  const bool mc = rank == wire::kRankMulticast;
  const Member m = mc ? Member{} : job.members.at(rank);
  EXPECT_EQ(0, std::memcmp(f.data(), mc ? kGroupMac : m.mac, 6));
  EXPECT_EQ(0, std::memcmp(f.data() + 6, o.local_mac, 6));
  const uint8_t* ip = f.data() + wire::kIpOffset;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(load_be16(ip + 4), 0) << "IPv4 ID";
  EXPECT_EQ(load_be16(ip + 6), 0x4000) << "DF, no fragment offset";
  EXPECT_GT(ip[8], 0) << "TTL";
  EXPECT_TRUE(ip_checksum_ok(ip));
  EXPECT_EQ(load_be16(ip + 2), f.size() - wire::kEthHeaderLen);
  if (o.udp_checksum) {
    EXPECT_TRUE(udp_checksum_ok(f)) << "UDP checksum " << load_be16(ip + 20 + 6);
  } else {
    EXPECT_EQ(load_be16(ip + 20 + 6), 0) << "UDP checksum";
  }
  EXPECT_EQ(p.src_ip, o.local_ip);
  EXPECT_EQ(p.dst_ip, mc ? job.mcast_ip : m.ip);
  EXPECT_EQ(p.src_port, wire::kRoceUdpPort);
  EXPECT_EQ(p.dst_port, mc ? wire::kRoceUdpPort : m.udp_port);
  EXPECT_EQ(p.dest_qp, mc ? wire::kMulticastQpn : m.qpn);
  EXPECT_EQ(p.src_qp, o.qpn);
  EXPECT_EQ(p.qkey, job.qkey);
  EXPECT_EQ(p.hdr.type, type);
  EXPECT_EQ(p.hdr.version, wire::kProtocolVersion);
  EXPECT_EQ(p.hdr.dtype, job.dtype);
  EXPECT_EQ(p.hdr.op, job.op);
  EXPECT_EQ(p.hdr.job_id, job.job_id);
  EXPECT_EQ(p.hdr.rank, rank);
  if (type == wire::MsgType::kResult) {
    EXPECT_EQ(p.hdr.flags, p.hdr.round & 1);
    EXPECT_EQ(p.hdr.status, 0);
  }
  return p;
}

// One result frame, by (slot, round, receiver).
struct Received {
  wire::ParsedPacket pkt;
  std::vector<uint8_t> frame;
};
using ResultKey = std::tuple<uint16_t, uint32_t, uint16_t>;

std::multimap<ResultKey, Received> collect(const MemoryTxSink& tx) {
  std::multimap<ResultKey, Received> out;
  for (const auto& f : tx.frames()) {
    wire::ParsedPacket p;
    if (parse_sent(f.bytes(), &p) != wire::ParseError::kOk) continue;
    out.insert({{p.hdr.slot, p.hdr.round, p.hdr.rank}, {p, {f.data, f.data + f.len}}});
  }
  return out;
}

std::vector<double> payload_of(const wire::ParsedPacket& p) {
  return decode_elements(p.hdr.dtype, std::span<const uint8_t>(p.payload, p.payload_len));
}

// ---------------------------------------------------------------------------------------------

struct DtypeOp {
  Dtype dtype;
  ReduceOp op;
};

TEST(EngineTest, FourRanksCompleteEverySlotForEveryDtypeAndOp) {
  const DtypeOp cases[] = {
      {Dtype::kFp32, ReduceOp::kSum},  {Dtype::kFp32, ReduceOp::kMin},  {Dtype::kFp32, ReduceOp::kMax},
      {Dtype::kFp16, ReduceOp::kSum},  {Dtype::kBf16, ReduceOp::kSum},  {Dtype::kInt32, ReduceOp::kSum},
      {Dtype::kInt32, ReduceOp::kMin}, {Dtype::kInt32, ReduceOp::kMax}, {Dtype::kFp64, ReduceOp::kSum}};
  constexpr uint32_t kWorld = 4;
  constexpr uint16_t kSlots = 5;
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(wire::dtype_name(c.dtype)) + " " + wire::reduce_op_name(c.op));
    const EngineOptions o = appliance();
    Engine e(o);
    MemoryTxSink tx;
    const JobSpec job = job_spec(42, c.dtype, c.op, kWorld, kSlots);
    ASSERT_TRUE(e.add_job(job).ok());
    std::vector<Chunk> chunks;
    for (uint16_t s = 0; s < kSlots; ++s) {
      // Odd and even element counts (fp16/bf16 payloads then need BTH padding).
      chunks.push_back({s, 0, 9, uint64_t{s} * 1000, static_cast<uint16_t>(33 + s * 7)});
    }
    std::vector<std::vector<uint8_t>> frames;
    uint64_t payload_bytes = 0;
    for (uint16_t r = 0; r < kWorld; ++r) {
      for (const auto& ch : chunks) {
        frames.push_back(contribution(job, o, r, ch));
        payload_bytes += ch.count * wire::dtype_size(c.dtype);
      }
    }
    feed(e, tx, frames);

    ASSERT_EQ(tx.frames().size(), kWorld * kSlots);
    const auto got = collect(tx);
    uint64_t tx_bytes = 0;
    for (const auto& f : tx.frames()) tx_bytes += f.len;
    for (const auto& ch : chunks) {
      for (uint16_t r = 0; r < kWorld; ++r) {
        ASSERT_EQ(got.count({ch.slot, 0, r}), 1u) << "slot " << ch.slot << " rank " << r;
        const Received& res = got.find({ch.slot, 0, r})->second;
        const auto p = check_sent_frame(res.frame, job, o, r, wire::MsgType::kResult);
        EXPECT_EQ(p.hdr.coll_seq, ch.coll_seq);
        EXPECT_EQ(p.hdr.elem_offset, ch.offset);
        EXPECT_EQ(p.hdr.elem_count, ch.count);
        EXPECT_EQ(payload_of(p), expected(c.op, kWorld, ch.slot, 0, ch.count));
      }
    }
    const CoreCounters& k = e.counters();
    EXPECT_EQ(get(k.rx_packets), kWorld * kSlots);
    EXPECT_EQ(get(k.contributions), kWorld * kSlots);
    EXPECT_EQ(get(k.payload_bytes), payload_bytes);
    EXPECT_EQ(get(k.slots_completed), kSlots);
    EXPECT_EQ(get(k.results_sent), kWorld * kSlots);
    EXPECT_EQ(get(k.tx_packets), kWorld * kSlots);
    EXPECT_EQ(get(k.tx_bytes), tx_bytes);
    EXPECT_EQ(get(k.duplicates), 0u);
    EXPECT_EQ(total_drops(e), 0u);
    EXPECT_EQ(tx.flushes(), 1u);
  }
}

TEST(EngineTest, MulticastJobSendsOneResultFrameToTheGroupPerSlot) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = multicast_job_spec(5, Dtype::kBf16, ReduceOp::kSum, 4, 3);
  ASSERT_TRUE(e.add_job(job).ok());
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t r = 0; r < 4; ++r) {
    for (uint16_t s = 0; s < 3; ++s) frames.push_back(contribution(job, o, r, {s, 0, 1, s * 64u, 64}));
  }
  feed(e, tx, frames);
  ASSERT_EQ(tx.frames().size(), 3u);
  for (uint16_t s = 0; s < 3; ++s) {
    const auto p = check_sent_frame(tx.frames()[s].bytes(), job, o, wire::kRankMulticast, wire::MsgType::kResult);
    EXPECT_EQ(p.hdr.slot, s);
    EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 4, s, 0, 64));
  }
  EXPECT_EQ(get(e.counters().results_sent), 3u);
  EXPECT_EQ(get(e.counters().slots_completed), 3u);
  EXPECT_EQ(get(e.counters().group_frames), 3u);
  ASSERT_EQ(e.progress().size(), 1u);
  EXPECT_EQ(e.progress()[0].group_frames, 3u);
  EXPECT_EQ(e.progress()[0].unicast_answers, 0u);

  // A rank that missed a result asks again: the stored result goes to it alone, by unicast.
  tx.clear();
  feed(e, tx, contribution(job, o, 2, {1, 0, 1, 64, 64}));
  ASSERT_EQ(tx.frames().size(), 1u);
  const auto p = check_sent_frame(tx.frames()[0].bytes(), job, o, 2, wire::MsgType::kResult);
  EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 4, 1, 0, 64));
  EXPECT_EQ(get(e.counters().retransmits_answered), 1u);
  EXPECT_EQ(get(e.counters().group_frames), 3u);
  EXPECT_EQ(e.progress()[0].unicast_answers, 1u);
  EXPECT_EQ(e.progress()[0].group_frames, 3u);
}

// The same frames in bursts of 1 (tail only), 3, 4 (wide loop only), 31, 32 and 257 (both).
TEST(EngineTest, BurstSizesGiveTheSameResultsAndCounters) {
  constexpr uint32_t kWorld = 8;
  constexpr uint16_t kSlots = 48;
  constexpr uint16_t kCount = 40;
  const EngineOptions o = appliance();
  const JobSpec job = job_spec(77, Dtype::kFp16, ReduceOp::kSum, kWorld, kSlots);
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> frames;
  size_t dups = 0;
  for (uint32_t round = 0; round < 2; ++round) {
    std::vector<std::vector<uint8_t>> part;
    for (uint16_t r = 0; r < kWorld; ++r) {
      for (uint16_t s = 0; s < kSlots; ++s) part.push_back(contribution(job, o, r, {s, round, round, s * 40u, kCount}));
    }
    for (int d = 0; d < 20; ++d) part.push_back(part[rng() % (kWorld * kSlots)]);  // duplicates
    dups += 20;
    std::shuffle(part.begin(), part.end(), rng);
    frames.insert(frames.end(), part.begin(), part.end());
  }

  std::vector<uint64_t> reference;
  for (size_t burst : {1, 3, 4, 31, 32, 257}) {
    SCOPED_TRACE("burst " + std::to_string(burst));
    Engine e(o);
    MemoryTxSink tx(4096);
    ASSERT_TRUE(e.add_job(job).ok());
    std::vector<PacketView> views;
    for (const auto& f : frames) views.push_back({f.data(), static_cast<uint32_t>(f.size())});
    size_t bursts = 0;
    for (size_t i = 0; i < views.size(); i += burst, ++bursts) {
      e.process_burst(std::span<const PacketView>(views).subspan(i, std::min(burst, views.size() - i)), tx);
    }
    EXPECT_EQ(tx.flushes(), bursts);
    const auto got = collect(tx);
    for (uint32_t round = 0; round < 2; ++round) {
      for (uint16_t s = 0; s < kSlots; ++s) {
        for (uint16_t r = 0; r < kWorld; ++r) {
          auto [lo, hi] = got.equal_range({s, round, r});
          ASSERT_NE(lo, hi) << "slot " << s << " round " << round << " rank " << r;
          for (auto it = lo; it != hi; ++it) {
            EXPECT_EQ(payload_of(it->second.pkt), expected(ReduceOp::kSum, kWorld, s, round, kCount));
          }
        }
      }
    }
    const CoreCounters& k = e.counters();
    EXPECT_EQ(get(k.contributions), 2u * kWorld * kSlots);
    EXPECT_EQ(get(k.slots_completed), 2u * kSlots);
    EXPECT_EQ(get(k.results_sent), 2u * kWorld * kSlots);
    EXPECT_EQ(get(k.duplicates) + get(k.retransmits_answered), dups);
    EXPECT_EQ(get(k.rx_packets), frames.size());
    EXPECT_EQ(total_drops(e), 0u);
    std::vector<uint64_t> all = {get(k.rx_packets),      get(k.rx_bytes),      get(k.tx_packets),
                                 get(k.tx_bytes),        get(k.contributions), get(k.payload_bytes),
                                 get(k.slots_completed), get(k.duplicates),    get(k.retransmits_answered),
                                 get(k.results_sent)};
    if (reference.empty()) {
      reference = all;
    } else {
      EXPECT_EQ(all, reference);
    }
  }
}

TEST(EngineTest, DuplicateContributionToAnOpenRoundIsIgnoredAndCounted) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(1, Dtype::kFp32, ReduceOp::kSum, 3, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  const Chunk ch{0, 0, 0, 0, 16};
  feed(e, tx, contribution(job, o, 0, ch));
  // A second packet from rank 0 in the same round, with other values: must not be added.
  auto other = make_contribution_frame(job, o, {0, 0, 0, 0, 0}, encode_elements(Dtype::kFp32, inputs(2, 5, 5, 16)));
  feed(e, tx, other);
  feed(e, tx, contribution(job, o, 0, ch));
  feed(e, tx, contribution(job, o, 1, ch));
  EXPECT_TRUE(tx.frames().empty());
  feed(e, tx, contribution(job, o, 2, ch));
  EXPECT_EQ(get(e.counters().duplicates), 2u);
  EXPECT_EQ(get(e.counters().contributions), 3u);
  ASSERT_EQ(tx.frames().size(), 3u);
  for (const auto& f : tx.frames()) {
    wire::ParsedPacket p;
    ASSERT_EQ(parse_sent(f.bytes(), &p), wire::ParseError::kOk);
    EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 3, 0, 0, 16));
  }
}

// For fp32 the accumulator doubles as the shadow copy, for fp16 the result lives apart: both kept
// while the slot's next round runs, and gone once the round after it opens.
TEST(EngineTest, RetransmissionForACompletedRoundGetsTheShadowResultAlone) {
  for (Dtype dtype : {Dtype::kFp32, Dtype::kFp16}) {
    SCOPED_TRACE(wire::dtype_name(dtype));
    const EngineOptions o = appliance();
    Engine e(o);
    MemoryTxSink tx;
    const JobSpec job = job_spec(3, dtype, ReduceOp::kSum, 4, 2);
    ASSERT_TRUE(e.add_job(job).ok());
    const Chunk r0{1, 0, 4, 100, 20};
    const Chunk r1{1, 1, 5, 200, 20};
    const Chunk r2{1, 2, 6, 300, 20};
    for (uint16_t r = 0; r < 4; ++r) feed(e, tx, contribution(job, o, r, r0));
    ASSERT_EQ(tx.frames().size(), 4u);
    const std::vector<uint8_t> original(tx.frames()[2].data, tx.frames()[2].data + tx.frames()[2].len);
    tx.clear();

    feed(e, tx, contribution(job, o, 0, r1));  // round 1 opens on the other version
    feed(e, tx, contribution(job, o, 2, r0));  // rank 2 lost round 0's result
    ASSERT_EQ(tx.frames().size(), 1u);
    EXPECT_EQ(std::vector<uint8_t>(tx.frames()[0].data, tx.frames()[0].data + tx.frames()[0].len), original);
    check_sent_frame(tx.frames()[0].bytes(), job, o, 2, wire::MsgType::kResult);
    EXPECT_EQ(get(e.counters().retransmits_answered), 1u);
    EXPECT_EQ(get(e.counters().results_sent), 4u);

    // A retransmission that names another chunk for the round is not answered.
    tx.clear();
    feed(e, tx, contribution(job, o, 2, {1, 0, 4, 101, 20}));
    EXPECT_TRUE(tx.frames().empty());
    EXPECT_EQ(drops(e, DropReason::kChunkMismatch), 1u);

    for (uint16_t r = 1; r < 4; ++r) feed(e, tx, contribution(job, o, r, r1));
    ASSERT_EQ(tx.frames().size(), 4u);
    tx.clear();
    feed(e, tx, contribution(job, o, 3, r2));  // round 2 reuses round 0's version
    feed(e, tx, contribution(job, o, 2, r0));
    EXPECT_TRUE(tx.frames().empty());
    EXPECT_EQ(drops(e, DropReason::kStaleRound), 1u);
    feed(e, tx, contribution(job, o, 1, r1));  // round 1's result is still kept
    ASSERT_EQ(tx.frames().size(), 1u);
    const auto p = check_sent_frame(tx.frames()[0].bytes(), job, o, 1, wire::MsgType::kResult);
    EXPECT_EQ(p.hdr.round, 1u);
    EXPECT_EQ(p.hdr.elem_offset, 200u);
    EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 4, 1, 1, 20));
    EXPECT_EQ(get(e.counters().retransmits_answered), 2u);
  }
}

TEST(EngineTest, RoundsAdvanceAcrossTheTwoToThe32Wrap) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(9, Dtype::kInt32, ReduceOp::kSum, 2, 3);
  job.first_round = 0xFFFFFFF0u;
  ASSERT_TRUE(e.add_job(job).ok());
  feed(e, tx, contribution(job, o, 0, {0, 0, 0, 0, 8}));  // round 0 is not this job's first
  EXPECT_EQ(drops(e, DropReason::kStaleRound), 1u);
  constexpr uint32_t kRounds = 40;
  for (uint32_t k = 0; k < kRounds; ++k) {
    const uint32_t round = job.first_round + k;
    for (uint16_t s = 0; s < 3; ++s) {
      for (uint16_t r = 0; r < 2; ++r) feed(e, tx, contribution(job, o, r, {s, round, k, k * 8u, 8}));
    }
    ASSERT_EQ(tx.frames().size(), 6u) << "round " << round;
    for (const auto& f : tx.frames()) {
      wire::ParsedPacket p;
      ASSERT_EQ(parse_sent(f.bytes(), &p), wire::ParseError::kOk);
      EXPECT_EQ(p.hdr.round, round);
      EXPECT_EQ(p.hdr.flags, round & 1);
      EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 2, p.hdr.slot, round, 8));
    }
    tx.clear();
  }
  EXPECT_EQ(get(e.counters().slots_completed), 3u * kRounds);
  EXPECT_EQ(drops(e, DropReason::kStaleRound), 1u);
}

TEST(EngineTest, StaleRoundsAreDropped) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(2, Dtype::kFp32, ReduceOp::kSum, 2, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  auto frame = [&](uint16_t rank, uint32_t round) { return contribution(job, o, rank, {0, round, 0, 0, 4}); };
  uint64_t stale = 0;
  feed(e, tx, frame(0, 1));  // a fresh slot opens round 0 first
  feed(e, tx, frame(0, 2));
  feed(e, tx, frame(0, 0xFFFFFFFFu));  // the version that precedes round 0 never held a result
  feed(e, tx, frame(0, 0xFFFFFFFEu));
  stale += 4;
  EXPECT_EQ(drops(e, DropReason::kStaleRound), stale);
  feed(e, tx, frame(0, 0));
  feed(e, tx, frame(0, 1));  // round 0 still open
  EXPECT_EQ(drops(e, DropReason::kStaleRound), ++stale);
  feed(e, tx, frame(1, 0));
  ASSERT_EQ(tx.frames().size(), 2u);
  feed(e, tx, frame(0, 3));  // skips round 2
  EXPECT_EQ(drops(e, DropReason::kStaleRound), ++stale);
  feed(e, tx, frame(0, 1));
  feed(e, tx, frame(1, 1));
  feed(e, tx, frame(0, 2));
  feed(e, tx, frame(1, 0));  // round 0 was overwritten by round 2
  EXPECT_EQ(drops(e, DropReason::kStaleRound), ++stale);
  EXPECT_EQ(get(e.counters().slots_completed), 2u);
  EXPECT_EQ(total_drops(e), stale);
}

// --- Every drop reason --------------------------------------------------------------------------

std::vector<uint8_t> edited(std::vector<uint8_t> f, const std::function<void(uint8_t*)>& edit, bool restamp = true) {
  edit(f.data());
  if (restamp) restamp_frame(f);
  return f;
}

// The first `n` bytes of `f` with the IPv4 total and UDP lengths rewritten to end there, so that
// the parser gets to the header that `n` cuts.
std::vector<uint8_t> truncated(std::vector<uint8_t> f, size_t n) {
  f.resize(n);
  if (n >= wire::kIpOffset + 4) store_be16(f.data() + wire::kIpOffset + 2, static_cast<uint16_t>(n - wire::kIpOffset));
  if (n >= wire::kUdpOffset + 6)
    store_be16(f.data() + wire::kUdpOffset + 4, static_cast<uint16_t>(n - wire::kUdpOffset));
  return f;
}

std::vector<uint8_t> arp_request(uint32_t target_ip, uint16_t op = 1) {
  std::vector<uint8_t> f(60, 0);
  std::memset(f.data(), 0xFF, 6);
  const Member w = member(0);
  std::memcpy(f.data() + 6, w.mac, 6);
  store_be16(f.data() + 12, wire::kEtherTypeArp);
  uint8_t* a = f.data() + 14;
  store_be16(a, 1);
  store_be16(a + 2, 0x0800);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, op);
  std::memcpy(a + 8, w.mac, 6);
  store_be32(a + 14, w.ip);
  store_be32(a + 24, target_ip);
  return f;
}

TEST(EngineTest, EveryDropReasonIsCountedAndAValidJobStillCompletes) {
  const EngineOptions o = appliance(0, 2);  // core 0 of 2: owns the even slots
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(7, Dtype::kFp32, ReduceOp::kSum, 4, 4, 256);
  ASSERT_TRUE(e.add_job(job).ok());
  const Chunk s0{0, 0, 3, 0, 16};
  const Chunk s2{2, 0, 3, 16, 16};
  const auto good = contribution(job, o, 1, s0);

  std::vector<std::vector<uint8_t>> frames;
  std::map<DropReason, uint64_t> want;
  auto add = [&](DropReason r, std::vector<uint8_t> f) {
    frames.push_back(std::move(f));
    ++want[r];
  };
  using enum DropReason;
  constexpr size_t H = wire::kSumcastOffset;
  // Structure (wire::parse_frame).
  add(kTruncatedEth, std::vector<uint8_t>(good.begin(), good.begin() + 13));
  add(kNotIpv4, edited(
                    good, [](uint8_t* f) { store_be16(f + 12, wire::kEtherTypeIpv6); }, false));
  add(kNotIpv4, edited(
                    good, [](uint8_t* f) { store_be16(f + 12, 0x88CC); }, false));  // LLDP
  add(kNotIpv4, edited(
                    good, [](uint8_t* f) { store_be16(f + 12, wire::kEtherTypeVlan); }, false));
  add(kTruncatedIp, std::vector<uint8_t>(good.begin(), good.begin() + wire::kIpOffset + 10));
  add(kBadIpHeader, edited(
                        good, [](uint8_t* f) { f[wire::kIpOffset] = 0x46; }, false));
  add(kIpFragment, edited(
                       good, [](uint8_t* f) { f[wire::kIpOffset + 6] |= 0x20; }, false));
  add(kNotUdp, edited(
                   good, [](uint8_t* f) { f[wire::kIpOffset + 9] = 6; }, false));
  add(kTruncatedUdp,
      edited(
          truncated(good, wire::kUdpOffset + 4), [](uint8_t* f) { store_be16(f + wire::kIpOffset + 2, 24); }, false));
  add(kBadUdpLength, edited(
                         good, [](uint8_t* f) { f[wire::kUdpOffset + 5] += 4; }, false));
  add(kNotRocePort, edited(
                        good, [](uint8_t* f) { store_be16(f + wire::kUdpOffset + 2, 4792); }, false));
  add(kTruncatedBth, truncated(good, wire::kBthOffset + 6));
  add(kBadOpcode, edited(
                      good, [](uint8_t* f) { f[wire::kBthOffset] = 0x04; }, false));
  add(kBadBth, edited(
                   good, [](uint8_t* f) { store_be16(f + wire::kBthOffset + 2, 0x7FFF); }, false));
  add(kTruncatedDeth, truncated(good, wire::kDethOffset + 4));
  add(kTruncatedHeader, truncated(good, wire::kPayloadOffset));
  add(kBadVersion, edited(
                       good, [](uint8_t* f) { f[H] = 2; }, false));
  add(kBadType, edited(
                    good, [](uint8_t* f) { f[H + 1] = 9; }, false));
  add(kBadDtype, edited(
                     good, [](uint8_t* f) { f[H + 2] = 7; }, false));
  add(kBadOp, edited(
                  good, [](uint8_t* f) { f[H + 3] = 5; }, false));
  add(kBadLength, edited(
                      good, [](uint8_t* f) { store_be16(f + H + 20, 17); }, false));
  add(kBadRange, edited(
                     good, [](uint8_t* f) { store_be64(f + H + 24, wire::kMaxElementIndex); }, false));
  // Addressing and integrity.
  add(kNotForUs, edited(good, [](uint8_t* f) { f[5] ^= 1; }));                     // other MAC
  add(kNotForUs, edited(good, [](uint8_t* f) { f[wire::kIpOffset + 19] ^= 1; }));  // other IPv4
  add(kNotForUs, edited(
                     good, [](uint8_t* f) { f[wire::kIpOffset + 19] ^= 1; }, false));  // other IPv4, stale ICRC
  add(kBadIcrc, edited(
                    good, [](uint8_t* f) { f[wire::kPayloadOffset + 3] ^= 0x10; }, false));  // corrupted
  add(kNotContribution, edited(good, [](uint8_t* f) { f[H + 1] = 2; }));                     // a result
  add(kNotContribution,
      edited(make_contribution_frame(job, o, {1, 0, 0, 3, 0}, {}), [](uint8_t* f) { f[H + 1] = 3; }));  // an abort
  // Job and member.
  add(kUnknownJob, edited(good, [](uint8_t* f) { store_be32(f + H + 4, 8); }));
  add(kBadQkey, edited(good, [](uint8_t* f) { f[wire::kDethOffset + 3] ^= 1; }));
  add(kBadRank, edited(good, [](uint8_t* f) { store_be16(f + H + 8, 4); }));
  add(kForeignSource, edited(good, [](uint8_t* f) { f[wire::kIpOffset + 15] ^= 0x40; }));  // IPv4
  add(kForeignSource, edited(good, [](uint8_t* f) { f[wire::kDethOffset + 7] ^= 1; }));    // QPN
  add(kForeignSource, edited(good, [](uint8_t* f) { store_be16(f + H + 8, 2); }));  // rank 2's slot, rank 1's source
  add(kBadSlot, edited(good, [](uint8_t* f) { store_be16(f + H + 10, 4); }));
  add(kWrongCore, contribution(job, o, 1, {1, 0, 3, 0, 16}));
  add(kWrongCore, contribution(job, o, 1, {3, 0, 3, 0, 16}));
  {
    JobSpec other = job;
    other.dtype = Dtype::kFp64;
    add(kDtypeMismatch, contribution(other, o, 1, s0));
    other = job;
    other.op = ReduceOp::kMax;
    add(kOpMismatch, contribution(other, o, 1, s0));
  }
  add(kTooLarge, contribution(job, o, 1, {0, 0, 3, 0, 65}));  // 260 bytes > 256
  add(kVersionBit, edited(good, [](uint8_t* f) { f[H + 22] ^= 1; }));
  add(kStaleRound, contribution(job, o, 1, {0, 7, 3, 0, 16}));
  // Chunk identity differs from the one rank 0 opened the round with.
  add(kChunkMismatch, contribution(job, o, 1, {0, 0, 3, 1, 16}));  // offset
  add(kChunkMismatch, contribution(job, o, 1, {0, 0, 3, 0, 15}));  // count
  add(kChunkMismatch, contribution(job, o, 1, {0, 0, 4, 0, 16}));  // coll_seq
  // ARP that is not a request for our address.
  add(kArpIgnored, arp_request(kApplianceIp + 1));
  add(kArpIgnored, arp_request(kApplianceIp, 2));  // a reply
  {
    auto arp = arp_request(kApplianceIp);
    arp.resize(30);  // ends inside the ARP body
    add(kArpIgnored, arp);
  }

  // Rank 0 opens both slots, then every bad frame, then ranks 1..3 complete the slots.
  std::vector<std::vector<uint8_t>> all = {contribution(job, o, 0, s0), contribution(job, o, 0, s2)};
  all.insert(all.end(), frames.begin(), frames.end());
  for (uint16_t r = 1; r < 4; ++r) {
    all.push_back(contribution(job, o, r, s0));
    all.push_back(contribution(job, o, r, s2));
  }
  feed(e, tx, all);

  for (size_t i = 0; i < kDropReasonCount; ++i) {
    const auto r = static_cast<DropReason>(i);
    const uint64_t w = want.contains(r) ? want[r] : 0;
    EXPECT_EQ(drops(e, r), w) << drop_reason_name(r);
  }
  for (auto r : {kMultiSegment, kTxNoBuffer}) EXPECT_EQ(want.count(r), 0u);
  EXPECT_EQ(total_drops(e), frames.size());
  EXPECT_EQ(get(e.counters().contributions), 8u);
  EXPECT_EQ(get(e.counters().duplicates), 0u);
  EXPECT_EQ(get(e.counters().rx_packets), all.size());
  ASSERT_EQ(tx.frames().size(), 8u);
  const auto got = collect(tx);
  for (const Chunk& ch : {s0, s2}) {
    for (uint16_t r = 0; r < 4; ++r) {
      ASSERT_EQ(got.count({ch.slot, 0, r}), 1u);
      const auto p = check_sent_frame(got.find({ch.slot, 0, r})->second.frame, job, o, r, wire::MsgType::kResult);
      EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 4, ch.slot, 0, 16));
    }
  }
}

TEST(EngineTest, ContributionToTheIpv4MulticastMacWithOurAddressIsAccepted) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(1, Dtype::kFp32, ReduceOp::kSum, 1, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  auto f = edited(contribution(job, o, 0, {0, 0, 0, 0, 4}), [](uint8_t* x) { std::memcpy(x, kGroupMac, 6); });
  feed(e, tx, f);
  EXPECT_EQ(get(e.counters().slots_completed), 1u);
  EXPECT_EQ(tx.frames().size(), 1u);
}

TEST(EngineTest, CountDropAddsTheDropsAPortDetects) {
  Engine e(appliance());
  e.count_drop(DropReason::kMultiSegment, 3);
  e.count_drop(DropReason::kMultiSegment);
  EXPECT_EQ(drops(e, DropReason::kMultiSegment), 4u);
  EXPECT_STREQ(drop_reason_name(DropReason::kMultiSegment), "multi_segment");
  EXPECT_STREQ(drop_reason_name(DropReason::kTruncatedEth), "truncated_eth");
}

TEST(EngineTest, DropReasonNamesAreUniqueAndMirrorParseErrors) {
  std::set<std::string> names;
  for (size_t i = 0; i < kDropReasonCount; ++i) names.insert(drop_reason_name(static_cast<DropReason>(i)));
  EXPECT_EQ(names.size(), kDropReasonCount);
  for (int i = 0; i < wire::kParseErrorCount; ++i) {
    EXPECT_STREQ(drop_reason_name(static_cast<DropReason>(i)),
                 wire::parse_error_name(static_cast<wire::ParseError>(i)));
  }
}

// --- ARP ----------------------------------------------------------------------------------------

TEST(EngineTest, ArpRequestForTheLocalAddressGetsAReply) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const Member w = member(0);
  const auto request = arp_request(kApplianceIp);
  feed(e, tx, std::vector<uint8_t>(request.begin(), request.begin() + 42));  // unpadded, as veth delivers
  ASSERT_EQ(tx.frames().size(), 1u);
  const std::vector<uint8_t> reply(tx.frames()[0].data, tx.frames()[0].data + tx.frames()[0].len);
  std::vector<uint8_t> want = {
      w.mac[0], w.mac[1], w.mac[2], w.mac[3], w.mac[4], w.mac[5],                    // to the requester
      0x02,     0x53,     0x43,     0x00,     0x00,     0x01,                        // from us
      0x08,     0x06,                                                                // ARP
      0x00,     0x01,     0x08,     0x00,     0x06,     0x04,     0x00, 0x02,        // Ethernet/IPv4, reply
      0x02,     0x53,     0x43,     0x00,     0x00,     0x01,     10,   0,    0, 1,  // sender: us
      w.mac[0], w.mac[1], w.mac[2], w.mac[3], w.mac[4], w.mac[5],                    // target: the requester
      10,       1,        0,        1};
  want.resize(60, 0);  // padded to the Ethernet minimum
  EXPECT_EQ(reply, want);
  EXPECT_EQ(get(e.counters().arp_replies), 1u);
  EXPECT_EQ(get(e.counters().tx_packets), 1u);
  EXPECT_EQ(get(e.counters().tx_bytes), 60u);
  EXPECT_EQ(total_drops(e), 0u);
}

// --- Limits, removal, tx pool -------------------------------------------------------------------

struct CountingAllocator {
  int64_t live_allocations = 0;
  int64_t live_bytes = 0;
  std::map<void*, size_t> sizes;
  bool misaligned = false;

  static void* allocate(size_t bytes, void* ctx) {
    auto* self = static_cast<CountingAllocator*>(ctx);
    void* p = ::operator new (bytes, std::align_val_t{64});
    self->misaligned |= (reinterpret_cast<uintptr_t>(p) & 63) != 0;
    self->sizes[p] = bytes;
    ++self->live_allocations;
    self->live_bytes += static_cast<int64_t>(bytes);
    return p;
  }
  static void release(void* p, void* ctx) {
    auto* self = static_cast<CountingAllocator*>(ctx);
    EXPECT_EQ(self->sizes.count(p), 1u) << "release of memory allocate did not return";
    self->live_bytes -= static_cast<int64_t>(self->sizes[p]);
    self->sizes.erase(p);
    --self->live_allocations;
    ::operator delete (p, std::align_val_t{64});
  }
};

EngineOptions counted(CountingAllocator& a, EngineOptions o = appliance()) {
  o.allocate = &CountingAllocator::allocate;
  o.release = &CountingAllocator::release;
  o.alloc_ctx = &a;
  return o;
}

TEST(EngineTest, AddJobRefusesJobsBeyondTheLimitsAndChangesNothing) {
  CountingAllocator mem;
  EngineOptions o = counted(mem);
  o.max_jobs = 2;
  o.max_ranks = 8;
  o.max_slots_per_job = 16;
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec a = job_spec(1, Dtype::kFp32, ReduceOp::kSum, 2, 16);
  ASSERT_TRUE(e.add_job(a).ok());
  ASSERT_TRUE(e.add_job(job_spec(2, Dtype::kFp32, ReduceOp::kSum, 8, 4)).ok());
  const int64_t bytes = mem.live_bytes;

  auto refused = [&](const JobSpec& j, StatusCode code, const std::string& word) {
    const Status s = e.add_job(j);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("job " + std::to_string(j.job_id)), std::string::npos) << s.message();
  };
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 4), StatusCode::kRefused, "max_jobs");
  e.remove_job(2, wire::AbortReason::kNone, tx);
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 9, 4), StatusCode::kRefused, "max_ranks");
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 17), StatusCode::kRefused, "max_slots_per_job");
  refused(job_spec(1, Dtype::kFp32, ReduceOp::kSum, 2, 4), StatusCode::kInvalidArgument, "already");
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 0, 4), StatusCode::kInvalidArgument, "members");
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 0), StatusCode::kInvalidArgument, "slot_count");
  refused(job_spec(3, Dtype::kFp64, ReduceOp::kSum, 2, 4, 4), StatusCode::kInvalidArgument, "max_payload_bytes");
  refused(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 4, 4100), StatusCode::kInvalidArgument, "max_payload_bytes");
  JobSpec bad = job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 4);
  bad.dtype = static_cast<Dtype>(9);
  refused(bad, StatusCode::kInvalidArgument, "dtype");
  bad = job_spec(3, Dtype::kFp32, ReduceOp::kSum, 2, 4);
  bad.op = static_cast<ReduceOp>(9);
  refused(bad, StatusCode::kInvalidArgument, "op");
  EXPECT_LT(mem.live_bytes, bytes);  // only job 2's memory went
  EXPECT_EQ(mem.live_allocations, 1);
  EXPECT_EQ(get(e.counters().jobs_active), 1u);

  // Job 1 is untouched and still works; job 3 fits again at the limits.
  for (uint16_t r = 0; r < 2; ++r) feed(e, tx, contribution(a, o, r, {15, 0, 0, 0, 8}));
  EXPECT_EQ(tx.frames().size(), 2u);
  EXPECT_TRUE(e.add_job(job_spec(3, Dtype::kFp32, ReduceOp::kSum, 8, 16, 4096)).ok());
  EXPECT_EQ(get(e.counters().jobs_active), 2u);
  EXPECT_FALSE(mem.misaligned);
}

TEST(EngineTest, AllocationFailureIsReportedAndChangesNothing) {
  EngineOptions o = appliance();
  o.allocate = [](size_t, void*) -> void* { return nullptr; };
  o.release = [](void*, void*) { ADD_FAILURE() << "release without allocation"; };
  Engine e(o);
  const Status s = e.add_job(job_spec(1, Dtype::kFp32, ReduceOp::kSum, 2, 4));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(get(e.counters().jobs_active), 0u);
  EXPECT_TRUE(e.progress().empty());
}

TEST(EngineTest, RemoveJobSendsAbortsToEveryMemberAndFreesItsMemory) {
  CountingAllocator mem;
  {
    const EngineOptions o = counted(mem);
    Engine e(o);
    MemoryTxSink tx;
    const JobSpec a = job_spec(11, Dtype::kFp16, ReduceOp::kSum, 4, 8);
    const JobSpec b = multicast_job_spec(12, Dtype::kFp32, ReduceOp::kSum, 3, 8);
    const JobSpec c = job_spec(13, Dtype::kFp32, ReduceOp::kSum, 2, 8);
    ASSERT_TRUE(e.add_job(a).ok());
    ASSERT_TRUE(e.add_job(b).ok());
    ASSERT_TRUE(e.add_job(c).ok());
    EXPECT_EQ(mem.live_allocations, 3);
    feed(e, tx, contribution(a, o, 0, {0, 0, 0, 0, 8}));  // a round in progress

    e.remove_job(11, wire::AbortReason::kTimeout, tx);
    ASSERT_EQ(tx.frames().size(), 4u);
    for (uint16_t r = 0; r < 4; ++r) {
      const auto p = check_sent_frame(tx.frames()[r].bytes(), a, o, r, wire::MsgType::kAbort);
      EXPECT_EQ(p.hdr.status, static_cast<uint8_t>(wire::AbortReason::kTimeout));
      EXPECT_EQ(p.payload_len, 0u);
    }
    EXPECT_EQ(get(e.counters().aborts_sent), 4u);
    EXPECT_EQ(get(e.counters().jobs_active), 2u);
    EXPECT_EQ(mem.live_allocations, 2);
    EXPECT_GE(tx.flushes(), 1u);

    tx.clear();
    e.remove_job(12, wire::AbortReason::kAdmin, tx);
    ASSERT_EQ(tx.frames().size(), 4u) << "a multicast job's abort goes to the group and to each member";
    const auto p = check_sent_frame(tx.frames()[0].bytes(), b, o, wire::kRankMulticast, wire::MsgType::kAbort);
    EXPECT_EQ(p.hdr.status, static_cast<uint8_t>(wire::AbortReason::kAdmin));
    for (uint16_t r = 0; r < 3; ++r) {
      const auto q = check_sent_frame(tx.frames()[1 + r].bytes(), b, o, r, wire::MsgType::kAbort);
      EXPECT_EQ(q.hdr.status, static_cast<uint8_t>(wire::AbortReason::kAdmin));
    }
    EXPECT_EQ(get(e.counters().group_frames), 1u);

    tx.clear();
    e.remove_job(13, wire::AbortReason::kNone, tx);   // no abort wanted
    e.remove_job(99, wire::AbortReason::kAdmin, tx);  // unknown: nothing
    EXPECT_TRUE(tx.frames().empty());
    EXPECT_EQ(get(e.counters().aborts_sent), 8u);
    EXPECT_EQ(mem.live_allocations, 0);
    EXPECT_EQ(get(e.counters().jobs_active), 0u);

    // Packets of a removed job are unknown; the id can be registered again, fresh.
    feed(e, tx, contribution(a, o, 1, {0, 0, 0, 0, 8}));
    EXPECT_EQ(drops(e, DropReason::kUnknownJob), 1u);
    ASSERT_TRUE(e.add_job(a).ok());
    ASSERT_TRUE(e.add_job(c).ok());
    for (uint16_t r = 0; r < 4; ++r) feed(e, tx, contribution(a, o, r, {0, 0, 0, 0, 8}));
    EXPECT_EQ(tx.frames().size(), 4u);
    EXPECT_EQ(mem.live_allocations, 2);
  }
  EXPECT_EQ(mem.live_allocations, 0) << "the destructor frees every job";
  EXPECT_EQ(mem.live_bytes, 0);
}

// Many jobs added and removed in a mixed order: the table finds every live job and no removed one.
// Probes carry a wrong Q_Key, so they change nothing: bad_qkey when the job is found, else
// unknown_job.
TEST(EngineTest, JobTableFindsEveryJobAcrossAddsAndRemoves) {
  EngineOptions o = appliance();
  o.max_jobs = 16;
  Engine e(o);
  MemoryTxSink tx;
  constexpr uint32_t kIds = 64;
  std::vector<std::vector<uint8_t>> probes;
  for (uint32_t id = 0; id < kIds; ++id) {
    JobSpec wrong_key = job_spec(id * 16, Dtype::kInt32, ReduceOp::kSum, 1, 1, 4);
    wrong_key.qkey ^= 0x80000000u;
    probes.push_back(contribution(wrong_key, o, 0, {0, 0, 0, 0, 1}));
  }
  std::mt19937 rng(7);
  std::set<uint32_t> live;
  for (int step = 0; step < 600; ++step) {
    const uint32_t id = rng() % kIds * 16;
    if (live.count(id) != 0) {
      e.remove_job(id, wire::AbortReason::kNone, tx);
      live.erase(id);
    } else if (live.size() < 16) {
      ASSERT_TRUE(e.add_job(job_spec(id, Dtype::kInt32, ReduceOp::kSum, 1, 1, 4)).ok());
      live.insert(id);
    } else {
      EXPECT_EQ(e.add_job(job_spec(id, Dtype::kInt32, ReduceOp::kSum, 1, 1, 4)).code(), StatusCode::kRefused);
    }
    for (uint32_t k = 0; k < kIds; ++k) {
      const uint64_t before = drops(e, DropReason::kBadQkey);
      feed(e, tx, probes[k]);
      const bool found = drops(e, DropReason::kBadQkey) != before;
      ASSERT_EQ(found, live.count(k * 16) == 1) << "job " << k * 16 << " at step " << step;
    }
  }
  EXPECT_EQ(get(e.counters().jobs_active), live.size());
  EXPECT_EQ(e.progress().size(), live.size());
  EXPECT_TRUE(tx.frames().empty());
}

TEST(EngineTest, TxPoolExhaustionIsCountedAndTheResultStaysForRetransmission) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx(8);
  const JobSpec job = job_spec(4, Dtype::kBf16, ReduceOp::kSum, 4, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  const Chunk ch{0, 0, 0, 0, 30};
  for (uint16_t r = 0; r < 3; ++r) feed(e, tx, contribution(job, o, r, ch));
  tx.set_limit(2);
  feed(e, tx, contribution(job, o, 3, ch));
  EXPECT_EQ(tx.frames().size(), 2u);
  EXPECT_EQ(drops(e, DropReason::kTxNoBuffer), 2u);
  EXPECT_EQ(get(e.counters().results_sent), 2u);
  EXPECT_EQ(get(e.counters().slots_completed), 1u);
  feed(e, tx, arp_request(kApplianceIp));  // no buffer for the reply either
  EXPECT_EQ(drops(e, DropReason::kTxNoBuffer), 3u);
  EXPECT_EQ(get(e.counters().arp_replies), 0u);

  tx.clear();
  tx.set_limit(MemoryTxSink::kUnlimited);
  feed(e, tx, contribution(job, o, 3, ch));  // rank 3 never got it and asks again
  ASSERT_EQ(tx.frames().size(), 1u);
  const auto p = check_sent_frame(tx.frames()[0].bytes(), job, o, 3, wire::MsgType::kResult);
  EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 4, 0, 0, 30));

  // The pool itself running dry (no limit) is counted the same way.
  tx.clear();
  MemoryTxSink tiny(1);
  for (uint16_t r = 0; r < 3; ++r) feed(e, tiny, contribution(job, o, r, ch));
  EXPECT_EQ(tiny.frames().size(), 1u);
  EXPECT_EQ(drops(e, DropReason::kTxNoBuffer), 5u);
}

TEST(EngineTest, WorldsBeyond64RanksUseSeveralBitmapWords) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx(512);
  constexpr uint32_t kWorld = 130;
  const JobSpec job = job_spec(6, Dtype::kInt32, ReduceOp::kSum, kWorld, 2);
  ASSERT_TRUE(e.add_job(job).ok());
  const Chunk ch{1, 0, 0, 0, 12};
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t r = 0; r < kWorld; ++r) {
    frames.push_back(contribution(job, o, r, ch));
    if (r == 64 || r == 127) frames.push_back(contribution(job, o, r, ch));  // duplicates
  }
  std::vector<std::vector<uint8_t>> last = {frames.back()};
  frames.pop_back();
  feed(e, tx, frames);
  EXPECT_TRUE(tx.frames().empty()) << "129 of 130 ranks must not complete the slot";
  EXPECT_EQ(get(e.counters().duplicates), 2u);
  feed(e, tx, last);
  ASSERT_EQ(tx.frames().size(), kWorld);
  const auto got = collect(tx);
  for (uint16_t r = 0; r < kWorld; ++r) {
    ASSERT_EQ(got.count({1, 0, r}), 1u);
    const auto p = check_sent_frame(got.find({1, 0, r})->second.frame, job, o, r, wire::MsgType::kResult);
    EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, kWorld, 1, 0, 12));
  }
}

// Results to the members of a job are copies of one frame with the member's fields and ICRC
// rewritten: every length (odd 16-bit counts carry a pad) must give frames byte-identical to ones
// built and stamped from scratch, also when the first members' buffers are refused.
class RefusingTxSink final : public TxSink {
 public:
  explicit RefusingTxSink(size_t refuse_first) : refuse_(refuse_first) {}
  uint8_t* acquire() override {
    if (refuse_ > 0) {
      --refuse_;
      return nullptr;
    }
    bufs_.emplace_back(wire::kMaxFrameLen, uint8_t{0xA5});  // stale bytes, as a reused buffer has
    return bufs_.back().data();
  }
  void submit(uint8_t* buf, uint32_t len) override { frames.emplace_back(buf, buf + len); }
  void flush() override {}
  std::vector<std::vector<uint8_t>> frames;

 private:
  size_t refuse_;
  std::deque<std::vector<uint8_t>> bufs_;
};

std::vector<uint8_t> result_from_scratch(const JobSpec& job, const EngineOptions& o, uint16_t rank, const Chunk& c,
                                         const std::vector<uint8_t>& payload) {
  wire::Addressing a;
  std::memcpy(a.src_mac, o.local_mac, 6);
  std::memcpy(a.dst_mac, job.members[rank].mac, 6);
  a.src_ip = o.local_ip;
  a.dst_ip = job.members[rank].ip;
  a.dst_port = job.members[rank].udp_port;
  a.dest_qp = job.members[rank].qpn;
  a.src_qp = o.qpn;
  a.qkey = job.qkey;
  wire::SumcastHeader h;
  h.type = wire::MsgType::kResult;
  h.dtype = job.dtype;
  h.op = job.op;
  h.job_id = job.job_id;
  h.rank = rank;
  h.slot = c.slot;
  h.round = c.round;
  h.coll_seq = c.coll_seq;
  h.elem_count = c.count;
  h.flags = static_cast<uint8_t>(c.round & 1);
  h.elem_offset = c.offset;
  std::array<uint8_t, wire::kMaxFrameLen> buf{};
  const size_t len = wire::frame_len(payload.size());
  uint8_t* out = wire::write_frame_headers(buf.data(), a, h, payload.size());
  std::copy(payload.begin(), payload.end(), out);
  icrc::stamp_frame(std::span<uint8_t>(buf.data(), len));
  return {buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(len)};
}

// With EngineOptions::udp_checksum on too: then each copy carries the checksum RFC 768 defines
// (check_sent_frame verifies it from the definition; the first copy's is summed in full, the
// others updated from it), and its bytes are otherwise the same.
TEST(EngineTest, ReplicatedResultsMatchFramesBuiltFromScratchAtEveryLength) {
  constexpr uint32_t kWorld = 5;
  for (const bool udp_checksum : {false, true}) {
    EngineOptions o = appliance();
    o.udp_checksum = udp_checksum;
    for (const Dtype dtype : {Dtype::kBf16, Dtype::kFp32}) {
      for (const size_t refused : {size_t{0}, size_t{2}}) {
        SCOPED_TRACE(std::string(wire::dtype_name(dtype)) + " refused " + std::to_string(refused) +
                     (udp_checksum ? ", UDP checksums" : ""));
        Engine e(o);
        const JobSpec job = job_spec(9, dtype, ReduceOp::kSum, kWorld, 1, 2048);
        ASSERT_TRUE(e.add_job(job).ok());
        const size_t max_count = 2048 / wire::dtype_size(dtype);
        uint32_t round = 0;
        for (const size_t count :
             {size_t{1}, size_t{2}, size_t{3}, size_t{255}, size_t{256}, max_count - 1, max_count}) {
          SCOPED_TRACE(count);
          const Chunk ch{0, round++, 7, 1000 * count, static_cast<uint16_t>(count)};
          RefusingTxSink tx(refused);
          for (uint16_t r = 0; r < kWorld; ++r) {
            const auto f = contribution(job, o, r, ch);
            const PacketView v{f.data(), static_cast<uint32_t>(f.size())};
            e.process_burst(std::span<const PacketView>(&v, 1), tx);
          }
          ASSERT_EQ(tx.frames.size(), kWorld - refused);
          const auto want = encode_elements(dtype, expected(ReduceOp::kSum, kWorld, 0, ch.round, count));
          for (size_t i = 0; i < tx.frames.size(); ++i) {
            const auto rank = static_cast<uint16_t>(refused + i);
            check_sent_frame(tx.frames[i], job, o, rank, wire::MsgType::kResult);
            std::vector<uint8_t> sent = tx.frames[i];
            store_be16(sent.data() + wire::kUdpOffset + 6, 0);  // result_from_scratch leaves it 0
            EXPECT_EQ(sent, result_from_scratch(job, o, rank, ch, want)) << "rank " << rank;
          }
        }
        EXPECT_EQ(drops(e, DropReason::kTxNoBuffer), 7 * refused);
      }
    }
  }
}

TEST(EngineTest, WorldOfOneCompletesOnItsOnlyContribution) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(8, Dtype::kFp16, ReduceOp::kMax, 1, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  for (uint32_t round = 0; round < 3; ++round) feed(e, tx, contribution(job, o, 0, {0, round, 0, 0, 9}));
  ASSERT_EQ(tx.frames().size(), 3u);
  for (uint32_t round = 0; round < 3; ++round) {
    const auto p = check_sent_frame(tx.frames()[round].bytes(), job, o, 0, wire::MsgType::kResult);
    EXPECT_EQ(p.hdr.round, round);
    EXPECT_EQ(payload_of(p), inputs(0, 0, round, 9));
  }
}

TEST(EngineTest, CoreWithoutSlotsOfAJobDropsItsFramesAsWrongCore) {
  const EngineOptions o = appliance(3, 4);
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(8, Dtype::kFp32, ReduceOp::kSum, 2, 2);  // slots 0, 1: cores 0, 1
  ASSERT_TRUE(e.add_job(job).ok());
  feed(e, tx, contribution(job, o, 0, {1, 0, 0, 0, 4}));
  EXPECT_EQ(drops(e, DropReason::kWrongCore), 1u);
}

TEST(EngineTest, OwnerCoreIsTheSlotModuloTheCoreCount) {
  const EngineOptions o = appliance();
  const JobSpec job = job_spec(1, Dtype::kFp32, ReduceOp::kSum, 2, 64);
  for (uint16_t s : {0, 1, 5, 63}) {
    const auto f = contribution(job, o, 1, {s, 0, 0, 0, 4});
    for (uint32_t cores : {1u, 2u, 3u, 8u}) {
      EXPECT_EQ(Engine::owner_core(f.data(), static_cast<uint32_t>(f.size()), cores), static_cast<int>(s % cores));
    }
    EXPECT_EQ(Engine::owner_core(f.data(), static_cast<uint32_t>(f.size()), 0), -1);
    EXPECT_EQ(Engine::owner_core(f.data(), 60, 2), -1) << "truncated";
  }
  const auto arp = arp_request(kApplianceIp);
  EXPECT_EQ(Engine::owner_core(arp.data(), static_cast<uint32_t>(arp.size()), 2), -1);
  auto result = edited(contribution(job, o, 1, {1, 0, 0, 0, 4}), [](uint8_t* f) { f[wire::kSumcastOffset + 1] = 2; });
  EXPECT_EQ(Engine::owner_core(result.data(), static_cast<uint32_t>(result.size()), 2), -1);
  auto v6 = edited(
      contribution(job, o, 1, {1, 0, 0, 0, 4}), [](uint8_t* f) { store_be16(f + 12, 0x86DD); }, false);
  EXPECT_EQ(Engine::owner_core(v6.data(), static_cast<uint32_t>(v6.size()), 2), -1);
  EXPECT_EQ(Engine::owner_core(nullptr, 0, 2), -1);
}

TEST(EngineTest, ProgressCountsCompletedSlotsPerJob) {
  const EngineOptions o = appliance(1, 2);
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec a = job_spec(21, Dtype::kFp32, ReduceOp::kSum, 2, 8);
  const JobSpec b = job_spec(22, Dtype::kFp32, ReduceOp::kSum, 2, 8);
  ASSERT_TRUE(e.add_job(a).ok());
  ASSERT_TRUE(e.add_job(b).ok());
  for (uint16_t s : {1, 3, 5}) {
    for (uint16_t r = 0; r < 2; ++r) feed(e, tx, contribution(a, o, r, {s, 0, 0, 0, 4}));
  }
  feed(e, tx, contribution(b, o, 0, {7, 0, 0, 0, 4}));  // open, not complete
  auto sorted = [&] {
    auto p = e.progress();
    std::sort(p.begin(), p.end(), [](const JobProgress& x, const JobProgress& y) { return x.job_id < y.job_id; });
    return p;
  };
  auto p = sorted();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].job_id, 21u);
  EXPECT_EQ(p[0].slots_completed, 3u);
  EXPECT_EQ(p[0].rounds_opened, 3u);  // nothing waiting: idle
  EXPECT_EQ(p[1].job_id, 22u);
  EXPECT_EQ(p[1].slots_completed, 0u);
  EXPECT_EQ(p[1].rounds_opened, 1u);  // one round waits for rank 1
  feed(e, tx, contribution(b, o, 1, {7, 0, 0, 0, 4}));
  p = sorted();
  EXPECT_EQ(p[1].slots_completed, 1u);
  EXPECT_EQ(p[1].rounds_opened, 1u);
  e.remove_job(21, wire::AbortReason::kNone, tx);
  p = sorted();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].job_id, 22u);
}

// A one-rank job's contribution whose ICRC does not match its headers, for an engine of `o`.
std::vector<uint8_t> bad_icrc_contribution(Engine& e, const EngineOptions& o) {
  const JobSpec job = job_spec(1, Dtype::kInt32, ReduceOp::kSum, 1, 1);
  EXPECT_TRUE(e.add_job(job).ok());
  auto f = contribution(job, o, 0, {0, 0, 0, 0, 4});
  f[f.size() - 1] ^= 0xFF;
  return f;
}

TEST(EngineTest, IcrcCheckCanBeTurnedOff) {
  EngineOptions o = appliance();
  o.verify_icrc = false;
  Engine e(o);
  MemoryTxSink tx;
  const auto f = bad_icrc_contribution(e, o);
  feed(e, tx, f);
  EXPECT_EQ(drops(e, DropReason::kBadIcrc), 0u);
  EXPECT_EQ(get(e.counters().slots_completed), 1u);
}

// A frame its receiver marks icrc_verified (the embedded service checked it to learn a train
// member's IP ID) is not checked again; the same frame unmarked is dropped as kBadIcrc.
TEST(EngineTest, FramesTheReceiverVerifiedAreNotCheckedAgain) {
  EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const auto f = bad_icrc_contribution(e, o);
  const PacketView unmarked{f.data(), static_cast<uint32_t>(f.size())};
  e.process_burst(std::span<const PacketView>(&unmarked, 1), tx);
  EXPECT_EQ(drops(e, DropReason::kBadIcrc), 1u);
  EXPECT_EQ(get(e.counters().slots_completed), 0u);
  const PacketView marked{f.data(), static_cast<uint32_t>(f.size()), true};
  e.process_burst(std::span<const PacketView>(&marked, 1), tx);
  EXPECT_EQ(drops(e, DropReason::kBadIcrc), 1u);
  EXPECT_EQ(get(e.counters().slots_completed), 1u);
}

TEST(EngineTest, AnyUdpSourcePortIsAcceptedFromTheRegisteredAddressAndQpn) {
  // RoCE NICs choose the UDP source port per flow (ECMP entropy): only IPv4 and QPN identify a member.
  EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(1, Dtype::kInt32, ReduceOp::kSum, 1, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  auto f = contribution(job, o, 0, {0, 0, 0, 0, 4});
  store_be16(f.data() + wire::kUdpOffset, 49999);
  restamp_frame(f);
  feed(e, tx, f);
  EXPECT_EQ(drops(e, DropReason::kForeignSource), 0u);
  EXPECT_EQ(get(e.counters().slots_completed), 1u);
  ASSERT_EQ(tx.frames().size(), 1u);
  // Results still go to the registered port.
  EXPECT_EQ(load_be16(tx.frames()[0].data + wire::kUdpOffset + 2), job.members[0].udp_port);
}

TEST(EngineTest, LatencyBucketBoundsAreInclusivePowersOfTwo) {
  // Bucket b holds (2^b, 2^(b+1)] ticks (bucket 0: [0, 2]); the last one everything above.
  EXPECT_EQ(latency_bucket(0), 0u);
  EXPECT_EQ(latency_bucket(2), 0u);
  EXPECT_EQ(latency_bucket(3), 1u);
  EXPECT_EQ(latency_bucket(4), 1u);
  EXPECT_EQ(latency_bucket(5), 2u);
  EXPECT_EQ(latency_bucket(1024), 9u);
  EXPECT_EQ(latency_bucket(1025), 10u);
  EXPECT_EQ(latency_bucket(uint64_t{1} << (kLatencyBuckets - 1)), kLatencyBuckets - 2);
  EXPECT_EQ(latency_bucket((uint64_t{1} << (kLatencyBuckets - 1)) + 1), kLatencyBuckets - 1);
  EXPECT_EQ(latency_bucket(~uint64_t{0}), kLatencyBuckets - 1);
}

TEST(EngineTest, CompletionLatencyIsTheClockBetweenOpeningAndCompletingBursts) {
  uint64_t now = 1000;
  EngineOptions o = appliance();
  o.clock = [](void* ctx) { return *static_cast<uint64_t*>(ctx); };
  o.clock_ctx = &now;
  o.clock_hz = 1000;
  Engine e(o);
  EXPECT_EQ(e.options().clock_hz, 1000u);
  MemoryTxSink tx;
  const JobSpec job = job_spec(1, Dtype::kInt32, ReduceOp::kSum, 2, 4);
  ASSERT_TRUE(e.add_job(job).ok());
  // Slot 0: opened at 1000, completed at 1005 (5 ticks: bucket (4, 8]).
  feed(e, tx, contribution(job, o, 0, {0, 0, 0, 0, 4}));
  now = 1005;
  feed(e, tx, contribution(job, o, 1, {0, 0, 0, 0, 4}));
  // Slot 1: opened at 2000, a duplicate at 2500 changes nothing, completed at 3000 (1000 ticks: (512, 1024]).
  now = 2000;
  feed(e, tx, contribution(job, o, 0, {1, 0, 0, 0, 4}));
  now = 2500;
  feed(e, tx, contribution(job, o, 0, {1, 0, 0, 0, 4}));
  now = 3000;
  feed(e, tx, contribution(job, o, 1, {1, 0, 0, 0, 4}));
  // Slot 2: both ranks in one burst: 0 ticks.
  now = 9000;
  feed(e, tx, {contribution(job, o, 0, {2, 0, 0, 0, 4}), contribution(job, o, 1, {2, 0, 0, 0, 4})});
  // Slot 0, round 1: its open time is that round's, not round 0's.
  now = 10000;
  feed(e, tx, contribution(job, o, 1, {0, 1, 0, 4, 4}));
  now = 10003;
  feed(e, tx, contribution(job, o, 0, {0, 1, 0, 4, 4}));

  const CoreCounters& c = e.counters();
  ASSERT_EQ(get(c.slots_completed), 4u);
  std::vector<uint64_t> want(kLatencyBuckets, 0);
  want[0] = 1;  // 0 ticks
  want[1] = 1;  // 3 ticks: (2, 4]
  want[2] = 1;  // 5 ticks
  want[9] = 1;  // 1000 ticks
  uint64_t count = 0;
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    EXPECT_EQ(get(c.latency_buckets[b]), want[b]) << "bucket " << b;
    count += get(c.latency_buckets[b]);
  }
  EXPECT_EQ(count, get(c.slots_completed));
  EXPECT_EQ(get(c.latency_ticks_sum), 5u + 1000u + 0u + 3u);
}

TEST(EngineTest, WithoutAClockTheHistogramUsesNanoseconds) {
  Engine e(appliance());
  EXPECT_EQ(e.options().clock_hz, 1000000000u);
}

// --- Next hops ----------------------------------------------------------------------------------

// Results go to each member's next-hop MAC from the table (the resolver's); a member whose next
// hop is unresolved gets nothing, counted as next_hop_unresolved, and its retransmission is
// answered once the next hop is known, with a MAC changed in the meantime.
TEST(EngineTest, ResultsTakeTheNextHopMacAndAnUnresolvedOneIsCounted) {
  NextHopTable table(4);
  EngineOptions o = appliance();
  o.next_hops = &table;
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(3, Dtype::kFp32, ReduceOp::kSum, 3, 2);
  const uint8_t gw[6] = {0x02, 0x47, 0x57, 0, 0, 1}, gw2[6] = {0x02, 0x47, 0x57, 0, 0, 2};
  for (uint32_t r = 0; r < 3; ++r) job.members[r].next_hop = r == 1 ? 1 : 0;  // ranks 0, 2 share a gateway
  table.publish(0, gw);
  ASSERT_TRUE(e.add_job(job).ok());
  const Chunk ch{0, 0, 0, 0, 8};
  for (uint16_t r = 0; r < 3; ++r) feed(e, tx, contribution(job, o, r, ch));
  EXPECT_EQ(drops(e, DropReason::kNextHopUnresolved), 1u);
  auto got = collect(tx);
  ASSERT_EQ(got.size(), 2u);
  for (uint16_t r : {0, 2}) {
    ASSERT_EQ(got.count({0, 0, r}), 1u);
    const std::vector<uint8_t>& f = got.find({0, 0, r})->second.frame;
    EXPECT_EQ(std::memcmp(f.data(), gw, 6), 0) << "rank " << r;
    EXPECT_TRUE(icrc::verify_frame(std::span<const uint8_t>(f)));
    EXPECT_EQ(payload_of(got.find({0, 0, r})->second.pkt), expected(ReduceOp::kSum, 3, 0, 0, 8));
  }
  table.publish(1, gw2);
  tx.clear();
  feed(e, tx, contribution(job, o, 1, ch));  // rank 1 retransmits: answered from the shadow copy
  got = collect(tx);
  ASSERT_EQ(got.count({0, 0, 1}), 1u);
  const std::vector<uint8_t>& f = got.find({0, 0, 1})->second.frame;
  EXPECT_EQ(std::memcmp(f.data(), gw2, 6), 0);
  EXPECT_TRUE(icrc::verify_frame(std::span<const uint8_t>(f)));
  EXPECT_EQ(get(e.counters().retransmits_answered), 1u);
  EXPECT_EQ(get(e.counters().results_sent), 2u);
}

// The observer sees requests for our address (answered too), replies to it and announcements;
// every ARP frame is counted once (arp_replies, arp_learned or arp_ignored).
TEST(EngineTest, ArpThatTeachesAMacGoesToTheObserver) {
  struct Seen {
    int n = 0;
    uint16_t last_op = 0;
  } seen;
  EngineOptions o = appliance();
  o.arp_observer = [](const uint8_t* frame, uint32_t len, void* ctx) {
    auto* s = static_cast<Seen*>(ctx);
    ASSERT_GE(len, 42u);
    ++s->n;
    s->last_op = load_be16(frame + 20);
  };
  o.arp_observer_ctx = &seen;
  Engine e(o);
  MemoryTxSink tx;
  feed(e, tx, arp_request(kApplianceIp));  // request for us: answered and seen
  EXPECT_EQ(seen.n, 1);
  EXPECT_EQ(tx.frames().size(), 1u);
  feed(e, tx, arp_request(kApplianceIp, 2));  // a reply to us: seen
  EXPECT_EQ(seen.n, 2);
  EXPECT_EQ(seen.last_op, 2);
  feed(e, tx, arp_request(member(0).ip));  // an announcement (sender = target): seen
  EXPECT_EQ(seen.n, 3);
  feed(e, tx, arp_request(kApplianceIp + 1));  // a request for another host: ignored
  EXPECT_EQ(seen.n, 3);
  EXPECT_EQ(get(e.counters().arp_replies), 1u);
  EXPECT_EQ(get(e.counters().arp_learned), 2u);
  EXPECT_EQ(drops(e, DropReason::kArpIgnored), 1u);
  EXPECT_EQ(tx.frames().size(), 1u);
}

// --- Congestion notification --------------------------------------------------------------------

// CE-marked contributions are counted and summed as any other; their sender gets one RoCEv2 CNP
// (opcode 0x81, BECN, to its QP, ICRC right) per interval, however many arrive within it.
TEST(EngineTest, CeMarkedContributionsGetOneCnpPerIntervalAndStayExact) {
  EngineOptions o = appliance();
  o.cnp_interval_ticks = uint64_t{1} << 62;  // (steady-clock ns) one CNP per member in this test
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(4, Dtype::kFp32, ReduceOp::kSum, 2, 4);
  ASSERT_TRUE(e.add_job(job).ok());
  auto ce = [](std::vector<uint8_t> f) {
    f[wire::kIpOffset + 1] |= 0x03;  // CE (the ICRC masks the TOS byte)
    return f;
  };
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t s = 0; s < 3; ++s) {
    frames.push_back(ce(contribution(job, o, 1, {s, 0, 0, s * 8u, 8})));
    frames.push_back(contribution(job, o, 0, {s, 0, 0, s * 8u, 8}));
  }
  feed(e, tx, frames);
  EXPECT_EQ(get(e.counters().ce_marked), 3u);
  EXPECT_EQ(get(e.counters().cnps_sent), 1u);
  EXPECT_EQ(get(e.counters().slots_completed), 3u);
  // The same marks per job and per member (rank 1 sent them all).
  const std::vector<JobProgress> progress = e.progress();
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].ce_marked, 3u);
  EXPECT_EQ(progress[0].cnps_sent, 1u);
  EXPECT_EQ(e.member_ce_marked(job.job_id), (std::vector<uint64_t>{0, 3}));
  EXPECT_TRUE(e.member_ce_marked(job.job_id + 1).empty());
  size_t cnps = 0;
  for (const auto& f : tx.frames()) {
    if (f.len < wire::kBthOffset + 1 || f.data[wire::kBthOffset] != 0x81) {
      wire::ParsedPacket p;
      ASSERT_EQ(parse_sent(f.bytes(), &p), wire::ParseError::kOk);
      EXPECT_EQ(payload_of(p), expected(ReduceOp::kSum, 2, p.hdr.slot, 0, 8));
      continue;
    }
    ++cnps;
    const Member w = member(1);
    ASSERT_EQ(f.len, 74u);
    EXPECT_EQ(std::memcmp(f.data, w.mac, 6), 0);
    EXPECT_EQ(load_be32(f.data + wire::kIpOffset + 16), w.ip);
    EXPECT_EQ(load_be16(f.data + wire::kUdpOffset + 2), w.udp_port);
    EXPECT_EQ(load_be16(f.data + wire::kBthOffset + 2), 0xFFFF);
    EXPECT_EQ(f.data[wire::kBthOffset + 4], 0x40);  // BECN
    EXPECT_EQ(load_be24(f.data + wire::kBthOffset + 5), w.qpn);
    EXPECT_TRUE(icrc::verify(std::span<const uint8_t>(f.data + wire::kIpOffset, f.len - wire::kIpOffset)));
  }
  EXPECT_EQ(cnps, 1u);
  EXPECT_EQ(tx.frames().size(), 3u * 2 + 1);
}

// With the interval 0, CE is counted and nothing more is sent.
TEST(EngineTest, CeIsCountedWithoutCnpsWhenTheyAreOff) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec job = job_spec(5, Dtype::kFp32, ReduceOp::kSum, 2, 1);
  ASSERT_TRUE(e.add_job(job).ok());
  auto f = contribution(job, o, 0, {0, 0, 0, 0, 4});
  f[wire::kIpOffset + 1] |= 0x03;
  feed(e, tx, f);
  feed(e, tx, contribution(job, o, 1, {0, 0, 0, 0, 4}));
  EXPECT_EQ(get(e.counters().ce_marked), 1u);
  EXPECT_EQ(get(e.counters().cnps_sent), 0u);
  EXPECT_EQ(tx.frames().size(), 2u);  // the two results only
  EXPECT_EQ(e.member_ce_marked(job.job_id), (std::vector<uint64_t>{1, 0}));
}

// A job record reused by a job of a larger world gets per-member counters for every rank, from
// zero; the earlier job's marks are not carried over.
TEST(EngineTest, PerMemberCeCountsStartFromZeroForEachJobOfAnyWorld) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec small = job_spec(6, Dtype::kFp32, ReduceOp::kSum, 2, 1);
  ASSERT_TRUE(e.add_job(small).ok());
  auto f = contribution(small, o, 1, {0, 0, 0, 0, 4});
  f[wire::kIpOffset + 1] |= 0x03;
  feed(e, tx, f);
  EXPECT_EQ(e.member_ce_marked(small.job_id), (std::vector<uint64_t>{0, 1}));
  e.remove_job(small.job_id, wire::AbortReason::kNone, tx);
  EXPECT_TRUE(e.member_ce_marked(small.job_id).empty());
  const JobSpec large = job_spec(7, Dtype::kFp32, ReduceOp::kSum, 4, 1);
  ASSERT_TRUE(e.add_job(large).ok());
  EXPECT_EQ(e.member_ce_marked(large.job_id), (std::vector<uint64_t>{0, 0, 0, 0}));
  auto g = contribution(large, o, 3, {0, 0, 0, 0, 4});
  g[wire::kIpOffset + 1] |= 0x03;
  feed(e, tx, g);
  EXPECT_EQ(e.member_ce_marked(large.job_id), (std::vector<uint64_t>{0, 0, 0, 1}));
  EXPECT_EQ(e.progress()[0].ce_marked, 1u);
}

// ---- Loss notices (docs/protocol.md §7) ------------------------------------------------------

// The loss notices among the frames `tx` holds, fully checked as frames to `rank` (any rank): no
// payload, no chunk, the number they name in `round` (with its version bit) and kFlagNoticeSeq.
std::vector<wire::ParsedPacket> notices_in(const MemoryTxSink& tx, const JobSpec& job, const EngineOptions& o) {
  std::vector<wire::ParsedPacket> out;
  for (const auto& f : tx.frames()) {
    wire::ParsedPacket p;
    if (parse_sent(f.bytes(), &p) != wire::ParseError::kOk || p.hdr.type != wire::MsgType::kLossNotice) continue;
    EXPECT_LT(p.hdr.rank, job.members.size());
    if (p.hdr.rank >= job.members.size()) continue;
    check_sent_frame(f.bytes(), job, o, p.hdr.rank, wire::MsgType::kLossNotice);
    EXPECT_EQ(f.len, wire::frame_len(0)) << "a notice has no payload";
    EXPECT_EQ(p.payload_len, 0u);
    EXPECT_EQ(p.hdr.flags, wire::kFlagNoticeSeq | (p.hdr.round & 1));
    EXPECT_LE(p.hdr.round, wire::kTxSeqMask);
    EXPECT_EQ(p.hdr.slot, 0u);
    EXPECT_EQ(p.hdr.coll_seq, 0u);
    EXPECT_EQ(p.hdr.elem_count, 0u);
    EXPECT_EQ(p.hdr.elem_offset, 0u);
    EXPECT_EQ(p.hdr.status, 0);
    EXPECT_EQ(p.src_qp, o.qpn) << "from the core the contribution went to";
    out.push_back(p);
  }
  return out;
}

// Chunk j of a job of `slots` slots: slot j % S, round j / S, 4 elements at offset 4j.
Chunk chunk_of(uint32_t j, uint16_t slots) {
  return {static_cast<uint16_t>(j % slots), j / slots, 0, uint64_t{j} * 4, 4};
}

// 3 ranks, 8 slots: each rank numbers its first transmissions 0, 1, 2, ...; rank 1's number 1
// (chunk 1) is lost. Rank 1's chunk 2 (number 2) draws one notice, to rank 1 alone, naming number
// 1; nothing else draws one: ranks 0 and 2 send in sequence, and rank 1's resend of chunk 1
// (number 1 again: behind) completes the round without another.
TEST(EngineTest, LossNoticeNamesTheTransmissionARankSkippedToThatRankAlone) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(31, Dtype::kFp32, ReduceOp::kSum, 3, 8);
  job.loss_notices = true;
  ASSERT_TRUE(e.add_job(job).ok());
  for (uint32_t j = 0; j < 6; ++j) {
    for (uint16_t r = 0; r < 3; ++r) {
      if (r == 1 && j == 1) continue;
      tx.clear();
      feed(e, tx, contribution(job, o, r, chunk_of(j, 8), j));
      const auto n = notices_in(tx, job, o);
      if (r == 1 && j == 2) {
        ASSERT_EQ(n.size(), 1u) << "rank 1's number 2 came after its number 0";
        EXPECT_EQ(n[0].hdr.rank, 1u);
        EXPECT_EQ(n[0].hdr.round, 1u);
        EXPECT_EQ(n[0].dst_ip, job.members[1].ip);
        EXPECT_EQ(n[0].dest_qp, job.members[1].qpn);
      } else {
        EXPECT_TRUE(n.empty()) << "rank " << r << " chunk " << j;
      }
    }
  }
  EXPECT_EQ(get(e.counters().loss_notices_sent), 1u);
  const auto p = e.progress();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].loss_notices, 1u);
  tx.clear();
  feed(e, tx, contribution(job, o, 1, chunk_of(1, 8), 1));  // the resend the notice asks for
  const auto results = collect(tx);
  EXPECT_EQ(results.size(), 3u) << "chunk 1 completed, its result to every rank";
  for (const auto& kv : results) EXPECT_EQ(payload_of(kv.second.pkt), expected(ReduceOp::kSum, 3, 1, 0, 4));
  EXPECT_TRUE(notices_in(tx, job, o).empty());
  tx.clear();
  feed(e, tx, contribution(job, o, 1, chunk_of(6, 8), 6));  // and rank 1 goes on where it was
  EXPECT_TRUE(notices_in(tx, job, o).empty());
  EXPECT_EQ(total_drops(e), 0u);
}

// Numbers behind the expected one are retransmissions: no notice, and the expectation stays. A
// gap names each number skipped, at most 16 (a larger burst is left to the workers' timers).
// Numbers wrap at 2^15 (2^15 - 1 then 0 is in order); ahead means less than 2^14 ahead.
TEST(EngineTest, LossNoticesForEachSkippedNumberBoundedAndModulo2To15) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(32, Dtype::kFp32, ReduceOp::kSum, 2, 64);
  job.loss_notices = true;
  ASSERT_TRUE(e.add_job(job).ok());
  const auto names = [&] {
    std::vector<uint32_t> v;
    for (const auto& n : notices_in(tx, job, o)) v.push_back(n.hdr.round);
    tx.clear();
    return v;
  };
  for (uint32_t s : {0u, 1u, 2u}) feed(e, tx, contribution(job, o, 0, chunk_of(s, 64), s));
  EXPECT_TRUE(names().empty());
  feed(e, tx, contribution(job, o, 0, chunk_of(1, 64), 1));  // a retransmission
  EXPECT_TRUE(names().empty());
  feed(e, tx, contribution(job, o, 0, chunk_of(6, 64), 6));  // 3, 4 and 5 lost
  EXPECT_EQ(names(), (std::vector<uint32_t>{3, 4, 5}));
  feed(e, tx, contribution(job, o, 0, chunk_of(7, 64), 7));
  EXPECT_TRUE(names().empty()) << "the expectation moved past the gap";
  feed(e, tx, contribution(job, o, 0, chunk_of(40, 64), 40));  // 8..39 lost: the first 16 named
  std::vector<uint32_t> want;
  for (uint32_t s = 8; s < 24; ++s) want.push_back(s);
  EXPECT_EQ(names(), want);
  // Rank 1 up to the top of the number space in three gaps (16 notices each), then across it: 0
  // and 1 are in order. 2^14 ahead counts as behind (no notice, no move).
  for (uint32_t s : {16000u, 32000u, wire::kTxSeqMask}) {
    feed(e, tx, contribution(job, o, 1, chunk_of(s % 64, 64), s));
    EXPECT_EQ(names().size(), 16u) << s;
  }
  for (uint32_t s : {0u, 1u}) feed(e, tx, contribution(job, o, 1, chunk_of(s, 64), s));
  EXPECT_TRUE(names().empty()) << "32767, then 0";
  feed(e, tx, contribution(job, o, 1, chunk_of(9, 64), 2 + wire::kTxSeqHalf));
  EXPECT_TRUE(names().empty());
  feed(e, tx, contribution(job, o, 1, chunk_of(10, 64), 3));
  EXPECT_EQ(names(), (std::vector<uint32_t>{2}));
  EXPECT_EQ(get(e.counters().loss_notices_sent), 3u + 16u + 3u * 16u + 1u);
}

// Numbered contributions draw no notice from a job that was not granted them.
TEST(EngineTest, NoLossNoticesWithoutTheGrant) {
  const EngineOptions o = appliance();
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(33, Dtype::kFp32, ReduceOp::kSum, 3, 8);
  ASSERT_TRUE(e.add_job(job).ok());
  for (uint32_t j = 0; j < 8; ++j) {
    for (uint16_t r = 0; r < 3; ++r) {
      if (r != 1 || j != 0) feed(e, tx, contribution(job, o, r, chunk_of(j, 8), j));
    }
  }
  EXPECT_TRUE(notices_in(tx, job, o).empty());
  EXPECT_EQ(get(e.counters().loss_notices_sent), 0u);
  EXPECT_EQ(get(e.counters().contributions), 3u * 8 - 1);
}

// Each core follows the numbers a rank gives its own transmissions to it: core 1 of two (slots 1,
// 3, 5, 7 of 8) sees rank 1's numbers 0, 1 and 3 (number 2, chunk 5, lost) and names 2, from its
// own QPN; rank 0's numbers run on as they should.
TEST(EngineTest, LossNoticesFollowEachCoresOwnNumbers) {
  const EngineOptions o = appliance(1, 2);
  Engine e(o);
  MemoryTxSink tx;
  JobSpec job = job_spec(34, Dtype::kFp32, ReduceOp::kSum, 3, 8);
  job.loss_notices = true;
  ASSERT_TRUE(e.add_job(job).ok());
  uint32_t seq = 0;
  for (uint32_t j : {1u, 3u, 5u, 7u}) {
    for (uint16_t r = 0; r < 3; ++r) {
      if (r != 1 || j != 5) feed(e, tx, contribution(job, o, r, chunk_of(j, 8), seq));
    }
    ++seq;
  }
  const auto n = notices_in(tx, job, o);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].hdr.rank, 1u);
  EXPECT_EQ(n[0].hdr.round, 2u);
  EXPECT_EQ(get(e.counters().loss_notices_sent), 1u);
  EXPECT_EQ(total_drops(e), 0u);
}

// A resend that finds the open round holding the rank's contribution (rank 0's stall probe while
// rank 1 is late) draws a duplicate notice to rank 0 alone, from the core, echoing the chunk, with
// no payload; the round still completes once, when rank 1's contribution comes, and a resend
// after that draws the stored result, not a notice. Without the grant the resend draws nothing.
TEST(EngineTest, DuplicateNoticeTellsAResenderTheOpenRoundHoldsItsContribution) {
  for (const bool granted : {true, false}) {
    SCOPED_TRACE(granted ? "notices granted" : "no grant");
    const EngineOptions o = appliance();
    Engine e(o);
    MemoryTxSink tx;
    JobSpec job = job_spec(35, Dtype::kFp32, ReduceOp::kSum, 3, 8);
    job.loss_notices = granted;
    ASSERT_TRUE(e.add_job(job).ok());
    const Chunk c = chunk_of(11, 8);  // slot 3, round 1: rounds of slot 3 run 0, then 1
    for (uint16_t r = 0; r < 3; ++r) feed(e, tx, contribution(job, o, r, chunk_of(3, 8), 0));
    feed(e, tx, contribution(job, o, 0, c, 1));
    feed(e, tx, contribution(job, o, 2, c, 1));
    tx.clear();
    feed(e, tx, contribution(job, o, 0, c, 1));  // rank 0 resends: the round waits for rank 1
    EXPECT_EQ(get(e.counters().duplicates), 1u);
    if (granted) {
      ASSERT_EQ(tx.frames().size(), 1u);
      const auto p = check_sent_frame(tx.frames()[0].bytes(), job, o, 0, wire::MsgType::kDuplicateNotice);
      EXPECT_EQ(tx.frames()[0].len, wire::frame_len(0)) << "a notice has no payload";
      EXPECT_EQ(p.payload_len, 0u);
      EXPECT_EQ(p.hdr.slot, c.slot);
      EXPECT_EQ(p.hdr.round, c.round);
      EXPECT_EQ(p.hdr.flags, c.round & 1) << "the version bit, no transmission number";
      EXPECT_EQ(p.hdr.status, 0);
      EXPECT_EQ(p.hdr.coll_seq, c.coll_seq);
      EXPECT_EQ(p.hdr.elem_offset, c.offset);
      EXPECT_EQ(p.hdr.elem_count, c.count);
    } else {
      EXPECT_TRUE(tx.frames().empty());
    }
    EXPECT_EQ(get(e.counters().duplicate_notices_sent), granted ? 1u : 0u);
    tx.clear();
    feed(e, tx, contribution(job, o, 1, c, 1));  // the late rank: the round completes
    const auto results = collect(tx);
    ASSERT_EQ(results.size(), 3u);
    for (const auto& kv : results)
      EXPECT_EQ(payload_of(kv.second.pkt), expected(ReduceOp::kSum, 3, c.slot, c.round, 4));
    tx.clear();
    feed(e, tx, contribution(job, o, 0, c, 1));  // a resend now: the stored result, to rank 0
    ASSERT_EQ(tx.frames().size(), 1u);
    check_sent_frame(tx.frames()[0].bytes(), job, o, 0, wire::MsgType::kResult);
    EXPECT_EQ(get(e.counters().retransmits_answered), 1u);
    EXPECT_EQ(get(e.counters().duplicate_notices_sent), granted ? 1u : 0u);
    EXPECT_EQ(get(e.counters().loss_notices_sent), 0u);
    const auto progress = e.progress();
    ASSERT_EQ(progress.size(), 1u);
    EXPECT_EQ(progress[0].duplicate_notices, granted ? 1u : 0u) << "the job's own count";
    EXPECT_EQ(progress[0].loss_notices, 0u);
    EXPECT_EQ(total_drops(e), 0u);
  }
}

// ---- UDP checksums (EngineOptions::udp_checksum; docs/protocol.md §2) ------------------------

// With udp_checksum on, every other kind of frame the engine sends carries the checksum RFC 768
// defines too (check_sent_frame verifies it from the definition; results to each member:
// ReplicatedResultsMatchFramesBuiltFromScratchAtEveryLength): a multicast result and the unicast
// answer to a rank that asks again; a loss notice; a CNP.
TEST(EngineTest, EveryFrameSentCarriesItsUdpChecksumWhenAsked) {
  EngineOptions o = appliance();
  o.udp_checksum = true;
  o.cnp_interval_ticks = uint64_t{1} << 62;
  Engine e(o);
  MemoryTxSink tx;
  const JobSpec mc = multicast_job_spec(5, Dtype::kFp32, ReduceOp::kSum, 2, 1);
  ASSERT_TRUE(e.add_job(mc).ok());
  feed(e, tx, {contribution(mc, o, 0, {0, 0, 1, 0, 33}), contribution(mc, o, 1, {0, 0, 1, 0, 33})});
  ASSERT_EQ(tx.frames().size(), 1u);
  check_sent_frame(tx.frames()[0].bytes(), mc, o, wire::kRankMulticast, wire::MsgType::kResult);
  tx.clear();
  feed(e, tx, contribution(mc, o, 1, {0, 0, 1, 0, 33}));  // asks again: the stored result, unicast
  ASSERT_EQ(tx.frames().size(), 1u);
  check_sent_frame(tx.frames()[0].bytes(), mc, o, 1, wire::MsgType::kResult);

  JobSpec lossy = job_spec(31, Dtype::kFp32, ReduceOp::kSum, 2, 8);
  lossy.loss_notices = true;
  ASSERT_TRUE(e.add_job(lossy).ok());
  feed(e, tx, contribution(lossy, o, 0, chunk_of(1, 8)));
  tx.clear();
  for (uint32_t j : {0u, 2u, 3u, 4u}) feed(e, tx, contribution(lossy, o, 1, chunk_of(j, 8), j));
  EXPECT_EQ(notices_in(tx, lossy, o).size(), 1u) << "rank 1's number 2 came after its number 0";

  tx.clear();
  auto ce = contribution(lossy, o, 0, chunk_of(4, 8));  // completes chunk 4, marked CE
  ce[wire::kIpOffset + 1] |= 0x03;
  feed(e, tx, ce);
  ASSERT_EQ(get(e.counters().cnps_sent), 1u);
  ASSERT_EQ(tx.frames().size(), 3u) << "chunk 4's result to both ranks, and the CNP";
  for (const auto& f : tx.frames())
    EXPECT_TRUE(udp_checksum_ok(f.bytes())) << "opcode " << int{f.data[wire::kBthOffset]};
}

}  // namespace
}  // namespace sumcast::engine
