// NCCL's external network plugin interface, declared by us from NCCL's documented layout
// (ext-net/README.md and the example headers of NVIDIA/nccl; nothing is copied). Only what the
// Sumcast plugin exports or its tests drive: the ncclNet and ncclCollNet tables of ABI versions
// 8 to 12 and the types they use. Field order and types are the ABI: never reorder.
//
//   version  first NCCL release that loads it   differences from the previous version
//   v8       2.20 (2.20 .. 2.23 load v8 first)  regMrDmaBuf, getDeviceMr, irecvConsumed; CollNet
//                                                 gains iallgather / ireducescatter (ncclNetSGE_v8)
//   v9       2.24 (2.24, 2.25)                  sizes are size_t (isend, irecv, iallreduce count,
//                                                 SGE size); properties gain forceFlush, vProps,
//                                                 maxP2pBytes, maxCollBytes; makeVDevice
//   v10      2.26 (2.26, 2.27)                  ncclNet init takes a profiler callback, connect a
//                                                 ncclNetCommConfig, isend/irecv profiler handles;
//                                                 CollNet v10 = v9 with v10 properties
//   v11      2.28 (2.28, 2.29)                  init is per communicator: it returns a context
//                                                 (ncclNet: from the comm id and a config) that
//                                                 listen/connect get and finalize frees; ncclNet
//                                                 gains setNetAttr; properties gain
//                                                 maxMultiRequestSize
//   v12      2.30                               a virtual NIC may merge 8 devices; properties gain
//                                                 railId and planeId (int16_t)
// NCCL loads the newest table it finds and wraps older ones; exporting v8 to v12 gives every
// release from 2.20 on its own native table.
//
// The names are NCCL's (so the code reads like NCCL's documentation), inside a namespace so that
// this header can never collide with NCCL's own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sumcast::nccl::abi {

// Result codes (nccl.h; stable since NCCL 2.x).
enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

// Element types (nccl.h). 10 and 11 (fp8) exist from NCCL 2.24 on; NCCL asks reduceSupport for
// every type it knows, so the plugin must answer for values it has never heard of.
enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
};
inline constexpr int kNcclNumTypesMax = 12;

// Reduction operators (nccl.h). NCCL hands ncclAvg to the network as ncclSum (it divides on the
// GPU) and asks reduceSupport only for ops 0..3. Values >= 5 are user-defined (PreMulSum) ops.
enum ncclRedOp_t : int {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
};

// Logger handed to init (debug.h / nccl_common.h).
enum ncclDebugLogLevel : int {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
};
// Subsystem flags of a log line (the ones the plugin uses).
inline constexpr unsigned long NCCL_INIT = 1;
inline constexpr unsigned long NCCL_COLL = 2;
inline constexpr unsigned long NCCL_NET = 16;
inline constexpr unsigned long NCCL_REG = 8192;

using ncclDebugLogger_t = void (*)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                   const char* fmt, ...);
// v10: the profiler callback NCCL passes to ncclNet init (NCCL 2.26's nccl_net.h).
using ncclProfilerCallback_t = ncclResult_t (*)(void** event_handle, int type, void* parent_handle, int64_t plugin_id,
                                                void* ext_data);

// Constants of nccl_net.h.
inline constexpr size_t NCCL_NET_HANDLE_MAXSIZE = 128;
inline constexpr int NCCL_PTR_HOST = 0x1;
inline constexpr int NCCL_PTR_CUDA = 0x2;
inline constexpr int NCCL_PTR_DMABUF = 0x4;
inline constexpr int NCCL_NET_MAX_REQUESTS = 32;  // requests NCCL keeps outstanding per comm
// v10: irecv may be called with *request == this value: completion may be skipped (a hint).
inline constexpr uintptr_t NCCL_NET_OPTIONAL_RECV_COMPLETION = 0x1;
// Largest transfers NCCL hands to v8 tables (it assumes these for plugins that cannot say).
inline constexpr size_t kMaxNetSize = 1ull << 30;      // ncclNet isend/irecv
inline constexpr size_t kMaxCollNetSize = 1ull << 29;  // ncclCollNet calls
// v9+: NCCL refuses a device whose maxP2pBytes / maxCollBytes is not in (0, this].
inline constexpr size_t NCCL_MAX_NET_SIZE_BYTES = 1ull << 40;  // 1 TiB
// A virtual NIC merges at most this many physical ones: 4 in v9 .. v11, 8 in v12.
inline constexpr int NCCL_NET_MAX_DEVS_PER_NIC_V9 = 4;
inline constexpr int NCCL_NET_MAX_DEVS_PER_NIC_V12 = 8;
// v11+: "not set" in ncclNetAttr fields; v12: "unknown" rail or plane id.
inline constexpr int NCCL_NET_ATTR_UNDEF = -1;
inline constexpr int NCCL_NET_ID_UNDEF = -1;

