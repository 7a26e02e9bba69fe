#include "sumcast/shim/udp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "sumcast/icrc/icrc.h"
#include "sumcast/shim/address.h"
#include "sumcast/udp_offload.h"

namespace sumcast::shim {
namespace {

// A received datagram is at most BTH..ICRC of the largest payload; one more byte detects larger.
constexpr size_t kRxBufLen = wire::roce_len(wire::kMaxPayloadBytes) + 64;
constexpr size_t kGroMaxBatch = 64;  // receive buffers of kUdpGroBufLen bytes (UDP_GRO), whatever the batch
// Control messages per buffer: IP_TOS (with recv_ecn), SO_RXQ_OVFL (the socket's drop count) and
// UDP_GRO (the segment size of a coalesced buffer).
constexpr size_t kCmsgWords =
    (CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint32_t)) + CMSG_SPACE(sizeof(int)) + 7) / 8;
constexpr uint8_t kEcnCe = 0x03;
// A UDP_SEGMENT train's limits: sumcast/udp_offload.h.
// Control messages per sent message: UDP_SEGMENT (a train) or IP_TOS (a resend with the repair
// TOS), never both (a resend is never in a train).
constexpr size_t kTxCmsgWords = std::max(kUdpSegmentCmsgWords, (CMSG_SPACE(sizeof(int)) + 7) / 8);

// What a received datagram's control messages say: its ECN field (IP_RECVTOS; 0 without) and the
// socket's drop count so far (SO_RXQ_OVFL: the kernel attaches it once the socket dropped any).
struct RxControl {
  uint8_t ecn = 0;
  bool have_drops = false;
  uint32_t drops = 0;
  uint32_t gso_size = 0;  // UDP_GRO: the buffer holds datagrams of this size (the last may be shorter)
};

RxControl received_control(msghdr& h) {
  RxControl rc;
  if (h.msg_control == nullptr) return rc;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      rc.ecn = *CMSG_DATA(c) & 0x03;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      std::memcpy(&rc.drops, CMSG_DATA(c), sizeof(rc.drops));
      rc.have_drops = true;
    } else if (const uint32_t g = udp_gro_segment(*c); g != 0) {
      rc.gso_size = g;
    }
  }
  return rc;
}

// SO_BUSY_POLL (and SO_PREFER_BUSY_POLL, best effort: kernels before 5.11 lack it) on `fd`.
Status set_busy_poll(int fd, uint32_t us) {
  if (us == 0) return {};
  const int v = static_cast<int>(us), one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)) != 0) {
    return Status::from_errno("setsockopt(SO_BUSY_POLL, " + std::to_string(us) + " us)");
  }
#ifdef SO_PREFER_BUSY_POLL
  (void)setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one));
#else
  (void)one;
#endif
  return {};
}

// SO_RXQ_OVFL: every datagram then tells how many the socket dropped so far (best effort: without
// it the namespace's Udp RcvbufErrors still counts them).
void ask_drop_counts(int fd) {
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
}

// A UDP-level option on `fd` (through the test seam when there is one): UDP_GRO = 1 turns GRO
// on; UDP_SEGMENT = 0 asks whether the kernel knows GSO (0: no segment size of the socket's own).
// "" or why the kernel refused it.
std::string set_udp_offload(int fd, const UdpTransportOptions& o, int name, int value, const char* what) {
  const int rc = o.offload_setsockopt != nullptr ? o.offload_setsockopt(fd, IPPROTO_UDP, name, &value, sizeof(value))
                                                 : setsockopt(fd, IPPROTO_UDP, name, &value, sizeof(value));
  return rc == 0 ? std::string() : std::string("setsockopt(") + what + "): " + std::strerror(errno);
}
std::string enable_gro(int fd, const UdpTransportOptions& o) { return set_udp_offload(fd, o, UDP_GRO, 1, "UDP_GRO"); }

}  // namespace

uint32_t udp_payload_for_mtu(uint32_t ip_mtu) {
  constexpr size_t kIpUdpHeaders = 20 + 8;
  for (uint32_t p = static_cast<uint32_t>(wire::kMaxPayloadBytes); p >= 256; p /= 2) {
    if (wire::roce_len(p) + kIpUdpHeaders <= ip_mtu) return p;
  }
  return 0;
}

