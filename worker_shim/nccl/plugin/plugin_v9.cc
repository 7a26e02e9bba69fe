// ncclNetPlugin_v9 / ncclCollNetPlugin_v9: the tables NCCL 2.24 and 2.25 load. Sizes and counts
// are size_t; properties add forceFlush, vProps and size limits; makeVDevice is optional (NULL:
// NCCL uses the physical devices). Layouts: nccl_abi.h.
#include "adapt.h"

namespace sumcast::nccl::adapt {
namespace {

ncclResult_t connect_v9(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t**) {
  return net_connect(dev, handle, send_comm);
}

ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return net_isend(comm, data, size, tag, mhandle, request);
}

ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return net_irecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace sumcast::nccl::adapt

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT constinit ncclNet_v9_t ncclNetPlugin_v9 =
    net_table<ncclNet_v9_t, ncclNetProperties_v9_t, init, net_listen, connect_v9, isend_v9, irecv_v9>();

SUMCAST_NCCL_EXPORT constinit ncclCollNet_v9_t ncclCollNetPlugin_v9 =
    coll_table<ncclCollNet_v9_t, ncclNetProperties_v9_t, ncclNetSGE_v9_t, init, coll_listen, coll_iallreduce>();

}  // extern "C"
