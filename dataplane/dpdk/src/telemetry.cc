#include "sumcast/dpdk/telemetry.h"

#include <rte_telemetry.h>
#include <rte_version.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <variant>

#include "sumcast/config/settings.h"
#include "sumcast/counter.h"
#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "sumcast/wire/format.h"

#ifndef SUMCAST_VERSION
#define SUMCAST_VERSION "0.0.0"
#endif

namespace sumcast::dpdk {
namespace {

// telemetry_safe() without the length limit (the caller splits).
std::string telemetry_safe_long(const std::string& s) {
  std::string out = s;
  for (char& ch : out) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\' || u < 0x20 || u == 0x7F) ch = '_';
  }
  return out;
}

// The transmit sink's value of each SUMCAST_TX_COUNTERS entry (a new entry without one here does
// not compile).
uint64_t tx_value_tx_deferred(const DpdkTxSink& tx) { return tx.deferred(); }
uint64_t tx_value_tx_refused(const DpdkTxSink& tx) { return tx.refused(); }
uint64_t tx_value_tx_unsubmitted(const DpdkTxSink& tx) { return tx.unsubmitted(); }
uint64_t tx_value_tx_unknown_buffer(const DpdkTxSink& tx) { return tx.unknown_buffers(); }

constexpr const char* kDropNames[] = {
#define SUMCAST_X(name, str) "drop_" str,
    SUMCAST_DROP_REASONS(SUMCAST_X)
#undef SUMCAST_X
};
static_assert(sizeof(kDropNames) / sizeof(kDropNames[0]) == engine::kDropReasonCount);

// DPDK's telemetry callbacks carry no user pointer (22.11): one process-wide source, guarded.
std::shared_mutex g_mu;
const TelemetrySource* g_source = nullptr;
bool g_registered = false;

void add_rows(rte_tel_data* d, const std::vector<CounterRow>& rows) {
  for (const CounterRow& r : rows) rte_tel_data_add_dict_u64(d, r.name, r.value);
}

rte_tel_data* rows_container(const std::vector<CounterRow>& rows) {
  rte_tel_data* c = rte_tel_data_alloc();
  if (c == nullptr) return nullptr;
  rte_tel_data_start_dict(c);
  add_rows(c, rows);
  return c;
}

rte_tel_data* port_container(const std::vector<PortStat>& rows) {
  rte_tel_data* c = rte_tel_data_alloc();
  if (c == nullptr) return nullptr;
  rte_tel_data_start_dict(c);
  for (const PortStat& r : rows) rte_tel_data_add_dict_u64(c, r.name.c_str(), r.value);
  return c;
}

void add_container(rte_tel_data* d, const std::string& name, rte_tel_data* c) {
  if (c != nullptr && rte_tel_data_add_dict_container(d, name.c_str(), c, 0) != 0) rte_tel_data_free(c);
}

int handle_stats(const char* /*cmd*/, const char* params, rte_tel_data* d) {
  std::shared_lock<std::shared_mutex> lock(g_mu);
  if (g_source == nullptr) return -1;
  const auto& cores = g_source->cores;
  const std::string p = params != nullptr ? params : "";
  rte_tel_data_start_dict(d);
  if (p.empty()) {
    rte_tel_data_add_dict_u64(d, "cores", cores.size());
    add_container(d, "total", rows_container(sum_counters(cores)));
    if (g_source->device != nullptr) add_container(d, "port", port_container(g_source->device->stats(false)));
    if (cores.size() <= kInlineCores) {
      for (size_t i = 0; i < cores.size(); ++i) {
        add_container(d, "core" + std::to_string(i), rows_container(read_counters(*cores[i])));
      }
    }
    return 0;
  }
  if (p == "total") {
    add_rows(d, sum_counters(cores));
    return 0;
  }
  if (p == "port") {
    if (g_source->device == nullptr) return -1;
    for (const PortStat& r : g_source->device->stats(true)) {
      if (rte_tel_data_add_dict_u64(d, r.name.c_str(), r.value) != 0) break;  // DPDK's dict is full
    }
    return 0;
  }
  char* end = nullptr;
  const unsigned long i = std::strtoul(p.c_str(), &end, 10);
  if (end == p.c_str() || *end != '\0' || i >= cores.size()) return -1;
  rte_tel_data_add_dict_u64(d, "core", i);
  rte_tel_data_add_dict_u64(d, "lcore", cores[i]->lcore_id);
  add_rows(d, read_counters(*cores[i]));
  return 0;
}

// How a job's results left the appliance, summed over cores (zero for a job not running).
struct JobTraffic {
  std::string group;  // dotted quad, "" unless multicast
  uint64_t group_frames = 0;
  uint64_t unicast_answers = 0;
  uint64_t ce_marked = 0;  // contributions marked CE, and the CNPs sent for them
  uint64_t cnps_sent = 0;
  uint64_t loss_notices = 0;               // loss notices sent to its ranks
  uint64_t duplicate_notices = 0;          // duplicate notices sent to its ranks
  std::vector<uint64_t> member_ce_marked;  // by rank
};
JobTraffic job_traffic(const TelemetrySource& source, const control::JobInfo& j) {
  JobTraffic t;
  if (j.multicast) t.group = format_ipv4(j.multicast_ip);
  if (!j.running) return t;
  for (const LcoreContext* core : source.cores) {
    for (const engine::JobProgress& p : core->engine->progress()) {
      if (p.job_id != j.job_id) continue;
      t.group_frames += p.group_frames;
      t.unicast_answers += p.unicast_answers;
      t.ce_marked += p.ce_marked;
      t.cnps_sent += p.cnps_sent;
      t.loss_notices += p.loss_notices;
      t.duplicate_notices += p.duplicate_notices;
    }
    const std::vector<uint64_t> by_rank = core->engine->member_ce_marked(j.job_id);
    if (t.member_ce_marked.size() < by_rank.size()) t.member_ce_marked.resize(by_rank.size());
    for (size_t r = 0; r < by_rank.size(); ++r) t.member_ce_marked[r] += by_rank[r];
  }
  return t;
}

int handle_jobs(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  std::shared_lock<std::shared_mutex> lock(g_mu);
  if (g_source == nullptr || g_source->server == nullptr) return -1;
  const std::vector<control::JobInfo> jobs = g_source->server->jobs();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "count", jobs.size());
  for (const control::JobInfo& j : jobs) {
    rte_tel_data* c = rte_tel_data_alloc();
    if (c == nullptr) break;
    rte_tel_data_start_dict(c);
    rte_tel_data_add_dict_u64(c, "job_id", j.job_id);
    rte_tel_data_add_dict_string(c, "name", telemetry_safe(j.name).c_str());
    rte_tel_data_add_dict_u64(c, "world_size", j.world_size);
    rte_tel_data_add_dict_u64(c, "registered", j.registered);
    rte_tel_data_add_dict_string(c, "dtype", wire::dtype_name(j.dtype));
    rte_tel_data_add_dict_string(c, "op", wire::reduce_op_name(j.op));
    rte_tel_data_add_dict_u64(c, "running", j.running ? 1 : 0);
    rte_tel_data_add_dict_u64(c, "slots_completed", j.slots_completed);
    rte_tel_data_add_dict_u64(c, "ms_since_progress", j.ms_since_progress);
    // Results by multicast: the group, and the job's frames to it and unicast answers, over cores.
    const JobTraffic t = job_traffic(*g_source, j);
    rte_tel_data_add_dict_u64(c, "multicast", j.multicast ? 1 : 0);
    rte_tel_data_add_dict_string(c, "multicast_group", t.group.c_str());
    rte_tel_data_add_dict_u64(c, "group_frames", t.group_frames);
    rte_tel_data_add_dict_u64(c, "unicast_answers", t.unicast_answers);
    // ECN: the job's CE-marked contributions (in total and by rank) and the CNPs sent for them.
    rte_tel_data_add_dict_u64(c, "ce_marked", t.ce_marked);
    rte_tel_data_add_dict_u64(c, "cnps_sent", t.cnps_sent);
    rte_tel_data_add_dict_u64(c, "loss_notices", t.loss_notices);
    rte_tel_data_add_dict_u64(c, "duplicate_notices", t.duplicate_notices);
    add_container(d, "job" + std::to_string(j.job_id), c);
  }
  const control::ServerCounters s = g_source->server->counters();
  rte_tel_data* c = rte_tel_data_alloc();
  if (c != nullptr) {
    rte_tel_data_start_dict(c);
    rte_tel_data_add_dict_u64(c, "connections_accepted", s.connections_accepted);
    rte_tel_data_add_dict_u64(c, "connections_refused", s.connections_refused);
    rte_tel_data_add_dict_u64(c, "auth_failures", s.auth_failures);
    rte_tel_data_add_dict_u64(c, "bad_messages", s.bad_messages);
    rte_tel_data_add_dict_u64(c, "io_timeouts", s.io_timeouts);
    rte_tel_data_add_dict_u64(c, "registrations", s.registrations);
    rte_tel_data_add_dict_u64(c, "registrations_refused", s.registrations_refused);
    rte_tel_data_add_dict_u64(c, "jobs_started", s.jobs_started);
    rte_tel_data_add_dict_u64(c, "jobs_completed", s.jobs_completed);
    rte_tel_data_add_dict_u64(c, "jobs_failed", s.jobs_failed);
    add_container(d, "server", c);
  }
  return 0;
}

