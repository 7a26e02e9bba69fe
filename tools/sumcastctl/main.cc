// sumcastctl: the operator's view of a running sumcastd (through its DPDK telemetry socket) and a
// checker for agg.conf files.
//
//   sumcastctl [--prefix P | --socket PATH] [--timeout MS] COMMAND
//     stats [--json]   per-core and total counters; drops by reason (non-zero only); the port's
//                      own counters (--json: with its extended stats)
//     stats --watch [SECONDS] [--count N] [--json]
//                      a live view refreshed every SECONDS (default 1): rates per second per core,
//                      in total, drops by reason and per job, from two successive reads
//     jobs [--json]    jobs registered with the control plane, and its counters
//     check [--json] FILE   validates an agg.conf without starting anything (--json: its settings)
//     version [--json] sumcastctl's version, and the daemon's when one answers
//
// P is sumcastd's eal.file_prefix (default "sumcast"). Exit status: 0 success, 1 failure
// (daemon unreachable, invalid file), 2 usage error.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/config/agg_config.h"
#include "sumcast/config/settings.h"
#include "sumcast/core_counters.h"
#include "sumcast/ctl/json.h"
#include "sumcast/ctl/telemetry_client.h"
#include "sumcast/ctl/watch.h"

namespace {

using sumcast::Result;
using sumcast::ctl::as_uint;
using sumcast::ctl::find;
using sumcast::ctl::Json;
using sumcast::ctl::string_at;
using sumcast::ctl::TelemetryClient;
using sumcast::ctl::uint_at;

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string prefix = "sumcast";
  std::string socket;
  uint32_t timeout_ms = 2000;
  bool json = false;   // every command's --json
  double watch_s = 0;  // stats --watch [SECONDS]; 0: not watching
  uint64_t count = 0;  // stats --watch --count N; 0: until interrupted
  std::string file;    // check FILE
};

std::string socket_path(const Options& o) {
  return o.socket.empty() ? sumcast::ctl::telemetry_socket_path(o.prefix) : o.socket;
}

Result<std::unique_ptr<TelemetryClient>> connect(const Options& o) {
  return TelemetryClient::connect(socket_path(o), o.timeout_ms);
}

// One telemetry command's answer; an answer that is no object means the socket is not sumcastd's.
Result<Json> query_object(const Options& o, const std::string& command) {
  auto client = connect(o);
  if (!client.ok()) return client.status();
  Result<Json> answer = (*client)->query(command);
  if (!answer.ok()) return answer.status();
  if (!answer->is_object()) return sumcast::Status::not_found(command + ": no answer (is this sumcastd?)");
  return answer;
}

int fail(const sumcast::Status& st) {
  std::fprintf(stderr, "sumcastctl: %s\n", st.message().c_str());
  return kExitFail;
}

void print_row(const std::string& name, const std::vector<const Json*>& cols, const Json& total,
               const std::string& key) {
  std::printf("%-26s", name.c_str());
  for (const Json* c : cols) std::printf(" %14" PRIu64, uint_at(*c, key));
  std::printf(" %14" PRIu64 "\n", uint_at(total, key));
}

// One refresh of `stats --watch`: every core's counters and the jobs, and when.
Result<sumcast::ctl::Reading> read_once(TelemetryClient& client) {
  sumcast::ctl::Reading r;
  const auto t0 = std::chrono::steady_clock::now();
  Result<Json> top = client.query("/sumcast/stats");
  if (!top.ok()) return top.status();
  if (!top->is_object()) return sumcast::Status::not_found("/sumcast/stats: no answer (is this sumcastd?)");
  const uint64_t cores = uint_at(*top, "cores");
  for (uint64_t i = 0; i < cores; ++i) {
    Result<Json> c = client.query("/sumcast/stats," + std::to_string(i));
    if (!c.ok()) return c.status();
    r.cores.push_back(std::move(c.value()));
  }
  Result<Json> jobs = client.query("/sumcast/jobs");
  if (!jobs.ok()) return jobs.status();
  r.jobs = std::move(jobs.value());
  const auto t1 = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>((t0 - std::chrono::steady_clock::time_point{}) + (t1 - t0) / 2).count();
  return r;
}

