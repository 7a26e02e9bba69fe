#include "sumcast/shim/communicator.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "sumcast/shim/address.h"
#include "sumcast/shim/placement.h"
#include "sumcast/shim/udp_transport.h"
#include "sumcast/shim/verbs_transport.h"

namespace sumcast::shim {
namespace {

constexpr uint64_t kControlPollNs = 50'000'000;  // poll the control connections at least every 50 ms
constexpr size_t kRxBatch = 64;
constexpr size_t kTxFlushAt = 64;
constexpr int kRxBatchesPerRound = 16;              // receive batches drained before timers are looked at
constexpr uint64_t kRootCauseWaitNs = 300'000'000;  // how long a secondary abort waits for the primary one
constexpr size_t kMaxJobNameLen = 64;

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
  uint32_t last_round = 0;    // the last round whose result arrived
  bool last_retried = false;  // ... and it had been retransmitted
  uint64_t g = 0;             // chunk index carried now (or last)
  uint32_t round = 0;
  uint32_t coll_seq = 0;
  uint64_t elem_offset = 0;
  uint16_t elem_count = 0;
  Op* op = nullptr;
  uint8_t* pkt = nullptr;  // packet bytes kept for retransmission
  uint32_t len = 0;
  uint64_t sent_ns = 0;      // first transmission (RTT sample when no retransmission happened)
  uint64_t last_tx_ns = 0;   // latest transmission
  uint64_t last_tx_seq = 0;  // ... its place in the appliance's order of transmissions
  uint64_t deadline_ns = 0;
  uint32_t rto_us = 0;
  uint32_t retries = 0;
  bool fast_retried = false;  // the latest transmission was a fast retransmission
};

struct Communicator::Appliance {
  std::string address;
  HostPort control_addr;
  uint64_t weight_units = 1;
  std::unique_ptr<ControlClient> control;
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
  uint64_t answered_tx_ns = 0;  // latest transmission time among the chunks answered so far
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
};

Communicator::Communicator(const CommConfig& config) : config_(config) {}

Communicator::~Communicator() {
  for (auto& a : apps_) {
    if (a->control && failed_.ok()) (void)a->control->leave();
  }
}

Result<std::unique_ptr<Communicator>> Communicator::create(const CommConfig& config) {
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
  if (c.appliances.empty()) return Status::invalid_argument("no appliance address given");

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
  if (c.transport == TransportKind::kVerbs) {
    VerbsTransportOptions vo;
    vo.device = c.rdma_device;
    vo.bind_ip = bind_ip;
    vo.interface = c.rdma_interface;
    vo.max_payload = c.payload_bytes;
    vo.payload_explicit = c.payload_explicit || c.payload_bytes != CommConfig{}.payload_bytes;
    vo.ops = c.verbs_ops;
    vo.traffic_class = c.tos();
    auto verbs = VerbsTransport::open(vo);
    if (!verbs.ok()) return verbs.status();
    transport_ = std::move(verbs).value();
  } else {
    UdpTransportOptions to;
    to.bind_ip = bind_ip;
    to.port = c.udp_port;
    to.verify_icrc = c.verify_icrc;
    to.tos = c.tos();
    auto udp = UdpTransport::open(to);
    if (!udp.ok()) return udp.status();
    transport_ = std::move(udp).value();
  }
  if (c.wrap_transport) {
    transport_ = c.wrap_transport(std::move(transport_));
    if (!transport_) return Status::invalid_argument("wrap_transport returned no transport");
  }

  const Endpoint me = transport_->local_endpoint();
  size_t total_slots = 0;
  for (auto& ap : apps_) {
    Appliance& a = *ap;
    auto cc = ControlClient::connect(a.control_addr.host, a.control_addr.port, c.token, c.connect_timeout_ms);
    if (!cc.ok()) return Status(cc.status().code(), "appliance " + a.address + ": " + cc.status().message());
    a.control = std::move(cc).value();
    RegisterRequest req;
    req.job_name = c.job_name;
    req.world_size = c.world_size;
    req.rank = c.rank;
    req.dtype = c.dtype;
    req.op = c.op;
    // What the path carries (the verbs transport clamps a default payload to its port's MTU).
    req.max_payload_bytes = static_cast<uint16_t>(std::min<uint32_t>(c.payload_bytes, transport_->max_payload()));
    req.slots = c.slots;
    req.endpoint = me;
    req.deterministic = c.deterministic;
    req.multicast = c.multicast;
    auto grant = a.control->register_rank(req, c.register_timeout_ms);
    if (!grant.ok()) {
      return Status(grant.status().code(), "appliance " + a.address + ": registering rank " + std::to_string(c.rank) +
                                               " of job '" + c.job_name + "': " + grant.status().message());
    }
    a.grant = std::move(grant).value();
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
                              std::to_string(g.slot_count) + ", payload " + std::to_string(g.payload_bytes) +
                              " bytes, " + std::to_string(g.core_qpns.size()) + " cores)");
    }
    PeerSpec ps;
    ps.ip = g.appliance.ip != 0 ? g.appliance.ip : a.control_addr.ip;
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
    a.chunk_elems = static_cast<uint32_t>(g.payload_bytes / elem_size_);
    a.slot_count = g.slot_count;
    a.pkt_cap = transport_->packet_capacity(size_t{a.chunk_elems} * elem_size_);
    a.pkt_mem.assign(a.pkt_cap * a.slot_count, 0);
    a.slots.resize(a.slot_count);
    for (uint32_t s = 0; s < a.slot_count; ++s) a.slots[s].pkt = a.pkt_mem.data() + s * a.pkt_cap;
    a.rto_us = c.rto_initial_us;
    a.rto_floor_us = c.rto_initial_us;
    total_slots += a.slot_count;
    infos_.push_back({a.address, 0, a.grant, a.chunk_elems});
  }
  for (size_t i = 0; i < apps_.size(); ++i) {
    if (apps_[i]->peer != i) return Status::internal("transport numbered its peers out of order");
    infos_[i].weight = c.appliances[i].weight;
  }
  tx_.reserve(2 * total_slots + kTxFlushAt);
  rx_.resize(kRxBatch);
  next_deadline_ns_ = std::numeric_limits<uint64_t>::max();
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
    const uint64_t stop = std::min<uint64_t>(p.first_g + a.slot_count, a.assigned);
    for (uint64_t g = p.first_g; g < stop; ++g) {
      if (!a.slots[g % a.slot_count].busy) issue(a, g, now);
    }
  }
  flush_tx();
  return id;
}

