// The per-core aggregation engine (engine.h): job table, slot versions, the packet loop.
//
// Memory of one job on one core (one allocation from EngineOptions::allocate, 64-byte aligned):
//   members   world x Member
//   dest_crc  world x uint32: CRC of the result headers to each member xor those to member 0
//   opened_at local_slots x 2 x uint64: clock ticks when each slot version's round opened
//   slots     local_slots x slot_stride: two Version records (48 bytes) then the two
//             contributor bitmaps (2 x bitmap_words x 8 bytes); one cache line up to 64 ranks
//   acc       local_slots x 2 x acc_stride: the accumulators, parity-interleaved per slot
//   shadow    local_slots x 2 x shadow_stride: finished results in wire dtype, only for dtypes
//             whose accumulator type differs (fp16, bf16); for fp32/int32/fp64 the accumulator
//             is the finished result and doubles as the shadow copy.
//   stage     deterministic jobs only: local_slots x world x stage_stride, each rank's payload
//             (wire format) of the slot's open round, summed in rank order at completion. One
//             area per slot, not per version: a version opens only once the other is not open.
//   last_cnp  world x uint64: clock ticks of the last CNP sent to each member (0: none)
//   next_seq  jobs granted loss notices only: world x uint16, the number each member's next first
//             transmission to this core carries (docs/protocol.md §7)
// A slot's local index is slot / core_count (this core owns slot % core_count == core_index).
#include "sumcast/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "sumcast/counter.h"
#include "sumcast/endian.h"
#include "sumcast/icrc/combine.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/kernels/kernels.h"

namespace sumcast::engine {

namespace crc = icrc::crc;

// Structural drop reasons are ParseError values one-to-one.
#define SUMCAST_X(name, str)                                                                    \
  static_assert(static_cast<int>(DropReason::name) == static_cast<int>(wire::ParseError::name), \
                "DropReason must mirror ParseError");
SUMCAST_PARSE_ERRORS(SUMCAST_X)
#undef SUMCAST_X

const char* drop_reason_name(DropReason r) {
  static constexpr const char* kNames[] = {
#define SUMCAST_X(name, str) str,
      SUMCAST_DROP_REASONS(SUMCAST_X)
#undef SUMCAST_X
  };
  const auto i = static_cast<size_t>(r);
  return i < kDropReasonCount ? kNames[i] : "?";
}

namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kArpLen = 28;
constexpr size_t kMinEthFrameLen = 60;  // without FCS
constexpr uint16_t kArpHtypeEthernet = 1;
constexpr uint16_t kArpOpRequest = 1;
constexpr uint16_t kArpOpReply = 2;
constexpr uint32_t kMaxWorld = wire::kRankMulticast;
constexpr uint8_t kEcnMask = 0x03;  // the ECN field of the IPv4 TOS byte
constexpr uint8_t kEcnCe = 0x03;    // congestion experienced
constexpr size_t kCnpLen = wire::kBthOffset + wire::kCnpRoceLen;

constexpr size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
// Loss notices for one gap in a member's transmission numbers at most (more were lost at once:
// the worker's grace and timers repair the rest).
constexpr uint32_t kMaxNoticesPerGap = 16;

enum class VersionState : uint8_t {
  kIdle = 0,      // never held a round (counts as complete for opening the next, has no result)
  kOpen = 1,      // collecting contributions
  kComplete = 2,  // all ranks contributed; the result is kept for retransmissions
};

// One version (parity) of a slot.
struct Version {
  uint32_t round;
  uint32_t count;  // contributors so far
  uint32_t coll_seq;
  uint16_t elem_count;
  VersionState state;
  uint8_t reserved;
  uint64_t elem_offset;
};
static_assert(sizeof(Version) == 24);
constexpr size_t kSlotHeaderLen = 2 * sizeof(Version);

struct Job {
  bool active = false;
  uint32_t index = 0;  // in the job array and the progress array
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  uint32_t world = 0;
  uint32_t slot_count = 0;
  uint32_t max_payload = 0;  // bytes
  uint32_t bitmap_words = 0;
  uint32_t local_slots = 0;
  size_t slot_stride = 0;
  size_t acc_stride = 0;
  size_t shadow_stride = 0;
  Member* members = nullptr;
  uint32_t* dest_crc = nullptr;   // per member: header CRC xor member 0's (see replicate())
  uint64_t* last_cnp = nullptr;   // per member: clock ticks of the last CNP sent to it (0: none)
  uint64_t* opened_at = nullptr;  // [local * 2 + parity]: clock ticks when that round opened
  uint32_t shift_bytes = 0;       // crc::shift_for(shift_bytes) == shift (cache: one length per job)
  uint32_t shift = 0x80000000u;   // x^0
  uint8_t* slots = nullptr;
  uint8_t* acc = nullptr;
  uint8_t* shadow = nullptr;     // nullptr: the accumulator is the result
  bool deterministic = false;    // JobSpec::deterministic: payloads staged, summed in rank order
  bool notices = false;          // JobSpec::loss_notices
  uint16_t* next_seq = nullptr;  // per member: the number its next first transmission to this core carries
  size_t stage_stride = 0;       // bytes per rank's staged payload
  uint8_t* stage = nullptr;      // deterministic only: [local][rank] payloads of the open round
  kernels::LoadFn load = nullptr;
  kernels::AccumulateFn accumulate = nullptr;
  kernels::FinishFn finish = nullptr;
  bool multicast = false;
  uint32_t mcast_ip = 0;
  uint8_t mcast_mac[6] = {};
  void* memory = nullptr;
  // Per member: CE-marked contributions (the ProgressEntry's array, which outlives the job).
  std::atomic<uint64_t>* member_ce = nullptr;
  // The headers of a result to member 0, as wire::write_frame_headers writes them for a payload
  // of 0 bytes: replicate() copies them and sets the lengths and the chunk's fields.
  alignas(16) uint8_t result_headers[wire::kPayloadOffset] = {};

