#include "sumcast/mpi/env_config.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <array>
#include <cctype>
#include <charconv>
#include <fstream>

#include "sumcast/byte_size.h"
#include "sumcast/shim/address.h"
#include "sumcast/token_file.h"

namespace sumcast::mpi {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<uint32_t> parse_u32(std::string_view text, uint32_t lo, uint32_t hi) {
  text = trim(text);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::invalid_argument("not an unsigned integer");
  }
  if (v < lo || v > hi) {
    return Status::invalid_argument("outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<uint32_t>(v);
}

Status parse_appliances(MpiConfig& c, std::string_view text) {
  c.appliances.clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    std::string host_port;
    double weight = 1.0;
    Status st = shim::split_weight(item, &host_port, &weight);
    if (!st.ok()) return Status::invalid_argument("'" + std::string(item) + "': " + st.message());
    // Syntax only: names are resolved when a communicator is set up, in the rank's namespace.
    const size_t colon = host_port.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::invalid_argument("'" + std::string(item) + "': expected HOST:PORT[@WEIGHT]");
    }
    auto port = parse_u32(std::string_view(host_port).substr(colon + 1), 1, 65535);
    if (!port.ok()) return Status::invalid_argument("'" + std::string(item) + "': port " + port.status().message());
    c.appliances.push_back({host_port, weight});
  }
  if (c.appliances.empty()) return Status::invalid_argument("no appliance in the list");
  return {};
}

Status load_token_file(MpiConfig& c, std::string_view path) {
  c.token_file = std::string(trim(path));
  if (c.token_file.empty()) return {};
  Result<std::string> token = sumcast::read_token_file(c.token_file);
  if (!token.ok()) return token.status();
  c.token = std::move(token.value());
  return {};
}

template <typename F>
Status set_bool(std::string_view v, F&& set) {
  auto b = parse_bool(v);
  if (!b.ok()) return b.status();
  set(*b);
  return {};
}

template <typename F>
Status set_u32(std::string_view v, uint32_t lo, uint32_t hi, F&& set) {
  auto n = parse_u32(v, lo, hi);
  if (!n.ok()) return n.status();
  set(*n);
  return {};
}