// `stats --watch [SECONDS] [--count N] [--json]`.
int cmd_watch(const Options& o, double interval, uint64_t count, bool json) {
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<sumcast::ctl::Reading> before = read_once(**client);
  if (!before.ok()) return fail(before.status());
  const bool tty = !json && isatty(STDOUT_FILENO) != 0;
  const uint64_t pid = uint_at((*client)->greeting(), "pid");
  for (uint64_t n = 0; count == 0 || n < count; ++n) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    Result<sumcast::ctl::Reading> after = read_once(**client);
    if (!after.ok()) return fail(after.status());
    const sumcast::ctl::WatchRates rates = sumcast::ctl::compute_rates(before.value(), after.value());
    if (json) {
      std::printf("%s\n", sumcast::ctl::to_json(sumcast::ctl::watch_json(rates)).c_str());
    } else {
      char when[32] = {};
      const std::time_t now = std::time(nullptr);
      std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&now));
      char title[160];
      std::snprintf(title, sizeof(title), "sumcastd pid %" PRIu64 ", %zu core(s); rates over %.2f s at %s%s", pid,
                    rates.cores.size(), rates.seconds, when, tty ? " (Ctrl-C to stop)" : "");
      if (tty) std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear
      std::fputs(sumcast::ctl::format_watch(rates, title).c_str(), stdout);
      if (!tty) std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    before = std::move(after);
  }
  return 0;
}

int cmd_stats(const Options& o) {
  if (o.watch_s > 0) return cmd_watch(o, o.watch_s, o.count, o.json);
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<Json> top = (*client)->query("/sumcast/stats");
  if (!top.ok()) return fail(top.status());
  if (!top->is_object()) return fail(sumcast::Status::not_found("/sumcast/stats: no answer (is this sumcastd?)"));
  const uint64_t cores = uint_at(*top, "cores");
  const Json* total = find(*top, "total");
  if (total == nullptr || !total->is_object())
    return fail(sumcast::Status::invalid_argument("/sumcast/stats: no totals"));
  std::vector<Json> per_core;
  per_core.reserve(cores);
  for (uint64_t i = 0; i < cores; ++i) {
    Result<Json> c = (*client)->query("/sumcast/stats," + std::to_string(i));
    if (!c.ok()) return fail(c.status());
    per_core.push_back(std::move(c.value()));
  }
  // The port's own counters and extended stats (an older sumcastd has none).
  Result<Json> port = (*client)->query("/sumcast/stats,port");
  const bool have_port = port.ok() && port->is_object();
  if (o.json) {
    Json out = Json::object();
    out["cores"] = cores;
    out["total"] = *total;
    if (have_port) out["port"] = port.value();
    out["per_core"] = per_core;
    std::printf("%s\n", sumcast::ctl::to_json(out, 2).c_str());
    return 0;
  }
  std::vector<const Json*> cols;
  cols.reserve(per_core.size());
  for (const Json& c : per_core) cols.push_back(&c);
  const uint64_t pid = uint_at((*client)->greeting(), "pid");
  std::printf("sumcastd pid %" PRIu64 ", %" PRIu64 " core(s)\n", pid, cores);
  std::printf("%-26s", "counter");
  for (uint64_t i = 0; i < cores; ++i) std::printf(" %14s", ("core" + std::to_string(i)).c_str());
  std::printf(" %14s\n", "total");
  // The per-core counters in their order (sumcast/core_counters.h says which are shown when).
  for (const sumcast::CoreCounterInfo& row : sumcast::kCoreCounterInfo) {
    if (row.shown == sumcast::CounterShown::kAlways ||
        (row.shown == sumcast::CounterShown::kNonZero && uint_at(*total, row.name) != 0)) {
      print_row(row.name, cols, *total, row.name);
    }
  }
  bool any_drop = false;
  for (const auto& [key, value] : total->items()) {
    if (key.rfind("drop_", 0) != 0 || as_uint(value) == 0) continue;
    if (!any_drop) std::printf("drops by reason:\n");
    any_drop = true;
    print_row("  " + key.substr(5), cols, *total, key);
  }
  if (!any_drop) std::printf("drops: none\n");
  if (have_port) {
    // Counted by the port before any engine core saw a frame (imissed, kernel_ring_drops: frames
    // no engine counter shows); extended stats with --json.
    std::printf("port (its own counters):\n");
    for (const auto& [key, value] : port->items()) {
      if (key.rfind("xstat_", 0) != 0) std::printf("  %-24s %14" PRIu64 "\n", key.c_str(), as_uint(value));
    }
  }
  return 0;
}

