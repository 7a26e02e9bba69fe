// Compile-time check of nccl_abi.h against NCCL's plugin ABI as NCCL documents it (its ext-net
// README and versioned example headers), per version: every struct size, every field offset NCCL
// reads or writes, the signature of every call that changed between versions, and the constants.
// The numbers below are restated by hand for LP64 (x86-64, aarch64) from the field lists of each
// version, independently of the declarations they check, so that an edit to nccl_abi.h that
// moves, retypes or drops a field fails the build of the plugin. Nothing here is linked into it.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl::abi {
namespace {

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int) == 4, "LP64 only");

#define SUMCAST_AT(T, field, offset) static_assert(offsetof(T, field) == (offset), #T "::" #field " moved")
#define SUMCAST_SIZE(T, bytes) static_assert(sizeof(T) == (bytes), "sizeof(" #T ") changed")
#define SUMCAST_SIG(T, field, ...) \
  static_assert(std::is_same_v<decltype(T::field), __VA_ARGS__>, #T "::" #field " has another signature")

// ---- constants ---------------------------------------------------------------------------------
static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 && ncclInternalError == 3 &&
              ncclInvalidArgument == 4 && ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7);
static_assert(ncclInt8 == 0 && ncclInt32 == 2 && ncclFloat16 == 6 && ncclFloat32 == 7 && ncclFloat64 == 8 &&
              ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 && ncclFloat8e5m2 == 11 && kNcclNumTypesMax == 12);
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4);
static_assert(NCCL_LOG_WARN == 2 && NCCL_LOG_INFO == 3 && NCCL_INIT == 1 && NCCL_NET == 16);
static_assert(NCCL_NET_HANDLE_MAXSIZE == 128 && NCCL_NET_MAX_REQUESTS == 32);
static_assert(NCCL_PTR_HOST == 1 && NCCL_PTR_CUDA == 2 && NCCL_PTR_DMABUF == 4);
static_assert(NCCL_NET_OPTIONAL_RECV_COMPLETION == 1);
static_assert(kMaxNetSize == 1024ull * 1024 * 1024 && kMaxCollNetSize == 512ull * 1024 * 1024);
static_assert(NCCL_MAX_NET_SIZE_BYTES == 1024ull * 1024 * 1024 * 1024);
static_assert(NCCL_NET_MAX_DEVS_PER_NIC_V9 == 4 && NCCL_NET_MAX_DEVS_PER_NIC_V12 == 8);
static_assert(NCCL_NET_TRAFFIC_CLASS_UNDEF == -1 && NCCL_NET_ATTR_UNDEF == -1 && NCCL_NET_ID_UNDEF == -1);
static_assert(NCCL_NET_DEVICE_HOST == 0 && NCCL_NET_DEVICE_UNPACK == 1 && NCCL_NET_DEVICE_INVALID_VERSION == 0);
static_assert(sizeof(ncclNetDeviceType) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4);

// ---- small structs -------------------------------------------------------------------------------
SUMCAST_SIZE(ncclNetDeviceHandle_v8_t, 32);
SUMCAST_AT(ncclNetDeviceHandle_v8_t, handle, 8);
SUMCAST_AT(ncclNetDeviceHandle_v8_t, size, 16);
SUMCAST_AT(ncclNetDeviceHandle_v8_t, needsProxyProgress, 24);
SUMCAST_SIZE(ncclNetCommConfig_v10_t, 4);
SUMCAST_SIZE(ncclNetVDeviceProps_v9_t, 20);
SUMCAST_SIZE(ncclNetVDeviceProps_v12_t, 36);
SUMCAST_SIZE(ncclNetSGE_v8_t, 24);
SUMCAST_AT(ncclNetSGE_v8_t, size, 16);
static_assert(sizeof(ncclNetSGE_v8_t::size) == 4 && sizeof(ncclNetSGE_v9_t::size) == 8);
SUMCAST_SIZE(ncclNetSGE_v9_t, 24);
SUMCAST_SIZE(ncclNetCommAttr_v11_t, 16);
SUMCAST_SIZE(ncclNetAttr_v11_t, 44);
SUMCAST_AT(ncclNetAttr_v11_t, recvCommAttr, 16);
SUMCAST_AT(ncclNetAttr_v11_t, op, 32);
SUMCAST_AT(ncclNetAttr_v11_t, algo, 36);
SUMCAST_AT(ncclNetAttr_v11_t, proto, 40);

