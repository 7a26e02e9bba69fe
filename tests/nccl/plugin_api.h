// The test harness's view of libnccl-net-sumcast.so, loaded the way NCCL loads it: dlopen, then
// dlsym of "ncclNetPlugin_v<N>" / "ncclCollNetPlugin_v<N>" for one ABI version, then calls through
// the table with that version's argument types (int sizes in v8, size_t in v9+, v10's extra
// arguments, v11's per-communicator context). Each version's table is wrapped into the same
// std::function set so one test body drives all of them.
#pragma once

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl_test {

using namespace sumcast::nccl::abi;  // NOLINT: the harness reads like NCCL

struct Props {
  std::string name;
  bool has_pci_path = false;
  uint64_t guid = 0;
  int ptr_support = 0;
  int speed = 0;
  int max_comms = 0;
  int max_recvs = 0;
  int device_type = -1;
  int vdevs = -1;  // v9+: vProps.ndevs
  int vdev0 = -1;
  size_t max_p2p = 0;  // v9+
  size_t max_coll = 0;
  int max_multi_request = -1;  // v11+
  int rail_id = -2;            // v12 (-2: the version has no such field)
  int plane_id = -2;
};

struct SgePart {
  void* mhandle;
  void* address;
  size_t size;
};

struct NetApi {
  std::string name;
  int abi = 0;
  // v11+: init creates the communicator's context (kept by the wrapper and passed to listen and
  // connect), finalize releases it; older versions: finalize does nothing.
  std::function<ncclResult_t(ncclDebugLogger_t)> init;
  std::function<ncclResult_t()> finalize;
  std::function<ncclResult_t(ncclNetAttr_v11_t*)> set_net_attr;  // empty below v11
  std::function<ncclResult_t(int*)> devices;
  std::function<ncclResult_t(int, Props*)> properties;
  std::function<ncclResult_t(int, void*, void**)> listen;
  std::function<ncclResult_t(int, void*, void**)> connect;
  std::function<ncclResult_t(void*, void**)> accept;
  std::function<ncclResult_t(void*, void*, size_t, int, void**)> reg_mr;
  std::function<ncclResult_t(void*, void*)> dereg_mr;
  std::function<ncclResult_t(void*, void*, size_t, int, void*, void**)> isend;
  std::function<ncclResult_t(void*, int, void**, size_t*, int*, void**, void**)> irecv;
  std::function<ncclResult_t(void*, int, void**, int*, void**, void**)> iflush;
  std::function<ncclResult_t(void*, int*, int*)> test;
  std::function<ncclResult_t(void*)> close_send, close_recv, close_listen;
};

struct CollApi {
  std::string name;
  std::function<ncclResult_t(ncclDebugLogger_t)> init;
  std::function<ncclResult_t()> finalize;
  std::function<ncclResult_t(int*)> devices;
  std::function<ncclResult_t(int, Props*)> properties;
  std::function<ncclResult_t(int, void*, void**)> listen;
  std::function<ncclResult_t(void**, int, int, void*, void**)> connect;
  std::function<ncclResult_t(ncclDataType_t, ncclRedOp_t, int*)> reduce_support;
  std::function<ncclResult_t(void*, void*, size_t, int, void**)> reg_mr;
  std::function<ncclResult_t(void*, void*)> dereg_mr;
  std::function<ncclResult_t(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*, void**)>
      iallreduce;
  std::function<ncclResult_t(void*, void*, int, SgePart*, size_t, size_t, size_t, void*, void**)> iallgather;
  std::function<ncclResult_t(void*, int, SgePart*, void*, size_t, size_t, size_t, ncclDataType_t, ncclRedOp_t, void*,
                             void**)>
      ireducescatter;
  std::function<ncclResult_t(void*, void*, int, void*, void**)> iflush;
  std::function<ncclResult_t(void*, int*, int*)> test;
  std::function<ncclResult_t(void*)> close_coll, close_listen;
};

class Plugin {
 public:
  // Throws std::runtime_error when the library or a table of `abi` cannot be found, or when
  // `traffic_class` (what NCCL hands the plugin from ncclConfig_t.trafficClass: v10 to each
  // connect, v11+ to init) is set for a version that has none.
  Plugin(const std::string& path, int abi, int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  NetApi net;
  CollApi coll;

 private:
  void* lib_ = nullptr;
  void* net_ctx_ = nullptr;  // v11+
  void* coll_ctx_ = nullptr;
};

}  // namespace sumcast::nccl_test
