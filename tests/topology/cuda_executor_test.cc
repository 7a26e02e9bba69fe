// The CUDA executor on a real GPU: every strategy's plan for the DGX-1 model (8 plan GPUs mapped
// round-robin onto the devices present) gives exact sums, with and without the exchange. Skips
// without a GPU, unless SUMCAST_REQUIRE_GPU=1 (tests/topology/gpu_checks.sh) makes that a failure.
#include "sumcast/topo/cuda_executor.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "sumcast/topo/planner.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

bool gpu_required() {
  const char* v = std::getenv("SUMCAST_REQUIRE_GPU");
  return v && std::string(v) == "1";
}

#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                     \
    if (cuda_device_count() == 0) {                                                        \
      if (gpu_required()) {                                                                \
        FAIL() << "SUMCAST_REQUIRE_GPU=1 but no CUDA device is visible";                   \
      }                                                                                    \
      GTEST_SKIP() << "no CUDA device: run tests/topology/gpu_checks.sh on a GPU machine"; \
    }                                                                                      \
  } while (0)

TEST(CudaExecutor, CreateFailsCleanlyWithoutADeviceOrWithBadArguments) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  PlanRequest req;
  req.bytes = 1024;
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  if (cuda_device_count() == 0) {
    auto ex = CudaExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum);
    ASSERT_FALSE(ex.ok());
    EXPECT_EQ(ex.status().code(), StatusCode::kUnavailable);
    return;
  }
  EXPECT_FALSE(CudaExecutor::create(*m, res->best().plan, wire::Dtype::kFp16, wire::ReduceOp::kSum).ok());
  EXPECT_FALSE(CudaExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum, {0}).ok());
  EXPECT_FALSE(
      CudaExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum, std::vector<int>(8, 999))
          .ok());
}

TEST(CudaExecutor, EveryStrategyIsExactOnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  int devices = cuda_device_count();
  std::vector<int> map;
  for (int i = 0; i < m->gpu_count(); ++i) map.push_back(i % devices);
  const size_t kElems = (1 << 20) + 7;
  for (int s = 0; s < kStrategyCount; ++s) {
    for (bool network : {false, true}) {
      SCOPED_TRACE(std::string(strategy_name(static_cast<Strategy>(s))) + (network ? " network" : " local"));
      PlanRequest req;
      req.bytes = kElems * 4;
      req.network = network;
      req.strategies = {static_cast<Strategy>(s)};
      auto res = plan_host(*m, req);
      ASSERT_TRUE(res.ok());
      auto ex = CudaExecutor::create(*m, res->best().plan, wire::Dtype::kFp32, wire::ReduceOp::kSum, map);
      ASSERT_TRUE(ex.ok()) << ex.status().to_string();
      std::vector<void*> bufs;
      std::vector<float> host(kElems);
      for (int g = 0; g < m->gpu_count(); ++g) {
        ASSERT_EQ(cudaSetDevice(map[static_cast<size_t>(g)]), cudaSuccess);
        void* p = nullptr;
        ASSERT_EQ(cudaMalloc(&p, req.bytes), cudaSuccess);
        for (size_t e = 0; e < kElems; ++e) host[e] = static_cast<float>((g + 1) * static_cast<int>(e % 113 + 1));
        ASSERT_EQ(cudaMemcpy(p, host.data(), req.bytes, cudaMemcpyHostToDevice), cudaSuccess);
        bufs.push_back(p);
      }
      ExchangeFn twice = [](void* data, uint64_t, uint64_t len) {
        auto* f = static_cast<float*>(data);
        for (size_t i = 0; i < len / 4; ++i) f[i] *= 2;
        return Status();
      };
      Status st = (*ex)->run(bufs, twice);
      ASSERT_TRUE(st.ok()) << st.to_string();
      for (int g = 0; g < m->gpu_count(); ++g) {
        ASSERT_EQ(cudaSetDevice(map[static_cast<size_t>(g)]), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(host.data(), bufs[static_cast<size_t>(g)], req.bytes, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (size_t e = 0; e < kElems; ++e) {
          float expect = 36.f * static_cast<float>(e % 113 + 1) * (network ? 2.f : 1.f);
          ASSERT_EQ(host[e], expect) << "GPU" << g << " element " << e;
        }
        cudaFree(bufs[static_cast<size_t>(g)]);
      }
    }
  }
}

TEST(CudaExecutor, MinMaxAndInt32OnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto m = testing::load(testing::kP3);
  ASSERT_TRUE(m.ok());
  std::vector<int> map(static_cast<size_t>(m->gpu_count()), 0);
  const size_t kElems = 4099;
  PlanRequest req;
  req.bytes = kElems * 4;
  auto res = plan_host(*m, req);
  ASSERT_TRUE(res.ok());
  for (wire::ReduceOp op : {wire::ReduceOp::kMin, wire::ReduceOp::kMax, wire::ReduceOp::kSum}) {
    auto ex = CudaExecutor::create(*m, res->best().plan, wire::Dtype::kInt32, op, map);
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    std::vector<void*> bufs;
    std::vector<int32_t> host(kElems);
    for (int g = 0; g < m->gpu_count(); ++g) {
      void* p = nullptr;
      ASSERT_EQ(cudaMalloc(&p, req.bytes), cudaSuccess);
      for (size_t e = 0; e < kElems; ++e) host[e] = (g - 3) * (static_cast<int32_t>(e % 7) - 3);
      ASSERT_EQ(cudaMemcpy(p, host.data(), req.bytes, cudaMemcpyHostToDevice), cudaSuccess);
      bufs.push_back(p);
    }
    ASSERT_TRUE((*ex)->run(bufs, {}).ok());
    for (int g = 0; g < m->gpu_count(); ++g) {
      ASSERT_EQ(cudaMemcpy(host.data(), bufs[static_cast<size_t>(g)], req.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t e = 0; e < kElems; ++e) {
        int32_t expect = op == wire::ReduceOp::kSum ? 0 : (0 - 3) * (static_cast<int32_t>(e % 7) - 3);
        for (int k = 0; k < m->gpu_count(); ++k) {
          int32_t v = (k - 3) * (static_cast<int32_t>(e % 7) - 3);
          expect = op == wire::ReduceOp::kSum
                       ? expect + v
                       : (op == wire::ReduceOp::kMin ? std::min(expect, v) : std::max(expect, v));
        }
        ASSERT_EQ(host[e], expect) << "op " << static_cast<int>(op) << " GPU" << g << " element " << e;
      }
      cudaFree(bufs[static_cast<size_t>(g)]);
    }
  }
}

}  // namespace
}  // namespace sumcast::topo
