// Configuration of the MPI interposer (libsumcast_mpi.so) from environment variables. Every
// variable is declared once, in env_table(): its name, type, default and meaning; the parser,
// the documentation (worker_shim/mpi/README.md, SUMCAST_MPI_HELP=1) and the rank agreement
// fingerprint are all derived from that table.
//
// A mis-configuration never fails the MPI job: load_config() gathers every problem into one
// Status, which the interposer prints as one warning before passing every call to MPI.
//
// Thread safety: load_config is reentrant; env_table() is immutable.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sumcast/shim/communicator.h"
#include "sumcast/status.h"

namespace sumcast::mpi {

// The MPI calls the interposer can take (bits of MpiConfig::calls).
enum class CallKind : uint8_t {
  kAllreduce = 0,
  kIallreduce = 1,
  kReduceScatterBlock = 2,
};
inline constexpr int kCallKindCount = 3;
const char* call_kind_name(CallKind kind);  // "MPI_Allreduce", ...
inline constexpr uint32_t call_bit(CallKind kind) { return 1u << static_cast<unsigned>(kind); }

struct MpiConfig {
  bool enable = true;                              // SUMCAST_MPI_ENABLE
  std::vector<shim::ApplianceAddress> appliances;  // SUMCAST_MPI_APPLIANCES (required when enabled)
  std::string token;                               // first line of SUMCAST_MPI_TOKEN_FILE; "" when unset
  std::string token_file;                          // SUMCAST_MPI_TOKEN_FILE as given
  uint64_t threshold_bytes = 64 << 10;             // SUMCAST_MPI_THRESHOLD: smaller calls go to MPI
  uint32_t calls = call_bit(CallKind::kAllreduce) | call_bit(CallKind::kIallreduce);  // SUMCAST_MPI_CALLS
  std::string bind;                          // SUMCAST_MPI_BIND: IPv4 or interface name; "": route to appliance
  bool intranode = true;                     // SUMCAST_MPI_INTRANODE: shared-memory reduction among a host's ranks
  uint64_t shm_bytes = 4 << 20;              // SUMCAST_MPI_SHM_BYTES: piece size of the intra-node pipeline
  bool progress_thread = true;               // SUMCAST_MPI_PROGRESS_THREAD
  int stats = 0;                             // SUMCAST_MPI_STATS: 0 off, 1 summary at MPI_Finalize, 2 also per rank
  std::string job_prefix = "mpi";            // SUMCAST_MPI_JOB: prefix of the appliance job names
  uint32_t payload_bytes = 1024;             // SUMCAST_MPI_PAYLOAD
  bool payload_explicit = false;             // SUMCAST_MPI_PAYLOAD was set (else the path MTU decides)
  uint32_t slots = 0;                        // SUMCAST_MPI_SLOTS (0: the appliance's default)
  bool multicast = false;                    // SUMCAST_MPI_MULTICAST: results by multicast wanted
  bool loss_notices = true;                  // SUMCAST_MPI_LOSS_NOTICES: loss notices wanted
  uint32_t rto_us = 5000;                    // SUMCAST_MPI_RTO_US
  uint32_t busy_poll_us = 0;                 // SUMCAST_MPI_BUSY_POLL_US (0: off)
  bool udp_gro = true;                       // SUMCAST_MPI_UDP_GRO
  bool udp_gso = false;                      // SUMCAST_MPI_UDP_GSO
  uint32_t send_queue_us = 2000;             // SUMCAST_MPI_SEND_QUEUE_US (0: off)
  uint8_t dscp = 0;                          // SUMCAST_MPI_DSCP: of the contributions, 0..63
  bool ecn = false;                          // SUMCAST_MPI_ECN: contributions ECT(0)
  int repair_dscp = -1;                      // SUMCAST_MPI_REPAIR_DSCP: of resends, 0..63; -1 (unset): dscp
  bool cnp_reaction = true;                  // SUMCAST_MPI_CNP_REACTION
  uint32_t window_cut = 50;                  // SUMCAST_MPI_WINDOW_CUT (percent)
  uint32_t window_step = 1;                  // SUMCAST_MPI_WINDOW_STEP
  uint32_t retries = 0;                      // SUMCAST_MPI_RETRIES (0: unlimited, bounded by op_timeout_ms)
  uint32_t op_timeout_ms = 30000;            // SUMCAST_MPI_OP_TIMEOUT_MS
  uint32_t connect_timeout_ms = 5000;        // SUMCAST_MPI_CONNECT_TIMEOUT_MS
  uint32_t register_timeout_ms = 30000;      // SUMCAST_MPI_REGISTER_TIMEOUT_MS
  bool verbose = false;                      // SUMCAST_MPI_VERBOSE: one line per communicator set up
  bool check = false;                        // SUMCAST_MPI_CHECK: ranks compare every decision (debugging)
  bool device_stage = true;                  // SUMCAST_MPI_DEVICE_BUFFERS: stage (true) or mpi
  std::string cuda_driver = "libcuda.so.1";  // SUMCAST_MPI_CUDA_DRIVER
  std::string topology_file;                 // SUMCAST_MPI_TOPOLOGY: host description; "": detect NUMA nodes