// One job's per-member counters: /sumcast/members,<job_id> -> {job_id, world_size,
// ce_marked: [by rank]} (a separate command: DPDK's telemetry nests containers one level deep).
int handle_members(const char* /*cmd*/, const char* params, rte_tel_data* d) {
  std::shared_lock<std::shared_mutex> lock(g_mu);
  if (g_source == nullptr || g_source->server == nullptr || params == nullptr) return -1;
  char* end = nullptr;
  const unsigned long id = std::strtoul(params, &end, 10);
  if (end == params || *end != '\0') return -1;
  for (const control::JobInfo& j : g_source->server->jobs()) {
    if (j.job_id != id) continue;
    const JobTraffic t = job_traffic(*g_source, j);
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "job_id", j.job_id);
    rte_tel_data_add_dict_u64(d, "world_size", j.world_size);
    rte_tel_data* a = rte_tel_data_alloc();
    if (a == nullptr) return 0;
    rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
    for (uint64_t v : t.member_ce_marked) {
      if (rte_tel_data_add_array_u64(a, v) != 0) break;  // DPDK's array is full (512 ranks)
    }
    add_container(d, "ce_marked", a);
    return 0;
  }
  return -1;
}

rte_tel_data* string_array(const std::vector<std::string>& values) {
  rte_tel_data* a = rte_tel_data_alloc();
  if (a == nullptr) return nullptr;
  rte_tel_data_start_array(a, RTE_TEL_STRING_VAL);
  for (const std::string& v : values) rte_tel_data_add_array_string(a, telemetry_safe(v).c_str());
  return a;
}

