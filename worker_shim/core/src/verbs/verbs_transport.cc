// The verbs UD transport (rdma-core). Compiled only where libibverbs was found. Every ibverbs call
// goes through VerbsOps (verbs_ops.h), so the error paths are tested against a scripted fake.
#include "sumcast/shim/verbs_transport.h"

#include <net/if.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "sumcast/shim/address.h"
#include "sumcast/shim/verbs_format.h"
#include "sumcast/shim/verbs_ops.h"

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

class RealVerbs final : public VerbsOps {
 public:
  ibv_device** get_device_list(int* count) override { return ibv_get_device_list(count); }
  void free_device_list(ibv_device** list) override { ibv_free_device_list(list); }
  const char* get_device_name(ibv_device* device) override { return ibv_get_device_name(device); }
  ibv_context* open_device(ibv_device* device) override { return ibv_open_device(device); }
  int close_device(ibv_context* context) override { return ibv_close_device(context); }
  int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) override {
    return ibv_query_port(context, port, attr);
  }
  int query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags) override {
    return ibv_query_gid_ex(context, port, index, entry, flags);
  }
  ibv_pd* alloc_pd(ibv_context* context) override { return ibv_alloc_pd(context); }
  int dealloc_pd(ibv_pd* pd) override { return ibv_dealloc_pd(pd); }
  ibv_cq* create_cq(ibv_context* context, int entries) override {
    return ibv_create_cq(context, entries, nullptr, nullptr, 0);
  }
  int destroy_cq(ibv_cq* cq) override { return ibv_destroy_cq(cq); }
  ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) override { return ibv_create_qp(pd, attr); }
  int destroy_qp(ibv_qp* qp) override { return ibv_destroy_qp(qp); }
  int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) override { return ibv_modify_qp(qp, attr, mask); }
  int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) override {
    return ibv_query_qp(qp, attr, mask, init);
  }
  ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) override {
    return ibv_reg_mr(pd, addr, length, access);
  }
  int dereg_mr(ibv_mr* mr) override { return ibv_dereg_mr(mr); }
  ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) override { return ibv_create_ah(pd, attr); }
  int destroy_ah(ibv_ah* ah) override { return ibv_destroy_ah(ah); }
  int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) override { return ibv_post_send(qp, wr, bad); }
  int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) override { return ibv_post_recv(qp, wr, bad); }
  int poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) override { return ibv_poll_cq(cq, entries, wc); }
};

const char* qp_state_name(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    default:
      return "unknown";
  }
}

// "vlan 100" when the network device is a VLAN interface (Linux lists those in /proc/net/vlan).
std::string vlan_of(const std::string& netdev) {
  std::ifstream f("/proc/net/vlan/" + netdev);
  std::string word;
  while (f >> word) {
    if (word == "VID:") {
      std::string id;
      f >> id;
      return "vlan " + id;
    }
  }
  return {};
}

uint32_t ibv_mtu_bytes(int mtu) { return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0; }

}  // namespace

VerbsOps& real_verbs() {
  static RealVerbs ops;
  return ops;
}

struct VerbsTransport::Impl {
  VerbsTransportOptions options;
  VerbsOps* ops = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  int gid_index = -1;
  std::string gid_text;    // "::ffff:10.0.0.5 (RoCEv2, netdev eth0.100, vlan 100)"
  uint32_t mtu_bytes = 0;  // the port's active MTU
  uint32_t payload = 0;    // largest payload per message: the path's, or the one asked for
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
  Status failed;  // sticky: the QP is unusable, every later call reports it
  verbs::GroupMembership groups{{attach_mcast, detach_mcast}, nullptr};  // the QP's, once it exists

  ~Impl() {
    groups.leave_all();
    for (Peer& p : peers) {
      if (p.ah != nullptr) ops->destroy_ah(p.ah);
    }
    if (qp != nullptr) ops->destroy_qp(qp);
    if (mr != nullptr) ops->dereg_mr(mr);
    if (send_cq != nullptr) ops->destroy_cq(send_cq);
    if (recv_cq != nullptr) ops->destroy_cq(recv_cq);
    if (pd != nullptr) ops->dealloc_pd(pd);
    if (ctx != nullptr) ops->close_device(ctx);
  }