uint32_t UdpTransport::path_mtu(uint32_t dst_ip) const {
  auto mtu = path_mtu_toward(ip_, dst_ip);
  return mtu.ok() ? *mtu : 0;
}

// SIOCOUTQ on a UDP socket: its send memory still allocated, which a datagram holds until the
// device has sent it (qdisc, device ring) or a veth handed it on.
std::optional<size_t> UdpTransport::send_queue_bytes() const {
  int queued = 0;
  if (ioctl(fd_, SIOCOUTQ, &queued) != 0 || queued < 0) return std::nullopt;
  return static_cast<size_t>(queued);
}

UdpTransport::UdpTransport(const UdpTransportOptions& options) : options_(options) {}

UdpTransport::~UdpTransport() {
  leave_groups();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<UdpTransport>> UdpTransport::open(const UdpTransportOptions& options) {
  if (options.bind_ip == 0) {
    return Status::invalid_argument("UDP transport needs a specific local IPv4 address (the ICRC covers it)");
  }
  if (options.busy_poll_us > 1'000'000) {
    return Status::invalid_argument("UDP transport busy_poll_us must be 0..1000000, got " +
                                    std::to_string(options.busy_poll_us));
  }
  if (options.repair_tos < -1 || options.repair_tos > 255) {
    return Status::invalid_argument("UDP transport repair_tos must be -1..255, got " +
                                    std::to_string(options.repair_tos));
  }
  if (options.batch == 0 || options.batch > 1024) {
    return Status::invalid_argument("UDP transport batch must be 1..1024, got " + std::to_string(options.batch));
  }
  std::unique_ptr<UdpTransport> t(new UdpTransport(options));
  t->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t->fd_ < 0) return Status::from_errno("socket(AF_INET, SOCK_DGRAM)");
  const int pmtu = IP_PMTUDISC_DO;  // DF on every datagram, so the kernel writes IP ID 0
  if (setsockopt(t->fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) {
    return Status::from_errno("setsockopt(IP_MTU_DISCOVER, IP_PMTUDISC_DO)");
  }
  if (options.tos != 0) {
    const int tos = options.tos;
    if (setsockopt(t->fd_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0) {
      return Status::from_errno("setsockopt(IP_TOS, " + std::to_string(tos) + ")");
    }
  }
  if (options.recv_ecn) {
    const int one = 1;
    if (setsockopt(t->fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)) != 0) {
      return Status::from_errno("setsockopt(IP_RECVTOS)");
    }
  }
  t->counters_.rx_buffer_bytes = set_socket_buffer(t->fd_, SO_RCVBUFFORCE, SO_RCVBUF, options.socket_buffer_bytes);
  t->counters_.tx_buffer_bytes = set_socket_buffer(t->fd_, SO_SNDBUFFORCE, SO_SNDBUF, options.socket_buffer_bytes);
  ask_drop_counts(t->fd_);
  SUMCAST_RETURN_IF_ERROR(set_busy_poll(t->fd_, options.busy_poll_us));
  if (options.gro) {
    t->gro_refused_ = enable_gro(t->fd_, options);
    t->gro_ = t->gro_refused_.empty();
    t->counters_.gro_refused = t->gro_ ? 0 : 1;
  }
  if (options.gso) {
    t->gso_refused_ = set_udp_offload(t->fd_, options, UDP_SEGMENT, 0, "UDP_SEGMENT");
    t->gso_ = t->gso_stamps_ = t->gso_refused_.empty();
    t->counters_.gso_refused = t->gso_ ? 0 : 1;
  }
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_port = htons(options.port);
  me.sin_addr.s_addr = htonl(options.bind_ip);
  if (bind(t->fd_, reinterpret_cast<const sockaddr*>(&me), sizeof(me)) != 0) {
    return Status::from_errno("bind UDP " + format_ipv4(options.bind_ip) + ":" + std::to_string(options.port));
  }
  socklen_t len = sizeof(me);
  if (getsockname(t->fd_, reinterpret_cast<sockaddr*>(&me), &len) != 0) return Status::from_errno("getsockname");
  t->ip_ = options.bind_ip;
  t->port_ = ntohs(me.sin_port);
  t->qpn_ = options.qpn != 0 ? (options.qpn & 0xFFFFFF) : (0x010000u | t->port_);

  const size_t b = options.batch;
  const size_t rb = t->gro_ ? std::min(b, kGroMaxBatch) : b;
  t->rx_buf_len_ = t->gro_ ? kUdpGroBufLen : kRxBufLen;
  t->rx_mem_.resize(rb * t->rx_buf_len_);
  t->rx_msgs_.resize(rb);
  t->rx_iov_.resize(rb);
  t->rx_addr_.resize(rb);
  t->rx_cmsg_.assign(rb * kCmsgWords, 0);
  for (size_t i = 0; i < rb; ++i) {
    t->rx_iov_[i] = {t->rx_mem_.data() + i * t->rx_buf_len_, t->rx_buf_len_};
    std::memset(&t->rx_msgs_[i], 0, sizeof(mmsghdr));
  }
  t->tx_msgs_.resize(b);
  t->tx_iov_.resize(t->gso_ ? b * kUdpTrainMaxSegments : b);
  t->repair_tos_ = options.repair_tos >= 0 && options.repair_tos != options.tos ? options.repair_tos : -1;
  t->tx_cmsg_.assign(t->gso_ || t->repair_tos_ >= 0 ? b * kTxCmsgWords : 0, 0);
  t->tx_first_.resize(b);
  t->tx_count_.resize(b);
  return t;
}

Endpoint UdpTransport::local_endpoint() const {
  Endpoint e;
  mac_of_local_ip(ip_, e.mac);
  e.ip = ip_;
  e.udp_port = port_;
  e.qpn = qpn_;
  return e;
}

Result<uint32_t> UdpTransport::add_peer(const PeerSpec& spec) {
  if (spec.ip == 0 || spec.udp_port == 0) {
    return Status::invalid_argument("appliance data endpoint " + format_ipv4(spec.ip) + ":" +
                                    std::to_string(spec.udp_port) + " is not usable");
  }
  if (spec.group != 0) SUMCAST_RETURN_IF_ERROR(join(spec.group));
  Peer p{spec, {}};
  p.addr.sin_family = AF_INET;
  p.addr.sin_port = htons(spec.udp_port);
  p.addr.sin_addr.s_addr = htonl(spec.ip);
  peers_.push_back(p);
  return static_cast<uint32_t>(peers_.size() - 1);
}

Status UdpTransport::join(uint32_t group) {
  const std::string what = describe() + ": multicast group " + format_ipv4(group);
  if ((group >> 28) != 0xE) return Status::invalid_argument(what + " is not in 224.0.0.0/4");
  for (const Group& g : groups_) {
    if (g.ip == group) return {};  // two jobs never share a group, but one socket would serve both
  }
  Group g;
  g.ip = group;
  g.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (g.fd < 0) return Status::from_errno(what + ": socket");
  auto fail = [&](const std::string& call) {
    const int err = errno;
    close(g.fd);
    return Status::from_errno(what + ": " + call, err);
  };
  const int one = 1, zero = 0;
  if (setsockopt(g.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) return fail("setsockopt(SO_REUSEADDR)");
  if (setsockopt(g.fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)) != 0) {
    return fail("setsockopt(IP_MULTICAST_ALL, 0)");
  }
  if (options_.recv_ecn && setsockopt(g.fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)) != 0) {
    return fail("setsockopt(IP_RECVTOS)");
  }
  (void)set_socket_buffer(g.fd, SO_RCVBUFFORCE, SO_RCVBUF, options_.socket_buffer_bytes);
  ask_drop_counts(g.fd);
  if (Status st = set_busy_poll(g.fd, options_.busy_poll_us); !st.ok()) {
    close(g.fd);
    return st.with_context(what + ": ");
  }
  if (gro_) {
    if (std::string why = enable_gro(g.fd, options_); !why.empty()) {
      close(g.fd);
      return Status::internal(what + ": " + why + " (the data socket took it)");
    }
  }
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(wire::kRoceUdpPort);
  at.sin_addr.s_addr = htonl(group);
  if (bind(g.fd, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) != 0) {
    return fail("bind " + format_ipv4(group) + ":" + std::to_string(wire::kRoceUdpPort));
  }
  ip_mreqn mr{};
  mr.imr_multiaddr.s_addr = htonl(group);
  mr.imr_address.s_addr = htonl(ip_);  // the interface that holds our address
  mr.imr_ifindex = 0;
  if (setsockopt(g.fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0) {
    return fail("IP_ADD_MEMBERSHIP on the interface of " + format_ipv4(ip_));
  }
  if (epoll_fd_ < 0) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return fail("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd_;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) return fail("epoll_ctl");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = g.fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, g.fd, &ev) != 0) return fail("epoll_ctl");
  groups_.push_back(g);
  return {};
}

void UdpTransport::leave_groups() {
  for (const Group& g : groups_) {
    ip_mreqn mr{};
    mr.imr_multiaddr.s_addr = htonl(g.ip);
    mr.imr_address.s_addr = htonl(ip_);
    (void)setsockopt(g.fd, IPPROTO_IP, IP_DROP_MEMBERSHIP, &mr, sizeof(mr));  // close() would drop it too
    if (epoll_fd_ >= 0) (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, g.fd, nullptr);
    close(g.fd);
  }
  groups_.clear();
}

size_t UdpTransport::packet_capacity(size_t payload_len) const { return wire::roce_len(payload_len); }

size_t UdpTransport::build(uint8_t* buf, uint32_t peer, uint32_t dest_qp, uint32_t psn, const wire::SumcastHeader& hdr,
                           const uint8_t* payload) {
  const Peer& p = peers_[peer];
  const size_t payload_len = size_t{hdr.elem_count} * wire::dtype_size(hdr.dtype);
  wire::Addressing a;
  a.dest_qp = dest_qp;
  a.src_qp = qpn_;
  a.qkey = p.spec.qkey;
  a.psn = psn;
  wire::write_roce_headers(buf, a, hdr, payload_len);
  std::memcpy(buf + wire::kRoceHeadersLen, payload, payload_len);
  const size_t len = wire::roce_len(payload_len);
  std::memset(buf + wire::kRoceHeadersLen + payload_len, 0, len - wire::kRoceHeadersLen - payload_len);
  if (gso_stamps_) return len;  // send() stamps it for the IP ID it leaves with (see GSO in the header)
  // IP ID 0 and DF: what the kernel writes for a DF datagram from an unconnected socket.
  const icrc::UdpFields f{.src_ip = ip_, .dst_ip = p.spec.ip, .src_port = port_, .dst_port = p.spec.udp_port};
  icrc::stamp_udp(f, std::span<uint8_t>(buf, len));
  return len;
}

Status UdpTransport::send(std::span<const OutPacket> packets) {
  size_t done = 0;
  bool waited = false;
  while (done < packets.size()) {
    // One message per packet; with GSO one per train of packets to one peer, of the first one's
    // length (only the last may be shorter). Where send() stamps ICRCs per position, no buffer is
    // in one sendmmsg twice: its second stamp would overwrite the first before the kernel copies it.
    size_t m = 0, p = done, iov = 0;
    tx_seen_.clear();
    for (; m < tx_msgs_.size() && p < packets.size(); ++m) {
      const OutPacket& first = packets[p];
      if (gso_stamps_ && !tx_seen_.insert(first.data).second) break;  // the next sendmmsg takes it
      size_t n = 1;
      if (gso_ && !first.resend) {
        const size_t most = std::min(kUdpTrainMaxSegments, kUdpTrainMaxBytes / std::max<size_t>(first.len, 1));
        while (n < most && p + n < packets.size()) {
          const OutPacket& o = packets[p + n];
          if (o.resend || o.peer != first.peer || o.len > first.len || packets[p + n - 1].len != first.len) break;
          if (tx_seen_.contains(o.data)) break;
          tx_seen_.insert(o.data);
          ++n;
        }
      }
      if (gso_stamps_) {  // segment k of a train leaves with IP ID k; a packet alone with 0
        const Peer& peer = peers_[first.peer];
        for (size_t k = 0; k < n; ++k) {
          const OutPacket& o = packets[p + k];
          const icrc::UdpFields f{.src_ip = ip_,
                                  .dst_ip = peer.spec.ip,
                                  .src_port = port_,
                                  .dst_port = peer.spec.udp_port,
                                  .ip_id = static_cast<uint16_t>(k)};
          icrc::stamp_udp(f, std::span<uint8_t>(const_cast<uint8_t*>(o.data), o.len));
        }
      }
      for (size_t k = 0; k < n; ++k) tx_iov_[iov + k] = {const_cast<uint8_t*>(packets[p + k].data), packets[p + k].len};
      mmsghdr& mh = tx_msgs_[m];
      std::memset(&mh, 0, sizeof(mh));
      mh.msg_hdr.msg_name = &peers_[first.peer].addr;
      mh.msg_hdr.msg_namelen = sizeof(sockaddr_in);
      mh.msg_hdr.msg_iov = &tx_iov_[iov];
      mh.msg_hdr.msg_iovlen = n;
      if (n > 1) {
        set_udp_segment(mh.msg_hdr, &tx_cmsg_[m * kTxCmsgWords], static_cast<uint16_t>(first.len));
      } else if (first.resend && repair_tos_ >= 0) {
        set_one_control(mh.msg_hdr, &tx_cmsg_[m * kTxCmsgWords], IPPROTO_IP, IP_TOS, repair_tos_);
      }
      tx_first_[m] = p;
      tx_count_[m] = n;
      p += n;
      iov += n;
    }
    const int rc = sendmmsg(fd_, tx_msgs_.data(), static_cast<unsigned>(m), MSG_DONTWAIT);
    if (rc > 0 && static_cast<size_t>(rc) < m) ++counters_.tx_partial;  // the next call says why
    if (rc > 0) {
      for (size_t i = 0; i < static_cast<size_t>(rc); ++i) {
        for (size_t k = 0; k < tx_count_[i]; ++k) {
          ++counters_.tx_packets;
          counters_.tx_bytes += packets[tx_first_[i] + k].len;
        }
        if (tx_count_[i] > 1) {
          ++counters_.gso_sends;
          counters_.gso_segments += tx_count_[i];
        }
      }
      done = tx_first_[rc - 1] + tx_count_[rc - 1];
      waited = false;
      continue;
    }
    const int err = errno;
    if (rc < 0 && err == EINTR) continue;
    const size_t lost = tx_count_[0];  // what the first message carried
    if (rc < 0 && lost > 1 && (err == EIO || err == EINVAL || err == EMSGSIZE || err == ENOPROTOOPT)) {
      // The kernel or the device will not segment (no checksum offload, a path through IPsec...):
      // one datagram per packet from now on, these ones included (stamped for ID 0 again).
      gso_ = false;
      gso_refused_ = std::string("UDP_SEGMENT send: ") + std::strerror(err);
      counters_.gso_refused = 1;
      continue;
    }
    if (rc < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS)) {
      ++(err == ENOBUFS ? counters_.tx_enobufs : counters_.tx_eagain);
      if (!waited) {  // socket buffer full: wait (bounded) for room once, then count the rest as lost
        pollfd pfd{fd_, POLLOUT, 0};
        (void)poll(&pfd, 1, static_cast<int>(options_.send_wait_ms));
        waited = true;
        continue;
      }
      counters_.tx_dropped += lost;
      done += lost;
      continue;
    }
    if (rc < 0 && (err == ENETUNREACH || err == EHOSTUNREACH || err == ENETDOWN || err == EHOSTDOWN)) {
      // The route or link is gone for now (a link flap): the packet is lost like any other, and the
      // retransmission timer, bounded by the retry budget and the op timeout, decides what follows.
      counters_.tx_dropped += lost;
      done += lost;
      continue;
    }
    const OutPacket& o = packets[done];
    return Status::from_errno(describe() + ": sendmmsg of " + std::to_string(o.len) + " bytes to " +
                                  format_ipv4(peers_[o.peer].spec.ip) + ":" +
                                  std::to_string(peers_[o.peer].spec.udp_port),
                              err);
  }
  return {};
}

size_t UdpTransport::receive(std::span<Received> out) {
  if (out.empty()) return 0;
  size_t accepted = 0;
  if (pending_next_ < pending_.size()) {
    // The rx buffers still hold these segments: hand them out before reading the sockets again.
    while (pending_next_ < pending_.size() && accepted < out.size()) {
      if (accept(pending_[pending_next_++], &out[accepted])) ++accepted;
    }
    if (pending_next_ == pending_.size()) {
      pending_.clear();
      pending_next_ = 0;
    }
    return accepted;
  }
  const size_t want = std::min(out.size(), rx_msgs_.size());
  size_t used = drain(fd_, &rx_drops_seen_, ip_, port_, false, 0, want, out, &accepted);
  for (Group& g : groups_) {
    if (used >= want || accepted >= out.size() || !pending_.empty()) break;
    size_t more = 0;
    used += drain(g.fd, &g.drops_seen, g.ip, wire::kRoceUdpPort, true, used, want - used, out.subspan(accepted), &more);
    accepted += more;
  }
  return accepted;
}

size_t UdpTransport::drain(int fd, uint32_t* drops_seen, uint32_t dst_ip, uint16_t dst_port, bool group, size_t first,
                           size_t max_msgs, std::span<Received> out, size_t* accepted) {
  *accepted = 0;
  const size_t want = max_msgs;
  if (want == 0) return 0;
  for (size_t i = first; i < first + want; ++i) {
    msghdr& h = rx_msgs_[i].msg_hdr;
    h.msg_name = &rx_addr_[i];
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = &rx_iov_[i];
    h.msg_iovlen = 1;
    h.msg_control = &rx_cmsg_[i * kCmsgWords];
    h.msg_controllen = kCmsgWords * 8;
    h.msg_flags = 0;
  }
  int rc;
  do {
    rc = recvmmsg(fd, rx_msgs_.data() + first, static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0) return 0;
  size_t n = 0;
  for (size_t i = first; i < first + static_cast<size_t>(rc); ++i) {
    const uint8_t* data = rx_mem_.data() + i * rx_buf_len_;
    const size_t len = rx_msgs_[i].msg_len;
    const RxControl ctl = received_control(rx_msgs_[i].msg_hdr);
    if (ctl.have_drops && ctl.drops != *drops_seen) {  // a 32-bit count since the socket opened
      counters_.rx_overflows += static_cast<uint32_t>(ctl.drops - *drops_seen);
      *drops_seen = ctl.drops;
    }
    // A coalesced buffer (UDP_GRO): datagrams of gso_size bytes, the last one possibly shorter.
    const size_t seg = ctl.gso_size != 0 && ctl.gso_size < len ? ctl.gso_size : len;
    if (seg < len) {
      ++counters_.gro_receives;
      counters_.gro_segments += (len + seg - 1) / seg;
    }
    if ((rx_msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) {  // the buffer is no longer what was sent
      ++counters_.rx_packets;
      counters_.rx_bytes += len;
      drop(DropReason::kTruncated);
      continue;
    }
    Datagram d;
    d.src_ip = ntohl(rx_addr_[i].sin_addr.s_addr);
    d.src_port = ntohs(rx_addr_[i].sin_port);
    d.dst_ip = dst_ip;
    d.dst_port = dst_port;
    d.group = group;
    d.ecn = ctl.ecn;
    size_t off = 0;
    d.train_index = 0;
    do {  // once for an empty datagram too (the parser rejects it)
      d.data = data + off;
      d.len = static_cast<uint32_t>(std::min(seg, len - off));
      off += d.len;
      ++counters_.rx_packets;
      counters_.rx_bytes += d.len;
      if (n < out.size()) {
        if (accept(d, &out[n])) ++n;
      } else {
        pending_.push_back(d);
      }
      ++d.train_index;
    } while (off < len);
  }
  *accepted = n;
  return static_cast<size_t>(rc);
}

bool UdpTransport::accept(const Datagram& d, Received* r) {
  const uint8_t* data = d.data;
  const size_t len = d.len;
  const uint32_t src_ip = d.src_ip;
  const uint16_t src_port = d.src_port;
  const uint32_t dst_ip = d.dst_ip;
  const bool group = d.group;
  if (len >= kRxBufLen) {  // larger than any datagram of ours
    drop(DropReason::kTruncated);
    return false;
  }
  // IP ID 0 and DF: what the kernel writes for a DF datagram from an unconnected socket.
  const icrc::UdpFields f{.src_ip = src_ip, .dst_ip = dst_ip, .src_port = src_port, .dst_port = d.dst_port};
  uint32_t cnp_qp = 0;
  if (wire::parse_cnp(std::span<const uint8_t>(data, len), &cnp_qp)) {
    // Congestion notification: no Sumcast header, so the peer is the appliance at that source
    // (the port match preferred when several share the address).
    int peer = -1;
    for (size_t p = 0; p < peers_.size(); ++p) {
      if (peers_[p].spec.ip == src_ip && (peer < 0 || peers_[p].spec.udp_port == src_port)) {
        peer = static_cast<int>(p);
      }
    }
    if (peer < 0) {
      drop(DropReason::kUnknownSource);
    } else if (options_.verify_icrc && !icrc::verify_udp(f, std::span<const uint8_t>(data, len))) {
      drop(DropReason::kBadIcrc);
    } else if (group || cnp_qp != qpn_) {
      drop(DropReason::kBadDestQp);
    } else {
      ++counters_.cnps;
      *r = Received{};
      r->peer = static_cast<uint32_t>(peer);
      r->cnp = true;
      return true;
    }
    return false;
  }
  wire::ParsedPacket pp;
  const wire::ParseError pe = wire::parse_roce(std::span<const uint8_t>(data, len), &pp);
  if (pe != wire::ParseError::kOk) {
    drop(static_cast<DropReason>(pe));
    return false;
  }
  bool known_source = false;
  int peer = -1;
  for (size_t p = 0; p < peers_.size(); ++p) {
    if (peers_[p].spec.ip != src_ip) continue;
    known_source = true;
    if (peers_[p].spec.job_id != pp.hdr.job_id) continue;
    if (group && peers_[p].spec.group != dst_ip) continue;  // another job's group
    // Several appliances may share an address (embedded services); prefer the port match.
    if (peer < 0 || peers_[p].spec.udp_port == src_port) peer = static_cast<int>(p);
  }
  if (!known_source) {
    drop(DropReason::kUnknownSource);
    return false;
  }
  if (peer < 0) {
    drop(DropReason::kUnknownJob);
    return false;
  }
  const PeerSpec& ps = peers_[static_cast<size_t>(peer)].spec;
  if (pp.qkey != ps.qkey) {
    drop(DropReason::kBadQkey);
    return false;
  }
  if (options_.verify_icrc) {
    // Datagram k of a train (UDP_SEGMENT) was stamped for IP ID k, a lone one for 0: its place in a
    // coalesced buffer first, then any place a train has (a train cut on the way, docs/protocol.md §2.2).
    icrc::UdpFields fk = f;
    fk.ip_id = d.train_index;
    const int id = icrc::match_udp_ip_id(fk, std::span<const uint8_t>(data, len), kUdpTrainMaxSegments);
    if (id < 0) {
      drop(DropReason::kBadIcrc);
      return false;
    }
    if (id != 0 && id != d.train_index) ++counters_.rx_cut_train;
  }
  if (pp.hdr.type == wire::MsgType::kContribution) {
    drop(DropReason::kNotResult);
    return false;
  }
  if (group ? pp.dest_qp != wire::kMulticastQpn : (pp.dest_qp != qpn_ && pp.dest_qp != wire::kMulticastQpn)) {
    drop(DropReason::kBadDestQp);
    return false;
  }
  bool ce = false;
  const bool notice = pp.hdr.type == wire::MsgType::kLossNotice || pp.hdr.type == wire::MsgType::kDuplicateNotice;
  if (pp.hdr.type == wire::MsgType::kResult || notice) {
    // A notice goes to one rank, never to the group.
    const bool ours = notice  ? !group && pp.hdr.rank == ps.rank
                      : group ? pp.hdr.rank == wire::kRankMulticast
                              : pp.hdr.rank == ps.rank || pp.hdr.rank == wire::kRankMulticast;
    if (!ours) {
      drop(DropReason::kBadRank);
      return false;
    }
    if (pp.hdr.dtype != ps.dtype) {
      drop(DropReason::kDtypeMismatch);
      return false;
    }
    if (pp.hdr.op != ps.op) {
      drop(DropReason::kOpMismatch);
      return false;
    }
    if (notice) {
      ++(pp.hdr.type == wire::MsgType::kLossNotice ? counters_.loss_notices : counters_.duplicate_notices);
    } else {
      ++counters_.results;
      if (group) ++counters_.group_results;
      ce = d.ecn == kEcnCe;
      if (ce) ++counters_.ce_results;
    }
  } else {
    ++counters_.aborts;
  }
  r->peer = static_cast<uint32_t>(peer);
  r->cnp = false;
  r->ce = ce;
  r->hdr = pp.hdr;
  r->payload = pp.payload;
  r->payload_len = static_cast<uint32_t>(pp.payload_len);
  r->src_qp = pp.src_qp;
  return true;
}

std::string UdpTransport::describe() const {
  std::string d = "udp " + format_ipv4(ip_) + ":" + std::to_string(port_);
  if (!gro_refused_.empty()) d += " (no GRO: " + gro_refused_ + ")";
  if (!gso_refused_.empty()) d += " (no GSO: " + gso_refused_ + ")";
  return d;
}

}  // namespace sumcast::shim