// One agg.conf setting into a telemetry dict (booleans as 0 and 1: DPDK 22.11's telemetry has none).
void add_setting(rte_tel_data* d, const config::Setting& setting) {
  const char* key = setting.key;
  const config::SettingValue& v = setting.value;
  if (const auto* n = std::get_if<uint64_t>(&v)) {
    rte_tel_data_add_dict_u64(d, key, *n);
  } else if (const auto* b = std::get_if<bool>(&v)) {
    rte_tel_data_add_dict_u64(d, key, *b ? 1 : 0);
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    rte_tel_data_add_dict_string(d, key, telemetry_safe(*s).c_str());
  } else {
    add_container(d, key, string_array(std::get<std::vector<std::string>>(v)));
  }
}

// The agg.conf sumcastd runs with (config::settings), one dict per section; the port and control
// sections end with what sumcastd found at start (the port's driver and offloads, the control port
// bound).
int handle_config(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  std::shared_lock<std::shared_mutex> lock(g_mu);
  if (g_source == nullptr || g_source->config == nullptr) return -1;
  const config::AggConfig& c = *g_source->config;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "path", telemetry_safe(c.path).c_str());
  const std::vector<config::Setting> all = config::settings(c);
  for (size_t begin = 0, end = 0; begin < all.size(); begin = end) {
    const char* name = all[begin].section;
    while (end < all.size() && std::strcmp(all[end].section, name) == 0) ++end;
    rte_tel_data* section = rte_tel_data_alloc();
    if (section == nullptr) continue;
    rte_tel_data_start_dict(section);
    for (size_t i = begin; i < end; ++i) add_setting(section, all[i]);
    if (std::strcmp(name, "port") == 0 && g_source->port != nullptr) {
      const PortInfo& p = *g_source->port;
      rte_tel_data_add_dict_string(section, "driver", telemetry_safe(p.driver).c_str());
      rte_tel_data_add_dict_string(section, "data_mac", format_mac(p.mac).c_str());
      rte_tel_data_add_dict_u64(section, "queues", p.queues);
      rte_tel_data_add_dict_u64(section, "software_dispatch", p.software_dispatch ? 1 : 0);
      rte_tel_data_add_dict_u64(section, "rss", p.rss ? 1 : 0);
      rte_tel_data_add_dict_u64(section, "promiscuous", p.promiscuous ? 1 : 0);
    }
    if (std::strcmp(name, "control") == 0 && g_source->server != nullptr) {
      rte_tel_data_add_dict_u64(section, "bound_port", g_source->server->bound_port());
    }
    add_container(d, name, section);
  }
  return 0;
}