// Joins the pieces of a long telemetry string (key, key_2, key_3, ...).
std::string long_string(const Json& d, const std::string& key) {
  std::string s;
  for (int n = 1;; ++n) {
    const Json* v = find(d, n == 1 ? key : key + "_" + std::to_string(n));
    if (v == nullptr || !v->is_string()) return s;
    s += v->get_ref<const std::string&>();
  }
}

int cmd_port(const Options& o) {
  Result<Json> port = query_object(o, "/sumcast/port");
  if (!port.ok()) return fail(port.status());
  if (o.json) {
    std::printf("%s\n", sumcast::ctl::to_json(port.value(), 2).c_str());
    return 0;
  }
  std::printf("port %s: path %s, software dispatch %s, queues %" PRIu64 "%s, rte_flow rules %" PRIu64
              ", tx IPv4 checksum %s\n",
              string_at(*port, "device").c_str(), string_at(*port, "path").c_str(),
              uint_at(*port, "software_dispatch") != 0 ? "on" : "off", uint_at(*port, "queues"),
              uint_at(*port, "rss") != 0 ? " (rss)" : "", uint_at(*port, "flow_rules"),
              uint_at(*port, "tx_ipv4_cksum_offload") != 0 ? "in the NIC" : "in software");
  std::printf("why: %s\n", long_string(port.value(), "reason").c_str());
  if (find(*port, "xdp_prog_id") != nullptr) {
    std::printf("xdp program %" PRIu64 ": redirected %" PRIu64 " passed %" PRIu64 " redirect_failed %" PRIu64 "\n",
                uint_at(*port, "xdp_prog_id"), uint_at(*port, "xdp_redirected"), uint_at(*port, "xdp_passed"),
                uint_at(*port, "xdp_redirect_failed"));
  }
  std::printf("capabilities:\n");
  for (const auto& [key, value] : port->items()) {
    if (key.rfind("cap_", 0) != 0 || !value.is_string()) continue;
    const size_t us = key.rfind('_');
    if (us != std::string::npos && us > 4 && key.find_first_not_of("0123456789", us + 1) == std::string::npos &&
        find(*port, key.substr(0, us)) != nullptr) {
      continue;  // a continuation piece, printed with its first
    }
    std::printf("  %-22s %s\n", key.substr(4).c_str(), long_string(port.value(), key).c_str());
  }
  return 0;
}

// The agg.conf the running sumcastd uses (/sumcast/config: every key as `check --json` shows a
// file, booleans as 0 and 1, with the port's driver and offloads and the bound control port), one
// "section.key = value" line each (values in JSON's form).
int cmd_config(const Options& o) {
  Result<Json> cfg = query_object(o, "/sumcast/config");
  if (!cfg.ok()) return fail(cfg.status());
  if (o.json) {
    std::printf("%s\n", sumcast::ctl::to_json(cfg.value(), 2).c_str());
    return 0;
  }
  std::printf("# %s\n", string_at(*cfg, "path").c_str());
  for (const auto& [section, keys] : cfg->items()) {
    if (!keys.is_object()) continue;
    for (const auto& [key, value] : keys.items()) {
      std::printf("%s.%s = %s\n", section.c_str(), key.c_str(), sumcast::ctl::to_json(value).c_str());
    }
  }
  return 0;
}

