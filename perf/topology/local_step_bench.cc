// The shared-memory executor's local step (ShmReduction, docs/topology.md §5) on this machine:
// one process per GPU of the host description (each standing for a rank's host buffer), the
// planner's chosen plan without the network, timed over --iters runs after one warm-up, against
// the cost model's prediction for that plan and against a memcpy of the same bytes (one buffer)
// in the same run. The cost model's figures are those of the described host (PCIe, SMP, CPU
// summation), not of this machine's memory: the comparison says how far the model is from host
// memory here.
//   usage: sumcast_bench_local_step --file HOST [--bytes 64M] [--iters 20] [--strategy NAME]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/topo/cpu_executor.h"
#include "sumcast/topo/loaders.h"
#include "sumcast/topo/planner.h"

namespace {

using namespace sumcast::topo;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string file, strategy;
  uint64_t bytes = 64ull << 20;
  int iters = 20;
  CLI::App app{"The shared-memory executor's local step on this machine, against the cost model and a memcpy.",
               "sumcast_bench_local_step"};
  sumcast::cli::setup(app);
  app.add_option("--file", file, "the host description (any format sumcast-topo reads)")->type_name("HOST")->required();
  sumcast::cli::add_size_option(app, "--bytes", &bytes, "buffer per GPU (default 64M)", 4);
  app.add_option("--iters", iters, "timed runs, after one warm-up")->check(CLI::Range(1, 1000000));
  std::vector<std::string> strategy_names;
  for (int s = 0; s < kStrategyCount; ++s) strategy_names.emplace_back(strategy_name(static_cast<Strategy>(s)));
  app.add_option("--strategy", strategy, "only this candidate (default: the planner's choice)")
      ->check(CLI::IsMember(strategy_names));
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  auto model = load_file(file, SourceFormat::kDetect, LoadOptions{});
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", file.c_str(), model.status().to_string().c_str());
    return 1;
  }
  PlanRequest req;
  req.bytes = bytes;
  req.elem_size = 4;
  for (int s = 0; s < kStrategyCount; ++s) {
    if (!strategy.empty() && strategy == strategy_name(static_cast<Strategy>(s))) {
      req.strategies.push_back(static_cast<Strategy>(s));
    }
  }
  auto planned = plan_host(*model, req);
  if (!planned.ok()) {
    std::fprintf(stderr, "plan: %s\n", planned.status().to_string().c_str());
    return 1;
  }
  const Plan& plan = planned->best().plan;
  const Prediction& pred = planned->best().prediction;
  const int ranks = model->gpu_count();
  const std::string name = "/sumcast-bench-local-" + std::to_string(getpid());
  auto shm = ShmReduction::create(name, *model, plan, sumcast::wire::Dtype::kFp32, sumcast::wire::ReduceOp::kSum);
  if (!shm.ok()) {
    std::fprintf(stderr, "shared memory: %s\n", shm.status().to_string().c_str());
    return 1;
  }
  const int kTimeoutMs = 60000;
  auto fill = [&](int rank) {
    auto* p = static_cast<float*>(shm->buffer(rank));
    for (uint64_t e = 0; e < plan.bytes / 4; ++e) p[e] = static_cast<float>(rank + 1);
  };
  std::vector<pid_t> children;
  for (int r = 1; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      auto mine = ShmReduction::attach(name, *model, plan, sumcast::wire::Dtype::kFp32, sumcast::wire::ReduceOp::kSum);
      if (!mine.ok()) _exit(3);
      for (int it = 0; it <= iters; ++it) {
        fill(r);
        if (!mine->run(r, {}, kTimeoutMs).ok()) _exit(4);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  double measured = 0;
  bool ok = true;
  for (int it = 0; it <= iters && ok; ++it) {  // iteration 0 warms up
    fill(0);
    const auto t0 = std::chrono::steady_clock::now();
    ok = shm->run(0, {}, kTimeoutMs).ok();
    if (it > 0) measured += seconds_since(t0);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const float want = static_cast<float>(ranks) * static_cast<float>(ranks + 1) / 2;
  const auto* out = static_cast<const float*>(shm->buffer(ranks - 1));
  if (!ok || failed != 0 || out[0] != want || out[plan.bytes / 4 - 1] != want) {
    std::fprintf(stderr, "the shared-memory run failed (ranks failed: %d)\n", failed);
    return 1;
  }
  measured /= iters;
  std::vector<uint8_t> a(plan.bytes, 1), b(plan.bytes, 0);
  std::memcpy(b.data(), a.data(), a.size());  // fault the pages in
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) {
    a[static_cast<size_t>(it) % a.size()] = static_cast<uint8_t>(it);
    std::memcpy(b.data(), a.data(), a.size());
  }
  const double copy = seconds_since(t0) / iters;
  const double gb = static_cast<double>(plan.bytes) / 1e9;
  std::printf("host %s: %d ranks, plan %s (%zu stages), %.1f MiB per rank, %d iterations\n", file.c_str(), ranks,
              plan.name.c_str(), plan.stages.size(), static_cast<double>(plan.bytes) / (1 << 20), iters);
  std::printf("  predicted %.3f ms (%.2f GB/s algorithm bandwidth; bottleneck %s)\n", pred.seconds * 1e3,
              gb / pred.seconds, pred.bottleneck.name.c_str());
  std::printf("  measured  %.3f ms (%.2f GB/s); measured / predicted %.2f\n", measured * 1e3, gb / measured,
              measured / pred.seconds);
  std::printf("  memcpy of the same bytes %.3f ms (%.2f GB/s)\n", copy * 1e3, gb / copy);
  return 0;
}
