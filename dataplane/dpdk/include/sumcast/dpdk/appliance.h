// The appliance as a whole: EAL, the data port, one engine per worker lcore, the control-plane
// server, telemetry. sumcastd's main only parses its command line, calls start(), waits for a
// signal and calls shutdown().
//
// start() order (start_impl(), one function a phase): token read -> EAL (args and hugepage
// choice logged) -> worker lcores counted -> port (configured) -> neighbour service (routes, ARP)
// -> per-core engines, rings and tx sinks -> port started (port, cores and offload plan logged) ->
// lcores launched and seen running -> control server listening -> DPDK telemetry commands ->
// Prometheus endpoint. Every step is checked before the next; a failure undoes what was done.
// shutdown() order: metrics server stop -> control server stop (it aborts every job through the
// lcores) -> telemetry off -> stop flag -> rte_eal_mp_wait_lcore -> port stop/close -> counters
// summary -> rte_eal_cleanup.
//
// Thread safety: start()/shutdown()/stats_line() from the main thread. Only one Appliance per
// process (EAL).
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sumcast/config/agg_config.h"
#include "sumcast/control/server.h"
#include "sumcast/dpdk/eal_args.h"
#include "sumcast/dpdk/job_sink.h"
#include "sumcast/dpdk/lcore.h"
#include "sumcast/dpdk/neighbour_service.h"
#include "sumcast/dpdk/port.h"
#include "sumcast/dpdk/telemetry.h"
#include "sumcast/status.h"
#include "sumcast/telemetry/http_server.h"

namespace sumcast::dpdk {

struct ApplianceOptions {
  std::vector<std::string> eal_overrides;  // sumcastd's arguments after `--`
  std::string program = "sumcastd";        // argv[0] for EAL
  FILE* log = stdout;                      // start-up and shutdown lines (flushed after each)
  uint32_t ack_timeout_ms = 2000;          // lcore acks for job install/remove
  uint32_t lcore_start_timeout_ms = 5000;  // lcores must report running within this
};

class Appliance {
 public:
  static Result<std::unique_ptr<Appliance>> start(config::AggConfig config, ApplianceOptions options);
  ~Appliance();  // shutdown()
  Appliance(const Appliance&) = delete;
  Appliance& operator=(const Appliance&) = delete;

  // Idempotent. Logs the counters summary.
  void shutdown();

  // One line of totals ("rx 123 tx 45 contributions ... drops 6"), for telemetry.stats_interval_ms.
  std::string stats_line() const;
  // Multi-line summary of every non-zero total counter.
  std::string summary() const;

  const PortInfo& port_info() const;
  uint16_t control_port() const;
  // The Prometheus endpoint's port (telemetry.prometheus_address), 0 when off.
  uint16_t metrics_port() const;
  const std::string& file_prefix() const { return plan_.file_prefix; }

 private:
  Appliance() = default;
  Status start_impl();  // the phases below, in order
  Status start_eal();
  Result<std::vector<unsigned>> worker_lcores() const;
  Status open_port();
  Status start_neighbours();
  Status build_cores(const std::vector<unsigned>& workers);
  Status start_port();
  Status launch_lcores();
  Status start_control(std::string token);
  Status start_dpdk_telemetry();
  Status start_prometheus();
  void log(const std::string& line) const;

  config::AggConfig config_;
  ApplianceOptions options_;
  EalPlan plan_;
  std::vector<char*> eal_argv_;
  std::vector<std::string> eal_arg_storage_;
  bool eal_up_ = false;
  bool lcores_launched_ = false;
  bool shut_down_ = false;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Port> port_;
  std::unique_ptr<NeighbourService> neighbours_;  // outlives the cores (their next-hop table)
  std::vector<std::unique_ptr<LcoreContext>> cores_;
  std::vector<rte_spinlock_t> tx_locks_;
  std::unique_ptr<LcoreJobSink> sink_;
  std::unique_ptr<control::Server> server_;
  TelemetrySource telemetry_;
  std::unique_ptr<telemetry::HttpServer> metrics_;  // GET /metrics; stopped first in shutdown()
};

}  // namespace sumcast::dpdk
