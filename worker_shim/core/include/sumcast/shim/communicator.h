// The worker side of a Sumcast job: registration with one or more appliances, the packetizer,
// the per-slot window and retransmission timers (docs/protocol.md §7; docs/architecture.md, "One
// gradient, end to end"; docs/scale-out.md for several aggregators).
//
// Chunking. An all-reduce of N elements is split over the appliances in proportion to their
// bandwidth weights: contiguous element ranges, computed from the weights alone, so every rank
// splits identically (never by hash). Each appliance has its own job registration, slot count
// S and payload size P; its range is cut into chunks of P / dtype-size elements. Chunk j of the
// range uses the appliance's next chunk index g = base + j (base counts all chunks ever sent to
// that appliance by this communicator), slot g mod S and round g div S: each slot's round counter
// advances by one per use, so the (slot, round) a chunk gets depends only on the sequence of calls
// and their sizes. All ranks must therefore make the same calls, with the same counts, in the same
// order. The header carries coll_seq (the call's sequence number, from 0) and elem_offset (the
// chunk's first element in the call's buffer).
//
// Window. A slot carries one chunk at a time: chunk g + S is sent when chunk g's result arrived.
// Results are written straight into the receive buffer; a result that is not what the slot has
// outstanding is dropped (counted), a repeat of the slot's last completed round is a duplicate.
// Each outstanding chunk keeps its packet bytes, so retransmissions resend exactly what was sent,
// and an in-place call (send == recv) is safe: a chunk's contribution is copied into its packet
// before its result can arrive.
//
// Timers. A chunk's first timeout is the appliance's current RTO: rto_initial_us until round
// trips were measured, then max(floor, SRTT + 4 RTTVAR) (RFC 6298 estimators, sampled only from
// chunks sent once), at most rto_max_us, where the floor starts at rto_initial_us, grows by half
// with every spurious retransmission (a retransmitted chunk answered twice) and decays slowly; each expiry resends and
// doubles it, up to rto_max_us. An expired chunk is presumed lost only when a chunk first sent after its last
// transmission was answered, or a retransmission sent after it was answered and then, for that
// retransmission's RTO, no chunk sent once was (an answered retransmission may owe its answer to the
// first transmission: then the answers sent with it follow, as a late rank catches up; with loss
// notices granted, the appliance tells a rank whose resend found the open round holding its first
// copy, in a duplicate notice, and the answer to that round is then no evidence at all);
// otherwise the appliance or a peer rank is stalled (descheduled, late to the call), not losing
// packets: then, once per RTO, only the oldest outstanding chunk (expired or not) is resent, as a
// probe, and the other expired timers just back off, so a stall does not turn into a window's
// worth of useless retransmissions, and the round every rank waits for is always resent.
// Fast retransmission. A chunk's result can only come after every rank's contribution to it, and
// every rank sends its chunks in order: when the result of chunk g + fast_retransmit_after (or of
// any later chunk) arrives while chunk g, last sent before it, is still unanswered, chunk g's
// contribution or result was lost (or reordered that far), so chunk g is resent at once instead
// of after its RTO (>= rto_initial_us, 5 ms: at 1% loss on 8 ranks most rounds would wait for
// one). Every hole is repaired so on the same result, not one per result. A chunk already resent
// r times is resent this way again only on the answer to a chunk first sent r smoothed RTTs after
// its last resend: so a lost retransmission or a lost answer to it is repaired about one round
// trip later, not by its timer (whose RTO under loss and CPU contention grows to tens of ms),
// while a hole that is another rank's lost contribution still being repaired (with n ranks far
// more often the case than ours lost twice) is resent ever more rarely: every resend takes
// uplink capacity from new chunks. Every rank does so, and the appliance
// answers the repeats of a completed round from its stored result. Per result, only the slots of
// the chunks between the oldest unanswered one and that many before the answered one are looked
// at: none while results come in order, at most S.
// Loss notices (docs/protocol.md §7; asked for unless loss_notices is false, granted unless the
// appliance's dataplane.loss_notices is off). A rank cannot tell its own lost contribution from
// another rank's: both leave the same hole. The appliance can: the rank numbers its first
// transmissions to each appliance core modulo 2^15 in the packet (a resend repeats its packet),
// and a core that receives a number ahead of the one it expects from this rank tells this rank
// alone each number skipped, in a loss notice from that core's QP. The rank resends at once the
// contribution the notice names when that core's slot still carries it unanswered and not resent
// since; any other notice is stale. So with notices granted a hole revealed by results is resent
// by the rule above only once it stayed unanswered for a grace of SRTT + 2 RTTVAR after the
// result that revealed it. A hole that is another rank's lost contribution is repaired within
// about one round trip: the notice left the appliance when that rank's next contribution to the
// core arrived (before, or with, the later chunks whose results reveal the hole to us), half a
// round trip takes it there, half one brings its resend to the appliance, and the completed
// result reaches us about when a round trip after ours would. The two mean deviations cover the
// spread of round trips as RFC 6298's estimator sees it. What the grace leaves to this rank: a
// lost result to it, a lost notice, a lost resend, the loss of its last contribution to a core
// (nothing after it reveals it); the RTO still backs everything up.
// Without a grant the rule above applies unchanged.
//
// Congestion window. Of an appliance's S slots, at most `window` carry a chunk at once (S while
// the fabric is calm). A RoCEv2 CNP from that appliance (it saw our contributions marked CE on
// the way: docs/protocol.md §3) cuts the window to window_cut_percent of itself (at least 1), at
// most once per window_cut_interval_us (0: per smoothed RTT), as DCQCN cuts a NIC's rate; each
// window's worth of results without a cut grows it by window_step slots, up to S. A chunk whose
// slot is free but that the window holds back is issued later, smallest chunk index first, so
// exactness never depends on the window, and ranks may have different windows: the smallest
// chunk this rank has not had answered is always issued, window or not (one over it at most), so
// every rank's contribution to the oldest open round goes out and no two ranks can each wait
// for a round the other holds back. The Timers and Fast retransmission rules hold unchanged
// below S (with a window of 1 there is no later chunk to reveal a loss, so a lost chunk is
// resent as the stall probe, once per RTO). The verbs transport never sees CNPs: its NIC's DCQCN
// reacts to them. A result that arrives marked CE (congestion on the way to us: results are the
// heavier direction) cuts the window the same way, under the same interval (UDP: IP_RECVTOS).
//
// Send queue. Where the host's own link is the bottleneck (a shaped or slower NIC, or a veth with
// a qdisc), a window's chunks wait in this host's qdisc, where a resend queues behind all of them:
// repairs then take a whole queue's time, and chunks behind a slot in repair are held up when it
// is not answered before the window comes round to it again. So, as TCP's small queues do, a new
// chunk (not a resend) is held back while the transport has more than send_queue_limit() bytes
// queued below it (Transport::send_queue_bytes: UDP's SIOCOUTQ, buffer overhead included): the
// larger of 128 KiB and send_queue_us of the rate results came back at lately (measured over 2 ms
// intervals). The queue is looked at once per receive batch at most, and the held chunks go out
// together at the batch's end (whole UDP_SEGMENT trains), smallest chunk index first, or, with no
// result coming, 1 ms later. Resends, probes and control packets are never held, so a
// repair waits behind at most that queue, and behind none where resends go with a repair_dscp
// that the host's qdisc (or the switch, where the queue builds there) serves first: a repair then
// overtakes first transmissions sent before it, never one sent after it, so every rule above that
// takes an answer to a later-sent chunk as evidence still holds, and so do the appliance's loss
// notices for every resend made on such evidence (it repeats a number the core has passed); only
// a stall probe whose first transmission still waits in the queue arrives as a reordered frame
// would (docs/protocol.md §7: frames, not sums). Off with send_queue_us = 0, and where the transport
// cannot tell its queue (verbs: the NIC paces). A host whose link is not the bottleneck (a veth
// without a qdisc, a fast NIC) never holds anything: its queue is empty whenever it is looked at.
// Failover (docs/failover.md). With more than one aggregator, the loss of one is survived: it is
// declared lost when its control connection drops, when it aborts the job (data or control path),
// or when it answered nothing for failover_after_ms while chunks were outstanding on it, not even a
// liveness probe (a resend of a round it completed, which a live aggregator answers from its stored
// result even while the current round waits for a late rank: so a late rank is not taken for a lost
// aggregator), or while nothing was outstanding on it but a call waited elsewhere with no result
// from anywhere (so that ranks ahead, waiting on another aggregator for a rank stuck on this one,
// notice its loss and join that rank's agreement). The rank stops using it and closes its control
// connection (a frozen aggregator that wakes up then aborts its job, which tells the ranks that had
// not noticed). The ranks agree through a small job of their own on the first aggregator that is
// still up (an all-reduce of who is lost, then of each lost aggregator's per-slot first round some
// rank still needs). The lost aggregator's byte range, with its chunk numbering, moves to a new job
// on the next aggregator after it that is up (a pure function of the agreed set), with that round
// as round 0 of each slot. Every rank then resends what some rank lacks: its outstanding chunks,
// and its last completed round where another rank still needs it (each slot keeps the packets of
// its last two rounds: a rank that sent round r + 1 on a slot completed round r, and no rank can
// have completed round r + 1 while another lacks round r, so every needed round is in every rank's
// slot). A result a rank already holds is never written again. failover_max failovers per
// communicator, each within failover_timeout_ms; past that, or with no aggregator left, the
// communicator fails with an error naming what was lost and why (every_aggregator_lost() tells
// the second case). Nothing in a failover blocks: the agreement and the new home's registration
// are steps that allreduce(), test() and wait() move on (non-blocking control connections), so
// one thread can drive several communicators through their failovers in any order.
//
// Failure. A chunk not answered after `retries` retransmissions, no result from an appliance for
// op_timeout_ms while chunks are outstanding, an abort from an appliance (data or control path), or
// a transport error fails the communicator (unless failover takes over, above): every pending call
// completes with that error (its message names the appliance), and so does every later call. Create
// a new communicator to go on. An abort because a member left is often the echo of another
// appliance's failure (the ranks that saw it first left every job): the communicator then reports a
// primary failure already queued on, or arriving within 300 ms at, another appliance's connection
// instead, when there is one (docs/scale-out.md §4).
//
// Progress. There is no background thread: the window moves only inside allreduce(), test() and
// wait(). Several calls may be outstanding (start_allreduce); their chunks share the window, in
// call order.
//
// Thread safety: one thread at a time per communicator. Distinct communicators are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/shim/control_client.h"
#include "sumcast/shim/transport.h"
#include "sumcast/shim/transport_factory.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::shim {