// Long strings (the plan's reason, refusals) in pieces under DPDK's string limit: key, key_2, ...
void add_long_string(rte_tel_data* d, const std::string& key, const std::string& value) {
  const std::string safe = telemetry_safe_long(value);
  constexpr size_t kPiece = RTE_TEL_MAX_STRING_LEN - 1;
  size_t at = 0;
  int n = 1;
  do {
    const std::string k = n == 1 ? key : key + "_" + std::to_string(n);
    rte_tel_data_add_dict_string(d, k.c_str(), safe.substr(at, kPiece).c_str());
    at += kPiece;
    ++n;
  } while (at < safe.size());
}

int handle_port(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  std::shared_lock<std::shared_mutex> lock(g_mu);
  if (g_source == nullptr || g_source->port == nullptr) return -1;
  const PortInfo& p = *g_source->port;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "device", telemetry_safe(p.device).c_str());
  rte_tel_data_add_dict_string(d, "path", nic_offload::steering_mode_name(p.plan.mode));
  rte_tel_data_add_dict_u64(d, "software_dispatch", p.software_dispatch ? 1 : 0);
  rte_tel_data_add_dict_u64(d, "queues", p.queues);
  rte_tel_data_add_dict_u64(d, "rss", p.rss ? 1 : 0);
  rte_tel_data_add_dict_u64(d, "flow_rules", p.flow_rules);
  rte_tel_data_add_dict_u64(d, "tx_ipv4_cksum_offload", p.plan.tx_ipv4_cksum ? 1 : 0);
  add_long_string(d, "reason", p.plan.reason);
  for (const auto& [key, value] : nic_offload::describe(p.caps)) add_long_string(d, "cap_" + key, value);
  if (const nic_offload::XdpProgram* x = g_source->xdp; x != nullptr) {
    const nic_offload::XdpCounters c = x->counters();
    rte_tel_data_add_dict_u64(d, "xdp_prog_id", x->prog_id());
    rte_tel_data_add_dict_u64(d, "xdp_redirected", c.redirected);
    rte_tel_data_add_dict_u64(d, "xdp_passed", c.passed);
    rte_tel_data_add_dict_u64(d, "xdp_redirect_failed", c.redirect_failed);
  }
  return 0;
}

int handle_version(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "sumcastd", SUMCAST_VERSION);
  rte_tel_data_add_dict_string(d, "dpdk", rte_version());
  return 0;
}

}  // namespace

