// The CollNet core (collnet.h through core.h) against the embedded summation service, two nodes
// driven from one thread after a connect on a thread per node (connect registers the set-up
// lane), as NCCL's proxy would on two hosts: calls never block (other lanes register in the
// background), many requests stay outstanding across lanes, the request limit, the
// reduceSupport table, and a communicator's traffic class on its lanes' sockets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sockets_with_tos.h"
#include "sumcast/embedded/service.h"
#include "sumcast/nccl/core.h"

namespace sumcast::nccl {
namespace {

using abi::ncclSuccess;

// One service per process; the plugin reads SUMCAST_APPLIANCES once, after it is known.
embedded::Service* service() {
  static std::unique_ptr<embedded::Service> s = [] {
    embedded::ServiceOptions o;
    // Its own loopback address per process (ctest runs tests side by side): port 4791 is not shared.
    const unsigned pid = static_cast<unsigned>(getpid());
    // (Adjacent pids, which ctest -j gives side-by-side tests, get adjacent addresses: 1..254.)
    o.bind_ip = "127.9." + std::to_string((pid / 254) & 0xff) + "." + std::to_string(pid % 254 + 1);
    o.token = "collnet-test";
    auto started = embedded::Service::start(o);
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    setenv("SUMCAST_APPLIANCES", (*started)->control_address().c_str(), 1);
    setenv("SUMCAST_TOKEN", "collnet-test", 1);
    setenv("SUMCAST_NCCL_IFNAME", "=lo", 1);
    setenv("SUMCAST_NCCL_CONF", "/dev/null", 1);
    unsetenv("NCCL_IB_TC");  // the lanes' marks are the tests' (config.h)
    return std::move(started).value();
  }();
  return s.get();
}

struct Nodes {
  void* comm[2] = {};
  void* net_ctx[2] = {};
  void* coll_ctx[2] = {};
  // Without a traffic class: pre-v11 calls, no contexts. With one (NCCL_NET_TRAFFIC_CLASS_UNDEF
  // included), as NCCL 2.28+ sets up a communicator on each node: the net context with the class,
  // then the CollNet one of the same comm id, whose listen takes it.
  explicit Nodes(std::optional<int> traffic_class = std::nullopt) {
    EXPECT_NE(service(), nullptr);
    EXPECT_EQ(init(nullptr), ncclSuccess);
    char h[2][abi::NCCL_NET_HANDLE_MAXSIZE];
    void* listen[2] = {};
    for (int r = 0; r < 2; ++r) {
      if (!traffic_class) {
        EXPECT_EQ(coll_listen(0, h[r], &listen[r]), ncclSuccess);
        continue;
      }
      const uint64_t comm_id = 0xc011000 + static_cast<uint64_t>(r);
      EXPECT_EQ(context_init(&net_ctx[r], comm_id, *traffic_class, false, nullptr), ncclSuccess);
      EXPECT_EQ(context_init(&coll_ctx[r], comm_id, abi::NCCL_NET_TRAFFIC_CLASS_UNDEF, true, nullptr), ncclSuccess);
      EXPECT_EQ(coll_context_listen(coll_ctx[r], 0, h[r], &listen[r]), ncclSuccess);
    }
    void* handles[2] = {h[0], h[1]};
    // connect registers the set-up lane and returns when both nodes did: one thread per node, as
    // NCCL calls it on two hosts at once.
    ncclResult_t result[2] = {abi::ncclInternalError, abi::ncclInternalError};
    std::thread nodes[2];
    for (int r = 0; r < 2; ++r) {
      nodes[r] = std::thread([&, r] { result[r] = coll_connect(handles, 2, r, listen[r], &comm[r]); });
    }
    for (int r = 0; r < 2; ++r) {
      nodes[r].join();
      EXPECT_EQ(result[r], ncclSuccess);
      EXPECT_EQ(coll_close_listen(listen[r]), ncclSuccess);
    }
  }
  ~Nodes() {
    for (void* c : comm) EXPECT_EQ(coll_close(c), ncclSuccess);
    for (void* c : coll_ctx) {
      if (c != nullptr) {
        EXPECT_EQ(context_finalize(c), ncclSuccess);
      }
    }
    for (void* c : net_ctx) {
      if (c != nullptr) {
        EXPECT_EQ(context_finalize(c), ncclSuccess);
      }
    }
  }
};

// Polls every request until all are done (bounded); sizes get the reported byte counts.
bool finish(std::vector<void*> reqs, std::vector<int>* sizes = nullptr) {
  std::vector<bool> done(reqs.size(), false);
  if (sizes != nullptr) sizes->assign(reqs.size(), -1);
  for (int round = 0; round < 20000000; ++round) {
    bool all = true;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (done[i]) continue;
      int d = 0;
      int size = -1;
      if (coll_test(reqs[i], &d, &size) != ncclSuccess) return false;
      if (d) {
        done[i] = true;
        if (sizes != nullptr) (*sizes)[i] = size;
      }
      all = all && done[i];
    }
    if (all) return true;
  }
  return false;
}

TEST(CollNet, IallreduceDoesNotBlockWhileTheOtherNodeIsLate) {
  Nodes n;
  std::vector<float> a(1000), b(1000), ra(1000), rb(1000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(3 * i + 1);
  }
  void* r0 = nullptr;
  ASSERT_EQ(
      coll_iallreduce(n.comm[0], a.data(), ra.data(), a.size(), abi::ncclFloat32, abi::ncclSum, nullptr, nullptr, &r0),
      ncclSuccess);
  ASSERT_NE(r0, nullptr);
  for (int i = 0; i < 100; ++i) {  // node 1 has not called: node 0's call must stay pending
    int done = 1;
    ASSERT_EQ(coll_test(r0, &done, nullptr), ncclSuccess);
    ASSERT_EQ(done, 0);
  }
  void* r1 = nullptr;
  ASSERT_EQ(
      coll_iallreduce(n.comm[1], b.data(), rb.data(), b.size(), abi::ncclFloat32, abi::ncclSum, nullptr, nullptr, &r1),
      ncclSuccess);
  std::vector<int> sizes;
  ASSERT_TRUE(finish({r0, r1}, &sizes));
  EXPECT_EQ(sizes[0], 4000);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(ra[i], static_cast<float>(4 * i + 1)) << i;
    ASSERT_EQ(rb[i], ra[i]) << i;
  }
}

