// Helpers shared by the per-version tables (plugin_v8.cc, plugin_v9.cc, plugin_v10.cc): copying
// the core's properties into each version's struct and its SGE lists into the core's. Only the
// tables themselves are exported (SUMCAST_NCCL_EXPORT); everything else in the library is hidden.
#pragma once

#include <cstddef>
#include <type_traits>

#include "sumcast/nccl/core.h"
#include "sumcast/nccl/nccl_abi.h"

// Marks an exported table; definitions sit inside extern "C" { } so their names are unmangled.
#define SUMCAST_NCCL_EXPORT __attribute__((visibility("default")))

namespace sumcast::nccl::adapt {

using namespace abi;  // NOLINT: the adapters read like NCCL's tables

inline constexpr int kMaxParts = 8;  // SGE parts converted on the stack (CollNet limit in collnet.h)
inline constexpr int kMaxRecvs = 8;  // grouped receives converted on the stack (socket_net.h)

// ncclNetProperties_v8_t
template <typename Props>
void fill_v8_fields(const DeviceProperties& p, Props* out) {
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
}

// ncclNetProperties_v9_t and _v10_t: v8's fields plus forceFlush, vProps and the size limits.
template <typename Props>
void fill_v9_fields(int dev, const DeviceProperties& p, Props* out) {
  fill_v8_fields(p, out);
  out->forceFlush = 0;
  out->vProps.ndevs = 1;
  out->vProps.devs[0] = dev;
  out->maxP2pBytes = p.max_p2p_bytes;
  out->maxCollBytes = p.max_coll_bytes;
}

template <typename Props>
ncclResult_t net_properties_v8(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties p;
  const ncclResult_t r = net_properties(dev, &p);
  if (r == ncclSuccess) fill_v8_fields(p, props);
  return r;
}

template <typename Props>
ncclResult_t coll_properties_v8(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties p;
  const ncclResult_t r = coll_properties(dev, &p);
  if (r == ncclSuccess) fill_v8_fields(p, props);
  return r;
}

template <typename Props>
ncclResult_t net_properties_v9(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties p;
  const ncclResult_t r = net_properties(dev, &p);
  if (r == ncclSuccess) fill_v9_fields(dev, p, props);
  return r;
}

template <typename Props>
ncclResult_t coll_properties_v9(int dev, Props* props) {
  if (props == nullptr) return ncclInvalidArgument;
  DeviceProperties p;
  const ncclResult_t r = coll_properties(dev, &p);
  if (r == ncclSuccess) fill_v9_fields(dev, p, props);
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

// Grouped receive sizes of any width into size_t; nullptr when n is out of range or a size is
// negative (the core then reports it).
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

}  // namespace sumcast::nccl::adapt
