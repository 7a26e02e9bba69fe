// plan_host (planner.h).
#include "sumcast/topo/planner.h"

#include <cmath>
#include <cstdio>

#include "sumcast/topo/router.h"

namespace sumcast::topo {
namespace {

constexpr double kTieTolerance = 0.005;

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  return buf;
}

std::string describe(const Candidate& c) {
  const Prediction& p = c.prediction;
  std::string s = std::string(strategy_name(c.strategy)) + " " + ms(p.seconds);
  if (!p.resources.empty()) {
    s += " (bottleneck " + p.bottleneck.name + ": " + format_bytes(p.bottleneck.bytes) + " at " +
         format_gbps(p.bottleneck.gbps) + " GB/s";
  } else {
    s += " (no transfers";
  }
  s += ", " + std::to_string(p.stages) + " stages)";
  return s;
}

}  // namespace

const Candidate* PlannerResult::find(Strategy s) const {
  for (const Candidate& c : candidates) {
    if (c.strategy == s) return &c;
  }
  return nullptr;
}

Result<PlannerResult> plan_host(const HostModel& model, const PlanRequest& request) {
  if (model.gpu_count() == 0) return Status::invalid_argument("the host has no GPU to plan for");
  Router router(model);
  std::vector<Strategy> which = request.strategies;
  if (which.empty()) which = {Strategy::kTrees, Strategy::kRing, Strategy::kFlat, Strategy::kCpuAssisted};
  PlannerResult out;
  for (Strategy s : which) {
    Candidate c;
    c.strategy = s;
    Result<Plan> plan = Status::internal("unknown strategy");
    switch (s) {
      case Strategy::kTrees:
        plan = make_tree_plan(router, request);
        break;
      case Strategy::kRing:
        plan = make_ring_plan(router, request);
        break;
      case Strategy::kFlat:
        plan = make_flat_plan(router, request);
        break;
      case Strategy::kCpuAssisted:
        plan = make_cpu_assisted_plan(router, request);
        break;
    }
    if (plan.ok()) {
      Status valid = validate_plan(model, *plan);
      if (!valid.ok()) return Status::internal("planner built an invalid plan: " + valid.message());
      c.plan = std::move(*plan);
      c.prediction = predict(router, c.plan, request.cost);
    } else {
      c.status = plan.status();
    }
    out.candidates.push_back(std::move(c));
  }
  double best_total = kUnlimited;
  for (const Candidate& c : out.candidates) {
    if (c.status.ok()) best_total = std::min(best_total, c.prediction.seconds);
  }
  for (size_t i = 0; i < out.candidates.size(); ++i) {
    const Candidate& c = out.candidates[i];
    if (!c.status.ok() || c.prediction.seconds > best_total * (1 + kTieTolerance)) continue;
    if (out.chosen < 0 || c.prediction.intra_seconds < out.best().prediction.intra_seconds * (1 - 1e-9)) {
      out.chosen = static_cast<int>(i);
    }
  }
  if (out.chosen < 0) {
    std::string why;
    for (const Candidate& c : out.candidates)
      why += std::string(strategy_name(c.strategy)) + ": " + c.status.message() + "; ";
    return Status::unavailable("no strategy applies: " + why);
  }
  const Candidate& best = out.best();
  out.why = describe(best) + " wins";
  std::string others;
  for (const Candidate& c : out.candidates) {
    if (&c == &best) continue;
    others += others.empty() ? "; " : ", ";
    others +=
        c.status.ok() ? describe(c) : std::string(strategy_name(c.strategy)) + " n/a (" + c.status.message() + ")";
  }
  out.why += others.empty() ? "." : " over " + others.substr(2) + ".";
  if (best.prediction.seconds > 0) {
    out.why += " Bandwidth term " + ms(best.prediction.bandwidth_seconds) + ", latency term " +
               ms(best.prediction.latency_seconds) + " for " + format_bytes(static_cast<double>(best.plan.bytes)) + ".";
  }
  return out;
}

}  // namespace sumcast::topo