// net_device.h: what kind of device-side offload a NIC offers. The plugin is host-only.
enum ncclNetDeviceType : int {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
};
inline constexpr int NCCL_NET_DEVICE_INVALID_VERSION = 0;

// Device offload handle (v7 .. v10 share this layout). NCCL passes a pointer to a pointer of it
// to connect/accept; a host-only plugin leaves it alone.
struct ncclNetDeviceHandle_v8_t {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};
using ncclNetDeviceHandle_v9_t = ncclNetDeviceHandle_v8_t;
using ncclNetDeviceHandle_v10_t = ncclNetDeviceHandle_v8_t;
using ncclNetDeviceHandle_v11_t = ncclNetDeviceHandle_v8_t;
using ncclNetDeviceHandle_v12_t = ncclNetDeviceHandle_v8_t;

// ---- properties ---------------------------------------------------------------------------------

struct ncclNetProperties_v8_t {
  char* name;       // for logs; NCCL matches CollNet devices to net devices by it
  char* pciPath;    // realpath of the NIC's PCI device in /sys, or NULL (virtual NIC)
  uint64_t guid;    // unique per NIC chip
  int ptrSupport;   // NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF
  int regIsGlobal;  // 1: a registration is not tied to the comm it was made on
  int speed;        // Mbit/s
  int port;
  float latency;  // microseconds; 0: unknown
  int maxComms;
  int maxRecvs;  // most buffers one irecv may group
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
};

struct ncclNetVDeviceProps_v9_t {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
};
using ncclNetVDeviceProps_v10_t = ncclNetVDeviceProps_v9_t;

struct ncclNetProperties_v9_t {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;  // 1: NCCL must flush every receive
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps;  // the physical devices behind this one (itself, for us)
  size_t maxP2pBytes;               // largest isend/irecv
  size_t maxCollBytes;              // largest CollNet call
};
using ncclNetProperties_v10_t = ncclNetProperties_v9_t;
using ncclNetVDeviceProps_v11_t = ncclNetVDeviceProps_v9_t;

struct ncclNetProperties_v11_t {  // v10 + maxMultiRequestSize
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;  // requests one multi-request may carry; 1: none
};

struct ncclNetVDeviceProps_v12_t {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
};

struct ncclNetProperties_v12_t {  // v11 with 8-device vProps, + railId, planeId
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;   // NCCL_NET_ID_UNDEF: NCCL groups NICs by topology alone
  int16_t planeId;  // NCCL_NET_ID_UNDEF likewise
};

// v10: per-connection settings passed to connect.
inline constexpr int NCCL_NET_TRAFFIC_CLASS_UNDEF = -1;
struct ncclNetCommConfig_v10_t {
  int trafficClass;
};
using ncclNetCommConfig_v11_t = ncclNetCommConfig_v10_t;
using ncclNetCommConfig_v12_t = ncclNetCommConfig_v10_t;

// v11+: hints NCCL passes to setNetAttr (how many peers and flows a comm will talk to).
struct ncclNetCommAttr_v11_t {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};
struct ncclNetAttr_v11_t {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};
using ncclNetAttr_v12_t = ncclNetAttr_v11_t;

// ---- ncclNet --------------------------------------------------------------------------------------
// listen/connect/accept never block: connect and accept return success with a NULL comm until the
// connection is up and are called again. isend/irecv/iallreduce may return a NULL request: NCCL
// calls again later. test reports completion and the received sizes.

struct ncclNet_v8_t {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t** recv_dev_comm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* send_comm);
  ncclResult_t (*closeRecv)(void* recv_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);  // device offload only
  ncclResult_t (*irecvConsumed)(void* recv_comm, int n, void* request);         // device offload only
};

struct ncclNet_v9_t {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v9_t** recv_dev_comm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* send_comm);
  ncclResult_t (*closeRecv)(void* recv_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* dev, ncclNetVDeviceProps_v9_t* props);  // NULL: no virtual NICs
};

struct ncclNet_v10_t {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                          ncclNetDeviceHandle_v10_t** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v10_t** recv_dev_comm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* send_comm);
  ncclResult_t (*closeRecv)(void* recv_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* dev, ncclNetVDeviceProps_v10_t* props);
};

// v11 and v12 differ only in the property and virtual-device types they name. init is called once
// per NCCL communicator and returns a context; listen and connect get it, finalize releases it.
template <typename Props, typename VProps, typename Config, typename Attr>
struct NetV11Layout {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t comm_id, Config* config, ncclDebugLogger_t logger,
                       ncclProfilerCallback_t profiler);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Props* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                          ncclNetDeviceHandle_v11_t** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t** recv_dev_comm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* send_comm);
  ncclResult_t (*closeRecv)(void* recv_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* dev, VProps* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, Attr* attr);  // may be NULL; hints only
};
using ncclNet_v11_t =
    NetV11Layout<ncclNetProperties_v11_t, ncclNetVDeviceProps_v11_t, ncclNetCommConfig_v11_t, ncclNetAttr_v11_t>;