std::string telemetry_safe(const std::string& s) {
  std::string out = s;
  for (char& ch : out) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\' || u < 0x20 || u == 0x7F) ch = '_';
  }
  if (out.size() >= RTE_TEL_MAX_STRING_LEN) out.resize(RTE_TEL_MAX_STRING_LEN - 1);
  return out;
}

std::vector<CounterRow> read_counters(const LcoreContext& core) {
  std::vector<CounterRow> rows;
  rows.reserve(kCoreCounterCount + engine::kDropReasonCount);
  const engine::CoreCounters& e = core.engine->counters();
#define SUMCAST_X(name, type, shown, help) rows.push_back({#name, read_counter(e.name)});
  SUMCAST_ENGINE_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
  for (size_t r = 0; r < engine::kDropReasonCount; ++r) {
    if (r == static_cast<size_t>(wire::ParseError::kOk)) continue;  // not a drop
    rows.push_back({kDropNames[r], read_counter(e.drops[r])});
  }
  const DpdkTxSink* tx = core.tx.get();
  if (tx != nullptr) {
    // What the tx queue accepted, not what the engine submitted.
    for (CounterRow& r : rows) {
      if (std::strcmp(r.name, "tx_packets") == 0) r.value = tx->sent();
      if (std::strcmp(r.name, "tx_bytes") == 0) r.value = tx->sent_bytes();
      if (std::strcmp(r.name, "results_sent") == 0) {
        const uint64_t unsent = tx->results_unsent();
        r.value = r.value > unsent ? r.value - unsent : 0;  // relaxed reads: never below zero
      }
    }
  }
  const PortCounters& p = core.counters;
#define SUMCAST_X(name, type, shown, help) rows.push_back({#name, read_counter(p.name)});
  SUMCAST_PORT_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
#define SUMCAST_X(name, type, shown, help) rows.push_back({#name, tx != nullptr ? tx_value_##name(*tx) : 0});
  SUMCAST_TX_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
  return rows;
}

std::vector<CounterRow> sum_counters(const std::vector<const LcoreContext*>& cores) {
  std::vector<CounterRow> total;
  for (const LcoreContext* core : cores) {
    std::vector<CounterRow> rows = read_counters(*core);
    if (total.empty()) {
      total = std::move(rows);
      continue;
    }
    for (size_t i = 0; i < rows.size(); ++i) total[i].value += rows[i].value;
  }
  return total;
}

telemetry::Histogram latency_histogram(const engine::CoreCounters& counters, uint64_t clock_hz) {
  telemetry::Histogram h;
  const double hz = clock_hz > 0 ? static_cast<double>(clock_hz) : 1e9;
  constexpr double kFirstBound = 1e-6;  // seconds: finer buckets are merged into this one
  size_t first = 0;
  while (first + 2 < engine::kLatencyBuckets && std::ldexp(1.0, static_cast<int>(first) + 1) / hz < kFirstBound) {
    ++first;
  }
  uint64_t merged = 0;
  for (size_t b = 0; b <= first; ++b) merged += read_counter(counters.latency_buckets[b]);
  h.counts.push_back(merged);
  h.upper_bounds.push_back(std::ldexp(1.0, static_cast<int>(first) + 1) / hz);
  for (size_t b = first + 1; b + 1 < engine::kLatencyBuckets; ++b) {
    h.counts.push_back(read_counter(counters.latency_buckets[b]));
    h.upper_bounds.push_back(std::ldexp(1.0, static_cast<int>(b) + 1) / hz);
  }
  h.counts.push_back(read_counter(counters.latency_buckets[engine::kLatencyBuckets - 1]));  // +Inf
  h.sum = static_cast<double>(read_counter(counters.latency_ticks_sum)) / hz;
  return h;
}

