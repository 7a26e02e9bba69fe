// The per-core aggregation engine: parse, check, sum, complete, reply. One Engine per worker
// lcore; it owns its jobs' slot state, accumulators and counters, and is touched only by that
// lcore (shared-nothing). It knows nothing of DPDK: frames come in as views and go out through
// a TxSink, so the same code runs on a DPDK port, in memory (tests, fuzzers, benchmarks) and on a
// kernel UDP socket (embedded summation service).
//
// Slot protocol (docs/protocol.md §7): slot s of a job is owned by core (s % core_count). Each
// slot has two versions (round & 1) with a contributor bitmap each; the completed version keeps
// its result (shadow copy) until the slot's next-but-one round opens.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sumcast/core_counters.h"
#include "sumcast/next_hop.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::engine {

// Every reason a frame is dropped (docs/protocol.md §6). Structural reasons mirror
// wire::ParseError one-to-one and come first, in the same order.
#define SUMCAST_DROP_REASONS(X)                                                       \
  SUMCAST_PARSE_ERRORS(X)                                                             \
  X(kMultiSegment, "multi_segment") /* frame not contiguous in one buffer */          \
  X(kNotForUs, "not_for_us")        /* destination MAC/IPv4 is not this port's */     \
  X(kBadIcrc, "bad_icrc")                                                             \
  X(kNotContribution, "not_contribution") /* result/abort sent to the appliance */    \
  X(kUnknownJob, "unknown_job")                                                       \
  X(kBadQkey, "bad_qkey")                                                             \
  X(kBadRank, "bad_rank")             /* rank >= world size */                        \
  X(kForeignSource, "foreign_source") /* IPv4/QPN not the rank's endpoint */          \
  X(kBadSlot, "bad_slot")             /* slot >= job's slot count */                  \
  X(kWrongCore, "wrong_core")         /* slot owned by another core */                \
  X(kDtypeMismatch, "dtype_mismatch")                                                 \
  X(kOpMismatch, "op_mismatch")                                                       \
  X(kTooLarge, "too_large")           /* payload above the job's packet limit */      \
  X(kStaleRound, "stale_round")       /* round neither open, shadowed nor next */     \
  X(kChunkMismatch, "chunk_mismatch") /* offset/count/coll_seq differ in one round */ \
  X(kVersionBit, "version_bit")       /* flags' version bit != round & 1 */           \
  X(kArpIgnored, "arp_ignored")       /* ARP not asking for our address */            \
  X(kTxNoBuffer, "tx_no_buffer")      /* a reply could not be built: pool empty */    \
  /* a unicast reply's next hop has no MAC (yet): see the neighbour resolver */       \
  X(kNextHopUnresolved, "next_hop_unresolved")

