// The kernel UDP transport: one unconnected UDP socket bound to a local IPv4 address and port.
// Sends BTH | DETH | Sumcast header | payload | ICRC as the UDP payload; the ICRC is computed in
// software over the IPv4/UDP headers the kernel will write (docs/protocol.md §2.2): the socket
// sets IP_PMTU_DISCOVER = IP_PMTUDISC_DO, so every datagram leaves with DF set and, being sent
// from an unconnected socket, IP ID 0 (segments of a GSO train excepted, below). That is why the socket must be bound
// to a specific address: the ICRC covers the source IPv4. Results are verified the same way (appliance address -> our
// address, ID 0, DF). Batches use sendmmsg/recvmmsg. With recv_ecn, IP_RECVTOS tells the ECN field of every datagram: a
// result marked CE (the network to us is congested) says so. Every socket sets SO_RXQ_OVFL, so datagrams it dropped for
// want of receive buffer are counted (rx_overflows), and the counters say what sendmmsg refused (tx_partial, tx_eagain,
// tx_enobufs) and which buffer sizes the kernel granted. With repair_tos, a resend
// (OutPacket::resend) carries an IP_TOS control message of its own, so it leaves with that TOS
// while everything else has the socket's.
//
// GRO (option gro, on by default): the socket sets UDP_GRO, so a kernel whose device coalesced
// several results of one flow (same addresses and ports, DF, consecutive in its queue) hands them
// over as one buffer with a UDP_GRO control message saying the segment size; receive() splits it
// into datagrams of that size, the last one possibly shorter, and validates each: its ICRC for
// its place k in the buffer (a result train of a udp_trains service) or for any other IP ID
// 0..63 (0: what every appliance sends alone; k: a train cut on the way, counted in rx_cut_train;
// docs/protocol.md §2.2). A datagram that arrives alone is validated the same way. The receive buffers are then
// 64 KiB each (at most 64 of them, whatever the batch). A kernel that refuses UDP_GRO leaves the
// per-datagram path (gro_refused = 1, and describe() says why). A coalesced buffer holds up to 64 datagrams, more
// than one receive() may be asked for: the rest wait, unvalidated, in the transport and are handed
// out by the next receive() calls before the sockets are read again.
//
// GSO (option gso, off by default): send() hands the kernel a train of consecutive packets to one
// peer, of one length (the last may be shorter), as one UDP_SEGMENT send; the kernel (or a NIC with
// UDP segmentation offload) cuts it into datagrams and gives segment k of a train IP ID k, DF kept.
// The ICRC covers the IP ID, so with GSO build() leaves the ICRC to send(), which stamps packet k
// of every train for ID k and every packet sent alone for ID 0. sumcastd checks the ICRC against
// the IPv4 header it received; the kernel-UDP aggregators (embedded service, sumcast-serve, host
// aggregators) read through sockets and find the IP ID as receive() does. A kernel that refuses
// UDP_SEGMENT, at open or on a send, leaves the per-datagram path for good (gso_refused = 1,
// describe() says why).
//
// Multicast results (a peer with a group): one more socket per group, bound to group:4791 with
// SO_REUSEADDR (several workers, and several jobs, of one host each get their copy; the bound
// address keeps other groups out) and IP_MULTICAST_ALL off, joined with IP_ADD_MEMBERSHIP on the
// interface of bind_ip (so IGMP reports let snooping switches forward the group). Its datagrams
// must be addressed to the group (DestQP 0xFFFFFF, rank 0xFFFF) by the peer's job; the ICRC is
// verified with the group as destination. wait_fd() is then an epoll set of every socket.
//
// Thread safety: one thread at a time.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "sumcast/shim/transport.h"

namespace sumcast::shim {

// The largest RoCE payload (4096, 2048, 1024, 512 or 256 bytes, the RoCE path MTUs) whose datagram
// with its IPv4 and UDP headers fits an IP MTU of `ip_mtu` bytes; 0 when none does.
uint32_t udp_payload_for_mtu(uint32_t ip_mtu);

struct UdpTransportOptions {
  uint32_t bind_ip = 0;               // host order; required (not 0.0.0.0: the ICRC covers it)
  uint16_t port = 0;                  // 0: an ephemeral port, see local_endpoint()
  uint32_t qpn = 0;                   // our QPN (DETH source QP; results' DestQP); 0: 0x010000 | port
  uint32_t batch = 64;                // datagrams per sendmmsg/recvmmsg, 1..1024
  int socket_buffer_bytes = 8 << 20;  // SO_SNDBUF/SO_RCVBUF (forced when privileged)
  bool verify_icrc = true;            // check the ICRC of every result
  uint32_t send_wait_ms = 10;         // when the socket buffer is full, wait this long for room
  uint8_t tos = 0;                    // IP_TOS of every datagram: DSCP << 2 | ECN (the ICRC masks it)
  // IP_TOS of resends (OutPacket::resend), per datagram (an IP_TOS control message), 0..255; -1:
  // tos. A host qdisc or a switch that serves this DSCP first lets repairs skip the queue of first
  // transmissions (communicator.h, Send queue).
  int repair_tos = -1;
  bool recv_ecn = false;  // IP_RECVTOS: flag results that arrive marked CE (Received::ce)
  // SO_BUSY_POLL on every socket: a receive that finds nothing polls the device queue this long
  // first (and SO_PREFER_BUSY_POLL where the kernel has it). 0: off. A kernel that refuses it
  // (raising it may need CAP_NET_ADMIN) fails open() naming the cause.
  uint32_t busy_poll_us = 0;
  bool gro = true;   // UDP_GRO where the kernel allows it (see above); false: one datagram per buffer
  bool gso = false;  // UDP_SEGMENT trains (see above): every peer must accept the ICRC of IP ID k
  // Tests: stands in for setsockopt(2) where UDP_GRO and UDP_SEGMENT are set (a kernel that
  // refuses them); null: setsockopt.
  int (*offload_setsockopt)(int fd, int level, int name, const void* value, socklen_t len) = nullptr;
};

class UdpTransport final : public Transport {
 public:
  static Result<std::unique_ptr<UdpTransport>> open(const UdpTransportOptions& options);
  ~UdpTransport() override;
  UdpTransport(const UdpTransport&) = delete;
  UdpTransport& operator=(const UdpTransport&) = delete;

