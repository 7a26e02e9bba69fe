#include "sumcast/dpdk/appliance.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <thread>
#include <utility>

#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "sumcast/token_file.h"
#include "sumcast/wire/format.h"

namespace sumcast::dpdk {
namespace {

constexpr uint8_t kEcnEct0 = 0x2;  // the ECN field's ECT(0) codepoint (RFC 3168)

// `ctx` points at the core's NUMA node (LcoreContext::socket_id).
void* engine_allocate(size_t bytes, void* ctx) {
  return rte_malloc_socket("sumcast_engine", bytes, 64, *static_cast<const int*>(ctx));
}
void engine_release(void* p, void* /*ctx*/) { rte_free(p); }

std::string lcore_list(const std::vector<std::unique_ptr<LcoreContext>>& cores) {
  std::string s;
  for (const auto& c : cores) s += (s.empty() ? "" : ",") + std::to_string(c->lcore_id);
  return s;
}

rte_ring* make_ring(const std::string& name, uint32_t size, int socket, unsigned flags, Status* st) {
  rte_ring* r = rte_ring_create(name.c_str(), size, socket, flags);
  if (r == nullptr)
    *st = Status::unavailable("ring " + name + " (" + std::to_string(size) + "): " + rte_strerror(rte_errno));
  return r;
}

}  // namespace

Result<std::unique_ptr<Appliance>> Appliance::start(config::AggConfig config, ApplianceOptions options) {
  std::unique_ptr<Appliance> a(new Appliance());
  a->config_ = std::move(config);
  a->options_ = std::move(options);
  Status st = a->start_impl();
  if (!st.ok()) {
    a->shutdown();
    return st;
  }
  return a;
}

void Appliance::log(const std::string& line) const {
  if (options_.log == nullptr) return;
  std::fprintf(options_.log, "sumcastd: %s\n", line.c_str());
  std::fflush(options_.log);
}

// start() runs the phases in order; each checks its step and leaves what it built in the members,
// so that shutdown() undoes whatever was done when a later phase fails.
Status Appliance::start_impl() {
  log("config " + config_.path);
  Result<std::string> token = read_token_file(config_.control.token_file);
  if (!token.ok()) return Status(token.status().code(), "control.token_file: " + token.status().message());
  SUMCAST_RETURN_IF_ERROR(start_eal());
  Result<std::vector<unsigned>> workers = worker_lcores();
  if (!workers.ok()) return workers.status();
  SUMCAST_RETURN_IF_ERROR(open_port());
  SUMCAST_RETURN_IF_ERROR(start_neighbours());
  SUMCAST_RETURN_IF_ERROR(build_cores(workers.value()));
  SUMCAST_RETURN_IF_ERROR(start_port());
  SUMCAST_RETURN_IF_ERROR(launch_lcores());
  SUMCAST_RETURN_IF_ERROR(start_control(std::move(token.value())));
  SUMCAST_RETURN_IF_ERROR(start_dpdk_telemetry());
  return start_prometheus();
}

// EAL: the plan (arguments, hugepages) logged, then rte_eal_init.
Status Appliance::start_eal() {
  const config::AggConfig& cfg = config_;
  Result<EalPlan> plan = plan_eal(cfg, probe_hugepages(), options_.eal_overrides, options_.program);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(plan.value());
  log("EAL args: " + join_args(plan_.args));
  log("memory: " + plan_.memory_note);
  for (const std::string& n : plan_.notes) log("note: " + n);
  eal_arg_storage_ = plan_.args;
  for (std::string& s : eal_arg_storage_) eal_argv_.push_back(s.data());
  eal_argv_.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(eal_argv_.size() - 1), eal_argv_.data()) < 0) {
    return Status::unavailable(std::string("rte_eal_init: ") + rte_strerror(rte_errno) +
                               " (EAL args: " + join_args(plan_.args) + ")");
  }
  eal_up_ = true;
  return {};
}

