// ncclCollNet over Sumcast appliances: every chunk NCCL hands to iallreduce becomes one all-reduce
// of the worker library (shim::Communicator), so the appliance sums it and each node gets the
// result.
//
// Jobs. connect() receives every node's listen handle; each holds a random nonce, and the job
// name is derived from node 0's ("nccl-<nonce>"), so all nodes agree on it without talking. A
// Communicator has one dtype and op, so the comm keeps one *lane* per (dtype, op) pair, each its
// own appliance job "<job>-<dtype>-<op>".
//
// Set-up. connect() registers the fp32-sum lane itself, blocking (as NCCL expects of a CollNet
// connect: it is called once, during communicator set-up, on every node at once) for at most
// the worker library's connect timeout (10 s) plus SUMCAST_REGISTER_TIMEOUT_MS. An appliance that is
// unreachable, refuses the token or has no room for the job fails connect with an error naming
// the cause, so NCCL disables CollNet for that communicator and runs over the plugin's ncclNet.
// Because the appliance answers a registration only when every node registered, a node that
// fails makes every other node's connect fail too (theirs time out), never half a CollNet.
//
// Other lanes register on first use in a background thread: the proxy thread that calls
// iallreduce never blocks (registration waits for every node, and a node may still need this
// one's proxy to progress other traffic before it gets there). Calls made while a lane registers
// queue up and start, in order, when it is ready. Such a registration can still fail mid-job (the
// appliance filled up since connect): its calls then fail.
//
// Ordering. NCCL issues a comm's CollNet calls in the same order, with the same sizes, on every
// node (its proxy enforces collective order across channels). Each lane sees the subsequence of
// calls with its (dtype, op) -- the same subsequence on every node -- and the worker library
// matches chunks across nodes by call order (communicator.h), so no call carries an id.
//
// Other collectives. iallgather is an int32 sum where the other nodes contribute zeros (exact:
// x + 0 = x bit for bit); ireducescatter is an all-reduce of the window of which this node keeps
// its part. Both go through a host staging buffer per request (kept and reused).
//
// Traffic class. On v11 and v12 a communicator may carry a traffic class
// (ncclConfig_t.trafficClass), which NCCL hands the ncclNet's init only; the CollNet context of the
// same communicator (same comm id) takes it from there (core.cc) and listen passes it on. Where one
// is set, it marks the communicator's contributions as NCCL's IB transport marks RoCE with it,
// over SUMCAST_DSCP: DSCP = class >> 2, and ECT(0) where the class's two ECN bits are not 0 (or
// SUMCAST_ECN=1). Resends keep SUMCAST_REPAIR_DSCP where it is set, else that DSCP.
//
// Host memory only (memory.h): NCCL hands CollNet host buffers and copies to and from the GPU itself.
//
// Thread safety: one thread at a time per comm (NCCL's rule); regMr/deregMr touch no comm state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/nccl/core.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::nccl {

inline constexpr int kCollMaxRequests = 128;  // outstanding per comm; more return a NULL request
inline constexpr int kCollMaxParts = 8;       // SGE parts per iallgather/ireducescatter

// The one dtype/op conversion table: reduceSupport and the data path both use it. False for
// anything the wire cannot sum exactly as NCCL means it.
bool to_wire(abi::ncclDataType_t dtype, abi::ncclRedOp_t op, wire::Dtype* wd, wire::ReduceOp* wo);

Status collnet_listen(int dev, void* handle, void** listen_comm, int traffic_class = -1);
Status collnet_connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm);
Status collnet_iallreduce(void* coll_comm, const void* send, void* recv, size_t count, abi::ncclDataType_t dtype,
                          abi::ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request);
Status collnet_iallgather(void* coll_comm, const void* send, int n_parts, const Sge* recv_parts, size_t bytes_per_rank,
                          size_t window_offset, size_t window_bytes, void* send_mhandle, void** request);
Status collnet_ireducescatter(void* coll_comm, int n_parts, const Sge* send_parts, void* recv, size_t bytes_per_rank,
                              size_t window_offset, size_t window_bytes, abi::ncclDataType_t dtype, abi::ncclRedOp_t op,
                              void* recv_mhandle, void** request);
Status collnet_test(void* request, int* done, int* size);
Status collnet_close(void* coll_comm);
Status collnet_close_listen(void* listen_comm);

}  // namespace sumcast::nccl
