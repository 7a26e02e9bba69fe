// The Prometheus text exposition format (version 0.0.4) of an appliance's metrics. The caller
// (sumcastd: dpdk/telemetry.h prometheus_snapshot) copies counters into a Snapshot of plain
// values; render_prometheus turns it into the text a scrape of GET /metrics returns.
//
// Metric families (every series of a family is written together, after its # HELP and # TYPE):
//   sumcast_build_info{version,dpdk}                          gauge 1
//   sumcast_<counter>_total{core}                             counter, per engine core (rx_packets, ...)
//   sumcast_drops_total{core,reason}                          counter, one series per drop reason
//   sumcast_jobs_active{core}                                 gauge
//   sumcast_slot_completion_seconds{core}                     histogram (_bucket{le}, _sum, _count)
//   sumcast_port_<counter>_total{device}                      counter, the port's own (ipackets, imissed, ...)
//   sumcast_port_xstat_total{device,name}                     counter, one series per extended stat
//   sumcast_job_info{job_id,job_name,dtype,op}                gauge 1
//   sumcast_job_world_size / _registered_ranks / _running{job_id,job_name}   gauges
//   sumcast_job_slots_completed_total{job_id,job_name}        counter
//   sumcast_job_seconds_since_progress{job_id,job_name}       gauge
//   sumcast_control_<counter>_total                           counter (control-plane server)
// There are no "total over cores" series: sum(...) without (core) gives them, and a series
// labelled core="all" would be counted twice by every such sum.
//
// Thread safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sumcast::telemetry {

// A cumulative-ready histogram: counts[i] observations fell in (upper_bounds[i-1], upper_bounds[i]]
// (the first from 0), and counts.back() (counts.size() == upper_bounds.size() + 1) those above the
// last bound (+Inf). Bounds strictly increase.
struct Histogram {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
};

struct NamedValue {
  std::string name;
  uint64_t value = 0;
};

struct CoreMetrics {
  uint32_t core = 0;                 // engine core index (label "core")
  std::vector<NamedValue> counters;  // monotonic: exposed as sumcast_<name>_total
  std::vector<NamedValue> gauges;    // exposed as sumcast_<name>
  std::vector<NamedValue> drops;     // reason (without "drop_") -> count: sumcast_drops_total{reason}
  Histogram completion_latency;      // seconds
};

struct JobMetrics {
  uint32_t job_id = 0;
  std::string name;
  std::string dtype;
  std::string op;
  uint32_t world_size = 0;
  uint32_t registered = 0;
  bool running = false;
  uint64_t slots_completed = 0;
  double seconds_since_progress = 0;
  bool multicast = false;          // results to multicast_group
  std::string multicast_group;     // dotted quad; "" unless multicast
  uint64_t group_frames = 0;       // frames sent to the group, over cores
  uint64_t unicast_answers = 0;    // stored results re-sent to one rank, over cores
  uint64_t ce_marked = 0;          // contributions that arrived marked CE, over cores
  uint64_t cnps_sent = 0;          // CNPs sent for them, over cores
  uint64_t loss_notices = 0;       // loss notices sent to its ranks, over cores
  uint64_t duplicate_notices = 0;  // duplicate notices sent to its ranks, over cores
  // ce_marked by rank
  std::vector<uint64_t> member_ce_marked;
};

struct Snapshot {
  std::string version;       // sumcastd's
  std::string dpdk_version;  // rte_version()
  std::vector<CoreMetrics> cores;
  std::string port_device;              // label "device" of the port series
  std::vector<NamedValue> port;         // the port's counters: sumcast_port_<name>_total
  std::vector<NamedValue> port_xstats;  // extended stats: sumcast_port_xstat_total{name}
  std::vector<JobMetrics> jobs;
  std::vector<NamedValue> control;  // control-plane counters (sumcast_control_<name>_total)
};

// The exposition text. Every core must list the same names in the same order (they are written
// family by family). Names must be valid metric-name suffixes ([a-z0-9_]).
std::string render_prometheus(const Snapshot& snapshot);

// A label value escaped for the text format (backslash, double quote and line feed).
std::string escape_label_value(const std::string& value);
// A sample value as the text format writes it (integers exactly; "+Inf", "NaN").
std::string format_value(double value);

}  // namespace sumcast::telemetry
