// The verbs UD transport's device-dependent paths against the scripted fake (fake_verbs.h): GID
// choice (type, address, interface), the payload from the port's active MTU, receives, and every
// error that must fail the pending calls at once (completion errors with their status text and
// the QP's state, failed posts and polls) rather than leave them to the operation timeout; and the
// communicator failing a call at once on an unusable transport. Verified on no RDMA NIC.
#include <gtest/gtest.h>
#include <net/if.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "fake_verbs.h"
#include "shim_test_util.h"
#include "sumcast/shim/communicator.h"
#include "sumcast/shim/transport_factory.h"
#include "sumcast/shim/verbs_format.h"
#include "sumcast/shim/verbs_transport.h"

namespace sumcast::shim {
namespace {

using testing::FakeVerbs;

constexpr uint32_t kMe = 0x0A000005;         // 10.0.0.5
constexpr uint32_t kAppliance = 0x0A000002;  // 10.0.0.2

FakeVerbs one_device(ibv_mtu mtu = IBV_MTU_4096) {
  FakeVerbs f;
  FakeVerbs::Device d;
  d.active_mtu = mtu;
  d.gids = {{kMe, IBV_GID_TYPE_ROCE_V1, 1}, {0x0A000009, IBV_GID_TYPE_ROCE_V2, 1}, {kMe, IBV_GID_TYPE_ROCE_V2, 1}};
  f.devices.push_back(d);
  return f;
}

VerbsTransportOptions options(FakeVerbs* f) {
  VerbsTransportOptions o;
  o.bind_ip = kMe;
  o.ops = f;
  o.send_depth = 8;
  o.recv_depth = 4;
  return o;
}

PeerSpec peer() {
  PeerSpec p;
  p.ip = kAppliance;
  p.job_id = 5;
  p.qkey = 0x1111;
  p.rank = 2;
  return p;
}

std::vector<uint8_t> result_message(uint32_t job, uint16_t rank, uint16_t count) {
  wire::SumcastHeader h;
  h.type = wire::MsgType::kResult;
  h.dtype = wire::Dtype::kFp32;
  h.job_id = job;
  h.rank = rank;
  h.elem_count = count;
  std::vector<uint8_t> payload(size_t{count} * 4, 1);
  std::vector<uint8_t> buf(verbs::message_capacity(payload.size()));
  const size_t len = verbs::build_message(buf.data(), 0x123, h, payload.data());
  return {buf.begin() + verbs::kTagLen, buf.begin() + static_cast<long>(len)};
}

TEST(VerbsSeam, NoDeviceIsUnavailable) {
  FakeVerbs f;
  auto t = VerbsTransport::open(options(&f));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(t.status().message().find("no RDMA device"), std::string::npos);
}

// The DSCP/ECN of contributions rides the address handle's traffic class (the GRH's, which a
// RoCEv2 NIC writes into the IPv4 TOS).
TEST(VerbsSeam, TrafficClassReachesTheAddressHandle) {
  FakeVerbs f = one_device();
  auto o = options(&f);
  o.traffic_class = 26 << 2 | 0x2;  // DSCP 26, ECT(0)
  auto t = VerbsTransport::open(o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  EXPECT_EQ(f.last_ah.grh.traffic_class, 26 << 2 | 0x2);
  EXPECT_EQ(f.last_ah.is_global, 1);
}

TEST(VerbsSeam, PicksTheRoceV2GidOfTheAddressAndSaysWhich) {
  FakeVerbs f = one_device();
  auto t = VerbsTransport::open(options(&f));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const std::string d = (*t)->describe();
  EXPECT_NE(d.find("GID index 2 ::ffff:10.0.0.5 (RoCEv2, netdev lo)"), std::string::npos) << d;
  EXPECT_NE(d.find("active MTU 4096"), std::string::npos) << d;
  EXPECT_EQ(f.qp_state(), IBV_QPS_RTS);
  EXPECT_EQ(f.posted_receives(), 4u);
}

TEST(VerbsSeam, AnInterfaceSelectsItsGidAndAMissingOneIsNamed) {
  FakeVerbs f = one_device();
  f.devices[0].gids.push_back({kMe, IBV_GID_TYPE_ROCE_V2, 999});  // the same address on another netdev
  auto o = options(&f);
  o.interface = "lo";
  auto t = VerbsTransport::open(o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_NE((*t)->describe().find("GID index 2 "), std::string::npos) << (*t)->describe();
  o.interface = "nosuchif7";
  auto bad = VerbsTransport::open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no network interface nosuchif7"), std::string::npos);
}

TEST(VerbsSeam, NoGidForTheAddressIsNotFoundNamingIt) {
  FakeVerbs f = one_device();
  auto o = options(&f);
  o.bind_ip = 0x0A000063;  // 10.0.0.99
  auto t = VerbsTransport::open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("RoCEv2 GID for 10.0.0.99"), std::string::npos) << t.status().message();
}

TEST(VerbsSeam, PayloadFollowsTheActiveMtu) {
  for (auto [mtu, bytes] :
       {std::pair{IBV_MTU_1024, 992u}, std::pair{IBV_MTU_2048, 2016u}, std::pair{IBV_MTU_4096, 4064u}}) {
    FakeVerbs f = one_device(mtu);
    auto t = VerbsTransport::open(options(&f));
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ((*t)->max_payload(), bytes);
  }
  FakeVerbs f = one_device(IBV_MTU_1024);
  auto o = options(&f);
  o.max_payload = 1024;  // a default that does not fit: clamped
  auto t = VerbsTransport::open(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->max_payload(), 992u);
  o.max_payload = 512;
  t = VerbsTransport::open(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->max_payload(), 512u);
}

TEST(VerbsSeam, AnExplicitPayloadTooLargeForThePathIsRefusedNamingBoth) {
  FakeVerbs f = one_device(IBV_MTU_1024);
  auto o = options(&f);
  o.max_payload = 4096;
  o.payload_explicit = true;
  auto t = VerbsTransport::open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("a payload of 4096 bytes does not fit the port's active MTU of 1024 bytes "
                                      "(at most 992 bytes"),
            std::string::npos)
      << t.status().message();
}

// open_transport's verbs kind hands the configuration to the verbs transport: the ops seam,
// the address, the interface, the payload (explicit or not) and the traffic class.
TEST(VerbsSeam, TheFactoryOpensTheVerbsTransportWithTheConfiguredOptions) {
  FakeVerbs f = one_device(IBV_MTU_1024);
  TransportConfig c;
  c.kind = TransportKind::kVerbs;
  c.bind_ip = kMe;
  c.rdma_interface = "lo";
  c.verbs_ops = &f;
  c.tos = 26 << 2 | 0x2;
  c.max_payload = 512;
  auto t = open_transport(c);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->max_payload(), 512u);
  EXPECT_NE((*t)->describe().find("GID index 2 "), std::string::npos) << (*t)->describe();
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  EXPECT_EQ(f.last_ah.grh.traffic_class, 26 << 2 | 0x2);

