// EAL command line for sumcastd: built from agg.conf's eal/port sections plus the arguments the
// operator gave after `--` (which are appended and win over what the config says), and the
// hugepage decision: hugepages when enough are mounted and free, else --no-huge, so that the
// appliance also starts on a test machine or container without them (slower, still correct).
//
// Pure functions over plain values (the hugepage state is probed separately), so the rules are
// unit-tested without DPDK. Thread safety: none needed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sumcast/config/agg_config.h"
#include "sumcast/status.h"

namespace sumcast::dpdk {

// What the machine offers in 2 MiB hugepages.
struct HugePageState {
  std::vector<std::string> mounts;  // hugetlbfs mount points (e.g. /dev/hugepages)
  uint64_t free_2mb_pages = 0;      // /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
};

// Reads /proc/mounts and sysfs. Missing files read as "no hugepages".
HugePageState probe_hugepages();
// The hugetlbfs mount points listed in a /proc/mounts text.
std::vector<std::string> hugetlbfs_mounts(std::string_view proc_mounts);

struct EalPlan {
  std::vector<std::string> args;   // argv for rte_eal_init, program name first
  bool hugepages = false;          // false: --no-huge is in args
  std::string memory_note;         // why hugepages or --no-huge (logged at start)
  std::vector<std::string> notes;  // other adjustments made (logged)
  std::string file_prefix;         // effective --file-prefix (telemetry socket directory)
};

// Builds the EAL arguments:
//   -l/--lcores eal.lcores (--lcores when it maps lcores to CPUs with '@' or groups), --file-prefix,
//   -m memory_mb, --vdev per eal.vdevs, -a per eal.allow, --no-pci when the port is one of the
//   vdevs and nothing is allowed, --no-telemetry when telemetry.dpdk_telemetry is false,
//   eal.extra_args, then `overrides`.
// An option in `overrides` replaces the config's: lcores (-l/--lcores/-c), --file-prefix, memory
// (-m/--socket-mem), hugepages (--no-huge). huge_pages = auto uses hugepages when a hugetlbfs is
// mounted and at least memory_mb / 2 free 2 MiB pages are reserved, else --no-huge; "on" fails
// (Unavailable) when they are not there; "off" always adds --no-huge. --in-memory is never
// combined with --no-huge (it is dropped, with a note).
Result<EalPlan> plan_eal(const config::AggConfig& config, const HugePageState& huge,
                         std::span<const std::string> overrides, std::string_view program = "sumcastd");

// The arguments joined by spaces (for the log).
std::string join_args(std::span<const std::string> args);

}  // namespace sumcast::dpdk
