// ncclNetPlugin_v11 / ncclCollNetPlugin_v11: the tables NCCL 2.28 and 2.29 load. init is called
// once per NCCL communicator and returns a context that listen/connect get and finalize frees
// (core.h context_init); setNetAttr passes hints the plugin only logs; properties add
// maxMultiRequestSize (1: no multi-requests). Layouts: nccl_abi.h.
#include "adapt.h"

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT constinit ncclNet_v11_t ncclNetPlugin_v11 =
    net_table<ncclNet_v11_t, ncclNetProperties_v11_t, init_v11<ncclNetCommConfig_v11_t>, context_listen, connect_v11,
              isend_v10, irecv_v10>();

SUMCAST_NCCL_EXPORT constinit ncclCollNet_v11_t ncclCollNetPlugin_v11 =
    coll_table<ncclCollNet_v11_t, ncclNetProperties_v11_t, ncclNetSGE_v11_t, coll_init_v11, coll_context_listen,
               coll_iallreduce>();

}  // extern "C"