  Endpoint local_endpoint() const override;
  Result<uint32_t> add_peer(const PeerSpec& spec) override;
  void leave_groups() override;
  size_t packet_capacity(size_t payload_len) const override;
  size_t build(uint8_t* buf, uint32_t peer, uint32_t dest_qp, uint32_t psn, const wire::SumcastHeader& hdr,
               const uint8_t* payload) override;
  Status send(std::span<const OutPacket> packets) override;
  size_t receive(std::span<Received> out) override;
  int wait_fd() const override { return epoll_fd_ >= 0 ? epoll_fd_ : fd_; }
  uint32_t path_mtu(uint32_t dst_ip) const override;
  std::optional<size_t> send_queue_bytes() const override;
  const TransportCounters& counters() const override { return counters_; }
  std::string describe() const override;

 private:
  struct Peer {
    PeerSpec spec;
    sockaddr_in addr;
  };
  struct Group {
    int fd = -1;
    uint32_t ip = 0;          // host order
    uint32_t drops_seen = 0;  // its SO_RXQ_OVFL count, as last reported
  };
  explicit UdpTransport(const UdpTransportOptions& options);
  void drop(DropReason r) { ++counters_.drops[static_cast<size_t>(r)]; }
  Status join(uint32_t group);
  // One received datagram (a whole buffer, or one segment of a coalesced one), not yet validated.
  struct Datagram {
    const uint8_t* data = nullptr;
    uint32_t len = 0;
    uint32_t src_ip = 0;  // host order
    uint16_t src_port = 0;
    uint32_t dst_ip = 0;  // what it was sent to: our address or a group
    uint16_t dst_port = 0;
    bool group = false;  // arrived on a group socket
    uint8_t ecn = 0;
    uint16_t train_index = 0;  // its place in a coalesced buffer (UDP_GRO); 0 alone
  };
  // Receives up to `max_msgs` buffers into rx buffers [first, first + max_msgs) from `fd`, whose
  // datagrams were sent to dst_ip:dst_port (`group`: a group socket); returns the buffers read.
  // Validated datagrams go to out[0..*accepted); those that did not fit in `out` to pending_.
  // `drops_seen`: the socket's drop count last reported (SO_RXQ_OVFL).
  size_t drain(int fd, uint32_t* drops_seen, uint32_t dst_ip, uint16_t dst_port, bool group, size_t first,
               size_t max_msgs, std::span<Received> out, size_t* accepted);
  // Validates one datagram; true (and *r set) when it is a result, abort or CNP for us.
  bool accept(const Datagram& d, Received* r);

  UdpTransportOptions options_;
  int fd_ = -1;
  uint32_t ip_ = 0;
  uint16_t port_ = 0;
  uint32_t qpn_ = 0;
  std::vector<Peer> peers_;
  std::vector<Group> groups_;
  int epoll_fd_ = -1;           // every socket, once a group was joined
  uint32_t rx_drops_seen_ = 0;  // fd_'s SO_RXQ_OVFL count, as last reported
  bool gro_ = false;            // UDP_GRO set on every socket
  std::string gro_refused_;     // why the kernel refused UDP_GRO ("" when it did not)
  size_t rx_buf_len_ = 0;       // bytes per receive buffer
  bool gso_ = false;            // UDP_SEGMENT trains
  bool gso_stamps_ = false;     // send() stamps every packet for the IP ID it leaves with
  int repair_tos_ = -1;         // IP_TOS of resends when it differs from the socket's; -1: none
  std::string gso_refused_;     // why the kernel refused UDP_SEGMENT ("" when it did not)
  TransportCounters counters_;
  // Receive batch: one buffer of kRxBufLen bytes per datagram.
  std::vector<uint8_t> rx_mem_;
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  std::vector<sockaddr_in> rx_addr_;
  std::vector<uint64_t> rx_cmsg_;  // one control buffer (TOS byte, drop count, GRO size) per buffer
  std::vector<Datagram> pending_;  // segments of coalesced buffers not handed out yet
  size_t pending_next_ = 0;
  // Send batch: one message per packet, or per GSO train.
  std::vector<mmsghdr> tx_msgs_;
  std::vector<iovec> tx_iov_;                   // one per packet: batch of them, batch x kGsoMaxSegments with GSO
  std::vector<uint64_t> tx_cmsg_;               // one control buffer per message (UDP_SEGMENT or IP_TOS)
  std::vector<size_t> tx_first_;                // the message's first packet (index into send()'s span)
  std::vector<size_t> tx_count_;                // the message's packets
  std::unordered_set<const uint8_t*> tx_seen_;  // the buffers of one sendmmsg (GSO stamping)
};

}  // namespace sumcast::shim