constexpr std::array<EnvVar, 38> kTable = {{
    {"SUMCAST_MPI_ENABLE", EnvType::kBool, "1",
     "0 passes every call to MPI (the ranks still agree on it once per communicator)", true,
     [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.enable = b; }); }},
    {"SUMCAST_MPI_APPLIANCES", EnvType::kList, "(none: required)",
     "control endpoints HOST:PORT[@WEIGHT], comma-separated; each call's bytes are split over them by weight", true,
     parse_appliances},
    {"SUMCAST_MPI_TOKEN_FILE", EnvType::kPath, "(none)", "file whose first line is the appliances' shared secret",
     false, load_token_file},
    {"SUMCAST_MPI_THRESHOLD", EnvType::kBytes, "64K",
     "calls smaller than this many bytes (count x datatype size) go to MPI", true,
     [](MpiConfig& c, std::string_view v) -> Status {
       auto b = parse_bytes(v);
       if (!b.ok()) return b.status();
       c.threshold_bytes = *b;
       return {};
     }},
    {"SUMCAST_MPI_CALLS", EnvType::kList, "allreduce,iallreduce",
     "the calls that may go to the appliance: allreduce, iallreduce, reduce_scatter_block, all, none", true,
     [](MpiConfig& c, std::string_view v) -> Status {
       auto b = parse_calls(v);
       if (!b.ok()) return b.status();
       c.calls = *b;
       return {};
     }},
    {"SUMCAST_MPI_BIND", EnvType::kString, "(route to the first appliance)",
     "local IPv4 address or interface name for the data socket", false,
     [](MpiConfig& c, std::string_view v) -> Status {
       c.bind = std::string(trim(v));
       return {};
     }},
    {"SUMCAST_MPI_INTRANODE", EnvType::kBool, "1",
     "ranks of one host reduce-scatter in shared memory, each sends only its shard to the appliance and the "
     "results are all-gathered locally (blocking calls; needs the same rank count on every host)",
     true, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.intranode = b; }); }},
    {"SUMCAST_MPI_SHM_BYTES", EnvType::kBytes, "4M",
     "intra-node pipeline piece: shared memory per rank is about this plus 2/ranks-per-host of it", true,
     [](MpiConfig& c, std::string_view v) -> Status {
       auto b = parse_bytes(v);
       if (!b.ok()) return b.status();
       if (*b < 4096 || *b > (uint64_t{1} << 30)) return Status::invalid_argument("outside 4K..1G");
       c.shm_bytes = *b;
       return {};
     }},
    {"SUMCAST_MPI_TOPOLOGY", EnvType::kPath, "(detect: the NUMA node of each rank's CPU)",
     "host description for the intra-node step (any format sumcast-topo reads; local rank i is its GPU i, "
     "so it must list as many GPUs as a host has ranks): ranks on several NUMA nodes reduce within their "
     "node first, then across nodes",
     true, [](MpiConfig& c, std::string_view v) -> Status {
       c.topology_file = std::string(trim(v));
       if (c.topology_file.empty()) return {};
       std::ifstream f(c.topology_file);
       if (!f) return Status::invalid_argument("cannot read " + c.topology_file);
       return {};
     }},
    {"SUMCAST_MPI_PROGRESS_THREAD", EnvType::kBool, "1",
     "a background thread moves MPI_Iallreduce packets while the program computes (it never calls MPI)", false,
     [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.progress_thread = b; }); }},
    {"SUMCAST_MPI_STATS", EnvType::kUint, "0",
     "1: rank 0 prints calls taken and passed through, bytes and time at MPI_Finalize; 2: every rank too", false,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 0, 2, [&](uint32_t n) { c.stats = int(n); }); }},
    {"SUMCAST_MPI_JOB", EnvType::kString, "mpi",
     "prefix of the job names registered with the appliance (1..24 characters)", false,
     [](MpiConfig& c, std::string_view v) -> Status {
       const std::string_view t = trim(v);
       if (t.empty() || t.size() > 24) return Status::invalid_argument("must be 1..24 characters");
       c.job_prefix = std::string(t);
       return {};
     }},
    {"SUMCAST_MPI_PAYLOAD", EnvType::kUint, "(path MTU)",
     "payload bytes per packet wanted (the appliance may grant less); unset: the largest RoCE payload (4096, 2048, "
     "1024) the path MTU toward the appliance carries",
     true,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 8, 4096, [&](uint32_t n) {
         c.payload_bytes = n;
         c.payload_explicit = true;
       });
     }},
    {"SUMCAST_MPI_SLOTS", EnvType::kUint, "0", "window slots wanted per appliance; 0: the appliance's default", true,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 0, 65535, [&](uint32_t n) { c.slots = n; }); }},
    {"SUMCAST_MPI_MULTICAST", EnvType::kBool, "0",
     "1 asks the appliances for results by IPv4 multicast (one frame per chunk to the job's group, joined on the "
     "data interface); an appliance that does not allow it sends one copy per rank",
     true, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.multicast = b; }); }},
    {"SUMCAST_MPI_LOSS_NOTICES", EnvType::kBool, "1",
     "1 asks the appliances to tell a rank of its lost contributions, which it resends at once, while the other "
     "ranks leave that hole to it for about a round trip (docs/protocol.md §7); 0 for an appliance that "
     "predates loss notices, which refuses the registration otherwise",
     true, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.loss_notices = b; }); }},
    {"SUMCAST_MPI_RTO_US", EnvType::kUint, "5000", "first retransmission timeout of a packet, microseconds", false,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 100, 10'000'000, [&](uint32_t n) { c.rto_us = n; }); }},
    {"SUMCAST_MPI_BUSY_POLL_US", EnvType::kUint, "0",
     "SO_BUSY_POLL of the data sockets, microseconds (0..1000000; 0: off): a receive that finds nothing polls the "
     "device queue this long first",
     false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 0, 1'000'000, [&](uint32_t n) { c.busy_poll_us = n; });
     }},
    {"SUMCAST_MPI_UDP_GRO", EnvType::kBool, "1",
     "1: the data sockets receive results the kernel coalesced (UDP_GRO) where it allows it; 0: one datagram per "
     "receive buffer",
     false, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.udp_gro = b; }); }},
    {"SUMCAST_MPI_UDP_GSO", EnvType::kBool, "0",
     "1: contributions leave in UDP_SEGMENT trains (segment k with IP ID k); aggregators of this version take them "
     "on any path (sumcastd reads the IP ID, kernel-UDP ones find it)",
     false, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.udp_gso = b; }); }},
    {"SUMCAST_MPI_SEND_QUEUE_US", EnvType::kUint, "2000",
     "new chunks wait while more than this many microseconds of the result rate (at least 128 KiB) are queued "
     "below the data socket, so resends do not wait behind a window (0..1000000; 0: off)",
     false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 0, 1'000'000, [&](uint32_t n) { c.send_queue_us = n; });
     }},
    {"SUMCAST_MPI_DSCP", EnvType::kUint, "0",
     "DSCP of the contributions (0..63), for a fabric that classifies RoCE traffic by it (docs/deployment.md, "
     "\"DSCP, PFC and ECN\")",
     false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 0, 63, [&](uint32_t n) { c.dscp = static_cast<uint8_t>(n); });
     }},
    {"SUMCAST_MPI_ECN", EnvType::kBool, "0",
     "1: contributions are marked ECT(0), so that ECN switches mark them CE instead of dropping them; 0: not-ECT",
     false, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.ecn = b; }); }},
    {"SUMCAST_MPI_REPAIR_DSCP", EnvType::kUint, "(SUMCAST_MPI_DSCP)",
     "DSCP of resends (retransmissions and probes; 0..63), for a queue that serves them before the contributions "
     "(docs/deployment.md, \"Repairs ahead of the queue\")",
     false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 0, 63, [&](uint32_t n) { c.repair_dscp = static_cast<int>(n); });
     }},
    {"SUMCAST_MPI_CNP_REACTION", EnvType::kBool, "1",
     "a CNP from an appliance (its network marked our packets CE) cuts the window of packets in flight toward it",
     false, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.cnp_reaction = b; }); }},
    {"SUMCAST_MPI_WINDOW_CUT", EnvType::kUint, "50", "percent of the window a CNP leaves (at least one packet)", false,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 1, 99, [&](uint32_t n) { c.window_cut = n; }); }},
    {"SUMCAST_MPI_WINDOW_STEP", EnvType::kUint, "1",
     "packets the window regains per window's worth of results without a CNP, up to the slots granted", false,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 1, 65535, [&](uint32_t n) { c.window_step = n; }); }},
    {"SUMCAST_MPI_RETRIES", EnvType::kUint, "0",
     "retransmissions of one packet before the call fails; 0: unlimited (a silent appliance still fails the "
     "call after SUMCAST_MPI_OP_TIMEOUT_MS): a loaded host that stalls a peer for seconds is not a failure",
     false,
     [](MpiConfig& c, std::string_view v) { return set_u32(v, 0, 1'000'000, [&](uint32_t n) { c.retries = n; }); }},
    {"SUMCAST_MPI_OP_TIMEOUT_MS", EnvType::kUint, "30000",
     "an appliance silent this long while packets are outstanding fails the call; 0: never", false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 0, 86'400'000, [&](uint32_t n) { c.op_timeout_ms = n; });
     }},
    {"SUMCAST_MPI_FAILOVER", EnvType::kString, "auto",
     "survive the loss of an appliance mid-job (docs/failover.md): its range moves to another appliance of "
     "SUMCAST_MPI_APPLIANCES and what some rank lacks is resent; auto: on with more than one appliance; on; off",
     true,
     [](MpiConfig& c, std::string_view v) -> Status {
       const std::string_view t = trim(v);
       if (t == "auto") {
         c.failover = shim::CommConfig::Failover::kAuto;
       } else if (t == "on") {
         c.failover = shim::CommConfig::Failover::kOn;
       } else if (t == "off") {
         c.failover = shim::CommConfig::Failover::kOff;
       } else {
         return Status::invalid_argument("must be auto, on or off");
       }
       return {};
     }},
    {"SUMCAST_MPI_FAILOVER_FALLBACK", EnvType::kString, "error",
     "when every appliance of a job is lost (docs/failover.md): error fails the call naming what was tried; mpi "
     "completes it with PMPI_Allreduce and passes every later call on that communicator to MPI (blocking calls of "
     "the flat path; keeps a copy of the last result: memory of the largest call, one copy per call)",
     true,
     [](MpiConfig& c, std::string_view v) -> Status {
       const std::string_view t = trim(v);
       if (t == "error") {
         c.fallback_mpi = false;
       } else if (t == "mpi") {
         c.fallback_mpi = true;
       } else {
         return Status::invalid_argument("must be error or mpi");
       }
       return {};
     }},
    {"SUMCAST_MPI_FAILOVER_AFTER_MS", EnvType::kUint, "1000",
     "an appliance that answers nothing this long (liveness probes included) while packets are outstanding is "
     "declared lost; below SUMCAST_MPI_OP_TIMEOUT_MS",
     false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 1, 86'400'000, [&](uint32_t n) { c.failover_after_ms = n; });
     }},
    {"SUMCAST_MPI_CONNECT_TIMEOUT_MS", EnvType::kUint, "5000", "TCP connect and authentication, per appliance", false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 1, 3'600'000, [&](uint32_t n) { c.connect_timeout_ms = n; });
     }},
    {"SUMCAST_MPI_REGISTER_TIMEOUT_MS", EnvType::kUint, "30000",
     "waiting for every rank of a communicator to register with the appliance", false,
     [](MpiConfig& c, std::string_view v) {
       return set_u32(v, 1, 3'600'000, [&](uint32_t n) { c.register_timeout_ms = n; });
     }},
    {"SUMCAST_MPI_VERBOSE", EnvType::kBool, "0", "rank 0 of each communicator says how it was set up", false,
     [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.verbose = b; }); }},
    {"SUMCAST_MPI_CHECK", EnvType::kBool, "0",
     "debugging: before every reduction the ranks compare the call and the decision (one small PMPI_Allreduce "
     "more per call) and abort with both sides on a mismatch",
     true, [](MpiConfig& c, std::string_view v) { return set_bool(v, [&](bool b) { c.check = b; }); }},
    {"SUMCAST_MPI_DEVICE_BUFFERS", EnvType::kString, "stage",
     "CUDA device buffers (CUDA-aware MPI programs): `stage` copies them to host memory and back around the "
     "appliance call; `mpi` passes a call to MPI when any rank's buffer is device memory (one 4-byte "
     "PMPI_Allreduce more per eligible call, on every host). Host buffers and hosts without CUDA are unaffected",
     true,
     [](MpiConfig& c, std::string_view v) -> Status {
       const std::string_view t = trim(v);
       if (t == "stage") {
         c.device_stage = true;
       } else if (t == "mpi") {
         c.device_stage = false;
       } else {
         return Status::invalid_argument("must be stage or mpi");
       }
       return {};
     }},
    {"SUMCAST_MPI_CUDA_DRIVER", EnvType::kPath, "libcuda.so.1",
     "the CUDA driver library used to tell device memory from host memory; consulted only once the process "
     "has loaded it (a CUDA program), never loaded by the interposer itself",
     false,
     [](MpiConfig& c, std::string_view v) -> Status {
       const std::string_view t = trim(v);
       if (t.empty()) return Status::invalid_argument("must not be empty");
       c.cuda_driver = std::string(t);
       return {};
     }},
}};

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (char ch : s) {
    h ^= static_cast<uint8_t>(ch);
    h *= 0x100000001b3ull;
  }
  h ^= 0xff;  // separator, so ("ab","c") and ("a","bc") differ
  h *= 0x100000001b3ull;
  return h;
}

}  // namespace