  Version* versions(uint32_t local) const { return reinterpret_cast<Version*>(slots + local * slot_stride); }
  uint64_t* bitmap(uint32_t local, unsigned parity) const {
    return reinterpret_cast<uint64_t*>(slots + local * slot_stride + kSlotHeaderLen) + size_t{parity} * bitmap_words;
  }
  uint8_t* accumulator(uint32_t local, unsigned parity) const {
    return acc + (size_t{local} * 2 + parity) * acc_stride;
  }
  uint8_t* staged(uint32_t local, uint32_t rank) const { return stage + (size_t{local} * world + rank) * stage_stride; }
  uint8_t* result(uint32_t local, unsigned parity) const {
    return shadow != nullptr ? shadow + (size_t{local} * 2 + parity) * shadow_stride : accumulator(local, parity);
  }
};

// Progress of one job record, readable from any thread.
struct ProgressEntry {
  std::atomic<uint64_t> key{0};  // kActiveBit | job_id while the record holds a job, else 0
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> opened{0};             // rounds opened; opened - completed = rounds waiting for ranks
  std::atomic<uint64_t> group_frames{0};       // results and aborts sent to the job's group
  std::atomic<uint64_t> unicast_answers{0};    // stored results re-sent to one member
  std::atomic<uint64_t> ce_marked{0};          // contributions that arrived marked CE
  std::atomic<uint64_t> cnps_sent{0};          // CNPs sent for them
  std::atomic<uint64_t> loss_notices{0};       // loss notices sent to its members
  std::atomic<uint64_t> duplicate_notices{0};  // duplicate notices sent to its members
  // Per member: CE-marked contributions, `members` entries of `member_ce` (the job's world). The
  // array only grows (a larger world gets a new one) and lives as long as the engine, so a reader
  // on another thread never holds freed memory; `member_cap` is the lcore's own.
  std::atomic<std::atomic<uint64_t>*> member_ce{nullptr};
  std::atomic<uint32_t> members{0};
  uint32_t member_cap = 0;
};
constexpr uint64_t kActiveBit = uint64_t{1} << 32;

void* default_allocate(size_t bytes, void* /*ctx*/) {
  return ::operator new (bytes, std::align_val_t{kCacheLine}, std::nothrow);
}
void default_release(void* p, void* /*ctx*/) { ::operator delete (p, std::align_val_t{kCacheLine}); }

uint64_t steady_ns(void* /*ctx*/) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

enum class Kind : uint8_t { kDrop, kArp, kContribution };

// One frame between the stateless checks and the stateful slot update.
struct Pending {
  Kind kind;
  DropReason reason;
  uint32_t local;
  Job* job;
  const uint8_t* frame;
  uint32_t len;
  wire::ParsedPacket pkt;
};

// Bytes of a frame's ICRC input that precede the payload, as an IPv4 span for icrc::compute: the
// IPv4 | UDP | BTH | DETH | Sumcast headers, then 4 bytes standing for the ICRC field.
constexpr size_t kHeaderIcrcSpan = wire::kPayloadOffset - wire::kIpOffset + wire::kIcrcLen;

// CRC-32 (as crc32()) of the masked headers of `frame`: its ICRC is this combined with the CRC of
// the payload and pad (sumcast/icrc/combine.h).
uint32_t header_crc(const uint8_t* frame) {
  return icrc::compute(std::span<const uint8_t>(frame + wire::kIpOffset, kHeaderIcrcSpan));
}

inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// The fields of a result frame (as wire::write_frame_headers writes it) that differ between two
// members of a job; everything else, and the payload, is the same for all of them.
constexpr size_t kDstIpAt = wire::kIpOffset + 16;
constexpr size_t kIpChecksumAt = wire::kIpOffset + 10;
constexpr size_t kDstPortAt = wire::kUdpOffset + 2;
constexpr size_t kDestQpAt = wire::kBthOffset + 5;
constexpr size_t kRankAt = wire::kSumcastOffset + 8;

// Rewrites a copy of another member's frame for member `m` of rank `rank` (ICRC excepted).
inline void readdress(uint8_t* frame, const Member& m, uint16_t rank) {
  std::memcpy(frame, m.mac, 6);
  store_be32(frame + kDstIpAt, m.ip);
  store_be16(frame + kIpChecksumAt, wire::ipv4_header_checksum(frame + wire::kIpOffset));
  store_be16(frame + kDstPortAt, m.udp_port);
  store_be24(frame + kDestQpAt, m.qpn);
  store_be16(frame + kRankAt, rank);
}

// The UDP checksum of `frame`, a copy of `prev` that readdress() rewrote and whose ICRC changed:
// updated from prev's over the bytes readdress and the ICRC may have changed (RFC 1624), each at
// an even offset from the UDP header (the destination address is in the pseudo-header).
constexpr size_t kUdpChecksumAt = wire::kUdpOffset + 6;
inline void update_udp_checksum(const uint8_t* prev, uint8_t* frame, size_t flen) {
  uint16_t c = load_be16(prev + kUdpChecksumAt);
  c = wire::udp_checksum_update(c, prev + kDstIpAt, frame + kDstIpAt, 4);
  c = wire::udp_checksum_update(c, prev + kDstPortAt, frame + kDstPortAt, 2);
  c = wire::udp_checksum_update(c, prev + kDestQpAt - 1, frame + kDestQpAt - 1, 4);
  c = wire::udp_checksum_update(c, prev + kRankAt, frame + kRankAt, 2);
  c = wire::udp_checksum_update(c, prev + flen - wire::kIcrcLen, frame + flen - wire::kIcrcLen, wire::kIcrcLen);
  store_be16(frame + kUdpChecksumAt, c);
}

// What wire::write_frame_headers(frame, addressing to member 0, h, len) writes, from the job's
// template: the lengths, PadCnt, IPv4 checksum and Sumcast header are the parts that vary.
// tests/engine's ReplicatedResultsMatchFramesBuiltFromScratchAtEveryLength checks the equality.
inline void write_result_headers_from(const uint8_t* tmpl, const wire::SumcastHeader& h, size_t len, uint8_t* frame) {
  const size_t rlen = wire::roce_len(len);
  std::memcpy(frame, tmpl, wire::kPayloadOffset);
  store_be16(frame + wire::kIpOffset + 2, static_cast<uint16_t>(wire::kIpv4HeaderLen + wire::kUdpHeaderLen + rlen));
  store_be16(frame + kIpChecksumAt, wire::ipv4_header_checksum(frame + wire::kIpOffset));
  store_be16(frame + wire::kUdpOffset + 4, static_cast<uint16_t>(wire::kUdpHeaderLen + rlen));
  const auto pad = static_cast<uint8_t>((4 - (len & 3)) & 3);
  frame[wire::kBthOffset + 1] = static_cast<uint8_t>((pad << 4) | (tmpl[wire::kBthOffset + 1] & 0x0F));
  wire::encode_sumcast_header(h, frame + wire::kSumcastOffset);
}

bool same_chunk(const Version& v, const wire::SumcastHeader& h) {
  return v.coll_seq == h.coll_seq && v.elem_offset == h.elem_offset && v.elem_count == h.elem_count;
}

}  // namespace

struct Engine::Impl {
  explicit Impl(const EngineOptions& o);
  ~Impl();

  // Job table (open addressing, linear probing, backward-shift deletion).
  uint32_t home(uint32_t job_id) const { return (job_id * 0x9E3779B1u) >> table_shift_; }
  Job* find(uint32_t job_id);
  void table_insert(uint32_t index);
  void table_erase(uint32_t job_id);
  void free_job(Job& j);

