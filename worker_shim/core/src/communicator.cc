#include "sumcast/shim/communicator.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "sumcast/shim/address.h"
#include "sumcast/shim/placement.h"
#include "sumcast/shim/transport_factory.h"
#include "sumcast/shim/udp_transport.h"

namespace sumcast::shim {
namespace {

constexpr uint64_t kControlPollNs = 50'000'000;  // poll the control connections at least every 50 ms
constexpr size_t kRxBatch = 64;
constexpr size_t kTxFlushAt = 64;
constexpr int kRxBatchesPerRound = 16;              // receive batches drained before timers are looked at
constexpr uint64_t kRootCauseWaitNs = 300'000'000;  // how long a secondary abort waits for the primary one
constexpr size_t kMaxJobNameLen = 64;
constexpr int kLivenessProbesBeforeLost = 2;  // unanswered liveness probes before silence means lost
// Send queue (see the header): the smallest limit (about two 64 KiB UDP_SEGMENT trains), the
// interval the result rate is measured over, and how soon chunks held back are looked at again
// when no result comes.
constexpr size_t kSendQueueFloor = 128 * 1024;
constexpr uint32_t kSendQueueMaxUs = 1'000'000;  // send_queue_us's upper bound (1 s of the result rate)
constexpr uint64_t kResultRateIntervalNs = 2'000'000;
constexpr uint64_t kSendRecheckNs = 1'000'000;

// The user chose payload_bytes (a default one follows the path's MTU).
bool payload_chosen(const CommConfig& c) { return c.payload_explicit || c.payload_bytes != CommConfig{}.payload_bytes; }

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const char* abort_reason_text(uint8_t reason) {
  switch (static_cast<wire::AbortReason>(reason)) {
    case wire::AbortReason::kNone:
      return "no reason given";
    case wire::AbortReason::kTimeout:
      return "no progress within the job timeout";
    case wire::AbortReason::kMemberLeft:
      return "a member left the job";
    case wire::AbortReason::kApplianceStop:
      return "the appliance is stopping";
    case wire::AbortReason::kAdmin:
      return "aborted by an operator";
  }
  return "unknown reason";
}

}  // namespace

struct Communicator::Op {
  struct Part {
    uint64_t begin = 0;    // first element of this appliance's range
    uint64_t end = 0;      // one past the last
    uint64_t first_g = 0;  // the appliance's chunk index of the range's first chunk
    uint64_t chunks = 0;
  };
  uint64_t id = 0;
  uint32_t coll_seq = 0;
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t count = 0;
  std::vector<Part> parts;  // index = appliance
  uint64_t chunks_left = 0;
  bool done = false;
  Status status;
};

struct Communicator::Slot {
  bool busy = false;
  bool completed_once = false;
  uint32_t last_round = 0;        // the last round whose result arrived
  bool last_retried = false;      // ... and it had been retransmitted
  uint64_t last_round_tx_ns = 0;  // ... and when its last transmission left
  uint64_t g = 0;                 // chunk index carried now (or last)
  uint32_t round = 0;
  uint32_t coll_seq = 0;
  uint64_t elem_offset = 0;
  uint16_t elem_count = 0;
  // Whether `h` names the chunk this slot carries now (the round aside).
  bool carries(const wire::SumcastHeader& h) const {
    return h.coll_seq == coll_seq && h.elem_offset == elem_offset && h.elem_count == elem_count;
  }
  Op* op = nullptr;
  uint8_t* pkt = nullptr;  // packet bytes kept for retransmission
  uint32_t len = 0;
  uint64_t sent_ns = 0;       // first transmission (RTT sample when no retransmission happened)
  uint64_t last_tx_ns = 0;    // latest transmission
  uint64_t last_tx_seq = 0;   // ... its place in the appliance's order of transmissions
  uint64_t first_tx_seq = 0;  // the first transmission's place in that order
  uint64_t deadline_ns = 0;
  uint32_t rto_us = 0;
  uint32_t retries = 0;
  bool fast_retried = false;  // the latest transmission was a fast retransmission or a loss notice's
  // With notices: a duplicate notice said the appliance holds this round's contribution already (a
  // resend found it there), so the result, when it comes, answers the first transmission, not a
  // resend, and is no evidence that chunks sent before the resend were lost (see Timers).
  bool dup_noticed = false;
  // With loss notices: when results first showed this transmission unanswered (0: not yet); it is
  // resent when that is a grace ago (see Loss notices in the header).
  uint64_t revealed_ns = 0;
  // With loss notices: the number its packet carries, this rank's first transmissions to the
  // slot's appliance core counted modulo 2^15 (see Loss notices in the header).
  uint32_t tx_seq = 0;
  // The last two rounds' packets (by round parity): the last completed round's stays while the
  // next one is outstanding, so that it can be replayed to a new home (see Failover).
  uint8_t* pkt_buf[2] = {nullptr, nullptr};
  uint64_t last_g = 0;  // the last completed round's chunk, and what its packet carried
  uint32_t last_coll_seq = 0;
  uint64_t last_elem_offset = 0;
  uint16_t last_elem_count = 0;
  uint32_t last_len = 0;
  // After a failover: the slot carries its last completed round again, for a rank that lacks
  // it; the answer is discarded. A real chunk (busy) waits behind it.
  bool held = false;
};

struct Communicator::Appliance {
  std::string address;
  HostPort control_addr;
  uint64_t weight_units = 1;
  std::unique_ptr<ControlClient> control;
  // Registration (begin_register, advance_register): the request, whether it was sent, and the
  // deadline of the step under way (connecting, then the grant).
  struct Join {
    RegisterRequest req;
    uint32_t timeout_ms = 0;
    bool requested = false;
    uint64_t deadline_ns = 0;
  } join;
  bool registered = false;  // the grant is in
  JobGrant grant;
  uint32_t peer = 0;
  uint32_t chunk_elems = 0;
  uint32_t slot_count = 0;
  size_t pkt_cap = 0;
  std::vector<uint8_t> pkt_mem;
  std::vector<Slot> slots;
  uint64_t assigned = 0;  // chunk indices [0, assigned) belong to calls already started
  uint32_t busy = 0;      // slots with a chunk outstanding
  uint64_t last_progress_ns = 0;
  uint64_t answered_tx_ns = 0;  // latest first transmission time among the chunks answered so far
  // Latest last transmission among the answered chunks that were retransmitted, when it was
  // raised and the grace it waits (that chunk's backed-off RTO): evidence only once the grace
  // passed with no answer to a first transmission (see check_timers).
  uint64_t retx_answered_tx_ns = 0;
  uint64_t retx_answered_at_ns = 0;
  uint64_t retx_grace_ns = 0;
  uint64_t first_answered_at_ns = 0;  // when a chunk sent once was last answered
  // Round-trip estimate (RFC 6298 style, Karn's rule: samples from chunks sent once only).
  bool have_rtt = false;
  uint64_t srtt_ns = 0;
  uint64_t rttvar_ns = 0;
  uint32_t rto_us = 0;  // a chunk's first timeout: max(floor, srtt + 4 rttvar), <= rto_max_us
  // Raised by half on every spurious retransmission (a retransmitted chunk answered twice), decayed by 1/512
  // per clean sample back toward rto_initial_us.
  uint32_t rto_floor_us = 0;
  uint64_t next_probe_ns = 0;  // no stall probe before this
  uint64_t tx_seq = 0;         // transmissions to this appliance so far (orders them within a batch)
  // Congestion window (see the header): at most `window` slots busy, except for chunk `low`.
  uint32_t window = 0;
  uint32_t window_min = 0;
  uint64_t last_cut_ns = 0;        // 0: never cut
  uint64_t clean_results = 0;      // results since the last cut or increase
  uint64_t low = 0;                // the smallest chunk index not answered yet
  std::vector<uint64_t> deferred;  // min-heap of chunks whose slot is free, held back by the window

  // Whether this appliance sends loss and duplicate notices to this job.
  bool sends_notices() const { return grant.loss_notices; }
  // With loss notices: per appliance core (grant.core_qpns), the number of the next first
  // transmission to it, modulo 2^15.
  std::vector<uint32_t> next_seq;
  // Whether chunk g's result arrived: its slot moved past it, or holds it completed.
  bool answered(uint64_t g) const {
    const Slot& sl = slots[g % slot_count];
    return sl.g > g || (sl.g == g && !sl.busy && sl.completed_once);
  }
  // Failover.
  std::vector<uint32_t> round_base;  // per slot: the absolute round sent as this job's round 0
  bool lost = false;
  std::string lost_reason;
  uint64_t lost_ns = 0;
  uint64_t last_heard_ns = 0;  // any packet from it
  int probe_slot = -1;         // the slot whose last round was completed here most recently
  int probes_unanswered = 0;   // liveness probes since it was last heard
  uint64_t next_liveness_ns = 0;
};

// A failover in progress: a state machine that progress() moves on without blocking, so that the
// rank keeps serving the other aggregators meanwhile (ranks that have not noticed the loss yet may
// be waiting on them) and whatever else its thread drives: several communicators, such as the
// NCCL plugin's lanes, each in its own failover, can then not wait on each other.
struct Communicator::Agreement {
  enum class Step : uint8_t {
    kJoining,      // registering into the agreement job (comm)
    kWhoIsLost,    // its first all-reduce: per aggregator, 1 if up
    kFirstRounds,  // its second: per lost aggregator and slot, the first round this rank lacks
    kRehoming,     // registering lost[rehomed]'s new job on its new home (home)
  };
  Step step = Step::kJoining;
  uint32_t epoch = 0;
  size_t coordinator = 0;
  uint64_t t0 = 0;
  std::unique_ptr<Communicator> comm;  // the agreement job
  uint64_t request = 0;                // its all-reduce under way
  std::vector<int32_t> mine;           // this rank's input to it (kept until it completes)
  std::vector<int32_t> agreed;         // its result
  std::vector<int32_t> alive;          // per aggregator, 0: some rank declared it lost
  std::vector<size_t> lost;            // the aggregators agreed lost, in order
  size_t rehomed = 0;                  // how many of them moved already
  size_t rounds_at = 0;                // where lost[rehomed]'s slots start in `agreed`
  std::unique_ptr<Appliance> home;     // lost[rehomed]'s job on its new home, registering
  size_t home_index = 0;               // ... the aggregator that is its new home
};

// What a wait sleeps on: the transport's descriptor (when asked for and it has one), then the
// aggregators' open control connections (one declared lost has none), at most kPolledControls
// of them (the others are still polled every kControlPollNs).
struct Communicator::PollSet {
  static constexpr nfds_t kPolledControls = 16;
  pollfd fds[1 + kPolledControls];
  nfds_t count = 0;
  nfds_t first_control = 0;