struct ApplianceAddress {
  std::string address;  // control endpoint "host:port" (host: dotted quad or name)
  double weight = 1.0;  // share of each call's bytes, relative to the other appliances; > 0
};

struct CommConfig {
  std::string job_name;                      // ranks of one job use the same name (1..64 bytes)
  uint16_t rank = 0;                         // 0..world_size-1
  uint16_t world_size = 0;                   // >= 1
  std::vector<ApplianceAddress> appliances;  // at least one; same list and order on every rank
  std::string token;                         // the appliances' shared secret
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  // Payload per packet wanted (the grant may be smaller), 8..4096. Left at the default (and
  // payload_explicit false), the transport's path decides: UDP takes the largest RoCE payload
  // (4096, 2048, 1024, ...) whose datagram fits the path MTU toward the appliance (1024 at 1500).
  uint32_t payload_bytes = 1024;
  uint16_t slots = 0;                  // window slots wanted per appliance; 0: the appliance's default
  std::string bind_ip;                 // local IPv4; "": the address the kernel uses toward the first appliance
  uint16_t udp_port = 0;               // local UDP port; 0: ephemeral
  uint32_t rto_initial_us = 5000;      // first retransmission timeout of a chunk (5 ms suits loopback/veth)
  uint32_t rto_max_us = 200000;        // back-off cap
  uint32_t retries = 100;              // retransmissions per chunk before failing; 0: unlimited
  uint32_t fast_retransmit_after = 3;  // resend a chunk at once when one this many or more after it is answered; 0: off
  uint32_t op_timeout_ms = 30000;      // no result for this long while chunks are outstanding fails; 0: none
  uint32_t connect_timeout_ms = 10000;   // TCP connect + authentication, per appliance
  uint32_t register_timeout_ms = 60000;  // waiting for all ranks to register, per appliance
  bool verify_icrc = true;               // check the ICRC of every result and CNP (UDP transport)
  uint32_t busy_poll_us = 0;             // UDP: SO_BUSY_POLL on the data sockets, 0..1000000 us; 0: off
  bool udp_gro = true;                   // UDP: receive coalesced results (UDP_GRO) where the kernel allows it
  bool udp_gso = false;                  // UDP: UDP_SEGMENT sends (IP ID k, docs/protocol.md §2.2)
  uint8_t dscp = 0;                      // DSCP of contributions, 0..63 (UDP: IP_TOS; verbs: the AH's traffic class)
  bool ecn = false;                      // mark contributions ECT(0); false: not-ECT
  uint8_t tos() const { return static_cast<uint8_t>((dscp & 0x3F) << 2 | (ecn ? 0x2 : 0)); }
  // DSCP of resends (retransmissions, probes), -1..63; -1: dscp. See Send queue: a host qdisc or
  // switch queue that serves it first lets a repair skip the first transmissions queued before it.
  // UDP transport only (verbs refuses one that differs from dscp).
  int repair_dscp = -1;
  int repair_tos() const { return repair_dscp < 0 ? -1 : ((repair_dscp & 0x3F) << 2 | (ecn ? 0x2 : 0)); }
  // Congestion window (see Congestion window above).
  bool cnp_reaction = true;             // cut the window on CNPs and CE-marked results; false: count CNPs only
  uint32_t window_cut_percent = 50;     // a cut leaves this percent of the window (at least 1 slot), 1..99
  uint32_t window_step = 1;             // slots regained per window's worth of results without a cut, >= 1
  uint32_t window_cut_interval_us = 0;  // at most one cut per this long; 0: one per smoothed RTT
  uint32_t send_queue_us = 2000;        // us of result rate queued below us that holds new chunks, 0..1000000; 0: off
  // Ask the appliances for deterministic summation (docs/fidelity.md): results bit-identical
  // whatever the arrival order and retransmissions. Same on every rank. An appliance that does not
  // grant it fails create().
  bool deterministic = false;
  // Ask the appliances for results by IPv4 multicast: one frame per chunk to the job's group,
  // which this rank joins on bind_ip's interface (and leaves when the communicator fails or is
  // destroyed). Same on every rank. An appliance that does not allow it grants unicast results
  // (ApplianceInfo::grant.multicast says which). The verbs transport attaches its QP to the
  // group instead (verified on no NIC).
  bool multicast = false;
  // Ask the appliances for loss notices (see Loss notices above). Same on every rank. An appliance
  // that predates them rejects the registration (it cannot parse the flag): set false for one.
  bool loss_notices = true;
  // Failover (see above). kAuto: on when there is more than one aggregator (and failover_after_ms
  // is then at most half of a shorter op_timeout_ms); kOn: invalid unless it is below it.
  enum class Failover : uint8_t { kAuto = 0, kOff = 1, kOn = 2 };
  Failover failover = Failover::kAuto;
  uint32_t failover_after_ms = 1000;     // silence that declares one lost; < op_timeout_ms
  uint32_t failover_timeout_ms = 30000;  // one failover's agreement and re-registration, at most
  uint32_t failover_max = 4;             // failovers per communicator; past it the call fails
  TransportKind transport = TransportKind::kUdp;
  std::string rdma_device;        // verbs: device name; "": the one whose GID table holds bind_ip
  std::string rdma_interface;     // verbs: network interface whose RoCEv2 GID to use (a VLAN's); "": any
  bool payload_explicit = false;  // payload_bytes was chosen by the user (verbs: refused if the MTU is smaller;
                                  // UDP: used as is, and a grant the path MTU cannot carry fails create())
  VerbsOps* verbs_ops = nullptr;  // verbs test seam (verbs_ops.h); nullptr: rdma-core
  // Test seam: when set, the communicator's transport is passed through this (a decorator that
  // drops, duplicates or reorders); the returned transport is used instead.
  std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)> wrap_transport;
};