  void drop(DropReason r) { bump(counters.drops[static_cast<size_t>(r)]); }
  bool mac_accepted(const uint8_t* mac) const;
  // icrc_ok: the frame's ICRC checked out (or needs no check); see process_burst.
  void classify(const PacketView& f, bool icrc_ok, Pending& c);
  // A frame whose IPv4 destination field (at its fixed offset, as parse_frame reads it) is not this appliance's is
  // dropped by classify before the ICRC's result is read (a parse error or not_for_us), so it gets no ICRC pass: a
  // flood of frames for other hosts costs a header read each, not a CRC (perf/engine's not_for_us row: 14 ns a frame
  // against 52 with the check, 1 KiB payloads). The drop-reason test's "other IPv4" frames, with a good and a stale
  // ICRC, hold classify to that order.
  bool icrc_ok(const PacketView& f) const {
    if (!opt.verify_icrc || f.icrc_verified) return true;
    if (f.len < wire::kIpOffset + wire::kIpv4HeaderLen || load_be32(f.data + wire::kIpDstOffset) != opt.local_ip)
      return false;
    return icrc::verify_frame(std::span<const uint8_t>(f.data, f.len));
  }
  void apply(Pending& c, TxSink& tx);
  void contribute(Pending& c, TxSink& tx);
  void notice_loss(Job& j, const Pending& c, TxSink& tx);
  void notice_duplicate(const Job& j, const wire::SumcastHeader& h, TxSink& tx);
  void complete(Job& j, uint32_t local, uint16_t slot, unsigned parity, Version& v, TxSink& tx);
  static void sum_staged(const Job& j, uint32_t local, unsigned parity, size_t elems);
  wire::Addressing addressing(const Job& j, uint16_t rank) const;
  bool emit(const Job& j, wire::SumcastHeader h, const uint8_t* payload, size_t len, uint16_t rank, TxSink& tx);
  uint64_t replicate(Job& j, wire::SumcastHeader h, const uint8_t* payload, size_t len, TxSink& tx);
  static void write_result_headers(const Job& j, const wire::SumcastHeader& h, size_t len, uint8_t* frame) {
    write_result_headers_from(j.result_headers, h, len, frame);
  }
  void answer_arp(const uint8_t* frame, uint32_t len, TxSink& tx);
  void congested(const Pending& c, TxSink& tx);
  // The MAC a unicast frame to `m` goes to: its next hop's, or the registered one without a
  // next-hop table. false (nothing written) while the next hop is unresolved.
  bool dest_mac(const Member& m, uint8_t out[6]) const {
    if (m.next_hop == kNoNextHop || opt.next_hops == nullptr) {
      std::memcpy(out, m.mac, 6);
      return true;
    }
    return opt.next_hops->mac(m.next_hop, out);
  }
  // A tx buffer for a unicast frame to `m`, with the MAC it goes to in `mac`; nullptr (the drop
  // counted: next_hop_unresolved or tx_no_buffer) when there is none.
  uint8_t* acquire_for(const Member& m, uint8_t mac[6], TxSink& tx) {
    if (!dest_mac(m, mac)) {
      drop(DropReason::kNextHopUnresolved);
      return nullptr;
    }
    uint8_t* buf = tx.acquire();
    if (buf == nullptr) drop(DropReason::kTxNoBuffer);
    return buf;
  }

  EngineOptions opt;  // as given, with the clock resolved (nullptr: steady_ns at 1e9 Hz)
  void* (*allocate)(size_t bytes, void* ctx);
  void (*release)(void* p, void* ctx);
  uint32_t cores;
  uint64_t now = 0;  // clock ticks at the start of the current burst
  CoreCounters counters;
  const kernels::KernelTable* kt;
  std::unique_ptr<Job[]> jobs;
  std::unique_ptr<ProgressEntry[]> progress;
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> member_ce_arrays;  // every ProgressEntry::member_ce
  uint32_t active_jobs = 0;
  std::vector<int32_t> table;  // job index, or -1 when empty
  uint32_t table_mask_ = 0;
  uint32_t table_shift_ = 0;
  Job* last_ = nullptr;  // the job of the previous lookup (bursts usually carry one job)
};

Engine::Impl::Impl(const EngineOptions& o)
    : opt(o),
      allocate(o.allocate != nullptr ? o.allocate : default_allocate),
      release(o.allocate != nullptr ? o.release : default_release),
      cores(std::max<uint32_t>(o.core_count, 1)),
      kt(&kernels::active_kernels()),
      jobs(new Job[std::max<uint32_t>(o.max_jobs, 1)]),
      progress(new ProgressEntry[std::max<uint32_t>(o.max_jobs, 1)]) {
  uint32_t bits = 3;
  while ((uint64_t{1} << bits) < uint64_t{opt.max_jobs} * 2) ++bits;
  table.assign(size_t{1} << bits, -1);
  table_mask_ = (uint32_t{1} << bits) - 1;
  table_shift_ = 32 - bits;
  for (uint32_t i = 0; i < std::max<uint32_t>(opt.max_jobs, 1); ++i) jobs[i].index = i;
  if (opt.clock == nullptr) {
    opt.clock = steady_ns;
    opt.clock_ctx = nullptr;
    opt.clock_hz = 1000000000;
  }
}

Engine::Impl::~Impl() {
  for (uint32_t i = 0; i < std::max<uint32_t>(opt.max_jobs, 1); ++i) {
    if (jobs[i].active) free_job(jobs[i]);
  }
}

Job* Engine::Impl::find(uint32_t job_id) {
  if (last_ != nullptr && last_->job_id == job_id) return last_;
  for (uint32_t i = home(job_id);; i = (i + 1) & table_mask_) {
    const int32_t e = table[i];
    if (e < 0) return nullptr;
    if (jobs[e].job_id == job_id) return last_ = &jobs[e];
  }
}

void Engine::Impl::table_insert(uint32_t index) {
  uint32_t i = home(jobs[index].job_id);
  while (table[i] >= 0) i = (i + 1) & table_mask_;
  table[i] = static_cast<int32_t>(index);
}

void Engine::Impl::table_erase(uint32_t job_id) {
  uint32_t i = home(job_id);
  while (table[i] >= 0 && jobs[table[i]].job_id != job_id) i = (i + 1) & table_mask_;
  if (table[i] < 0) return;
  table[i] = -1;
  // Shift later entries of the cluster back so that every entry stays reachable from its home.
  for (uint32_t j = (i + 1) & table_mask_; table[j] >= 0; j = (j + 1) & table_mask_) {
    const uint32_t h = home(jobs[table[j]].job_id);
    const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (!stays) {
      table[i] = table[j];
      table[j] = -1;
      i = j;
    }
  }
}

void Engine::Impl::free_job(Job& j) {
  if (release != nullptr) release(j.memory, opt.alloc_ctx);
  const uint32_t index = j.index;
  j = Job{};
  j.index = index;
}

bool Engine::Impl::mac_accepted(const uint8_t* mac) const {
  if (std::memcmp(mac, opt.local_mac, 6) == 0) return true;
  // IPv4 multicast MAC 01:00:5e:00:00:00/25 (the IPv4 check below still applies).
  return mac[0] == 0x01 && mac[1] == 0x00 && mac[2] == 0x5E && (mac[3] & 0x80) == 0;
}

// Stateless checks: parse, addressing, ICRC (its result computed by the caller: process_burst
// checks a quad's four ICRCs back to back), job, member, slot. Leaves slot state alone, so a quad
// can be classified before any of it is applied.
void Engine::Impl::classify(const PacketView& f, bool icrc_ok, Pending& c) {
  c.frame = f.data;
  c.len = f.len;
  if (f.len >= wire::kEthHeaderLen && load_be16(f.data + 12) == wire::kEtherTypeArp) {
    c.kind = Kind::kArp;
    return;
  }
  c.kind = Kind::kDrop;
  const wire::ParseError e = wire::parse_frame(std::span<const uint8_t>(f.data, f.len), &c.pkt);
  if (e != wire::ParseError::kOk) {
    c.reason = static_cast<DropReason>(e);
    return;
  }
  const wire::ParsedPacket& p = c.pkt;
  const wire::SumcastHeader& h = p.hdr;
  if (p.dst_ip != opt.local_ip || !mac_accepted(p.dst_mac)) {
    c.reason = DropReason::kNotForUs;
    return;
  }
  if (!icrc_ok) {
    c.reason = DropReason::kBadIcrc;
    return;
  }
  if (h.type != wire::MsgType::kContribution) {
    c.reason = DropReason::kNotContribution;
    return;
  }
  Job* j = find(h.job_id);
  if (j == nullptr) {
    c.reason = DropReason::kUnknownJob;
    return;
  }
  if (p.qkey != j->qkey) {
    c.reason = DropReason::kBadQkey;
    return;
  }
  if (h.rank >= j->world) {
    c.reason = DropReason::kBadRank;
    return;
  }
  const Member& m = j->members[h.rank];
  // Source address and QPN identify the member; the UDP source port does not (RoCE NICs pick it
  // per flow for ECMP entropy; results still go to the registered udp_port). §6.
  if (p.src_ip != m.ip || p.src_qp != m.qpn) {
    c.reason = DropReason::kForeignSource;
    return;
  }
  if (h.slot >= j->slot_count) {
    c.reason = DropReason::kBadSlot;
    return;
  }
  const uint32_t local = cores == 1 ? h.slot : h.slot / cores;
  if (cores != 1 && h.slot - local * cores != opt.core_index) {
    c.reason = DropReason::kWrongCore;
    return;
  }
  if (h.dtype != j->dtype) {
    c.reason = DropReason::kDtypeMismatch;
    return;
  }
  if (h.op != j->op) {
    c.reason = DropReason::kOpMismatch;
    return;
  }
  if (p.payload_len > j->max_payload) {
    c.reason = DropReason::kTooLarge;
    return;
  }
  if ((h.flags & wire::kFlagSlotVersion) != (h.round & 1)) {
    c.reason = DropReason::kVersionBit;
    return;
  }
  c.kind = Kind::kContribution;
  c.job = j;
  c.local = local;
  __builtin_prefetch(j->versions(local), 1);
  __builtin_prefetch(j->accumulator(local, h.round & 1), 1);
}

