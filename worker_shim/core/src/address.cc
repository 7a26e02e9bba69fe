#include "sumcast/shim/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstring>

namespace sumcast::shim {

Result<uint32_t> parse_ipv4(std::string_view text) {
  const std::optional<uint32_t> ip = sumcast::parse_ipv4(text);
  if (!ip) return Status::invalid_argument("not an IPv4 dotted quad: '" + std::string(text) + "'");
  return *ip;
}

Result<uint32_t> resolve_ipv4(const std::string& host) {
  auto quad = parse_ipv4(host);
  if (quad.ok()) return quad;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::not_found("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  uint32_t ip = 0;
  std::memcpy(&ip, &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr, 4);
  freeaddrinfo(res);
  return ntohl(ip);
}

Result<HostPort> parse_host_port(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::invalid_argument("expected host:port, got '" + std::string(text) + "'");
  }
  HostPort hp;
  hp.host = std::string(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    return Status::invalid_argument("bad port in '" + std::string(text) + "' (1..65535)");
  }
  hp.port = static_cast<uint16_t>(port);
  auto ip = resolve_ipv4(hp.host);
  if (!ip.ok()) return ip.status();
  hp.ip = *ip;
  return hp;
}

Status split_weight(std::string_view text, std::string* host_port, double* weight) {
  const size_t at = text.find('@');
  *weight = 1.0;
  if (at == std::string_view::npos) {
    *host_port = std::string(text);
    return {};
  }
  *host_port = std::string(text.substr(0, at));
  const std::string w(text.substr(at + 1));
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  if (w.empty() || end != w.c_str() + w.size() || !std::isfinite(v) || v <= 0) {
    return Status::invalid_argument("bad weight in '" + std::string(text) + "' (a number > 0)");
  }
  *weight = v;
  return {};
}

Result<uint32_t> source_ip_toward(uint32_t dst) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno("socket(AF_INET, SOCK_DGRAM)");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr.s_addr = htonl(dst);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
    const int err = errno;
    close(fd);
    return Status::from_errno("no route to " + format_ipv4(dst), err);
  }
  sockaddr_in me{};
  socklen_t len = sizeof(me);
  const int rc = getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
  const int err = errno;
  close(fd);
  if (rc != 0) return Status::from_errno("getsockname", err);
  return ntohl(me.sin_addr.s_addr);
}

Result<uint32_t> path_mtu_toward(uint32_t src, uint32_t dst) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno("socket(AF_INET, SOCK_DGRAM)");
  auto fail = [fd](const std::string& what) {
    const int err = errno;
    close(fd);
    return Status::from_errno(what, err);
  };
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(src);
  if (src != 0 && bind(fd, reinterpret_cast<const sockaddr*>(&me), sizeof(me)) != 0) {
    return fail("bind " + format_ipv4(src));
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr.s_addr = htonl(dst);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0)
    return fail("no route to " + format_ipv4(dst));
  int mtu = 0;
  socklen_t len = sizeof(mtu);
  if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0) return fail("getsockopt(IP_MTU)");
  close(fd);
  return static_cast<uint32_t>(mtu);
}

void mac_of_local_ip(uint32_t ip, uint8_t mac[6]) {
  std::memset(mac, 0, 6);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  std::string ifname;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == ip) {
      ifname = i->ifa_name;
      ifname = ifname.substr(0, ifname.find(':'));  // "eth0:1" is an alias of eth0
      break;
    }
  }
  for (ifaddrs* i = list; i != nullptr && !ifname.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_PACKET || ifname != i->ifa_name) continue;
    const auto* ll = reinterpret_cast<const sockaddr_ll*>(i->ifa_addr);
    if (ll->sll_halen == 6) std::memcpy(mac, ll->sll_addr, 6);
    break;
  }
  freeifaddrs(list);
}

bool interface_mac(const std::string& iface, uint8_t mac[6]) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, iface.c_str(), IFNAMSIZ - 1);
  const bool ok = ioctl(fd, SIOCGIFHWADDR, &ifr) == 0;
  close(fd);
  if (ok) std::memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
  return ok;
}

}  // namespace sumcast::shim
