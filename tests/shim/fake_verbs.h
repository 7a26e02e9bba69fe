// A scripted stand-in for rdma-core behind the verbs transport's seam (verbs_ops.h): devices with
// one port (state, active MTU, GID table), a UD QP state machine, posted receives the test
// delivers messages into, completions queued by the test (errors included), and failures of
// single calls on demand. No network: what the transport sends is recorded.
#pragma once

#include <infiniband/verbs.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sumcast/shim/verbs_format.h"
#include "sumcast/shim/verbs_ops.h"

namespace sumcast::shim::testing {

class FakeVerbs final : public VerbsOps {
 public:
  struct Gid {
    uint32_t ipv4 = 0;  // IPv4-mapped GID of this address (host order)
    ibv_gid_type type = IBV_GID_TYPE_ROCE_V2;
    unsigned ifindex = 1;
  };
  struct Device {
    std::string name = "fake0";
    ibv_port_state state = IBV_PORT_ACTIVE;
    ibv_mtu active_mtu = IBV_MTU_4096;
    std::vector<Gid> gids;
  };
  std::vector<Device> devices;

  // Fail the next call of `function` (e.g. "post_recv") with `rc` after `skip` more succeed.
  void fail(const std::string& function, int rc, int skip = 0) { fails_[function] = {rc, skip}; }

  // Writes a RoCEv2 receive (GRH with `src_ip`, then `msg`) into the oldest posted receive buffer
  // and queues its completion. False when no buffer is posted.
  bool deliver(uint32_t src_ip, const std::vector<uint8_t>& msg) {
    if (posted_.empty()) return false;
    Posted p = posted_.front();
    posted_.pop_front();
    std::vector<uint8_t> grh(verbs::kGrhLen, 0);
    grh[verbs::kGrhIpv4Offset] = 0x45;
    for (int i = 0; i < 4; ++i) grh[verbs::kGrhIpv4Offset + 12 + i] = static_cast<uint8_t>(src_ip >> (24 - 8 * i));
    const size_t len = std::min<size_t>(grh.size() + msg.size(), p.len);
    std::memcpy(reinterpret_cast<void*>(p.addr), grh.data(), std::min(grh.size(), len));
    if (len > grh.size()) std::memcpy(reinterpret_cast<uint8_t*>(p.addr) + grh.size(), msg.data(), len - grh.size());
    ibv_wc wc{};
    wc.wr_id = p.wr_id;
    wc.status = grh.size() + msg.size() > p.len ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
    wc.byte_len = static_cast<uint32_t>(len);
    recv_completions_.push_back(wc);
    return true;
  }
  // A receive completion with an error status for the oldest posted buffer (a flush also moves
  // the QP to ERR, as a QP that left RTS flushes its queues).
  void recv_error(ibv_wc_status status) {
    ibv_wc wc{};
    wc.wr_id = posted_.empty() ? 0 : posted_.front().wr_id;
    if (!posted_.empty()) posted_.pop_front();
    wc.status = status;
    recv_completions_.push_back(wc);
    if (status == IBV_WC_WR_FLUSH_ERR) qp_state_ = IBV_QPS_ERR;
  }
  // The next signalled send completes with `status` (IBV_WC_SUCCESS by default).
  void next_send_status(ibv_wc_status status) { send_status_ = status; }
  void set_qp_state(ibv_qp_state s) { qp_state_ = s; }

  size_t posted_receives() const { return posted_.size(); }
  const std::vector<std::vector<uint8_t>>& sent() const { return sent_; }
  ibv_qp_state qp_state() const { return qp_state_; }