void Engine::Impl::apply(Pending& c, TxSink& tx) {
  switch (c.kind) {
    case Kind::kContribution:
      if ((c.frame[wire::kIpOffset + 1] & kEcnMask) == kEcnCe) congested(c, tx);
      if (c.job->notices) notice_loss(*c.job, c, tx);
      contribute(c, tx);
      return;
    case Kind::kArp:
      answer_arp(c.frame, c.len, tx);
      return;
    case Kind::kDrop:
      drop(c.reason);
      return;
  }
}

// The slot rules (engine.h, docs/protocol.md §7) for a contribution that passed classify().
void Engine::Impl::contribute(Pending& c, TxSink& tx) {
  Job& j = *c.job;
  const wire::SumcastHeader& h = c.pkt.hdr;
  const uint32_t r = h.round;
  const unsigned p = r & 1;
  Version* ver = j.versions(c.local);
  Version& v = ver[p];
  uint64_t& word = j.bitmap(c.local, p)[h.rank >> 6];
  const uint64_t bit = uint64_t{1} << (h.rank & 63);

  if (r == v.round) {
    if (v.state == VersionState::kOpen) {
      if ((word & bit) != 0) {
        bump(counters.duplicates);
        if (j.notices) notice_duplicate(j, h, tx);
        return;
      }
      if (!same_chunk(v, h)) {
        drop(DropReason::kChunkMismatch);
        return;
      }
      if (j.deterministic) {
        std::memcpy(j.staged(c.local, h.rank), c.pkt.payload, c.pkt.payload_len);
      } else {
        j.accumulate(j.accumulator(c.local, p), c.pkt.payload, h.elem_count);
      }
      word |= bit;
      bump(counters.contributions);
      bump(counters.payload_bytes, c.pkt.payload_len);
      if (++v.count == j.world) complete(j, c.local, h.slot, p, v, tx);
      return;
    }
    if (v.state == VersionState::kComplete) {
      if (!same_chunk(v, h)) {
        drop(DropReason::kChunkMismatch);
        return;
      }
      // A worker that missed the result: send the shadow copy to it alone.
      wire::SumcastHeader rh = h;
      rh.type = wire::MsgType::kResult;
      rh.status = 0;
      rh.flags = static_cast<uint8_t>(r & 1);
      const size_t len = size_t{v.elem_count} * wire::dtype_size(j.dtype);
      if (emit(j, rh, j.result(c.local, p), len, h.rank, tx)) {
        bump(counters.retransmits_answered);
        bump(progress[j.index].unicast_answers);
      }
      return;
    }
    drop(DropReason::kStaleRound);  // idle: this round never ran here
    return;
  }
  const Version& other = ver[p ^ 1];
  if (r == v.round + 2 && other.round == r - 1 && other.state != VersionState::kOpen) {
    // The next round of this slot: this packet opens it (its result overwrites round r - 2's).
    v.round = r;
    v.state = VersionState::kOpen;
    j.opened_at[size_t{c.local} * 2 + p] = now;
    bump(progress[j.index].opened);
    v.coll_seq = h.coll_seq;
    v.elem_offset = h.elem_offset;
    v.elem_count = h.elem_count;
    v.count = 1;
    std::memset(j.bitmap(c.local, p), 0, size_t{j.bitmap_words} * sizeof(uint64_t));
    word = bit;
    if (j.deterministic) {
      std::memcpy(j.staged(c.local, h.rank), c.pkt.payload, c.pkt.payload_len);
    } else {
      j.load(j.accumulator(c.local, p), c.pkt.payload, h.elem_count);
    }
    bump(counters.contributions);
    bump(counters.payload_bytes, c.pkt.payload_len);
    if (j.world == 1) complete(j, c.local, h.slot, p, v, tx);
    return;
  }
  drop(DropReason::kStaleRound);
}

// A contribution of member A to this core passed classify(). It carries A's number of its first
// transmission to this core, modulo 2^15 (wire::contribution_tx_seq; docs/protocol.md §7), and a
// retransmission repeats its number. Ahead of the number expected next (by less than 2^14), it
// says that the numbers between were lost, since a member's frames to one address arrive in the
// order it sent them: A alone is told each one (a loss notice naming it, at most
// kMaxNoticesPerGap), so that it resends that contribution at once while the other ranks wait for
// its repair. Behind is a retransmission (or reordered): nothing to say.
void Engine::Impl::notice_loss(Job& j, const Pending& c, TxSink& tx) {
  const uint16_t rank = c.pkt.hdr.rank;
  uint16_t& next = j.next_seq[rank];
  const uint32_t seq = wire::contribution_tx_seq(c.pkt.hdr);
  const uint32_t ahead = (seq - next) & wire::kTxSeqMask;
  if (ahead >= wire::kTxSeqHalf) return;  // behind: a retransmission
  next = static_cast<uint16_t>((seq + 1) & wire::kTxSeqMask);
  const uint32_t lost = std::min(ahead, kMaxNoticesPerGap);
  for (uint32_t i = 0; i < lost; ++i) {
    wire::SumcastHeader n;
    n.type = wire::MsgType::kLossNotice;
    n.dtype = j.dtype;
    n.op = j.op;
    n.job_id = j.job_id;
    n.round = (seq - ahead + i) & wire::kTxSeqMask;
    n.flags = static_cast<uint8_t>(wire::kFlagNoticeSeq | (n.round & 1));
    if (emit(j, n, nullptr, 0, rank, tx)) {
      bump(counters.loss_notices_sent);
      bump(progress[j.index].loss_notices);
    }
  }
}

// A contribution of member A to an open round that already holds A's: a resend (a stall probe, or
// a repair the round turned out not to need) or a duplicated frame. A alone is told (a duplicate
// notice echoing the chunk, docs/protocol.md §7), so that the result this round sends later is
// not taken for the answer to the resend: an answered resend is the worker's evidence that what
// it sent before the resend was lost, and here nothing was, the round waits for other ranks.
void Engine::Impl::notice_duplicate(const Job& j, const wire::SumcastHeader& h, TxSink& tx) {
  wire::SumcastHeader n = h;
  n.type = wire::MsgType::kDuplicateNotice;
  n.flags = static_cast<uint8_t>(h.round & 1);
  n.status = 0;
  if (emit(j, n, nullptr, 0, h.rank, tx)) {
    bump(counters.duplicate_notices_sent);
    bump(progress[j.index].duplicate_notices);
  }
}