// Lcores: the first is the main lcore (control, signals); the next worker_cores run engines.
Result<std::vector<unsigned>> Appliance::worker_lcores() const {
  const config::AggConfig& cfg = config_;
  const uint32_t n = cfg.dataplane.worker_cores;
  std::vector<unsigned> workers;
  unsigned l = 0;
  RTE_LCORE_FOREACH_WORKER(l) { workers.push_back(l); }
  if (workers.size() < n) {
    return Status::invalid_argument(
        cfg.path + ": eal.lcores: \"" + cfg.eal.lcores + "\" gives " + std::to_string(workers.size()) +
        " worker lcore(s) but dataplane.worker_cores = " + std::to_string(n) + " (the first lcore is the main lcore)");
  }
  return workers;
}

// The data port, configured (started later, once the cores' queues are set up).
Status Appliance::open_port() {
  const config::AggConfig& cfg = config_;
  const uint32_t n = cfg.dataplane.worker_cores;
  Result<std::unique_ptr<Port>> port = Port::open(cfg, n);
  if (!port.ok()) return port.status();
  port_ = std::move(port.value());
  return {};
}

// Neighbour resolution (next hops of results), started before the lcores run.
Status Appliance::start_neighbours() {
  const config::AggConfig& cfg = config_;
  const PortInfo& pi = port_->info();
  neighbour::ResolverOptions ro;
  std::copy(pi.mac, pi.mac + 6, ro.local_mac);
  ro.local_ip = pi.ipv4;
  const uint32_t gateway = cfg.port.gateway.value_or(0);  // 0: none
  std::vector<neighbour::Route> routes;
  for (const config::RouteConfig& r : cfg.port.routes) routes.push_back({r.prefix, r.len, r.via});
  ro.routes = neighbour::RoutingTable(pi.ipv4, cfg.port.prefix_len, gateway, std::move(routes));
  ro.refresh_ms = cfg.port.arp_refresh_ms;
  log("neighbours: " + ro.routes.describe() + "; ARP refresh every " + std::to_string(ro.refresh_ms) + " ms");
  neighbours_ =
      std::make_unique<NeighbourService>(std::move(ro), pi.socket_id, [this](const std::string& line) { log(line); });
  return neighbours_->start();
}

// Per-core contexts: rings, engine, tx sink, for each worker lcore.
Status Appliance::build_cores(const std::vector<unsigned>& workers) {
  const config::AggConfig& cfg = config_;
  const uint32_t n = cfg.dataplane.worker_cores;
  const PortInfo& pi = port_->info();
  const bool shared_tx = pi.queues < n;
  tx_locks_.resize(pi.queues);
  for (rte_spinlock_t& lock : tx_locks_) rte_spinlock_init(&lock);
  Status st;
  const uint32_t dispatch_size =
      rte_align32pow2(std::max<uint32_t>(2u * cfg.port.rx_desc, 4u * cfg.dataplane.burst_size));
  for (uint32_t i = 0; i < n; ++i) {
    auto core = std::make_unique<LcoreContext>();
    core->lcore_id = workers[i];
    core->core_index = i;
    core->core_count = n;
    core->port_id = pi.port_id;
    core->rx_queue = i < pi.queues ? static_cast<int>(i) : -1;
    core->tx_queue = static_cast<uint16_t>(i % pi.queues);
    core->burst_size = cfg.dataplane.burst_size;
    core->software_dispatch = pi.software_dispatch;
    core->idle_adaptive = cfg.dataplane.idle_adaptive;
    core->idle_sleep_us = cfg.dataplane.idle_sleep_us;
    core->idle_after_us = cfg.dataplane.idle_after_us;
    core->stop = &stop_;
    int socket = static_cast<int>(rte_lcore_to_socket_id(workers[i]));
    if (socket < 0 || socket == SOCKET_ID_ANY) socket = pi.socket_id;
    core->socket_id = socket;
    const std::string idx = std::to_string(i);
    if (pi.software_dispatch) {
      core->dispatch_ring = make_ring("sc_disp_" + idx, dispatch_size, socket, RING_F_SC_DEQ, &st);
      if (!st.ok()) return st;
    }
    core->control_ring = make_ring("sc_ctl_" + idx, kControlRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ, &st);
    if (!st.ok()) return st;
    core->ack_ring = make_ring("sc_ack_" + idx, kControlRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ, &st);
    if (!st.ok()) return st;

    engine::EngineOptions eo;
    eo.core_index = i;
    eo.core_count = n;
    std::copy(pi.mac, pi.mac + 6, eo.local_mac);
    eo.local_ip = pi.ipv4;
    eo.qpn = kCoreQpnBase + i;
    eo.tos = static_cast<uint8_t>(cfg.port.dscp << 2 | (cfg.port.ecn ? kEcnEct0 : 0));
    eo.cnp_interval_ticks = cfg.port.cnp_interval_us * rte_get_tsc_hz() / 1000000;
    if (cfg.port.cnp_interval_us != 0 && eo.cnp_interval_ticks == 0) eo.cnp_interval_ticks = 1;
    eo.verify_icrc = cfg.dataplane.verify_icrc;
    eo.udp_checksum = cfg.dataplane.udp_checksum;
    eo.max_jobs = cfg.dataplane.max_jobs;
    eo.max_ranks = cfg.dataplane.max_ranks;
    eo.max_slots_per_job = cfg.dataplane.slots_per_job;
    eo.allocate = engine_allocate;
    eo.release = engine_release;
    eo.alloc_ctx = &core->socket_id;
    eo.clock = [](void* /*ctx*/) -> uint64_t { return rte_rdtsc(); };
    eo.clock_hz = rte_get_tsc_hz();
    eo.next_hops = neighbours_->table();
    eo.arp_observer = &NeighbourService::observe;
    eo.arp_observer_ctx = neighbours_.get();
    core->engine = std::make_unique<engine::Engine>(eo);
    core->tx = std::make_unique<DpdkTxSink>(pi.port_id, core->tx_queue, port_->tx_pool(),
                                            shared_tx ? &tx_locks_[core->tx_queue] : nullptr);
    core->tx->set_ipv4_checksum_offload(pi.plan.tx_ipv4_cksum);
    core->tx->set_coalesce(cfg.dataplane.tx_coalesce);
    if (i == 0) core->neighbours = neighbours_.get();
    cores_.push_back(std::move(core));
  }
  std::vector<LcoreContext*> all;
  for (auto& c : cores_) all.push_back(c.get());
  for (auto& c : cores_) c->peers = all;
  return {};
}

