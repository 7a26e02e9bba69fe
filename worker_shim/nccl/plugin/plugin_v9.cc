// ncclNetPlugin_v9 / ncclCollNetPlugin_v9: the tables NCCL 2.24 and 2.25 load. Sizes and counts
// are size_t; properties add forceFlush, vProps and size limits; makeVDevice is optional (NULL:
// NCCL uses the physical devices). Layouts: nccl_abi.h.
#include "adapt.h"

namespace sumcast::nccl::adapt {
namespace {

ncclResult_t connect_v9(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t**) {
  return net_connect(dev, handle, send_comm);
}

ncclResult_t accept_v9(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v9_t**) {
  return net_accept(listen_comm, recv_comm);
}

ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return net_isend(comm, data, size, tag, mhandle, request);
}

ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return net_irecv(comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t iflush_v9(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return net_iflush(comm, n, data, sizes, mhandles, request);
}

ncclResult_t iallgather_v9(void* comm, void* send, int n, ncclNetSGE_v9_t* parts, size_t bytes_per_rank,
                           size_t window_offset, size_t window_bytes, void* send_mh, void** request) {
  Sge core[kMaxParts];
  return coll_iallgather(comm, send, n, to_core_sge(n, parts, core) ? core : nullptr, bytes_per_rank, window_offset,
                         window_bytes, send_mh, request);
}

ncclResult_t ireducescatter_v9(void* comm, int n, ncclNetSGE_v9_t* parts, void* recv, size_t bytes_per_rank,
                               size_t window_offset, size_t window_bytes, ncclDataType_t dtype, ncclRedOp_t op,
                               void* recv_mh, void** request) {
  Sge core[kMaxParts];
  return coll_ireducescatter(comm, n, to_core_sge(n, parts, core) ? core : nullptr, recv, bytes_per_rank, window_offset,
                             window_bytes, dtype, op, recv_mh, request);
}

}  // namespace
}  // namespace sumcast::nccl::adapt

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    kPluginName,       init,         net_devices,    net_properties_v9<ncclNetProperties_v9_t>,
    net_listen,        connect_v9,   accept_v9,      net_reg_mr,
    net_reg_mr_dmabuf, net_dereg_mr, isend_v9,       irecv_v9,
    iflush_v9,         net_test,     net_close_send, net_close_recv,
    net_close_listen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice: no virtual NICs
};

SUMCAST_NCCL_EXPORT ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    kPluginName,
    init,
    coll_devices,
    coll_properties_v9<ncclNetProperties_v9_t>,
    coll_listen,
    coll_connect,
    coll_reduce_support,
    coll_reg_mr,
    coll_reg_mr_dmabuf,
    coll_dereg_mr,
    coll_iallreduce,
    iallgather_v9,
    ireducescatter_v9,
    coll_iflush,
    coll_test,
    coll_close,
    coll_close_listen,
    nullptr,  // makeVDevice
};

}  // extern "C"
