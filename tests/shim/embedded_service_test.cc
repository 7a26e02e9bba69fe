// The embedded summation service on its own: address checks, the data path on a port other
// than 4791, where the service checks each datagram's ICRC itself (the engine then does not) and
// re-stamps replies for the headers its kernel writes; UDP trains both ways (udp_trains, the
// workers' udp_gso) over loopback, which keeps trains whole for a socket with UDP_GRO; and the
// workers' trains cut into single datagrams, as loopback delivers them to a socket without it.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <thread>
#include <vector>

#include "shim_test_util.h"
#include "sumcast/embedded/service.h"
#include "sumcast/shim/address.h"
#include "sumcast/shim/communicator.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/shim/udp_transport.h"

namespace sumcast::embedded {
namespace {

using shim::testing::kToken;

TEST(EmbeddedService, RejectsAnAddressThatIsNotASpecificIpv4) {
  for (const char* bad : {"0.0.0.0", "not-an-ip", ""}) {
    ServiceOptions o;
    o.bind_ip = bad;
    o.token = kToken;
    auto s = Service::start(o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// Job i's results go to multicast_group + i: a first group outside 224.0.0.0/4, or one whose
// max_jobs - 1 successors leave it, is refused at start, naming the group; the last fitting one is
// taken.
TEST(EmbeddedService, RejectsAMulticastGroupRangeThatLeavesTheMulticastBlock) {
  for (const char* bad : {"10.0.0.1", "239.255.255.250", "not-an-ip"}) {
    ServiceOptions o;
    o.token = kToken;
    o.data_port = 0;
    o.multicast = true;
    o.multicast_group = bad;
    o.max_jobs = 16;
    auto s = Service::start(o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().to_string();
  }
  ServiceOptions o;
  o.data_port = 0;
  o.multicast = true;
  o.multicast_group = "239.255.255.240";  // + 15 = 239.255.255.255
  o.max_jobs = 16;
  EXPECT_TRUE(shim::testing::start_service(o));
}

TEST(EmbeddedService, ReportsItsEndpointsAndStopsIdempotently) {
  auto s = shim::testing::start_service();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->data_port(), wire::kRoceUdpPort);
  EXPECT_NE(s->control_port(), 0);
  EXPECT_NE(s->control_address().find(":" + std::to_string(s->control_port())), std::string::npos);
  EXPECT_EQ(s->installed_jobs(), 0u);
  s->stop();
  s->stop();
}

// Two ranks register by hand (the grant names port 4791, so they are told the real, ephemeral
// data port here), send one contribution each through the UDP transport, and both get the
// exact sum: the ICRC held through the service's re-stamping in both directions. A corrupted
// datagram is counted as bad_icrc by the service itself.
TEST(EmbeddedService, EphemeralDataPortChecksAndRestampsTheIcrc) {
  ServiceOptions o;
  o.data_port = 0;
  auto s = shim::testing::start_service(o);
  ASSERT_TRUE(s);
  ASSERT_NE(s->data_port(), wire::kRoceUdpPort);
  constexpr int kWorld = 2;
  std::vector<std::vector<float>> got(kWorld);
  std::vector<std::string> errors(kWorld);
  shim::testing::run_ranks(kWorld, [&](int rank) {
    shim::UdpTransportOptions to;
    to.bind_ip = 0x7F000001;
    auto t = shim::UdpTransport::open(to);
    if (!t.ok()) {
      errors[rank] = t.status().to_string();
      return;
    }
    auto cc = shim::ControlClient::connect(shim::format_ipv4(s->data_ip()), s->control_port(), kToken, 5000);
    if (!cc.ok()) {
      errors[rank] = cc.status().to_string();
      return;
    }
    shim::RegisterRequest req;
    req.job_name = "ephemeral";
    req.world_size = kWorld;
    req.rank = static_cast<uint16_t>(rank);
    req.endpoint = (*t)->local_endpoint();
    auto grant = (*cc)->register_rank(req, 10000);
    if (!grant.ok()) {
      errors[rank] = grant.status().to_string();
      return;
    }
    shim::PeerSpec ps;
    ps.ip = grant->appliance.ip;
    ps.udp_port = s->data_port();  // the grant says 4791
    ps.job_id = grant->job_id;
    ps.qkey = grant->qkey;
    ps.rank = static_cast<uint16_t>(rank);
    const uint32_t peer = *(*t)->add_peer(ps);
    const float mine[4] = {1.0f + rank, 2.0f, -3.0f * rank, 0.5f};
    wire::SumcastHeader h;
    h.job_id = grant->job_id;
    h.rank = static_cast<uint16_t>(rank);
    h.elem_count = 4;
    std::vector<uint8_t> pkt((*t)->packet_capacity(16));
    const size_t len = (*t)->build(pkt.data(), peer, grant->core_qpns[0], 0, h, reinterpret_cast<const uint8_t*>(mine));
    if (rank == 0) {  // first a corrupted copy: the service must count it and drop it
      std::vector<uint8_t> bad = pkt;
      bad.at(wire::kRoceHeadersLen) ^= 0x40;
      shim::OutPacket ob{peer, bad.data(), static_cast<uint32_t>(len)};
      (void)(*t)->send(std::span<const shim::OutPacket>(&ob, 1));
    }
    shim::OutPacket op{peer, pkt.data(), static_cast<uint32_t>(len)};
    if (Status st = (*t)->send(std::span<const shim::OutPacket>(&op, 1)); !st.ok()) {
      errors[rank] = st.to_string();
      return;
    }
    std::vector<shim::Received> rx(8);
    const auto deadline = shim::testing::Clock::now() + std::chrono::seconds(5);
    while (got[rank].empty() && shim::testing::Clock::now() < deadline) {
      pollfd p{(*t)->wait_fd(), POLLIN, 0};
      (void)poll(&p, 1, 100);
      const size_t n = (*t)->receive(rx);
      for (size_t i = 0; i < n; ++i) {
        if (rx[i].hdr.type != wire::MsgType::kResult) continue;
        got[rank].resize(4);
        std::memcpy(got[rank].data(), rx[i].payload, 16);
      }
    }
    (void)(*cc)->leave();
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(got[r].size(), 4u) << "rank " << r << " got no result";
    EXPECT_EQ(got[r][0], 3.0f);
    EXPECT_EQ(got[r][1], 4.0f);
    EXPECT_EQ(got[r][2], -3.0f);
    EXPECT_EQ(got[r][3], 1.0f);
  }
  EXPECT_EQ(s->counters().rx_bad_icrc, 1u);
  EXPECT_GE(s->counters().tx_restamped, 2u);  // the engine wrote source port 4791; the socket's differs
  EXPECT_EQ(s->engine_counters().drops[static_cast<size_t>(engine::DropReason::kBadIcrc)].load(), 0u);
}

// Runs one fp32 all-reduce of `count` elements per rank over `s` with workers that send UDP_SEGMENT
// trains (4 KiB payloads, UDP GRO on); fills each rank's error ("" when exact) and statistics.
void run_train_job(const Service& s, const std::string& job, int world, size_t count, int salt,
                   std::vector<std::string>* errors, std::vector<shim::CommStats>* stats) {
  const auto want = shim::testing::make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, world, salt);
  errors->assign(static_cast<size_t>(world), "");
  stats->assign(static_cast<size_t>(world), {});
  shim::testing::run_ranks(world, [&](int rank) {
    std::string& error = (*errors)[static_cast<size_t>(rank)];
    shim::CommConfig c = shim::testing::base_config({&s}, job, static_cast<uint16_t>(rank),
                                                    static_cast<uint16_t>(world), wire::Dtype::kFp32);
    c.payload_bytes = 4096;
    c.udp_gso = true;
    c.udp_gro = true;
    auto comm = shim::Communicator::create(c);
    if (!comm.ok()) {
      error = comm.status().to_string();
      return;
    }
    auto buf = shim::testing::make_input(wire::Dtype::kFp32, count, rank, salt);
    if (Status st = (*comm)->allreduce(buf.data(), buf.data(), count); !st.ok()) {
      error = st.to_string();
    } else if (const long bad = shim::testing::first_mismatch(buf, want, 4); bad != -1) {
      error = "element " + std::to_string(bad) + " wrong";
    }
    (*stats)[static_cast<size_t>(rank)] = (*comm)->stats();
  });
}

// udp_trains with workers that send UDP_SEGMENT trains: the service gets them coalesced and checks
// datagram k for IP ID k, sends its results as trains, which the workers get coalesced and check
// the same way; every element exact, nothing dropped, and both directions counted as trains.
TEST(EmbeddedService, UdpTrainsCarryContributionsAndResultsWholeAndExact) {
  constexpr int kWorld = 3;
  ServiceOptions o;
  o.udp_trains = true;
  auto s = shim::testing::start_service(o);
  ASSERT_TRUE(s);
  std::vector<std::string> errors;
  std::vector<shim::CommStats> stats;
  run_train_job(*s, "trains", kWorld, (size_t{4} << 20) / 4, 11, &errors, &stats);  // 1024 chunks per rank
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int r = 0; r < kWorld; ++r) {
    const shim::TransportCounters& t = stats[r].transport;
    if (t.gso_refused != 0 || t.gro_refused != 0) GTEST_SKIP() << "skipped: this kernel refused UDP GSO or GRO";
  }
  const ServiceCounters c = s->counters();
  EXPECT_GT(c.rx_coalesced, 0u);
  EXPECT_GT(c.rx_coalesced_datagrams, c.rx_coalesced);
  EXPECT_GT(c.tx_trains, 0u);
  EXPECT_GT(c.tx_train_datagrams, c.tx_trains);
  EXPECT_EQ(c.rx_bad_icrc, 0u);
  EXPECT_EQ(c.rx_truncated, 0u);
  EXPECT_EQ(c.tx_dropped, 0u);
  EXPECT_EQ(s->engine_counters().drops[static_cast<size_t>(engine::DropReason::kBadIcrc)].load(), 0u);
  for (int r = 0; r < kWorld; ++r) {
    const shim::TransportCounters& t = stats[r].transport;
    EXPECT_GT(t.gso_sends, 0u) << "rank " << r;
    EXPECT_GT(t.gro_receives, 0u) << "rank " << r << ": no result train arrived coalesced";
    EXPECT_EQ(t.drops[static_cast<size_t>(shim::DropReason::kBadIcrc)], 0u) << "rank " << r;
  }
}

// The same workers' trains to a service without udp_trains: its socket gets the datagrams one by
// one (loopback segments a train for a socket without UDP_GRO, as a hop that cuts trains does), each
// after the first of its train stamped for an IP ID the socket does not show. The service finds it
// (docs/protocol.md §2.2): every datagram after a train's first is counted in rx_cut_train, none
// fails its ICRC, and the job is exact.
TEST(EmbeddedService, TrainsToAServiceWithoutUdpTrainsAreTakenDatagramByDatagram) {
  constexpr int kWorld = 2;
  auto s = shim::testing::start_service();
  ASSERT_TRUE(s);
  std::vector<std::string> errors;
  std::vector<shim::CommStats> stats;
  run_train_job(*s, "no-trains", kWorld, (size_t{256} << 10) / 4, 12, &errors, &stats);  // 64 chunks per rank
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  uint64_t after_first = 0;  // datagrams the workers sent in trains, after each train's first
  for (int r = 0; r < kWorld; ++r) {
    const shim::TransportCounters& t = stats[r].transport;
    if (t.gso_refused != 0) GTEST_SKIP() << "skipped: this kernel refused UDP GSO";
    after_first += t.gso_segments - t.gso_sends;
  }
  EXPECT_GT(after_first, 0u);
  EXPECT_EQ(s->counters().rx_coalesced, 0u);
  EXPECT_EQ(s->counters().tx_trains, 0u);
  EXPECT_EQ(s->counters().rx_cut_train, after_first);
  EXPECT_EQ(s->counters().rx_bad_icrc, 0u);
  EXPECT_EQ(s->engine_counters().drops[static_cast<size_t>(engine::DropReason::kBadIcrc)].load(), 0u);
}

}  // namespace
}  // namespace sumcast::embedded