// Deterministic jobs: the accumulator becomes ((x_0 op x_1) op x_2) ... op x_{world-1}, with the
// same kernels (so the same arithmetic, element by element) as arrival-order summation, but in an
// order that does not depend on the network. The kernels are elementwise IEEE operations without
// FMA or reassociation, so every ISA gives the same bits (NaN payloads aside, kernels.h).
void Engine::Impl::sum_staged(const Job& j, uint32_t local, unsigned parity, size_t elems) {
  uint8_t* acc = j.accumulator(local, parity);
  j.load(acc, j.staged(local, 0), elems);
  for (uint32_t r = 1; r < j.world; ++r) j.accumulate(acc, j.staged(local, r), elems);
}

void Engine::Impl::complete(Job& j, uint32_t local, uint16_t slot, unsigned parity, Version& v, TxSink& tx) {
  if (j.deterministic) sum_staged(j, local, parity, v.elem_count);
  if (j.shadow != nullptr) {
    j.finish(j.result(local, parity), j.accumulator(local, parity), v.elem_count);
  }
  v.state = VersionState::kComplete;
  bump(counters.slots_completed);
  const uint64_t latency = now - j.opened_at[size_t{local} * 2 + parity];
  bump(counters.latency_buckets[latency_bucket(latency)]);
  bump(counters.latency_ticks_sum, latency);
  bump(progress[j.index].completed);

  wire::SumcastHeader h;
  h.type = wire::MsgType::kResult;
  h.dtype = j.dtype;
  h.op = j.op;
  h.job_id = j.job_id;
  h.slot = slot;
  h.round = v.round;
  h.coll_seq = v.coll_seq;
  h.elem_count = v.elem_count;
  h.flags = static_cast<uint8_t>(v.round & 1);
  h.elem_offset = v.elem_offset;
  const uint8_t* result = j.result(local, parity);
  const size_t len = size_t{v.elem_count} * wire::dtype_size(j.dtype);
  const uint64_t sent =
      j.multicast ? (emit(j, h, result, len, wire::kRankMulticast, tx) ? 1 : 0) : replicate(j, h, result, len, tx);
  bump(counters.results_sent, sent);
}

// Sends one result to every member: the first frame is built in full and stamped (one ICRC pass),
// each next one is a copy of the frame before it (still unsubmitted, so still ours) with the
// member's fields rewritten. Its ICRC needs no pass over the payload: the ICRC is affine in the
// bytes, so frames that differ only in header bytes differ in ICRC by (header CRC difference) x
// x^(8 body) mod P, and dest_crc[] holds each member's header CRC difference to member 0.
uint64_t Engine::Impl::replicate(Job& j, wire::SumcastHeader h, const uint8_t* payload, size_t len, TxSink& tx) {
  const size_t flen = wire::frame_len(len);
  const size_t body = flen - wire::kPayloadOffset - wire::kIcrcLen;  // payload and pad
  uint8_t* prev = nullptr;
  uint32_t icrc_member0 = 0;  // the ICRC of this result addressed to member 0
  uint64_t sent = 0;
  for (uint32_t r = 0; r < j.world; ++r) {
    uint8_t mac[6];
    uint8_t* buf = acquire_for(j.members[r], mac, tx);
    if (buf == nullptr) continue;
    const auto rank = static_cast<uint16_t>(r);
    if (prev == nullptr) {
      h.rank = rank;
      write_result_headers(j, h, len, buf);
      if (r != 0) readdress(buf, j.members[r], rank);
      if (len != 0) std::memcpy(buf + wire::kPayloadOffset, payload, len);
      std::memset(buf + wire::kPayloadOffset + len, 0, body - len);  // the pad
      icrc::stamp_frame(std::span<uint8_t>(buf, flen));
      if (j.shift_bytes != body) {
        j.shift = crc::shift_for(body);
        j.shift_bytes = static_cast<uint32_t>(body);
      }
      icrc_member0 = load_le32(buf + flen - wire::kIcrcLen);
      if (r != 0) icrc_member0 ^= crc::multiply(j.dest_crc[r], j.shift);
      std::memcpy(buf, mac, 6);  // the Ethernet header is outside the ICRC
      if (opt.udp_checksum) store_be16(buf + kUdpChecksumAt, wire::udp_checksum(buf));
    } else {
      std::memcpy(buf, prev, flen);
      readdress(buf, j.members[r], rank);
      std::memcpy(buf, mac, 6);
      store_le32(buf + flen - wire::kIcrcLen, icrc_member0 ^ crc::multiply(j.dest_crc[r], j.shift));
      if (opt.udp_checksum) update_udp_checksum(prev, buf, flen);
      tx.submit(prev, static_cast<uint32_t>(flen));
      ++sent;
    }
    prev = buf;
  }
  if (prev != nullptr) {
    tx.submit(prev, static_cast<uint32_t>(flen));
    ++sent;
  }
  bump(counters.tx_packets, sent);
  bump(counters.tx_bytes, sent * flen);
  return sent;
}

wire::Addressing Engine::Impl::addressing(const Job& j, uint16_t rank) const {
  wire::Addressing a;
  std::memcpy(a.src_mac, opt.local_mac, 6);
  a.src_ip = opt.local_ip;
  a.src_qp = opt.qpn;
  a.tos = opt.tos;
  a.qkey = j.qkey;
  if (rank == wire::kRankMulticast) {
    std::memcpy(a.dst_mac, j.mcast_mac, 6);
    a.dst_ip = j.mcast_ip;
    a.dest_qp = wire::kMulticastQpn;
  } else {
    const Member& m = j.members[rank];
    std::memcpy(a.dst_mac, m.mac, 6);
    a.dst_ip = m.ip;
    a.dst_port = m.udp_port;
    a.dest_qp = m.qpn;
  }
  return a;
}

// Builds one frame of `j` to member `rank` (kRankMulticast: the job's group) and hands it to tx.
bool Engine::Impl::emit(const Job& j, wire::SumcastHeader h, const uint8_t* payload, size_t len, uint16_t rank,
                        TxSink& tx) {
  uint8_t mac[6];
  uint8_t* buf = rank != wire::kRankMulticast ? acquire_for(j.members[rank], mac, tx) : tx.acquire();
  if (buf == nullptr) {
    if (rank == wire::kRankMulticast) drop(DropReason::kTxNoBuffer);
    return false;
  }
  h.rank = rank;
  uint8_t* out = wire::write_frame_headers(buf, addressing(j, rank), h, len);
  if (rank != wire::kRankMulticast) std::memcpy(buf, mac, 6);
  if (len != 0) std::memcpy(out, payload, len);
  const size_t flen = wire::frame_len(len);
  icrc::stamp_frame(std::span<uint8_t>(buf, flen));
  if (opt.udp_checksum) store_be16(buf + kUdpChecksumAt, wire::udp_checksum(buf));
  tx.submit(buf, static_cast<uint32_t>(flen));
  bump(counters.tx_packets);
  bump(counters.tx_bytes, flen);
  if (rank == wire::kRankMulticast) {
    bump(counters.group_frames);
    bump(progress[j.index].group_frames);
  }
  return true;
}

