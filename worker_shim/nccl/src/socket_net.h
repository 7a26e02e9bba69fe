// ncclNet over TCP sockets: what NCCL uses for its point-to-point traffic once it loaded the
// plugin (NCCL takes a CollNet only from a library whose ncclNet it uses).
//
// Connections. listen() binds a non-blocking socket to the device's IPv4 address and writes a
// handle (address, port, a random nonce); connect() and accept() never block: they advance a
// small state machine (TCP connect, then a 16-byte hello carrying the nonce, so that a stray
// connection is refused) and return a NULL comm until it is done. connect keeps its state in the
// handle's scratch area, which NCCL hands back unchanged on every retry.
//
// Messages. Each isend is one message on the stream: a 16-byte header (magic, tag, size), then
// the payload. An arriving message goes to the oldest posted receive with its tag, straight into
// that buffer (no copy); a message larger than its buffer fails the comm. A message for which no
// receive is posted yet waits in the socket (TCP flow control), so the sender never needs a
// rendezvous. Progress happens inside isend/irecv/test on the comm (no background thread).
//
// No grouped receives (maxRecvs 1). NCCL groups receives (irecv with n > 1) when several GPUs'
// receives share one connection (PXN); on one ordered stream whose reader stops at a message
// that has no posted buffer, while sends complete once they are in the socket buffer, a message
// for a receive that is posted later can then block one that another GPU needs: a deadlock that
// only credits from the receiver (as NCCL's IB transport uses) avoid. With maxRecvs 1, NCCL posts
// one receive per message in the order its peer sends them, so the stream never waits on a
// receive that depends on a later message. irecv with n > 1 is refused.
//
// Limits. At most NCCL_NET_MAX_REQUESTS (32) requests per comm: isend/irecv return a NULL request
// beyond that and NCCL retries. Host memory only (memory.h).
//
// Traffic class. `tos` (-1: none) is the IP TOS byte of the connection's segments, set before
// connect() and on the listening socket, whose SYN-ACKs and accepted sockets take it from there
// (the kernel copies a listener's IP options into each socket it accepts): what NCCL hands the
// plugin as a communicator's or connection's traffic class (core.h). A TCP socket's ECN bits are
// the kernel's, so only the DSCP part shows on the wire.
//
// Thread safety: one thread at a time per comm (NCCL's rule); comms are independent.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/status.h"

namespace sumcast::nccl {

inline constexpr int kSocketMaxRecvs = 1;  // maxRecvs: see "No grouped receives"
inline constexpr int kSocketMaxRequests = 32;

Status socket_listen(int dev, void* handle, void** listen_comm, int tos = -1);
Status socket_connect(int dev, void* handle, void** send_comm, int tos = -1);
Status socket_accept(void* listen_comm, void** recv_comm);
Status socket_isend(void* send_comm, const void* data, size_t size, int tag, void* mhandle, void** request);
Status socket_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                    void** request);
Status socket_test(void* request, int* done, int* sizes);
Status socket_close_send(void* send_comm);
Status socket_close_recv(void* recv_comm);
Status socket_close_listen(void* listen_comm);

}  // namespace sumcast::nccl