telemetry::Snapshot prometheus_snapshot(const TelemetrySource& source) {
  telemetry::Snapshot s;
  s.version = SUMCAST_VERSION;
  s.dpdk_version = rte_version();
  for (size_t i = 0; i < source.cores.size(); ++i) {
    const LcoreContext& core = *source.cores[i];
    telemetry::CoreMetrics c;
    c.core = static_cast<uint32_t>(i);
    for (const CounterRow& r : read_counters(core)) {
      const std::string name = r.name;
      if (name.rfind("drop_", 0) == 0) {
        c.drops.push_back({name.substr(5), r.value});
      } else if (const CoreCounterInfo* info = find_core_counter(name);
                 info != nullptr && info->type == CounterType::kGauge) {
        c.gauges.push_back({name, r.value});
      } else {
        c.counters.push_back({name, r.value});
      }
    }
    c.completion_latency = latency_histogram(core.engine->counters(), core.engine->options().clock_hz);
    s.cores.push_back(std::move(c));
  }
  if (source.device != nullptr) {
    s.port_device = source.device->info().device;
    for (PortStat& r : source.device->stats(true)) {
      if (r.name.rfind("xstat_", 0) == 0) {
        s.port_xstats.push_back({r.name.substr(6), r.value});
      } else {
        s.port.push_back({std::move(r.name), r.value});
      }
    }
  }
  if (source.server != nullptr) {
    for (const control::JobInfo& j : source.server->jobs()) {
      telemetry::JobMetrics m;
      m.job_id = j.job_id;
      m.name = j.name;
      m.dtype = wire::dtype_name(j.dtype);
      m.op = wire::reduce_op_name(j.op);
      m.world_size = j.world_size;
      m.registered = j.registered;
      m.running = j.running;
      m.slots_completed = j.slots_completed;
      m.seconds_since_progress = static_cast<double>(j.ms_since_progress) / 1000.0;
      const JobTraffic t = job_traffic(source, j);
      m.multicast = j.multicast;
      m.multicast_group = t.group;
      m.group_frames = t.group_frames;
      m.unicast_answers = t.unicast_answers;
      m.ce_marked = t.ce_marked;
      m.cnps_sent = t.cnps_sent;
      m.loss_notices = t.loss_notices;
      m.duplicate_notices = t.duplicate_notices;
      m.member_ce_marked = t.member_ce_marked;
      s.jobs.push_back(std::move(m));
    }
    const control::ServerCounters sc = source.server->counters();
    s.control = {{"connections_accepted", sc.connections_accepted},
                 {"connections_refused", sc.connections_refused},
                 {"auth_failures", sc.auth_failures},
                 {"bad_messages", sc.bad_messages},
                 {"io_timeouts", sc.io_timeouts},
                 {"registrations", sc.registrations},
                 {"registrations_refused", sc.registrations_refused},
                 {"jobs_started", sc.jobs_started},
                 {"jobs_completed", sc.jobs_completed},
                 {"jobs_failed", sc.jobs_failed}};
  }
  return s;
}

Status register_telemetry(const TelemetrySource* source) {
  set_telemetry_source(source);
  std::unique_lock<std::shared_mutex> lock(g_mu);
  if (g_registered) return {};
  struct Cmd {
    const char* name;
    telemetry_cb fn;
    const char* help;
  };
  static constexpr Cmd kCmds[] = {
      {"/sumcast/stats", handle_stats,
       "Sumcast counters: totals and per core. Parameters: none, \"total\", or a core index"},
      {"/sumcast/jobs", handle_jobs, "Sumcast jobs and control-plane counters. No parameters"},
      {"/sumcast/members", handle_members, "One job's counters by member (rank). Parameter: the job id"},
      {"/sumcast/config", handle_config, "The agg.conf sumcastd runs with. No parameters"},
      {"/sumcast/port", handle_port, "The data port's probed capabilities and offload path. No parameters"},
      {"/sumcast/version", handle_version, "sumcastd and DPDK versions. No parameters"},
  };
  for (const Cmd& c : kCmds) {
    const int rc = rte_telemetry_register_cmd(c.name, c.fn, c.help);
    if (rc != 0)
      return Status::io_error(std::string("rte_telemetry_register_cmd ") + c.name + ": " + std::to_string(rc));
  }
  g_registered = true;
  return {};
}

void set_telemetry_source(const TelemetrySource* source) {
  std::unique_lock<std::shared_mutex> lock(g_mu);
  g_source = source;
}

}  // namespace sumcast::dpdk