// A request for our address is answered (and shown to the observer: it carries the sender's
// MAC); a reply to our address or an announcement (sender address = target address) only goes to
// the observer; anything else is arp_ignored.
void Engine::Impl::answer_arp(const uint8_t* frame, uint32_t len, TxSink& tx) {
  const uint8_t* a = frame + wire::kEthHeaderLen;
  if (len < wire::kEthHeaderLen + kArpLen || load_be16(a) != kArpHtypeEthernet ||
      load_be16(a + 2) != wire::kEtherTypeIpv4 || a[4] != 6 || a[5] != 4 || opt.local_ip == 0) {
    drop(DropReason::kArpIgnored);
    return;
  }
  const uint16_t op = load_be16(a + 6);
  const uint32_t sender = load_be32(a + 14), target = load_be32(a + 24);
  const bool request_for_us = op == kArpOpRequest && target == opt.local_ip;
  const bool teaches = opt.arp_observer != nullptr && sender != opt.local_ip &&
                       ((op == kArpOpReply && target == opt.local_ip) ||
                        ((op == kArpOpRequest || op == kArpOpReply) && sender == target));
  if (request_for_us && opt.arp_observer != nullptr && sender != opt.local_ip) {
    opt.arp_observer(frame, len, opt.arp_observer_ctx);
  }
  if (!request_for_us) {
    if (teaches) {
      opt.arp_observer(frame, len, opt.arp_observer_ctx);
      bump(counters.arp_learned);
    } else {
      drop(DropReason::kArpIgnored);
    }
    return;
  }
  uint8_t* buf = tx.acquire();
  if (buf == nullptr) {
    drop(DropReason::kTxNoBuffer);
    return;
  }
  std::memcpy(buf, a + 8, 6);  // to the requester's hardware address
  std::memcpy(buf + 6, opt.local_mac, 6);
  store_be16(buf + 12, wire::kEtherTypeArp);
  uint8_t* r = buf + wire::kEthHeaderLen;
  store_be16(r, kArpHtypeEthernet);
  store_be16(r + 2, wire::kEtherTypeIpv4);
  r[4] = 6;
  r[5] = 4;
  store_be16(r + 6, kArpOpReply);
  std::memcpy(r + 8, opt.local_mac, 6);
  store_be32(r + 14, opt.local_ip);
  std::memcpy(r + 18, a + 8, 10);  // target = the requester's MAC and IPv4
  std::memset(r + kArpLen, 0, kMinEthFrameLen - wire::kEthHeaderLen - kArpLen);
  tx.submit(buf, kMinEthFrameLen);
  bump(counters.arp_replies);
  bump(counters.tx_packets);
  bump(counters.tx_bytes, kMinEthFrameLen);
}

// A CE-marked contribution: counted; its sender gets a CNP unless it had one within the interval.
// The CNP: Ethernet | IPv4 (our TOS, DF) | UDP to the member's port | BTH (opcode 0x81, BECN,
// P_Key 0xFFFF, DestQP = the member's QPN, PSN 0) | 16 reserved zero bytes | ICRC.
void Engine::Impl::congested(const Pending& c, TxSink& tx) {
  Job& j = *c.job;
  const uint16_t rank = c.pkt.hdr.rank;
  bump(counters.ce_marked);
  bump(progress[j.index].ce_marked);
  bump(j.member_ce[rank]);
  if (opt.cnp_interval_ticks == 0) return;
  uint64_t& last = j.last_cnp[rank];
  if (last != 0 && now - last < opt.cnp_interval_ticks) return;
  const Member& m = j.members[rank];
  uint8_t mac[6];
  uint8_t* buf = acquire_for(m, mac, tx);
  if (buf == nullptr) return;
  std::memset(buf, 0, kCnpLen);
  std::memcpy(buf, mac, 6);
  std::memcpy(buf + 6, opt.local_mac, 6);
  store_be16(buf + 12, wire::kEtherTypeIpv4);
  uint8_t* ip = buf + wire::kIpOffset;
  ip[0] = 0x45;
  ip[1] = opt.tos;
  store_be16(ip + 2, static_cast<uint16_t>(kCnpLen - wire::kIpOffset));
  store_be16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = wire::kIpProtoUdp;
  store_be32(ip + 12, opt.local_ip);
  store_be32(ip + 16, m.ip);
  store_be16(ip + 10, wire::ipv4_header_checksum(ip));
  uint8_t* udp = buf + wire::kUdpOffset;
  store_be16(udp, wire::kRoceUdpPort);
  store_be16(udp + 2, m.udp_port);
  store_be16(udp + 4, static_cast<uint16_t>(kCnpLen - wire::kUdpOffset));
  wire::write_cnp(buf + wire::kBthOffset, m.qpn);
  icrc::stamp(std::span<uint8_t>(ip, kCnpLen - wire::kIpOffset));
  if (opt.udp_checksum) store_be16(buf + kUdpChecksumAt, wire::udp_checksum(buf));
  tx.submit(buf, static_cast<uint32_t>(kCnpLen));
  last = now != 0 ? now : 1;
  bump(counters.cnps_sent);
  bump(progress[j.index].cnps_sent);
  bump(counters.tx_packets);
  bump(counters.tx_bytes, kCnpLen);
}

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Engine::~Engine() = default;