void Communicator::issue(Appliance& a, uint64_t g, uint64_t now) {
  Op* op = nullptr;
  const size_t ai = a.peer;
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
  wire::SumcastHeader h;
  h.type = wire::MsgType::kContribution;
  h.dtype = config_.dtype;
  h.op = config_.op;
  h.job_id = a.grant.job_id;
  h.rank = config_.rank;
  h.slot = static_cast<uint16_t>(s);
  h.round = sl.round;
  h.coll_seq = sl.coll_seq;
  h.elem_count = n;
  h.flags = (sl.round & 1) != 0 ? wire::kFlagSlotVersion : 0;
  h.elem_offset = begin;
  const uint32_t dest_qp = a.grant.core_qpns[s % a.grant.core_qpns.size()];
  sl.len = static_cast<uint32_t>(transport_->build(sl.pkt, a.peer, dest_qp, static_cast<uint32_t>(g & 0xFFFFFF), h,
                                                   op->send + begin * elem_size_));
  if (a.busy == 0) a.last_progress_ns = now;
  ++a.busy;
  sl.retries = 0;
  sl.fast_retried = false;
  sl.rto_us = a.rto_us;
  sl.sent_ns = now;
  sl.last_tx_ns = now;
  sl.last_tx_seq = ++a.tx_seq;
  sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
  next_deadline_ns_ = std::min(next_deadline_ns_, sl.deadline_ns);
  tx_.push_back({a.peer, sl.pkt, sl.len});
  ++stats_.chunks;
  if (tx_.size() >= kTxFlushAt) flush_tx();
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
  for (int batch = 0; batch < kRxBatchesPerRound && failed_.ok(); ++batch) {
    const size_t n = transport_->receive(rx_);
    if (Status h = transport_->health(); !h.ok()) {  // an unusable transport fails the calls now
      fail(std::move(h));
      return;
    }
    if (n == 0) return;
    for (size_t i = 0; i < n && failed_.ok(); ++i) {
      const Received& r = rx_[i];
      Appliance& a = *apps_[r.peer];
      if (r.hdr.type == wire::MsgType::kAbort) {
        Status st = Status::aborted(where(a) + " aborted the job: " + abort_reason_text(r.hdr.status));
        fail(r.hdr.status == static_cast<uint8_t>(wire::AbortReason::kMemberLeft) ? root_cause(std::move(st))
                                                                                  : std::move(st));
        return;
      }
      if (r.hdr.slot >= a.slot_count) {
        ++comm_drops_[static_cast<size_t>(DropReason::kBadSlot)];
        continue;
      }
      Slot& sl = a.slots[r.hdr.slot];
      if (!sl.busy || r.hdr.round != sl.round) {
        if (sl.completed_once && r.hdr.round == sl.last_round) {
          ++stats_.duplicates;
          if (sl.last_retried) {  // both the first answer and a retransmission's came: spurious
            sl.last_retried = false;
            ++stats_.spurious_retransmissions;
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
      if (r.hdr.coll_seq != sl.coll_seq || r.hdr.elem_offset != sl.elem_offset || r.hdr.elem_count != sl.elem_count) {
        ++comm_drops_[static_cast<size_t>(DropReason::kChunkMismatch)];
        continue;
      }
      std::memcpy(sl.op->recv + sl.elem_offset * elem_size_, r.payload, r.payload_len);
      if (sl.retries == 0) update_rto(a, now - sl.sent_ns);
      a.answered_tx_ns = std::max(a.answered_tx_ns, sl.last_tx_ns);
      sl.busy = false;
      sl.completed_once = true;
      sl.last_round = sl.round;
      sl.last_retried = sl.retries != 0;
      --a.busy;
      a.last_progress_ns = now;
      ++stats_.results;
      Op& op = *sl.op;
      sl.op = nullptr;
      if (--op.chunks_left == 0) complete(op);
      fast_retransmit(a, sl, now);
      const uint64_t next = sl.g + a.slot_count;
      if (next < a.assigned) issue(a, next, now);
    }
    flush_tx();
  }
}

// `answered` just got its result: the chunk fast_retransmit_after before it, if still unanswered
// and last sent before `answered` was, is resent now (see Fast retransmission in the header).
void Communicator::fast_retransmit(Appliance& a, const Slot& answered, uint64_t now) {
  const uint32_t k = config_.fast_retransmit_after;
  if (k == 0 || k >= a.slot_count || answered.g < k) return;
  const uint64_t g = answered.g - k;
  Slot& sl = a.slots[g % a.slot_count];
  if (!sl.busy || sl.g != g || sl.last_tx_seq >= answered.last_tx_seq) return;
  if (config_.retries != 0 && sl.retries >= config_.retries) return;  // its timer fails the call
  ++sl.retries;
  sl.fast_retried = true;
  ++stats_.fast_retransmissions;
  sl.last_tx_ns = now;
  sl.last_tx_seq = ++a.tx_seq;
  sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
  next_deadline_ns_ = std::min(next_deadline_ns_, sl.deadline_ns);
  tx_.push_back({a.peer, sl.pkt, sl.len});
  if (tx_.size() >= kTxFlushAt) flush_tx();
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

void Communicator::check_timers(uint64_t now) {
  if (now < next_deadline_ns_) return;
  uint64_t next = std::numeric_limits<uint64_t>::max();
  for (auto& ap : apps_) {
    Appliance& a = *ap;
    if (a.busy == 0) continue;
    if (config_.op_timeout_ms != 0) {
      const uint64_t limit = a.last_progress_ns + uint64_t{config_.op_timeout_ms} * 1'000'000;
      if (now >= limit) {
        fail(Status::timeout(where(a) + ": no result for " + std::to_string(config_.op_timeout_ms) + " ms"));
        return;
      }
      next = std::min(next, limit);
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
    const Slot* probe = nullptr;
    if (now >= a.next_probe_ns) {  // one probe per RTO, however many timers expire meanwhile
      bool expired = false;
      for (const Slot& sl : a.slots) {
        if (!sl.busy || a.answered_tx_ns > sl.last_tx_ns) continue;
        expired = expired || sl.deadline_ns <= now;
        if (!probe || sl.g < probe->g) probe = &sl;
      }
      if (!expired) probe = nullptr;
    }
    for (uint32_t s = 0; s < a.slot_count; ++s) {
      Slot& sl = a.slots[s];
      if (!sl.busy) continue;
      if (sl.deadline_ns <= now && a.answered_tx_ns <= sl.last_tx_ns && &sl != probe) {
        ++stats_.silent_backoffs;
        sl.rto_us = std::min(sl.rto_us * 2, config_.rto_max_us);
        sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
      } else if (sl.deadline_ns <= now || &sl == probe) {
        if (config_.retries != 0 && sl.retries >= config_.retries) {
          fail(Status::timeout(where(a) + ": no result for slot " + std::to_string(s) + " round " +
                               std::to_string(sl.round) + " after " + std::to_string(sl.retries) + " retransmissions"));
          return;
        }
        ++sl.retries;
        sl.fast_retried = false;
        ++stats_.retransmissions;
        sl.rto_us = std::min(sl.rto_us * 2, config_.rto_max_us);
        sl.deadline_ns = now + uint64_t{sl.rto_us} * 1000;
        sl.last_tx_ns = now;
        sl.last_tx_seq = ++a.tx_seq;
        if (&sl == probe) a.next_probe_ns = sl.deadline_ns;
        tx_.push_back({a.peer, sl.pkt, sl.len});
        if (tx_.size() >= kTxFlushAt) flush_tx();
        if (!failed_.ok()) return;
      }
      next = std::min(next, sl.deadline_ns);
    }
  }
  next_deadline_ns_ = next;
}

void Communicator::poll_control() {
  for (auto& ap : apps_) {
    Status st = ap->control->poll();
    if (!st.ok()) {
      const bool secondary = aborted_for(st, wire::AbortReason::kMemberLeft);
      st = st.with_context(where(*ap) + ": ");
      fail(secondary ? root_cause(std::move(st)) : std::move(st));
      return;
    }
  }
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
    pollfd fds[1 + 16];
    nfds_t nfds = 0;
    if (transport_->wait_fd() >= 0) fds[nfds++] = {transport_->wait_fd(), POLLIN, 0};
    for (auto& a : apps_) {
      if (nfds < sizeof(fds) / sizeof(fds[0])) fds[nfds++] = {a->control->fd(), POLLIN, 0};
    }
    const uint64_t wait = std::min<uint64_t>(deadline - now, 5'000'000);  // re-check at least every 5 ms
    timespec ts{0, static_cast<long>(wait)};
    ppoll(fds, nfds, &ts, nullptr);
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
      sl.op = nullptr;
    }
    a->busy = 0;
  }
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
  const bool did = stats_.results + stats_.duplicates != before || transport_->counters().rx_packets != rx_before;
  if (did || timeout_ms == 0 || !failed_.ok()) return;

  // Nothing arrived: sleep until a packet, a control message, the next timer or the timeout.
  uint64_t until = std::min(next_deadline_ns_, next_control_poll_ns_);
  until = std::min(until, now + uint64_t(timeout_ms) * 1'000'000);
  pollfd fds[1 + 16];
  nfds_t nfds = 0;
  if (transport_->wait_fd() >= 0) fds[nfds++] = {transport_->wait_fd(), POLLIN, 0};
  const nfds_t first_control = nfds;
  for (auto& a : apps_) {
    if (nfds < sizeof(fds) / sizeof(fds[0])) fds[nfds++] = {a->control->fd(), POLLIN, 0};
  }
  if (transport_->wait_fd() < 0 || until <= now) return;
  const uint64_t wait = until - now;
  timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
  const int rc = ppoll(fds, nfds, &ts, nullptr);
  if (rc > 0) {
    for (nfds_t i = first_control; i < nfds; ++i) {
      if (fds[i].revents != 0) {
        poll_control();
        next_control_poll_ns_ = now_ns() + kControlPollNs;
        break;
      }
    }
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
  return s;
}

std::vector<std::pair<std::string, uint64_t>> Communicator::stat_list() const {
  const CommStats s = stats();
  std::vector<std::pair<std::string, uint64_t>> v = {
      {"calls", s.calls},
      {"chunks", s.chunks},
      {"retransmissions", s.retransmissions},
      {"fast_retransmissions", s.fast_retransmissions},
      {"silent_backoffs", s.silent_backoffs},
      {"spurious_retransmissions", s.spurious_retransmissions},
      {"results", s.results},
      {"duplicates", s.duplicates},
      {"rto_us", apps_.empty() ? 0 : apps_[0]->rto_us},
      {"tx_packets", s.transport.tx_packets},
      {"tx_bytes", s.transport.tx_bytes},
      {"tx_dropped", s.transport.tx_dropped},
      {"rx_packets", s.transport.rx_packets},
      {"rx_bytes", s.transport.rx_bytes},
      {"rx_results", s.transport.results},
      {"rx_group_results", s.transport.group_results},
      {"multicast", static_cast<uint64_t>(std::count_if(infos_.begin(), infos_.end(),
                                                        [](const ApplianceInfo& i) { return i.grant.multicast; }))},
      {"rx_aborts", s.transport.aborts},
  };
  for (size_t i = 1; i < kDropReasonCount; ++i) {  // skip "ok"
    v.emplace_back(std::string("drop_") + drop_reason_name(static_cast<DropReason>(i)), s.transport.drops[i]);
  }
  return v;
}

}  // namespace sumcast::shim
