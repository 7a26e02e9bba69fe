#include "sumcast/config/settings.h"

#include "sumcast/ipv4.h"

namespace sumcast::config {
namespace {

// eal.huge_pages as the file spells it.
const char* huge_pages_name(HugePages h) {
  switch (h) {
    case HugePages::kOn:
      return "on";
    case HugePages::kOff:
      return "off";
    case HugePages::kAuto:
      break;
  }
  return "auto";
}

}  // namespace

std::vector<Setting> settings(const AggConfig& c) {
  const auto n = [](uint64_t v) { return SettingValue(v); };
  const auto s = [](std::string v) { return SettingValue(std::move(v)); };
  const auto b = [](bool v) { return SettingValue(v); };
  const auto list = [](std::vector<std::string> v) { return SettingValue(std::move(v)); };
  const EalConfig& e = c.eal;
  const PortConfig& p = c.port;
  const DataplaneConfig& d = c.dataplane;
  const ControlConfig& k = c.control;
  const TelemetryConfig& t = c.telemetry;
  std::vector<std::string> routes;
  for (const RouteConfig& r : p.routes) routes.push_back(r.text);
  return {
      {"eal", "lcores", s(e.lcores)},
      {"eal", "file_prefix", s(e.file_prefix)},
      {"eal", "memory_mb", n(e.memory_mb)},
      {"eal", "huge_pages", s(huge_pages_name(e.huge_pages))},
      {"eal", "vdevs", list(e.vdevs)},
      {"eal", "allow", list(e.allow)},
      {"eal", "extra_args", list(e.extra_args)},
      {"port", "device", s(p.device)},
      {"port", "mac", s(p.mac ? format_mac(*p.mac) : std::string())},
      {"port", "ipv4", s(format_ipv4(p.ipv4))},
      {"port", "prefix_len", n(p.prefix_len)},
      {"port", "gateway", s(p.gateway ? format_ipv4(*p.gateway) : std::string())},
      {"port", "routes", list(std::move(routes))},
      {"port", "arp_refresh_ms", n(p.arp_refresh_ms)},
      {"port", "dscp", n(p.dscp)},
      {"port", "ecn", b(p.ecn)},
      {"port", "cnp_interval_us", n(p.cnp_interval_us)},
      {"port", "mtu", n(p.mtu)},
      {"port", "rx_desc", n(p.rx_desc)},
      {"port", "tx_desc", n(p.tx_desc)},
      {"dataplane", "worker_cores", n(d.worker_cores)},
      {"dataplane", "burst_size", n(d.burst_size)},
      {"dataplane", "tx_coalesce", n(d.tx_coalesce)},
      {"dataplane", "slots_per_job", n(d.slots_per_job)},
      {"dataplane", "max_jobs", n(d.max_jobs)},
      {"dataplane", "max_ranks", n(d.max_ranks)},
      {"dataplane", "max_payload_bytes", n(d.max_payload_bytes)},
      {"dataplane", "dtypes", list(dtype_names(d.dtypes))},
      {"dataplane", "verify_icrc", b(d.verify_icrc)},
      {"dataplane", "udp_checksum", b(d.udp_checksum)},
      {"dataplane", "multicast", b(d.multicast)},
      {"dataplane", "multicast_group", s(format_ipv4(d.multicast_group))},
      {"dataplane", "loss_notices", b(d.loss_notices)},
      {"dataplane", "mbufs", n(d.mbufs)},
      {"dataplane", "idle_poll", s(d.idle_adaptive ? "adaptive" : "busy")},
      {"dataplane", "idle_sleep_us", n(d.idle_sleep_us)},
      {"dataplane", "idle_after_us", n(d.idle_after_us)},
      {"control", "listen_address", s(format_ipv4(k.listen_address))},
      {"control", "port", n(k.port)},
      {"control", "token_file", s(k.token_file)},
      {"control", "max_connections", n(k.max_connections)},
      {"control", "job_timeout_ms", n(k.job_timeout_ms)},
      {"control", "register_timeout_ms", n(k.register_timeout_ms)},
      {"control", "io_timeout_ms", n(k.io_timeout_ms)},
      {"telemetry", "dpdk_telemetry", b(t.dpdk_telemetry)},
      {"telemetry", "prometheus_address", s(t.prometheus_address ? t.prometheus_address->text() : std::string())},
      {"telemetry", "stats_interval_ms", n(t.stats_interval_ms)},
  };
}

}  // namespace sumcast::config