// ---- properties ------------------------------------------------------------------------------------
SUMCAST_SIZE(ncclNetProperties_v8_t, 64);
SUMCAST_AT(ncclNetProperties_v8_t, pciPath, 8);
SUMCAST_AT(ncclNetProperties_v8_t, guid, 16);
SUMCAST_AT(ncclNetProperties_v8_t, ptrSupport, 24);
SUMCAST_AT(ncclNetProperties_v8_t, regIsGlobal, 28);
SUMCAST_AT(ncclNetProperties_v8_t, speed, 32);
SUMCAST_AT(ncclNetProperties_v8_t, port, 36);
SUMCAST_AT(ncclNetProperties_v8_t, latency, 40);
SUMCAST_AT(ncclNetProperties_v8_t, maxComms, 44);
SUMCAST_AT(ncclNetProperties_v8_t, maxRecvs, 48);
SUMCAST_AT(ncclNetProperties_v8_t, netDeviceType, 52);
SUMCAST_AT(ncclNetProperties_v8_t, netDeviceVersion, 56);

// v9 and v10 (the same struct): forceFlush after regIsGlobal, then vProps and the size limits.
template <typename P>
constexpr bool v9_fields_at_v9_offsets() {
  return offsetof(P, guid) == 16 && offsetof(P, ptrSupport) == 24 && offsetof(P, regIsGlobal) == 28 &&
         offsetof(P, forceFlush) == 32 && offsetof(P, speed) == 36 && offsetof(P, port) == 40 &&
         offsetof(P, latency) == 44 && offsetof(P, maxComms) == 48 && offsetof(P, maxRecvs) == 52 &&
         offsetof(P, netDeviceType) == 56 && offsetof(P, netDeviceVersion) == 60 && offsetof(P, vProps) == 64;
}
static_assert(v9_fields_at_v9_offsets<ncclNetProperties_v9_t>(), "v9 properties moved");
static_assert(v9_fields_at_v9_offsets<ncclNetProperties_v10_t>(), "v10 properties moved");
static_assert(v9_fields_at_v9_offsets<ncclNetProperties_v11_t>(), "v11 properties moved");
static_assert(v9_fields_at_v9_offsets<ncclNetProperties_v12_t>(), "v12 properties moved");
SUMCAST_SIZE(ncclNetProperties_v9_t, 104);
SUMCAST_AT(ncclNetProperties_v9_t, maxP2pBytes, 88);
SUMCAST_AT(ncclNetProperties_v9_t, maxCollBytes, 96);
SUMCAST_SIZE(ncclNetProperties_v10_t, 104);
SUMCAST_SIZE(ncclNetProperties_v11_t, 112);
SUMCAST_AT(ncclNetProperties_v11_t, maxP2pBytes, 88);
SUMCAST_AT(ncclNetProperties_v11_t, maxCollBytes, 96);
SUMCAST_AT(ncclNetProperties_v11_t, maxMultiRequestSize, 104);
SUMCAST_SIZE(ncclNetProperties_v12_t, 128);  // vProps holds 8 devices: everything after it moves
SUMCAST_AT(ncclNetProperties_v12_t, maxP2pBytes, 104);
SUMCAST_AT(ncclNetProperties_v12_t, maxCollBytes, 112);
SUMCAST_AT(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
SUMCAST_AT(ncclNetProperties_v12_t, railId, 124);
SUMCAST_AT(ncclNetProperties_v12_t, planeId, 126);
static_assert(sizeof(ncclNetProperties_v12_t::railId) == 2 && sizeof(ncclNetProperties_v12_t::planeId) == 2);

// ---- ncclNet tables: one pointer per entry, in NCCL's order ------------------------------------------
constexpr size_t P = sizeof(void*);
SUMCAST_SIZE(ncclNet_v8_t, 19 * P);
SUMCAST_SIZE(ncclNet_v9_t, 20 * P);
SUMCAST_SIZE(ncclNet_v10_t, 20 * P);
SUMCAST_SIZE(ncclNet_v11_t, 22 * P);
SUMCAST_SIZE(ncclNet_v12_t, 22 * P);

template <typename T>
constexpr bool net_entries_in_order() {  // the entries every version from v8 on shares
  return offsetof(T, init) == 1 * P && offsetof(T, devices) == 2 * P && offsetof(T, getProperties) == 3 * P &&
         offsetof(T, listen) == 4 * P && offsetof(T, connect) == 5 * P && offsetof(T, accept) == 6 * P &&
         offsetof(T, regMr) == 7 * P && offsetof(T, regMrDmaBuf) == 8 * P && offsetof(T, deregMr) == 9 * P &&
         offsetof(T, isend) == 10 * P && offsetof(T, irecv) == 11 * P && offsetof(T, iflush) == 12 * P &&
         offsetof(T, test) == 13 * P && offsetof(T, closeSend) == 14 * P && offsetof(T, closeRecv) == 15 * P &&
         offsetof(T, closeListen) == 16 * P && offsetof(T, getDeviceMr) == 17 * P &&
         offsetof(T, irecvConsumed) == 18 * P;
}
static_assert(net_entries_in_order<ncclNet_v8_t>() && net_entries_in_order<ncclNet_v9_t>() &&
              net_entries_in_order<ncclNet_v10_t>() && net_entries_in_order<ncclNet_v11_t>() &&
              net_entries_in_order<ncclNet_v12_t>());
SUMCAST_AT(ncclNet_v9_t, makeVDevice, 19 * P);
SUMCAST_AT(ncclNet_v10_t, makeVDevice, 19 * P);
SUMCAST_AT(ncclNet_v11_t, makeVDevice, 19 * P);
SUMCAST_AT(ncclNet_v11_t, finalize, 20 * P);
SUMCAST_AT(ncclNet_v11_t, setNetAttr, 21 * P);
SUMCAST_AT(ncclNet_v12_t, finalize, 20 * P);
SUMCAST_AT(ncclNet_v12_t, setNetAttr, 21 * P);

// The calls whose arguments changed between versions.
SUMCAST_SIG(ncclNet_v8_t, init, ncclResult_t (*)(ncclDebugLogger_t));
SUMCAST_SIG(ncclNet_v8_t, isend, ncclResult_t (*)(void*, void*, int, int, void*, void**));
SUMCAST_SIG(ncclNet_v8_t, irecv, ncclResult_t (*)(void*, int, void**, int*, int*, void**, void**));
SUMCAST_SIG(ncclNet_v9_t, isend, ncclResult_t (*)(void*, void*, size_t, int, void*, void**));
SUMCAST_SIG(ncclNet_v9_t, irecv, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**));
SUMCAST_SIG(ncclNet_v10_t, init, ncclResult_t (*)(ncclDebugLogger_t, ncclProfilerCallback_t));
SUMCAST_SIG(ncclNet_v10_t, connect,
            ncclResult_t (*)(int, ncclNetCommConfig_v10_t*, void*, void**, ncclNetDeviceHandle_v10_t**));