using ncclNet_v12_t =
    NetV11Layout<ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t, ncclNetCommConfig_v12_t, ncclNetAttr_v12_t>;

// ---- ncclCollNet ----------------------------------------------------------------------------------
// connect gets every rank's listen handle (one rank per node) and this rank's index. iallgather /
// ireducescatter work on a window [windowOffset, windowOffset + windowBytes) of the nranks *
// bytesPerRank buffer; the caller's own part is [rank * bytesPerRank, (rank + 1) * bytesPerRank).

struct ncclNetSGE_v8_t {
  void* mhandle;
  void* address;
  uint32_t size;
};
struct ncclNetSGE_v9_t {
  void* mhandle;
  void* address;
  size_t size;
};
using ncclNetSGE_v10_t = ncclNetSGE_v9_t;
using ncclNetSGE_v11_t = ncclNetSGE_v9_t;
using ncclNetSGE_v12_t = ncclNetSGE_v9_t;

struct ncclCollNet_v8_t {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dtype, ncclRedOp_t op, int* supported);
  ncclResult_t (*regMr)(void* coll_comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* coll_comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* coll_comm, void* mhandle);
  ncclResult_t (*iallreduce)(void* coll_comm, void* send_data, void* recv_data, int count, ncclDataType_t dtype,
                             ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request);
  ncclResult_t (*iallgather)(void* coll_comm, void* send_data, int n_recv_parts, ncclNetSGE_v8_t* recv_parts,
                             size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void* send_mhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* coll_comm, int n_send_parts, ncclNetSGE_v8_t* send_parts, void* recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes, ncclDataType_t dtype,
                                 ncclRedOp_t op, void* recv_mhandle, void** request);
  ncclResult_t (*iflush)(void* coll_comm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* coll_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
};

template <typename Props, typename Sge, typename VProps>
struct CollNetV9Layout {  // v9 and v10 differ only in the properties type they name
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Props* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dtype, ncclRedOp_t op, int* supported);
  ncclResult_t (*regMr)(void* coll_comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* coll_comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* coll_comm, void* mhandle);
  ncclResult_t (*iallreduce)(void* coll_comm, void* send_data, void* recv_data, size_t count, ncclDataType_t dtype,
                             ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request);
  ncclResult_t (*iallgather)(void* coll_comm, void* send_data, int n_recv_parts, Sge* recv_parts, size_t bytes_per_rank,
                             size_t window_offset, size_t window_bytes, void* send_mhandle, void** request);
  ncclResult_t (*ireducescatter)(void* coll_comm, int n_send_parts, Sge* send_parts, void* recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes, ncclDataType_t dtype,
                                 ncclRedOp_t op, void* recv_mhandle, void** request);
  ncclResult_t (*iflush)(void* coll_comm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* coll_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*makeVDevice)(int* dev, VProps* props);
};
using ncclCollNet_v9_t = CollNetV9Layout<ncclNetProperties_v9_t, ncclNetSGE_v9_t, ncclNetVDeviceProps_v9_t>;
using ncclCollNet_v10_t = CollNetV9Layout<ncclNetProperties_v10_t, ncclNetSGE_v10_t, ncclNetVDeviceProps_v10_t>;

// v11 and v12: init is per communicator (a context from the comm id), listen gets the context,
// finalize releases it; otherwise v10's calls.
template <typename Props, typename Sge, typename VProps>
struct CollNetV11Layout {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Props* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dtype, ncclRedOp_t op, int* supported);
  ncclResult_t (*regMr)(void* coll_comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* coll_comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* coll_comm, void* mhandle);
  ncclResult_t (*iallreduce)(void* coll_comm, void* send_data, void* recv_data, size_t count, ncclDataType_t dtype,
                             ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request);
  ncclResult_t (*iallgather)(void* coll_comm, void* send_data, int n_recv_parts, Sge* recv_parts, size_t bytes_per_rank,
                             size_t window_offset, size_t window_bytes, void* send_mhandle, void** request);
  ncclResult_t (*ireducescatter)(void* coll_comm, int n_send_parts, Sge* send_parts, void* recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes, ncclDataType_t dtype,
                                 ncclRedOp_t op, void* recv_mhandle, void** request);
  ncclResult_t (*iflush)(void* coll_comm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* coll_comm);
  ncclResult_t (*closeListen)(void* listen_comm);
  ncclResult_t (*makeVDevice)(int* dev, VProps* props);
  ncclResult_t (*finalize)(void* ctx);
};
using ncclCollNet_v11_t = CollNetV11Layout<ncclNetProperties_v11_t, ncclNetSGE_v11_t, ncclNetVDeviceProps_v11_t>;
using ncclCollNet_v12_t = CollNetV11Layout<ncclNetProperties_v12_t, ncclNetSGE_v12_t, ncclNetVDeviceProps_v12_t>;

// The layout checks (sizes, offsets, constants per version) are in plugin/abi_layout_check.cc,
// compiled into the plugin: a drift fails the build.

}  // namespace sumcast::nccl::abi