  FakeVerbs g = one_device(IBV_MTU_1024);
  c.verbs_ops = &g;
  c.max_payload = 4096;
  c.payload_explicit = true;
  auto big = open_transport(c);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("a payload of 4096 bytes does not fit"), std::string::npos)
      << big.status().message();
  FakeVerbs h = one_device();
  c.verbs_ops = &h;
  c.payload_explicit = false;
  c.rdma_interface = "nosuchif7";
  auto bad = open_transport(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no network interface nosuchif7"), std::string::npos) << bad.status().message();
}

TEST(VerbsSeam, ReceivesValidatesAndRepostsBuffers) {
  FakeVerbs f = one_device();
  auto t = VerbsTransport::open(options(&f));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  ASSERT_TRUE(f.deliver(kAppliance, result_message(5, 2, 16)));
  ASSERT_TRUE(f.deliver(kAppliance, result_message(6, 2, 16)));  // another job: dropped
  std::vector<Received> out(8);
  EXPECT_EQ((*t)->receive(out), 1u);
  EXPECT_EQ(out[0].hdr.elem_count, 16);
  EXPECT_EQ((*t)->counters().drops[static_cast<size_t>(DropReason::kUnknownJob)], 1u);
  EXPECT_EQ((*t)->receive(out), 0u);  // reposts the two buffers
  EXPECT_EQ(f.posted_receives(), 4u);
  EXPECT_TRUE((*t)->health().ok());
}

TEST(VerbsSeam, AMessageLargerThanTheBuffersIsCountedNotFatal) {
  FakeVerbs f = one_device(IBV_MTU_1024);
  auto t = VerbsTransport::open(options(&f));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  ASSERT_TRUE(f.deliver(kAppliance, result_message(5, 2, 1000)));  // 4000 bytes of payload
  std::vector<Received> out(8);
  EXPECT_EQ((*t)->receive(out), 0u);
  EXPECT_EQ((*t)->counters().drops[static_cast<size_t>(DropReason::kTruncated)], 1u);
  EXPECT_TRUE((*t)->health().ok());
}

TEST(VerbsSeam, AReceiveFlushFailsWithTheStatusAndTheQpState) {
  FakeVerbs f = one_device();
  auto t = VerbsTransport::open(options(&f));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  ASSERT_TRUE(f.deliver(kAppliance, result_message(5, 2, 4)));
  f.recv_error(IBV_WC_WR_FLUSH_ERR);
  std::vector<Received> out(8);
  EXPECT_EQ((*t)->receive(out), 1u);  // the good one before the error still arrives
  const Status h = (*t)->health();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.message().find("receive completion error: " + std::string(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR))),
            std::string::npos)
      << h.message();
  EXPECT_NE(h.message().find("QP 291 in state ERR"), std::string::npos) << h.message();
  EXPECT_EQ((*t)->receive(out), 0u);
  EXPECT_FALSE((*t)->send({}).ok());
}

