// Helpers shared by the per-version tables (plugin_v8.cc .. plugin_v12.cc): copying the core's
// properties into each version's struct, its SGE lists into the core's, and the adapters that
// several versions share. Only the tables themselves are exported (SUMCAST_NCCL_EXPORT);
// everything else in the library is hidden.
#pragma once

#include <cstddef>
#include <type_traits>

#include "sumcast/nccl/core.h"
#include "sumcast/nccl/nccl_abi.h"

// Marks an exported table; definitions sit inside extern "C" { } so their names are unmangled, and
// are constinit: filled at compile time, ready when NCCL looks them up right after dlopen.
#define SUMCAST_NCCL_EXPORT __attribute__((visibility("default")))

namespace sumcast::nccl::adapt {

using namespace abi;  // NOLINT: the adapters read like NCCL's tables

inline constexpr int kMaxParts = 8;  // SGE parts converted on the stack (CollNet limit in collnet.h)
inline constexpr int kMaxRecvs = 8;  // receive sizes converted on the stack (more: refused by the core)

// Fills any version's properties struct: v8's fields, then whatever that version adds.
template <typename Props>
void fill_properties(int dev, const DeviceProperties& p, Props* out) {
  out->name = const_cast<char*>(p.name);
  out->pciPath = const_cast<char*>(p.pci_path);
  out->guid = p.guid;
  out->ptrSupport = p.ptr_support;
  out->regIsGlobal = 0;
  out->speed = p.speed_mbps;
  out->port = p.port;
  out->latency = p.latency_us;
  out->maxComms = p.max_comms;
  out->maxRecvs = p.max_recvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  if constexpr (requires { out->forceFlush; }) {  // v9+
    out->forceFlush = 0;
    out->vProps.ndevs = 1;  // no virtual NICs: each device is itself
    out->vProps.devs[0] = dev;
    out->maxP2pBytes = p.max_p2p_bytes;
    out->maxCollBytes = p.max_coll_bytes;
  }
  if constexpr (requires { out->maxMultiRequestSize; }) out->maxMultiRequestSize = 1;  // v11+: no multi-requests
  if constexpr (requires { out->railId; }) {                                           // v12
    out->railId = static_cast<int16_t>(NCCL_NET_ID_UNDEF);  // NCCL places the NIC by its PCI path alone
    out->planeId = static_cast<int16_t>(NCCL_NET_ID_UNDEF);
  }
}

// getProperties of any version: the core's answer for ncclNet (Get = net_properties) or
// ncclCollNet (Get = coll_properties), copied into that version's struct.
template <auto Get, typename Props>
ncclResult_t properties_as(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties p;
  const ncclResult_t r = Get(dev, &p);
  if (r == ncclSuccess) fill_properties(dev, p, props);
  return r;
}

// Copies n (<= kMaxParts) SGE entries of any version into `out`; false when n is out of range
// (the core then reports it).
template <typename VersionSge>
bool to_core_sge(int n, const VersionSge* in, Sge* out) {
  if (n < 1 || n > kMaxParts || in == nullptr) return false;
  for (int i = 0; i < n; ++i) out[i] = Sge{in[i].mhandle, in[i].address, static_cast<size_t>(in[i].size)};
  return true;
}

// Receive sizes of any width into size_t; nullptr when n is out of range or a size is negative
// (the core then reports it).
template <typename Size>
const size_t* to_sizes(int n, const Size* in, size_t* out) {
  if (n < 1 || n > kMaxRecvs || in == nullptr) return nullptr;
  for (int i = 0; i < n; ++i) {
    if constexpr (std::is_signed_v<Size>) {
      if (in[i] < 0) return nullptr;
    }
    out[i] = static_cast<size_t>(in[i]);
  }
  return out;
}

template <typename VersionSge>
ncclResult_t iallgather_as(void* comm, void* send, int n, VersionSge* parts, size_t bytes_per_rank,
                           size_t window_offset, size_t window_bytes, void* send_mh, void** request) {
  Sge core[kMaxParts];
  return coll_iallgather(comm, send, n, to_core_sge(n, parts, core) ? core : nullptr, bytes_per_rank, window_offset,
                         window_bytes, send_mh, request);
}

template <typename VersionSge>
ncclResult_t ireducescatter_as(void* comm, int n, VersionSge* parts, void* recv, size_t bytes_per_rank,
                               size_t window_offset, size_t window_bytes, ncclDataType_t dtype, ncclRedOp_t op,
                               void* recv_mh, void** request) {
  Sge core[kMaxParts];
  return coll_ireducescatter(comm, n, to_core_sge(n, parts, core) ? core : nullptr, recv, bytes_per_rank, window_offset,
                             window_bytes, dtype, op, recv_mh, request);
}

// The device handle of connect/accept has one layout in every version; a host-only plugin leaves
// it alone.
inline ncclResult_t accept_any(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
  return net_accept(listen_comm, recv_comm);
}

// v10+: isend/irecv carry profiler handles (the plugin emits no profiler events). *request may
// come in as NCCL_NET_OPTIONAL_RECV_COMPLETION (a hint); it is always overwritten.
inline ncclResult_t isend_v10(void* comm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return net_isend(comm, data, size, tag, mhandle, request);
}
inline ncclResult_t irecv_v10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                              void** request) {
  return net_irecv(comm, n, data, sizes, tags, mhandles, request);
}

