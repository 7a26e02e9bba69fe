// sumcastd's DPDK telemetry commands (read by dpdk-telemetry.py and sumcastctl over
// /var/run/dpdk/<file_prefix>/dpdk_telemetry.v2):
//   /sumcast/stats          {"cores": N, "total": {counters}, "port": {port counters}, "core0":
//                           {...}, ...} (per-core dicts inline only while N <= kInlineCores)
//   /sumcast/stats,total    the totals alone
//   /sumcast/stats,<i>      core i: {"core": i, "lcore": id, counters}
//   /sumcast/stats,port     the port's own counters (Port::stats: rte_eth_stats,
//                           kernel_ring_drops) and its extended stats (xstat_<name>)
//   /sumcast/jobs           {"count": n, "job<id>": {name, world_size, registered, dtype, op,
//                           running, slots_completed, ms_since_progress}, "server": {counters}}
//   /sumcast/config         the agg.conf in effect, by section (never the token itself)
//   /sumcast/version        {"sumcastd": ..., "dpdk": ...}
//   /sumcast/port           the data port's offload path (nic_offload): path, software_dispatch,
//                           queues, rss, flow_rules, tx_ipv4_cksum_offload, reason (long strings in
//                           127-byte pieces: reason, reason_2, ...), cap_<name> per capability row,
//                           and on an XDP port xdp_prog_id, xdp_redirected, xdp_passed,
//                           xdp_redirect_failed
// Counters are read relaxed while the lcores run. Every counter dict has the same keys in the
// same order (see read_counters), zero or not.
// The same counters, the jobs and the slot-completion latency histograms also go to Prometheus:
// prometheus_snapshot() below, rendered by sumcast::telemetry (served by the Appliance on
// telemetry.prometheus_address, GET /metrics).
//
// Thread safety: callbacks run on DPDK's telemetry thread; set_telemetry_source() may be called
// from any thread and returns only when no callback still uses the previous source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sumcast/config/agg_config.h"
#include "sumcast/control/server.h"
#include "sumcast/dpdk/lcore.h"
#include "sumcast/dpdk/port.h"
#include "sumcast/nic_offload/xdp_program.h"
#include "sumcast/status.h"
#include "sumcast/telemetry/prometheus.h"

namespace sumcast::dpdk {

inline constexpr uint32_t kInlineCores = 4;

struct TelemetrySource {
  std::vector<const LcoreContext*> cores;  // by core index
  const control::Server* server = nullptr;
  const config::AggConfig* config = nullptr;
  const PortInfo* port = nullptr;
  const nic_offload::XdpProgram* xdp = nullptr;  // the port's XDP program, if any
  const Port* device = nullptr;                  // the port's own counters (Port::stats)
};

// One counter of one core (or a sum over cores).
struct CounterRow {
  const char* name;  // engine counter, "drop_<reason>", or port-layer counter ("tx_refused", ...)
  uint64_t value;
};

// A core's counters: the engine's (SUMCAST_ENGINE_COUNTERS), then "drop_<reason>" for every drop
// reason, then the port layer's and the transmit sink's (SUMCAST_PORT_COUNTERS, SUMCAST_TX_COUNTERS;
// sumcast/core_counters.h). tx_packets, tx_bytes and results_sent count what the tx
// queue accepted (the engine counts what it submitted; the sink what is still in its backlog or was freed). Cold path
// (allocates).
std::vector<CounterRow> read_counters(const LcoreContext& core);
// Element-wise sum over cores (same order).
std::vector<CounterRow> sum_counters(const std::vector<const LcoreContext*>& cores);

// Registers the /sumcast/ commands (once per process; later calls only change the source).
Status register_telemetry(const TelemetrySource* source);
// Points the commands at `source` (nullptr: they answer with an error).
void set_telemetry_source(const TelemetrySource* source);

// The metrics of `source` for the Prometheus exposition: per-core counters (jobs_active as a
// gauge, drop_<reason> as drops), the port's own counters and extended stats, the latency histogram in seconds (engine
// buckets below 1 us merged into the first bound), the jobs and the control-plane counters. Cold path (allocates).
telemetry::Snapshot prometheus_snapshot(const TelemetrySource& source);
// The engine's log2 tick buckets as a histogram in seconds at `clock_hz` ticks per second.
telemetry::Histogram latency_histogram(const engine::CoreCounters& counters, uint64_t clock_hz);

// Replaces characters DPDK 22.11 would not escape in JSON strings ('"', '\\', control bytes).
std::string telemetry_safe(const std::string& s);

}  // namespace sumcast::dpdk