// The port started, then what it and the cores are, logged.
Status Appliance::start_port() {
  const config::AggConfig& cfg = config_;
  const uint32_t n = cfg.dataplane.worker_cores;
  const PortInfo& pi = port_->info();
  const bool shared_tx = pi.queues < n;
  SUMCAST_RETURN_IF_ERROR(port_->start());
  log("port " + pi.device + " (" + pi.driver + ") mac " + format_mac(pi.mac) + " ipv4 " + format_ipv4(pi.ipv4) +
      " mtu " + std::to_string(pi.mtu) + " queues " + std::to_string(pi.queues) + "/" + std::to_string(pi.max_queues) +
      (pi.rss ? " rss" : "") + (pi.promiscuous ? " promiscuous" : "") + " link " + port_->link_text());
  if (port_->ring_sockets() > 0) {
    log("port " + pi.device + ": kernel ring drops read from its " + std::to_string(port_->ring_sockets()) +
        " packet socket(s) (PACKET_STATISTICS; the PMD does not report them)");
  }
  log("cores: " + std::to_string(n) + " worker lcore(s) [" + lcore_list(cores_) + "], main lcore " +
      std::to_string(rte_get_main_lcore()) + ", burst " + std::to_string(cfg.dataplane.burst_size) + ", tx coalesce " +
      std::to_string(cfg.dataplane.tx_coalesce) + ", software dispatch " + (pi.software_dispatch ? "on" : "off") +
      (shared_tx ? ", tx queues shared" : "") +
      (cfg.dataplane.idle_adaptive
           ? ", idle poll adaptive (sleeps up to " + std::to_string(cfg.dataplane.idle_sleep_us) + " us after " +
                 std::to_string(cfg.dataplane.idle_after_us) + " us without work)"
           : ", idle poll busy"));
  // The probe and the plan, once (docs/nic_offload.md; `sumcastctl port` shows the same).
  std::string caps_line;
  for (const auto& [key, value] : nic_offload::describe(pi.caps)) caps_line += " " + key + "=" + value;
  log("nic_offload: port " + pi.device + " capabilities:" + caps_line);
  log(std::string("nic_offload: path ") + nic_offload::steering_mode_name(pi.plan.mode) + ": " + pi.plan.reason +
      (pi.flow_rules > 0 ? " (" + std::to_string(pi.flow_rules) + " rte_flow rules installed)" : "") +
      (port_->xdp() != nullptr
           ? " (XDP program id " + std::to_string(port_->xdp()->prog_id()) + " on " + port_->xdp()->iface() + ")"
           : ""));
  return {};
}

