// ncclNetPlugin_v10 / ncclCollNetPlugin_v10: the tables NCCL 2.26 and 2.27 load (2.28 and later
// load v11/v12 first). ncclNet v10 adds the profiler callback to init, a per-connection config to
// connect (its traffic class marks the connection: core.h) and profiler handles to isend/irecv;
// the plugin emits no profiler events. CollNet v10 is v9 with v10 properties. Layouts: nccl_abi.h.
#include "adapt.h"

namespace sumcast::nccl::adapt {
namespace {

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return init(logger); }

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v10_t**) {
  return net_connect_tc(dev, handle, send_comm,
                        config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF);
}

}  // namespace
}  // namespace sumcast::nccl::adapt

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT constinit ncclNet_v10_t ncclNetPlugin_v10 =
    net_table<ncclNet_v10_t, ncclNetProperties_v10_t, init_v10, net_listen, connect_v10, isend_v10, irecv_v10>();

SUMCAST_NCCL_EXPORT constinit ncclCollNet_v10_t ncclCollNetPlugin_v10 =
    coll_table<ncclCollNet_v10_t, ncclNetProperties_v10_t, ncclNetSGE_v10_t, init, coll_listen, coll_iallreduce>();

}  // extern "C"