  uint8_t* send_buf(uint64_t i) { return mem.data() + (i % options.send_depth) * send_buf_len; }
  uint8_t* recv_buf(uint64_t i) { return mem.data() + size_t{options.send_depth} * send_buf_len + i * recv_buf_len; }

  std::string qp_state() {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ops->query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return "QP state unknown (ibv_query_qp failed)";
    return std::string("QP ") + std::to_string(qp->qp_num) + " in state " + qp_state_name(a.qp_state);
  }

  // The transport is unusable from now on: the communicator fails every pending call with this.
  void fail(const std::string& what) {
    if (!failed.ok()) return;
    failed = Status::io_error("verbs " + device_name + ": " + what + "; " + qp_state());
  }

  void completion_error(const char* queue, const ibv_wc& wc) {
    fail(std::string(queue) + " completion error: " + ibv_wc_status_str(wc.status) + " (status " +
         std::to_string(static_cast<int>(wc.status)) + ", vendor error " + std::to_string(wc.vendor_err) + ")");
  }

  bool post_recv(uint64_t i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(recv_buf(i)), static_cast<uint32_t>(recv_buf_len), mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int rc = ops->post_recv(qp, &wr, &bad);
    if (rc == 0) return true;
    fail("ibv_post_recv failed: " + std::string(std::strerror(rc)));
    return false;
  }

  // Reaps send completions; every signalled one frees the buffers up to it.
  void reap_sends() {
    ibv_wc wc[kPollBatch];
    int n;
    while ((n = ops->poll_cq(send_cq, kPollBatch, wc)) > 0) {
      for (int i = 0; i < n; ++i) {
        tx_done = std::max(tx_done, wc[i].wr_id + 1);
        if (wc[i].status != IBV_WC_SUCCESS) {
          ++counters.tx_dropped;
          completion_error("send", wc[i]);
        }
      }
    }
    if (n < 0) fail("ibv_poll_cq on the send queue failed");
  }