int cmd_jobs(const Options& o) {
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<Json> jobs = (*client)->query("/sumcast/jobs");
  if (!jobs.ok()) return fail(jobs.status());
  if (!jobs->is_object()) return fail(sumcast::Status::not_found("/sumcast/jobs: no answer (is this sumcastd?)"));
  if (o.json) {
    std::printf("%s\n", sumcast::ctl::to_json(jobs.value(), 2).c_str());
    return 0;
  }
  std::printf("%8s  %-20s %5s %10s %6s %4s %8s %16s %18s  %s\n", "job_id", "name", "world", "registered", "dtype", "op",
              "running", "slots_completed", "ms_since_progress", "results");
  uint64_t shown = 0;
  for (const auto& [key, j] : jobs->items()) {
    if (key.rfind("job", 0) != 0 || !j.is_object()) continue;
    // Results by multicast: the group, its frames and the unicast answers; else one per member.
    const std::string results = uint_at(j, "multicast") != 0 && find(j, "multicast_group") != nullptr
                                    ? "multicast " + string_at(j, "multicast_group") + " (" +
                                          std::to_string(uint_at(j, "group_frames")) + " to the group, " +
                                          std::to_string(uint_at(j, "unicast_answers")) + " unicast answers)"
                                    : "unicast";
    std::printf("%8" PRIu64 "  %-20s %5" PRIu64 " %10" PRIu64 " %6s %4s %8s %16" PRIu64 " %18" PRIu64 "  %s\n",
                uint_at(j, "job_id"), string_at(j, "name").c_str(), uint_at(j, "world_size"), uint_at(j, "registered"),
                string_at(j, "dtype").c_str(), string_at(j, "op").c_str(), uint_at(j, "running") != 0 ? "yes" : "no",
                uint_at(j, "slots_completed"), uint_at(j, "ms_since_progress"), results.c_str());
    if (uint_at(j, "ce_marked") != 0) {  // ECN: the marks by rank come from /sumcast/members
      std::string by_rank;
      Result<Json> m = (*client)->query("/sumcast/members," + std::to_string(uint_at(j, "job_id")));
      if (const Json* ce = m.ok() ? find(*m, "ce_marked") : nullptr; ce != nullptr && ce->is_array()) {
        for (size_t r = 0; r < ce->size(); ++r) {
          by_rank += (r ? " " : "") + std::to_string(r) + ":" + std::to_string(as_uint((*ce)[r]));
        }
      }
      std::printf("%8s  ECN: %" PRIu64 " contributions marked CE (by rank %s), %" PRIu64 " CNPs sent\n", "",
                  uint_at(j, "ce_marked"), by_rank.empty() ? "unknown" : by_rank.c_str(), uint_at(j, "cnps_sent"));
    }
    ++shown;
  }
  if (shown == 0) std::printf("(no jobs)\n");
  if (const Json* server = find(*jobs, "server"); server != nullptr && server->is_object()) {
    std::string line;
    for (const auto& [key, value] : server->items()) {
      if (as_uint(value) != 0) line += " " + key + " " + std::to_string(as_uint(value));
    }
    std::printf("control plane:%s\n", line.empty() ? " (all counters zero)" : line.c_str());
  }
  return 0;
}

// The settings of a valid agg.conf (config::settings: defaults filled in; the token file's path,
// never its contents), one object per section.
Json config_json(const sumcast::config::AggConfig& c) {
  Json out = Json::object({{"file", Json(c.path)}, {"valid", Json(true)}});
  for (const sumcast::config::Setting& s : sumcast::config::settings(c)) {
    Json& section = out[s.section];
    std::visit([&](const auto& v) { section[s.key] = Json(v); }, s.value);
  }
  return out;
}

int cmd_check(const Options& o) {
  const bool json = o.json;
  const std::string& file = o.file;
  Result<sumcast::config::AggConfig> cfg = sumcast::config::load_agg_config(file);
  sumcast::Status st = cfg.ok() ? sumcast::config::validate_agg_config(cfg.value()) : cfg.status();
  if (json) {
    const Json out = st.ok()
                         ? config_json(cfg.value())
                         : Json::object({{"file", Json(file)}, {"valid", Json(false)}, {"error", Json(st.message())}});
    std::printf("%s\n", sumcast::ctl::to_json(out, 2).c_str());
    return st.ok() ? 0 : kExitFail;
  }
  if (!st.ok()) return fail(st);
  std::printf("%s: OK\n", file.c_str());
  return 0;
}