Status Engine::add_job(const JobSpec& spec) {
  Impl& m = *impl_;
  const EngineOptions& o = m.opt;
  auto what = [&](const std::string& s) {
    return "engine core " + std::to_string(o.core_index) + ": job " + std::to_string(spec.job_id) + ": " + s;
  };
  const size_t world = spec.members.size();
  const uint32_t max_ranks = std::min(o.max_ranks, kMaxWorld);
  if (m.find(spec.job_id) != nullptr) return Status::invalid_argument(what("already registered on this core"));
  if (m.active_jobs >= o.max_jobs) {
    return Status::refused(what("max_jobs reached (" + std::to_string(o.max_jobs) + " jobs active)"));
  }
  if (world == 0) return Status::invalid_argument(what("no members"));
  if (world > max_ranks) {
    return Status::refused(what(std::to_string(world) + " ranks exceed max_ranks " + std::to_string(max_ranks)));
  }
  if (spec.slot_count == 0) return Status::invalid_argument(what("slot_count is 0"));
  if (spec.slot_count > o.max_slots_per_job) {
    return Status::refused(what(std::to_string(spec.slot_count) + " slots exceed max_slots_per_job " +
                                std::to_string(o.max_slots_per_job)));
  }
  if (!wire::is_valid_dtype(static_cast<uint8_t>(spec.dtype))) return Status::invalid_argument(what("unknown dtype"));
  if (!wire::is_valid_op(static_cast<uint8_t>(spec.op))) return Status::invalid_argument(what("unknown reduce op"));
  const size_t esize = wire::dtype_size(spec.dtype);
  if (spec.max_payload_bytes < esize || spec.max_payload_bytes > wire::kMaxPayloadBytes) {
    return Status::invalid_argument(what("max_payload_bytes " + std::to_string(spec.max_payload_bytes) + " outside [" +
                                         std::to_string(esize) + ", " + std::to_string(wire::kMaxPayloadBytes) + "]"));
  }

  uint32_t index = 0;
  while (m.jobs[index].active) ++index;  // active_jobs < max_jobs: a free record exists
  Job& j = m.jobs[index];
  const uint32_t cores = m.cores;
  const uint32_t local_slots =
      o.core_index < cores && o.core_index < spec.slot_count ? (spec.slot_count - o.core_index + cores - 1) / cores : 0;
  const size_t max_elems = spec.max_payload_bytes / esize;
  const size_t acc_size = wire::accumulator_size(spec.dtype);
  const size_t bitmap_words = (world + 63) / 64;
  const size_t members_bytes = round_up(world * sizeof(Member), kCacheLine);
  const size_t seq_bytes = spec.loss_notices ? round_up(world * sizeof(uint16_t), kCacheLine) : 0;
  const size_t dest_crc_bytes = round_up(world * sizeof(uint32_t), kCacheLine);
  const size_t opened_at_bytes = round_up(size_t{local_slots} * 2 * sizeof(uint64_t), kCacheLine);
  const size_t cnp_bytes = round_up(world * sizeof(uint64_t), kCacheLine);
  const size_t slot_stride = round_up(kSlotHeaderLen + 2 * bitmap_words * sizeof(uint64_t), kCacheLine);
  const size_t acc_stride = round_up(max_elems * acc_size, kCacheLine);
  const size_t shadow_stride = acc_size == esize ? 0 : round_up(max_elems * esize, kCacheLine);
  const size_t slots_bytes = local_slots * slot_stride;
  const size_t acc_bytes = size_t{local_slots} * 2 * acc_stride;
  const size_t shadow_bytes = size_t{local_slots} * 2 * shadow_stride;
  const size_t stage_stride = spec.deterministic ? round_up(max_elems * esize, kCacheLine) : 0;
  const size_t stage_bytes = size_t{local_slots} * world * stage_stride;
  const size_t total = members_bytes + dest_crc_bytes + opened_at_bytes + slots_bytes + acc_bytes + shadow_bytes +
                       stage_bytes + cnp_bytes + seq_bytes;

  ProgressEntry& pe = m.progress[index];
  if (pe.member_cap < world) {  // a larger world than this record had: a new per-member array
    std::unique_ptr<std::atomic<uint64_t>[]> a(new (std::nothrow) std::atomic<uint64_t>[world]);
    if (!a) return Status::unavailable(what("could not allocate its per-member counters"));
    pe.members.store(0, std::memory_order_relaxed);
    pe.member_ce.store(a.get(), std::memory_order_release);
    pe.member_cap = static_cast<uint32_t>(world);
    m.member_ce_arrays.push_back(std::move(a));
  }
  auto* mem = static_cast<uint8_t*>(m.allocate(total, o.alloc_ctx));
  if (mem == nullptr) {
    return Status::unavailable(what(
        "could not allocate " + std::to_string(total) + " bytes" +
        (stage_bytes != 0 ? " (" + std::to_string(stage_bytes) + " of them to stage payloads for deterministic mode)"
                          : std::string())));
  }

  j.active = true;
  j.job_id = spec.job_id;
  j.qkey = spec.qkey;
  j.dtype = spec.dtype;
  j.op = spec.op;
  j.world = static_cast<uint32_t>(world);
  j.slot_count = spec.slot_count;
  j.max_payload = spec.max_payload_bytes;
  j.bitmap_words = static_cast<uint32_t>(bitmap_words);
  j.local_slots = local_slots;
  j.slot_stride = slot_stride;
  j.acc_stride = acc_stride;
  j.shadow_stride = shadow_stride;
  j.memory = mem;
  j.members = reinterpret_cast<Member*>(mem);
  for (size_t r = 0; r < world; ++r) new (&j.members[r]) Member(spec.members[r]);
  j.dest_crc = reinterpret_cast<uint32_t*>(mem + members_bytes);
  j.opened_at = reinterpret_cast<uint64_t*>(mem + members_bytes + dest_crc_bytes);
  j.slots = mem + members_bytes + dest_crc_bytes + opened_at_bytes;
  j.acc = j.slots + slots_bytes;
  j.shadow = shadow_stride != 0 ? j.acc + acc_bytes : nullptr;
  j.deterministic = spec.deterministic;
  j.notices = spec.loss_notices;
  j.next_seq = spec.loss_notices
                   ? reinterpret_cast<uint16_t*>(j.acc + acc_bytes + shadow_bytes + stage_bytes + cnp_bytes)
                   : nullptr;
  if (j.next_seq != nullptr) std::memset(j.next_seq, 0, seq_bytes);
  j.stage_stride = stage_stride;
  j.stage = spec.deterministic ? j.acc + acc_bytes + shadow_bytes : nullptr;
  j.last_cnp = reinterpret_cast<uint64_t*>(j.acc + acc_bytes + shadow_bytes + stage_bytes);
  std::memset(j.last_cnp, 0, cnp_bytes);
  const auto d = static_cast<size_t>(spec.dtype);
  j.load = m.kt->load[d];
  j.accumulate = m.kt->accumulate[d][static_cast<size_t>(spec.op)];
  j.finish = m.kt->finish[d];
  j.multicast = spec.multicast;
  j.mcast_ip = spec.mcast_ip;
  std::memcpy(j.mcast_mac, spec.mcast_mac, 6);
  j.shift_bytes = 0;
  j.shift = crc::shift_for(0);

  // Header CRC of a result to each member xor that to member 0. The ICRC is affine in the bytes,
  // so this depends only on the fields replicate() rewrites, not on the chunk or payload length.
  {
    alignas(kCacheLine) uint8_t frame[wire::frame_len(0)];
    wire::SumcastHeader h;
    h.type = wire::MsgType::kResult;
    h.dtype = j.dtype;
    h.op = j.op;
    h.job_id = j.job_id;
    h.rank = 0;
    wire::write_frame_headers(frame, m.addressing(j, 0), h, 0);
    std::memcpy(j.result_headers, frame, wire::kPayloadOffset);
    const uint32_t base = header_crc(frame);
    j.dest_crc[0] = 0;
    for (uint32_t r = 1; r < j.world; ++r) {
      readdress(frame, j.members[r], static_cast<uint16_t>(r));
      j.dest_crc[r] = header_crc(frame) ^ base;
    }
  }

  // Both versions start idle at rounds first-2 and first-1, so that `first_round` opens first.
  std::memset(j.slots, 0, slots_bytes);
  const uint32_t f = spec.first_round;
  for (uint32_t s = 0; s < local_slots; ++s) {
    Version* v = j.versions(s);
    v[f & 1].round = f - 2;
    v[(f + 1) & 1].round = f - 1;
    v[0].state = v[1].state = VersionState::kIdle;
  }

  m.table_insert(index);
  j.member_ce = pe.member_ce.load(std::memory_order_relaxed);
  for (size_t r = 0; r < world; ++r) j.member_ce[r].store(0, std::memory_order_relaxed);
  pe.members.store(static_cast<uint32_t>(world), std::memory_order_release);
  pe.completed.store(0, std::memory_order_relaxed);
  pe.opened.store(0, std::memory_order_relaxed);
  pe.group_frames.store(0, std::memory_order_relaxed);
  pe.unicast_answers.store(0, std::memory_order_relaxed);
  pe.ce_marked.store(0, std::memory_order_relaxed);
  pe.cnps_sent.store(0, std::memory_order_relaxed);
  pe.loss_notices.store(0, std::memory_order_relaxed);
  pe.duplicate_notices.store(0, std::memory_order_relaxed);
  pe.key.store(kActiveBit | spec.job_id, std::memory_order_release);
  ++m.active_jobs;
  bump(m.counters.jobs_active);
  return Status();
}

