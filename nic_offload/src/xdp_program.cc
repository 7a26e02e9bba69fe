#include "sumcast/nic_offload/xdp_program.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sumcast::nic_offload {
namespace {

constexpr char kCfgMap[] = "sumcast_cfg";
constexpr char kStatsMap[] = "sumcast_stats";

std::string err_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace

Result<std::unique_ptr<XdpProgram>> XdpProgram::open(const std::string& iface, uint32_t appliance_ipv4) {
  const std::string what = "XDP program on " + iface;
  const unsigned ifindex = if_nametoindex(iface.c_str());
  if (ifindex == 0) return Status::not_found(what + ": no interface " + iface + " here: " + err_text(errno));
  std::unique_ptr<XdpProgram> p(new XdpProgram());
  p->iface_ = iface;
  int rc = bpf_xdp_query_id(static_cast<int>(ifindex), 0, &p->prog_id_);
  if (rc != 0) return Status::io_error(what + ": bpf_xdp_query_id: " + err_text(rc));
  if (p->prog_id_ == 0) return Status::not_found(what + ": no XDP program attached (xdp_prog= not applied?)");
  const int prog_fd = bpf_prog_get_fd_by_id(p->prog_id_);
  if (prog_fd < 0) return Status::io_error(what + ": bpf_prog_get_fd_by_id: " + err_text(errno));
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  rc = bpf_obj_get_info_by_fd(prog_fd, &info, &len);
  if (rc != 0) {
    ::close(prog_fd);
    return Status::io_error(what + ": bpf_obj_get_info_by_fd: " + err_text(errno));
  }
  std::vector<uint32_t> map_ids(info.nr_map_ids);
  bpf_prog_info again{};
  again.nr_map_ids = info.nr_map_ids;
  again.map_ids = reinterpret_cast<uint64_t>(map_ids.data());
  len = sizeof(again);
  rc = bpf_obj_get_info_by_fd(prog_fd, &again, &len);
  ::close(prog_fd);
  if (rc != 0) return Status::io_error(what + ": bpf_obj_get_info_by_fd (maps): " + err_text(errno));
  for (uint32_t id : map_ids) {
    const int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_map_info mi{};
    uint32_t mlen = sizeof(mi);
    if (bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0) {
      if (std::strcmp(mi.name, kCfgMap) == 0 && p->cfg_fd_ < 0) {
        p->cfg_fd_ = fd;
        continue;
      }
      if (std::strcmp(mi.name, kStatsMap) == 0 && p->stats_fd_ < 0) {
        p->stats_fd_ = fd;
        continue;
      }
    }
    ::close(fd);
  }
  if (p->cfg_fd_ < 0) {
    return Status::not_found(what + ": program " + std::to_string(p->prog_id_) + " (" + info.name + ") has no map \"" +
                             kCfgMap + "\": is xdp_prog= the Sumcast program (sumcast_xdp.o)?");
  }
  const uint32_t key = 0;
  const uint32_t value = htonl(appliance_ipv4);
  if (bpf_map_update_elem(p->cfg_fd_, &key, &value, BPF_ANY) != 0) {
    return Status::io_error(what + ": writing the appliance address into " + kCfgMap + ": " + err_text(errno));
  }
  return p;
}

XdpProgram::~XdpProgram() {
  if (cfg_fd_ >= 0) ::close(cfg_fd_);
  if (stats_fd_ >= 0) ::close(stats_fd_);
}

XdpCounters XdpProgram::counters() const {
  XdpCounters c;
  if (stats_fd_ < 0) return c;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return c;
  std::vector<uint64_t> values(static_cast<size_t>(cpus));
  uint64_t* out[3] = {&c.redirected, &c.passed, &c.redirect_failed};
  for (uint32_t key = 0; key < 3; ++key) {
    if (bpf_map_lookup_elem(stats_fd_, &key, values.data()) != 0) continue;
    for (uint64_t v : values) *out[key] += v;
  }
  return c;
}

}  // namespace sumcast::nic_offload
