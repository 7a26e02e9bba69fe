// The CPU executor runs every strategy's plan for every real machine exactly: integer-valued
// fp32 sums, int32 sums with negatives, fp64 max; with and without the network exchange (each
// element exchanged exactly once); odd sizes and fewer elements than GPUs.
#include "sumcast/topo/cpu_executor.h"

#include <gtest/gtest.h>

#include <cstring>

#include "sumcast/topo/planner.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

constexpr int kHosts = 3;  // the exchange pretends three identical hosts: the result is 3x the local sum

template <typename T>
T value(wire::Dtype dtype, int gpu, size_t e) {
  switch (dtype) {
    case wire::Dtype::kFp32:
      return static_cast<T>((gpu + 1) * static_cast<int>(e % 97 + 1));
    case wire::Dtype::kInt32:
      return static_cast<T>((gpu - 3) * (static_cast<int>(e % 11) - 5));
    default:
      return static_cast<T>((gpu * 7 + static_cast<int>(e)) % 13);
  }
}

template <typename T>
void run_and_check(const HostModel& m, const Plan& plan, wire::Dtype dtype, wire::ReduceOp op, bool network) {
  size_t n = plan.bytes / sizeof(T);
  int gpus = m.gpu_count();
  std::vector<std::vector<T>> bufs(static_cast<size_t>(gpus), std::vector<T>(n));
  std::vector<void*> ptrs;
  for (int g = 0; g < gpus; ++g) {
    for (size_t e = 0; e < n; ++e) bufs[static_cast<size_t>(g)][e] = value<T>(dtype, g, e);
    ptrs.push_back(bufs[static_cast<size_t>(g)].data());
  }
  std::vector<int> exchanged(n, 0);
  ExchangeFn exchange = [&](void* data, uint64_t offset, uint64_t length) {
    T* p = static_cast<T*>(data);
    for (size_t i = 0; i < length / sizeof(T); ++i) {
      ++exchanged[offset / sizeof(T) + i];
      if (op == wire::ReduceOp::kSum) p[i] = static_cast<T>(p[i] * kHosts);  // max of identical hosts: unchanged
    }
    return Status();
  };
  Result<CpuExecutor> ex = CpuExecutor::create(m, plan, dtype, op);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  Status st = ex->run(ptrs, exchange);
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (size_t e = 0; e < n; ++e) {
    T expect = op == wire::ReduceOp::kMax ? value<T>(dtype, 0, e) : T{0};
    for (int g = 0; g < gpus; ++g) {
      T v = value<T>(dtype, g, e);
      expect = op == wire::ReduceOp::kMax ? std::max(expect, v) : static_cast<T>(expect + v);
    }
    if (network && op == wire::ReduceOp::kSum) expect = static_cast<T>(expect * kHosts);
    for (int g = 0; g < gpus; ++g) {
      ASSERT_EQ(bufs[static_cast<size_t>(g)][e], expect) << "GPU" << g << " element " << e;
    }
    if (network) {
      ASSERT_EQ(exchanged[e], 1) << "element " << e << " exchanged " << exchanged[e] << " times";
    }
  }
}

class CpuExecutorOnRealMachines : public ::testing::TestWithParam<testing::Machine> {};

TEST_P(CpuExecutorOnRealMachines, EveryStrategyIsExact) {
  const testing::Machine& mc = GetParam();
  auto m = testing::load(mc.file, mc.options);
  ASSERT_TRUE(m.ok());
  for (bool network : {false, true}) {
    if (network && m->nics().empty()) continue;
    for (uint64_t elems : {uint64_t{3}, uint64_t{1001}}) {
      for (int s = 0; s < kStrategyCount; ++s) {
        SCOPED_TRACE(std::string(strategy_name(static_cast<Strategy>(s))) + (network ? " network " : " local ") +
                     std::to_string(elems));
        PlanRequest req;
        req.network = network;
        req.strategies = {static_cast<Strategy>(s)};
        req.bytes = elems * 4;
        auto res4 = plan_host(*m, req);
        ASSERT_TRUE(res4.ok()) << res4.status().to_string();
        run_and_check<float>(*m, res4->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum, network);
        run_and_check<int32_t>(*m, res4->best().plan, wire::Dtype::kInt32, wire::ReduceOp::kSum, network);
        req.elem_size = 8;
        req.bytes = elems * 8;
        auto res8 = plan_host(*m, req);
        ASSERT_TRUE(res8.ok());
        run_and_check<double>(*m, res8->best().plan, wire::Dtype::kFp64, wire::ReduceOp::kMax, network);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CpuExecutorOnRealMachines, ::testing::ValuesIn(testing::real_machines()),
                         [](const auto& param_info) { return param_info.param.label; });

TEST(CpuExecutor, RejectsWhatItCannotRunInPlace) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.bytes = 64;
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  EXPECT_FALSE(CpuExecutor::create(*m, res->best().plan, wire::Dtype::kFp16, wire::ReduceOp::kSum).ok());
  EXPECT_FALSE(CpuExecutor::create(*m, res->best().plan, wire::Dtype::kFp64, wire::ReduceOp::kSum).ok())
      << "plan made for 4-byte elements";
  auto ex = CpuExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum);
  ASSERT_TRUE(ex.ok());
  std::vector<float> one(16);
  std::vector<void*> too_few{one.data()};
  EXPECT_FALSE(ex->run(too_few, {}).ok());
}

TEST(CpuExecutor, ExchangeStepsNeedAnExchangeFunctionAndPassItsErrorsOn) {
  auto m = testing::load(testing::kP4d);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.bytes = 1024;
  req.network = true;
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  auto ex = CpuExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum);
  ASSERT_TRUE(ex.ok());
  std::vector<std::vector<float>> bufs(8, std::vector<float>(256));
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  EXPECT_FALSE(ex->run(ptrs, {}).ok());
  Status st = ex->run(ptrs, [](void*, uint64_t, uint64_t) { return Status::aborted("appliance gone"); });
  EXPECT_EQ(st.code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace sumcast::topo