  // Blocks until one is readable or `wait_ns` passed; returns ppoll's result.
  int wait(uint64_t wait_ns) {
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
    return ppoll(fds, count, &ts, nullptr);
  }
  // After wait(): whether a control connection became readable.
  bool control_ready() const {
    for (nfds_t i = first_control; i < count; ++i) {
      if (fds[i].revents != 0) return true;
    }
    return false;
  }
};

Communicator::PollSet Communicator::poll_set(bool with_transport, size_t skip) const {
  PollSet ps;
  if (with_transport && transport_->wait_fd() >= 0) ps.fds[ps.count++] = {transport_->wait_fd(), POLLIN, 0};
  ps.first_control = ps.count;
  for (size_t j = 0; j < apps_.size() && ps.count - ps.first_control < PollSet::kPolledControls; ++j) {
    if (j != skip && apps_[j]->control) ps.fds[ps.count++] = {apps_[j]->control->fd(), POLLIN, 0};
  }
  return ps;
}

Communicator::Communicator(const CommConfig& config) : config_(config) {}

Communicator::~Communicator() {
  agreement_.reset();  // a failover under way: its registrations close (the appliances see this rank gone)
  for (auto& a : apps_) {
    if (a->control && a->registered && failed_.ok()) (void)a->control->leave();
  }
}

Result<std::unique_ptr<Communicator>> Communicator::create(const CommConfig& config) {
  auto started = start_create(config);
  if (!started.ok()) return started.status();
  std::unique_ptr<Communicator> c = std::move(started).value();
  for (;;) {
    auto done = c->advance_create();
    if (!done.ok()) return done.status();
    if (*done) return c;
    c->wait_register(*c->apps_[c->joined_]);
  }
}

Result<std::unique_ptr<Communicator>> Communicator::start_create(const CommConfig& config) {
  std::unique_ptr<Communicator> c(new Communicator(config));
  Status st = c->init();
  if (!st.ok()) return st;
  return c;
}

Status Communicator::init() {
  const CommConfig& c = config_;
  if (c.job_name.empty() || c.job_name.size() > kMaxJobNameLen) {
    return Status::invalid_argument("job name must be 1..64 bytes, got " + std::to_string(c.job_name.size()));
  }
  if (c.world_size == 0 || c.rank >= c.world_size) {
    return Status::invalid_argument("rank " + std::to_string(c.rank) + " is not below world size " +
                                    std::to_string(c.world_size));
  }
  if (!wire::is_valid_dtype(static_cast<uint8_t>(c.dtype)) || !wire::is_valid_op(static_cast<uint8_t>(c.op))) {
    return Status::invalid_argument("unknown dtype or reduction op");
  }
  elem_size_ = wire::dtype_size(c.dtype);
  if (c.payload_bytes < elem_size_ || c.payload_bytes > wire::kMaxPayloadBytes) {
    return Status::invalid_argument("payload_bytes " + std::to_string(c.payload_bytes) + " outside " +
                                    std::to_string(elem_size_) + ".." + std::to_string(wire::kMaxPayloadBytes));
  }
  if (c.rto_initial_us == 0 || c.rto_max_us < c.rto_initial_us) {
    return Status::invalid_argument("need 0 < rto_initial_us <= rto_max_us");
  }
  if (c.send_queue_us > kSendQueueMaxUs) {
    return Status::invalid_argument("send_queue_us must be 0.." + std::to_string(kSendQueueMaxUs) + ", got " +
                                    std::to_string(c.send_queue_us));
  }
  if (c.dscp > 63) return Status::invalid_argument("dscp must be 0..63, got " + std::to_string(c.dscp));
  if (c.repair_dscp < -1 || c.repair_dscp > 63) {
    return Status::invalid_argument("repair_dscp must be -1..63 (-1: dscp), got " + std::to_string(c.repair_dscp));
  }
  if (c.window_cut_percent < 1 || c.window_cut_percent > 99 || c.window_step < 1) {
    return Status::invalid_argument("window_cut_percent must be 1..99 and window_step at least 1, got " +
                                    std::to_string(c.window_cut_percent) + " and " + std::to_string(c.window_step));
  }
  if (c.appliances.empty()) return Status::invalid_argument("no appliance address given");
  if (c.failover == CommConfig::Failover::kAuto && c.op_timeout_ms != 0 && c.failover_after_ms >= c.op_timeout_ms) {
    config_.failover_after_ms = c.op_timeout_ms / 2;  // a short op timeout chosen, failover left at its default
  }
  if (failover_enabled() && (c.failover_after_ms == 0 || c.failover_timeout_ms == 0 ||
                             (c.op_timeout_ms != 0 && c.failover_after_ms >= c.op_timeout_ms))) {
    return Status::invalid_argument("failover needs 0 < failover_after_ms < op_timeout_ms (" +
                                    std::to_string(c.failover_after_ms) + ", " + std::to_string(c.op_timeout_ms) +
                                    ") and failover_timeout_ms > 0");
  }

  // Resolve every appliance before touching the network.
  for (const ApplianceAddress& aa : c.appliances) {
    if (!std::isfinite(aa.weight) || aa.weight <= 0 || aa.weight > 1e9) {
      return Status::invalid_argument("appliance " + aa.address + ": weight must be in (0, 1e9]");
    }
    auto hp = parse_host_port(aa.address);
    if (!hp.ok()) return Status(hp.status().code(), "appliance " + aa.address + ": " + hp.status().message());
    auto a = std::make_unique<Appliance>();
    a->address = aa.address;
    a->control_addr = *hp;
    a->weight_units = weight_units(aa.weight);
    apps_.push_back(std::move(a));
  }

  uint32_t bind_ip = 0;
  if (c.bind_ip.empty()) {
    auto src = source_ip_toward(apps_[0]->control_addr.ip);
    if (!src.ok()) return src.status();
    bind_ip = *src;
  } else {
    auto ip = parse_ipv4(c.bind_ip);
    if (!ip.ok()) return Status::invalid_argument("bind address: " + ip.status().message());
    bind_ip = *ip;
  }
  TransportConfig tc;
  tc.kind = c.transport;
  tc.bind_ip = bind_ip;
  tc.tos = c.tos();
  tc.repair_tos = c.repair_tos();
  tc.udp_port = c.udp_port;
  tc.verify_icrc = c.verify_icrc;
  tc.recv_ecn = c.cnp_reaction;  // a result marked CE cuts the window as a CNP does
  tc.busy_poll_us = c.busy_poll_us;
  tc.gro = c.udp_gro;
  tc.gso = c.udp_gso;
  tc.rdma_device = c.rdma_device;
  tc.rdma_interface = c.rdma_interface;
  tc.max_payload = c.payload_bytes;
  tc.payload_explicit = payload_chosen(c);
  tc.verbs_ops = c.verbs_ops;
  auto opened = open_transport(tc);
  if (!opened.ok()) return opened.status();
  transport_ = std::move(opened).value();
  if (c.wrap_transport) {
    transport_ = c.wrap_transport(std::move(transport_));
    if (!transport_) return Status::invalid_argument("wrap_transport returned no transport");
  }

  return begin_register(*apps_[0], c.job_name, c.slots, c.payload_bytes, c.register_timeout_ms);
}

// Registration with the appliances, one after the other, without blocking: true once every one
// granted the job (create() loops on it; a failover's agreement job is driven by progress()).
Result<bool> Communicator::advance_create() {
  const CommConfig& c = config_;
  while (joined_ < apps_.size()) {
    Appliance& a = *apps_[joined_];
    auto done = advance_register(a);
    if (!done.ok()) return done.status();
    if (!*done) return false;
    a.chunk_elems = static_cast<uint32_t>(a.grant.payload_bytes / elem_size_);
    a.slot_count = a.grant.slot_count;
    a.pkt_cap = transport_->packet_capacity(size_t{a.chunk_elems} * elem_size_);
    a.pkt_mem.assign(a.pkt_cap * a.slot_count * 2, 0);
    a.slots.resize(a.slot_count);
    for (uint32_t s = 0; s < a.slot_count; ++s) {
      Slot& sl = a.slots[s];
      sl.pkt_buf[0] = a.pkt_mem.data() + (2 * size_t{s}) * a.pkt_cap;
      sl.pkt_buf[1] = sl.pkt_buf[0] + a.pkt_cap;
      sl.pkt = sl.pkt_buf[0];
    }
    a.round_base.assign(a.slot_count, 0);
    a.rto_us = c.rto_initial_us;
    a.rto_floor_us = c.rto_initial_us;
    a.window = a.window_min = a.slot_count;
    a.next_seq.assign(a.grant.core_qpns.size(), 0);
    a.deferred.reserve(a.slot_count);
    infos_.push_back({a.address, 0, a.grant, a.chunk_elems});
    if (++joined_ < apps_.size()) {
      SUMCAST_RETURN_IF_ERROR(
          begin_register(*apps_[joined_], c.job_name, c.slots, c.payload_bytes, c.register_timeout_ms));
    }
  }
  size_t total_slots = 0;
  for (size_t i = 0; i < apps_.size(); ++i) {
    if (apps_[i]->peer != i) return Status::internal("transport numbered its peers out of order");
    infos_[i].weight = c.appliances[i].weight;
    peer_app_.push_back(static_cast<int>(i));
    total_slots += apps_[i]->slot_count;
  }
  tx_.reserve(2 * total_slots + kTxFlushAt);
  rx_.resize(kRxBatch);
  next_deadline_ns_ = std::numeric_limits<uint64_t>::max();
  return true;
}

// Starts connecting to a.control_addr to register this rank into `job_name` there; the steps
// follow in advance_register(), which a blocking caller loops on (wait_register()).
Status Communicator::begin_register(Appliance& a, const std::string& job_name, uint16_t slots, uint32_t payload,
                                    uint32_t timeout_ms) {
  const CommConfig& c = config_;
  auto cc = ControlClient::start_connect(a.control_addr.host, a.control_addr.port, c.token);
  if (!cc.ok()) return Status(cc.status().code(), "appliance " + a.address + ": " + cc.status().message());
  a.control = std::move(cc).value();
  RegisterRequest& req = a.join.req;
  req.job_name = job_name;
  req.world_size = c.world_size;
  req.rank = c.rank;
  req.dtype = c.dtype;
  req.op = c.op;
  // What the path carries (the verbs transport clamps a default payload to its port's MTU). A
  // default payload over UDP is the largest RoCE payload the path MTU toward the appliance carries
  // (its control address: the data address comes with the grant, checked below); the grant is
  // the smallest any rank asked for, so ranks on different paths still chunk alike.
  uint32_t want = payload;
  const uint32_t control_mtu = payload_chosen(c) ? 0 : transport_->path_mtu(a.control_addr.ip);
  if (control_mtu != 0 && udp_payload_for_mtu(control_mtu) != 0) want = udp_payload_for_mtu(control_mtu);
  req.max_payload_bytes = static_cast<uint16_t>(std::min<uint32_t>(want, transport_->max_payload()));
  req.slots = slots;
  req.endpoint = transport_->local_endpoint();
  req.deterministic = c.deterministic;
  req.multicast = c.multicast;
  req.loss_notices = c.loss_notices;
  a.join.timeout_ms = timeout_ms;
  a.join.requested = false;
  a.join.deadline_ns = now_ns() + uint64_t{c.connect_timeout_ms} * 1'000'000;
  return {};
}

// One non-blocking step of the registration begin_register() started: true once the grant is in
// (checked, and the job added as a transport peer). Past a step's deadline, the error the
// blocking calls give.
Result<bool> Communicator::advance_register(Appliance& a) {
  const CommConfig& c = config_;
  const uint64_t now = now_ns();
  const std::string registering = "appliance " + a.address + ": registering rank " + std::to_string(c.rank) +
                                  " of job '" + a.join.req.job_name + "': ";
  if (!a.join.requested) {
    auto up = a.control->advance_connect();
    if (!up.ok()) return Status(up.status().code(), "appliance " + a.address + ": " + up.status().message());
    if (!*up) {
      if (now < a.join.deadline_ns) return false;
      return Status::timeout("appliance " + a.address + ": control: waited " + std::to_string(c.connect_timeout_ms) +
                             " ms for " + a.control->waiting_for());
    }
    Status st = a.control->start_register(a.join.req);
    if (!st.ok()) return Status(st.code(), registering + st.message());
    a.join.requested = true;
    a.join.deadline_ns = now + uint64_t{a.join.timeout_ms} * 1'000'000;
  }
  auto grant = a.control->advance_register();
  if (!grant.ok()) return Status(grant.status().code(), registering + grant.status().message());
  if (!grant->has_value()) {
    if (now < a.join.deadline_ns) return false;
    return Status::timeout(registering + "control: waited " + std::to_string(a.join.timeout_ms) + " ms for " +
                           a.control->waiting_for());
  }
  a.grant = std::move(**grant);
  SUMCAST_RETURN_IF_ERROR(accept_grant(a));
  return true;
}

// Sleeps until a.control has something for advance_register() or its step's deadline.
void Communicator::wait_register(const Appliance& a) const {
  const uint64_t now = now_ns();
  if (now >= a.join.deadline_ns) return;
  pollfd p{a.control->fd(), a.control->poll_events(), 0};
  const uint64_t wait_ns = a.join.deadline_ns - now;
  timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
  (void)ppoll(&p, 1, &ts, nullptr);
}

// The grant a.grant checked against what this rank asked for; the job added as a transport peer.
Status Communicator::accept_grant(Appliance& a) {
  const CommConfig& c = config_;
  const JobGrant& g = a.grant;
  if (g.multicast && (g.multicast_ip >> 28) != 0xE) {
    return Status::internal("appliance " + a.address + " granted results by multicast to " +
                            format_ipv4(g.multicast_ip) + ", which is no multicast group");
  }
  if (c.deterministic && !g.deterministic) {
    return Status::unavailable("appliance " + a.address + " did not grant deterministic summation");
  }
  if (g.slot_count == 0 || g.core_qpns.empty() || g.payload_bytes < elem_size_ ||
      g.payload_bytes > wire::kMaxPayloadBytes) {
    return Status::internal("appliance " + a.address + " granted an unusable job (slots " +
                            std::to_string(g.slot_count) + ", payload " + std::to_string(g.payload_bytes) + " bytes, " +
                            std::to_string(g.core_qpns.size()) + " cores)");
  }
  PeerSpec ps;
  ps.ip = g.appliance.ip != 0 ? g.appliance.ip : a.control_addr.ip;
  // Every datagram leaves with DF set: one larger than the path MTU would be dropped, every time.
  if (const uint32_t mtu = transport_->path_mtu(ps.ip); mtu != 0 && wire::roce_len(g.payload_bytes) + 28 > mtu) {
    return Status::invalid_argument("appliance " + a.address + " granted " + std::to_string(g.payload_bytes) +
                                    "-byte payloads: their " + std::to_string(wire::roce_len(g.payload_bytes) + 28) +
                                    "-byte datagrams exceed the path MTU " + std::to_string(mtu) + " toward " +
                                    format_ipv4(ps.ip) + " (ask for a smaller payload)");
  }
  ps.udp_port = g.appliance.udp_port != 0 ? g.appliance.udp_port : wire::kRoceUdpPort;
  std::memcpy(ps.mac, g.appliance.mac, 6);
  ps.job_id = g.job_id;
  ps.qkey = g.qkey;
  ps.rank = c.rank;
  ps.dtype = c.dtype;
  ps.op = c.op;
  ps.group = g.multicast ? g.multicast_ip : 0;
  auto peer = transport_->add_peer(ps);
  if (!peer.ok()) return Status(peer.status().code(), "appliance " + a.address + ": " + peer.status().message());
  a.peer = *peer;
  a.last_heard_ns = now_ns();
  a.registered = true;
  return {};
}

std::string Communicator::where(const Appliance& a) const {
  return "appliance " + a.address + " (job '" + config_.job_name + "' id " + std::to_string(a.grant.job_id) + ")";
}

Result<uint64_t> Communicator::start_allreduce(const void* send, void* recv, size_t count) {
  if (!failed_.ok()) return failed_;
  if (count > 0 && (send == nullptr || recv == nullptr)) return Status::invalid_argument("null buffer");
  if (count > wire::kMaxElementIndex) {
    return Status::invalid_argument("count " + std::to_string(count) + " above the wire's 2^40 elements");
  }
  auto op = std::make_unique<Op>();
  op->id = next_id_++;
  op->coll_seq = next_coll_seq_++;
  op->send = static_cast<const uint8_t*>(send);
  op->recv = static_cast<uint8_t*>(recv);
  op->count = count;
  op->parts.resize(apps_.size());
  std::vector<uint64_t> units(apps_.size());
  for (size_t i = 0; i < apps_.size(); ++i) units[i] = apps_[i]->weight_units;
  const auto ranges = contiguous_ranges(count, units);  // placement.h: the split every rank makes
  for (size_t i = 0; i < apps_.size(); ++i) {
    Appliance& a = *apps_[i];
    Op::Part& p = op->parts[i];
    p.begin = ranges[i].first;
    p.end = ranges[i].second;
    p.chunks = (p.end - p.begin + a.chunk_elems - 1) / a.chunk_elems;
    p.first_g = a.assigned;
    a.assigned += p.chunks;
    op->chunks_left += p.chunks;
  }
  ++stats_.calls;
  const uint64_t id = op->id;
  Op* raw = op.get();
  ops_.push_back(std::move(op));
  if (raw->chunks_left == 0) {
    raw->done = true;
    return id;
  }
  const uint64_t now = now_ns();
  for (size_t i = 0; i < apps_.size(); ++i) {
    Appliance& a = *apps_[i];
    const Op::Part& p = raw->parts[i];
    if (a.lost) continue;  // its chunks go out from their new home
    const uint64_t stop = std::min<uint64_t>(p.first_g + a.slot_count, a.assigned);
    for (uint64_t g = p.first_g; g < stop; ++g) {
      if (g < a.slot_count || a.answered(g - a.slot_count)) offer(a, g, now);  // else issued when that is answered
    }
    issue_deferred(a, now);
  }
  flush_tx();
  return id;
}

void Communicator::issue(Appliance& a, uint64_t g, uint64_t now, bool replay) {
  Op* op = nullptr;
  const auto ai = static_cast<size_t>(peer_app_[a.peer]);
  for (auto& o : ops_) {
    const Op::Part& p = o->parts[ai];
    if (g >= p.first_g && g < p.first_g + p.chunks) {
      op = o.get();
      break;
    }
  }
  if (op == nullptr) return;  // cannot happen: [0, assigned) belongs to started calls
  const Op::Part& p = op->parts[ai];
  const uint64_t begin = p.begin + (g - p.first_g) * a.chunk_elems;
  const auto n = static_cast<uint16_t>(std::min<uint64_t>(a.chunk_elems, p.end - begin));
  const auto s = static_cast<uint32_t>(g % a.slot_count);
  Slot& sl = a.slots[s];
  sl.busy = true;
  sl.g = g;
  sl.round = static_cast<uint32_t>(g / a.slot_count);
  sl.coll_seq = op->coll_seq;
  sl.elem_offset = begin;
  sl.elem_count = n;
  sl.op = op;
  if (sl.held) return;  // goes out when the held round is answered
  sl.pkt = sl.pkt_buf[sl.round & 1];
  sl.len = build_contribution(a, s, sl.pkt, g, sl.round - a.round_base[s], sl.coll_seq, begin, n,
                              op->send + begin * elem_size_);
  send_first(a, sl, now);
  ++(replay ? stats_.replayed_chunks : stats_.chunks);
  if (tx_.size() >= kTxFlushAt) flush_tx();
}

// Writes the contribution packet of chunk g (carrying `count` elements from `offset`) for slot s,
// as the appliance's job numbers its rounds; returns its length.
uint32_t Communicator::build_contribution(Appliance& a, uint32_t s, uint8_t* pkt, uint64_t g, uint32_t round,
                                          uint32_t coll_seq, uint64_t offset, uint16_t count, const uint8_t* payload) {
  wire::SumcastHeader h;
  h.type = wire::MsgType::kContribution;
  h.dtype = config_.dtype;
  h.op = config_.op;
  h.job_id = a.grant.job_id;
  h.rank = config_.rank;
  h.slot = static_cast<uint16_t>(s);
  h.round = round;
  h.coll_seq = coll_seq;
  h.elem_count = count;
  h.flags = (round & 1) != 0 ? wire::kFlagSlotVersion : 0;
  h.elem_offset = offset;
  const size_t core = s % a.grant.core_qpns.size();
  if (a.sends_notices()) {  // every packet built here goes out next as a first transmission
    const uint32_t seq = a.next_seq[core];
    a.next_seq[core] = (seq + 1) & wire::kTxSeqMask;
    wire::set_contribution_tx_seq(&h, seq);
    a.slots[s].tx_seq = seq;
  }
  const uint32_t dest_qp = a.grant.core_qpns[core];
  return static_cast<uint32_t>(
      transport_->build(pkt, a.peer, dest_qp, static_cast<uint32_t>(g & 0xFFFFFF), h, payload));
}

// The first transmission of what the slot now carries (sl.pkt, sl.len): timers start.
void Communicator::send_first(Appliance& a, Slot& sl, uint64_t now) {
  if (a.busy == 0) a.last_progress_ns = now;
  ++a.busy;
  sl.retries = 0;
  sl.fast_retried = false;
  sl.dup_noticed = false;
  sl.revealed_ns = 0;
  sl.rto_us = a.rto_us;
  sl.sent_ns = now;
  sl.last_tx_ns = now;
  sl.last_tx_seq = sl.first_tx_seq = ++a.tx_seq;
  sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
  next_deadline_ns_ = std::min(next_deadline_ns_, sl.deadline_ns);
  tx_.push_back({a.peer, sl.pkt, sl.len});
}

void Communicator::offer(Appliance& a, uint64_t g, uint64_t now) {
  if (a.deferred.empty() && (a.busy < a.window || g == a.low) && send_room(a, now)) {
    issue(a, g, now);
    return;
  }
  a.deferred.push_back(g);
  std::push_heap(a.deferred.begin(), a.deferred.end(), std::greater<>());
}

void Communicator::issue_deferred(Appliance& a, uint64_t now) {
  while (!a.deferred.empty() && (a.busy < a.window || a.deferred.front() == a.low) && send_room(a, now)) {
    std::pop_heap(a.deferred.begin(), a.deferred.end(), std::greater<>());
    const uint64_t g = a.deferred.back();
    a.deferred.pop_back();
    issue(a, g, now);
  }
}

// Whether a new chunk for `a` may go out now (see Send queue in the header). It may while the
// budget lasts; at its end, what is queued for sending is flushed and the transport's queue looked
// at again. Held back, the chunk waits for the next result or check_timers, at most
// kSendRecheckNs.
bool Communicator::send_room(const Appliance& a, uint64_t now) {
  if (config_.send_queue_us == 0 || !send_queue_known_) return true;
  if (send_budget_ < a.pkt_cap) {
    if (send_looked_) {  // looked in this receive batch already: the batch's end looks again
      send_held_ = true;
      return false;
    }
    flush_tx();
    const std::optional<size_t> queued = transport_->send_queue_bytes();
    if (!queued) {
      send_queue_known_ = false;
      return true;
    }
    stats_.send_queue_peak = std::max<uint64_t>(stats_.send_queue_peak, *queued);
    const size_t limit = send_queue_limit();
    send_budget_ = limit > *queued ? limit - *queued : 0;
    if (send_budget_ < a.pkt_cap) {
      if (!send_held_) ++stats_.send_queue_holds;
      send_held_ = true;
      next_deadline_ns_ = std::min(next_deadline_ns_, now + kSendRecheckNs);
      return false;
    }
  }
  send_budget_ -= a.pkt_cap;
  return true;
}

// Chunks the send queue held back (send_held_) get another look, every appliance's in turn.
void Communicator::release_held(uint64_t now) {
  if (!send_held_ || !failed_.ok()) return;
  send_held_ = false;
  for (auto& a : apps_) {
    if (!a->lost) issue_deferred(*a, now);
  }
}

// The larger of kSendQueueFloor and send_queue_us of the recent result rate.
size_t Communicator::send_queue_limit() const {
  const double bytes = result_rate_ * config_.send_queue_us / 1e6;
  return std::max(kSendQueueFloor, static_cast<size_t>(bytes));
}

// Result payload bytes as they arrive: the rate, smoothed over kResultRateIntervalNs intervals.
void Communicator::note_delivered(size_t bytes, uint64_t now) {
  if (rate_since_ns_ == 0) rate_since_ns_ = now;
  rate_bytes_ += bytes;
  const uint64_t span = now - rate_since_ns_;
  if (span < kResultRateIntervalNs) return;
  const double rate = static_cast<double>(rate_bytes_) * 1e9 / static_cast<double>(span);
  result_rate_ = result_rate_ == 0 ? rate : 0.75 * result_rate_ + 0.25 * rate;
  rate_bytes_ = 0;
  rate_since_ns_ = now;
}

// A CNP from `a`: cut its window multiplicatively, at most once per interval (see the header).
void Communicator::on_cnp(Appliance& a, uint64_t now) {
  if (!config_.cnp_reaction) return;
  const uint64_t interval_ns = config_.window_cut_interval_us != 0 ? uint64_t{config_.window_cut_interval_us} * 1000
                               : a.have_rtt                        ? a.srtt_ns
                                                                   : uint64_t{config_.rto_initial_us} * 1000;
  if (a.last_cut_ns != 0 && now - a.last_cut_ns < interval_ns) return;
  a.last_cut_ns = now;
  a.clean_results = 0;
  const uint32_t cut =
      std::max<uint32_t>(1, static_cast<uint32_t>(uint64_t{a.window} * config_.window_cut_percent / 100));
  if (cut >= a.window) return;  // already at one slot
  a.window = cut;
  a.window_min = std::min(a.window_min, cut);
  ++stats_.window_cuts;
}

void Communicator::flush_tx() {
  if (tx_.empty() || !failed_.ok()) {
    tx_.clear();
    return;
  }
  Status st = transport_->send(tx_);
  tx_.clear();
  if (!st.ok()) fail(st);
}

void Communicator::on_received(uint64_t now) {
  send_looked_ = false;
  for (int batch = 0; batch < kRxBatchesPerRound && failed_.ok(); ++batch) {
    const size_t n = transport_->receive(rx_);
    if (Status h = transport_->health(); !h.ok()) {  // an unusable transport fails the calls now
      fail(std::move(h));
      return;
    }
    if (n == 0) return;
    send_looked_ = true;  // chunks held by the send queue go out together at the batch's end
    for (size_t i = 0; i < n && failed_.ok(); ++i) {
      const Received& r = rx_[i];
      const int ai = r.peer < peer_app_.size() ? peer_app_[r.peer] : -1;
      if (ai < 0 || apps_[static_cast<size_t>(ai)]->lost) {  // declared lost: nothing it says counts
        ++stats_.lost_packets;
        continue;
      }
      Appliance& a = *apps_[static_cast<size_t>(ai)];
      a.last_heard_ns = now;
      a.probes_unanswered = 0;
      if (r.cnp || r.ce) {  // CNPs are rare (one per interval per appliance); a clock read each
        on_cnp(a, now_ns());
        if (r.cnp) continue;
      }
      if (r.hdr.type == wire::MsgType::kAbort) {
        Status st = Status::aborted(where(a) + " aborted the job: " + abort_reason_text(r.hdr.status));
        on_lost(static_cast<size_t>(ai), std::move(st),
                r.hdr.status == static_cast<uint8_t>(wire::AbortReason::kMemberLeft));
        if (!failed_.ok()) return;
        continue;
      }
      const bool dup_notice = r.hdr.type == wire::MsgType::kDuplicateNotice;
      if ((dup_notice || r.hdr.type == wire::MsgType::kLossNotice) && !a.sends_notices()) {
        // not granted: an appliance that never sends them, so a type unknown here
        ++comm_drops_[static_cast<size_t>(DropReason::kBadType)];
        continue;
      }
      if (r.hdr.type == wire::MsgType::kLossNotice) {
        on_loss_notice(a, r.hdr, r.src_qp, now);
        continue;
      }
      if (r.hdr.slot >= a.slot_count) {
        ++comm_drops_[static_cast<size_t>(DropReason::kBadSlot)];
        continue;
      }
      Slot& sl = a.slots[r.hdr.slot];
      const uint32_t round = r.hdr.round + a.round_base[r.hdr.slot];  // the absolute round
      if (dup_notice) {
        // For the round this slot carries: its answer is the first transmission's. Any other
        // (answered since, or a replayed round's) says nothing more.
        if (sl.busy && !sl.held && round == sl.round && sl.carries(r.hdr)) sl.dup_noticed = true;
        continue;
      }
      if (sl.held && round == sl.last_round) {  // another rank's round, replayed: this rank has its result
        sl.held = false;
        --a.busy;
        a.last_progress_ns = now;
        a.probe_slot = r.hdr.slot;
        ++stats_.duplicates;
        if (sl.busy) issue(a, sl.g, now, true);
        continue;
      }
      if (!sl.busy || sl.held || round != sl.round) {
        if (sl.completed_once && round == sl.last_round) {
          ++stats_.duplicates;
          if (sl.last_retried) {  // both the first answer and a retransmission's came: spurious
            sl.last_retried = false;
            ++stats_.spurious_retransmissions;
            // The answer taken first was the first transmission's: the resend proves nothing
            // about the chunks sent before it (see Timers). Other evidence it replaced goes too:
            // the timers' probes gather it again if there was a loss.
            if (a.retx_answered_tx_ns == sl.last_round_tx_ns) a.retx_answered_tx_ns = 0;
            if (!sl.fast_retried) {  // the RTO fired too early (a fast one says nothing about it)
              a.rto_floor_us = std::min(config_.rto_max_us, a.rto_floor_us + a.rto_floor_us / 2);
              a.rto_us = std::max(a.rto_us, a.rto_floor_us);
            }
          }
        } else {
          ++comm_drops_[static_cast<size_t>(DropReason::kStaleRound)];
        }
        continue;
      }
      if (!sl.carries(r.hdr)) {
        ++comm_drops_[static_cast<size_t>(DropReason::kChunkMismatch)];
        continue;
      }
      std::memcpy(sl.op->recv + sl.elem_offset * elem_size_, r.payload, r.payload_len);
      note_delivered(r.payload_len, now);
      if (sl.retries == 0) update_rto(a, now - sl.sent_ns);
      // Its first transmission: the answer to a retransmitted chunk may be the first one's (a stall
      // probe's round completes when the late rank's contribution arrives), so its last
      // transmission proves something about the chunks sent before it only if their answers do
      // not follow within a grace (check_timers); taking it at once turned every answered stall
      // probe into a window's worth of presumed losses, all spurious. With notices the appliance
      // says so when a resend found the round holding the first copy (a duplicate notice): then
      // the answer is the first copy's and proves nothing about the resend.
      a.answered_tx_ns = std::max(a.answered_tx_ns, sl.sent_ns);
      if (sl.retries == 0 || sl.dup_noticed) a.first_answered_at_ns = now;
      if (sl.retries != 0 && !sl.dup_noticed && sl.last_tx_ns > a.retx_answered_tx_ns) {
        a.retx_answered_tx_ns = sl.last_tx_ns;
        a.retx_answered_at_ns = now;
        a.retx_grace_ns = uint64_t{std::max(a.rto_us, sl.rto_us)} * 1000;
      }
      sl.busy = false;
      sl.completed_once = true;
      sl.last_round = sl.round;
      sl.last_retried = sl.retries != 0;
      sl.last_round_tx_ns = sl.last_tx_ns;
      sl.last_g = sl.g;
      sl.last_coll_seq = sl.coll_seq;
      sl.last_elem_offset = sl.elem_offset;
      sl.last_elem_count = sl.elem_count;
      sl.last_len = sl.len;
      --a.busy;
      a.last_progress_ns = now;
      a.probe_slot = r.hdr.slot;
      ++stats_.results;
      Op& op = *sl.op;
      sl.op = nullptr;
      if (--op.chunks_left == 0) complete(op);
      fast_retransmit(a, sl, now);
      while (a.low < a.assigned && a.answered(a.low)) ++a.low;
      if (a.window < a.slot_count && ++a.clean_results >= a.window) {  // a window's worth without a cut
        a.window = std::min(a.slot_count, a.window + config_.window_step);
        a.clean_results = 0;
        ++stats_.window_grows;
      }
      const uint64_t next = sl.g + a.slot_count;
      if (next < a.assigned) offer(a, next, now);
      issue_deferred(a, now);
    }
    send_looked_ = false;
    release_held(now);
    flush_tx();
  }
}

// `answered` just got its result: every chunk at least fast_retransmit_after before it that is
// still unanswered and was last sent before `answered` is resent now, all holes at once; a hole
// already resent r times only when `answered` went out r smoothed RTTs after the last resend
// (see Fast retransmission in the header). Only the slots of chunks [low, answered.g - k] are looked at,
// each once: none while results come in order, at most the slot count.
void Communicator::fast_retransmit(Appliance& a, const Slot& answered, uint64_t now) {
  const uint32_t k = config_.fast_retransmit_after;
  if (k == 0 || k >= a.slot_count || answered.g < a.low + k) return;
  const uint64_t srtt_ns = a.have_rtt ? a.srtt_ns : 0;
  const bool notices = a.sends_notices();
  const uint64_t grace_ns = notices ? notice_grace_ns(a) : 0;
  const uint64_t span = std::min<uint64_t>(answered.g - k - a.low + 1, a.slot_count);
  for (uint64_t i = 0; i < span; ++i) {
    Slot& sl = a.slots[(a.low + i) % a.slot_count];
    if (!sl.busy || sl.held || sl.g + k > answered.g || sl.last_tx_seq >= answered.last_tx_seq) continue;
    // Resent already: more likely waiting for another rank's repair than lost again (n - 1 of
    // the n contributions are others'), so again only on a chunk sent `retries` SRTTs after it.
    if (sl.retries != 0 && answered.sent_ns < sl.last_tx_ns + srtt_ns * sl.retries) continue;
    if (config_.retries != 0 && sl.retries >= config_.retries) continue;  // its timer fails the call
    if (notices) {  // most holes are other ranks' losses, which their notices repair: wait a grace
      if (sl.revealed_ns == 0) {
        sl.revealed_ns = now;
        next_deadline_ns_ = std::min(next_deadline_ns_, now + grace_ns);  // check_timers resends then
      }
      if (now < sl.revealed_ns + grace_ns) continue;
    }
    ++stats_.fast_retransmissions;
    resend_early(a, sl, now);
    if (!failed_.ok()) return;
  }
}

// Resends what `sl` carries before its timer (a fast retransmission or a loss notice's).
void Communicator::resend_early(Appliance& a, Slot& sl, uint64_t now) {
  ++sl.retries;
  sl.fast_retried = true;
  sl.revealed_ns = 0;
  sl.last_tx_ns = now;
  sl.last_tx_seq = ++a.tx_seq;
  sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
  next_deadline_ns_ = std::min(next_deadline_ns_, sl.deadline_ns);
  tx_.push_back({a.peer, sl.pkt, sl.len, /*resend=*/true});  // resends never ride in a train (OutPacket)
  if (tx_.size() >= kTxFlushAt) flush_tx();
}

// How long a hole that results revealed waits, with loss notices, before this rank resends it:
// one round trip for another rank's repair to come back, and two mean deviations for the spread
// of round trips (see Loss notices in the header). Results reveal holes only after RTT samples.
uint64_t Communicator::notice_grace_ns(const Appliance& a) const {
  return a.have_rtt ? a.srtt_ns + 2 * a.rttvar_ns : uint64_t{config_.rto_initial_us} * 1000;
}

// A loss notice from `a` (docs/protocol.md §7): the appliance core that sent it (its QP) lacks
// the contribution this rank numbered `h.round` among its first transmissions to that core: a
// later one arrived, and a rank's frames to one address arrive in the order it sent them, so that
// first transmission was lost. Resent at once when a slot of that core still carries it
// unanswered and not resent since; a slot that was resent already is left to its timers (the
// resend may be on its way). A notice that names no slot so (answered meanwhile, from another
// core, or from an appliance that names chunks instead: no kFlagNoticeSeq) is stale.
void Communicator::on_loss_notice(Appliance& a, const wire::SumcastHeader& h, uint32_t src_qp, uint64_t now) {
  ++stats_.loss_notices;
  if ((h.flags & wire::kFlagNoticeSeq) == 0) return;
  const auto& qpns = a.grant.core_qpns;
  const auto it = std::find(qpns.begin(), qpns.end(), src_qp);
  if (it == qpns.end()) return;
  const auto core = static_cast<uint32_t>(it - qpns.begin());
  const auto cores = static_cast<uint32_t>(qpns.size());
  for (uint32_t s = core; s < a.slot_count; s += cores) {
    Slot& sl = a.slots[s];
    if (!sl.busy || sl.held || sl.tx_seq != h.round || sl.retries != 0) continue;
    ++stats_.notice_retransmissions;
    resend_early(a, sl, now);
    return;
  }
}

void Communicator::update_rto(Appliance& a, uint64_t sample_ns) {
  if (!a.have_rtt) {
    a.have_rtt = true;
    a.srtt_ns = sample_ns;
    a.rttvar_ns = sample_ns / 2;
  } else {
    const uint64_t dev = a.srtt_ns > sample_ns ? a.srtt_ns - sample_ns : sample_ns - a.srtt_ns;
    a.rttvar_ns = (3 * a.rttvar_ns + dev) / 4;
    a.srtt_ns = (7 * a.srtt_ns + sample_ns) / 8;
  }
  a.rto_floor_us = std::max(config_.rto_initial_us, a.rto_floor_us - a.rto_floor_us / 512);
  const uint64_t rto_us = (a.srtt_ns + 4 * a.rttvar_ns) / 1000;
  a.rto_us = static_cast<uint32_t>(std::clamp<uint64_t>(rto_us, a.rto_floor_us, config_.rto_max_us));
}

void Communicator::complete(Op& op) {
  op.done = true;
  op.status = Status();
}

// Liveness (see Failover), for aggregator `a` (index ai) quiet since `quiet_since`: after a
// quarter of failover_after_ms of silence, and then every quarter, the round most recently
// completed there is resent, which a live aggregator answers; nothing heard for failover_after_ms,
// probes included, declares it lost (true). With nothing completed there yet there is nothing to
// probe with: unanswered resends count, over four times as long (they cannot tell a late rank
// from a lost aggregator). `next`: when to look again.
bool Communicator::check_liveness(size_t ai, uint64_t quiet_since, const char* while_what, uint64_t now,
                                  uint64_t& next) {
  Appliance& a = *apps_[ai];
  const uint64_t after = uint64_t{config_.failover_after_ms} * 1'000'000;
  const bool probed = a.probe_slot >= 0;
  if (a.probes_unanswered >= kLivenessProbesBeforeLost && now >= quiet_since + (probed ? after : 4 * after)) {
    declare_lost(ai, Status::timeout(where(a) + ": answered nothing for " +
                                     std::to_string((probed ? 1 : 4) * config_.failover_after_ms) + " ms" + while_what +
                                     ", " + std::to_string(a.probes_unanswered) +
                                     (probed ? " liveness probes included" : " retransmissions included")));
    return true;
  }
  if (a.probe_slot >= 0 && now >= quiet_since + after / 4) {
    if (now >= a.next_liveness_ns) {
      Slot& ps = a.slots[static_cast<size_t>(a.probe_slot)];
      if (!ps.held && ps.completed_once) {
        ps.last_retried = false;  // its answer says nothing about the RTO
        tx_.push_back({a.peer, ps.pkt_buf[ps.last_round & 1], ps.last_len, /*resend=*/true});
        ++stats_.liveness_probes;
        ++a.probes_unanswered;
      }
      a.next_liveness_ns = now + after / 4;
    }
    next = std::min(next, a.next_liveness_ns);
  } else if (a.probe_slot >= 0) {
    next = std::min(next, quiet_since + after / 4);
  }
  return false;
}

void Communicator::check_timers(uint64_t now) {
  if (now < next_deadline_ns_) return;
  release_held(now);  // the queue may have drained meanwhile
  if (!failed_.ok()) return;
  uint64_t next = std::numeric_limits<uint64_t>::max();
  // A call waiting (chunks outstanding somewhere) and the last result from anywhere: an aggregator
  // with nothing outstanding from this rank is probed too once that is a quarter of
  // failover_after_ms ago. Its loss would otherwise go unnoticed here while this rank waits on
  // another aggregator for a rank that waits on the lost one: a rank one call behind (its result
  // there lost) declares it lost and agrees on the next aggregator, which the ranks ahead, waiting
  // there for that rank's contribution, never joined (the agreement then timed out and every rank
  // failed; the job's 1-element barrier calls, whose chunk goes to one aggregator, made this common).
  bool waiting = false;
  uint64_t progressed = 0;
  for (const auto& ap : apps_) {
    if (ap->lost) continue;
    waiting = waiting || ap->busy != 0;
    progressed = std::max(progressed, ap->last_progress_ns);
  }
  for (size_t ai = 0; ai < apps_.size(); ++ai) {
    Appliance& a = *apps_[ai];
    if (a.lost) continue;
    if (a.busy == 0) {
      if (waiting && failover_enabled()) {
        check_liveness(ai, std::max(a.last_heard_ns, progressed), " while a call waited elsewhere", now, next);
      }
      if (!failed_.ok()) return;
      continue;
    }
    if (config_.op_timeout_ms != 0) {
      const uint64_t limit = a.last_progress_ns + uint64_t{config_.op_timeout_ms} * 1'000'000;
      if (now >= limit) {
        fail(Status::timeout(where(a) + ": no result for " + std::to_string(config_.op_timeout_ms) + " ms"));
        return;
      }
      next = std::min(next, limit);
    }
    // So that a late rank (descheduled, computing) is not taken for a lost aggregator, silence
    // counts from the last result here or the last packet from it, whichever is later.
    if (failover_enabled() && check_liveness(ai, std::max(a.last_heard_ns, a.last_progress_ns), "", now, next)) {
      if (!failed_.ok()) return;
      continue;
    }
    // Loss notices: holes that results revealed a grace ago and that no repair has answered since.
    if (a.sends_notices()) {
      const uint64_t grace_ns = notice_grace_ns(a);
      for (Slot& sl : a.slots) {
        if (!sl.busy || sl.held || sl.revealed_ns == 0) continue;
        if (now < sl.revealed_ns + grace_ns) {
          next = std::min(next, sl.revealed_ns + grace_ns);
          continue;
        }
        if (config_.retries != 0 && sl.retries >= config_.retries) continue;  // its timer fails the call
        ++stats_.fast_retransmissions;
        resend_early(a, sl, now);
        if (!failed_.ok()) return;
      }
    }
    // An expired chunk is presumed lost only when a chunk sent after it was answered. Otherwise
    // the appliance or a peer rank is stalled (descheduled, late to the call) and resending the
    // whole window would only add to the backlog: once per RTO, when a stalled chunk's timer
    // expired, the oldest stalled chunk goes out as a probe (whether or not its own timer expired)
    // and the other expired timers back off without resending. The oldest, not the oldest
    // expired: a chunk whose timer backed off between two probes would otherwise expire out of
    // phase with them forever and never be resent, and when that chunk's contribution is the one
    // the appliance lacks, every rank keeps probing rounds that wait for it (a livelock seen with
    // six ranks on two loaded CPUs). The globally oldest outstanding round is every rank's oldest.
    // Evidence of loss: a chunk answered whose transmission came after a chunk's last one. An
    // answered first transmission counts at once. An answered retransmission counts only once its
    // own backed-off RTO passed after its answer with no chunk sent once answered meanwhile: if it
    // owed its answer to its first transmission (a stall, not a loss), the answers of the chunks
    // sent with that one follow, and while they keep coming the stall is clearing (a late rank
    // catching up, descheduled again and again on busy CPUs); if nothing follows (results lost,
    // as to a worker deaf to its group), the chunks are resent together. One plain RTO after the
    // answer resent a window's worth, all spurious, when a rank stalled again right after
    // answering the probe's round (allreduce_drops under ASan, once in 14 runs).
    const uint64_t matured_at = std::max(a.retx_answered_at_ns, a.first_answered_at_ns) + a.retx_grace_ns;
    const uint64_t evidence = now >= matured_at ? std::max(a.answered_tx_ns, a.retx_answered_tx_ns) : a.answered_tx_ns;
    const Slot* probe = nullptr;
    if (now >= a.next_probe_ns) {  // one probe per RTO, however many timers expire meanwhile
      // A held round (replayed to a new home after a failover) is outstanding like a busy chunk, and
      // may be the probe too: where it is all this rank has outstanding there, no other answer can
      // reveal its loss, so a lost copy would only back off while every rank waits on its round.
      const auto chunk = [](const Slot& sl) { return sl.held ? sl.last_g : sl.g; };  // its oldest outstanding
      bool expired = false;
      for (const Slot& sl : a.slots) {
        if ((!sl.busy && !sl.held) || evidence > sl.last_tx_ns) continue;
        expired = expired || sl.deadline_ns <= now;
        if (!probe || chunk(sl) < chunk(*probe)) probe = &sl;
      }
      if (!expired) probe = nullptr;
    }
    for (uint32_t s = 0; s < a.slot_count; ++s) {
      Slot& sl = a.slots[s];
      if (!sl.busy && !sl.held) continue;
      if (sl.deadline_ns <= now && evidence <= sl.last_tx_ns && &sl != probe && a.retx_answered_tx_ns > sl.last_tx_ns) {
        next = std::min(next, matured_at);  // evidence pending: decide when it matures
        continue;
      }
      if (sl.deadline_ns <= now && evidence <= sl.last_tx_ns && &sl != probe) {
        ++stats_.silent_backoffs;
        sl.rto_us = std::min(sl.rto_us * 2, config_.rto_max_us);
        sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
      } else if (sl.deadline_ns <= now || &sl == probe) {
        if (config_.retries != 0 && sl.retries >= config_.retries) {
          declare_lost(ai, Status::timeout(where(a) + ": no result for slot " + std::to_string(s) + " round " +
                                           std::to_string(sl.held ? sl.last_round : sl.round) + " after " +
                                           std::to_string(sl.retries) + " retransmissions"));
          if (!failed_.ok()) return;
          break;
        }
        ++sl.retries;
        sl.fast_retried = false;
        ++stats_.retransmissions;
        if (evidence <= sl.last_tx_ns) ++stats_.stall_probes;  // nothing sent after it answered
        if (a.probe_slot < 0) ++a.probes_unanswered;           // nothing completed here to probe with: resends must do
        sl.rto_us = std::min(sl.rto_us * 2, config_.rto_max_us);
        sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
        sl.last_tx_ns = now;
        sl.last_tx_seq = ++a.tx_seq;
        if (&sl == probe) a.next_probe_ns = sl.deadline_ns;
        tx_.push_back({a.peer, sl.pkt, sl.len, /*resend=*/true});
        if (tx_.size() >= kTxFlushAt) flush_tx();
        if (!failed_.ok()) return;
      }
      next = std::min(next, sl.deadline_ns);
    }
  }
  if (send_held_) next = std::min(next, now + kSendRecheckNs);
  next_deadline_ns_ = next;
}

void Communicator::poll_control() {
  for (size_t i = 0; i < apps_.size() && failed_.ok(); ++i) {
    Appliance& a = *apps_[i];
    if (a.lost || !a.control) continue;
    Status st = a.control->poll();
    if (!st.ok()) {
      const bool secondary = aborted_for(st, wire::AbortReason::kMemberLeft);
      on_lost(i, st.with_context(where(a) + ": "), secondary);
    }
  }
}

bool Communicator::failover_enabled() const {
  switch (config_.failover) {
    case CommConfig::Failover::kOn:
      return true;
    case CommConfig::Failover::kOff:
      return false;
    case CommConfig::Failover::kAuto:
      break;
  }
  return config_.appliances.size() > 1;
}

// An aggregator failed the job or its connection. A "member left" abort is either a rank gone
// (then every aggregator says so: the communicator fails, as without failover) or a rank that
// declared this aggregator lost and closed its connection to it (then only this one does).
void Communicator::on_lost(size_t index, Status why, bool member_left) {
  if (!failover_enabled()) {
    fail(member_left ? root_cause(std::move(why)) : std::move(why));
    return;
  }
  if (member_left) {
    const uint64_t deadline = now_ns() + kRootCauseWaitNs;
    for (bool primary = false; !primary;) {
      for (size_t j = 0; j < apps_.size() && !primary; ++j) {
        Appliance& o = *apps_[j];
        if (j == index || o.lost || !o.control) continue;
        Status st = o.control->poll();
        if (st.ok()) continue;
        if (aborted_for(st, wire::AbortReason::kMemberLeft)) {
          fail(Status(why.code(), why.message() + "; " + where(o) + " too: a rank left the job"));
          return;
        }
        // A primary failure elsewhere (the abort here is its echo): that one is lost first.
        declare_lost(j, st.with_context(where(o) + ": "));
        if (!failed_.ok()) return;
        primary = true;
      }
      if (primary || now_ns() >= deadline) break;
      poll_set(/*with_transport=*/false, /*skip=*/index).wait(5'000'000);
    }
  }
  declare_lost(index, std::move(why));
}

std::string Communicator::lost_summary() const {
  std::string out;
  for (const FailoverEvent& e : failover_log_) {
    out += (out.empty() ? "" : "; ") + e.lost + " lost (" + e.reason + "), its range moved to " + e.new_home;
  }
  for (const auto& a : apps_) {
    if (a->lost) out += (out.empty() ? "" : "; ") + a->address + " lost (" + a->lost_reason + ")";
  }
  return out;
}

// Stops using aggregator `index` (its packets are ignored from now on, its control connection is
// closed) and starts the agreement on its replacement, unless one is under way (which then
// either includes it, when this rank's view reached the agreement first, or the next one will).
void Communicator::declare_lost(size_t index, Status why) {
  if (!failover_enabled()) {
    fail(std::move(why));
    return;
  }
  Appliance& a = *apps_[index];
  if (a.lost) return;
  give_up(a, why.message());
  if (every_aggregator_lost()) {  // nothing to agree on or move to: a failover under way ends here
    fail(all_lost(agreement_ ? "failover " + std::to_string(agreement_->epoch) + " was agreeing on " +
                                   apps_[agreement_->coordinator]->address
                             : ""));
    return;
  }
  if (!agreement_) start_agreement();
}

std::string Communicator::failover_job_name(uint32_t epoch, const std::string& what) const {
  std::string suffix = "~f" + std::to_string(epoch) + what;
  std::string base = config_.job_name;
  if (base.size() + suffix.size() > kMaxJobNameLen) {  // keep it unique: a hash of the whole name
    uint32_t h = 2166136261u;
    for (unsigned char ch : base) h = (h ^ ch) * 16777619u;
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", h);
    base = base.substr(0, kMaxJobNameLen - suffix.size() - 8) + hex;
  }
  return base + suffix;
}

void Communicator::start_agreement() {
  if (epoch_ >= config_.failover_max) {
    fail(Status::aborted("aggregator lost after " + std::to_string(epoch_) + " failovers (failover_max " +
                         std::to_string(config_.failover_max) + "): " + lost_summary()));
    return;
  }
  size_t coordinator = apps_.size();
  for (size_t i = 0; i < apps_.size(); ++i) {
    if (!apps_[i]->lost) {
      coordinator = i;
      break;
    }
  }
  if (coordinator == apps_.size()) {
    fail(all_lost(""));
    return;
  }
  auto ag = std::make_unique<Agreement>();
  ag->epoch = ++epoch_;
  ag->coordinator = coordinator;
  ag->t0 = now_ns();
  CommConfig cc;
  cc.job_name = failover_job_name(ag->epoch, "a");
  cc.rank = config_.rank;
  cc.world_size = config_.world_size;
  cc.appliances = {{apps_[coordinator]->address, 1.0}};
  cc.token = config_.token;
  cc.dtype = wire::Dtype::kInt32;
  cc.op = wire::ReduceOp::kMin;
  cc.bind_ip = config_.bind_ip;
  cc.rto_initial_us = config_.rto_initial_us;
  cc.rto_max_us = config_.rto_max_us;
  cc.op_timeout_ms = config_.failover_timeout_ms;
  cc.connect_timeout_ms = config_.connect_timeout_ms;
  cc.register_timeout_ms = config_.failover_timeout_ms;
  cc.failover = CommConfig::Failover::kOff;
  ag->mine.resize(apps_.size());
  for (size_t i = 0; i < apps_.size(); ++i) ag->mine[i] = apps_[i]->lost ? 0 : 1;
  auto comm = start_create(cc);
  if (!comm.ok()) {
    fail(failover_failed(*ag, comm.status()));
    return;
  }
  ag->comm = std::move(comm).value();
  agreement_ = std::move(ag);
}

// Called from progress(): moves the failover on as far as it goes without blocking.
void Communicator::poll_failover() {
  if (!agreement_) return;
  auto done = advance_failover(*agreement_);
  if (!done.ok()) {
    Status st = failover_failed(*agreement_, done.status());
    fail(std::move(st));
    return;
  }
  if (!*done) return;
  agreement_.reset();
  for (const auto& a : apps_) {  // lost since the agreement began: the next one
    if (a->lost) {
      start_agreement();
      break;
    }
  }
}

bool Communicator::every_aggregator_lost() const {
  return !apps_.empty() && std::all_of(apps_.begin(), apps_.end(), [](const auto& a) { return a->lost; });
}

// The error once every aggregator is lost; `tried`: the failover under way, if any.
Status Communicator::all_lost(const std::string& tried) const {
  return Status::unavailable("every aggregator is lost, none is left to fail over to: " + lost_summary() +
                             (tried.empty() ? "" : " (" + tried + ")"));
}

// Control connections that broke since they were last polled: those aggregators are lost too
// (without a failover of their own), so that a failed failover says whether any is left.
void Communicator::notice_lost() {
  for (auto& ap : apps_) {
    Appliance& a = *ap;
    if (a.lost || !a.control) continue;
    Status st = a.control->poll();
    if (!st.ok()) give_up(a, st.with_context(where(a) + ": ").message());
  }
}

// Stops using aggregator a: its packets are ignored from now on, its control connection closed.
void Communicator::give_up(Appliance& a, std::string reason) {
  a.lost = true;
  a.lost_reason = std::move(reason);
  a.lost_ns = now_ns();
  a.control.reset();  // a frozen aggregator that wakes up sees this rank gone and aborts its job
  peer_app_[a.peer] = -1;
}

// Why failover ag failed, with what was tried and what is lost.
Status Communicator::failover_failed(const Agreement& ag, const Status& why) {
  const std::string tried = "failover " + std::to_string(ag.epoch) + " agreeing on " + apps_[ag.coordinator]->address;
  // A connection to the aggregator the failover was using that broke (reset, closed, refused)
  // says it is gone too, even before this rank's own connection to it shows it.
  const size_t target = ag.step == Agreement::Step::kRehoming ? ag.home_index : ag.coordinator;
  if (why.code() == StatusCode::kIoError && target < apps_.size() && !apps_[target]->lost) {
    give_up(*apps_[target], "the failover's connection to it broke: " + why.message());
  }
  notice_lost();
  if (every_aggregator_lost()) return all_lost(tried + ": " + why.message());
  return Status(why.code(), tried + " (" + lost_summary() + "): " + why.message());
}

// One step after the other, while none has to wait: true once every agreed-lost aggregator moved.
Result<bool> Communicator::advance_failover(Agreement& ag) {
  for (;;) {
    switch (ag.step) {
      case Agreement::Step::kJoining: {
        auto up = ag.comm->advance_create();
        if (!up.ok()) return up.status();
        if (!*up) return false;
        SUMCAST_RETURN_IF_ERROR(agree_on_mine(ag));
        ag.step = Agreement::Step::kWhoIsLost;
        break;
      }
      case Agreement::Step::kWhoIsLost: {
        Status st;
        if (!ag.comm->test(ag.request, &st)) return false;
        if (!st.ok()) return st;
        ag.alive = ag.agreed;
        SUMCAST_RETURN_IF_ERROR(give_up_agreed_lost(ag));
        SUMCAST_RETURN_IF_ERROR(agree_on_mine(ag));
        ag.step = Agreement::Step::kFirstRounds;
        break;
      }
      case Agreement::Step::kFirstRounds: {
        Status st;
        if (!ag.comm->test(ag.request, &st)) return false;
        if (!st.ok()) return st;
        // Kept until the next failover or the end: leaving now could end the agreement job under
        // a rank whose result was lost and that still retransmits for it.
        agreement_comm_ = std::move(ag.comm);
        ag.step = Agreement::Step::kRehoming;
        SUMCAST_RETURN_IF_ERROR(begin_rehome(ag));
        break;
      }
      case Agreement::Step::kRehoming: {
        if (ag.rehomed == ag.lost.size()) return true;
        auto up = advance_register(*ag.home);
        if (!up.ok()) return up.status();
        if (!*up) return false;
        SUMCAST_RETURN_IF_ERROR(rehome(ag));
        if (++ag.rehomed < ag.lost.size()) SUMCAST_RETURN_IF_ERROR(begin_rehome(ag));
        break;
      }
    }
  }
}

// Starts the agreement job's all-reduce of ag.mine into ag.agreed (ag.request).
Status Communicator::agree_on_mine(Agreement& ag) {
  ag.agreed.assign(ag.mine.size(), 0);
  auto id = ag.comm->start_allreduce(ag.mine.data(), ag.agreed.data(), ag.mine.size());
  if (!id.ok()) return id.status();
  ag.request = *id;
  return {};
}

// The union of what the ranks declared lost is in ag.alive: this rank gives up the aggregators
// another rank declared lost too (its state there is frozen from now on), and puts the first
// round it lacks per lost aggregator and slot into ag.mine, for the second all-reduce.
Status Communicator::give_up_agreed_lost(Agreement& ag) {
  for (size_t i = 0; i < apps_.size(); ++i) {
    if (ag.alive[i] != 0) continue;
    Appliance& a = *apps_[i];
    if (!a.lost) give_up(a, "another rank declared it lost");
    ag.lost.push_back(i);
  }
  if (ag.lost.empty() || ag.alive[ag.coordinator] == 0) {
    return Status::internal("the ranks' views of what is lost do not fit");
  }
  // Per lost aggregator and slot, the first round some rank lacks (docs/failover.md).
  ag.mine.clear();
  for (size_t i : ag.lost) {
    for (const Slot& sl : apps_[i]->slots) {
      const uint64_t r = sl.completed_once ? uint64_t{sl.last_round} + 1 : 0;
      if (r > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        return Status::unavailable("rounds beyond 2^31 are not agreed on");
      }
      ag.mine.push_back(static_cast<int32_t>(r));
    }
  }
  return {};
}

// Starts registering lost[rehomed]'s new job on the next aggregator after it that is up (a pure
// function of the agreed set, so every rank picks the same).
Status Communicator::begin_rehome(Agreement& ag) {
  const size_t i = ag.lost[ag.rehomed];
  size_t home = apps_.size();
  for (size_t k = 1; k < apps_.size(); ++k) {
    const size_t j = (i + k) % apps_.size();
    if (ag.alive[j] != 0) {
      home = j;
      break;
    }
  }
  if (home == apps_.size()) return Status::unavailable("no aggregator left");
  ag.home_index = home;
  const Appliance& old = *apps_[i];
  ag.home = std::make_unique<Appliance>();
  Appliance& a = *ag.home;
  a.address = apps_[home]->address;
  a.control_addr = apps_[home]->control_addr;
  a.weight_units = old.weight_units;
  const uint32_t chunk_bytes = old.chunk_elems * static_cast<uint32_t>(elem_size_);
  return begin_register(a, failover_job_name(ag.epoch, "d" + std::to_string(i)), static_cast<uint16_t>(old.slot_count),
                        chunk_bytes, config_.failover_timeout_ms);
}

// lost[rehomed]'s new job is granted (ag.home): moves the lost aggregator's range, chunk
// numbering and slot state there, and resends what some rank lacks from the agreed first rounds
// (per slot) on.
Status Communicator::rehome(Agreement& ag) {
  const size_t index = ag.lost[ag.rehomed];
  Appliance& old = *apps_[index];
  const uint64_t lost_ns = old.lost_ns;
  std::unique_ptr<Appliance> na = std::move(ag.home);
  Appliance& a = *na;
  const uint32_t chunk_bytes = old.chunk_elems * static_cast<uint32_t>(elem_size_);
  const std::vector<int32_t> first_rounds(
      ag.agreed.begin() + static_cast<std::ptrdiff_t>(ag.rounds_at),
      ag.agreed.begin() + static_cast<std::ptrdiff_t>(ag.rounds_at + old.slot_count));
  ag.rounds_at += old.slot_count;
  const uint32_t epoch = ag.epoch;
  const uint64_t t0 = ag.t0;
  if (a.grant.slot_count != old.slot_count || a.grant.payload_bytes < chunk_bytes) {
    return Status::unavailable("new home " + a.address + " granted " + std::to_string(a.grant.slot_count) +
                               " slots of " + std::to_string(a.grant.payload_bytes) + " bytes; the lost " +
                               old.address + " had " + std::to_string(old.slot_count) + " of " +
                               std::to_string(chunk_bytes));
  }
  if (a.peer != peer_app_.size()) return Status::internal("transport numbered its peers out of order");
  peer_app_.push_back(static_cast<int>(index));
  a.chunk_elems = old.chunk_elems;
  a.slot_count = old.slot_count;
  a.pkt_cap = old.pkt_cap;
  a.pkt_mem = std::move(old.pkt_mem);  // the slots' packet pointers stay valid
  a.slots = std::move(old.slots);
  a.assigned = old.assigned;
  a.rto_us = config_.rto_initial_us;
  a.rto_floor_us = config_.rto_initial_us;
  // A new aggregator and path: the congestion window starts at S again. Chunks the old window
  // held back are issued below with the rest (their slots are free). Its cores count this rank's
  // first transmissions from 0.
  a.window = a.window_min = a.slot_count;
  a.next_seq.assign(a.grant.core_qpns.size(), 0);
  a.low = old.low;
  a.deferred.reserve(a.slot_count);
  a.round_base.resize(a.slot_count);
  const uint64_t now = now_ns();
  a.last_progress_ns = now;
  FailoverEvent ev;
  ev.lost = old.address;
  ev.reason = old.lost_reason;
  ev.new_home = a.address;
  ev.epoch = epoch;
  const uint64_t replayed_before = stats_.replayed_chunks;
  std::vector<uint8_t> payload;
  for (uint32_t s = 0; s < a.slot_count; ++s) {
    Slot& sl = a.slots[s];
    const int64_t last = sl.completed_once ? int64_t{sl.last_round} : -1;
    const int64_t r = first_rounds[s];
    a.round_base[s] = static_cast<uint32_t>(r);
    sl.held = false;
    if (r == last) {  // this rank has round r, another lacks it: send it again from the kept packet
      const size_t len = size_t{sl.last_elem_count} * elem_size_;
      uint8_t* pkt = sl.pkt_buf[sl.last_round & 1];
      payload.assign(pkt + transport_->payload_offset(), pkt + transport_->payload_offset() + len);
      sl.last_len = build_contribution(a, s, pkt, sl.last_g, 0, sl.last_coll_seq, sl.last_elem_offset,
                                       sl.last_elem_count, payload.data());
      sl.held = true;
      sl.pkt = pkt;
      sl.len = sl.last_len;
      send_first(a, sl, now);
      ++stats_.replayed_chunks;
      ++stats_.replayed_completed;
      if (tx_.size() >= kTxFlushAt) flush_tx();
    } else if (r != last + 1) {
      return Status::internal("slot " + std::to_string(s) + ": the ranks agreed on round " + std::to_string(r) +
                              " but this rank completed round " + std::to_string(last));
    }
  }
  old.slots.clear();
  apps_[index] = std::move(na);  // from here on, `old` is gone
  infos_[index].address = a.address;
  infos_[index].grant = a.grant;
  for (uint32_t s = 0; s < a.slot_count; ++s) {
    Slot& sl = a.slots[s];
    uint64_t g = 0;
    const bool was_busy = sl.busy;
    if (was_busy) {
      g = sl.g;  // outstanding at the lost aggregator: resend (or queue behind the held round)
      sl.busy = false;
    } else {
      g = (sl.completed_once ? uint64_t{sl.last_round} + 1 : 0) * a.slot_count + s;  // assigned while it was lost
    }
    if (g < a.assigned) issue(a, g, now, was_busy);
  }
  flush_tx();
  ev.replayed = stats_.replayed_chunks - replayed_before;
  ev.ms = (now_ns() - std::min(t0, lost_ns)) / 1'000'000;
  failover_log_.push_back(std::move(ev));
  ++stats_.failovers;
  return {};
}

// With several aggregators, one that fails (stopped, killed, unreachable) makes the ranks that
// notice it first leave every job, and the other aggregators then abort theirs with "a member
// left", which can overtake the failed aggregator's own abort or connection close on the way to
// this rank. So a rank that hears such a secondary abort first waits a little (kRootCauseWaitNs)
// for a primary one: another aggregator's control message or closed connection, or an abort packet
// for any other reason. Only on the failure path.
Status Communicator::root_cause(Status secondary) {
  if (apps_.size() < 2) return secondary;  // no other aggregator to hear the cause from
  const uint64_t deadline = now_ns() + kRootCauseWaitNs;
  std::vector<Received> rx(kRxBatch);
  for (;;) {
    for (auto& ap : apps_) {
      if (!ap->control) continue;
      Status st = ap->control->poll();
      if (!st.ok() && !aborted_for(st, wire::AbortReason::kMemberLeft)) {
        return Status(st.code(), where(*ap) + ": " + st.message() + " (then: " + secondary.message() + ")");
      }
    }
    for (int batch = 0; batch < kRxBatchesPerRound; ++batch) {
      const size_t n = transport_->receive(rx);
      for (size_t i = 0; i < n; ++i) {
        const Received& r = rx[i];
        if (r.hdr.type == wire::MsgType::kAbort &&
            r.hdr.status != static_cast<uint8_t>(wire::AbortReason::kMemberLeft)) {
          return Status::aborted(where(*apps_[r.peer]) + " aborted the job: " + abort_reason_text(r.hdr.status) +
                                 " (then: " + secondary.message() + ")");
        }
      }
      if (n == 0) break;
    }
    const uint64_t now = now_ns();
    if (now >= deadline) return secondary;
    poll_set(/*with_transport=*/true).wait(std::min<uint64_t>(deadline - now, 5'000'000));  // re-check every 5 ms
  }
}

void Communicator::fail(Status status) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  for (auto& op : ops_) {
    if (!op->done) {
      op->done = true;
      op->status = failed_;
    }
  }
  for (auto& a : apps_) {
    for (Slot& sl : a->slots) {
      sl.busy = false;
      sl.held = false;
      sl.op = nullptr;
    }
    a->busy = 0;
    a->deferred.clear();
  }
  agreement_.reset();
  tx_.clear();
  transport_->leave_groups();  // a failed communicator receives nothing more
}

