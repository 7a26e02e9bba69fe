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
#include <vector>

#include "sumcast/config/agg_config.h"
#include "sumcast/core_counters.h"
#include "sumcast/ctl/json.h"
#include "sumcast/ctl/telemetry_client.h"
#include "sumcast/ctl/watch.h"

#ifndef SUMCAST_VERSION
#define SUMCAST_VERSION "0.0.0"
#endif

namespace {

using sumcast::Result;
using sumcast::ctl::JsonValue;
using sumcast::ctl::TelemetryClient;

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

void usage(FILE* out) {
  std::fprintf(out,
               "usage: sumcastctl [--prefix P | --socket PATH] [--timeout MS] COMMAND\n"
               "  stats [--json]   counters per core and in total; drops by reason (non-zero only); the\n"
               "                   port's own counters (--json: with its extended stats)\n"
               "  stats --watch [SECONDS] [--count N] [--json]\n"
               "                   live rates per core, per job and of drops, refreshed every SECONDS (1)\n"
               "  jobs [--json]    jobs and control-plane counters\n"
               "  port [--json]    the data port's offload path (rte_flow steering, RSS + software\n"
               "                   dispatch, XDP program), why, and its probed capabilities\n"
               "  check [--json] FILE  validate an agg.conf without starting anything\n"
               "  version [--json] versions of sumcastctl and of the running sumcastd\n"
               "  --prefix P       sumcastd's eal.file_prefix (default \"sumcast\")\n"
               "  --socket PATH    the telemetry socket itself (instead of --prefix)\n"
               "  --timeout MS     reply timeout (default 2000)\n");
}

struct Options {
  std::string prefix = "sumcast";
  std::string socket;
  uint32_t timeout_ms = 2000;
  std::string command;
  std::vector<std::string> args;
};

std::string socket_path(const Options& o) {
  return o.socket.empty() ? sumcast::ctl::telemetry_socket_path(o.prefix) : o.socket;
}

Result<std::unique_ptr<TelemetryClient>> connect(const Options& o) {
  return TelemetryClient::connect(socket_path(o), o.timeout_ms);
}

bool has_flag(const std::vector<std::string>& args, std::string_view flag) {
  for (const std::string& a : args) {
    if (a == flag) return true;
  }
  return false;
}

int fail(const sumcast::Status& st) {
  std::fprintf(stderr, "sumcastctl: %s\n", st.message().c_str());
  return kExitFail;
}

void print_row(const std::string& name, const std::vector<const JsonValue*>& cols, const JsonValue& total,
               const std::string& key) {
  std::printf("%-26s", name.c_str());
  for (const JsonValue* c : cols) std::printf(" %14" PRIu64, c->uint_at(key));
  std::printf(" %14" PRIu64 "\n", total.uint_at(key));
}

// One refresh of `stats --watch`: every core's counters and the jobs, and when.
Result<sumcast::ctl::Reading> read_once(TelemetryClient& client) {
  sumcast::ctl::Reading r;
  const auto t0 = std::chrono::steady_clock::now();
  Result<JsonValue> top = client.query("/sumcast/stats");
  if (!top.ok()) return top.status();
  if (!top->is_object()) return sumcast::Status::not_found("/sumcast/stats: no answer (is this sumcastd?)");
  const uint64_t cores = top->uint_at("cores");
  for (uint64_t i = 0; i < cores; ++i) {
    Result<JsonValue> c = client.query("/sumcast/stats," + std::to_string(i));
    if (!c.ok()) return c.status();
    r.cores.push_back(std::move(c.value()));
  }
  Result<JsonValue> jobs = client.query("/sumcast/jobs");
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
  const uint64_t pid = (*client)->greeting().uint_at("pid");
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
  for (size_t i = 0; i < o.args.size(); ++i) {
    if (o.args[i] != "--watch") continue;
    double interval = 1.0;
    uint64_t count = 0;
    for (size_t k = 0; k < o.args.size(); ++k) {
      const std::string& a = o.args[k];
      if (k == i + 1 && !a.empty() && a[0] != '-') {
        char* end = nullptr;
        interval = std::strtod(a.c_str(), &end);
        if (end == a.c_str() || *end != '\0' || !(interval >= 0.05) || interval > 3600) {
          std::fprintf(stderr, "sumcastctl: stats --watch: SECONDS must be 0.05..3600, not '%s'\n", a.c_str());
          return kExitUsage;
        }
      } else if (a == "--count") {
        if (k + 1 >= o.args.size()) {
          std::fprintf(stderr, "sumcastctl: stats: --count needs a number\n");
          return kExitUsage;
        }
        count = std::strtoull(o.args[k + 1].c_str(), nullptr, 10);
        if (count == 0) {
          std::fprintf(stderr, "sumcastctl: stats: --count must be at least 1\n");
          return kExitUsage;
        }
      }
    }
    return cmd_watch(o, interval, count, has_flag(o.args, "--json"));
  }
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<JsonValue> top = (*client)->query("/sumcast/stats");
  if (!top.ok()) return fail(top.status());
  if (!top->is_object()) return fail(sumcast::Status::not_found("/sumcast/stats: no answer (is this sumcastd?)"));
  const uint64_t cores = top->uint_at("cores");
  const JsonValue* total = top->find("total");
  if (total == nullptr || !total->is_object())
    return fail(sumcast::Status::invalid_argument("/sumcast/stats: no totals"));
  std::vector<JsonValue> per_core;
  per_core.reserve(cores);
  for (uint64_t i = 0; i < cores; ++i) {
    Result<JsonValue> c = (*client)->query("/sumcast/stats," + std::to_string(i));
    if (!c.ok()) return fail(c.status());
    per_core.push_back(std::move(c.value()));
  }
  // The port's own counters and extended stats (an older sumcastd has none).
  Result<JsonValue> port = (*client)->query("/sumcast/stats,port");
  const bool have_port = port.ok() && port->is_object();
  if (has_flag(o.args, "--json")) {
    std::vector<std::pair<std::string, JsonValue>> members;
    members.emplace_back("cores", JsonValue::unsigned_integer(cores));
    members.emplace_back("total", *total);
    if (have_port) members.emplace_back("port", port.value());
    members.emplace_back("per_core", JsonValue::array(per_core));
    std::printf("%s\n", sumcast::ctl::to_json(JsonValue::object(std::move(members)), 2).c_str());
    return 0;
  }
  std::vector<const JsonValue*> cols;
  cols.reserve(per_core.size());
  for (const JsonValue& c : per_core) cols.push_back(&c);
  const uint64_t pid = (*client)->greeting().uint_at("pid");
  std::printf("sumcastd pid %" PRIu64 ", %" PRIu64 " core(s)\n", pid, cores);
  std::printf("%-26s", "counter");
  for (uint64_t i = 0; i < cores; ++i) std::printf(" %14s", ("core" + std::to_string(i)).c_str());
  std::printf(" %14s\n", "total");
  // The per-core counters in their order (sumcast/core_counters.h says which are shown when).
  for (const sumcast::CoreCounterInfo& row : sumcast::kCoreCounterInfo) {
    if (row.shown == sumcast::CounterShown::kAlways ||
        (row.shown == sumcast::CounterShown::kNonZero && total->uint_at(row.name) != 0)) {
      print_row(row.name, cols, *total, row.name);
    }
  }
  bool any_drop = false;
  for (const auto& [key, value] : total->members()) {
    if (key.rfind("drop_", 0) != 0 || value.as_uint() == 0) continue;
    if (!any_drop) std::printf("drops by reason:\n");
    any_drop = true;
    print_row("  " + key.substr(5), cols, *total, key);
  }
  if (!any_drop) std::printf("drops: none\n");
  if (have_port) {
    // Counted by the port before any engine core saw a frame (imissed, kernel_ring_drops: frames
    // no engine counter shows); extended stats with --json.
    std::printf("port (its own counters):\n");
    for (const auto& [key, value] : port->members()) {
      if (key.rfind("xstat_", 0) != 0) std::printf("  %-24s %14" PRIu64 "\n", key.c_str(), value.as_uint());
    }
  }
  return 0;
}

// Joins the pieces of a long telemetry string (key, key_2, key_3, ...).
std::string long_string(const JsonValue& d, const std::string& key) {
  std::string s;
  for (int n = 1;; ++n) {
    const JsonValue* v = d.find(n == 1 ? key : key + "_" + std::to_string(n));
    if (v == nullptr || !v->is_string()) return s;
    s += v->as_string();
  }
}

int cmd_port(const Options& o) {
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<JsonValue> port = (*client)->query("/sumcast/port");
  if (!port.ok()) return fail(port.status());
  if (!port->is_object()) return fail(sumcast::Status::not_found("/sumcast/port: no answer (is this sumcastd?)"));
  if (has_flag(o.args, "--json")) {
    std::printf("%s\n", sumcast::ctl::to_json(port.value(), 2).c_str());
    return 0;
  }
  const JsonValue* path = port->find("path");
  const JsonValue* device = port->find("device");
  std::printf("port %s: path %s, software dispatch %s, queues %" PRIu64 "%s, rte_flow rules %" PRIu64
              ", tx IPv4 checksum %s\n",
              device != nullptr ? device->as_string().c_str() : "?", path != nullptr ? path->as_string().c_str() : "?",
              port->uint_at("software_dispatch") != 0 ? "on" : "off", port->uint_at("queues"),
              port->uint_at("rss") != 0 ? " (rss)" : "", port->uint_at("flow_rules"),
              port->uint_at("tx_ipv4_cksum_offload") != 0 ? "in the NIC" : "in software");
  std::printf("why: %s\n", long_string(port.value(), "reason").c_str());
  if (port->find("xdp_prog_id") != nullptr) {
    std::printf("xdp program %" PRIu64 ": redirected %" PRIu64 " passed %" PRIu64 " redirect_failed %" PRIu64 "\n",
                port->uint_at("xdp_prog_id"), port->uint_at("xdp_redirected"), port->uint_at("xdp_passed"),
                port->uint_at("xdp_redirect_failed"));
  }
  std::printf("capabilities:\n");
  for (const auto& [key, value] : port->members()) {
    if (key.rfind("cap_", 0) != 0 || !value.is_string()) continue;
    const size_t us = key.rfind('_');
    if (us != std::string::npos && us > 4 && key.find_first_not_of("0123456789", us + 1) == std::string::npos &&
        port->find(key.substr(0, us)) != nullptr) {
      continue;  // a continuation piece, printed with its first
    }
    std::printf("  %-22s %s\n", key.substr(4).c_str(), long_string(port.value(), key).c_str());
  }
  return 0;
}

int cmd_jobs(const Options& o) {
  auto client = connect(o);
  if (!client.ok()) return fail(client.status());
  Result<JsonValue> jobs = (*client)->query("/sumcast/jobs");
  if (!jobs.ok()) return fail(jobs.status());
  if (!jobs->is_object()) return fail(sumcast::Status::not_found("/sumcast/jobs: no answer (is this sumcastd?)"));
  if (has_flag(o.args, "--json")) {
    std::printf("%s\n", sumcast::ctl::to_json(jobs.value(), 2).c_str());
    return 0;
  }
  std::printf("%8s  %-20s %5s %10s %6s %4s %8s %16s %18s  %s\n", "job_id", "name", "world", "registered", "dtype", "op",
              "running", "slots_completed", "ms_since_progress", "results");
  uint64_t shown = 0;
  for (const auto& [key, j] : jobs->members()) {
    if (key.rfind("job", 0) != 0 || !j.is_object()) continue;
    const JsonValue* name = j.find("name");
    const JsonValue* dtype = j.find("dtype");
    const JsonValue* op = j.find("op");
    const JsonValue* group = j.find("multicast_group");
    // Results by multicast: the group, its frames and the unicast answers; else one per member.
    const std::string results = j.uint_at("multicast") != 0 && group != nullptr
                                    ? "multicast " + group->as_string() + " (" +
                                          std::to_string(j.uint_at("group_frames")) + " to the group, " +
                                          std::to_string(j.uint_at("unicast_answers")) + " unicast answers)"
                                    : "unicast";
    std::printf("%8" PRIu64 "  %-20s %5" PRIu64 " %10" PRIu64 " %6s %4s %8s %16" PRIu64 " %18" PRIu64 "  %s\n",
                j.uint_at("job_id"), name != nullptr ? name->as_string().c_str() : "?", j.uint_at("world_size"),
                j.uint_at("registered"), dtype != nullptr ? dtype->as_string().c_str() : "?",
                op != nullptr ? op->as_string().c_str() : "?", j.uint_at("running") != 0 ? "yes" : "no",
                j.uint_at("slots_completed"), j.uint_at("ms_since_progress"), results.c_str());
    ++shown;
  }
  if (shown == 0) std::printf("(no jobs)\n");
  if (const JsonValue* server = jobs->find("server"); server != nullptr && server->is_object()) {
    std::string line;
    for (const auto& [key, value] : server->members()) {
      if (value.as_uint() != 0) line += " " + key + " " + std::to_string(value.as_uint());
    }
    std::printf("control plane:%s\n", line.empty() ? " (all counters zero)" : line.c_str());
  }
  return 0;
}

JsonValue strings(const std::vector<std::string>& v) {
  std::vector<JsonValue> items;
  for (const std::string& s : v) items.push_back(JsonValue::string(s));
  return JsonValue::array(std::move(items));
}

const char* huge_pages_name(sumcast::config::HugePages h) {
  switch (h) {
    case sumcast::config::HugePages::kOn:
      return "on";
    case sumcast::config::HugePages::kOff:
      return "off";
    case sumcast::config::HugePages::kAuto:
      break;
  }
  return "auto";
}

// The settings of a valid agg.conf (defaults filled in; the token file's path, never its contents).
JsonValue config_json(const sumcast::config::AggConfig& c) {
  using V = JsonValue;
  const auto u = [](uint64_t x) { return V::unsigned_integer(x); };
  const auto& e = c.eal;
  const auto& p = c.port;
  const auto& d = c.dataplane;
  const auto& k = c.control;
  const auto& t = c.telemetry;
  return V::object({
      {"file", V::string(c.path)},
      {"valid", V::boolean(true)},
      {"eal", V::object({{"lcores", V::string(e.lcores)},
                         {"file_prefix", V::string(e.file_prefix)},
                         {"memory_mb", u(e.memory_mb)},
                         {"huge_pages", V::string(huge_pages_name(e.huge_pages))},
                         {"vdevs", strings(e.vdevs)},
                         {"allow", strings(e.allow)},
                         {"extra_args", strings(e.extra_args)}})},
      {"port", V::object({{"device", V::string(p.device)},
                          {"mac", V::string(p.mac)},
                          {"ipv4", V::string(p.ipv4)},
                          {"mtu", u(p.mtu)},
                          {"rx_desc", u(p.rx_desc)},
                          {"tx_desc", u(p.tx_desc)}})},
      {"dataplane", V::object({{"worker_cores", u(d.worker_cores)},
                               {"burst_size", u(d.burst_size)},
                               {"slots_per_job", u(d.slots_per_job)},
                               {"max_jobs", u(d.max_jobs)},
                               {"max_ranks", u(d.max_ranks)},
                               {"max_payload_bytes", u(d.max_payload_bytes)},
                               {"dtypes", strings(d.dtypes)},
                               {"verify_icrc", V::boolean(d.verify_icrc)},
                               {"multicast", V::boolean(d.multicast)},
                               {"multicast_group", V::string(d.multicast_group)},
                               {"mbufs", u(d.mbufs)}})},
      {"control", V::object({{"listen_address", V::string(k.listen_address)},
                             {"port", u(k.port)},
                             {"token_file", V::string(k.token_file)},
                             {"max_connections", u(k.max_connections)},
                             {"job_timeout_ms", u(k.job_timeout_ms)},
                             {"register_timeout_ms", u(k.register_timeout_ms)},
                             {"io_timeout_ms", u(k.io_timeout_ms)}})},
      {"telemetry", V::object({{"dpdk_telemetry", V::boolean(t.dpdk_telemetry)},
                               {"prometheus_address", V::string(t.prometheus_address)},
                               {"stats_interval_ms", u(t.stats_interval_ms)}})},
  });
}

int cmd_check(const Options& o) {
  const bool json = has_flag(o.args, "--json");
  std::vector<std::string> files;
  for (const std::string& a : o.args) {
    if (a != "--json") files.push_back(a);
  }
  if (files.size() != 1) {
    std::fprintf(stderr, "sumcastctl: check needs exactly one FILE\n");
    return kExitUsage;
  }
  const std::string& file = files[0];
  Result<sumcast::config::AggConfig> cfg = sumcast::config::load_agg_config(file);
  sumcast::Status st = cfg.ok() ? sumcast::config::validate_agg_config(cfg.value()) : cfg.status();
  if (json) {
    const JsonValue out = st.ok() ? config_json(cfg.value())
                                  : JsonValue::object({{"file", JsonValue::string(file)},
                                                       {"valid", JsonValue::boolean(false)},
                                                       {"error", JsonValue::string(st.message())}});
    std::printf("%s\n", sumcast::ctl::to_json(out, 2).c_str());
    return st.ok() ? 0 : kExitFail;
  }
  if (!st.ok()) return fail(st);
  std::printf("%s: OK\n", file.c_str());
  return 0;
}

int cmd_version(const Options& o) {
  if (has_flag(o.args, "--json")) {
    std::vector<std::pair<std::string, JsonValue>> m;
    m.emplace_back("sumcastctl", JsonValue::string(SUMCAST_VERSION));
    JsonValue daemon;  // null when unreachable
    if (auto client = connect(o); client.ok()) {
      Result<JsonValue> v = (*client)->query("/sumcast/version");
      if (v.ok() && v->is_object()) {
        std::vector<std::pair<std::string, JsonValue>> d = v->members();
        d.emplace_back("pid", JsonValue::unsigned_integer((*client)->greeting().uint_at("pid")));
        daemon = JsonValue::object(std::move(d));
      }
    }
    m.emplace_back("daemon", std::move(daemon));
    m.emplace_back("socket", JsonValue::string(socket_path(o)));
    std::printf("%s\n", sumcast::ctl::to_json(JsonValue::object(std::move(m)), 2).c_str());
    return 0;
  }
  std::printf("sumcastctl %s\n", SUMCAST_VERSION);
  auto client = connect(o);
  if (!client.ok()) {
    std::printf("sumcastd: not reachable at %s\n", socket_path(o).c_str());
    return 0;
  }
  Result<JsonValue> v = (*client)->query("/sumcast/version");
  if (!v.ok() || !v->is_object()) {
    std::printf("sumcastd: no answer to /sumcast/version at %s\n", socket_path(o).c_str());
    return 0;
  }
  const JsonValue* d = v->find("sumcastd");
  const JsonValue* dpdk = v->find("dpdk");
  std::printf("sumcastd %s (%s), pid %" PRIu64 "\n", d != nullptr ? d->as_string().c_str() : "?",
              dpdk != nullptr ? dpdk->as_string().c_str() : "?", (*client)->greeting().uint_at("pid"));
  return 0;
}

// Returns -1 to go on, else the exit status.
int parse(int argc, char** argv, Options* o) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sumcastctl: %s needs %s\n", argv[i], what);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--prefix" || a == "-p") {
      const char* v = value("a file prefix");
      if (v == nullptr) return kExitUsage;
      o->prefix = v;
    } else if (a == "--socket") {
      const char* v = value("a path");
      if (v == nullptr) return kExitUsage;
      o->socket = v;
    } else if (a == "--timeout") {
      const char* v = value("milliseconds");
      if (v == nullptr) return kExitUsage;
      o->timeout_ms = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
      if (o->timeout_ms == 0) o->timeout_ms = 2000;
    } else if (a == "-h" || a == "--help" || a == "help") {
      usage(stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "sumcastctl: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return kExitUsage;
    } else {
      break;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return kExitUsage;
  }
  o->command = argv[i++];
  for (; i < argc; ++i) o->args.emplace_back(argv[i]);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int rc = parse(argc, argv, &o); rc >= 0) return rc;
  for (size_t i = 0; i < o.args.size(); ++i) {
    const std::string& a = o.args[i];
    bool known = a == "--json" || o.command == "check";
    if (o.command == "stats") {
      known = known || a == "--watch" || a == "--count" ||
              (i > 0 && (o.args[i - 1] == "--watch" || o.args[i - 1] == "--count"));
    }
    if (!known) {
      std::fprintf(stderr, "sumcastctl: %s: unknown argument '%s'\n", o.command.c_str(), a.c_str());
      return kExitUsage;
    }
  }
  if (o.command == "stats") return cmd_stats(o);
  if (o.command == "jobs") return cmd_jobs(o);
  if (o.command == "port") return cmd_port(o);
  if (o.command == "check") return cmd_check(o);
  if (o.command == "version") return cmd_version(o);
  std::fprintf(stderr, "sumcastctl: unknown command '%s'\n", o.command.c_str());
  usage(stderr);
  return kExitUsage;
}