TEST(CollNet, ManyOutstandingCallsOnTwoLanesFinishExact) {
  Nodes n;
  constexpr int kCalls = 24;
  constexpr size_t kCount = 300;
  std::vector<std::vector<int32_t>> in(2 * kCalls, std::vector<int32_t>(kCount));
  std::vector<std::vector<int32_t>> out(2 * kCalls, std::vector<int32_t>(kCount, -7));
  std::vector<void*> reqs;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < kCalls; ++k) {
      auto& v = in[static_cast<size_t>(r * kCalls + k)];
      for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<int32_t>((i + static_cast<size_t>(k)) * (r + 1)) - 500;
      void* req = nullptr;
      const abi::ncclRedOp_t op = k % 2 == 0 ? abi::ncclSum : abi::ncclMax;  // two lanes, interleaved
      ASSERT_EQ(coll_iallreduce(n.comm[r], v.data(), out[static_cast<size_t>(r * kCalls + k)].data(), kCount,
                                abi::ncclInt32, op, nullptr, nullptr, &req),
                ncclSuccess);
      ASSERT_NE(req, nullptr);
      reqs.push_back(req);
    }
  }
  ASSERT_TRUE(finish(reqs));
  for (int k = 0; k < kCalls; ++k) {
    for (size_t i = 0; i < kCount; ++i) {
      const int32_t x = static_cast<int32_t>(i + static_cast<size_t>(k)) - 500;
      const int32_t y = static_cast<int32_t>((i + static_cast<size_t>(k)) * 2) - 500;
      const int32_t want = k % 2 == 0 ? x + y : std::max(x, y);
      ASSERT_EQ(out[static_cast<size_t>(k)][i], want) << "call " << k << " element " << i;
      ASSERT_EQ(out[static_cast<size_t>(kCalls + k)][i], want) << "call " << k << " element " << i;
    }
  }
}