void Communicator::progress(int timeout_ms) {
  if (!failed_.ok()) return;
  flush_tx();
  const uint64_t before = stats_.results + stats_.duplicates;
  const uint64_t rx_before = transport_->counters().rx_packets;
  on_received(now_ns());
  uint64_t now = now_ns();
  check_timers(now);
  flush_tx();
  if (now >= next_control_poll_ns_) {
    poll_control();
    next_control_poll_ns_ = now + kControlPollNs;
  }
  if (agreement_ && failed_.ok()) poll_failover();
  const bool did = stats_.results + stats_.duplicates != before || transport_->counters().rx_packets != rx_before;
  if (did || timeout_ms == 0 || !failed_.ok()) return;

  // Nothing arrived: sleep until a packet, a control message, the next timer or the timeout.
  uint64_t until = std::min(next_deadline_ns_, next_control_poll_ns_);
  until = std::min(until, now + uint64_t(timeout_ms) * 1'000'000);
  if (agreement_) until = std::min(until, now + 2'000'000);  // look at the agreement's thread often
  if (transport_->wait_fd() < 0 || until <= now) return;
  PollSet ps = poll_set(/*with_transport=*/true);
  if (ps.wait(until - now) > 0 && ps.control_ready()) {
    poll_control();
    next_control_poll_ns_ = now_ns() + kControlPollNs;
  }
}