SUMCAST_SIG(ncclNet_v10_t, isend, ncclResult_t (*)(void*, void*, size_t, int, void*, void*, void**));
SUMCAST_SIG(ncclNet_v10_t, irecv, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**, void**));
SUMCAST_SIG(ncclNet_v11_t, init,
            ncclResult_t (*)(void**, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t, ncclProfilerCallback_t));
SUMCAST_SIG(ncclNet_v11_t, getProperties, ncclResult_t (*)(int, ncclNetProperties_v11_t*));
SUMCAST_SIG(ncclNet_v11_t, listen, ncclResult_t (*)(void*, int, void*, void**));
SUMCAST_SIG(ncclNet_v11_t, connect, ncclResult_t (*)(void*, int, void*, void**, ncclNetDeviceHandle_v11_t**));
SUMCAST_SIG(ncclNet_v11_t, isend, ncclResult_t (*)(void*, void*, size_t, int, void*, void*, void**));
SUMCAST_SIG(ncclNet_v11_t, irecv, ncclResult_t (*)(void*, int, void**, size_t*, int*, void**, void**, void**));
SUMCAST_SIG(ncclNet_v11_t, makeVDevice, ncclResult_t (*)(int*, ncclNetVDeviceProps_v11_t*));
SUMCAST_SIG(ncclNet_v11_t, finalize, ncclResult_t (*)(void*));
SUMCAST_SIG(ncclNet_v11_t, setNetAttr, ncclResult_t (*)(void*, ncclNetAttr_v11_t*));
SUMCAST_SIG(ncclNet_v12_t, getProperties, ncclResult_t (*)(int, ncclNetProperties_v12_t*));
SUMCAST_SIG(ncclNet_v12_t, makeVDevice, ncclResult_t (*)(int*, ncclNetVDeviceProps_v12_t*));
SUMCAST_SIG(ncclNet_v12_t, setNetAttr, ncclResult_t (*)(void*, ncclNetAttr_v12_t*));
static_assert(std::is_same_v<decltype(ncclNet_v8_t::test), ncclResult_t (*)(void*, int*, int*)> &&
              std::is_same_v<decltype(ncclNet_v12_t::test), ncclResult_t (*)(void*, int*, int*)>);