// What one appliance granted this rank.
struct ApplianceInfo {
  std::string address;  // as configured
  double weight = 1.0;
  JobGrant grant;
  uint32_t chunk_elems = 0;  // elements per packet
};

struct CommStats {
  uint64_t calls = 0;                     // all-reduce calls started
  uint64_t chunks = 0;                    // chunks sent (first transmissions)
  uint64_t retransmissions = 0;           // RTO expiries that resent a chunk
  uint64_t stall_probes = 0;              // ... of which stall probes: nothing sent later answered (see Timers)
  uint64_t fast_retransmissions = 0;      // chunks resent because a later one was answered first (see Timers)
  uint64_t loss_notices = 0;              // loss notices received from appliances that granted them
  uint64_t notice_retransmissions = 0;    // ... that resent a chunk (see Loss notices)
  uint64_t silent_backoffs = 0;           // RTO expiries that only backed off: a stall, not a loss (see Timers)
  uint64_t results = 0;                   // results accepted and written
  uint64_t duplicates = 0;                // results for a chunk already completed
  uint64_t spurious_retransmissions = 0;  // duplicates of retransmitted chunks: the RTO was too short
  uint64_t window_cuts = 0;               // CNPs that cut an appliance's window (transport.cnps counts them all)
  uint64_t window_grows = 0;              // additive increases of a window after a cut
  uint64_t window_now = 0;                // the smallest window over the appliances now (slots)
  uint64_t window_min = 0;                // the smallest any appliance's window has been
  uint64_t send_queue_holds = 0;          // times new chunks were held back by a full send queue (see Send queue)
  uint64_t send_queue_peak = 0;           // the most bytes seen queued below the transport (0: never looked, or verbs)
  uint64_t failovers = 0;                 // aggregators lost and replaced (see Failover)
  uint64_t replayed_chunks = 0;           // chunks resent to a new home (see Failover)
  uint64_t replayed_completed = 0;        // ... of which rounds this rank had, another lacked
  uint64_t liveness_probes = 0;           // completed rounds resent to a quiet aggregator
  uint64_t lost_packets = 0;              // ignored: from an aggregator declared lost
  TransportCounters transport;            // drops[] includes the communicator's own reasons
};

