// The worker's data transport: builds Sumcast packets for appliances, sends them in batches and
// receives the appliances' results and aborts, validated. Implementations: UdpTransport (kernel
// UDP socket, software ICRC), a verbs UD transport where rdma-core is present, and test
// decorators (loss, duplication, reordering). open_transport (transport_factory.h) opens the
// concrete ones by kind.
//
// A transport knows its peers (one per appliance job registration) and checks every received
// packet against them (source, job id, Q_Key, destination QP, rank, dtype, op) before handing it
// on; the communicator checks slots, rounds and ranges. Every rejected packet is counted by reason.
//
// Thread safety: one thread at a time per transport (the communicator's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "sumcast/shim/control_client.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim {

// Why the worker dropped a received packet. The wire's structural reasons come first, in
// wire::ParseError order; the transport counts those up to kDtypeMismatch, the communicator the rest.
#define SUMCAST_SHIM_DROP_REASONS(X)                                                     \
  SUMCAST_PARSE_ERRORS(X)                                                                \
  X(kTruncated, "truncated") /* datagram larger than the receive buffer */               \
  X(kBadIcrc, "bad_icrc")                                                                \
  X(kUnknownSource, "unknown_source") /* source IPv4 is no appliance of ours */          \
  X(kUnknownJob, "unknown_job")       /* no job of ours with that id at that source */   \
  X(kBadQkey, "bad_qkey")                                                                \
  X(kNotResult, "not_result")  /* a contribution sent to a worker */                     \
  X(kBadDestQp, "bad_dest_qp") /* BTH DestQP is neither ours nor multicast */            \
  X(kBadRank, "bad_rank")      /* addressed to another rank */                           \
  X(kDtypeMismatch, "dtype_mismatch")                                                    \
  X(kOpMismatch, "op_mismatch")                                                          \
  X(kBadSlot, "bad_slot")             /* slot >= the job's slot count */                 \
  X(kStaleRound, "stale_round")       /* round neither outstanding nor just completed */ \
  X(kChunkMismatch, "chunk_mismatch") /* offset/count/coll_seq not what was sent */

