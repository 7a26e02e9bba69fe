// The CUDA executor's schedule without a device (cuda_schedule.h): for every strategy's plan on
// every real machine and the synthetic multi-level trees, with and without peer access, and with
// and without the network: one op per non-empty step in plan order, the op each step needs (peer
// copy, H2D, D2H, direct or scratch reduce, host reduce, exchange), GPU ops on the destination's
// stream and host ops on the calling thread. Then the schedule is run on host memory by a
// simulated device that defers stream ops until the next host op or the end of the stage, running
// the streams one after the other, first in index order and then in reverse: both give the exact
// result, so no two streams of a stage touch the same bytes and the ops do what the plan says.
// What this cannot check: the CUDA calls themselves (gpu_checks.sh on a GPU machine).
#include "sumcast/topo/cuda_schedule.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "sumcast/topo/planner.h"
#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

struct SimDevice {
  const HostModel& m;
  const Plan& plan;
  std::vector<std::vector<int32_t>>& gpu;                   // per plan GPU: its buffer
  std::vector<std::vector<int32_t>> scratch;                // per plan GPU
  std::vector<int32_t> host_scratch;                        // the pinned scratch
  std::map<std::pair<int, int>, std::vector<int32_t>> stg;  // (NUMA node, slot) -> staging
  std::vector<std::vector<std::function<void()>>> queues;   // per stream
  bool reverse = false;
  int exchanged = 0;

  SimDevice(const HostModel& model, const Plan& p, std::vector<std::vector<int32_t>>& bufs)
      : m(model), plan(p), gpu(bufs) {
    const size_t n = plan.bytes / 4;
    scratch.assign(gpu.size(), std::vector<int32_t>(n, 0x5a5a5a5a));
    host_scratch.assign(n, 0x5a5a5a5a);
    for (const auto& [node, slots] : plan.host_slots) {
      for (int s = 0; s < slots; ++s) stg[{node, s}].assign(n, 0x5a5a5a5a);
    }
    queues.resize(gpu.size());
  }
  void sync() {
    for (size_t k = 0; k < queues.size(); ++k) {
      auto& q = queues[reverse ? queues.size() - 1 - k : k];
      for (auto& f : q) f();
      q.clear();
    }
  }
  int32_t* host(const BufferRef& b, uint64_t off) { return stg.at({b.node, b.slot}).data() + off / 4; }
  void run(const std::vector<CudaOp>& ops) {
    size_t i = 0;
    for (size_t stage = 0; stage < plan.stages.size(); ++stage) {
      for (; i < ops.size() && ops[i].stage == stage; ++i) {
        const CudaOp o = ops[i];
        const Step s = plan.stages[o.stage].steps[o.step];
        const size_t n = s.length / 4, off = s.offset / 4;
        auto dev = [&, off](int g) { return gpu[static_cast<size_t>(g)].data() + off; };
        auto add = [n](int32_t* d, const int32_t* x) {
          for (size_t e = 0; e < n; ++e) d[e] += x[e];
        };
        std::function<void()> f;
        switch (o.kind) {
          case CudaOpKind::kPeerCopy:
            f = [=] { std::memcpy(dev(o.dst_gpu), dev(o.src_gpu), s.length); };
            break;
          case CudaOpKind::kHostToDevice:
            f = [=, this] { std::memcpy(dev(o.dst_gpu), host(s.src, s.offset), s.length); };
            break;
          case CudaOpKind::kDeviceToHost:
            f = [=, this] { std::memcpy(host(s.dst, s.offset), dev(o.src_gpu), s.length); };
            break;
          case CudaOpKind::kHostCopy:
            f = [=, this] { std::memmove(host(s.dst, s.offset), host(s.src, s.offset), s.length); };
            break;
          case CudaOpKind::kReduceDirect:
            f = [=] { add(dev(o.dst_gpu), dev(o.src_gpu)); };
            break;
          case CudaOpKind::kReducePeerScratch:
            f = [=, this] {
              int32_t* t = scratch[static_cast<size_t>(o.dst_gpu)].data() + off;
              std::memcpy(t, dev(o.src_gpu), s.length);
              add(dev(o.dst_gpu), t);
            };
            break;
          case CudaOpKind::kReduceHostScratch:
            f = [=, this] {
              int32_t* t = scratch[static_cast<size_t>(o.dst_gpu)].data() + off;
              std::memcpy(t, host(s.src, s.offset), s.length);
              add(dev(o.dst_gpu), t);
            };
            break;
          case CudaOpKind::kReduceHostFromGpu:
            f = [=, this] {
              std::memcpy(host_scratch.data() + off, dev(o.src_gpu), s.length);
              add(host(s.dst, s.offset), host_scratch.data() + off);
            };
            break;
          case CudaOpKind::kReduceHost:
            f = [=, this] { add(host(s.dst, s.offset), host(s.src, s.offset)); };
            break;
          case CudaOpKind::kExchangeHost:
            f = [=, this] {
              ++exchanged;
              for (size_t e = 0; e < n; ++e) host(s.dst, s.offset)[e] *= 2;
            };
            break;
          case CudaOpKind::kExchangeGpu:
            f = [=, this] {
              ++exchanged;
              int32_t* t = host_scratch.data() + off;
              std::memcpy(t, dev(o.dst_gpu), s.length);
              for (size_t e = 0; e < n; ++e) t[e] *= 2;
              std::memcpy(dev(o.dst_gpu), t, s.length);
            };
            break;
        }
        if (o.stream >= 0) {
          queues[static_cast<size_t>(o.stream)].push_back(f);
        } else {
          sync();
          f();
        }
      }
      sync();
    }
  }
};