void Engine::remove_job(uint32_t job_id, wire::AbortReason reason, TxSink& tx) {
  Impl& m = *impl_;
  Job* j = m.find(job_id);
  if (j == nullptr) return;
  if (reason != wire::AbortReason::kNone) {
    wire::SumcastHeader h;
    h.type = wire::MsgType::kAbort;
    h.dtype = j->dtype;
    h.op = j->op;
    h.job_id = j->job_id;
    h.status = static_cast<uint8_t>(reason);
    // To every member, and for a multicast job to its group as well: a member that left the
    // group (or whose switch does not forward it) still learns of the abort.
    uint64_t sent = 0;
    if (j->multicast) sent += m.emit(*j, h, nullptr, 0, wire::kRankMulticast, tx) ? 1 : 0;
    for (uint32_t r = 0; r < j->world; ++r) sent += m.emit(*j, h, nullptr, 0, static_cast<uint16_t>(r), tx) ? 1 : 0;
    bump(m.counters.aborts_sent, sent);
    tx.flush();
  }
  m.table_erase(job_id);
  m.progress[j->index].key.store(0, std::memory_order_release);
  m.last_ = nullptr;
  m.free_job(*j);
  --m.active_jobs;
  m.counters.jobs_active.store(m.active_jobs, std::memory_order_relaxed);
}

// The hot loop. Measured with perf/engine (one core of this 2.6 GHz Xeon VM, in memory, bursts of
// 32, ~4 MiB of frames on 2 MiB pages, the thread's CPU time, median of 3; two runs on a machine
// shared with other work), 1 KiB fp32 payloads, ICRC verified, per packet received:
//   n = 2:  107-116 ns = 278-302 TSC cycles (71-77 Gbit/s of payload per core)
//   n = 8:   90-102 ns = 234-264 cycles (81-91 Gbit/s)
//   n = 64:  86-96 ns  = 224-249 cycles (86-95 Gbit/s)
// The work floor (ICRC verify + sum + one result copy per packet, no parsing or slot logic) is
// 51-55 ns; about half the time is ISA-L (the rx ICRC pass pulls the frame from L3). Each slot round
// adds ~35 ns once (its result's one ICRC pass and first frame), hence n = 2. Replicating results
// as copies with a combined ICRC (replicate()) instead of an ICRC pass per destination took n = 8
// from 132 to ~92 ns. Those figures are ISA-L's ICRC; the fused AVX-512 one (icrc.h) took n = 8
// on the 2-CPU AMD EPYC VM from 108-145 to 91-105 ns (two fused rounds the VM's drift slowed, 125
// and 130 ns, left out), the check's share from 43 to 21 ns (docs/performance.md, "Summation
// kernels and ICRC").
void Engine::process_burst(std::span<const PacketView> frames, TxSink& tx) {
  Impl& m = *impl_;
  const size_t n = frames.size();
  uint64_t bytes = 0;
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) __builtin_prefetch(frames[i].data);
  m.now = m.opt.clock(m.opt.clock_ctx);
  Pending c[4];
  size_t i = 0;
  // Four at a time: prefetch the next quad's headers, check the four ICRCs, run the stateless
  // checks of all four (which prefetch their slot state and accumulator), then apply them in order.
  for (; i + 4 <= n; i += 4) {
    for (size_t k = i + 4; k < std::min(i + 8, n); ++k) {
      __builtin_prefetch(frames[k].data);
      __builtin_prefetch(frames[k].data + kCacheLine);
    }
    // The four ICRC checks first, back to back: no branch on one result comes between them, so
    // the CPU overlaps their carry-less multiplication chains (one check of a 1 KiB-payload frame
    // takes 45 ns where the next waits for it, 27 ns back to back, on the AMD EPYC VM: perf/icrc's
    // chained and ring rows). A frame whose IPv4 destination is not ours gets no check (icrc_ok).
    bool ok[4];
    for (size_t k = 0; k < 4; ++k) ok[k] = m.icrc_ok(frames[i + k]);
    for (size_t k = 0; k < 4; ++k) {
      bytes += frames[i + k].len;
      m.classify(frames[i + k], ok[k], c[k]);
    }
    for (size_t k = 0; k < 4; ++k) m.apply(c[k], tx);
  }
  for (; i < n; ++i) {
    bytes += frames[i].len;
    m.classify(frames[i], m.icrc_ok(frames[i]), c[0]);
    m.apply(c[0], tx);
  }
  bump(m.counters.rx_packets, n);
  bump(m.counters.rx_bytes, bytes);
  tx.flush();
}

int Engine::owner_core(const uint8_t* frame, uint32_t len, uint32_t core_count) {
  if (frame == nullptr || core_count == 0 || len < wire::kPayloadOffset + wire::kIcrcLen) return -1;
  const uint8_t* ip = frame + wire::kIpOffset;
  const uint8_t* h = frame + wire::kSumcastOffset;
  if (load_be16(frame + 12) != wire::kEtherTypeIpv4 || ip[0] != 0x45 || ip[9] != wire::kIpProtoUdp ||
      load_be16(frame + wire::kUdpOffset + 2) != wire::kRoceUdpPort ||
      frame[wire::kBthOffset] != wire::kOpcodeUdSendOnly || h[0] != wire::kProtocolVersion ||
      h[1] != static_cast<uint8_t>(wire::MsgType::kContribution)) {
    return -1;
  }
  return static_cast<int>(load_be16(h + 10) % core_count);
}

void Engine::count_drop(DropReason reason, uint64_t n) {
  if (reason < DropReason::kCount) bump(impl_->counters.drops[static_cast<size_t>(reason)], n);
}

const CoreCounters& Engine::counters() const { return impl_->counters; }

std::vector<JobProgress> Engine::progress() const {
  std::vector<JobProgress> out;
  const uint32_t records = std::max<uint32_t>(impl_->opt.max_jobs, 1);
  for (uint32_t i = 0; i < records; ++i) {
    const ProgressEntry& e = impl_->progress[i];
    const uint64_t key = e.key.load(std::memory_order_acquire);
    if ((key & kActiveBit) == 0) continue;
    // Approximate while the lcore runs: consumers treat opened < completed as no rounds waiting.
    const uint64_t completed = e.completed.load(std::memory_order_acquire);
    out.push_back({static_cast<uint32_t>(key), completed, e.opened.load(std::memory_order_acquire),
                   e.group_frames.load(std::memory_order_relaxed), e.unicast_answers.load(std::memory_order_relaxed),
                   e.ce_marked.load(std::memory_order_relaxed), e.cnps_sent.load(std::memory_order_relaxed),
                   e.loss_notices.load(std::memory_order_relaxed),
                   e.duplicate_notices.load(std::memory_order_relaxed)});
  }
  return out;
}

std::vector<uint64_t> Engine::member_ce_marked(uint32_t job_id) const {
  const uint32_t records = std::max<uint32_t>(impl_->opt.max_jobs, 1);
  for (uint32_t i = 0; i < records; ++i) {
    const ProgressEntry& e = impl_->progress[i];
    if (e.key.load(std::memory_order_acquire) != (kActiveBit | job_id)) continue;
    const uint32_t n = e.members.load(std::memory_order_acquire);
    const std::atomic<uint64_t>* a = e.member_ce.load(std::memory_order_acquire);
    std::vector<uint64_t> out(n);
    for (uint32_t r = 0; r < n; ++r) out[r] = a[r].load(std::memory_order_relaxed);
    return out;
  }
  return {};
}

const EngineOptions& Engine::options() const { return impl_->opt; }

}  // namespace sumcast::engine
