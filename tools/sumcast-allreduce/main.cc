// sumcast-allreduce: all-reduce bandwidth through Sumcast appliances, in the manner of
// nccl-tests' all_reduce_perf. Every rank runs this program (or several ranks run as threads of
// one process with --local-ranks); rank 0 prints one line per message size, and every process ends
// with a line of its first rank's non-zero counters ("# counters of rank R: name=value ...").
//
// Bus bandwidth. nccl-tests defines busbw = algbw * 2(n-1)/n for all-reduce, the traffic a ring
// puts on each link. Through a summation service every byte crosses each host's link exactly once
// in each direction (contribution up, result down), whatever n, so here busbw = algbw: it is the
// figure to compare with the link's bandwidth, and with the ring's busbw.
//
// --check compares every result of every iteration with the exact answer computed locally from
// the same deterministic, integer-valued inputs every rank generates (exact in any dtype while
// |sum| stays representable: fp16 up to 512 ranks, bf16 up to 64). With --inputs real the inputs
// are non-integer, of mixed magnitudes and signs, so that the sum depends on the order of the
// additions; --check then needs --deterministic and compares with the documented deterministic
// result (docs/fidelity.md): the rank-order sum in the accumulator type, rounded once. --dump
// writes the results' bytes, to compare runs bitwise.
//
// Timing, as MPI benchmarks time it: before each timed call the ranks meet in a one-element
// all-reduce (their MPI_Barrier), after the untimed preparation of that call (new inputs and
// expected results with --check), so that no rank's time includes another's preparation.
//
// --cpu-log writes, per process, the CPU time (user + system, every thread of the process) spent
// inside its first local rank's timed calls, per size: the CPU a call costs, without the untimed
// preparation and checking around it (perf/cluster/run compares it with perf/mpi/allreduce_bench's).
//
// Exit status: 0 when every call succeeded and every check passed, 1 otherwise, 2 on bad usage.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/embedded/service.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/shim/address.h"
#include "sumcast/shim/communicator.h"
#include "sumcast/shim/local_group.h"
#include "sumcast/shim/placement.h"
#include "sumcast/token_file.h"

namespace {

using sumcast::Status;
using sumcast::shim::CommConfig;
using sumcast::shim::Communicator;
using sumcast::wire::Dtype;
using sumcast::wire::ReduceOp;

// One entry of the job's aggregator list (--appliance or --host-agg), in command-line order.
struct AggregatorSpec {
  std::string address;  // control endpoint "host:port"
  double weight = 1.0;  // explicit weight (with "@W")
  bool explicit_weight = false;
  bool host = false;  // --host-agg: a worker host's embedded summation service
  int host_index = -1;
};

struct Options {
  std::vector<sumcast::shim::ApplianceAddress> appliances;  // what the communicator gets (after placement)
  std::vector<AggregatorSpec> aggregators;
  int hosts = 0;                       // worker hosts for the placement; 0: --world
  std::vector<double> host_mbit;       // one for all, or one per host; empty: 1 (only ratios matter)
  std::vector<double> appliance_mbit;  // one for all, or one per --appliance; empty: as the hosts
  std::string placement;               // auto | weights; "": weights when any @W is given, else auto
  std::string job = "sumcast-allreduce";
  int rank = 0;
  int world = 0;
  int local_ranks = 1;
  std::string token_file;
  Dtype dtype = Dtype::kFp32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t min_bytes = 4;
  uint64_t max_bytes = 64ull << 20;
  std::vector<uint64_t> counts;  // element counts to run, in order: --counts, else the doubling sweep
  int iters = 20;
  int warmup = 5;
  uint32_t gap_us = 0;  // --gap-us: idle time before each timed call (not timed)
  bool check = false;
  bool in_place = false;
  bool json = false;
  bool deterministic = false;
  bool multicast = false;
  bool real_inputs = false;
  std::string dump;  // file for the first local rank's results (each size's last iteration)
  std::string bind_ip;
  bool verbs = false;          // --transport verbs
  std::string rdma_device;     // --rdma-device
  std::string rdma_interface;  // --rdma-interface
  bool verbose = false;        // --verbose: say which transport, GID, MTU and payload were chosen
  uint32_t dscp = 0;           // --dscp: DSCP of contributions
  int repair_dscp = -1;        // --repair-dscp: DSCP of resends (-1: --dscp)
  bool ecn = false;            // --ecn: mark contributions ECT(0)
  bool cnp_reaction = true;    // --cnp-reaction on|off
  bool loss_notices = true;    // --loss-notices on|off
  uint32_t window_cut = 50;    // --window-cut PERCENT
  uint32_t window_step = 1;    // --window-step N
  uint32_t window_cut_us = 0;  // --window-cut-interval-us U
  uint32_t send_queue_us = CommConfig{}.send_queue_us;  // --send-queue-us U
  uint32_t payload = 1024;
  bool payload_explicit = false;
  uint32_t slots = 0;
  uint32_t rto_us = 5000;
  uint32_t busy_poll_us = 0;
  std::string udp_gro = "auto";
  std::string udp_gso = "off";
  uint32_t retries = 100;
  uint32_t op_timeout_ms = 30000;
  CommConfig::Failover failover = CommConfig::Failover::kAuto;
  uint32_t failover_after_ms = CommConfig{}.failover_after_ms;
  uint32_t failover_timeout_ms = CommConfig{}.failover_timeout_ms;
  uint32_t failover_max = CommConfig{}.failover_max;
  std::string call_log;  // --call-log PATH: the first local rank's calls, one line each
  std::string cpu_log;   // --cpu-log PATH: the process's CPU in the first local rank's timed calls, per size
  std::string serve;     // "ip[:port]": host an embedded summation service here
  int gpus = 0;          // --gpus N: each rank owns N buffers, reduced on the host by the planner's plan
};

// A comma-separated list of non-zero sizes (K/M/G suffixes allowed).
bool parse_counts(const std::string& s, std::vector<uint64_t>* out) {
  out->clear();
  size_t at = 0;
  for (;;) {
    const size_t comma = s.find(',', at);
    const auto n = sumcast::parse_byte_size(
        std::string_view(s).substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (!n || *n == 0) return false;
    out->push_back(*n);
    if (comma == std::string::npos) return true;
    at = comma + 1;
  }
}

// A comma-separated list of positive rates.
bool parse_rates(const std::string& text, std::vector<double>* out) {
  out->clear();
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0) || v > 1e12) return false;
    out->push_back(v);
    if (comma == std::string::npos) return true;
    at = comma + 1;
  }
}