  // SUMCAST_MPI_FAILOVER, _FALLBACK and _AFTER_MS (docs/failover.md)
  shim::CommConfig::Failover failover = shim::CommConfig::Failover::kAuto;
  uint32_t failover_after_ms = 1000;
  // SUMCAST_MPI_FAILOVER_FALLBACK: with every appliance lost, PMPI_Allreduce (true) or an error.
  bool fallback_mpi = false;
};

enum class EnvType : uint8_t { kBool, kBytes, kUint, kString, kList, kPath };
const char* env_type_name(EnvType type);

struct EnvVar {
  const char* name;
  EnvType type;
  const char* default_text;  // as a user would write it
  const char* doc;
  bool shared;  // must be identical on every rank (part of fingerprint())
  // Parses `value` into `config`; the message of a non-OK Status names the problem (not the variable).
  Status (*apply)(MpiConfig& config, std::string_view value);
};

// The table: one entry per variable, in documentation order.
std::span<const EnvVar> env_table();

// Looks a variable up (nullptr when unset); std::getenv in the interposer, a map in tests.
using GetEnv = std::function<const char*(const char*)>;

// Reads every variable of the table over the defaults. A non-OK status lists every problem
// ("SUMCAST_MPI_THRESHOLD='12Q': not a byte count; SUMCAST_MPI_APPLIANCES is not set"); the
// config then holds the defaults for the variables that failed. An explicit SUMCAST_MPI_ENABLE=0
// is not a problem: the config says enable = false and the status is OK.
struct LoadedConfig {
  MpiConfig config;
  Status status;
};
LoadedConfig load_config(const GetEnv& getenv);

// A 64-bit digest of the variables marked `shared` as this process parsed them: ranks whose
// digests differ would take different decisions for the same call, so the interposer compares
// it across ranks before it takes anything.
uint64_t fingerprint(const MpiConfig& config);

// The table as a Markdown table (name | type | default | meaning), for the README and
// SUMCAST_MPI_HELP=1.
std::string env_table_markdown();

// Parsers shared with the table (exposed for tests).
Result<bool> parse_bool(std::string_view text);       // 1/0, true/false, yes/no, on/off
Result<uint64_t> parse_bytes(std::string_view text);  // 65536, 64K, 4M, 1G (binary units)
Result<uint32_t> parse_calls(std::string_view text);  // "allreduce,iallreduce,reduce_scatter_block", "all", "none"

// SUMCAST_MPI_BIND: an IPv4 address as is, or the first IPv4 address of the named interface
// (looked up in this process's network namespace). "" stays "".
Result<std::string> resolve_bind(const std::string& bind);

}  // namespace sumcast::mpi