  // Opens the device (named, or the first whose port holds bind_ip as a RoCEv2 GID, on
  // options.interface when given: a VLAN interface's GID carries its VLAN).
  Status open_device() {
    int n = 0;
    ibv_device** list = ops->get_device_list(&n);
    if (list == nullptr || n == 0) {
      if (list != nullptr) ops->free_device_list(list);
      return Status::unavailable("verbs: no RDMA device on this host");
    }
    uint8_t want[16];
    verbs::ipv4_mapped_gid(options.bind_ip, want);
    const unsigned want_ifindex = options.interface.empty() ? 0 : if_nametoindex(options.interface.c_str());
    if (!options.interface.empty() && want_ifindex == 0) {
      ops->free_device_list(list);
      return Status::not_found("verbs: no network interface " + options.interface);
    }
    std::string where = format_ipv4(options.bind_ip) + (options.interface.empty() ? "" : " on " + options.interface);
    Status last = Status::not_found("verbs: no active RDMA device port " + std::to_string(options.port) +
                                    " has a RoCEv2 GID for " + where);
    for (int d = 0; d < n && ctx == nullptr; ++d) {
      const char* name = ops->get_device_name(list[d]);
      if (!options.device.empty() && options.device != name) continue;
      ibv_context* c = ops->open_device(list[d]);
      if (c == nullptr) continue;
      ibv_port_attr pa{};
      if (ops->query_port(c, options.port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) {
        ops->close_device(c);
        continue;
      }
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        ibv_gid_entry e{};
        if (ops->query_gid_ex(c, options.port, static_cast<uint32_t>(g), &e, 0) != 0) continue;
        if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || std::memcmp(e.gid.raw, want, 16) != 0) continue;
        if (want_ifindex != 0 && e.ndev_ifindex != want_ifindex) continue;
        gid_index = g;
        char ifname[IF_NAMESIZE] = {};
        const std::string netdev = if_indextoname(e.ndev_ifindex, ifname) != nullptr ? ifname : "?";
        const std::string vlan = vlan_of(netdev);
        gid_text = "::ffff:" + format_ipv4(options.bind_ip) + " (RoCEv2, netdev " + netdev +
                   (vlan.empty() ? "" : ", " + vlan) + ")";
        break;
      }
      if (gid_index < 0) {
        ops->close_device(c);
        continue;
      }
      ctx = c;
      device_name = name;
      mtu_bytes = ibv_mtu_bytes(pa.active_mtu);
    }
    ops->free_device_list(list);
    return ctx != nullptr ? Status() : last;
  }

  // The payload one UD message can carry on this port: its active MTU less the Sumcast header.
  Status choose_payload() {
    if (mtu_bytes <= wire::kSumcastHeaderLen) {
      return Status::unavailable("verbs " + device_name + ": port " + std::to_string(options.port) +
                                 " reports no usable active MTU");
    }
    const uint32_t path = std::min<uint32_t>(mtu_bytes - static_cast<uint32_t>(wire::kSumcastHeaderLen),
                                             static_cast<uint32_t>(wire::kMaxPayloadBytes));
    if (options.max_payload > path && options.payload_explicit) {
      return Status::invalid_argument("verbs " + device_name + ": a payload of " + std::to_string(options.max_payload) +
                                      " bytes does not fit the port's active MTU of " + std::to_string(mtu_bytes) +
                                      " bytes (at most " + std::to_string(path) + " bytes of payload after the " +
                                      std::to_string(wire::kSumcastHeaderLen) + "-byte Sumcast header)");
    }
    payload = options.max_payload == 0 ? path : std::min(options.max_payload, path);
    return {};
  }

  Status to_rts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = options.port;
    a.qkey = qkey;  // 0 until add_peer sets the job's Q_Key (RTS -> RTS)
    int rc = ops->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc != 0) return Status::from_errno("verbs: QP to INIT", rc);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    rc = ops->modify_qp(qp, &a, IBV_QP_STATE);
    if (rc != 0) return Status::from_errno("verbs: QP to RTR", rc);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    rc = ops->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    if (rc != 0) return Status::from_errno("verbs: QP to RTS", rc);
    return {};
  }

  Status setup() {
    pd = ops->alloc_pd(ctx);
    if (pd == nullptr) return Status::from_errno("verbs: ibv_alloc_pd on " + device_name);
    send_cq = ops->create_cq(ctx, static_cast<int>(options.send_depth));
    recv_cq = ops->create_cq(ctx, static_cast<int>(options.recv_depth));
    if (send_cq == nullptr || recv_cq == nullptr) return Status::from_errno("verbs: ibv_create_cq on " + device_name);
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq;
    ia.recv_cq = recv_cq;
    ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = options.send_depth;
    ia.cap.max_recv_wr = options.recv_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qp = ops->create_qp(pd, &ia);
    groups = verbs::GroupMembership({attach_mcast, detach_mcast}, qp);
    if (qp == nullptr) return Status::from_errno("verbs: ibv_create_qp (UD) on " + device_name);
    SUMCAST_RETURN_IF_ERROR(to_rts());

    send_buf_len = wire::kSumcastHeaderLen + payload;
    recv_buf_len = verbs::kGrhLen + wire::kSumcastHeaderLen + payload;
    mem.assign(size_t{options.send_depth} * send_buf_len + size_t{options.recv_depth} * recv_buf_len, 0);
    mr = ops->reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) return Status::from_errno("verbs: ibv_reg_mr of " + std::to_string(mem.size()) + " bytes");
    for (uint64_t i = 0; i < options.recv_depth; ++i) {
      if (!post_recv(i)) return failed;
    }
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
  impl->ops = options.ops != nullptr ? options.ops : &real_verbs();
  SUMCAST_RETURN_IF_ERROR(impl->open_device());
  SUMCAST_RETURN_IF_ERROR(impl->choose_payload());
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
  if (!s.failed.ok()) return s.failed;
  if (s.qkey_set && spec.qkey != s.qkey) {
    return Status::invalid_argument("verbs transport: one QP has one Q_Key; peer " + format_ipv4(spec.ip) +
                                    " has another");
  }
  if (!s.qkey_set) {
    ibv_qp_attr a{};
    a.qkey = spec.qkey;
    const int rc = s.ops->modify_qp(s.qp, &a, IBV_QP_QKEY);
    if (rc != 0) return Status::from_errno("verbs: setting the QP's Q_Key", rc);
    s.qkey = spec.qkey;
    s.qkey_set = true;
  }
  ibv_ah_attr ah{};
  ah.is_global = 1;
  verbs::ipv4_mapped_gid(spec.ip, ah.grh.dgid.raw);
  ah.grh.sgid_index = static_cast<uint8_t>(s.gid_index);
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = s.options.traffic_class;
  ah.port_num = s.options.port;
  Impl::Peer p{spec, s.ops->create_ah(s.pd, &ah)};
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

