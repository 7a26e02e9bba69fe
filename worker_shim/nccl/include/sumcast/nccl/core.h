// The version-neutral core of libnccl-net-sumcast.so (docs/nccl.md). Each exported NCCL table
// (plugin/plugin_v*.cc) is a thin adapter over these functions: it converts sizes and property
// structs and nothing else. Every function here catches every C++ exception and translates every
// internal error into an ncclResult_t, logging a WARN line through NCCL's logger that says why.
//
// ncclNet: TCP sockets (socket_net.h). ncclCollNet: all-reduce through Sumcast appliances with the
// worker library (collnet.h). Configuration comes from the environment (config.h).
//
// Thread safety: NCCL calls a comm's functions from one thread at a time; different comms (and
// init/devices/properties) may be used from different threads concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl {

using abi::ncclResult_t;

// What getProperties reports, before each version's adapter copies it into its struct.
struct DeviceProperties {
  const char* name = nullptr;      // interface name; lives as long as the process
  const char* pci_path = nullptr;  // realpath of /sys/class/net/<if>/device, or nullptr (virtual NIC)
  uint64_t guid = 0;
  int ptr_support = abi::NCCL_PTR_HOST;
  int speed_mbps = 0;
  int port = 1;
  float latency_us = 0.0f;
  int max_comms = 0;
  int max_recvs = 1;
  size_t max_p2p_bytes = 0;
  size_t max_coll_bytes = 0;
};

// One scatter/gather element of iallgather/ireducescatter.
struct Sge {
  void* mhandle = nullptr;
  void* address = nullptr;
  size_t size = 0;
};

// The plugin's name in NCCL's tables and logs ("sumcast").
extern const char kPluginName[];

// ---- shared ---------------------------------------------------------------------------------------
// Idempotent; `logger` may be nullptr (then nothing is logged).
ncclResult_t init(abi::ncclDebugLogger_t logger);

// v11+ tables: NCCL calls init once per communicator (comm_id: its hash) and hands the context
// back to listen/connect and, when the communicator is destroyed, to finalize. The context records
// the communicator's id (for the log) and its traffic class: comms are otherwise independent of it
// (NCCL closes them before finalize). context_init also runs init(logger).
//
// Traffic class: NCCL's per-communicator ncclConfig_t.trafficClass (v11+, to the net init) or
// per-connection one (v10, to connect), meant as the IP TOS byte (DSCP << 2 | ECN; NCCL's IB
// transport puts it in the GRH). 0..255, or NCCL_NET_TRAFFIC_CLASS_UNDEF; other values are refused.
// It becomes IP_TOS of the communicator's TCP connections (socket_net.h) and, because NCCL's
// CollNet init gets none, a CollNet context takes the one of the net context with the same
// comm_id (NCCL inits net, then CollNet, per communicator) for its lanes (collnet.h).
ncclResult_t context_init(void** ctx, uint64_t comm_id, int traffic_class, bool coll, abi::ncclDebugLogger_t logger);
ncclResult_t context_finalize(void* ctx);
// v11+ listen/connect: net_listen, net_connect and coll_listen with the context's traffic class
// (a context of the other kind is refused).
ncclResult_t context_listen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t context_connect(void* ctx, int dev, void* handle, void** send_comm);
ncclResult_t coll_context_listen(void* ctx, int dev, void* handle, void** listen_comm);
// v11+ ncclNet: NCCL's hints about the peers and flows of coming connections. TCP has no use for
// them; they are logged (TRACE-level detail at INFO once per context) and otherwise ignored.
ncclResult_t net_set_attr(void* ctx, abi::ncclNetAttr_v11_t* attr);

// ---- ncclNet ----------------------------------------------------------------------------------------
ncclResult_t net_devices(int* ndev);
ncclResult_t net_properties(int dev, DeviceProperties* props);
ncclResult_t net_listen(int dev, void* handle, void** listen_comm);
ncclResult_t net_connect(int dev, void* handle, void** send_comm);
// v10: connect with the connection's traffic class (above).
ncclResult_t net_connect_tc(int dev, void* handle, void** send_comm, int traffic_class);
ncclResult_t net_accept(void* listen_comm, void** recv_comm);
ncclResult_t net_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t net_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t net_dereg_mr(void* comm, void* mhandle);
ncclResult_t net_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t net_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                       void** request);
ncclResult_t net_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
// sizes (may be nullptr): bytes sent, or per buffer received.
ncclResult_t net_test(void* request, int* done, int* sizes);
ncclResult_t net_close_send(void* send_comm);
ncclResult_t net_close_recv(void* recv_comm);
ncclResult_t net_close_listen(void* listen_comm);

// ---- ncclCollNet ------------------------------------------------------------------------------------
ncclResult_t coll_devices(int* ndev);
ncclResult_t coll_properties(int dev, DeviceProperties* props);
ncclResult_t coll_listen(int dev, void* handle, void** listen_comm);
ncclResult_t coll_connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm);
ncclResult_t coll_reduce_support(abi::ncclDataType_t dtype, abi::ncclRedOp_t op, int* supported);
ncclResult_t coll_reg_mr(void* coll_comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t coll_reg_mr_dmabuf(void* coll_comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                void** mhandle);
ncclResult_t coll_dereg_mr(void* coll_comm, void* mhandle);
ncclResult_t coll_iallreduce(void* coll_comm, void* send_data, void* recv_data, size_t count, abi::ncclDataType_t dtype,
                             abi::ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request);
ncclResult_t coll_iallgather(void* coll_comm, void* send_data, int n_recv_parts, const Sge* recv_parts,
                             size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void* send_mhandle,
                             void** request);
ncclResult_t coll_ireducescatter(void* coll_comm, int n_send_parts, const Sge* send_parts, void* recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                 abi::ncclDataType_t dtype, abi::ncclRedOp_t op, void* recv_mhandle, void** request);
ncclResult_t coll_iflush(void* coll_comm, void* data, int size, void* mhandle, void** request);
// size (may be nullptr): bytes this rank received.
ncclResult_t coll_test(void* request, int* done, int* size);
ncclResult_t coll_close(void* coll_comm);
ncclResult_t coll_close_listen(void* listen_comm);

}  // namespace sumcast::nccl