enum class DropReason : uint8_t {
#define SUMCAST_X(name, str) name,
  SUMCAST_DROP_REASONS(SUMCAST_X)
#undef SUMCAST_X
      kCount
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
const char* drop_reason_name(DropReason r);

// Slot completion latency histogram: the time from a round's first contribution to its
// completion, in EngineOptions::clock ticks, in log2 buckets. Bucket 0 holds [0, 2] ticks, bucket b
// (1 <= b < kLatencyBuckets - 1) holds (2^b, 2^(b+1)] ticks, the last bucket everything above
// 2^(kLatencyBuckets - 1) ticks; so 2^(b+1) ticks is bucket b's inclusive upper bound (Prometheus
// "le"). The clock is read once per burst, so both ends are the start of the burst that carried
// the packet: the resolution is one burst's processing time.
inline constexpr size_t kLatencyBuckets = 40;  // 2^40 TSC ticks: minutes at GHz rates
// The bucket of a latency of `ticks`.
constexpr size_t latency_bucket(uint64_t ticks) {
  if (ticks <= 2) return 0;
  const auto b = static_cast<size_t>(63 - __builtin_clzll(ticks - 1));
  return b < kLatencyBuckets ? b : kLatencyBuckets - 1;
}

// Counters of one core. Written only by the owning lcore; readers (telemetry) load them relaxed.
struct alignas(64) CoreCounters {
  // rx_packets ... jobs_active: one field per SUMCAST_ENGINE_COUNTERS entry (sumcast/core_counters.h
  // says what each counts).
#define SUMCAST_X(name, type, shown, help) std::atomic<uint64_t> name{0};
  SUMCAST_ENGINE_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
  std::atomic<uint64_t> drops[kDropReasonCount]{};
  // Every completed round adds its latency (see kLatencyBuckets); count = sum of the buckets.
  std::atomic<uint64_t> latency_ticks_sum{0};
  std::atomic<uint64_t> latency_buckets[kLatencyBuckets]{};
};

// A frame received: contiguous bytes, valid until process_burst returns. icrc_verified: the
// receiver has already checked this frame's ICRC (the embedded service must, to learn a UDP train
// member's IP ID), so the engine does not check it again.
struct PacketView {
  const uint8_t* data;
  uint32_t len;
  bool icrc_verified = false;
};

// Where the engine puts frames to send. Implemented by each port (DPDK tx queue, in memory, UDP
// socket). Buffers hold at least wire::kMaxFrameLen bytes.
class TxSink {
 public:
  virtual ~TxSink() = default;
  // A buffer to build one frame in, or nullptr when none is free (the engine counts kTxNoBuffer).
  virtual uint8_t* acquire() = 0;
  // Queues `buf` (from acquire()) holding `len` bytes; the sink may send a burst now.
  virtual void submit(uint8_t* buf, uint32_t len) = 0;
  // Sends what is queued. Called by the engine at the end of every burst.
  virtual void flush() = 0;
};

// One member of a job: its data endpoint.
struct Member {
  uint8_t mac[6] = {};  // as registered: used only without a next hop (next_hop == kNoNextHop)
  uint32_t ip = 0;      // host order
  uint16_t udp_port = wire::kRoceUdpPort;
  uint32_t qpn = 0;
  // Index of the member's next hop (itself on-link, or its gateway) in EngineOptions::next_hops,
  // whose MAC unicast frames to it carry; kNoNextHop: the registered mac.
  uint32_t next_hop = kNoNextHop;
};

// A job as the control plane hands it to every core (docs/protocol.md §8).
struct JobSpec {
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  uint16_t slot_count = 0;         // slots 0..slot_count-1; core c owns s with s % cores == c
  uint16_t max_payload_bytes = 0;  // largest payload accepted per packet
  std::vector<Member> members;     // index = rank; size = world size
  bool multicast = false;          // results to mcast_ip/mcast_mac instead of per member
  uint32_t mcast_ip = 0;
  uint8_t mcast_mac[6] = {};
  // The round every slot opens first (default 0); rounds then count up modulo 2^32.
  uint32_t first_round = 0;
  // Deterministic (bitwise-reproducible) summation (docs/fidelity.md): each rank's payload is
  // kept until the round has every contribution, then summed in rank order, so the result's bits
  // do not depend on arrival order or retransmissions. Costs local slots x world x
  // max_payload_bytes more memory per core (allocated by add_job, which refuses when it cannot)
  // and one payload copy per contribution. false: sum in arrival order (within the error bound
  // of docs/fidelity.md).
  bool deterministic = false;
  // Loss notices (docs/protocol.md §7): a member's contributions to one core number its first
  // transmissions there, modulo 2^15 (wire::contribution_tx_seq); when one arrives ahead of the
  // number expected next, the member is sent a loss notice naming each number it skipped (those
  // contributions were lost: a member's frames arrive in the order it sent them), at most 16 per
  // gap. One compare per contribution, and 2 bytes per member per core.
  bool loss_notices = false;
};

struct EngineOptions {
  uint32_t core_index = 0;
  uint32_t core_count = 1;
  uint8_t local_mac[6] = {};
  uint32_t local_ip = 0;    // host order; ARP is answered for it
  uint32_t qpn = 0x000100;  // this core's QPN (BTH DestQP of its contributions)
  uint8_t tos = 0;          // IPv4 TOS of every frame sent: DSCP << 2 | ECN (the ICRC masks it)
  bool verify_icrc = true;
  // Fill the UDP checksum of every frame sent (wire::udp_checksum; docs/protocol.md §2) instead of
  // leaving it zero. RoCE NICs ignore it; Linux coalesces (UDP GRO) only datagrams that carry one,
  // so kernel UDP workers receive fewer, larger buffers. One pass over each result's bytes per
  // result (the copies to the other members are updated from it, RFC 1624).
  bool udp_checksum = false;
  uint32_t max_jobs = 64;
  uint32_t max_ranks = 256;
  uint32_t max_slots_per_job = 1024;
  // Memory for slot state and accumulators (hugepages under DPDK). Must return 64-byte aligned
  // memory or nullptr; `release` gets back exactly what `allocate` returned.
  void* (*allocate)(size_t bytes, void* ctx) = nullptr;  // nullptr: aligned operator new
  void (*release)(void* p, void* ctx) = nullptr;
  void* alloc_ctx = nullptr;
  // The clock of the latency histogram, read once per burst (process_burst) on the owning lcore.
  // nullptr: std::chrono::steady_clock in nanoseconds (clock_hz is then taken as 1e9). sumcastd
  // passes the TSC (rte_rdtsc) and rte_get_tsc_hz().
  uint64_t (*clock)(void* ctx) = nullptr;
  void* clock_ctx = nullptr;
  uint64_t clock_hz = 0;  // ticks per second of `clock`, for readers of the histogram
  // Next hops' MACs, published by the neighbour resolver (Member::next_hop indexes it); nullptr:
  // members' registered MACs are used.
  const NextHopTable* next_hops = nullptr;
  // Called with every ARP frame that can teach the neighbour resolver a MAC (requests for our
  // address, replies to it, announcements), on the lcore, before the request is answered. The
  // frame is valid only during the call. nullptr: not called.
  void (*arp_observer)(const uint8_t* frame, uint32_t len, void* ctx) = nullptr;
  void* arp_observer_ctx = nullptr;
  // A contribution marked CE is answered, as a RoCEv2 receiver does under DCQCN, by a CNP (BTH
  // opcode 0x81, BECN set) to its sender's QP, at most once per this many clock ticks per member;
  // 0: CE is counted, no CNP is sent.
  uint64_t cnp_interval_ticks = 0;
};

// Progress of one job on one core, readable from other threads (relaxed).
struct JobProgress {
  uint32_t job_id;
  uint64_t slots_completed;
  uint64_t rounds_opened;      // rounds_opened - slots_completed = rounds waiting for contributions
  uint64_t group_frames;       // results and aborts sent to the job's group (multicast jobs)
  uint64_t unicast_answers;    // stored results re-sent to the one member that asked again
  uint64_t ce_marked;          // contributions that arrived marked CE (congestion experienced)
  uint64_t cnps_sent;          // CNPs sent for them
  uint64_t loss_notices;       // loss notices sent to the job's members
  uint64_t duplicate_notices;  // duplicate notices sent to the job's members
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Control operations. Called only on the owning lcore (between bursts), never concurrently
  // with process_burst. add_job allocates; it fails (and changes nothing) when a limit is hit.
  Status add_job(const JobSpec& spec);
  // Removes the job; when `reason` != kNone, sends an abort to every member first.
  void remove_job(uint32_t job_id, wire::AbortReason reason, TxSink& tx);

  // The hot path: every frame is consumed (summed, answered or dropped and counted).
  // Never allocates, never fails, never logs.
  void process_burst(std::span<const PacketView> frames, TxSink& tx);

  // The core that owns the slot of this frame, or -1 when the frame is not a well-formed
  // contribution (the receiving core then processes it itself, to count the drop).
  static int owner_core(const uint8_t* frame, uint32_t len, uint32_t core_count);

  // Counts `n` drops the port detected itself (e.g. kMultiSegment). Owning lcore only.
  void count_drop(DropReason reason, uint64_t n = 1);

  const CoreCounters& counters() const;
  // Progress per active job (called from any thread; approximate while lcores run).
  std::vector<JobProgress> progress() const;
  // CE-marked contributions of an active job on this core, by member (rank); empty when the job
  // is not on this core. From any thread; approximate while the lcore runs.
  std::vector<uint64_t> member_ce_marked(uint32_t job_id) const;
  const EngineOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::engine