// v11+: one context per NCCL communicator, which holds its traffic class (core.h).
template <typename Config>
ncclResult_t init_v11(void** ctx, uint64_t comm_id, Config* config, ncclDebugLogger_t logger, ncclProfilerCallback_t) {
  return context_init(ctx, comm_id, config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, false,
                      logger);
}
inline ncclResult_t coll_init_v11(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  return context_init(ctx, comm_id, NCCL_NET_TRAFFIC_CLASS_UNDEF, true, logger);
}
inline ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v11_t**) {
  return context_connect(ctx, dev, handle, send_comm);
}

}  // namespace sumcast::nccl::adapt

namespace sumcast::nccl::adapt {

// Every version's tables, filled entry by entry by name: what differs between versions is the
// adapter a version needs for an entry (template arguments) and the entries it has at all.
template <typename Table, typename Props, auto Init, auto Listen, auto Connect, auto Isend, auto Irecv>
constexpr Table net_table() {
  Table t{};
  t.name = kPluginName;
  t.init = Init;
  t.devices = net_devices;
  t.getProperties = properties_as<net_properties, Props>;
  t.listen = Listen;
  t.connect = Connect;
  t.accept = accept_any;
  t.regMr = net_reg_mr;
  t.regMrDmaBuf = net_reg_mr_dmabuf;
  t.deregMr = net_dereg_mr;
  t.isend = Isend;
  t.irecv = Irecv;
  t.iflush = net_iflush;
  t.test = net_test;
  t.closeSend = net_close_send;
  t.closeRecv = net_close_recv;
  t.closeListen = net_close_listen;
  t.getDeviceMr = nullptr;                                             // device offload only (netDeviceType HOST)
  t.irecvConsumed = nullptr;                                           // device offload only
  if constexpr (requires { t.makeVDevice; }) t.makeVDevice = nullptr;  // v9+: no virtual NICs
  if constexpr (requires { t.finalize; }) {                            // v11+
    t.finalize = context_finalize;
    t.setNetAttr = net_set_attr;
  }
  return t;
}

template <typename Table, typename Props, typename VersionSge, auto Init, auto Listen, auto Iallreduce>
constexpr Table coll_table() {
  Table t{};
  t.name = kPluginName;
  t.init = Init;
  t.devices = coll_devices;
  t.getProperties = properties_as<coll_properties, Props>;
  t.listen = Listen;
  t.connect = coll_connect;
  t.reduceSupport = coll_reduce_support;
  t.regMr = coll_reg_mr;
  t.regMrDmaBuf = coll_reg_mr_dmabuf;
  t.deregMr = coll_dereg_mr;
  t.iallreduce = Iallreduce;
  t.iallgather = iallgather_as<VersionSge>;
  t.ireducescatter = ireducescatter_as<VersionSge>;
  t.iflush = coll_iflush;
  t.test = coll_test;
  t.closeColl = coll_close;
  t.closeListen = coll_close_listen;
  if constexpr (requires { t.makeVDevice; }) t.makeVDevice = nullptr;     // v9+
  if constexpr (requires { t.finalize; }) t.finalize = context_finalize;  // v11+
  return t;
}

}  // namespace sumcast::nccl::adapt