uint32_t VerbsTransport::max_payload() const { return impl_->payload; }

Status VerbsTransport::health() const { return impl_->failed; }

size_t VerbsTransport::build(uint8_t* buf, uint32_t /*peer*/, uint32_t dest_qp, uint32_t /*psn*/,
                             const wire::SumcastHeader& hdr, const uint8_t* payload) {
  return verbs::build_message(buf, dest_qp, hdr, payload);
}

Status VerbsTransport::send(std::span<const OutPacket> packets) {
  Impl& s = *impl_;
  if (!s.failed.ok()) return s.failed;
  const uint64_t depth = s.options.send_depth;
  for (const OutPacket& p : packets) {
    if (s.tx_head - s.tx_done >= depth) s.reap_sends();
    if (!s.failed.ok()) return s.failed;
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
    const int rc = s.ops->post_send(s.qp, &wr, &bad);
    if (rc != 0) {
      s.fail("ibv_post_send failed: " + std::string(std::strerror(rc)));
      return s.failed;
    }
    ++s.tx_head;
    ++s.counters.tx_packets;
    s.counters.tx_bytes += msg_len;
  }
  return {};
}

size_t VerbsTransport::receive(std::span<Received> out) {
  Impl& s = *impl_;
  if (!s.failed.ok()) return 0;
  for (uint64_t i : s.to_repost) {  // the last batch's payloads are released now
    if (!s.post_recv(i)) return 0;
  }
  s.to_repost.clear();
  s.reap_sends();
  if (!s.failed.ok()) return 0;
  ibv_wc wc[kPollBatch];
  const int n = s.ops->poll_cq(s.recv_cq, static_cast<int>(std::min<size_t>(out.size(), kPollBatch)), wc);
  if (n < 0) {
    s.fail("ibv_poll_cq on the receive queue failed");
    return 0;
  }
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t idx = wc[i].wr_id;
    s.to_repost.push_back(idx);
    ++s.counters.rx_packets;
    s.counters.rx_bytes += wc[i].byte_len;
    if (wc[i].status == IBV_WC_LOC_LEN_ERR) {  // a message larger than our buffers: dropped, buffer reposted
      ++s.counters.drops[static_cast<size_t>(DropReason::kTruncated)];
      continue;
    }
    if (wc[i].status != IBV_WC_SUCCESS) {  // anything else: the QP is broken (a flush: it left RTS)
      s.completion_error("receive", wc[i]);
      return k;  // what came before is good; health() now reports the error
    }
    if (wc[i].byte_len < verbs::kGrhLen) {
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
    } else if (h.type != wire::MsgType::kAbort) {  // a result or a notice (loss, held)
      const PeerSpec& ps = s.peers[static_cast<size_t>(peer)].spec;
      if (h.rank != ps.rank && (h.rank != wire::kRankMulticast || h.type != wire::MsgType::kResult))
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
    } else if (h.type == wire::MsgType::kLossNotice) {
      ++s.counters.loss_notices;
    } else if (h.type == wire::MsgType::kDuplicateNotice) {
      ++s.counters.duplicate_notices;
    } else {
      ++s.counters.aborts;
    }
    Received& r = out[k++];
    r = {static_cast<uint32_t>(peer), h, payload, static_cast<uint32_t>(payload_len)};
    r.src_qp = wc[i].src_qp;
  }
  return k;
}

void VerbsTransport::leave_groups() { impl_->groups.leave_all(); }

const TransportCounters& VerbsTransport::counters() const { return impl_->counters; }

std::string VerbsTransport::describe() const {
  return "verbs " + impl_->device_name + " port " + std::to_string(impl_->options.port) + " qpn " +
         std::to_string(impl_->qp->qp_num) + " GID index " + std::to_string(impl_->gid_index) + " " + impl_->gid_text +
         ", active MTU " + std::to_string(impl_->mtu_bytes) + ", payload " + std::to_string(impl_->payload);
}

}  // namespace sumcast::shim