const char* call_kind_name(CallKind kind) {
  switch (kind) {
    case CallKind::kAllreduce:
      return "MPI_Allreduce";
    case CallKind::kIallreduce:
      return "MPI_Iallreduce";
    case CallKind::kReduceScatterBlock:
      return "MPI_Reduce_scatter_block";
  }
  return "?";
}

const char* env_type_name(EnvType type) {
  switch (type) {
    case EnvType::kBool:
      return "bool";
    case EnvType::kBytes:
      return "bytes";
    case EnvType::kUint:
      return "integer";
    case EnvType::kString:
      return "string";
    case EnvType::kList:
      return "list";
    case EnvType::kPath:
      return "path";
  }
  return "?";
}

std::span<const EnvVar> env_table() { return kTable; }

Result<bool> parse_bool(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return Status::invalid_argument("not a boolean (1/0, true/false, yes/no, on/off)");
}

Result<uint64_t> parse_bytes(std::string_view text) {
  const auto bytes = parse_byte_size(trim(text));
  if (!bytes) return Status::invalid_argument("not a byte count (a number with an optional K, M or G suffix)");
  return *bytes;
}

Result<uint32_t> parse_calls(std::string_view text) {
  uint32_t bits = 0;
  size_t pos = 0;
  bool any = false;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string item = lower(trim(text.substr(pos, comma - pos)));
    pos = comma + 1;
    if (item.empty()) continue;
    any = true;
    if (item == "allreduce") {
      bits |= call_bit(CallKind::kAllreduce);
    } else if (item == "iallreduce") {
      bits |= call_bit(CallKind::kIallreduce);
    } else if (item == "reduce_scatter_block") {
      bits |= call_bit(CallKind::kReduceScatterBlock);
    } else if (item == "all") {
      bits |= (1u << kCallKindCount) - 1;
    } else if (item == "none") {
      // nothing
    } else {
      return Status::invalid_argument("unknown call '" + item +
                                      "' (allreduce, iallreduce, reduce_scatter_block, all, none)");
    }
  }
  if (!any) return Status::invalid_argument("empty list");
  return bits;
}

