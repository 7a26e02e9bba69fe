#include "sumcast/dpdk/eal_args.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>

#include "sumcast/config/vdev.h"

namespace sumcast::dpdk {
namespace {

// True when `arg` is option `name`: "-l", "-l0,1" (short, value attached), "--lcores",
// "--lcores=0,1".
bool is_option(std::string_view arg, std::string_view name) {
  if (arg == name) return true;
  if (name.size() == 2 && name[0] == '-' && name[1] != '-') return arg.size() > 2 && arg.substr(0, 2) == name;
  return arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=';
}

bool has_option(std::span<const std::string> args, std::initializer_list<std::string_view> names) {
  for (const std::string& a : args) {
    for (std::string_view n : names) {
      if (is_option(a, n)) return true;
    }
  }
  return false;
}

// The value of the last occurrence of option `name` (separate or attached), if any.
std::optional<std::string> option_value(std::span<const std::string> args, std::string_view name) {
  std::optional<std::string> value;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == name) {
      if (i + 1 < args.size()) value = args[i + 1];
    } else if (is_option(a, name)) {
      value = a.substr(name.size() + (name.size() == 2 && name[1] != '-' ? 0 : 1));
    }
  }
  return value;
}

// Copies `in` to `out`, leaving out every --in-memory.
void append_without_in_memory(std::span<const std::string> in, std::vector<std::string>* out, bool* dropped) {
  for (const std::string& a : in) {
    if (a == "--in-memory") {
      *dropped = true;
      continue;
    }
    out->push_back(a);
  }
}

std::string vdev_name(const std::string& vdev) { return vdev.substr(0, vdev.find(',')); }

}  // namespace

std::vector<std::string> hugetlbfs_mounts(std::string_view proc_mounts) {
  std::vector<std::string> mounts;
  std::istringstream in{std::string(proc_mounts)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    if (fields >> device >> mount_point >> type && type == "hugetlbfs") mounts.push_back(mount_point);
  }
  return mounts;
}

