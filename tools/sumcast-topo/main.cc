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

#include "sumcast/cli.h"
#include "sumcast/topo/dot.h"
#include "sumcast/topo/loaders.h"
#include "sumcast/topo/planner.h"
#include "sumcast/topo/report.h"
#include "sumcast/topo/router.h"

namespace {

using namespace sumcast::topo;

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
  CLI::App app{
      "Shows a GPU host as the reduction planner sees it and the plan it chooses.\n"
      "SOURCE (default: this machine, through hwloc): one of --file, --hwloc-xml, --nccl-xml, --smi, --matrix.",
      "sumcast-topo"};
  sumcast::cli::setup(app);
  auto* source = app.add_option_group("SOURCE");
  const auto source_option = [&](const char* name, SourceFormat f, const char* what) {
    source->add_option_function<std::string>(
        name,
        [&path, &format, f](const std::string& v) {
          path = v;
          format = f;
        },
        what);
  };
  source_option("--file", SourceFormat::kDetect, "a description; the format is detected from the content");
  source_option("--hwloc-xml", SourceFormat::kHwlocXml, "an hwloc XML export");
  source_option("--nccl-xml", SourceFormat::kNcclXml, "an NCCL topology XML file");
  source_option("--smi", SourceFormat::kSmiMatrix, "the output of `nvidia-smi topo -m`");
  source_option("--matrix", SourceFormat::kWeightMatrix, "a link-weight matrix");
  source->require_option(0, 1);
  auto* nvswitch =
      app.add_option("--assume-nvswitch", load.nvswitch_gbps_per_gpu,
                     "unknown GPU-GPU links: one NVSwitch fabric, GB/s per GPU (0 or none: from the GPU model)")
          ->expected(0, 1)
          ->check(CLI::NonNegativeNumber);
  bool pcie_only = false;
  app.add_flag("--assume-pcie-only", pcie_only, "unknown GPU-GPU links: PCIe/SMP only (no NVSwitch trunk either)")
      ->excludes(nvswitch);
  app.add_option("--assume-gpus", load.assume_gpus, "NCCL XML entries without a class: the first N are GPUs (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option_function<std::string>(
         "--pcie",
         [&load](const std::string& v) {
           if (std::sscanf(v.c_str(), "%d:%d", &load.assumed_pcie_gen, &load.assumed_pcie_width) != 2 ||
               pcie_gbps(load.assumed_pcie_gen, load.assumed_pcie_width) <= 0) {
             throw CLI::ValidationError("--pcie", "needs GEN:WIDTH of a real link, e.g. 4:16, not " + v);
           }
         },
         "PCIe links of unknown speed, GEN:WIDTH (default 3:16)")
      ->type_name("GEN:WIDTH");
  app.add_option("--nvlink-gbps", load.nvlink_gbps_per_link,
                 "per NVLink and direction (0: from the GPU model, else 25)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--smp-gbps", load.smp_gbps, "socket interconnect")->check(CLI::PositiveNumber);
  app.add_option("--nic-gbps", load.nic_gbps, "NIC speed (12.5 = 100 Gb/s)")->check(CLI::PositiveNumber);
  sumcast::cli::add_size_option(app, "--bytes", &request.bytes, "buffer per GPU (default 64M)");
  app.add_option_function<std::string>(
         "--dtype", [&request](const std::string& v) { request.elem_size = v == "fp64" ? 8 : 4; },
         "element type (default fp32)")
      ->check(CLI::IsMember({"fp32", "fp64", "int32"}));
  app.add_flag("--network", request.network, "include the reduced data's round trip through the NICs");
  std::vector<std::string> strategy_names;
  for (int s = 0; s < kStrategyCount; ++s) strategy_names.emplace_back(strategy_name(static_cast<Strategy>(s)));
  app.add_option_function<std::vector<std::string>>(
         "--strategy",
         [&request](const std::vector<std::string>& names) {
           for (const std::string& v : names) {
             for (int s = 0; s < kStrategyCount; ++s) {
               if (v == strategy_name(static_cast<Strategy>(s))) request.strategies.push_back(static_cast<Strategy>(s));
             }
           }
         },
         "only this candidate; repeatable")
      ->check(CLI::IsMember(strategy_names));
  app.add_option("--cpu-sum-gbps", request.cost.cpu_sum_gbps, "CPU summation per NUMA node")
      ->check(CLI::PositiveNumber);
  app.add_option("--step-latency-us", request.cost.step_latency_us, "fixed cost per stage")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--penalty", request.trees.penalty, "tree link-usage penalty")->check(CLI::Range(0.0, 1.0));
  app.add_flag("--steps", steps, "print every step of the chosen plan");
  app.add_flag("--all", all, "print every candidate's plan, not only the chosen one");
  app.add_option("--dot", dot_prefix, "write PREFIX-host.dot and PREFIX-plan.dot, and .svg/.png when `dot` exists")
      ->type_name("PREFIX");
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (pcie_only) load.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  if (nvswitch->count() > 0) load.unknown_gpu_links = UnknownGpuLinks::kNvSwitch;
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