LoadedConfig load_config(const GetEnv& getenv) {
  LoadedConfig out;
  std::string problems;
  for (const EnvVar& v : kTable) {
    const char* value = getenv(v.name);
    if (value == nullptr) continue;
    Status st = v.apply(out.config, value);
    if (!st.ok()) {
      if (!problems.empty()) problems += "; ";
      problems += std::string(v.name) + "='" + value + "': " + st.message();
    }
  }
  if (out.config.enable && out.config.appliances.empty() && getenv("SUMCAST_MPI_APPLIANCES") == nullptr) {
    if (!problems.empty()) problems += "; ";
    problems += "SUMCAST_MPI_APPLIANCES is not set";
  }
  if (!problems.empty()) out.status = Status::invalid_argument(problems);
  return out;
}

uint64_t fingerprint(const MpiConfig& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, c.enable ? "1" : "0");
  for (const auto& a : c.appliances) {
    h = fnv1a(h, a.address);
    h = fnv1a(h, std::to_string(a.weight));
  }
  h = fnv1a(h, std::to_string(c.threshold_bytes));
  h = fnv1a(h, std::to_string(c.calls));
  h = fnv1a(h, c.intranode ? "1" : "0");
  h = fnv1a(h, std::to_string(c.shm_bytes));
  h = fnv1a(h, c.topology_file);
  h = fnv1a(h, std::to_string(c.payload_bytes));
  h = fnv1a(h, std::to_string(c.slots));
  h = fnv1a(h, c.check ? "1" : "0");
  h = fnv1a(h, c.device_stage ? "stage" : "mpi");
  // Ranks that would answer the loss of every appliance differently (one falls back to MPI, one
  // fails) must not start.
  h = fnv1a(h, c.fallback_mpi ? "fallback mpi" : "fallback error");
  // Failover on for some ranks and off for others would split a job at the first loss.
  h = fnv1a(h, "failover " + std::to_string(static_cast<int>(c.failover)));
  return h;
}

std::string env_table_markdown() {
  std::string s = "| variable | type | default | meaning |\n|---|---|---|---|\n";
  for (const EnvVar& v : kTable) {
    s += std::string("| `") + v.name + "` | " + env_type_name(v.type) + " | " + v.default_text + " | " + v.doc +
         (v.shared ? " (same on every rank)" : "") + " |\n";
  }
  return s;
}

Result<std::string> resolve_bind(const std::string& bind) {
  if (bind.empty()) return std::string();
  if (shim::parse_ipv4(bind).ok()) return bind;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status::from_errno("getifaddrs");
  std::string found;
  bool iface_exists = false;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr || bind != i->ifa_name) continue;
    iface_exists = true;
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(static_cast<const void*>(i->ifa_addr));
      found = shim::format_ipv4(ntohl(sin->sin_addr.s_addr));
      break;
    }
  }
  freeifaddrs(list);
  if (!found.empty()) return found;
  if (iface_exists) return Status::not_found("interface " + bind + " has no IPv4 address");
  return Status::not_found("'" + bind + "' is neither an IPv4 address nor an interface here");
}

}  // namespace sumcast::mpi
