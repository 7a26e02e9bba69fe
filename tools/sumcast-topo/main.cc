// sumcast-topo: shows a GPU host as the reduction planner sees it (docs/topology.md §4). Detects
// the live machine with hwloc or loads a description (hwloc XML, NCCL topology XML, `nvidia-smi
// topo -m`, link-weight matrix), prints it like `nvidia-smi topo -m` plus its switches, NICs and
// assumptions, plans the intra-host reduce and broadcast and prints the chosen plan with its
// per-link bytes and predicted time; --dot writes Graphviz pictures and renders them when `dot`
// is installed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sumcast/topo/dot.h"
#include "sumcast/topo/loaders.h"
#include "sumcast/topo/planner.h"
#include "sumcast/topo/report.h"
#include "sumcast/topo/router.h"

namespace {

using namespace sumcast::topo;

constexpr const char* kUsage =
    "usage: sumcast-topo [SOURCE] [OPTIONS]\n"
    "SOURCE (default: this machine, through hwloc):\n"
    "  --file PATH            detect the format from the content\n"
    "  --hwloc-xml PATH | --nccl-xml PATH | --smi PATH | --matrix PATH\n"
    "Assumptions for what a source does not say:\n"
    "  --assume-nvswitch[=GBPS]  unknown GPU-GPU links: one NVSwitch fabric (GB/s per GPU)\n"
    "  --assume-pcie-only        unknown GPU-GPU links: PCIe/SMP only (no NVSwitch trunk either)\n"
    "  --assume-gpus N           NCCL XML entries without a class: the first N are GPUs\n"
    "  --pcie GEN:WIDTH          PCIe links of unknown speed (default 3:16)\n"
    "  --nvlink-gbps X           per NVLink and direction (default: from the GPU model, else 25)\n"
    "  --smp-gbps X              socket interconnect (default 20)\n"
    "  --nic-gbps X              NIC speed (default 12.5 = 100 Gb/s)\n"
    "Planning:\n"
    "  --bytes N[K|M|G]          buffer per GPU (default 64M)\n"
    "  --dtype fp32|fp64|int32   element type (default fp32)\n"
    "  --network                 include the reduced data's round trip through the NICs\n"
    "  --strategy NAME           only this candidate (trees, ring, flat, cpu-assisted); repeatable\n"
    "  --cpu-sum-gbps X          CPU summation per NUMA node (default 25)\n"
    "  --step-latency-us X       fixed cost per stage (default 10)\n"
    "  --penalty X               tree link-usage penalty (default 0.7)\n"
    "Output:\n"
    "  --steps                   print every step of the chosen plan\n"
    "  --all                     print every candidate's plan, not only the chosen one\n"
    "  --dot PREFIX              write PREFIX-host.dot and PREFIX-plan.dot, and .svg/.png when `dot` exists\n";

bool parse_bytes(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::string str(s);
  double v = std::strtod(str.c_str(), &end);
  uint64_t mult = 1;
  std::string_view unit(end);
  if (unit == "K" || unit == "k" || unit == "KiB") {
    mult = 1ull << 10;
  } else if (unit == "M" || unit == "m" || unit == "MiB") {
    mult = 1ull << 20;
  } else if (unit == "G" || unit == "g" || unit == "GiB") {
    mult = 1ull << 30;
  } else if (!unit.empty()) {
    return false;
  }
  if (v < 0) return false;
  out = static_cast<uint64_t>(v * static_cast<double>(mult));
  return true;
}

bool parse_double(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && out >= 0;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "sumcast-topo: %s\n", msg.c_str());
  return 1;
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  LoadOptions load;
  PlanRequest request;
  SourceFormat format = SourceFormat::kDetect;
  std::string path, dot_prefix;
  bool steps = false, all = false;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string v;
    double d = 0;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--file" || a == "--hwloc-xml" || a == "--nccl-xml" || a == "--smi" || a == "--matrix") {
      if (!value(path)) return fail(a + " needs a path");
      format = a == "--hwloc-xml"  ? SourceFormat::kHwlocXml
               : a == "--nccl-xml" ? SourceFormat::kNcclXml
               : a == "--smi"      ? SourceFormat::kSmiMatrix
               : a == "--matrix"   ? SourceFormat::kWeightMatrix
                                   : SourceFormat::kDetect;
    } else if (a == "--assume-nvswitch" || a.rfind("--assume-nvswitch=", 0) == 0) {
      load.unknown_gpu_links = UnknownGpuLinks::kNvSwitch;
      if (a.size() > 17 && !parse_double(a.substr(18), load.nvswitch_gbps_per_gpu)) return fail("bad " + a);
    } else if (a == "--assume-pcie-only") {
      load.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
    } else if (a == "--assume-gpus") {
      if (!value(v) || !parse_double(v, d)) return fail("--assume-gpus needs a count");
      load.assume_gpus = static_cast<int>(d);
    } else if (a == "--pcie") {
      if (!value(v) || std::sscanf(v.c_str(), "%d:%d", &load.assumed_pcie_gen, &load.assumed_pcie_width) != 2 ||
          pcie_gbps(load.assumed_pcie_gen, load.assumed_pcie_width) <= 0) {
        return fail("--pcie needs GEN:WIDTH, e.g. 4:16");
      }
    } else if (a == "--nvlink-gbps") {
      if (!value(v) || !parse_double(v, load.nvlink_gbps_per_link)) return fail("--nvlink-gbps needs a number");
    } else if (a == "--smp-gbps") {
      if (!value(v) || !parse_double(v, load.smp_gbps) || load.smp_gbps == 0) return fail("--smp-gbps needs a number");
    } else if (a == "--nic-gbps") {
      if (!value(v) || !parse_double(v, load.nic_gbps) || load.nic_gbps == 0) return fail("--nic-gbps needs a number");
    } else if (a == "--bytes") {
      if (!value(v) || !parse_bytes(v, request.bytes)) return fail("--bytes needs a size like 64M");
    } else if (a == "--dtype") {
      if (!value(v)) return fail("--dtype needs a type");
      if (v == "fp32" || v == "int32") {
        request.elem_size = 4;
      } else if (v == "fp64") {
        request.elem_size = 8;
      } else {
        return fail("--dtype: fp32, fp64 or int32");
      }
    } else if (a == "--network") {
      request.network = true;
    } else if (a == "--strategy") {
      if (!value(v)) return fail("--strategy needs a name");
      bool found = false;
      for (int s = 0; s < kStrategyCount; ++s) {
        if (v == strategy_name(static_cast<Strategy>(s))) {
          request.strategies.push_back(static_cast<Strategy>(s));
          found = true;
        }
      }
      if (!found) return fail("unknown strategy " + v);
    } else if (a == "--cpu-sum-gbps") {
      if (!value(v) || !parse_double(v, request.cost.cpu_sum_gbps) || request.cost.cpu_sum_gbps == 0) {
        return fail("--cpu-sum-gbps needs a number");
      }
    } else if (a == "--step-latency-us") {
      if (!value(v) || !parse_double(v, request.cost.step_latency_us)) return fail("--step-latency-us needs a number");
    } else if (a == "--penalty") {
      if (!value(v) || !parse_double(v, request.trees.penalty) || request.trees.penalty > 1) {
        return fail("--penalty needs a number in [0, 1]");
      }
    } else if (a == "--steps") {
      steps = true;
    } else if (a == "--all") {
      all = true;
    } else if (a == "--dot") {
      if (!value(dot_prefix)) return fail("--dot needs a path prefix");
    } else {
      return fail("unknown argument " + a + " (--help lists them)");
    }
  }
  sumcast::Result<HostModel> model = path.empty() ? load_live(load) : load_file(path, format, load);
  if (!model.ok()) return fail(model.status().to_string());
  Router router(*model);
  std::printf("%s\n%s\n", format_host_summary(*model).c_str(), format_topo_matrix(router).c_str());
  sumcast::Result<PlannerResult> result = plan_host(*model, request);
  if (!result.ok()) return fail(result.status().to_string());
  std::printf("%s\n", format_candidates(*result).c_str());
  for (const Candidate& c : result->candidates) {
    if (!c.status.ok() || (!all && &c != &result->best())) continue;
    std::printf("%s\n", format_plan(*model, *result, c, steps).c_str());
  }
  if (!dot_prefix.empty()) {
    const Candidate& best = result->best();
    std::vector<std::pair<std::string, std::string>> files = {
        {dot_prefix + "-host.dot", host_dot(*model, &best.plan, &best.prediction)},
        {dot_prefix + "-plan.dot", plan_dot(*model, best.plan)}};
    for (const auto& [file, text] : files) {
      if (!write_text(file, text)) return fail("cannot write " + file);
      std::printf("wrote %s\n", file.c_str());
      if (!dot_available()) continue;
      for (const char* fmt : {"svg", "png"}) {
        std::string out = file.substr(0, file.size() - 4) + "." + fmt;
        sumcast::Status st = render_dot(file, out, fmt);
        if (!st.ok()) return fail(st.to_string());
        std::printf("wrote %s\n", out.c_str());
      }
    }
    if (!dot_available()) std::printf("graphviz `dot` not found: only the .dot files were written\n");
  }
  return 0;
}