  // VerbsOps
  ibv_device** get_device_list(int* count) override {
    *count = static_cast<int>(devices.size());
    if (devices.empty()) return nullptr;
    list_.assign(devices.size() + 1, nullptr);
    for (size_t i = 0; i < devices.size(); ++i) list_[i] = reinterpret_cast<ibv_device*>(&devices[i]);
    return list_.data();
  }
  void free_device_list(ibv_device**) override {}
  const char* get_device_name(ibv_device* d) override { return reinterpret_cast<Device*>(d)->name.c_str(); }
  ibv_context* open_device(ibv_device* d) override {
    if (should_fail("open_device")) return nullptr;
    auto c = std::make_unique<ibv_context>();
    c->device = d;
    contexts_.push_back(std::move(c));
    return contexts_.back().get();
  }
  int close_device(ibv_context*) override { return 0; }
  int query_port(ibv_context* c, uint8_t, ibv_port_attr* a) override {
    if (int rc = should_fail("query_port")) return rc;
    const Device& d = *reinterpret_cast<Device*>(c->device);
    *a = {};
    a->state = d.state;
    a->active_mtu = d.active_mtu;
    a->gid_tbl_len = static_cast<int>(d.gids.size());
    return 0;
  }
  int query_gid_ex(ibv_context* c, uint32_t, uint32_t index, ibv_gid_entry* e, uint32_t) override {
    const Device& d = *reinterpret_cast<Device*>(c->device);
    if (index >= d.gids.size()) return EINVAL;
    *e = {};
    verbs::ipv4_mapped_gid(d.gids[index].ipv4, e->gid.raw);
    e->gid_index = index;
    e->gid_type = d.gids[index].type;
    e->ndev_ifindex = d.gids[index].ifindex;
    return 0;
  }
  ibv_pd* alloc_pd(ibv_context*) override { return should_fail("alloc_pd") ? nullptr : &pd_; }
  int dealloc_pd(ibv_pd*) override { return 0; }
  ibv_cq* create_cq(ibv_context*, int) override {
    cqs_.push_back(std::make_unique<ibv_cq>());
    return cqs_.back().get();
  }
  int destroy_cq(ibv_cq*) override { return 0; }
  ibv_qp* create_qp(ibv_pd*, ibv_qp_init_attr* a) override {
    if (should_fail("create_qp")) return nullptr;
    qp_.qp_num = 0x123;
    send_cq_ = a->send_cq;
    recv_cq_ = a->recv_cq;
    qp_state_ = IBV_QPS_RESET;
    return &qp_;
  }
  int destroy_qp(ibv_qp*) override { return 0; }
  int modify_qp(ibv_qp*, ibv_qp_attr* a, int mask) override {
    if (int rc = should_fail("modify_qp")) return rc;
    if ((mask & IBV_QP_STATE) != 0) qp_state_ = a->qp_state;
    return 0;
  }
  int query_qp(ibv_qp*, ibv_qp_attr* a, int, ibv_qp_init_attr*) override {
    a->qp_state = qp_state_;
    return 0;
  }
  ibv_mr* reg_mr(ibv_pd*, void*, size_t, int) override {
    mr_.lkey = 77;
    return &mr_;
  }
  int dereg_mr(ibv_mr*) override { return 0; }
  ibv_ah* create_ah(ibv_pd*, ibv_ah_attr* attr) override {
    last_ah = *attr;
    return &ah_;
  }
  int destroy_ah(ibv_ah*) override { return 0; }
  int post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) override {
    if (int rc = should_fail("post_send")) return rc;
    if (qp_state_ != IBV_QPS_RTS) return EINVAL;
    const auto* p = reinterpret_cast<const uint8_t*>(wr->sg_list[0].addr);
    sent_.emplace_back(p, p + wr->sg_list[0].length);
    if ((wr->send_flags & IBV_SEND_SIGNALED) != 0 || send_status_ != IBV_WC_SUCCESS) {
      ibv_wc wc{};
      wc.wr_id = wr->wr_id;
      wc.status = send_status_;
      send_completions_.push_back(wc);
      if (send_status_ != IBV_WC_SUCCESS) qp_state_ = IBV_QPS_ERR;
      send_status_ = IBV_WC_SUCCESS;
    }
    return 0;
  }
  int post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr**) override {
    if (int rc = should_fail("post_recv")) return rc;
    posted_.push_back({wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length});
    return 0;
  }
  int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) override {
    if (int rc = should_fail("poll_cq")) return -rc;
    auto& q = cq == send_cq_ ? send_completions_ : recv_completions_;
    int k = 0;
    while (k < n && !q.empty()) {
      wc[k++] = q.front();
      q.pop_front();
    }
    return k;
  }

 private:
  struct Posted {
    uint64_t wr_id;
    uint64_t addr;
    uint32_t len;
  };
  int should_fail(const std::string& fn) {
    auto it = fails_.find(fn);
    if (it == fails_.end()) return 0;
    if (it->second.second > 0) {
      --it->second.second;
      return 0;
    }
    const int rc = it->second.first;
    fails_.erase(it);
    return rc;
  }
  std::map<std::string, std::pair<int, int>> fails_;
  std::vector<ibv_device*> list_;
  std::vector<std::unique_ptr<ibv_context>> contexts_;
  std::vector<std::unique_ptr<ibv_cq>> cqs_;
  ibv_pd pd_{};
  ibv_qp qp_{};
  ibv_mr mr_{};
  ibv_ah ah_{};

 public:
  ibv_ah_attr last_ah{};  // the attributes of the last create_ah

 private:
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp_state qp_state_ = IBV_QPS_RESET;
  ibv_wc_status send_status_ = IBV_WC_SUCCESS;
  std::deque<Posted> posted_;
  std::deque<ibv_wc> recv_completions_, send_completions_;
  std::vector<std::vector<uint8_t>> sent_;
};

}  // namespace sumcast::shim::testing
