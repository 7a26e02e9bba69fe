// The plugin keeps its sockets to itself, so the unit tests check a traffic class where the kernel
// holds it: the IPv4 sockets of this process of one type (SOCK_STREAM, SOCK_DGRAM) whose IP_TOS,
// masked, is `tos`. (A TCP socket's two ECN bits are the kernel's: mask them off, 0xfc.)
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

namespace sumcast::nccl_test {

inline int sockets_with_tos(int type, int tos, int mask = 0xff) {
  int found = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    int t = 0, domain = 0, value = 0;
    socklen_t len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &len) != 0 || t != type) continue;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET) continue;
    len = sizeof(int);
    if (getsockopt(fd, IPPROTO_IP, IP_TOS, &value, &len) == 0 && (value & mask) == tos) ++found;
  }
  return found;
}

}  // namespace sumcast::nccl_test