TEST(VerbsSeam, ASendCompletionErrorFailsTheTransport) {
  FakeVerbs f = one_device();
  auto t = VerbsTransport::open(options(&f));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->add_peer(peer()).ok());
  std::vector<uint8_t> pkt((*t)->packet_capacity(16));
  wire::SumcastHeader h;
  h.elem_count = 4;
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const size_t len = (*t)->build(pkt.data(), 0, 0x40, 0, h, payload.data());
  EXPECT_EQ(std::memcmp(pkt.data() + (*t)->payload_offset(), payload.data(), 16), 0);  // where failover finds it
  const OutPacket op{0, pkt.data(), static_cast<uint32_t>(len)};
  ASSERT_TRUE((*t)->send({&op, 1}).ok());
  EXPECT_EQ(f.sent().size(), 1u);
  f.next_send_status(IBV_WC_RETRY_EXC_ERR);
  ASSERT_TRUE((*t)->send({&op, 1}).ok());  // posted; its completion comes later
  std::vector<Received> out(4);
  (*t)->receive(out);  // reaps the send queue
  const Status st = (*t)->health();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(std::string("send completion error: ") + ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)),
            std::string::npos)
      << st.message();
  EXPECT_FALSE((*t)->send({&op, 1}).ok());
}

TEST(VerbsSeam, FailedPostsAndPollsFailTheTransport) {
  {
    FakeVerbs f = one_device();
    auto t = VerbsTransport::open(options(&f));
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->add_peer(peer()).ok());
    ASSERT_TRUE(f.deliver(kAppliance, result_message(5, 2, 4)));
    std::vector<Received> out(4);
    EXPECT_EQ((*t)->receive(out), 1u);
    f.fail("post_recv", ENOMEM);
    EXPECT_EQ((*t)->receive(out), 0u);  // the repost fails
    EXPECT_NE((*t)->health().message().find("ibv_post_recv failed"), std::string::npos) << (*t)->health().to_string();
  }
  {
    FakeVerbs f = one_device();
    auto t = VerbsTransport::open(options(&f));
    ASSERT_TRUE(t.ok());
    f.fail("poll_cq", EIO);
    std::vector<Received> out(4);
    (*t)->receive(out);
    EXPECT_NE((*t)->health().message().find("ibv_poll_cq"), std::string::npos) << (*t)->health().to_string();
  }
  {
    FakeVerbs f = one_device();
    f.fail("post_recv", ENOMEM, 2);  // the third initial receive cannot be posted
    auto t = VerbsTransport::open(options(&f));
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("ibv_post_recv failed"), std::string::npos) << t.status().message();
  }
  {
    FakeVerbs f = one_device();
    f.fail("modify_qp", EINVAL, 1);  // INIT -> RTR refused
    auto t = VerbsTransport::open(options(&f));
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("QP to RTR"), std::string::npos) << t.status().message();
  }
}

// The communicator over a transport that becomes unusable mid-call: the call fails at once with
// the transport's reason, not after the operation timeout.
class BreakingTransport final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  Status send(std::span<const OutPacket> packets) override {
    broken_ = true;  // the first call's packets leave, then the QP "breaks"
    return inner_->send(packets);
  }
  size_t receive(std::span<Received> out) override { return broken_ ? 0 : inner_->receive(out); }
  std::string describe() const override { return "breaking " + inner_->describe(); }
  Status health() const override {
    return broken_ ? Status::io_error("verbs fake0: receive completion error: transport retry counter exceeded")
                   : Status();
  }

 private:
  bool broken_ = false;
};

TEST(VerbsSeam, TheCommunicatorFailsACallAtOnceOnAnUnusableTransport) {
  auto svc = shim::testing::start_service();
  ASSERT_TRUE(svc);
  shim::testing::run_ranks(2, [&](int r) {
    CommConfig c = shim::testing::base_config({svc.get()}, "breaks", static_cast<uint16_t>(r), 2, wire::Dtype::kFp32);
    c.op_timeout_ms = 60000;
    if (r == 0) {
      c.wrap_transport = [](std::unique_ptr<Transport> t) { return std::make_unique<BreakingTransport>(std::move(t)); };
    }
    auto comm = Communicator::create(c);
    ASSERT_TRUE(comm.ok()) << comm.status().to_string();
    std::vector<float> buf(100000, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = (*comm)->allreduce(buf.data(), buf.data(), buf.size());
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(st.ok());  // rank 1: its peer left the job
    if (r == 0) {
      EXPECT_NE(st.message().find("transport retry counter exceeded"), std::string::npos) << st.to_string();
    }
    EXPECT_LT(took, std::chrono::seconds(20)) << r;  // far below the 60 s operation timeout
  });
}

}  // namespace
}  // namespace sumcast::shim
