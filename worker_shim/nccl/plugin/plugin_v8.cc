// ncclNetPlugin_v8 / ncclCollNetPlugin_v8: the tables NCCL 2.20 .. 2.23 load (newer NCCL wraps
// them). v8 passes sizes and counts as int. Layouts: nccl_abi.h.
#include "adapt.h"

namespace sumcast::nccl::adapt {
namespace {

ncclResult_t isend_v8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) return ncclInvalidArgument;
  return net_isend(comm, data, static_cast<size_t>(size), tag, mhandle, request);
}

ncclResult_t irecv_v8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  size_t wide[kMaxRecvs];
  return net_irecv(comm, n, data, to_sizes(n, sizes, wide), tags, mhandles, request);
}

ncclResult_t iallreduce_v8(void* comm, void* send, void* recv, int count, ncclDataType_t dtype, ncclRedOp_t op,
                           void* send_mh, void* recv_mh, void** request) {
  if (count < 0) return ncclInvalidArgument;
  return coll_iallreduce(comm, send, recv, static_cast<size_t>(count), dtype, op, send_mh, recv_mh, request);
}

ncclResult_t iallgather_v8(void* comm, void* send, int n, ncclNetSGE_v8_t* parts, size_t bytes_per_rank,
                           size_t window_offset, size_t window_bytes, void* send_mh, void** request) {
  Sge core[kMaxParts];
  return coll_iallgather(comm, send, n, to_core_sge(n, parts, core) ? core : nullptr, bytes_per_rank, window_offset,
                         window_bytes, send_mh, request);
}

ncclResult_t ireducescatter_v8(void* comm, int n, ncclNetSGE_v8_t* parts, void* recv, size_t bytes_per_rank,
                               size_t window_offset, size_t window_bytes, ncclDataType_t dtype, ncclRedOp_t op,
                               void* recv_mh, void** request) {
  Sge core[kMaxParts];
  return coll_ireducescatter(comm, n, to_core_sge(n, parts, core) ? core : nullptr, recv, bytes_per_rank, window_offset,
                             window_bytes, dtype, op, recv_mh, request);
}

ncclResult_t connect_v8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  return net_connect(dev, handle, send_comm);
}

ncclResult_t accept_v8(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
  return net_accept(listen_comm, recv_comm);
}

ncclResult_t iflush_v8(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return net_iflush(comm, n, data, sizes, mhandles, request);
}

}  // namespace
}  // namespace sumcast::nccl::adapt

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    kPluginName,       init,         net_devices,    net_properties_v8<ncclNetProperties_v8_t>,
    net_listen,        connect_v8,   accept_v8,      net_reg_mr,
    net_reg_mr_dmabuf, net_dereg_mr, isend_v8,       irecv_v8,
    iflush_v8,         net_test,     net_close_send, net_close_recv,
    net_close_listen,
    nullptr,  // getDeviceMr: device offload only (netDeviceType HOST)
    nullptr,  // irecvConsumed: device offload only
};

SUMCAST_NCCL_EXPORT ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    kPluginName,        init,          coll_devices,        coll_properties_v8<ncclNetProperties_v8_t>,
    coll_listen,        coll_connect,  coll_reduce_support, coll_reg_mr,
    coll_reg_mr_dmabuf, coll_dereg_mr, iallreduce_v8,       iallgather_v8,
    ireducescatter_v8,  coll_iflush,   coll_test,           coll_close,
    coll_close_listen,
};

}  // extern "C"
