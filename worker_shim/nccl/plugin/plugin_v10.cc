// ncclNetPlugin_v10 / ncclCollNetPlugin_v10: the tables NCCL 2.26 and 2.27 load first, and 2.28
// .. 2.30 load when no newer one is exported. ncclNet v10 adds the profiler callback to init, a
// per-connection config to connect and profiler handles to isend/irecv; the plugin emits no
// profiler events and has no traffic classes. CollNet v10 is v9 with v10 properties.
#include "adapt.h"

namespace sumcast::nccl::adapt {
namespace {

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return init(logger); }

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t*, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v10_t**) {
  return net_connect(dev, handle, send_comm);
}

ncclResult_t accept_v10(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v10_t**) {
  return net_accept(listen_comm, recv_comm);
}

ncclResult_t isend_v10(void* comm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return net_isend(comm, data, size, tag, mhandle, request);
}

// *request may come in as NCCL_NET_OPTIONAL_RECV_COMPLETION (a hint); it is always overwritten.
ncclResult_t irecv_v10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                       void** request) {
  return net_irecv(comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t iflush_v10(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return net_iflush(comm, n, data, sizes, mhandles, request);
}

ncclResult_t iallgather_v10(void* comm, void* send, int n, ncclNetSGE_v10_t* parts, size_t bytes_per_rank,
                            size_t window_offset, size_t window_bytes, void* send_mh, void** request) {
  Sge core[kMaxParts];
  return coll_iallgather(comm, send, n, to_core_sge(n, parts, core) ? core : nullptr, bytes_per_rank, window_offset,
                         window_bytes, send_mh, request);
}

ncclResult_t ireducescatter_v10(void* comm, int n, ncclNetSGE_v10_t* parts, void* recv, size_t bytes_per_rank,
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

SUMCAST_NCCL_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    kPluginName,       init_v10,     net_devices,    net_properties_v9<ncclNetProperties_v10_t>,
    net_listen,        connect_v10,  accept_v10,     net_reg_mr,
    net_reg_mr_dmabuf, net_dereg_mr, isend_v10,      irecv_v10,
    iflush_v10,        net_test,     net_close_send, net_close_recv,
    net_close_listen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
};

SUMCAST_NCCL_EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    kPluginName,
    init,
    coll_devices,
    coll_properties_v9<ncclNetProperties_v10_t>,
    coll_listen,
    coll_connect,
    coll_reduce_support,
    coll_reg_mr,
    coll_reg_mr_dmabuf,
    coll_dereg_mr,
    coll_iallreduce,
    iallgather_v10,
    ireducescatter_v10,
    coll_iflush,
    coll_test,
    coll_close,
    coll_close_listen,
    nullptr,  // makeVDevice
};

}  // extern "C"
