// The verbs UD transport (rdma-core). Compiled only where libibverbs was found.
#include "sumcast/shim/verbs_transport.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sumcast/shim/address.h"
#include "sumcast/shim/verbs_format.h"

namespace sumcast::shim {
namespace {

// The multicast seam's real operations (verbs_format.h: McastOps).
int attach_mcast(void* qp, const uint8_t gid[16], uint16_t lid) {
  ibv_gid g{};
  std::memcpy(g.raw, gid, 16);
  return ibv_attach_mcast(static_cast<ibv_qp*>(qp), &g, lid);
}
int detach_mcast(void* qp, const uint8_t gid[16], uint16_t lid) {
  ibv_gid g{};
  std::memcpy(g.raw, gid, 16);
  return ibv_detach_mcast(static_cast<ibv_qp*>(qp), &g, lid);
}

}  // namespace

namespace {
constexpr int kPollBatch = 32;
}  // namespace

struct VerbsTransport::Impl {
  VerbsTransportOptions options;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  int gid_index = -1;
  std::string device_name;
  uint32_t qkey = 0;
  bool qkey_set = false;
  std::vector<uint8_t> mem;  // send buffers, then receive buffers
  size_t send_buf_len = 0;
  size_t recv_buf_len = 0;
  uint64_t tx_head = 0;             // send buffers handed out
  uint64_t tx_done = 0;             // send buffers known free (from signalled completions)
  std::vector<uint64_t> to_repost;  // receive buffers handed out by the last receive()
  struct Peer {
    PeerSpec spec;
    ibv_ah* ah = nullptr;
  };
  std::vector<Peer> peers;
  TransportCounters counters;
  verbs::GroupMembership groups{{attach_mcast, detach_mcast}, nullptr};  // the QP's, once it exists

  ~Impl() {
    groups.leave_all();
    for (Peer& p : peers) {
      if (p.ah != nullptr) ibv_destroy_ah(p.ah);
    }
    if (qp != nullptr) ibv_destroy_qp(qp);
    if (mr != nullptr) ibv_dereg_mr(mr);
    if (send_cq != nullptr) ibv_destroy_cq(send_cq);
    if (recv_cq != nullptr) ibv_destroy_cq(recv_cq);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ctx != nullptr) ibv_close_device(ctx);
  }

  uint8_t* send_buf(uint64_t i) { return mem.data() + (i % options.send_depth) * send_buf_len; }
  uint8_t* recv_buf(uint64_t i) { return mem.data() + size_t{options.send_depth} * send_buf_len + i * recv_buf_len; }

  Status post_recv(uint64_t i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(recv_buf(i)), static_cast<uint32_t>(recv_buf_len), mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp, &wr, &bad);
    return rc == 0 ? Status() : Status::from_errno("verbs: ibv_post_recv on " + device_name, rc);
  }

  // Reaps send completions; every signalled one frees the buffers up to it.
  void reap_sends() {
    ibv_wc wc[kPollBatch];
    int n;
    while ((n = ibv_poll_cq(send_cq, kPollBatch, wc)) > 0) {
      for (int i = 0; i < n; ++i) {
        tx_done = std::max(tx_done, wc[i].wr_id + 1);
        if (wc[i].status != IBV_WC_SUCCESS) ++counters.tx_dropped;
      }
    }
  }

  // Opens the device (named, or the first whose port holds bind_ip as a RoCEv2 GID).
  Status open_device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) {
      if (list != nullptr) ibv_free_device_list(list);
      return Status::unavailable("verbs: no RDMA device on this host");
    }
    uint8_t want[16];
    verbs::ipv4_mapped_gid(options.bind_ip, want);
    Status last = Status::not_found("verbs: no RDMA device port " + std::to_string(options.port) +
                                    " has a RoCEv2 GID for " + format_ipv4(options.bind_ip));
    for (int d = 0; d < n && ctx == nullptr; ++d) {
      const char* name = ibv_get_device_name(list[d]);
      if (!options.device.empty() && options.device != name) continue;
      ibv_context* c = ibv_open_device(list[d]);
      if (c == nullptr) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(c, options.port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) {
        ibv_close_device(c);
        continue;
      }
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(c, options.port, static_cast<uint32_t>(g), &e, 0) != 0) continue;
        if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(e.gid.raw, want, 16) == 0) {
          gid_index = g;
          break;
        }
      }
      if (gid_index < 0) {
        ibv_close_device(c);
        continue;
      }
      ctx = c;
      device_name = name;
    }
    ibv_free_device_list(list);
    return ctx != nullptr ? Status() : last;
  }

  Status setup() {
    pd = ibv_alloc_pd(ctx);
    if (pd == nullptr) return Status::from_errno("verbs: ibv_alloc_pd on " + device_name);
    send_cq = ibv_create_cq(ctx, static_cast<int>(options.send_depth), nullptr, nullptr, 0);
    recv_cq = ibv_create_cq(ctx, static_cast<int>(options.recv_depth), nullptr, nullptr, 0);
    if (send_cq == nullptr || recv_cq == nullptr) return Status::from_errno("verbs: ibv_create_cq on " + device_name);
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq;
    ia.recv_cq = recv_cq;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = options.send_depth;
    ia.cap.max_recv_wr = options.recv_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &ia);
    groups = verbs::GroupMembership({attach_mcast, detach_mcast}, qp);
    if (qp == nullptr) return Status::from_errno("verbs: ibv_create_qp (UD) on " + device_name);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = options.port;
    a.qkey = 0;  // set to the job's Q_Key by add_peer (RTS -> RTS)
    int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc != 0) return Status::from_errno("verbs: QP to INIT", rc);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
    if (rc != 0) return Status::from_errno("verbs: QP to RTR", rc);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc != 0) return Status::from_errno("verbs: QP to RTS", rc);

    send_buf_len = wire::kSumcastHeaderLen + options.max_payload;
    recv_buf_len = verbs::kGrhLen + wire::kSumcastHeaderLen + options.max_payload;
    mem.assign(size_t{options.send_depth} * send_buf_len + size_t{options.recv_depth} * recv_buf_len, 0);
    mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) return Status::from_errno("verbs: ibv_reg_mr of " + std::to_string(mem.size()) + " bytes");
    for (uint64_t i = 0; i < options.recv_depth; ++i) SUMCAST_RETURN_IF_ERROR(post_recv(i));
    return {};
  }
};