// One aggregator lost and where its bytes went.
struct FailoverEvent {
  std::string lost;       // the lost aggregator's address
  std::string reason;     // why it was declared lost
  std::string new_home;   // the aggregator that took its range
  uint32_t epoch = 0;     // 1 for the first failover
  uint64_t replayed = 0;  // chunks this rank resent to the new home
  uint64_t ms = 0;        // from the detection to the new home registered
};

class Communicator {
 public:
  // Opens the transport, registers with every appliance in order (blocking until all ranks did,
  // or register_timeout_ms) and sets up the window.
  static Result<std::unique_ptr<Communicator>> create(const CommConfig& config);
  // Leaves every job cleanly (best effort); pending calls are abandoned (their buffers are no
  // longer touched).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Blocking all-reduce of `count` elements of the communicator's dtype. `send` may equal `recv`
  // (in place); otherwise the buffers must not overlap. Both must stay valid until it returns.
  Status allreduce(const void* send, void* recv, size_t count);
  // Starts an all-reduce; returns its request id. Buffers must stay valid until test() reports
  // it done or wait() returns.
  Result<uint64_t> start_allreduce(const void* send, void* recv, size_t count);
  // Makes progress without blocking. Returns true when request `id` finished; then `*status`
  // holds its outcome and the id is released. An unknown id finishes with InvalidArgument.
  bool test(uint64_t id, Status* status);
  // Blocks until request `id` finished; returns its outcome and releases the id.
  Status wait(uint64_t id);

