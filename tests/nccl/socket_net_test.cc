// The ncclNet core (socket_net.h through core.h) on loopback, in one process: connection set-up
// without blocking, receives matched by tag in any arrival order, grouped receives refused
// (maxRecvs 1), size limits, the request limit, handles from another listener, what is
// refused (device memory, DMA-BUF: host memory only), and NCCL's traffic class on the sockets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "sockets_with_tos.h"
#include "sumcast/nccl/core.h"

namespace sumcast::nccl {
namespace {

using abi::ncclSuccess;
using nccl_test::sockets_with_tos;

// The plugin reads its settings once per process: loopback only, no settings file.
const bool kEnv = [] {
  setenv("SUMCAST_NCCL_IFNAME", "=lo", 1);
  setenv("SUMCAST_NCCL_CONF", "/dev/null", 1);
  return true;
}();

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  ~Pair() {
    if (send != nullptr) net_close_send(send);
    if (recv != nullptr) net_close_recv(recv);
    if (listen != nullptr) net_close_listen(listen);
  }
};

// Connects as NCCL does: both calls return without a comm until the connection is up. With a
// context (v11+), listen and connect go through it; else connect passes `v10_class` (v10's
// per-connection traffic class; undefined: as v8/v9 connect).
void connect_pair(Pair* p, void* ctx = nullptr, int v10_class = abi::NCCL_NET_TRAFFIC_CLASS_UNDEF) {
  ASSERT_TRUE(kEnv);
  ASSERT_EQ(init(nullptr), ncclSuccess);
  char handle[abi::NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(ctx != nullptr ? context_listen(ctx, 0, handle, &p->listen) : net_listen(0, handle, &p->listen),
            ncclSuccess);
  for (int i = 0; i < 100000 && (p->send == nullptr || p->recv == nullptr); ++i) {
    if (p->send == nullptr) {
      ASSERT_EQ(
          ctx != nullptr ? context_connect(ctx, 0, handle, &p->send) : net_connect_tc(0, handle, &p->send, v10_class),
          ncclSuccess);
    }
    if (p->recv == nullptr) {
      ASSERT_EQ(net_accept(p->listen, &p->recv), ncclSuccess);
    }
  }
  ASSERT_NE(p->send, nullptr);
  ASSERT_NE(p->recv, nullptr);
}

bool poll_done(void* req, int* sizes) {
  for (int i = 0; i < 1000000; ++i) {
    int done = 0;
    if (net_test(req, &done, sizes) != ncclSuccess) return false;
    if (done) return true;
  }
  return false;
}

TEST(SocketNet, DevicesReportLoopbackWithItsProperties) {
  ASSERT_EQ(init(nullptr), ncclSuccess);
  int n = 0;
  ASSERT_EQ(net_devices(&n), ncclSuccess);
  ASSERT_EQ(n, 1);
  DeviceProperties p;
  ASSERT_EQ(net_properties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.pci_path, nullptr);  // no /sys/class/net/lo/device
  EXPECT_GT(p.speed_mbps, 0);
  EXPECT_EQ(p.ptr_support, abi::NCCL_PTR_HOST);  // host memory only, wherever it runs
  EXPECT_EQ(p.max_recvs, 1);                     // no grouped receives
  EXPECT_GT(p.max_p2p_bytes, 0u);
  EXPECT_LE(p.max_p2p_bytes, abi::NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_NE(net_properties(1, &p), ncclSuccess);
}

TEST(SocketNet, ReceivesMatchTagsInAnyArrivalOrder) {
  Pair p;
  connect_pair(&p);
  std::vector<char> a(1000, 'a'), b(70000, 'b'), c(0);
  std::vector<char> ra(2000, 0), rb(70000, 0), rc(16, 0);
  void* data[3] = {ra.data(), rb.data(), rc.data()};
  size_t sizes[3] = {ra.size(), rb.size(), rc.size()};
  int tags[3] = {1, 2, 3};
  void* rreq[3] = {};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(net_irecv(p.recv, 1, &data[i], &sizes[i], &tags[i], nullptr, &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr);
  }
  void* s[3] = {};
  ASSERT_EQ(net_isend(p.send, c.data(), 0, 3, nullptr, &s[0]), ncclSuccess);  // reverse tag order
  ASSERT_EQ(net_isend(p.send, b.data(), b.size(), 2, nullptr, &s[1]), ncclSuccess);
  ASSERT_EQ(net_isend(p.send, a.data(), a.size(), 1, nullptr, &s[2]), ncclSuccess);
  for (void* r : s) ASSERT_TRUE(poll_done(r, nullptr));
  int got[3] = {-1, -1, -1};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(poll_done(rreq[i], &got[i]));
  EXPECT_EQ(got[0], 1000);
  EXPECT_EQ(got[1], 70000);
  EXPECT_EQ(got[2], 0);
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(rb.data(), b.data(), b.size()), 0);
}

TEST(SocketNet, GroupedReceiveIsRefused) {
  Pair p;
  connect_pair(&p);
  char x[8], y[8];
  void* data[2] = {x, y};
  size_t sizes[2] = {8, 8};
  int tags[2] = {1, 2};
  void* rreq = reinterpret_cast<void*>(1);
  EXPECT_EQ(net_irecv(p.recv, 2, data, sizes, tags, nullptr, &rreq), abi::ncclInvalidArgument);
  EXPECT_EQ(rreq, nullptr);
  // The comm is unharmed: a single receive still works.
  void* sreq = nullptr;
  ASSERT_EQ(net_isend(p.send, y, 8, 2, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(net_irecv(p.recv, 1, &data[1], &sizes[1], &tags[1], nullptr, &rreq), ncclSuccess);
  int got = -1;
  ASSERT_TRUE(poll_done(rreq, &got));
  EXPECT_EQ(got, 8);
  ASSERT_TRUE(poll_done(sreq, nullptr));
}

TEST(SocketNet, SendBeforeReceiveWaitsForItsReceive) {
  Pair p;
  connect_pair(&p);
  char msg[5] = "abcd";
  void* sreq = nullptr;
  ASSERT_EQ(net_isend(p.send, msg, 4, 7, nullptr, &sreq), ncclSuccess);
  ASSERT_TRUE(poll_done(sreq, nullptr));  // in the socket, no receive posted yet
  char buf[8] = {};
  void* data[1] = {buf};
  size_t sizes[1] = {sizeof(buf)};
  int tags[1] = {7};
  void* rreq = nullptr;
  ASSERT_EQ(net_irecv(p.recv, 1, data, sizes, tags, nullptr, &rreq), ncclSuccess);
  int got = -1;
  ASSERT_TRUE(poll_done(rreq, &got));
  EXPECT_EQ(got, 4);
  EXPECT_STREQ(buf, "abcd");
}

TEST(SocketNet, MessageLargerThanItsBufferFailsTheComm) {
  Pair p;
  connect_pair(&p);
  std::vector<char> big(100, 'x');
  char small[10];
  void* data[1] = {small};
  size_t sizes[1] = {sizeof(small)};
  int tags[1] = {1};
  void* rreq = nullptr;
  ASSERT_EQ(net_irecv(p.recv, 1, data, sizes, tags, nullptr, &rreq), ncclSuccess);
  void* sreq = nullptr;
  ASSERT_EQ(net_isend(p.send, big.data(), big.size(), 1, nullptr, &sreq), ncclSuccess);
  ASSERT_TRUE(poll_done(sreq, nullptr));
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 100000 && r == ncclSuccess; ++i) {
    int done = 0;
    r = net_test(rreq, &done, nullptr);
    ASSERT_EQ(done, 0);
  }
  EXPECT_EQ(r, abi::ncclInvalidArgument);
}

TEST(SocketNet, RequestsBeyondTheLimitGetNoRequest) {
  Pair p;
  connect_pair(&p);
  char buf[abi::NCCL_NET_MAX_REQUESTS + 1][4];
  int accepted = 0;
  void* req = nullptr;
  for (int k = 0; k <= abi::NCCL_NET_MAX_REQUESTS; ++k) {
    void* data[1] = {buf[k]};
    size_t sizes[1] = {4};
    int tags[1] = {k};
    ASSERT_EQ(net_irecv(p.recv, 1, data, sizes, tags, nullptr, &req), ncclSuccess);
    if (req == nullptr) break;
    ++accepted;
  }
  EXPECT_EQ(accepted, abi::NCCL_NET_MAX_REQUESTS);
  EXPECT_EQ(req, nullptr);
}

TEST(SocketNet, ConnectionWithAnotherListenersHandleIsRefused) {
  ASSERT_EQ(init(nullptr), ncclSuccess);
  void* listen = nullptr;
  char handle[abi::NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(net_listen(0, handle, &listen), ncclSuccess);
  char forged[abi::NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(forged, handle, sizeof(forged));
  forged[16] ^= 0x5a;  // the nonce (after magic, version, port, address, reserved)
  void* stray = nullptr;
  void* recv = nullptr;
  for (int i = 0; i < 100000 && stray == nullptr; ++i) ASSERT_EQ(net_connect(0, forged, &stray), ncclSuccess);
  ASSERT_NE(stray, nullptr);
  void* good = nullptr;
  for (int i = 0; i < 100000 && (good == nullptr || recv == nullptr); ++i) {
    if (good == nullptr) {
      ASSERT_EQ(net_connect(0, handle, &good), ncclSuccess);
    }
    if (recv == nullptr) {
      ASSERT_EQ(net_accept(listen, &recv), ncclSuccess);
    }
  }
  ASSERT_NE(recv, nullptr);
  // The accepted comm is the good one: a message sent on it arrives.
  char msg[2] = "z";
  void* sreq = nullptr;
  ASSERT_EQ(net_isend(good, msg, 1, 0, nullptr, &sreq), ncclSuccess);
  char out[2] = {};
  void* data[1] = {out};
  size_t sizes[1] = {1};
  int tags[1] = {0};
  void* rreq = nullptr;
  ASSERT_EQ(net_irecv(recv, 1, data, sizes, tags, nullptr, &rreq), ncclSuccess);
  ASSERT_TRUE(poll_done(rreq, nullptr));
  EXPECT_EQ(out[0], 'z');
  net_close_send(stray);
  net_close_send(good);
  net_close_recv(recv);
  net_close_listen(listen);
}

TEST(SocketNet, DeviceAndDmaBufRegistrationsAreRefused) {
  Pair p;
  connect_pair(&p);
  char buf[16];
  void* mh = nullptr;
  EXPECT_NE(net_reg_mr(p.send, buf, sizeof(buf), abi::NCCL_PTR_CUDA, &mh), ncclSuccess);
  EXPECT_NE(net_reg_mr_dmabuf(p.send, buf, sizeof(buf), abi::NCCL_PTR_CUDA, 0, 3, &mh), ncclSuccess);
  ASSERT_EQ(net_reg_mr(p.send, buf, sizeof(buf), abi::NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_EQ(net_dereg_mr(p.send, mh), ncclSuccess);
}

// One message each way round: the pair works.
void exchange(Pair* p) {
  char msg[2] = "t";
  void* sreq = nullptr;
  ASSERT_EQ(net_isend(p->send, msg, 1, 7, nullptr, &sreq), ncclSuccess);
  char out[2] = {};
  void* data[1] = {out};
  size_t sizes[1] = {1};
  int tags[1] = {7};
  void* rreq = nullptr;
  ASSERT_EQ(net_irecv(p->recv, 1, data, sizes, tags, nullptr, &rreq), ncclSuccess);
  ASSERT_TRUE(poll_done(sreq, nullptr));
  ASSERT_TRUE(poll_done(rreq, nullptr));
  EXPECT_EQ(out[0], 't');
}

constexpr int kTrafficClass = 106;  // DSCP 26 and ECT(0), NCCL_IB_TC's usual RoCE value
constexpr int kDscpBits = 104;      // what a TCP socket keeps of it (the ECN bits are the kernel's)

TEST(SocketNet, CommunicatorsTrafficClassMarksEveryOneOfItsSockets) {
  ASSERT_TRUE(kEnv);
  ASSERT_EQ(init(nullptr), ncclSuccess);
  const int before = sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc);
  void* ctx = nullptr;
  ASSERT_EQ(context_init(&ctx, 0x7c01, kTrafficClass, false, nullptr), ncclSuccess);
  {
    Pair marked;
    connect_pair(&marked, ctx);
    exchange(&marked);
    EXPECT_EQ(sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc) - before, 3);  // listener, sender, receiver
    Pair plain;                                                             // without a context: nothing marked
    connect_pair(&plain);
    exchange(&plain);
    EXPECT_EQ(sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc) - before, 3);
  }
  EXPECT_EQ(sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc), before);
  EXPECT_EQ(context_finalize(ctx), ncclSuccess);
  // A context without a traffic class marks nothing.
  ASSERT_EQ(context_init(&ctx, 0x7c02, abi::NCCL_NET_TRAFFIC_CLASS_UNDEF, false, nullptr), ncclSuccess);
  {
    Pair p;
    connect_pair(&p, ctx);
    exchange(&p);
    EXPECT_EQ(sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc), before);
  }
  EXPECT_EQ(context_finalize(ctx), ncclSuccess);
}

TEST(SocketNet, ConnectionsTrafficClassMarksTheSendingSocket) {  // v10: a class per connect
  ASSERT_TRUE(kEnv);
  ASSERT_EQ(init(nullptr), ncclSuccess);
  const int before = sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc);
  Pair p;
  connect_pair(&p, nullptr, kTrafficClass);
  exchange(&p);
  EXPECT_EQ(sockets_with_tos(SOCK_STREAM, kDscpBits, 0xfc) - before, 1);
}

TEST(SocketNet, TrafficClassOutsideAByteAndContextsOfTheOtherKindAreRefused) {
  ASSERT_TRUE(kEnv);
  void* ctx = nullptr;
  EXPECT_EQ(context_init(&ctx, 0x7c03, 256, false, nullptr), abi::ncclInvalidArgument);
  EXPECT_EQ(context_init(&ctx, 0x7c03, -2, true, nullptr), abi::ncclInvalidArgument);
  EXPECT_EQ(ctx, nullptr);
  char handle[abi::NCCL_NET_HANDLE_MAXSIZE] = {};
  void* send = nullptr;
  EXPECT_EQ(net_connect_tc(0, handle, &send, 300), abi::ncclInvalidArgument);
  EXPECT_EQ(send, nullptr);
  ASSERT_EQ(context_init(&ctx, 0x7c03, kTrafficClass, true, nullptr), ncclSuccess);  // a CollNet context
  void* listen = nullptr;
  EXPECT_EQ(context_listen(ctx, 0, handle, &listen), abi::ncclInvalidArgument);
  EXPECT_EQ(context_connect(ctx, 0, handle, &send), abi::ncclInvalidArgument);
  EXPECT_EQ(context_listen(nullptr, 0, handle, &listen), abi::ncclInvalidArgument);
  EXPECT_EQ(listen, nullptr);
  EXPECT_EQ(context_finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace sumcast::nccl