int cmd_version(const Options& o) {
  if (o.json) {
    Json m = Json::object();
    m["sumcastctl"] = sumcast::cli::version();
    Json daemon;  // null when unreachable
    if (auto client = connect(o); client.ok()) {
      Result<Json> v = (*client)->query("/sumcast/version");
      if (v.ok() && v->is_object()) {
        daemon = std::move(v.value());
        daemon["pid"] = uint_at((*client)->greeting(), "pid");
      }
    }
    m["daemon"] = std::move(daemon);
    m["socket"] = socket_path(o);
    std::printf("%s\n", sumcast::ctl::to_json(m, 2).c_str());
    return 0;
  }
  std::printf("sumcastctl %s\n", sumcast::cli::version());
  auto client = connect(o);
  if (!client.ok()) {
    std::printf("sumcastd: not reachable at %s\n", socket_path(o).c_str());
    return 0;
  }
  Result<Json> v = (*client)->query("/sumcast/version");
  if (!v.ok() || !v->is_object()) {
    std::printf("sumcastd: no answer to /sumcast/version at %s\n", socket_path(o).c_str());
    return 0;
  }
  std::printf("sumcastd %s (%s), pid %" PRIu64 "\n", string_at(*v, "sumcastd").c_str(), string_at(*v, "dpdk").c_str(),
              uint_at((*client)->greeting(), "pid"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "The operator's view of a running sumcastd (through its DPDK telemetry socket), and a checker for "
      "agg.conf files. Exit status: 0 success, 1 failure (daemon unreachable, invalid file), 2 usage error.",
      "sumcastctl"};
  sumcast::cli::setup(app);
  auto* prefix = app.add_option("-p,--prefix", o.prefix, "sumcastd's eal.file_prefix");
  app.add_option("--socket", o.socket, "the telemetry socket itself (instead of --prefix)")->excludes(prefix);
  app.add_option("--timeout", o.timeout_ms, "reply timeout, ms")->check(CLI::Range(1u, 3600000u));
  app.require_subcommand(1);
  const auto command = [&](const char* name, const char* what) {
    CLI::App* c = app.add_subcommand(name, what);
    c->add_flag("--json", o.json, "print JSON");
    return c;
  };
  CLI::App* stats = command("stats",
                            "counters per core and in total; drops by reason (non-zero only); the port's own counters "
                            "(--json: with its extended stats)");
  auto* watch = stats->add_option("--watch", o.watch_s, "live rates per core, per job and of drops, every SECONDS")
                    ->expected(0, 1)
                    ->default_str("1")
                    ->check(CLI::Range(0.05, 3600.0))
                    ->type_name("[SECONDS]");
  stats->add_option("--count", o.count, "with --watch: stop after N refreshes")
      ->needs(watch)
      ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
  CLI::App* jobs = command("jobs", "jobs and control-plane counters");
  CLI::App* port = command("port",
                           "the data port's offload path (rte_flow steering, RSS + software dispatch, XDP program), "
                           "why, and its probed capabilities");
  CLI::App* config =
      command("config", "the agg.conf settings the running sumcastd uses (every key, defaults filled in)");
  CLI::App* check = command("check", "validate an agg.conf without starting anything");
  check->add_option("FILE", o.file, "the agg.conf")->required();
  CLI::App* version = command("version", "versions of sumcastctl and of the running sumcastd");
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (stats->parsed()) return cmd_stats(o);
  if (jobs->parsed()) return cmd_jobs(o);
  if (port->parsed()) return cmd_port(o);
  if (config->parsed()) return cmd_config(o);
  if (check->parsed()) return cmd_check(o);
  if (version->parsed()) return cmd_version(o);
  return kExitUsage;  // require_subcommand(1) leaves no other case
}