  // OK, or the error that failed the communicator.
  const Status& health() const { return failed_; }
  CommStats stats() const;
  // Counters as (name, value) pairs, for tools and the C API.
  std::vector<std::pair<std::string, uint64_t>> stat_list() const;
  const std::vector<ApplianceInfo>& appliances() const { return infos_; }
  const std::vector<FailoverEvent>& failovers() const { return failover_log_; }
  // True once every aggregator of the job was lost (health() then says so): what a caller that
  // falls back to another all-reduce (the MPI interposer's PMPI_Allreduce) looks for.
  bool every_aggregator_lost() const;
  const Transport& transport() const { return *transport_; }
  const CommConfig& config() const { return config_; }

 private:
  struct Op;
  struct Slot;
  struct Appliance;
  struct PollSet;

  explicit Communicator(const CommConfig& config);
  // create() without blocking: checks the config and opens the transport (init), then
  // advance_create() registers with the appliances, true once all granted the job.
  static Result<std::unique_ptr<Communicator>> start_create(const CommConfig& config);
  Status init();
  Result<bool> advance_create();
  // Chunk g's slot is free: issue it now or when the congestion window lets it (see Congestion window).
  void offer(Appliance& a, uint64_t g, uint64_t now);
  void issue_deferred(Appliance& a, uint64_t now);
  bool send_room(const Appliance& a, uint64_t now);
  void release_held(uint64_t now);
  size_t send_queue_limit() const;
  void note_delivered(size_t bytes, uint64_t now);
  void on_cnp(Appliance& a, uint64_t now);
  Status begin_register(Appliance& a, const std::string& job_name, uint16_t slots, uint32_t payload,
                        uint32_t timeout_ms);
  Result<bool> advance_register(Appliance& a);
  void wait_register(const Appliance& a) const;
  Status accept_grant(Appliance& a);
  void issue(Appliance& a, uint64_t g, uint64_t now, bool replay = false);
  uint32_t build_contribution(Appliance& a, uint32_t s, uint8_t* pkt, uint64_t g, uint32_t round, uint32_t coll_seq,
                              uint64_t offset, uint16_t count, const uint8_t* payload);
  void send_first(Appliance& a, Slot& sl, uint64_t now);
  void on_lost(size_t index, Status why, bool member_left);
  void declare_lost(size_t index, Status why);
  void start_agreement();
  std::string failover_job_name(uint32_t epoch, const std::string& what) const;
  std::string lost_summary() const;
  void poll_failover();
  struct Agreement;
  Result<bool> advance_failover(Agreement& ag);
  Status failover_failed(const Agreement& ag, const Status& why);
  void notice_lost();
  void give_up(Appliance& a, std::string reason);
  Status all_lost(const std::string& tried) const;
  Status give_up_agreed_lost(Agreement& ag);
  Status agree_on_mine(Agreement& ag);
  Status begin_rehome(Agreement& ag);
  Status rehome(Agreement& ag);
  bool failover_enabled() const;
  void on_received(uint64_t now);
  void fast_retransmit(Appliance& a, const Slot& answered, uint64_t now);
  void on_loss_notice(Appliance& a, const wire::SumcastHeader& h, uint32_t src_qp, uint64_t now);
  void resend_early(Appliance& a, Slot& sl, uint64_t now);
  uint64_t notice_grace_ns(const Appliance& a) const;
  void update_rto(Appliance& a, uint64_t sample_ns);
  void check_timers(uint64_t now);
  bool check_liveness(size_t ai, uint64_t quiet_since, const char* while_what, uint64_t now, uint64_t& next);
  void poll_control();
  // The descriptors to wait on: the transport's when `with_transport`, the control connections
  // but aggregator `skip`'s.
  PollSet poll_set(bool with_transport, size_t skip = SIZE_MAX) const;
  // One round of progress; blocks up to `timeout_ms` (0: not at all) when nothing happened.
  void progress(int timeout_ms);
  void flush_tx();
  void fail(Status status);
  Status root_cause(Status secondary);  // a primary failure queued behind a "member left" abort, if any
  void complete(Op& op);
  Op* find(uint64_t id);
  void release(uint64_t id);
  std::string where(const Appliance& a) const;

