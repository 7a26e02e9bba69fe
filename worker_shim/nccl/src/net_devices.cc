#include "net_devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <mutex>

namespace sumcast::nccl {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool selected(const PluginConfig& c, const std::string& name, bool loopback) {
  if (c.if_names.empty()) return !loopback && !starts_with(name, "docker") && !starts_with(name, "virbr");
  bool match = false;
  for (const std::string& p : c.if_names) match |= c.if_exact ? name == p : starts_with(name, p);
  return c.if_exclude ? !match : match;
}

int read_speed(const std::string& name) {
  std::ifstream f("/sys/class/net/" + name + "/speed");
  long v = 0;
  if (f >> v && v > 0 && v < INT_MAX) return static_cast<int>(v);
  return 10000;  // veth, loopback and down links report nothing useful: NCCL's own default
}

std::string read_pci_path(const std::string& name) {
  const std::string link = "/sys/class/net/" + name + "/device";
  char* real = realpath(link.c_str(), nullptr);
  if (real == nullptr) return "";
  std::string out = real;
  std::free(real);
  return out;
}

uint64_t read_guid(const std::string& name) {
  std::ifstream f("/sys/class/net/" + name + "/address");
  std::string mac;
  uint64_t guid = 0;
  if (f >> mac) {
    for (char ch : mac) {
      if (ch == ':') continue;
      const int d = (ch >= '0' && ch <= '9') ? ch - '0' : (ch | 0x20) - 'a' + 10;
      guid = (guid << 4) | static_cast<uint64_t>(d & 0xf);
    }
  }
  return guid != 0 ? guid : if_nametoindex(name.c_str());
}

}  // namespace

Result<std::vector<NetDevice>> discover_net_devices(const PluginConfig& config) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::from_errno("getifaddrs");
  std::vector<NetDevice> chosen;
  std::vector<NetDevice> loopbacks;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_UP) == 0) continue;
    const std::string name = a->ifa_name;
    const bool loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    auto seen = [&](const std::vector<NetDevice>& v) {
      return std::any_of(v.begin(), v.end(), [&](const NetDevice& d) { return d.name == name; });
    };
    NetDevice d;
    d.name = name;
    d.ipv4 = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    if (selected(config, name, loopback)) {
      if (!seen(chosen)) chosen.push_back(d);
    } else if (loopback && config.if_names.empty() && !seen(loopbacks)) {
      loopbacks.push_back(d);
    }
  }
  freeifaddrs(list);
  if (chosen.empty()) chosen = loopbacks;
  if (chosen.empty()) {
    return Status::not_found("no up IPv4 interface matches SUMCAST_NCCL_IFNAME/NCCL_SOCKET_IFNAME");
  }
  std::sort(chosen.begin(), chosen.end(), [](const NetDevice& a, const NetDevice& b) { return a.name < b.name; });
  for (NetDevice& d : chosen) {
    d.speed_mbps = read_speed(d.name);
    d.pci_path = read_pci_path(d.name);
    d.guid = read_guid(d.name);
  }
  return chosen;
}

Result<const std::vector<NetDevice>*> net_devices_list() {
  static std::once_flag once;
  static Result<std::vector<NetDevice>> devices = Status::internal("not discovered");
  std::call_once(once, [] {
    auto c = plugin_config();
    devices = c.ok() ? discover_net_devices(**c) : Result<std::vector<NetDevice>>(c.status());
  });
  if (!devices.ok()) return devices.status();
  return &devices.value();
}

}  // namespace sumcast::nccl