TEST(CollNet, CallsBeyondTheRequestLimitGetNoRequest) {
  Nodes n;
  constexpr int kLimit = 128;  // collnet.h kCollMaxRequests
  std::vector<double> in(8, 1.0);
  std::vector<std::vector<double>> out(2 * kLimit, std::vector<double>(8));
  std::vector<void*> reqs;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < kLimit; ++k) {
      void* req = nullptr;
      ASSERT_EQ(coll_iallreduce(n.comm[r], in.data(), out[static_cast<size_t>(r * kLimit + k)].data(), in.size(),
                                abi::ncclFloat64, abi::ncclSum, nullptr, nullptr, &req),
                ncclSuccess);
      ASSERT_NE(req, nullptr) << "call " << k;
      reqs.push_back(req);
    }
    void* extra = reinterpret_cast<void*>(1);
    ASSERT_EQ(coll_iallreduce(n.comm[r], in.data(), out[0].data(), in.size(), abi::ncclFloat64, abi::ncclSum, nullptr,
                              nullptr, &extra),
              ncclSuccess);
    EXPECT_EQ(extra, nullptr);
  }
  ASSERT_TRUE(finish(reqs));
  for (const auto& o : out) EXPECT_EQ(o[7], 2.0);
}

TEST(CollNet, ReduceSupportIsExactlyTheWireTable) {
  const int types[] = {abi::ncclFloat32, abi::ncclFloat16, abi::ncclBfloat16, abi::ncclInt32, abi::ncclFloat64};
  for (int t = 0; t < abi::kNcclNumTypesMax + 2; ++t) {
    for (int op = 0; op < 8; ++op) {
      int s = -1;
      ASSERT_EQ(coll_reduce_support(static_cast<abi::ncclDataType_t>(t), static_cast<abi::ncclRedOp_t>(op), &s),
                ncclSuccess);
      const bool type_ok = std::find(std::begin(types), std::end(types), t) != std::end(types);
      const bool op_ok = op == abi::ncclSum || op == abi::ncclMin || op == abi::ncclMax;
      EXPECT_EQ(s, type_ok && op_ok ? 1 : 0) << "type " << t << " op " << op;
    }
  }
}

TEST(CollNet, UnsupportedPairIsRefusedByIallreduce) {
  Nodes n;
  int64_t x = 1;
  void* req = nullptr;
  EXPECT_EQ(coll_iallreduce(n.comm[0], &x, &x, 1, abi::ncclInt64, abi::ncclSum, nullptr, nullptr, &req),
            abi::ncclInvalidArgument);
  EXPECT_EQ(coll_iallreduce(n.comm[0], &x, &x, 1, abi::ncclFloat32, abi::ncclAvg, nullptr, nullptr, &req),
            abi::ncclInvalidArgument);
}

// The communicator's traffic class (NCCL's ncclConfig_t.trafficClass, given to the net init only)
// marks its lanes' datagrams over SUMCAST_DSCP (unset here: 0): 106 is DSCP 26 with ECT(0). The
// sums stay exact.
TEST(CollNet, CommunicatorsTrafficClassMarksItsLanes) {
  constexpr int kTrafficClass = 106;
  const int before = nccl_test::sockets_with_tos(SOCK_DGRAM, kTrafficClass);
  {
    Nodes plain(abi::NCCL_NET_TRAFFIC_CLASS_UNDEF);
    EXPECT_EQ(nccl_test::sockets_with_tos(SOCK_DGRAM, kTrafficClass), before);
  }
  Nodes n(kTrafficClass);
  EXPECT_GE(nccl_test::sockets_with_tos(SOCK_DGRAM, kTrafficClass) - before, 2);  // each node's lane
  std::vector<float> a(300, 1.5f), b(300, 2.0f), ra(300), rb(300);
  void* r[2] = {};
  ASSERT_EQ(coll_iallreduce(n.comm[0], a.data(), ra.data(), a.size(), abi::ncclFloat32, abi::ncclSum, nullptr, nullptr,
                            &r[0]),
            ncclSuccess);
  ASSERT_EQ(coll_iallreduce(n.comm[1], b.data(), rb.data(), b.size(), abi::ncclFloat32, abi::ncclSum, nullptr, nullptr,
                            &r[1]),
            ncclSuccess);
  ASSERT_TRUE(finish({r[0], r[1]}));
  EXPECT_EQ(ra, std::vector<float>(300, 3.5f));
  EXPECT_EQ(rb, ra);
}

}  // namespace
}  // namespace sumcast::nccl
