// Kernel UDP segmentation offload, the pieces both kernel-UDP data paths use: the worker
// library's UdpTransport (worker_shim/core) and the embedded service behind sumcast-serve
// (dataplane/embedded). One definition of a train's limits, of the UDP_SEGMENT control message
// that makes one (and of writing any one control message), of reading a UDP_GRO control
// message, and of sizing a socket's buffers, so that the two ends of a train agree
// (docs/deployment.md, "UDP trains").
//
// Thread safety: pure functions on the caller's buffers and sockets.
#pragma once

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sumcast {

// A coalesced (UDP_GRO) receive holds at most one UDP datagram's worth of payload (65507 bytes).
inline constexpr size_t kUdpGroBufLen = 65536;
// A UDP_SEGMENT train: at most 64 segments (the kernel's UDP_MAX_SEGMENTS) and, with a margin
// below the 65507 bytes of one IPv4 UDP datagram, at most 63 KiB.
inline constexpr size_t kUdpTrainMaxSegments = 64;
inline constexpr size_t kUdpTrainMaxBytes = 63 * 1024;
// Control space, in 8-byte words, of one UDP_SEGMENT control message.
inline constexpr size_t kUdpSegmentCmsgWords = (CMSG_SPACE(sizeof(uint16_t)) + 7) / 8;

// Makes `h` carry one control message (level, type, value), written into `space` (at least
// CMSG_SPACE(sizeof(T)) bytes, in 8-byte words), which must live until the send.
template <typename T>
inline void set_one_control(msghdr& h, uint64_t* space, int level, int type, const T& value) {
  h.msg_control = space;
  h.msg_controllen = CMSG_SPACE(sizeof(T));
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof(T));
  std::memcpy(CMSG_DATA(c), &value, sizeof(T));
}

// Makes `h` a train of `segment`-byte datagrams: a UDP_SEGMENT control message written into
// `space` (kUdpSegmentCmsgWords words), which must live until the send.
inline void set_udp_segment(msghdr& h, uint64_t* space, uint16_t segment) {
  set_one_control(h, space, IPPROTO_UDP, UDP_SEGMENT, segment);
}

// The segment size a received UDP_GRO control message gives (the buffer holds datagrams of that
// size, the last may be shorter), or 0 where `c` is another control message.
inline uint32_t udp_gro_segment(const cmsghdr& c) {
  if (c.cmsg_level != IPPROTO_UDP || c.cmsg_type != UDP_GRO) return 0;
  int size = 0;
  std::memcpy(&size, CMSG_DATA(&c), sizeof(size));
  return size > 0 ? static_cast<uint32_t>(size) : 0;
}

// Sets SO_RCVBUF or SO_SNDBUF (`force_opt`, SO_RCVBUFFORCE or SO_SNDBUFFORCE, when privileged;
// otherwise `opt`, capped by net.core.rmem_max or wmem_max) and returns what the kernel granted
// (0 where it cannot say).
inline uint64_t set_socket_buffer(int fd, int force_opt, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0) {
    (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));  // best effort
  }
  int granted = 0;
  socklen_t len = sizeof(granted);
  return getsockopt(fd, SOL_SOCKET, opt, &granted, &len) == 0 && granted > 0 ? static_cast<uint64_t>(granted) : 0;
}

}  // namespace sumcast