// Launch and wait (bounded) until every loop runs.
Status Appliance::launch_lcores() {
  for (auto& c : cores_) {
    const int rc = launch_lcore(*c);
    if (rc != 0) {
      stop_.store(true);
      lcores_launched_ = true;
      return Status::unavailable("rte_eal_remote_launch on lcore " + std::to_string(c->lcore_id) + ": " +
                                 rte_strerror(-rc));
    }
    lcores_launched_ = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.lcore_start_timeout_ms);
  for (auto& c : cores_) {
    while (!c->running.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status::timeout("lcore " + std::to_string(c->lcore_id) + " did not start within " +
                               std::to_string(options_.lcore_start_timeout_ms) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return {};
}

// Control plane: the server workers register with, handing jobs to the lcores.
Status Appliance::start_control(std::string token) {
  const config::AggConfig& cfg = config_;
  const uint32_t n = cfg.dataplane.worker_cores;
  const PortInfo& pi = port_->info();
  std::vector<LcoreContext*> all;
  for (auto& c : cores_) all.push_back(c.get());
  sink_ = std::make_unique<LcoreJobSink>(all, options_.ack_timeout_ms);
  control::ServerOptions so;
  so.listen_ip = cfg.control.listen_address;
  so.port = cfg.control.port;
  so.token = std::move(token);
  so.max_connections = cfg.control.max_connections;
  so.job_timeout_ms = cfg.control.job_timeout_ms;
  so.register_timeout_ms = cfg.control.register_timeout_ms;
  so.io_timeout_ms = cfg.control.io_timeout_ms;
  so.max_jobs = cfg.dataplane.max_jobs;
  so.max_ranks = cfg.dataplane.max_ranks;
  so.slots_per_job = cfg.dataplane.slots_per_job;
  so.max_payload_bytes = cfg.dataplane.max_payload_bytes;
  so.dtypes = cfg.dataplane.dtypes;
  std::copy(pi.mac, pi.mac + 6, so.data_mac);
  so.data_ip = pi.ipv4;
  for (uint32_t i = 0; i < n; ++i) so.core_qpns.push_back(kCoreQpnBase + i);
  so.next_hops = neighbours_.get();
  so.multicast = cfg.dataplane.multicast;
  so.loss_notices = cfg.dataplane.loss_notices;
  if (so.multicast) so.multicast_base_ip = cfg.dataplane.multicast_group;
  server_ = std::make_unique<control::Server>(std::move(so), sink_.get());
  const Status st = server_->start();
  if (!st.ok()) return Status(st.code(), "control server: " + st.message());
  log("control: listening on " + format_ipv4(cfg.control.listen_address) + ":" + std::to_string(server_->bound_port()));
  return {};
}

// Telemetry: DPDK telemetry commands over the appliance's parts.
Status Appliance::start_dpdk_telemetry() {
  const config::AggConfig& cfg = config_;
  for (auto& c : cores_) telemetry_.cores.push_back(c.get());
  telemetry_.server = server_.get();
  telemetry_.config = &config_;
  telemetry_.port = &port_->info();
  telemetry_.xdp = port_->xdp();
  telemetry_.device = port_.get();
  if (cfg.telemetry.dpdk_telemetry) {
    SUMCAST_RETURN_IF_ERROR(register_telemetry(&telemetry_));
    log(std::string("telemetry: ") + rte_eal_get_runtime_dir() +
        "/dpdk_telemetry.v2 (/sumcast/stats, /sumcast/jobs, /sumcast/config, /sumcast/port)");
  }
  return {};
}

// Telemetry: the Prometheus endpoint, when configured.
Status Appliance::start_prometheus() {
  const config::AggConfig& cfg = config_;
  if (cfg.telemetry.prometheus_address) {
    telemetry::HttpServerOptions ho;
    ho.ip = cfg.telemetry.prometheus_address->address;
    ho.port = cfg.telemetry.prometheus_address->port;
    const TelemetrySource* source = &telemetry_;
    ho.routes.push_back({"/metrics", "Prometheus text format (version 0.0.4)", [source] {
                           return telemetry::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                                          telemetry::render_prometheus(prometheus_snapshot(*source))};
                         }});
    auto metrics = telemetry::HttpServer::start(std::move(ho));
    if (!metrics.ok()) {
      return Status(metrics.status().code(),
                    cfg.path + ": telemetry.prometheus_address: " + metrics.status().message());
    }
    metrics_ = std::move(metrics.value());
    log("telemetry: prometheus on http://" + format_ipv4(cfg.telemetry.prometheus_address->address) + ":" +
        std::to_string(metrics_->port()) + "/metrics");
  }
  return {};
}

void Appliance::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (metrics_ != nullptr) metrics_->stop();  // its handler reads the cores and the server
  if (server_ != nullptr) server_->stop();    // aborts every job while the lcores still run
  set_telemetry_source(nullptr);
  if (sink_ != nullptr) sink_->close();
  stop_.store(true, std::memory_order_relaxed);
  if (lcores_launched_) {
    rte_eal_mp_wait_lcore();
    // Every loop has returned; its release store of `finished`, read here, is what orders its
    // last writes before ours (DPDK's own join is invisible to ThreadSanitizer).
    for (auto& c : cores_) {
      while (!c->finished.load(std::memory_order_acquire)) rte_pause();
    }
  }
  for (auto& c : cores_) {
    if (c->dispatch_ring == nullptr) continue;
    void* m = nullptr;
    while (rte_ring_sc_dequeue(c->dispatch_ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  if (port_ != nullptr) port_->stop();
  if (!cores_.empty() && lcores_launched_) {
    std::string s = summary();
    if (options_.log != nullptr) {
      std::fputs(s.c_str(), options_.log);
      std::fflush(options_.log);
    }
  }
  server_.reset();
  sink_.reset();
  for (auto& c : cores_) {
    c->tx.reset();
    c->engine.reset();
    rte_ring_free(c->dispatch_ring);
    rte_ring_free(c->control_ring);
    rte_ring_free(c->ack_ring);
  }
  cores_.clear();
  neighbours_.reset();  // no lcore reads its table or rings any more
  port_.reset();
  if (eal_up_) {
    rte_eal_cleanup();
    eal_up_ = false;
    log("stopped");
  }
}

Appliance::~Appliance() { shutdown(); }

std::string Appliance::stats_line() const {
  std::vector<const LcoreContext*> cores;
  for (const auto& c : cores_) cores.push_back(c.get());
  uint64_t drops = 0;
  std::string line;
  for (const CounterRow& r : sum_counters(cores)) {
    const std::string name = r.name;
    if (name.rfind("drop_", 0) == 0) {
      drops += r.value;
    } else if (name == "rx_packets" || name == "tx_packets" || name == "contributions" || name == "slots_completed" ||
               name == "retransmits_answered" || name == "jobs_active") {
      line += name + " " + std::to_string(r.value) + " ";
    }
  }
  return line + "drops " + std::to_string(drops);
}

std::string Appliance::summary() const {
  std::vector<const LcoreContext*> cores;
  for (const auto& c : cores_) cores.push_back(c.get());
  std::string out = "sumcastd: counters over " + std::to_string(cores.size()) + " core(s), non-zero only:\n";
  const auto row = [&out](const char* name, uint64_t value) {
    if (value == 0) return;
    char buf[128];
    std::snprintf(buf, sizeof(buf), "sumcastd:   %-24s %" PRIu64 "\n", name, value);
    out += buf;
  };
  for (const CounterRow& r : sum_counters(cores)) row(r.name, r.value);
  if (port_ != nullptr) {
    out += "sumcastd: port " + port_->info().device + " counters, non-zero only:\n";
    for (const PortStat& r : port_->stats(false)) row(r.name.c_str(), r.value);
  }
  return out;
}

const PortInfo& Appliance::port_info() const { return port_->info(); }

uint16_t Appliance::metrics_port() const { return metrics_ != nullptr ? metrics_->port() : 0; }

uint16_t Appliance::control_port() const { return server_ != nullptr ? server_->bound_port() : 0; }

}  // namespace sumcast::dpdk
