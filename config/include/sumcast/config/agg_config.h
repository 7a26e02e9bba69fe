// agg.conf: the appliance's configuration (libconfig syntax). Reference: docs/agg.conf.md;
// complete commented example: config/agg.conf. Every field states its default.
//
// load_agg_config parses and type-checks (unknown keys, wrong types, out-of-range values and text
// that is not the address, MAC or dtype it stands for are errors naming file, line and key), so the
// fields below hold typed values that nothing parses again; validate_agg_config does the
// cross-field checks. Both return the first error found. Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sumcast/mac.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::config {

enum class HugePages : uint8_t {
  kAuto = 0,  // use hugepages when mounted and reserved, else --no-huge (logged)
  kOn = 1,    // require hugepages; fail at start when absent
  kOff = 2,   // always --no-huge
};

struct EalConfig {
  std::string lcores = "0,1";               // eal.lcores: EAL -l/--lcores; first is the main lcore
  std::string file_prefix = "sumcast";      // eal.file_prefix: --file-prefix
  uint32_t memory_mb = 512;                 // eal.memory_mb: -m; 64..1048576
  HugePages huge_pages = HugePages::kAuto;  // eal.huge_pages: "auto" | "on" | "off"
  std::vector<std::string> vdevs;           // eal.vdevs: --vdev arguments, e.g. "net_af_packet0,iface=veth0"
  std::vector<std::string> allow;           // eal.allow: PCI addresses for -a
  std::vector<std::string> extra_args;      // eal.extra_args: appended verbatim
};

// One static route of port.routes: "prefix/len via gateway" (host order; host bits of the
// prefix zero).
struct RouteConfig {
  uint32_t prefix = 0;
  uint8_t len = 0;
  uint32_t via = 0;
  std::string text;  // as written
};

// "ip:port" (telemetry.prometheus_address).
struct Ipv4Endpoint {
  uint32_t address = 0;      // host byte order
  uint16_t port = 0;         // 1..65535
  std::string text() const;  // "a.b.c.d:port"
  bool operator==(const Ipv4Endpoint&) const = default;
};

// IPv4 addresses below are host byte order; sumcast/ipv4.h prints them.
struct PortConfig {
  std::string device;             // port.device (required): DPDK device name, e.g. "net_af_packet0" or "0000:3b:00.0"
  std::optional<MacAddress> mac;  // port.mac: "aa:bb:cc:dd:ee:ff"; unset ("") = the port's own MAC
  uint32_t ipv4 = 0;              // port.ipv4 (required): the appliance's data address, dotted quad
  uint8_t prefix_len = 0;         // port.prefix_len: the data subnet's length, 0..32; 0 = every address on-link
  // port.gateway: default gateway for off-link members (dotted quad, on-link); unset ("") = none
  std::optional<uint32_t> gateway;
  std::vector<RouteConfig> routes;  // port.routes: [ "prefix/len via gateway", ... ]
  uint32_t arp_refresh_ms = 30000;  // port.arp_refresh_ms: a next hop's MAC is re-confirmed after, 1000..3600000
  uint8_t dscp = 0;                 // port.dscp: DSCP of every IPv4 frame the appliance sends, 0..63
  uint32_t cnp_interval_us = 50;    // port.cnp_interval_us: a CNP per sender at most this often, 0..1000000; 0 = none
  bool ecn = false;                 // port.ecn: mark those frames ECT(0) (ECN-capable transport); false: not-ECT
  uint16_t mtu = 1500;              // port.mtu: 576..9216
  uint16_t rx_desc = 1024;          // port.rx_desc: 64..16384, power of two
  uint16_t tx_desc = 1024;          // port.tx_desc: 64..16384, power of two
};

