// agg.conf cross-field checks (docs/agg.conf.md, "Validation"). Parsing: agg_config.cc.
#include <string>
#include <string_view>

#include "located_error.h"
#include "sumcast/config/agg_config.h"
#include "sumcast/config/vdev.h"
#include "sumcast/token_file.h"
#include "sumcast/wire/format.h"
#include "value_forms.h"

namespace sumcast::config {
namespace {

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool is_multicast(uint32_t address) { return (address >> 28) == 0xE; }  // 224.0.0.0/4

class Validator {
 public:
  explicit Validator(const AggConfig& config)
      : config_(config), file_(config.path.empty() ? std::string("agg.conf") : config.path) {}

  Status run() {
    SUMCAST_RETURN_IF_ERROR(check_lcores());
    SUMCAST_RETURN_IF_ERROR(check_device());
    SUMCAST_RETURN_IF_ERROR(check_ipv4());
    SUMCAST_RETURN_IF_ERROR(check_gateway());
    SUMCAST_RETURN_IF_ERROR(check_routes());
    SUMCAST_RETURN_IF_ERROR(check_mtu());
    SUMCAST_RETURN_IF_ERROR(check_af_packet_ring());
    SUMCAST_RETURN_IF_ERROR(check_mbufs());
    SUMCAST_RETURN_IF_ERROR(check_multicast_group());
    SUMCAST_RETURN_IF_ERROR(check_listen_address());
    SUMCAST_RETURN_IF_ERROR(check_token_file());
    SUMCAST_RETURN_IF_ERROR(check_prometheus_address());
    return {};
  }

 private:
  int line_of(const std::string& key) const {
    const auto it = config_.key_lines.find(key);
    return it == config_.key_lines.end() ? 0 : it->second;
  }

  Status error(const std::string& key, std::string_view what, StatusCode code = StatusCode::kInvalidArgument) const {
    return detail::located_error(code, file_, line_of(key), key, what);
  }

  // The value as written, marked when it is the default (so the reader looks for it in the docs).
  std::string shown(const std::string& key, std::string_view value) const {
    return in_quotes(value) + (config_.key_lines.count(key) == 0 ? " (the default)" : "");
  }

  Status check_lcores() const {
    const EalConfig& eal = config_.eal;
    const Result<int> count = detail::count_lcores(eal.lcores);
    if (!count.ok()) {
      return error("eal.lcores",
                   shown("eal.lcores", eal.lcores) + " is not an lcore list: " + count.status().message());
    }
    const uint64_t needed = uint64_t{config_.dataplane.worker_cores} + 1;
    if (static_cast<uint64_t>(*count) < needed) {
      return error("eal.lcores",
                   shown("eal.lcores", eal.lcores) + " gives " + std::to_string(*count) +
                       " lcore(s); dataplane.worker_cores = " + std::to_string(config_.dataplane.worker_cores) +
                       " needs " + std::to_string(needed) + " (main + workers)");
    }
    return {};
  }

  // The port must be something EAL will probe: a PCI device (listed in eal.allow when that is
  // used) or one of eal.vdevs (or a device that eal.extra_args names).
  Status check_device() const {
    const EalConfig& eal = config_.eal;
    const std::string& device = config_.port.device;
    for (const std::string& vdev : eal.vdevs) {
      if (vdev.substr(0, vdev.find(',')) == device) return {};
    }
    for (const std::string& arg : eal.extra_args) {
      if (arg.find(device) != std::string::npos) return {};
    }
    const std::optional<std::string> pci = detail::normalize_pci_address(device);
    if (!pci) {
      return error("port.device", in_quotes(device) + " is neither a PCI address nor the name of one of eal.vdevs");
    }
    if (eal.allow.empty()) return {};
    for (const std::string& allowed : eal.allow) {
      if (detail::normalize_pci_address(allowed.substr(0, allowed.find(','))) == pci) return {};
    }
    return error("port.device", device + " is not in eal.allow (EAL probes only the devices listed there)");
  }

  // Addresses are typed (the parser checked their text); messages print them as dotted quads, the
  // form they were written in.
  Status check_ipv4() const {
    const uint32_t first = config_.port.ipv4 >> 24;
    if (first == 0 || first == 127 || first >= 224) {
      return error("port.ipv4", detail::format_ipv4(config_.port.ipv4) + " is not a unicast host address");
    }
    return {};
  }

  // A gateway must be a unicast host of the port's own subnet (it is resolved by ARP there).
  // `what` names it in messages; the port's address has been checked already.
  Status check_next_hop(const std::string& key, const std::string& what, uint32_t gw) const {
    const PortConfig& port = config_.port;
    const uint32_t local = port.ipv4;
    const uint32_t first = gw >> 24;
    if (first == 0 || first == 127 || first >= 224) return error(key, what + " is not a unicast host address");
    if (gw == local) return error(key, what + " is port.ipv4 itself");
    if (port.prefix_len == 0) {
      return error(key, what + " needs the port's subnet: set port.prefix_len (the length of " +
                            detail::format_ipv4(local) + "'s subnet) so that the gateway is on-link");
    }
    const uint32_t mask = ~uint32_t{0} << (32 - port.prefix_len);
    if ((gw & mask) != (local & mask)) {
      return error(key, what + " is not in the port's subnet " + detail::format_ipv4(local & mask) + "/" +
                            std::to_string(port.prefix_len) + " (a gateway must be on-link)");
    }
    const uint32_t host = gw & ~mask;
    if (port.prefix_len <= 30 && (host == 0 || host == ~mask)) {
      return error(key, what + " is the subnet's network or broadcast address");
    }
    return {};
  }