void check_schedule(const HostModel& m, const Plan& plan, bool peer_access, const std::string& what) {
  const size_t g = static_cast<size_t>(m.gpu_count());
  std::vector<std::vector<bool>> peer(g, std::vector<bool>(g, peer_access));
  for (size_t i = 0; i < g; ++i) peer[i][i] = true;
  const std::vector<CudaOp> ops = cuda_schedule(m, plan, peer);
  size_t steps = 0;
  for (const Stage& st : plan.stages) {
    for (const Step& s : st.steps) steps += s.length != 0;
  }
  ASSERT_EQ(ops.size(), steps) << what;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CudaOp& o = ops[i];
    if (i > 0) {
      ASSERT_TRUE(o.stage > ops[i - 1].stage || (o.stage == ops[i - 1].stage && o.step > ops[i - 1].step)) << what;
    }
    const Step& s = plan.stages[o.stage].steps[o.step];
    const bool dg = m.node(s.dst.node).kind == NodeKind::kGpu, sg = m.node(s.src.node).kind == NodeKind::kGpu;
    ASSERT_EQ(o.dst_gpu >= 0, dg) << what;
    ASSERT_EQ(o.src_gpu >= 0, sg) << what;
    if (dg) {
      ASSERT_EQ(o.dst_gpu, m.node(s.dst.node).index) << what;
    }
    CudaOpKind want;
    switch (s.op) {
      case StepOp::kCopy:
        want = dg && sg ? CudaOpKind::kPeerCopy
               : dg     ? CudaOpKind::kHostToDevice
               : sg     ? CudaOpKind::kDeviceToHost
                        : CudaOpKind::kHostCopy;
        break;
      case StepOp::kReduce:
        want = dg && sg ? (peer[static_cast<size_t>(o.dst_gpu)][static_cast<size_t>(o.src_gpu)]
                               ? CudaOpKind::kReduceDirect
                               : CudaOpKind::kReducePeerScratch)
               : dg     ? CudaOpKind::kReduceHostScratch
               : sg     ? CudaOpKind::kReduceHostFromGpu
                        : CudaOpKind::kReduceHost;
        break;
      default:
        want = dg ? CudaOpKind::kExchangeGpu : CudaOpKind::kExchangeHost;
    }
    ASSERT_EQ(o.kind, want) << what << ": got " << cuda_op_name(o.kind) << ", want " << cuda_op_name(want);
    const bool on_stream = want == CudaOpKind::kPeerCopy || want == CudaOpKind::kHostToDevice ||
                           want == CudaOpKind::kReduceDirect || want == CudaOpKind::kReducePeerScratch ||
                           want == CudaOpKind::kReduceHostScratch;
    ASSERT_EQ(o.stream, on_stream ? o.dst_gpu : -1) << what << ": " << cuda_op_name(o.kind);
  }
  const size_t n = plan.bytes / 4;
  bool network = false;
  for (const Stage& st : plan.stages) {
    for (const Step& s : st.steps) network = network || s.op == StepOp::kExchange;
  }
  for (bool reverse : {false, true}) {
    std::vector<std::vector<int32_t>> bufs(g, std::vector<int32_t>(n));
    for (size_t i = 0; i < g; ++i) {
      for (size_t e = 0; e < n; ++e) bufs[i][e] = static_cast<int32_t>((i + 1) * 100 + e % 37);
    }
    SimDevice dev(m, plan, bufs);
    dev.reverse = reverse;
    dev.run(ops);
    for (size_t e = 0; e < n; ++e) {
      int32_t want = 0;
      for (size_t i = 0; i < g; ++i) want += static_cast<int32_t>((i + 1) * 100 + e % 37);
      if (network) want *= 2;
      for (size_t i = 0; i < g; ++i) {
        ASSERT_EQ(bufs[i][e], want) << what << (reverse ? " (streams reversed)" : "") << ": GPU" << i << " element "
                                    << e;
      }
    }
  }
}

class CudaSchedule : public ::testing::TestWithParam<testing::Machine> {};

TEST_P(CudaSchedule, EveryStrategyMapsToTheRightOpsAndRunsExactly) {
  const testing::Machine& mc = GetParam();
  auto m = testing::load(mc.file, mc.options);
  ASSERT_TRUE(m.ok());
  for (bool network : {false, true}) {
    if (network && m->nics().empty()) continue;
    PlanRequest req;
    req.bytes = 4 * 3 * 5 * 7 * 16;
    req.elem_size = 4;
    req.network = network;
    auto res = plan_host(*m, req);
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    for (const Candidate& c : res->candidates) {
      if (!c.status.ok()) continue;
      for (bool peer : {true, false}) {
        check_schedule(*m, c.plan, peer,
                       mc.label + " " + strategy_name(c.strategy) + (network ? " network" : " local") +
                           (peer ? " peer" : " no-peer"));
      }
    }
  }
}

std::vector<testing::Machine> machines() {
  auto v = testing::real_machines();
  v.push_back({"two_level", "synthetic/pcie-2level-8gpu-2nic.xml", {}});
  v.push_back({"three_level", "synthetic/pcie-3level-12gpu-2nic.xml", {}});
  v.push_back({"three_level_hwloc", "synthetic/pcie-3level-12gpu-2nic-hwloc.xml", {}});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Machines, CudaSchedule, ::testing::ValuesIn(machines()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace sumcast::topo
