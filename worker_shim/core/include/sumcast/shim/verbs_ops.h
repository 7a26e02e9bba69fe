// The ibverbs calls the verbs transport makes, behind one interface: the real rdma-core library
// (real_verbs()), or a scripted fake in tests (tests/shim/fake_verbs.h), since no RDMA device
// exists where the tests run. Only available where rdma-core's headers are (verbs_transport_built()).
//
// Each member has the signature and the return convention of the ibverbs function of the same
// name (ibv_post_send, ibv_poll_cq, ... are inline functions in verbs.h; real_verbs() calls them).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace sumcast::shim {

class VerbsOps {
 public:
  virtual ~VerbsOps() = default;
  virtual ibv_device** get_device_list(int* count) = 0;
  virtual void free_device_list(ibv_device** list) = 0;
  virtual const char* get_device_name(ibv_device* device) = 0;
  virtual ibv_context* open_device(ibv_device* device) = 0;
  virtual int close_device(ibv_context* context) = 0;
  virtual int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) = 0;
  virtual int query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                           uint32_t flags) = 0;
  virtual ibv_pd* alloc_pd(ibv_context* context) = 0;
  virtual int dealloc_pd(ibv_pd* pd) = 0;
  virtual ibv_cq* create_cq(ibv_context* context, int entries) = 0;
  virtual int destroy_cq(ibv_cq* cq) = 0;
  virtual ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) = 0;
  virtual int destroy_qp(ibv_qp* qp) = 0;
  virtual int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) = 0;
  virtual int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) = 0;
  virtual ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) = 0;
  virtual int dereg_mr(ibv_mr* mr) = 0;
  virtual ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) = 0;
  virtual int destroy_ah(ibv_ah* ah) = 0;
  virtual int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) = 0;
  virtual int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) = 0;
  virtual int poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) = 0;
};

// rdma-core's libibverbs.
VerbsOps& real_verbs();

}  // namespace sumcast::shim