HugePageState probe_hugepages() {
  HugePageState state;
  std::ifstream mounts("/proc/mounts");
  if (mounts) {
    std::stringstream text;
    text << mounts.rdbuf();
    state.mounts = hugetlbfs_mounts(text.str());
  }
  std::ifstream free_pages("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  uint64_t n = 0;
  if (free_pages >> n) state.free_2mb_pages = n;
  return state;
}

Result<EalPlan> plan_eal(const config::AggConfig& config, const HugePageState& huge,
                         std::span<const std::string> overrides, std::string_view program) {
  const config::EalConfig& eal = config.eal;
  EalPlan plan;
  std::vector<std::string>& args = plan.args;
  args.emplace_back(program);

  if (!has_option(overrides, {"-l", "--lcores", "-c"})) {
    const bool mapped = eal.lcores.find_first_of("@(") != std::string::npos;
    args.emplace_back(mapped ? "--lcores" : "-l");
    args.push_back(eal.lcores);
  } else {
    plan.notes.emplace_back("lcores from the command line replace eal.lcores");
  }

  if (auto prefix = option_value(overrides, "--file-prefix")) {
    plan.file_prefix = *prefix;
    plan.notes.emplace_back("--file-prefix from the command line replaces eal.file_prefix");
  } else {
    plan.file_prefix = eal.file_prefix;
    args.emplace_back("--file-prefix");
    args.push_back(eal.file_prefix);
  }

  uint64_t memory_mb = eal.memory_mb;
  if (has_option(overrides, {"-m", "--socket-mem"})) {
    plan.notes.emplace_back("memory from the command line replaces eal.memory_mb");
    if (auto m = option_value(overrides, "-m")) {
      uint64_t v = 0;
      // EAL rejects a malformed figure itself; keep the config's for the hugepage estimate then.
      if (std::from_chars(m->data(), m->data() + m->size(), v).ec == std::errc()) memory_mb = v;
    }
  } else {
    args.emplace_back("-m");
    args.push_back(std::to_string(eal.memory_mb));
  }

  // Hugepages when enough are free; otherwise --no-huge, so the appliance still starts (slower).
  const uint64_t pages_needed = (memory_mb + 1) / 2;
  const bool mounted = !huge.mounts.empty();
  const bool enough = mounted && huge.free_2mb_pages >= pages_needed;
  const std::string have =
      mounted ? "hugetlbfs at " + huge.mounts.front() + ", " + std::to_string(huge.free_2mb_pages) + " free 2 MiB pages"
              : "no hugetlbfs mounted";
  const std::string need = std::to_string(pages_needed) + " needed for " + std::to_string(memory_mb) + " MB";
  bool no_huge = false;
  if (has_option(overrides, {"--no-huge"})) {
    no_huge = true;
    plan.memory_note = "--no-huge (given on the command line)";
  } else {
    switch (eal.huge_pages) {
      case config::HugePages::kOff:
        no_huge = true;
        plan.memory_note = "--no-huge (eal.huge_pages = \"off\")";
        break;
      case config::HugePages::kOn:
        if (!enough) {
          return Status::unavailable(config.path + ": eal.huge_pages = \"on\" but " + have + " (" + need +
                                     "); reserve them or set huge_pages = \"auto\"");
        }
        plan.memory_note = "hugepages (" + have + ")";
        break;
      case config::HugePages::kAuto:
        if (enough) {
          plan.memory_note = "hugepages (" + have + ", " + need + ")";
        } else {
          no_huge = true;
          plan.memory_note = "--no-huge (" + have + ", " + need + ")";
        }
        break;
    }
    if (no_huge) args.emplace_back("--no-huge");
  }
  plan.hugepages = !no_huge;

  for (const std::string& v : eal.vdevs) {
    args.emplace_back("--vdev");
    args.push_back(v);
    // The port's net_af_packet rings: sumcastd's size where the vdev names none (config/vdev.h).
    const config::VdevArgs vdev = config::parse_vdev(v);
    if (vdev.name != config.port.device || !config::is_af_packet(vdev)) continue;
    const Result<config::AfPacketRing> ring = config::af_packet_ring(vdev);
    if (!ring.ok() || ring->frame_count != 0) continue;  // (a bad ring is agg.conf's error, reported before)
    const uint32_t frames = config::af_packet_frame_count(*ring);
    args.back() += ",framecnt=" + std::to_string(frames);
    const uint64_t kib = uint64_t{frames} / ring->frames_per_block() * config::af_packet_block_memory(*ring) >> 10;
    plan.notes.push_back(vdev.name + ": framecnt=" + std::to_string(frames) + " added (" + std::to_string(kib) +
                         " KiB of kernel memory per ring; the PMD's default, 512 frames, overflows while the engine "
                         "is descheduled: docs/agg.conf.md, eal.vdevs)");
  }
  for (const std::string& a : eal.allow) {
    args.emplace_back("-a");
    args.push_back(a);
  }
  const bool port_is_vdev = std::any_of(eal.vdevs.begin(), eal.vdevs.end(),
                                        [&](const std::string& v) { return vdev_name(v) == config.port.device; });
  if (port_is_vdev && eal.allow.empty() && !has_option(overrides, {"-a", "--allow", "-b", "--block", "--no-pci"}) &&
      !has_option(eal.extra_args, {"-a", "--allow", "-b", "--block", "--no-pci"})) {
    args.emplace_back("--no-pci");
  }
  if (!config.telemetry.dpdk_telemetry && !has_option(overrides, {"--telemetry", "--no-telemetry"})) {
    args.emplace_back("--no-telemetry");
  }

  bool dropped_in_memory = false;
  if (no_huge) {
    append_without_in_memory(eal.extra_args, &args, &dropped_in_memory);
    append_without_in_memory(overrides, &args, &dropped_in_memory);
  } else {
    args.insert(args.end(), eal.extra_args.begin(), eal.extra_args.end());
    args.insert(args.end(), overrides.begin(), overrides.end());
  }
  if (dropped_in_memory) plan.notes.emplace_back("--in-memory dropped: it cannot be combined with --no-huge");
  return plan;
}

std::string join_args(std::span<const std::string> args) {
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace sumcast::dpdk