Communicator::Op* Communicator::find(uint64_t id) {
  for (auto& o : ops_) {
    if (o->id == id) return o.get();
  }
  return nullptr;
}

void Communicator::release(uint64_t id) {
  for (auto it = ops_.begin(); it != ops_.end(); ++it) {
    if ((*it)->id == id) {
      ops_.erase(it);
      return;
    }
  }
}

bool Communicator::test(uint64_t id, Status* status) {
  Op* op = find(id);
  if (op == nullptr) {
    *status = Status::invalid_argument("unknown request " + std::to_string(id));
    return true;
  }
  if (!op->done) progress(0);
  if (!op->done) return false;
  *status = op->status;
  release(id);
  return true;
}

Status Communicator::wait(uint64_t id) {
  for (;;) {
    Op* op = find(id);
    if (op == nullptr) return Status::invalid_argument("unknown request " + std::to_string(id));
    if (op->done) {
      Status st = op->status;
      release(id);
      return st;
    }
    progress(1000);
  }
}

Status Communicator::allreduce(const void* send, void* recv, size_t count) {
  auto id = start_allreduce(send, recv, count);
  if (!id.ok()) return id.status();
  return wait(*id);
}

CommStats Communicator::stats() const {
  CommStats s = stats_;
  s.transport = transport_->counters();
  for (size_t i = 0; i < kDropReasonCount; ++i) s.transport.drops[i] += comm_drops_[i];
  for (size_t i = 0; i < apps_.size(); ++i) {
    s.window_now = i == 0 ? apps_[i]->window : std::min<uint64_t>(s.window_now, apps_[i]->window);
    s.window_min = i == 0 ? apps_[i]->window_min : std::min<uint64_t>(s.window_min, apps_[i]->window_min);
  }
  return s;
}

