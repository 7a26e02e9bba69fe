// ncclNetPlugin_v12 / ncclCollNetPlugin_v12: the tables NCCL 2.30 loads. v11's calls; properties
// hold up to 8 devices per virtual NIC (the plugin reports one: itself) and add railId / planeId
// (NCCL_NET_ID_UNDEF: NCCL places the NIC from its PCI path). Layouts: nccl_abi.h.
#include "adapt.h"

using namespace sumcast::nccl;         // NOLINT
using namespace sumcast::nccl::adapt;  // NOLINT

extern "C" {

SUMCAST_NCCL_EXPORT constinit ncclNet_v12_t ncclNetPlugin_v12 =
    net_table<ncclNet_v12_t, ncclNetProperties_v12_t, init_v11<ncclNetCommConfig_v12_t>, context_listen, connect_v11,
              isend_v10, irecv_v10>();

SUMCAST_NCCL_EXPORT constinit ncclCollNet_v12_t ncclCollNetPlugin_v12 =
    coll_table<ncclCollNet_v12_t, ncclNetProperties_v12_t, ncclNetSGE_v12_t, coll_init_v11, coll_context_listen,
               coll_iallreduce>();

}  // extern "C"
