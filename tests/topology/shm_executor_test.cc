// Shared memory between processes: one forked process per rank attaches by name, runs its share
// of the plan between barriers and checks its own buffer; exactness across strategies, a failing
// rank makes the others fail instead of hanging, and mismatched attaches are refused.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "sumcast/topo/cpu_executor.h"
#include "sumcast/topo/planner.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

constexpr int kTimeoutMs = 30000;

std::string unique_name() {
  static std::atomic<int> counter{0};
  return "/sumcast-topo-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

float value(int rank, size_t e) { return static_cast<float>((rank + 1) * static_cast<int>(e % 89 + 1)); }

// Child: attach, fill, run, check. Exit code 0 = exact, 2 = wrong result, 3 = run failed, 4 = attach failed.
[[noreturn]] void child(const std::string& name, const HostModel& m, const Plan& plan, int rank, bool fail_exchange) {
  auto shm = ShmReduction::attach(name, m, plan, wire::Dtype::kFp32, wire::ReduceOp::kSum);
  if (!shm.ok()) _exit(4);
  size_t n = plan.bytes / 4;
  auto* buf = static_cast<float*>(shm->buffer(rank));
  for (size_t e = 0; e < n; ++e) buf[e] = value(rank, e);
  ExchangeFn exchange = [&](void* data, uint64_t, uint64_t length) {
    if (fail_exchange) return Status::aborted("injected");
    auto* p = static_cast<float*>(data);
    for (size_t i = 0; i < length / 4; ++i) p[i] *= 2;  // two identical hosts
    return Status();
  };
  if (!shm->run(rank, exchange, kTimeoutMs).ok()) _exit(3);
  float sum_ranks = static_cast<float>(m.gpu_count() * (m.gpu_count() + 1) / 2);
  for (size_t e = 0; e < n; ++e) {
    float expect = sum_ranks * static_cast<float>(e % 89 + 1);
    bool exchanged = false;
    for (const Stage& s : plan.stages) {
      for (const Step& st : s.steps) exchanged = exchanged || st.op == StepOp::kExchange;
    }
    if (exchanged) expect *= 2;
    if (buf[e] != expect) _exit(2);
  }
  _exit(0);
}

// Forks one process per rank; returns their exit codes.
std::vector<int> run_ranks(const HostModel& m, const Plan& plan, int failing_rank_exchange = -1) {
  std::string name = unique_name();
  auto shm = ShmReduction::create(name, m, plan, wire::Dtype::kFp32, wire::ReduceOp::kSum);
  EXPECT_TRUE(shm.ok()) << shm.status().to_string();
  if (!shm.ok()) return {};
  std::vector<pid_t> pids;
  for (int r = 0; r < m.gpu_count(); ++r) {
    pid_t pid = fork();
    if (pid == 0) child(name, m, plan, r, r == failing_rank_exchange);
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  return codes;
}

Plan plan_for(const HostModel& m, Strategy s, uint64_t bytes, bool network) {
  PlanRequest req;
  req.bytes = bytes;
  req.network = network;
  req.strategies = {s};
  auto res = plan_host(m, req);
  EXPECT_TRUE(res.ok()) << res.status().to_string();
  return res.ok() ? res->best().plan : Plan{};
}

TEST(ShmReduction, ForkedRanksGetExactSumsForEveryStrategy) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  for (int s = 0; s < kStrategyCount; ++s) {
    for (bool network : {false, true}) {
      SCOPED_TRACE(std::string(strategy_name(static_cast<Strategy>(s))) + (network ? " network" : " local"));
      Plan plan = plan_for(*m, static_cast<Strategy>(s), 4 * 1003, network);
      std::vector<int> codes = run_ranks(*m, plan);
      EXPECT_EQ(codes, std::vector<int>(8, 0));
    }
  }
}

TEST(ShmReduction, CpuAssistedAcrossSwitchesAndNics) {
  LoadOptions o;
  o.unknown_gpu_links = UnknownGpuLinks::kPcieOnly;
  auto m = testing::load(testing::kP4d, o);
  ASSERT_TRUE(m.ok());
  Plan plan = plan_for(*m, Strategy::kCpuAssisted, 4 * 4099, true);
  EXPECT_EQ(run_ranks(*m, plan), std::vector<int>(8, 0));
}

TEST(ShmReduction, AFailingRankFailsTheOthersInsteadOfHanging) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  Plan plan = plan_for(*m, Strategy::kTrees, 4 * 64, true);
  std::vector<int> codes = run_ranks(*m, plan, 0);
  ASSERT_EQ(codes.size(), 8u);
  for (int c : codes) EXPECT_EQ(c, 3) << "every rank reports the failure";
}

TEST(ShmReduction, RefusesMismatchedAttachAndDuplicateCreate) {
  auto m = testing::load(testing::kDgx1);
  ASSERT_TRUE(m.ok());
  Plan a = plan_for(*m, Strategy::kRing, 4 * 100, false);
  Plan b = plan_for(*m, Strategy::kRing, 4 * 200, false);
  std::string name = unique_name();
  auto shm = ShmReduction::create(name, *m, a, wire::Dtype::kFp32, wire::ReduceOp::kSum);
  ASSERT_TRUE(shm.ok()) << shm.status().to_string();
  EXPECT_FALSE(ShmReduction::create(name, *m, a, wire::Dtype::kFp32, wire::ReduceOp::kSum).ok());
  EXPECT_FALSE(ShmReduction::attach(name, *m, b, wire::Dtype::kFp32, wire::ReduceOp::kSum).ok());
  EXPECT_TRUE(ShmReduction::attach(name, *m, a, wire::Dtype::kFp32, wire::ReduceOp::kSum).ok());
  EXPECT_FALSE(ShmReduction::attach("/sumcast-topo-test-none", *m, a, wire::Dtype::kFp32, wire::ReduceOp::kSum).ok());
  EXPECT_EQ(shm->owner_of(m->gpus()[5]), 5);
  EXPECT_FALSE(shm->run(8, {}, 10).ok());
}

}  // namespace
}  // namespace sumcast::topo