enum class DropReason : uint8_t {
#define SUMCAST_X(name, str) name,
  SUMCAST_SHIM_DROP_REASONS(SUMCAST_X)
#undef SUMCAST_X
      kCount
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
const char* drop_reason_name(DropReason r);

struct TransportCounters {
  uint64_t tx_packets = 0;  // handed to the network
  uint64_t tx_bytes = 0;    // UDP payload bytes (BTH..ICRC)
  uint64_t tx_dropped = 0;  // not sent: buffer full after a bounded wait, or no route/link (the RTO resends)
  // Why packets waited or were refused on the way out (UDP: sendmmsg): calls that sent only part
  // of their batch, and refusals with EAGAIN (socket send buffer full) or ENOBUFS (no kernel
  // buffer). A refusal is retried after a bounded wait; only what is still refused then counts in
  // tx_dropped. A device queue that overflows under a UDP socket is not reported to it (that takes
  // IP_RECVERR, which would also turn ICMP errors into send failures): the namespace's Udp
  // SndbufErrors counts those.
  uint64_t tx_partial = 0;
  uint64_t tx_eagain = 0;
  uint64_t tx_enobufs = 0;
  uint64_t rx_packets = 0;  // received, before validation
  uint64_t rx_bytes = 0;
  // Datagrams the kernel dropped at our sockets, their receive buffers full (UDP: SO_RXQ_OVFL,
  // learnt with the next datagram that does arrive; the namespace's Udp RcvbufErrors count them too).
  uint64_t rx_overflows = 0;
  // The socket buffer sizes the kernel granted (SO_RCVBUF / SO_SNDBUF as it reports them: twice
  // the bytes of payload it lets queue); 0 where the transport has none.
  uint64_t rx_buffer_bytes = 0;
  uint64_t tx_buffer_bytes = 0;
  uint64_t results = 0;            // valid results handed to the communicator
  uint64_t group_results = 0;      // ... of which arrived on a job's multicast group
  uint64_t aborts = 0;             // valid abort messages handed to the communicator
  uint64_t loss_notices = 0;       // valid loss notices (docs/protocol.md §7) handed to the communicator
  uint64_t duplicate_notices = 0;  // valid duplicate notices (docs/protocol.md §7) handed to the communicator
  uint64_t cnps = 0;               // valid congestion notifications (RoCEv2 CNPs) handed to the communicator
  uint64_t ce_results = 0;         // valid results that arrived marked CE (UDP transport with recv_ecn)
  // UDP GRO: buffers the kernel handed over coalesced (several datagrams, one UDP_GRO control
  // message) and the datagrams they held (also counted in rx_packets); gro_refused = 1 when the
  // kernel refused UDP_GRO, so every datagram came alone.
  uint64_t gro_receives = 0;
  uint64_t gro_segments = 0;
  uint64_t gro_refused = 0;
  // Results whose ICRC held for a place k > 0 in a train other than where they arrived: members
  // of a UDP_SEGMENT train that a hop cut and nothing coalesced again (docs/protocol.md §2.2).
  uint64_t rx_cut_train = 0;
  // UDP GSO: UDP_SEGMENT sends (trains of two or more packets) and the packets they carried (also
  // in tx_packets); gso_refused = 1 when the kernel refused UDP_SEGMENT, so every packet went alone.
  uint64_t gso_sends = 0;
  uint64_t gso_segments = 0;
  uint64_t gso_refused = 0;
  uint64_t drops[kDropReasonCount] = {};
};

// One appliance job this rank takes part in.
struct PeerSpec {
  uint32_t ip = 0;  // appliance data IPv4, host order
  uint16_t udp_port = wire::kRoceUdpPort;
  uint8_t mac[6] = {};
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  uint16_t rank = 0;  // this worker's rank in the job
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  // The job's IPv4 multicast group (host order) when its results come by multicast, else 0:
  // add_peer joins it on the local interface, leave_groups() leaves it.
  uint32_t group = 0;
};

// A packet to send: `data` was written by build() for `peer`.
struct OutPacket {
  uint32_t peer = 0;
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  // A resend (a retransmission or probe): sent as a datagram of its own, never in a UDP_SEGMENT
  // train (a resend must not depend on what a path does to trains; receivers of earlier versions
  // dropped datagrams k > 0 of a train that a hop cut, and a resend in a train could fail at the
  // same place every time), and with the transport's repair TOS where one is set
  // (UdpTransportOptions::repair_tos: queues that serve repairs first).
  bool resend = false;
};

// A validated result, abort, loss notice or congestion notification. `payload` stays valid until the next
// receive() call.
struct Received {
  uint32_t peer = 0;
  wire::SumcastHeader hdr;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
  // A RoCEv2 CNP from `peer` to our QP (the peer's network saw congestion on our contributions):
  // `hdr` and `payload` are then not set.
  bool cnp = false;
  bool ce = false;  // a result whose IPv4 ECN field was CE: congestion on the way to us
  // The sender's QP (DETH source QP; a UD completion's src_qp): which appliance core it came from.
  uint32_t src_qp = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Where results reach this worker (register it with the appliance).
  virtual Endpoint local_endpoint() const = 0;
  // Adds an appliance job; returns its peer index (0, 1, ...). With spec.group set, joins that
  // group first (an error, and no peer added, when it cannot).
  virtual Result<uint32_t> add_peer(const PeerSpec& spec) = 0;
  // Leaves every group add_peer joined (idempotent; the destructor does it too). Results sent to
  // a group after this no longer arrive; unicast ones still do.
  virtual void leave_groups() = 0;
  // Bytes build() needs for a payload of `payload_len` bytes.
  virtual size_t packet_capacity(size_t payload_len) const = 0;
  // Writes the packet carrying `hdr` and `payload_len` = hdr.elem_count * dtype size bytes of
  // `payload` for `peer` into `buf` (packet_capacity bytes); returns its length. Never fails.
  virtual size_t build(uint8_t* buf, uint32_t peer, uint32_t dest_qp, uint32_t psn, const wire::SumcastHeader& hdr,
                       const uint8_t* payload) = 0;
  // Where build() put the payload in a packet it wrote (failover rebuilds a packet for another
  // aggregator from a kept one).
  virtual size_t payload_offset() const { return wire::kRoceHeadersLen; }
  // Sends the packets (batched). A packet the network would not take is counted in tx_dropped
  // (the sender's retransmission timer covers it); an error means the transport is unusable.
  virtual Status send(std::span<const OutPacket> packets) = 0;
  // Non-blocking: fills `out` with validated packets; returns how many.
  virtual size_t receive(std::span<Received> out) = 0;
  // A file descriptor that becomes readable when receive() may return something; -1 if none
  // (callers then poll receive()).
  virtual int wait_fd() const = 0;
  virtual const TransportCounters& counters() const = 0;
  // "udp 10.0.0.2:40123" — for messages.
  virtual std::string describe() const = 0;
  // The largest payload one packet can carry on this transport's path.
  virtual uint32_t max_payload() const { return wire::kMaxPayloadBytes; }
  // The IP MTU toward `dst_ip` (host order) from this transport's address; 0 when the transport
  // does not know (verbs: max_payload() already follows the port's MTU).
  virtual uint32_t path_mtu(uint32_t /*dst_ip*/) const { return 0; }
  // OK, or the error that made the transport unusable (sticky): the communicator then fails every
  // pending call with it instead of waiting for timeouts.
  virtual Status health() const { return {}; }
  // Bytes of this transport's sends still queued below it on this host (UDP: the socket's send
  // memory, SIOCOUTQ: datagrams in the qdisc and the device's ring, counted as the kernel charges
  // them, buffer overhead included); nullopt where the transport cannot tell (verbs).
  virtual std::optional<size_t> send_queue_bytes() const { return std::nullopt; }
};

}  // namespace sumcast::shim