bool verbs_transport_built() { return true; }

VerbsTransport::VerbsTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsTransport::~VerbsTransport() = default;

Result<std::unique_ptr<VerbsTransport>> VerbsTransport::open(const VerbsTransportOptions& options) {
  if (options.bind_ip == 0) return Status::invalid_argument("verbs transport: bind_ip is required");
  if (options.send_depth == 0 || options.recv_depth == 0 || options.max_payload > wire::kMaxPayloadBytes) {
    return Status::invalid_argument("verbs transport: queue depths must be > 0 and max_payload <= 4096");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  SUMCAST_RETURN_IF_ERROR(impl->open_device());
  SUMCAST_RETURN_IF_ERROR(impl->setup());
  return std::unique_ptr<VerbsTransport>(new VerbsTransport(std::move(impl)));
}

Endpoint VerbsTransport::local_endpoint() const {
  Endpoint e;
  mac_of_local_ip(impl_->options.bind_ip, e.mac);
  e.ip = impl_->options.bind_ip;
  e.udp_port = wire::kRoceUdpPort;  // a RoCE NIC receives on 4791
  e.qpn = impl_->qp->qp_num;
  return e;
}

Result<uint32_t> VerbsTransport::add_peer(const PeerSpec& spec) {
  Impl& s = *impl_;
  if (s.qkey_set && spec.qkey != s.qkey) {
    return Status::invalid_argument("verbs transport: one QP has one Q_Key; peer " + format_ipv4(spec.ip) +
                                    " has another");
  }
  if (!s.qkey_set) {
    ibv_qp_attr a{};
    a.qkey = spec.qkey;
    const int rc = ibv_modify_qp(s.qp, &a, IBV_QP_QKEY);
    if (rc != 0) return Status::from_errno("verbs: setting the QP's Q_Key", rc);
    s.qkey = spec.qkey;
    s.qkey_set = true;
  }
  ibv_ah_attr ah{};
  ah.is_global = 1;
  verbs::ipv4_mapped_gid(spec.ip, ah.grh.dgid.raw);
  ah.grh.sgid_index = static_cast<uint8_t>(s.gid_index);
  ah.grh.hop_limit = 64;
  ah.port_num = s.options.port;
  Impl::Peer p{spec, ibv_create_ah(s.pd, &ah)};
  if (p.ah == nullptr) return Status::from_errno("verbs: ibv_create_ah toward " + format_ipv4(spec.ip));
  if (spec.group != 0) {  // results to the group reach the QP once it is attached to the group's GID
    const Status st = s.groups.join(spec.group);
    if (!st.ok()) {
      ibv_destroy_ah(p.ah);
      return st;
    }
  }
  s.peers.push_back(p);
  return static_cast<uint32_t>(s.peers.size() - 1);
}

size_t VerbsTransport::packet_capacity(size_t payload_len) const { return verbs::message_capacity(payload_len); }

size_t VerbsTransport::build(uint8_t* buf, uint32_t /*peer*/, uint32_t dest_qp, uint32_t /*psn*/,
                             const wire::SumcastHeader& hdr, const uint8_t* payload) {
  return verbs::build_message(buf, dest_qp, hdr, payload);
}

Status VerbsTransport::send(std::span<const OutPacket> packets) {
  Impl& s = *impl_;
  const uint64_t depth = s.options.send_depth;
  for (const OutPacket& p : packets) {
    if (s.tx_head - s.tx_done >= depth) s.reap_sends();
    if (s.tx_head - s.tx_done >= depth) {  // queue full: the RTO resends
      ++s.counters.tx_dropped;
      continue;
    }
    const size_t msg_len = p.len - verbs::kTagLen;
    uint8_t* b = s.send_buf(s.tx_head);
    std::memcpy(b, p.data + verbs::kTagLen, msg_len);
    ibv_sge sge{reinterpret_cast<uintptr_t>(b), static_cast<uint32_t>(msg_len), s.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = s.tx_head;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    // Signal a quarter of the ring at a time, so completions free buffers in batches.
    wr.send_flags = (s.tx_head % std::max<uint64_t>(1, depth / 4)) == 0 ? IBV_SEND_SIGNALED : 0;
    const Impl::Peer& peer = s.peers[p.peer];
    wr.wr.ud.ah = peer.ah;
    wr.wr.ud.remote_qpn = verbs::message_dest_qp(p.data);
    wr.wr.ud.remote_qkey = peer.spec.qkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(s.qp, &wr, &bad);
    if (rc != 0) return Status::from_errno("verbs: ibv_post_send on " + s.device_name, rc);
    ++s.tx_head;
    ++s.counters.tx_packets;
    s.counters.tx_bytes += msg_len;
  }
  return {};
}

size_t VerbsTransport::receive(std::span<Received> out) {
  Impl& s = *impl_;
  for (uint64_t i : s.to_repost) (void)s.post_recv(i);  // the last batch's payloads are released now
  s.to_repost.clear();
  s.reap_sends();
  ibv_wc wc[kPollBatch];
  const int n = ibv_poll_cq(s.recv_cq, static_cast<int>(std::min<size_t>(out.size(), kPollBatch)), wc);
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t idx = wc[i].wr_id;
    s.to_repost.push_back(idx);
    ++s.counters.rx_packets;
    s.counters.rx_bytes += wc[i].byte_len;
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < verbs::kGrhLen) {
      ++s.counters.drops[static_cast<size_t>(DropReason::kTruncated)];
      continue;
    }
    const uint8_t* buf = s.recv_buf(idx);
    const uint32_t src_ip = verbs::grh_ipv4_source(buf);
    wire::SumcastHeader h;
    const uint8_t* payload = nullptr;
    size_t payload_len = 0;
    const wire::ParseError pe = verbs::parse_message(
        std::span<const uint8_t>(buf + verbs::kGrhLen, wc[i].byte_len - verbs::kGrhLen), &h, &payload, &payload_len);
    if (pe != wire::ParseError::kOk) {
      ++s.counters.drops[static_cast<size_t>(pe)];
      continue;
    }
    int peer = -1;
    bool known = false;
    for (size_t p = 0; p < s.peers.size(); ++p) {
      if (s.peers[p].spec.ip != src_ip) continue;
      known = true;
      if (s.peers[p].spec.job_id == h.job_id) {
        peer = static_cast<int>(p);
        break;
      }
    }
    DropReason why = DropReason::kOk;
    if (!known) {
      why = DropReason::kUnknownSource;
    } else if (peer < 0) {
      why = DropReason::kUnknownJob;
    } else if (h.type == wire::MsgType::kContribution) {
      why = DropReason::kNotResult;
    } else if (h.type == wire::MsgType::kResult) {
      const PeerSpec& ps = s.peers[static_cast<size_t>(peer)].spec;
      if (h.rank != ps.rank && h.rank != wire::kRankMulticast)
        why = DropReason::kBadRank;
      else if (h.dtype != ps.dtype)
        why = DropReason::kDtypeMismatch;
      else if (h.op != ps.op)
        why = DropReason::kOpMismatch;
    }
    if (why != DropReason::kOk) {
      ++s.counters.drops[static_cast<size_t>(why)];
      continue;
    }
    if (h.type == wire::MsgType::kResult) {
      ++s.counters.results;
    } else {
      ++s.counters.aborts;
    }
    out[k++] = {static_cast<uint32_t>(peer), h, payload, static_cast<uint32_t>(payload_len)};
  }
  return k;
}

void VerbsTransport::leave_groups() { impl_->groups.leave_all(); }

const TransportCounters& VerbsTransport::counters() const { return impl_->counters; }

std::string VerbsTransport::describe() const {
  return "verbs " + impl_->device_name + " port " + std::to_string(impl_->options.port) + " qpn " +
         std::to_string(impl_->qp->qp_num);
}

}  // namespace sumcast::shim