  Status check_gateway() const {
    const std::optional<uint32_t>& gw = config_.port.gateway;
    if (!gw) return {};
    return check_next_hop("port.gateway", detail::format_ipv4(*gw), *gw);
  }

  Status check_routes() const {
    const std::vector<RouteConfig>& routes = config_.port.routes;
    for (size_t i = 0; i < routes.size(); ++i) {
      const std::string key = "port.routes[" + std::to_string(i) + "]";
      SUMCAST_RETURN_IF_ERROR(check_next_hop(
          key, in_quotes(routes[i].text) + ": gateway " + detail::format_ipv4(routes[i].via), routes[i].via));
      for (size_t j = 0; j < i; ++j) {
        if (routes[j].prefix == routes[i].prefix && routes[j].len == routes[i].len) {
          return error(key,
                       in_quotes(routes[i].text) + " routes the same prefix as port.routes[" + std::to_string(j) + "]");
        }
      }
    }
    return {};
  }

  Status check_mtu() const {
    const uint64_t needed = uint64_t{config_.dataplane.max_payload_bytes} + wire::kFrameOverhead - wire::kEthHeaderLen;
    if (config_.port.mtu < needed) {
      return error("port.mtu", std::to_string(config_.port.mtu) + " is too small for dataplane.max_payload_bytes = " +
                                   std::to_string(config_.dataplane.max_payload_bytes) + " (payload + " +
                                   std::to_string(wire::kFrameOverhead - wire::kEthHeaderLen) +
                                   " bytes of IPv4/UDP/RoCE headers and ICRC need an MTU of at least " +
                                   std::to_string(needed) + ")");
    }
    return {};
  }

  // A net_af_packet port: its ring geometry is one the kernel and the PMD take, and a ring frame
  // holds a whole frame of port.mtu (the PMD drops, and the kernel truncates, what does not fit).
  Status check_af_packet_ring() const {
    const VdevArgs vdev = find_vdev(config_.eal.vdevs, config_.port.device);
    if (!is_af_packet(vdev)) return {};
    auto ring = af_packet_ring(vdev);
    if (!ring.ok()) return error("eal.vdevs", ring.status().message());
    const uint32_t need = af_packet_frame_size_for(config_.port.mtu);
    if (ring->frame_size < need) {
      return error("eal.vdevs", vdev.name + ": framesz=" + std::to_string(ring->frame_size) +
                                    " holds no frame of port.mtu = " + std::to_string(config_.port.mtu) +
                                    ": set framesz >= " + std::to_string(need) +
                                    " (a ring frame holds one whole frame, 66 bytes in) and blocksz a multiple of it");
    }
    return {};
  }

  // Each worker's rx ring is filled from the pool at start, and its tx ring may hold as many
  // mbufs in flight: a smaller pool makes the port fail to start or stall.
  Status check_mbufs() const {
    const DataplaneConfig& dp = config_.dataplane;
    const uint64_t needed = uint64_t{dp.worker_cores} * (uint64_t{config_.port.rx_desc} + config_.port.tx_desc);
    if (dp.mbufs < needed) {
      return error("dataplane.mbufs", std::to_string(dp.mbufs) + " is fewer than the " + std::to_string(needed) +
                                          " descriptors of the workers' rings (dataplane.worker_cores x "
                                          "(port.rx_desc + port.tx_desc))");
    }
    return {};
  }

  Status check_multicast_group() const {
    const DataplaneConfig& dp = config_.dataplane;
    if (!dp.multicast) return {};
    const std::string group = detail::format_ipv4(dp.multicast_group);
    if (!is_multicast(dp.multicast_group)) {
      return error("dataplane.multicast_group", group + " is not in 224.0.0.0/4 (dataplane.multicast is on)");
    }
    const uint64_t last = uint64_t{dp.multicast_group} + dp.max_jobs - 1;
    if (last > 0xEFFFFFFFu) {
      return error("dataplane.multicast_group", group + " + dataplane.max_jobs " + std::to_string(dp.max_jobs) +
                                                    " groups runs past 239.255.255.255");
    }
    return {};
  }

  Status check_listen_address() const {
    const uint32_t address = config_.control.listen_address;
    if ((address >> 24) >= 224) {
      return error("control.listen_address", detail::format_ipv4(address) + " is not a unicast address");
    }
    return {};
  }

  Status check_token_file() const {
    const std::string& path = config_.control.token_file;
    if (path.empty()) return error("control.token_file", "required key is missing");
    const Result<std::string> token = read_token_file(path);
    if (!token.ok()) return error("control.token_file", token.status().message(), token.status().code());
    return {};
  }

  Status check_prometheus_address() const {
    const std::optional<Ipv4Endpoint>& endpoint = config_.telemetry.prometheus_address;
    if (!endpoint) return {};
    const uint32_t control = config_.control.listen_address;
    const bool same_address = control == 0 || endpoint->address == 0 || control == endpoint->address;
    if (same_address && endpoint->port == config_.control.port) {
      return error("telemetry.prometheus_address",
                   "port " + std::to_string(endpoint->port) + " is also control.port on the same address");
    }
    return {};
  }

  const AggConfig& config_;
  std::string file_;
};

}  // namespace

Status validate_agg_config(const AggConfig& config) { return Validator(config).run(); }

}  // namespace sumcast::config
