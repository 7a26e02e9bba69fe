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

ncclResult_t connect_v8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  return net_connect(dev, handle, send_comm);
}

}  // namespace
}  // namespace sumcast::nccl::adapt

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT constinit ncclNet_v8_t ncclNetPlugin_v8 =
    net_table<ncclNet_v8_t, ncclNetProperties_v8_t, init, net_listen, connect_v8, isend_v8, irecv_v8>();

SUMCAST_NCCL_EXPORT constinit ncclCollNet_v8_t ncclCollNetPlugin_v8 =
    coll_table<ncclCollNet_v8_t, ncclNetProperties_v8_t, ncclNetSGE_v8_t, init, coll_listen, iallreduce_v8>();

}  // extern "C"