  CommConfig config_;
  size_t elem_size_ = 0;
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Appliance>> apps_;
  std::vector<ApplianceInfo> infos_;
  std::deque<std::unique_ptr<Op>> ops_;  // started and not yet released, in call order
  uint64_t next_id_ = 1;
  uint32_t next_coll_seq_ = 0;
  Status failed_;
  CommStats stats_;
  uint64_t comm_drops_[kDropReasonCount] = {};
  std::vector<OutPacket> tx_;  // packets queued for the next flush
  std::vector<Received> rx_;
  uint64_t next_deadline_ns_ = 0;  // earliest RTO or op-timeout check
  uint64_t next_control_poll_ns_ = 0;
  // Send queue (see above): bytes new chunks may still add before the queue is looked at again,
  // whether one is held back now, and the result rate (bytes per second, smoothed) with the
  // current measuring interval.
  size_t send_budget_ = 0;
  bool send_held_ = false;
  bool send_looked_ = false;      // looked at the queue in this receive batch (see on_received)
  bool send_queue_known_ = true;  // false once the transport said it cannot tell
  double result_rate_ = 0;
  uint64_t rate_bytes_ = 0;
  uint64_t rate_since_ns_ = 0;
  size_t joined_ = 0;                             // appliances registered so far (advance_create)
  std::vector<int> peer_app_;                     // transport peer -> index in apps_, -1: a lost aggregator's
  std::unique_ptr<Agreement> agreement_;          // a failover in progress
  std::unique_ptr<Communicator> agreement_comm_;  // the last failover's agreement job
  uint32_t epoch_ = 0;                            // failovers begun
  std::vector<FailoverEvent> failover_log_;
};

}  // namespace sumcast::shim