struct DataplaneConfig {
  uint32_t worker_cores = 1;          // dataplane.worker_cores: lcores that run engines, 1..64 (one rx/tx queue each)
  uint32_t burst_size = 32;           // dataplane.burst_size: 1..512
  uint32_t tx_coalesce = 16;          // dataplane.tx_coalesce: 0..32, frames a partial tx burst waits for
  uint32_t slots_per_job = 128;       // dataplane.slots_per_job: 1..65535
  uint32_t max_jobs = 16;             // dataplane.max_jobs: 1..4096
  uint32_t max_ranks = 64;            // dataplane.max_ranks: 2..4096 per job
  uint32_t max_payload_bytes = 1024;  // dataplane.max_payload_bytes: 64..4096, multiple of 64
  // dataplane.dtypes accepted, each once, in the order listed.
  std::vector<wire::Dtype> dtypes = {wire::Dtype::kFp32, wire::Dtype::kFp16, wire::Dtype::kBf16, wire::Dtype::kInt32,
                                     wire::Dtype::kFp64};
  bool verify_icrc = true;    // dataplane.verify_icrc
  bool udp_checksum = false;  // dataplane.udp_checksum: fill the UDP checksum of every frame sent
  bool multicast = false;     // dataplane.multicast: jobs that ask get results by IPv4 multicast (else per member)
  // dataplane.multicast_group: the first group, 239.255.77.0; job i's is base + i, i < max_jobs
  uint32_t multicast_group = 0xEFFF4D00;
  bool loss_notices = true;      // dataplane.loss_notices: jobs that ask are told of their ranks' lost contributions
  uint32_t mbufs = 16383;        // dataplane.mbufs: mempool size, 1023..1048575
  bool idle_adaptive = false;    // dataplane.idle_poll: "busy" (false) or "adaptive"
  uint32_t idle_sleep_us = 100;  // dataplane.idle_sleep_us: longest idle sleep, 1..10000
  uint32_t idle_after_us = 500;  // dataplane.idle_after_us: empty polls this long before the first sleep, 0..1000000
};

struct ControlConfig {
  uint32_t listen_address = 0;     // control.listen_address: dotted quad; 0.0.0.0 = every address
  uint16_t port = 4790;            // control.port: TCP port, 1..65535
  std::string token_file;          // control.token_file (required): shared secret, first line, >= 16 bytes
  uint32_t max_connections = 256;  // control.max_connections: 1..65536
  uint32_t job_timeout_ms =
      10000;  // control.job_timeout_ms: a waiting round without progress this long fails the job, 100..3600000
  uint32_t register_timeout_ms = 60000;  // control.register_timeout_ms: all ranks must register within, 100..3600000
  uint32_t io_timeout_ms = 5000;         // control.io_timeout_ms: a half-sent message is dropped after, 10..600000
};

struct TelemetryConfig {
  bool dpdk_telemetry = true;                      // telemetry.dpdk_telemetry: register /sumcast/ commands
  std::optional<Ipv4Endpoint> prometheus_address;  // telemetry.prometheus_address: "ip:port"; unset ("") = off
  uint32_t stats_interval_ms = 0;                  // telemetry.stats_interval_ms: log a stats line every N ms; 0 = off
};

struct AggConfig {
  std::string path;  // the file it was read from
  // Key path ("port.mtu") -> line in `path` where the key was set; filled by parsing, read by
  // validate_agg_config for its messages. Keys absent here (defaults, set in code) report line 0.
  std::map<std::string, int> key_lines;
  EalConfig eal;
  PortConfig port;
  DataplaneConfig dataplane;
  ControlConfig control;
  TelemetryConfig telemetry;
};

// Parses `path`. Errors read "<path>:<line>: <key>: <what>" (line 0 when libconfig has none).
// A relative control.token_file is resolved against the directory of `path`.
Result<AggConfig> load_agg_config(const std::string& path);
// Same, from text (tests, fuzzers); `name` stands in for the path in messages.
Result<AggConfig> parse_agg_config(const std::string& text, const std::string& name);
// Cross-field checks (e.g. lcores covers worker_cores + 1, token file readable, unicast addresses,
// gateways on-link).
Status validate_agg_config(const AggConfig& config);

// The names of `dtypes` (wire::dtype_name), in their order: how agg.conf writes them.
std::vector<std::string> dtype_names(const std::vector<wire::Dtype>& dtypes);

}  // namespace sumcast::config