int usage_error(const std::string& why) {
  std::fprintf(stderr, "sumcast-allreduce: %s\nrun sumcast-allreduce --help for the options\n", why.c_str());
  return sumcast::cli::kExitUsage;
}

// Returns -1 to go on, else the exit status (0 after --help/--version, 2 on a usage error).
int parse_args(int argc, char** argv, Options* o) {
  CLI::App app{
      "All-reduce bandwidth and exactness through Sumcast appliances, like nccl-tests' all_reduce_perf:\n"
      "  sumcast-allreduce --appliance HOST:PORT[@WEIGHT]... --world N [--rank R] [options]\n"
      "busbw = algbw: through a summation service each byte crosses a host link once each way.",
      "sumcast-allreduce"};
  sumcast::cli::setup(app);
  // As before: an option given twice takes its last value (--appliance and --host-agg add up).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // The aggregators, --appliance and --host-agg in the order given: each occurrence is taken as it
  // is parsed.
  const auto add_aggregator = [o](bool host, std::string text) {
    AggregatorSpec spec;
    spec.host = host;
    const char* name = host ? "--host-agg" : "--appliance";
    if (host) {
      int before = 0;
      for (const auto& g : o->aggregators) before += g.host ? 1 : 0;
      spec.host_index = before;
      if (const size_t eq = text.find('='); eq != std::string::npos) {
        const std::string index = text.substr(0, eq);
        char* end = nullptr;
        const long h = std::strtol(index.c_str(), &end, 10);
        if (index.empty() || *end != '\0' || h < 0 || h > 65534) {
          throw CLI::ValidationError(name, "host index must be 0..65534, not '" + index + "'");
        }
        spec.host_index = static_cast<int>(h);
        text = text.substr(eq + 1);
      }
    }
    spec.explicit_weight = text.find('@') != std::string::npos;
    if (Status st = sumcast::shim::split_weight(text, &spec.address, &spec.weight); !st.ok()) {
      throw CLI::ValidationError(name, st.to_string());
    }
    o->aggregators.push_back(spec);
  };
  app.add_option_function<std::string>(
         "--appliance", [add_aggregator](const std::string& v) { add_aggregator(false, v); },
         "control endpoint of an appliance (repeatable; weight W > 0: each call's bytes are split in proportion; "
         "see --placement)")
      ->type_name("HOST:PORT[@W]")
      ->trigger_on_parse();
  app.add_option_function<std::string>(
         "--host-agg", [add_aggregator](const std::string& v) { add_aggregator(true, v); },
         "a worker host's summation service (sumcast-serve), aggregating like an appliance; H: its host's index "
         "(default: the number of --host-agg before it). Aggregators are used in the order given")
      ->type_name("[H=]HOST:PORT[@W]")
      ->trigger_on_parse();
  app.add_option("--placement", o->placement,
                 "auto (default without @W): the split that minimises the slowest link (docs/scale-out.md); "
                 "weights: the @W given (default 1)")
      ->check(CLI::IsMember({"auto", "weights"}))
      ->type_name("auto|weights");
  app.add_option("--hosts", o->hosts, "worker hosts in the job (0: --world)")->check(CLI::Range(1, 65535));
  const auto rates = [&app](const char* name, std::vector<double>* out, const char* what) {
    app.add_option_function<std::string>(
           name,
           [name, out](const std::string& v) {
             if (!parse_rates(v, out)) throw CLI::ValidationError(name, "needs positive rates R[,R...], not " + v);
           },
           what)
        ->type_name("R[,R...]");
  };
  rates("--host-mbit", &o->host_mbit, "the hosts' link bandwidths, one for all or one per host (default 1)");
  rates("--appliance-mbit", &o->appliance_mbit, "the appliances' link bandwidths (default: the first host's)");
  app.add_option("--job", o->job, "job name, the same on every rank");
  app.add_option("--rank", o->rank, "this process's (first) rank")->check(CLI::Range(0, 65534));
  app.add_option("--world", o->world, "the job's size (required)")->check(CLI::Range(1, 65535));
  app.add_option("--local-ranks", o->local_ranks, "run ranks R..R+K-1 as threads of this process")
      ->check(CLI::Range(1, 1024))
      ->type_name("K");
  app.add_option("--token-file", o->token_file, "shared secret (first line); default $SUMCAST_TOKEN_FILE")
      ->type_name("PATH");
  sumcast::cli::add_named_option(app, "--dtype", &o->dtype, sumcast::wire::kDtypeCount, sumcast::wire::dtype_name,
                                 "element type (default fp32)");
  sumcast::cli::add_named_option(app, "--op", &o->op, sumcast::wire::kReduceOpCount, sumcast::wire::reduce_op_name,
                                 "reduction (default sum)");
  sumcast::cli::add_size_option(app, "--min-bytes", &o->min_bytes, "smallest size of the doubling sweep (default 4)");
  sumcast::cli::add_size_option(app, "--max-bytes", &o->max_bytes, "largest size of the doubling sweep (default 64M)");
  app.add_option_function<std::string>(
         "--counts",
         [o](const std::string& v) {
           if (!parse_counts(v, &o->counts)) {
             throw CLI::ValidationError("--counts", "needs non-zero counts N[,N...] (K, M, G allowed), not " + v);
           }
         },
         "element counts to run, in this order, instead of the sweep")
      ->type_name("N,N,...");
  app.add_option("--iters", o->iters, "timed iterations per size")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", o->warmup, "untimed iterations per size")->check(CLI::Range(0, 1000000));
  app.add_option("--gap-us", o->gap_us,
                 "idle time before each timed call, not timed: the latency of a call that finds the appliance idle")
      ->check(CLI::Range(0, 10000000))
      ->type_name("U");
  app.add_flag("--check", o->check,
               "verify every result exactly; count wrong elements (each iteration gets new inputs; an out-of-place "
               "receive buffer is poisoned before each call, so a result not written is wrong)");
  app.add_flag("--in-place", o->in_place, "send buffer = receive buffer (inputs rewritten each time)");
  app.add_option("--gpus", o->gpus,
                 "each rank owns N buffers (host memory standing for N GPUs) and calls the local-group all-reduce "
                 "(sumcast_allreduce_local_group): reduced on the host by the topology planner's plan, one "
                 "contribution per rank; buffer i of rank r holds the inputs of rank r*N+i of a job of world*N; in "
                 "place; fp32/fp64/int32 (0: off)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--deterministic", o->deterministic, "ask for deterministic summation (docs/fidelity.md)");
  app.add_flag("--multicast", o->multicast,
               "ask for results by IPv4 multicast (the appliance must allow it; the counters line then shows "
               "multicast=1)");
  app.add_option_function<std::string>(
         "--inputs", [o](const std::string& v) { o->real_inputs = v == "real"; },
         "integer inputs (default; exact sums) or non-integer ones of mixed magnitudes (sums depend on the order "
         "of additions; --check then needs --deterministic)")
      ->check(CLI::IsMember({"int", "real"}))
      ->type_name("int|real");
  app.add_option("--dump", o->dump,
                 "write the first local rank's results (each size's last iteration, raw bytes in order) to PATH "
                 "(%r: that rank)")
      ->type_name("PATH");
  app.add_option("--bind", o->bind_ip, "local IPv4 for the data socket (default: route to appliance)")->type_name("IP");
  app.add_option_function<uint32_t>(
         "--payload",
         [o](uint32_t v) {
           o->payload = v;
           o->payload_explicit = true;
         },
         "payload bytes per packet wanted (default: UDP the largest RoCE payload the path MTU carries, 1024 at "
         "1500; verbs the port's MTU less the 32-byte header)")
      ->check(CLI::Range(2, 4096))
      ->type_name("B");
  app.add_option("--slots", o->slots, "window slots (0 = default)")->check(CLI::Range(0, 65535))->type_name("S");
  app.add_option_function<std::string>(
         "--transport", [o](const std::string& v) { o->verbs = v == "verbs"; },
         "kernel UDP socket (default) or an RDMA UD QP (RoCEv2 NIC)")
      ->check(CLI::IsMember({"udp", "verbs"}))
      ->type_name("udp|verbs");
  app.add_option("--rdma-device", o->rdma_device, "verbs: the device")->type_name("NAME");
  app.add_option("--rdma-interface", o->rdma_interface,
                 "verbs: the network interface whose RoCEv2 GID to use (a VLAN interface carries its VLAN)")
      ->type_name("IF");
  app.add_flag("--verbose", o->verbose, "say which transport, GID, MTU and payload were chosen");
  app.add_option("--dscp", o->dscp, "DSCP of contributions (match the appliance's port.dscp)")
      ->check(CLI::Range(0, 63))
      ->type_name("D");
  app.add_option("--repair-dscp", o->repair_dscp,
                 "udp: DSCP of resends, so that a queue serving it first lets repairs skip the first "
                 "transmissions queued before them (default -1: --dscp)")
      ->check(CLI::Range(-1, 63))
      ->type_name("D");
  app.add_flag("--ecn", o->ecn, "mark contributions ECT(0) (default not-ECT)");
  app.add_option_function<std::string>(
         "--cnp-reaction", [o](const std::string& v) { o->cnp_reaction = v == "on"; },
         "udp: cut the window on a CNP or a CE-marked result (default on)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  app.add_option_function<std::string>(
         "--loss-notices", [o](const std::string& v) { o->loss_notices = v == "on"; },
         "ask the appliances to tell a rank of its lost contributions (default on; off for an appliance that "
         "predates them, which refuses the registration otherwise)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  app.add_option("--window-cut", o->window_cut, "a CNP leaves PCT% of the window")
      ->check(CLI::Range(1, 99))
      ->type_name("PCT");
  app.add_option("--window-step", o->window_step, "N slots regrow per window of results")
      ->check(CLI::Range(1, 65535))
      ->type_name("N");
  app.add_option("--window-cut-interval-us", o->window_cut_us, "at most one cut per U us (0: per smoothed RTT)")
      ->check(CLI::Range(0, 60000000))
      ->type_name("U");
  app.add_option("--send-queue-us", o->send_queue_us,
                 "UDP: hold new chunks while more than U us of the result rate (at least 128 KiB) is queued "
                 "below the socket (qdisc, device), so resends do not wait behind a window (default 2000; 0: off)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("U");
  app.add_option("--udp-gro", o->udp_gro,
                 "UDP: receive results the kernel coalesced (UDP_GRO) where it allows it, or off")
      ->check(CLI::IsMember({"auto", "off"}))
      ->type_name("auto|off");
  app.add_option("--udp-gso", o->udp_gso,
                 "UDP: send contributions in UDP_SEGMENT trains (segment k with IP ID k; sumcastd reads it, "
                 "kernel-UDP aggregators find it)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  app.add_option("--busy-poll-us", o->busy_poll_us, "UDP: SO_BUSY_POLL of the data sockets (0: off)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("U");
  app.add_option("--rto-us", o->rto_us, "retransmission timeout")->check(CLI::Range(1, 100000000))->type_name("U");
  app.add_option("--retries", o->retries, "retransmissions per packet")->check(CLI::Range(0, 1000000000));
  app.add_option("--op-timeout-ms", o->op_timeout_ms, "bound of one call")
      ->check(CLI::Range(0, 100000000))
      ->type_name("T");
  app.add_option_function<std::string>(
         "--failover",
         [o](const std::string& v) {
           o->failover = v == "on"    ? CommConfig::Failover::kOn
                         : v == "off" ? CommConfig::Failover::kOff
                                      : CommConfig::Failover::kAuto;
         },
         "survive the loss of an aggregator (docs/failover.md); auto: on with more than one aggregator (default)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->type_name("auto|on|off");
  app.add_option("--failover-after-ms", o->failover_after_ms,
                 "silence that declares an aggregator lost (< --op-timeout-ms)")
      ->check(CLI::Range(1, 100000000))
      ->type_name("T");
  app.add_option("--failover-timeout-ms", o->failover_timeout_ms, "bound of one failover")
      ->check(CLI::Range(1, 100000000))
      ->type_name("T");
  app.add_option("--failover-max", o->failover_max, "failovers per run; each is printed (# failover ...)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("N");
  app.add_option("--call-log", o->call_log,
                 "the first local rank's calls, one line each: the call's end (Unix ns), its duration (us) and "
                 "bytes; for perf/failover")
      ->type_name("PATH");
  app.add_option("--cpu-log", o->cpu_log,
                 "per size, one line \"bytes iterations cpu_s\": the CPU seconds (user + system, all threads) this "
                 "process spent in its first local rank's timed calls, preparation and checks excluded (%r: that "
                 "rank); for perf/cluster/run")
      ->type_name("PATH");
  app.add_option("--serve", o->serve,
                 "also host an embedded summation service (UDP 4791, control PORT, default 4790) and use it when no "
                 "--appliance is given; list it with --host-agg to make this host an aggregator (the ranks wait for "
                 "every aggregator's control port first)")
      ->type_name("IP[:PORT]");
  app.add_flag("--json", o->json, "print JSON lines instead of the table");
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (o->world == 0) return usage_error("--world is required");
  if (o->rank + o->local_ranks > o->world) {
    return usage_error("ranks " + std::to_string(o->rank) + ".." + std::to_string(o->rank + o->local_ranks - 1) +
                       " exceed --world " + std::to_string(o->world));
  }
  if (o->real_inputs && o->check && (!o->deterministic || o->op != ReduceOp::kSum)) {
    return usage_error("--check with --inputs real needs --deterministic and --op sum");
  }
  if (o->gpus > 0 &&
      (o->real_inputs || (o->dtype != Dtype::kFp32 && o->dtype != Dtype::kFp64 && o->dtype != Dtype::kInt32))) {
    return usage_error("--gpus needs integer inputs and fp32, fp64 or int32");
  }
  if (o->aggregators.empty() && o->serve.empty()) return usage_error("give --appliance (or --serve)");
  const size_t es = sumcast::wire::dtype_size(o->dtype);
  if (o->counts.empty()) {
    o->min_bytes = std::max<uint64_t>(es, o->min_bytes / es * es);
    if (o->max_bytes < o->min_bytes) o->max_bytes = o->min_bytes;
    for (uint64_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
      o->counts.push_back(bytes / es);
      if (bytes > o->max_bytes / 2) break;  // no overflow past max
    }
  }
  if (o->token_file.empty() && std::getenv("SUMCAST_TOKEN_FILE") != nullptr) {
    o->token_file = std::getenv("SUMCAST_TOKEN_FILE");
  }
  return -1;
}

// ---- Deterministic inputs -----------------------------------------------------------------

constexpr int input_value(int rank, uint64_t i, int salt) {
  return static_cast<int>((i * 7 + static_cast<uint64_t>(rank) * 13 + static_cast<uint64_t>(salt)) % 9) - 4;
}

// input_value repeats every kInputPeriod elements (7 * 9 is a multiple of 9), and so do the sums,
// minima and maxima of it: fill_input and fill_expected compute one period from the definition and
// tile it, so that the check costs each rank O(count), not O(count * world), per call (on a bed
// whose ranks share the CPUs, the check of one rank ran while the others' calls were timed).
constexpr uint64_t kInputPeriod = 9;
static_assert(input_value(0, 0, 0) == input_value(0, kInputPeriod, 0) &&
              input_value(5, 3, 7) == input_value(5, 3 + 40 * kInputPeriod, 7) &&
              input_value(1234, 8, 99) == input_value(1234, 8 + kInputPeriod, 99));

// p holds the first min(count, kInputPeriod) elements of es bytes; repeats them up to count.
void tile_period(uint8_t* p, uint64_t count, size_t es) {
  uint64_t have = std::min(count, kInputPeriod);
  while (have < count) {  // `have` stays a multiple of the period until the last copy
    const uint64_t n = std::min(have, count - have);
    std::memcpy(p + have * es, p, n * es);
    have += n;
  }
}

uint16_t half_of_int(int v) {  // exact for |v| <= 2048
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  const auto a = static_cast<uint32_t>(v < 0 ? -v : v);
  int e = 31 - __builtin_clz(a);
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | ((a << (10 - e)) & 0x3FF));
}

void store_int(Dtype d, uint8_t* p, int v) {
  switch (d) {
    case Dtype::kFp32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case Dtype::kFp64: {
      const double x = v;
      std::memcpy(p, &x, 8);
      return;
    }
    case Dtype::kInt32: {
      const int32_t x = v;
      std::memcpy(p, &x, 4);
      return;
    }
    case Dtype::kFp16: {
      const uint16_t h = half_of_int(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case Dtype::kBf16: {  // exact for |v| <= 256: the high half of the fp32 bits
      const float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const auto h = static_cast<uint16_t>(b >> 16);
      std::memcpy(p, &h, 2);
      return;
    }
  }
}

// --inputs real: +-m * 2^e, m in [1, 2) with random low bits, e in [-12, 3]: non-integers whose
// sums round in every dtype. A hash of (rank, i, salt), so every rank computes everyone's inputs.
double real_value(int rank, uint64_t i, int salt) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full ^
               static_cast<uint64_t>(salt) * 0x165667B19E3779F9ull;
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  const double m = 1.0 + static_cast<double>(h & 0xFFFFF) / 1048576.0;
  const int e = static_cast<int>((h >> 20) % 16) - 12;
  return ((h >> 40) & 1) != 0 ? -std::ldexp(m, e) : std::ldexp(m, e);
}

// `v` in dtype d (fp16/bf16 rounded to nearest even; int32 truncated).
void store_real(Dtype d, uint8_t* p, double v) {
  switch (d) {
    case Dtype::kFp32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case Dtype::kFp64:
      std::memcpy(p, &v, 8);
      return;
    case Dtype::kInt32: {
      const auto x = static_cast<int32_t>(v * 1000);
      std::memcpy(p, &x, 4);
      return;
    }
    case Dtype::kFp16:
    case Dtype::kBf16: {
      const auto f = static_cast<float>(v);
      const uint16_t h = d == Dtype::kFp16 ? sumcast::kernels::float_to_half(f) : sumcast::kernels::float_to_bf16(f);
      std::memcpy(p, &h, 2);
      return;
    }
  }
}

void fill_input(Dtype d, bool real, uint8_t* p, uint64_t count, int rank, int salt) {
  const size_t es = sumcast::wire::dtype_size(d);
  if (real) {
    for (uint64_t i = 0; i < count; ++i) store_real(d, p + i * es, real_value(rank, i, salt));
    return;
  }
  for (uint64_t i = 0; i < std::min(count, kInputPeriod); ++i) store_int(d, p + i * es, input_value(rank, i, salt));
  tile_period(p, count, es);
}

// The deterministic mode's result (docs/fidelity.md): x_0 + x_1 + ... + x_{n-1}, left to right in
// the accumulator type (fp32 for fp16/bf16/fp32, fp64, int32 wrapping), rounded once to the dtype.
void fill_expected_real(Dtype d, uint8_t* p, uint64_t count, int world, int salt) {
  const size_t es = sumcast::wire::dtype_size(d);
  uint8_t x[8];
  for (uint64_t i = 0; i < count; ++i) {
    float accf = 0;
    double accd = 0;
    uint32_t acci = 0;
    for (int r = 0; r < world; ++r) {
      store_real(d, x, real_value(r, i, salt));
      switch (d) {
        case Dtype::kFp64: {
          double v;
          std::memcpy(&v, x, 8);
          accd = r == 0 ? v : accd + v;
          break;
        }
        case Dtype::kInt32: {
          uint32_t v;
          std::memcpy(&v, x, 4);
          acci += v;
          break;
        }
        default: {
          float v;
          if (d == Dtype::kFp32) {
            std::memcpy(&v, x, 4);
          } else {
            uint16_t h;
            std::memcpy(&h, x, 2);
            v = d == Dtype::kFp16 ? sumcast::kernels::half_to_float(h) : sumcast::kernels::bf16_to_float(h);
          }
          accf = r == 0 ? v : accf + v;
        }
      }
    }
    uint8_t* out = p + i * es;
    if (d == Dtype::kFp64) {
      std::memcpy(out, &accd, 8);
    } else if (d == Dtype::kInt32) {
      std::memcpy(out, &acci, 4);
    } else if (d == Dtype::kFp32) {
      std::memcpy(out, &accf, 4);
    } else {
      const uint16_t h =
          d == Dtype::kFp16 ? sumcast::kernels::float_to_half(accf) : sumcast::kernels::float_to_bf16(accf);
      std::memcpy(out, &h, 2);
    }
  }
}

void fill_expected(Dtype d, ReduceOp op, uint8_t* p, uint64_t count, int world, int salt) {
  const size_t es = sumcast::wire::dtype_size(d);
  for (uint64_t i = 0; i < std::min(count, kInputPeriod); ++i) {
    int acc = input_value(0, i, salt);
    for (int r = 1; r < world; ++r) {
      const int x = input_value(r, i, salt);
      acc = op == ReduceOp::kSum ? acc + x : op == ReduceOp::kMin ? std::min(acc, x) : std::max(acc, x);
    }
    store_int(d, p + i * es, acc);
  }
  tile_period(p, count, es);
}

uint64_t count_wrong(const uint8_t* got, const uint8_t* want, uint64_t count, size_t es) {
  if (std::memcmp(got, want, count * es) == 0) return 0;
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) wrong += std::memcmp(got + i * es, want + i * es, es) != 0;
  return wrong;
}

// ---- Placement ----------------------------------------------------------------------------

struct Plan {
  bool automatic = false;
  int hosts = 0;
  std::vector<double> mbit;      // per aggregator: its link (a host aggregator: its host's)
  std::vector<double> fraction;  // per aggregator
  double predicted_mbit = 0;     // predicted algbw (Mbit/s of message), 0 when unknown
};

// Computes the split over o->aggregators and fills o->appliances (the communicator's list, in the
// same order, without the aggregators the placement gives nothing).
Status make_plan(Options* o, Plan* plan) {
  using sumcast::shim::AggregatorKind;
  const int n = o->hosts != 0 ? o->hosts : o->world;
  plan->hosts = n;
  sumcast::shim::PlacementInput in;
  if (o->host_mbit.size() > 1 && o->host_mbit.size() != static_cast<size_t>(n)) {
    return Status::invalid_argument("--host-mbit has " + std::to_string(o->host_mbit.size()) + " rates for " +
                                    std::to_string(n) + " hosts");
  }
  in.host_bandwidth.assign(static_cast<size_t>(n), o->host_mbit.empty() ? 1.0 : o->host_mbit[0]);
  if (o->host_mbit.size() > 1) in.host_bandwidth = o->host_mbit;
  size_t appliances = 0;
  for (const auto& g : o->aggregators) appliances += g.host ? 0 : 1;
  if (o->appliance_mbit.size() > 1 && o->appliance_mbit.size() != appliances) {
    return Status::invalid_argument("--appliance-mbit has " + std::to_string(o->appliance_mbit.size()) + " rates for " +
                                    std::to_string(appliances) + " appliances");
  }
  bool any_explicit = false;
  size_t j = 0;
  for (const auto& g : o->aggregators) {
    sumcast::shim::Aggregator a;
    any_explicit |= g.explicit_weight;
    if (g.host) {
      a.kind = AggregatorKind::kHost;
      a.host = g.host_index;
      plan->mbit.push_back(g.host_index < n ? in.host_bandwidth[static_cast<size_t>(g.host_index)] : 0);
    } else {
      a.bandwidth = o->appliance_mbit.empty()       ? in.host_bandwidth[0]
                    : o->appliance_mbit.size() == 1 ? o->appliance_mbit[0]
                                                    : o->appliance_mbit[j];
      ++j;
      plan->mbit.push_back(a.bandwidth);
    }
    in.aggregators.push_back(a);
  }
  if (o->placement == "auto" && any_explicit) {
    return Status::invalid_argument("--placement auto computes the weights: drop the @W, or use --placement weights");
  }
  plan->automatic = o->placement == "auto" || (o->placement.empty() && !any_explicit);
  auto best = sumcast::shim::optimal_placement(in);  // also checks the hosts and bandwidths
  if (plan->automatic) {
    if (!best.ok()) return best.status();
    plan->fraction = best->fraction;
  } else {
    double sum = 0;
    for (const auto& g : o->aggregators) sum += g.weight;
    for (const auto& g : o->aggregators) plan->fraction.push_back(g.weight / sum);
  }
  if (best.ok()) {
    const double t = sumcast::shim::link_time(in, plan->fraction);
    plan->predicted_mbit = t > 0 ? 1.0 / t : 0;
  }
  o->appliances.clear();
  for (size_t i = 0; i < o->aggregators.size(); ++i) {
    const auto& g = o->aggregators[i];
    if (!plan->automatic) {
      o->appliances.push_back({g.address, g.weight});
    } else if (plan->fraction[i] > 1e-9) {  // an aggregator with no share is left out of the job
      o->appliances.push_back({g.address, plan->fraction[i]});
    }
  }
  return Status();
}

// Prints the placement: each aggregator's share and the bytes it owns of a `count`-element call
// (the communicator's own split, contiguous_ranges over the same weights).
void print_plan(const Options& o, const Plan& plan, uint64_t count) {
  const size_t es = sumcast::wire::dtype_size(o.dtype);
  std::vector<uint64_t> units;
  for (const auto& a : o.appliances) units.push_back(sumcast::shim::weight_units(a.weight));
  const auto ranges = sumcast::shim::contiguous_ranges(count, units);
  nlohmann::ordered_json json = {{"placement", plan.automatic ? "auto" : "weights"},
                                 {"hosts", plan.hosts},
                                 {"predicted_algbw_mbit", plan.predicted_mbit},
                                 {"call_bytes", count * es},
                                 {"aggregators", nlohmann::ordered_json::array()}};
  if (!o.json) {
    std::printf("# placement: %s over %d hosts and %zu aggregators; predicted algbw %.1f (link units, e.g. Mbit/s)\n",
                plan.automatic ? "auto" : "weights", plan.hosts, o.aggregators.size(), plan.predicted_mbit);
    std::printf("#   %-3s %-10s %-22s %10s %10s %14s\n", "#", "kind", "address", "link", "share", "bytes/call");
  }
  size_t used = 0;
  for (size_t i = 0; i < o.aggregators.size(); ++i) {
    const auto& g = o.aggregators[i];
    const bool in_job = used < o.appliances.size() && o.appliances[used].address == g.address;
    const uint64_t bytes = in_job ? (ranges[used].second - ranges[used].first) * es : 0;
    if (in_job) ++used;
    const std::string kind = g.host ? "host " + std::to_string(g.host_index) : "appliance";
    if (!o.json) {
      std::printf("#   %-3zu %-10s %-22s %10.1f %10.6f %14" PRIu64 "%s\n", i, kind.c_str(), g.address.c_str(),
                  plan.mbit[i], plan.fraction[i], bytes, in_job ? "" : " (not used)");
    }
    json["aggregators"].push_back({{"address", g.address},
                                   {"kind", g.host ? "host" : "appliance"},
                                   {"host", g.host_index},
                                   {"link", plan.mbit[i]},
                                   {"share", plan.fraction[i]},
                                   {"bytes", bytes}});
  }
  if (o.json) std::printf("%s\n", json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

// Waits until `address`'s control port accepts a TCP connection (closed at once, before any
// message: the server counts it as a connection and nothing else), for at most `timeout_ms`. With
// --serve, the other hosts' aggregators are the in-process services of ranks that may still be
// starting, and the control client does not retry a refused connection.
bool wait_reachable(const std::string& address, uint32_t timeout_ms) {
  auto hp = sumcast::shim::parse_host_port(address);
  if (!hp.ok()) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(hp->port);
  sa.sin_addr.s_addr = htonl(hp->ip);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    if (ok) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 20);  // refused: not listening yet; try again shortly
  }
}

// ---- Running ------------------------------------------------------------------------------

struct Row {
  uint64_t bytes = 0;
  uint64_t count = 0;
  double time_us = 0;
  uint64_t wrong = 0;
  double call_cpu_s = 0;  // the process's CPU time inside the timed calls (--cpu-log)
};

struct Shared {
  std::mutex mu;
  std::vector<Row> rows;  // filled by the first local rank
  std::atomic<bool> failed{false};
  std::string first_error;
  std::vector<std::pair<std::string, uint64_t>> stats;  // first local rank's counters
  std::vector<sumcast::shim::FailoverEvent> failovers;  // ... and its failovers
  std::vector<std::string> call_log;                    // ... and its calls (--call-log)
  uint64_t total_wrong = 0;
  std::vector<uint8_t> dump;  // first local rank's results, each size's last iteration
};

// PATH with "%r" replaced by the rank (--dump, --cpu-log).
std::string with_rank(std::string path, int rank) {
  if (const size_t at = path.find("%r"); at != std::string::npos) path.replace(at, 2, std::to_string(rank));
  return path;
}

void record_error(Shared* sh, int rank, const std::string& what) {
  std::lock_guard<std::mutex> lock(sh->mu);
  sh->failed = true;
  if (sh->first_error.empty()) sh->first_error = "rank " + std::to_string(rank) + ": " + what;
}

void run_sizes(const Options& o, Communicator& comm, int rank, bool report, Shared* sh);

void run_rank(const Options& o, const CommConfig& base, int rank, bool report, Shared* sh) {
  CommConfig c = base;
  c.rank = static_cast<uint16_t>(rank);
  auto created = Communicator::create(c);
  if (!created.ok()) {
    record_error(sh, rank, created.status().to_string());
    return;
  }
  if (o.verbose && report) {
    std::fprintf(stderr, "sumcast-allreduce: rank %d: transport %s\n", rank,
                 (*created)->transport().describe().c_str());
  }
  run_sizes(o, **created, rank, report, sh);
  if (report) {  // also after a failure: the counters tell how it went
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->stats = (*created)->stat_list();
    sh->failovers = (*created)->failovers();
  }
}

void run_local_group_sizes(const Options& o, Communicator& comm, int rank, bool report, Shared* sh);

// User + system CPU seconds of the whole process so far (all its threads).
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One size's runs, for both modes: `warm()` (untimed) before each warm-up call, then per timed
// iteration `prepare(it)` (untimed), the one-element all-reduce that lines the ranks up, the timed
// `call()` and `wrong()` (elements wrong, counted with --check); the row goes to the shared
// results and the first local rank's `result` bytes to the dump. False after a failure (recorded).
bool run_one_size(const Options& o, Communicator& comm, int rank, bool report, Shared* sh, Row row,
                  const std::function<void()>& warm, const std::function<void(int)>& prepare,
                  const std::function<Status()>& call, const std::function<uint64_t()>& wrong, const uint8_t* result) {
  auto one = [&]() -> bool {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = call();
    if (!st.ok()) record_error(sh, rank, "size " + std::to_string(row.bytes) + ": " + st.to_string());
    if (report && !o.call_log.empty()) {
      const auto end = std::chrono::system_clock::now().time_since_epoch();
      char line[96];
      std::snprintf(line, sizeof(line), "%lld %.1f %" PRIu64 "%s",
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(end).count()),
                    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(), row.bytes,
                    st.ok() ? "" : " failed");
      std::lock_guard<std::mutex> lock(sh->mu);
      sh->call_log.emplace_back(line);
    }
    return st.ok();
  };
  for (int w = 0; w < o.warmup; ++w) {
    warm();
    if (!one()) return false;
  }
  double busy_us = 0;
  for (int it = 0; it < o.iters; ++it) {
    prepare(it);
    // Every rank starts the timed call together, as MPI benchmarks do with MPI_Barrier: without it
    // a rank's time would include another rank's prepare().
    uint8_t barrier_buf[8] = {};
    if (Status st = comm.allreduce(barrier_buf, barrier_buf, 1); !st.ok()) {
      record_error(sh, rank, st.to_string());
      return false;
    }
    // The network and the appliance idle this long before the call (adaptive idle polling is
    // then asleep when the call's first packet arrives): a pause, not a synchronisation.
    if (o.gap_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(o.gap_us));
    const double cpu0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    if (!one()) return false;
    busy_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    row.call_cpu_s += process_cpu_s() - cpu0;
    if (o.check) row.wrong += wrong();
  }
  row.time_us = busy_us / o.iters;
  std::lock_guard<std::mutex> lock(sh->mu);
  sh->total_wrong += row.wrong;
  if (report) sh->rows.push_back(row);
  if (report && !o.dump.empty()) sh->dump.insert(sh->dump.end(), result, result + row.bytes);
  return true;
}

void run_sizes(const Options& o, Communicator& comm, int rank, bool report, Shared* sh) {
  if (o.gpus > 0) return run_local_group_sizes(o, comm, rank, report, sh);
  const size_t es = sumcast::wire::dtype_size(o.dtype);
  const uint64_t max_count = *std::max_element(o.counts.begin(), o.counts.end());
  std::vector<uint8_t> send(max_count * es), recv(max_count * es), want(o.check ? max_count * es : 0);
  int salt = 0;
  for (const uint64_t count : o.counts) {
    ++salt;
    auto expect = [&] {
      if (o.real_inputs) {
        fill_expected_real(o.dtype, want.data(), count, o.world, salt);
      } else {
        fill_expected(o.dtype, o.op, want.data(), count, o.world, salt);
      }
    };
    fill_input(o.dtype, o.real_inputs, send.data(), count, rank, salt);
    if (o.check) expect();
    Row row;
    row.bytes = count * es;
    row.count = count;
    auto warm = [&] {
      if (o.in_place) fill_input(o.dtype, o.real_inputs, recv.data(), count, rank, salt);
    };
    auto prepare = [&](int it) {
      if (o.check && it > 0) {  // new inputs, so that a result left from the last call is wrong
        ++salt;
        fill_input(o.dtype, o.real_inputs, send.data(), count, rank, salt);
        expect();
      }
      if (o.in_place) {
        fill_input(o.dtype, o.real_inputs, recv.data(), count, rank, salt);
      } else if (o.check) {
        std::memset(recv.data(), 0xA5, count * es);  // poison: an element never written is wrong
      }
    };
    auto call = [&] { return comm.allreduce(o.in_place ? recv.data() : send.data(), recv.data(), count); };
    auto wrong = [&] { return count_wrong(recv.data(), want.data(), count, es); };
    if (!run_one_size(o, comm, rank, report, sh, row, warm, prepare, call, wrong, recv.data())) return;
  }
}

// --gpus N: N buffers per rank through the local-group all-reduce (the planner's plan on host
// memory, one contribution per rank). Buffer i of rank r holds virtual rank r*N+i's inputs, so the
// expected result is the job of world*N ranks'. In place; every iteration checked with --check.
void run_local_group_sizes(const Options& o, Communicator& comm, int rank, bool report, Shared* sh) {
  const size_t es = sumcast::wire::dtype_size(o.dtype);
  const auto n = static_cast<size_t>(o.gpus);
  const uint64_t max_count = *std::max_element(o.counts.begin(), o.counts.end());
  std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(max_count * es));
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  std::vector<uint8_t> want(o.check ? max_count * es : 0);
  int salt = 0;
  for (const uint64_t count : o.counts) {
    auto group = sumcast::shim::LocalGroup::create(n, count, o.dtype, o.op);
    if (!group.ok()) {
      record_error(sh, rank, "local group of " + std::to_string(n) + ": " + group.status().to_string());
      return;
    }
    if (o.verbose && report) {
      std::fprintf(stderr, "sumcast-allreduce: rank %d: %zu buffers, %" PRIu64 " elements: %s\n", rank, n, count,
                   (*group)->why().c_str());
    }
    Row row;
    row.bytes = count * es;
    row.count = count;
    auto fill = [&] {
      for (size_t i = 0; i < n; ++i) {
        fill_input(o.dtype, false, bufs[i].data(), count, rank * o.gpus + static_cast<int>(i), salt);
      }
    };
    ++salt;
    auto prepare = [&](int) {
      ++salt;
      fill();
      if (o.check) fill_expected(o.dtype, o.op, want.data(), count, o.world * o.gpus, salt);
    };
    auto call = [&] { return (*group)->run(comm, ptrs); };
    auto wrong = [&] {
      uint64_t w = 0;
      for (size_t i = 0; i < n; ++i) w += count_wrong(bufs[i].data(), want.data(), count, es);
      return w;
    };
    if (!run_one_size(o, comm, rank, report, sh, row, fill, prepare, call, wrong, bufs[0].data())) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int rc = parse_args(argc, argv, &o); rc >= 0) return rc;

  std::string token;
  if (!o.token_file.empty()) {
    sumcast::Result<std::string> read = sumcast::read_token_file(o.token_file);
    if (!read.ok()) {
      std::fprintf(stderr, "sumcast-allreduce: --token-file %s\n", read.status().message().c_str());
      return 2;
    }
    token = std::move(read.value());
  } else if (!o.serve.empty()) {
    std::random_device rd;  // a service of our own: any secret will do
    for (int i = 0; i < 32; ++i) token += "0123456789abcdef"[rd() % 16];
  }

  std::unique_ptr<sumcast::embedded::Service> service;
  if (!o.serve.empty()) {
    sumcast::embedded::ServiceOptions so;
    const size_t colon = o.serve.find(':');
    so.bind_ip = o.serve.substr(0, colon);
    so.control_port = 4790;
    if (colon != std::string::npos) so.control_port = static_cast<uint16_t>(std::atoi(o.serve.c_str() + colon + 1));
    so.token = token;
    so.max_ranks = std::max<uint32_t>(64, static_cast<uint32_t>(o.world));
    so.job_timeout_ms = std::max<uint32_t>(so.job_timeout_ms, o.op_timeout_ms);
    auto s = sumcast::embedded::Service::start(so);
    if (!s.ok()) {
      std::fprintf(stderr, "sumcast-allreduce: %s\n", s.status().to_string().c_str());
      return 1;
    }
    service = std::move(s).value();
    if (o.aggregators.empty()) o.aggregators.push_back({service->control_address(), 1.0, false, false, -1});
  }
  Plan plan;
  if (Status st = make_plan(&o, &plan); !st.ok()) {
    std::fprintf(stderr, "sumcast-allreduce: placement: %s\n", st.to_string().c_str());
    return 2;
  }

  CommConfig base;
  base.job_name = o.job;
  base.world_size = static_cast<uint16_t>(o.world);
  base.appliances = o.appliances;
  base.token = token;
  base.dtype = o.dtype;
  base.op = o.op;
  base.payload_bytes = o.payload;
  base.payload_explicit = o.payload_explicit;
  base.transport = o.verbs ? sumcast::shim::TransportKind::kVerbs : sumcast::shim::TransportKind::kUdp;
  base.rdma_device = o.rdma_device;
  base.rdma_interface = o.rdma_interface;
  base.dscp = static_cast<uint8_t>(o.dscp);
  base.repair_dscp = o.repair_dscp;
  base.ecn = o.ecn;
  base.cnp_reaction = o.cnp_reaction;
  base.loss_notices = o.loss_notices;
  base.window_cut_percent = o.window_cut;
  base.window_step = o.window_step;
  base.window_cut_interval_us = o.window_cut_us;
  base.send_queue_us = o.send_queue_us;
  base.slots = static_cast<uint16_t>(o.slots);
  base.bind_ip = o.bind_ip;
  base.rto_initial_us = o.rto_us;
  base.busy_poll_us = o.busy_poll_us;
  base.udp_gro = o.udp_gro == "auto";
  base.udp_gso = o.udp_gso == "on";
  base.rto_max_us = std::max<uint32_t>(o.rto_us, 200000);
  base.retries = o.retries;
  base.op_timeout_ms = o.op_timeout_ms;
  base.failover = o.failover;
  base.failover_after_ms = o.failover_after_ms;
  base.failover_timeout_ms = o.failover_timeout_ms;
  base.failover_max = o.failover_max;
  base.deterministic = o.deterministic;
  base.multicast = o.multicast;

  const bool printer = o.rank == 0;
  if (printer && !o.json) {
    std::printf("# sumcast-allreduce: job %s, %d ranks (%d here), %s %s, %zu appliance(s), %s\n", o.job.c_str(),
                o.world, o.local_ranks, sumcast::wire::dtype_name(o.dtype), sumcast::wire::reduce_op_name(o.op),
                o.appliances.size(), o.in_place ? "in place" : "out of place");
    std::printf("# busbw = algbw: through a summation service each byte crosses a host link once each way\n");
  }
  if (printer && (o.aggregators.size() > 1 || o.aggregators[0].host)) {
    print_plan(o, plan, *std::max_element(o.counts.begin(), o.counts.end()));
  }
  if (printer && !o.json) {
    std::printf("#%11s %13s %6s %6s %11s %9s %9s %8s\n", "size", "count", "type", "redop", "time", "algbw", "busbw",
                "#wrong");
    std::printf("#%11s %13s %6s %6s %11s %9s %9s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  if (service) {
    for (const auto& a : o.appliances) {
      if (!wait_reachable(a.address, base.connect_timeout_ms)) {
        std::fprintf(stderr, "sumcast-allreduce: aggregator %s not reachable within %u ms\n", a.address.c_str(),
                     base.connect_timeout_ms);
        return 1;
      }
    }
  }

  Shared sh;
  std::vector<std::thread> threads;
  for (int k = 0; k < o.local_ranks; ++k) {
    threads.emplace_back(run_rank, std::cref(o), std::cref(base), o.rank + k, k == 0, &sh);
  }
  for (auto& t : threads) t.join();
  // Our service may still owe results to ranks elsewhere (and answer their retransmissions): it
  // stays until every job on it ended (its members left, or it failed), within the op timeout.
  if (service) service->wait_until_no_jobs(o.op_timeout_ms != 0 ? o.op_timeout_ms : 60000);

  if (printer) {
    // With --json the last row also carries the first local rank's counters (all of them).
    nlohmann::ordered_json counters = nlohmann::ordered_json::object();
    for (const auto& [name, value] : sh.stats) counters[name] = value;
    for (const Row& r : sh.rows) {
      const double algbw = r.time_us > 0 ? static_cast<double>(r.bytes) / (r.time_us * 1e3) : 0;
      if (o.json) {
        nlohmann::ordered_json row = {{"size", r.bytes},
                                      {"count", r.count},
                                      {"type", sumcast::wire::dtype_name(o.dtype)},
                                      {"redop", sumcast::wire::reduce_op_name(o.op)},
                                      {"time_us", r.time_us},
                                      {"algbw_gbps", algbw},
                                      {"busbw_gbps", algbw},
                                      {"wrong", o.check ? nlohmann::ordered_json(r.wrong) : nullptr},
                                      {"world", o.world}};
        if (&r == &sh.rows.back()) row["counters"] = counters;
        std::printf("%s\n", row.dump().c_str());
      } else {
        std::printf(" %11" PRIu64 " %13" PRIu64 " %6s %6s %11.1f %9.3f %9.3f %8s\n", r.bytes, r.count,
                    sumcast::wire::dtype_name(o.dtype), sumcast::wire::reduce_op_name(o.op), r.time_us, algbw, algbw,
                    o.check ? std::to_string(r.wrong).c_str() : "N/A");
      }
    }
  }
  for (const auto& e : sh.failovers) {  // every process: the test bed's failover tests read them
    if (o.json) {
      std::printf("{\"failover\":{\"rank\":%d,\"epoch\":%u,\"lost\":\"%s\",\"new_home\":\"%s\",\"ms\":%" PRIu64
                  ",\"replayed\":%" PRIu64 "}}\n",
                  o.rank, e.epoch, e.lost.c_str(), e.new_home.c_str(), e.ms, e.replayed);
    } else {
      std::printf("# failover %u of rank %d: %s lost (%s); its range moved to %s in %" PRIu64 " ms, %" PRIu64
                  " chunks replayed\n",
                  e.epoch, o.rank, e.lost.c_str(), e.reason.c_str(), e.new_home.c_str(), e.ms, e.replayed);
    }
  }
  if (!o.cpu_log.empty()) {
    const std::string path = with_rank(o.cpu_log, o.rank);
    std::ofstream f(path, std::ios::trunc);
    for (const Row& r : sh.rows) f << r.bytes << " " << o.iters << " " << r.call_cpu_s << "\n";
    if (!f) {
      std::fprintf(stderr, "sumcast-allreduce: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  if (!o.call_log.empty()) {
    std::ofstream f(o.call_log, std::ios::trunc);
    for (const auto& l : sh.call_log) f << l << "\n";
    if (!f) {
      std::fprintf(stderr, "sumcast-allreduce: cannot write %s\n", o.call_log.c_str());
      return 1;
    }
  }
  // Every process prints its first rank's counters (those that are not zero): the test bed's
  // impairment tests read retransmissions and duplicates from every rank.
  if (!o.json) {
    std::printf("# counters of rank %d:", o.rank);
    for (const auto& [name, value] : sh.stats) {
      if (value != 0) std::printf(" %s=%" PRIu64, name.c_str(), value);
    }
    std::printf("\n");
  }
  if (!o.dump.empty()) {
    const std::string path = with_rank(o.dump, o.rank);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(sh.dump.data()), static_cast<std::streamsize>(sh.dump.size()));
    if (!f) {
      std::fprintf(stderr, "sumcast-allreduce: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  if (sh.failed) {
    std::fprintf(stderr, "sumcast-allreduce: %s\n", sh.first_error.c_str());
    return 1;
  }
  if (sh.total_wrong != 0) {
    std::fprintf(stderr, "sumcast-allreduce: %" PRIu64 " wrong elements\n", sh.total_wrong);
    return 1;
  }
  return 0;
}