std::vector<std::pair<std::string, uint64_t>> Communicator::stat_list() const {
  const CommStats s = stats();
  std::vector<std::pair<std::string, uint64_t>> v = {
      {"calls", s.calls},
      {"chunks", s.chunks},
      {"retransmissions", s.retransmissions},
      {"fast_retransmissions", s.fast_retransmissions},
      {"loss_notices", s.loss_notices},
      {"notice_retransmissions", s.notice_retransmissions},
      {"silent_backoffs", s.silent_backoffs},
      {"stall_probes", s.stall_probes},
      {"spurious_retransmissions", s.spurious_retransmissions},
      {"results", s.results},
      {"duplicates", s.duplicates},
      {"rto_us", apps_.empty() ? 0 : apps_[0]->rto_us},
      {"payload_bytes", infos_.empty() ? 0 : infos_[0].grant.payload_bytes},  // the first appliance's grant
      {"cnps_received", s.transport.cnps},
      {"rx_ce_results", s.transport.ce_results},
      {"window_cuts", s.window_cuts},
      {"window_grows", s.window_grows},
      {"window_now", s.window_now},
      {"window_min", s.window_min},
      {"send_queue_holds", s.send_queue_holds},
      {"send_queue_peak", s.send_queue_peak},
      {"tx_packets", s.transport.tx_packets},
      {"tx_bytes", s.transport.tx_bytes},
      {"tx_dropped", s.transport.tx_dropped},
      {"tx_partial", s.transport.tx_partial},
      {"tx_eagain", s.transport.tx_eagain},
      {"tx_enobufs", s.transport.tx_enobufs},
      {"tx_buffer_bytes", s.transport.tx_buffer_bytes},
      {"rx_packets", s.transport.rx_packets},
      {"rx_bytes", s.transport.rx_bytes},
      {"rx_overflows", s.transport.rx_overflows},
      {"rx_buffer_bytes", s.transport.rx_buffer_bytes},
      {"gro_receives", s.transport.gro_receives},
      {"gro_segments", s.transport.gro_segments},
      {"gro_refused", s.transport.gro_refused},
      {"rx_cut_train", s.transport.rx_cut_train},
      {"gso_sends", s.transport.gso_sends},
      {"gso_segments", s.transport.gso_segments},
      {"gso_refused", s.transport.gso_refused},
      {"rx_results", s.transport.results},
      {"rx_group_results", s.transport.group_results},
      {"multicast", static_cast<uint64_t>(std::count_if(infos_.begin(), infos_.end(),
                                                        [](const ApplianceInfo& i) { return i.grant.multicast; }))},
      {"rx_aborts", s.transport.aborts},
      {"rx_loss_notices", s.transport.loss_notices},
      {"rx_duplicate_notices", s.transport.duplicate_notices},
      {"failovers", s.failovers},
      {"replayed_chunks", s.replayed_chunks},
      {"replayed_completed", s.replayed_completed},
      {"liveness_probes", s.liveness_probes},
      {"lost_packets", s.lost_packets},
  };
  for (size_t i = 1; i < kDropReasonCount; ++i) {  // skip "ok"
    v.emplace_back(std::string("drop_") + drop_reason_name(static_cast<DropReason>(i)), s.transport.drops[i]);
  }
  return v;
}

}  // namespace sumcast::shim