// ---- ncclCollNet tables ---------------------------------------------------------------------------
SUMCAST_SIZE(ncclCollNet_v8_t, 17 * P);
SUMCAST_SIZE(ncclCollNet_v9_t, 18 * P);
SUMCAST_SIZE(ncclCollNet_v10_t, 18 * P);
SUMCAST_SIZE(ncclCollNet_v11_t, 19 * P);
SUMCAST_SIZE(ncclCollNet_v12_t, 19 * P);

template <typename T>
constexpr bool coll_entries_in_order() {
  return offsetof(T, init) == 1 * P && offsetof(T, devices) == 2 * P && offsetof(T, getProperties) == 3 * P &&
         offsetof(T, listen) == 4 * P && offsetof(T, connect) == 5 * P && offsetof(T, reduceSupport) == 6 * P &&
         offsetof(T, regMr) == 7 * P && offsetof(T, regMrDmaBuf) == 8 * P && offsetof(T, deregMr) == 9 * P &&
         offsetof(T, iallreduce) == 10 * P && offsetof(T, iallgather) == 11 * P &&
         offsetof(T, ireducescatter) == 12 * P && offsetof(T, iflush) == 13 * P && offsetof(T, test) == 14 * P &&
         offsetof(T, closeColl) == 15 * P && offsetof(T, closeListen) == 16 * P;
}
static_assert(coll_entries_in_order<ncclCollNet_v8_t>() && coll_entries_in_order<ncclCollNet_v9_t>() &&
              coll_entries_in_order<ncclCollNet_v10_t>() && coll_entries_in_order<ncclCollNet_v11_t>() &&
              coll_entries_in_order<ncclCollNet_v12_t>());
SUMCAST_AT(ncclCollNet_v9_t, makeVDevice, 17 * P);
SUMCAST_AT(ncclCollNet_v11_t, makeVDevice, 17 * P);
SUMCAST_AT(ncclCollNet_v11_t, finalize, 18 * P);
SUMCAST_AT(ncclCollNet_v12_t, finalize, 18 * P);

SUMCAST_SIG(ncclCollNet_v8_t, iallreduce,
            ncclResult_t (*)(void*, void*, void*, int, ncclDataType_t, ncclRedOp_t, void*, void*, void**));
SUMCAST_SIG(ncclCollNet_v8_t, iallgather,
            ncclResult_t (*)(void*, void*, int, ncclNetSGE_v8_t*, size_t, size_t, size_t, void*, void**));
SUMCAST_SIG(ncclCollNet_v9_t, iallreduce,
            ncclResult_t (*)(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*, void**));
SUMCAST_SIG(ncclCollNet_v10_t, getProperties, ncclResult_t (*)(int, ncclNetProperties_v10_t*));
SUMCAST_SIG(ncclCollNet_v11_t, init, ncclResult_t (*)(void**, uint64_t, ncclDebugLogger_t));
SUMCAST_SIG(ncclCollNet_v11_t, listen, ncclResult_t (*)(void*, int, void*, void**));
SUMCAST_SIG(ncclCollNet_v11_t, connect, ncclResult_t (*)(void**, int, int, void*, void**));
SUMCAST_SIG(ncclCollNet_v11_t, getProperties, ncclResult_t (*)(int, ncclNetProperties_v11_t*));
SUMCAST_SIG(ncclCollNet_v11_t, ireducescatter,
            ncclResult_t (*)(void*, int, ncclNetSGE_v11_t*, void*, size_t, size_t, size_t, ncclDataType_t, ncclRedOp_t,
                             void*, void**));
SUMCAST_SIG(ncclCollNet_v11_t, finalize, ncclResult_t (*)(void*));
SUMCAST_SIG(ncclCollNet_v12_t, getProperties, ncclResult_t (*)(int, ncclNetProperties_v12_t*));
SUMCAST_SIG(ncclCollNet_v12_t, makeVDevice, ncclResult_t (*)(int*, ncclNetVDeviceProps_v12_t*));

#undef SUMCAST_AT
#undef SUMCAST_SIZE
#undef SUMCAST_SIG

}  // namespace
}  // namespace sumcast::nccl::abi
