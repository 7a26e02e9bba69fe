// The kernel UDP transport: the bytes it builds, the IPv4 header the kernel writes for them
// (ID 0, DF, so the ICRC holds on the wire), and the validation of every received datagram.
#include "sumcast/shim/udp_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "appliance_socket.h"
#include "shim_test_util.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/shim/address.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim {
namespace {

constexpr uint32_t kLoopback = 0x7F000001;
constexpr uint32_t kJob = 77;
constexpr uint32_t kQkey = 0x1234567;

// A plain UDP socket playing the appliance.
struct Appliance : testing::ApplianceSocket {
  explicit Appliance(uint32_t bind_ip = kLoopback) : ApplianceSocket(bind_ip) {}
  // A result datagram from this appliance to `to`, ICRC stamped for the kernel's headers.
  std::vector<uint8_t> result(const Endpoint& to, wire::SumcastHeader h, uint32_t dest_qp, uint32_t qkey,
                              const std::vector<uint8_t>& payload) const {
    std::vector<uint8_t> b(wire::roce_len(payload.size()));
    wire::Addressing a;
    a.dest_qp = dest_qp;
    a.src_qp = 0x100;
    a.qkey = qkey;
    wire::write_roce_headers(b.data(), a, h, payload.size());
    if (!payload.empty()) std::memcpy(b.data() + wire::kRoceHeadersLen, payload.data(), payload.size());
    stamp(to, b);
    return b;
  }
};

wire::SumcastHeader result_header(uint16_t rank) {
  wire::SumcastHeader h;
  h.type = wire::MsgType::kResult;
  h.dtype = wire::Dtype::kFp32;
  h.job_id = kJob;
  h.rank = rank;
  h.slot = 3;
  h.round = 5;
  h.flags = wire::kFlagSlotVersion;
  h.coll_seq = 2;
  h.elem_count = 4;
  h.elem_offset = 1024;
  return h;
}

std::unique_ptr<UdpTransport> open_transport() {
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  auto t = UdpTransport::open(o);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : nullptr;
}

PeerSpec peer_of(const Appliance& a) {
  PeerSpec p;
  p.ip = a.ip;
  p.udp_port = a.port;
  p.job_id = kJob;
  p.qkey = kQkey;
  p.rank = 1;
  return p;
}

// Receives until `n` datagrams were counted (bounded by a deadline), collecting what passed.
std::vector<Received> receive_n(UdpTransport& t, uint64_t n, std::vector<std::vector<uint8_t>>* payloads) {
  std::vector<Received> all;
  std::vector<Received> buf(64);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (t.counters().rx_packets < n && std::chrono::steady_clock::now() < deadline) {
    pollfd p{t.wait_fd(), POLLIN, 0};
    (void)poll(&p, 1, 100);
    const size_t k = t.receive(buf);
    for (size_t i = 0; i < k; ++i) {
      all.push_back(buf[i]);
      payloads->emplace_back(buf[i].payload, buf[i].payload + buf[i].payload_len);
    }
  }
  return all;
}

TEST(UdpTransport, RefusesTheWildcardAddress) {
  UdpTransportOptions o;
  auto t = UdpTransport::open(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

TEST(UdpTransport, EphemeralPortAndDerivedQpnAreReported) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  const Endpoint e = t->local_endpoint();
  EXPECT_EQ(e.ip, kLoopback);
  EXPECT_NE(e.udp_port, 0);
  EXPECT_EQ(e.qpn, 0x010000u | e.udp_port);
  EXPECT_NE(t->describe().find("127.0.0.1:" + std::to_string(e.udp_port)), std::string::npos);
}

// The built bytes parse as a UD SEND_ONLY contribution with the given header, and their ICRC
// holds for the headers the kernel writes (our address and port -> the peer's, ID 0, DF).
TEST(UdpTransport, BuiltPacketParsesAndItsIcrcCoversTheKernelHeaders) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  auto peer = t->add_peer(peer_of(app));
  ASSERT_TRUE(peer.ok());
  wire::SumcastHeader h = result_header(1);
  h.type = wire::MsgType::kContribution;
  h.elem_count = 3;  // 12 bytes: no pad; then 3 bytes of fp16 to force a pad
  const float payload[3] = {1.0f, -2.0f, 3.5f};
  std::vector<uint8_t> buf(t->packet_capacity(12));
  const size_t len = t->build(buf.data(), *peer, 0x222, 99, h, reinterpret_cast<const uint8_t*>(payload));
  ASSERT_EQ(len, wire::roce_len(12));
  wire::ParsedPacket pp;
  ASSERT_EQ(wire::parse_roce(std::span<const uint8_t>(buf.data(), len), &pp), wire::ParseError::kOk);
  EXPECT_EQ(pp.dest_qp, 0x222u);
  EXPECT_EQ(pp.psn, 99u);
  EXPECT_EQ(pp.qkey, kQkey);
  EXPECT_EQ(pp.src_qp, t->local_endpoint().qpn);
  EXPECT_EQ(pp.hdr.elem_offset, 1024u);
  EXPECT_EQ(std::memcmp(pp.payload, payload, 12), 0);
  EXPECT_EQ(std::memcmp(buf.data() + t->payload_offset(), payload, 12), 0);  // where failover finds it
  icrc::UdpFields f;
  f.src_ip = kLoopback;
  f.dst_ip = app.ip;
  f.src_port = t->local_endpoint().udp_port;
  f.dst_port = app.port;
  EXPECT_TRUE(icrc::verify_udp(f, std::span<const uint8_t>(buf.data(), len)));
  f.ip_id = 1;  // any other IP ID and the ICRC fails: the kernel must write 0
  EXPECT_FALSE(icrc::verify_udp(f, std::span<const uint8_t>(buf.data(), len)));

  h.dtype = wire::Dtype::kFp16;
  const size_t len16 = t->build(buf.data(), *peer, 0x222, 0, h, reinterpret_cast<const uint8_t*>(payload));
  EXPECT_EQ(len16, wire::roce_len(6));
  EXPECT_EQ(wire::parse_roce(std::span<const uint8_t>(buf.data(), len16), &pp), wire::ParseError::kOk);
}

// What the kernel really puts on the wire: captured with a raw socket, the IPv4 header has ID 0
// and DF, and the ICRC verifies over the captured IPv4 packet. Needs CAP_NET_RAW.
TEST(UdpTransport, KernelSendsIpId0WithDfSoTheIcrcHoldsOnTheWire) {
  const int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
  if (raw < 0) GTEST_SKIP() << "no CAP_NET_RAW: " << std::strerror(errno);
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  auto peer = t->add_peer(peer_of(app));
  ASSERT_TRUE(peer.ok());
  wire::SumcastHeader h = result_header(1);
  h.type = wire::MsgType::kContribution;
  const uint8_t payload[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::vector<uint8_t> buf(t->packet_capacity(16));
  const size_t len = t->build(buf.data(), *peer, 0x100, 1, h, payload);
  OutPacket op{*peer, buf.data(), static_cast<uint32_t>(len)};
  ASSERT_TRUE(t->send(std::span<const OutPacket>(&op, 1)).ok());
  EXPECT_EQ(t->counters().tx_packets, 1u);

  // The raw socket sees every UDP datagram of the host: under a parallel test run its buffer may
  // overflow, so the datagram is sent again until a copy is captured.
  const int big = 8 << 20;
  setsockopt(raw, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  bool found = false;
  std::vector<uint8_t> pkt(70000);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto next_send = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  while (!found && std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() >= next_send) {
      ASSERT_TRUE(t->send(std::span<const OutPacket>(&op, 1)).ok());
      next_send += std::chrono::milliseconds(50);
    }
    pollfd p{raw, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(raw, pkt.data(), pkt.size(), 0);
    if (n < 28) continue;
    const uint8_t* ip = pkt.data();
    const uint8_t* udp = ip + 20;
    if (load_be16(udp) != t->local_endpoint().udp_port || load_be16(udp + 2) != app.port) continue;
    found = true;
    EXPECT_EQ(load_be16(ip + 4), 0) << "IP ID";
    EXPECT_EQ(load_be16(ip + 6), 0x4000) << "flags: DF, no fragment";
    EXPECT_EQ(static_cast<size_t>(n), 28 + len);
    EXPECT_TRUE(icrc::verify(std::span<const uint8_t>(ip, static_cast<size_t>(n))));
  }
  close(raw);
  EXPECT_TRUE(found);
}

// Valid results and aborts pass; every other datagram is dropped under its own name.
TEST(UdpTransport, ReceiveAcceptsValidResultsAndCountsEachRejection) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  Appliance stranger(0x7F000009);  // 127.0.0.9: not a peer
  ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
  const Endpoint me = t->local_endpoint();
  const std::vector<uint8_t> payload = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};

  auto send = [&](const Appliance& from, wire::SumcastHeader h, uint32_t dest_qp, uint32_t qkey,
                  const std::vector<uint8_t>& pl, bool corrupt = false) {
    auto b = from.result(me, h, dest_qp, qkey, pl);
    if (corrupt) b[wire::kRoceHeadersLen] ^= 1;
    from.send_to(me, b);
  };
  wire::SumcastHeader good = result_header(1);
  send(app, good, me.qpn, kQkey, payload);                    // 1 accepted
  send(app, good, wire::kMulticastQpn, kQkey, payload);       // 2 accepted (multicast QPN)
  send(app, good, me.qpn, kQkey, payload, /*corrupt=*/true);  // bad_icrc
  send(app, good, me.qpn, kQkey + 1, payload);                // bad_qkey
  wire::SumcastHeader other_job = good;
  other_job.job_id = kJob + 1;
  send(app, other_job, me.qpn, kQkey, payload);  // unknown_job
  send(stranger, good, me.qpn, kQkey, payload);  // unknown_source
  wire::SumcastHeader contrib = good;
  contrib.type = wire::MsgType::kContribution;
  send(app, contrib, me.qpn, kQkey, payload);           // not_result
  send(app, good, me.qpn + 1, kQkey, payload);          // bad_dest_qp
  send(app, result_header(0), me.qpn, kQkey, payload);  // bad_rank
  wire::SumcastHeader int_job = good;
  int_job.dtype = wire::Dtype::kInt32;
  send(app, int_job, me.qpn, kQkey, payload);  // dtype_mismatch
  wire::SumcastHeader max_job = good;
  max_job.op = wire::ReduceOp::kMax;
  send(app, max_job, me.qpn, kQkey, payload);  // op_mismatch
  wire::SumcastHeader abort = good;
  abort.type = wire::MsgType::kAbort;
  abort.elem_count = 0;
  abort.status = static_cast<uint8_t>(wire::AbortReason::kTimeout);
  send(app, abort, me.qpn, kQkey, {});             // 3 accepted (abort)
  app.send_to(me, std::vector<uint8_t>(8, 0x64));  // truncated_bth

  std::vector<std::vector<uint8_t>> payloads;
  auto got = receive_n(*t, 13, &payloads);
  const TransportCounters& c = t->counters();
  EXPECT_EQ(c.rx_packets, 13u);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(c.results, 2u);
  EXPECT_EQ(c.aborts, 1u);
  EXPECT_EQ(got[0].peer, 0u);
  EXPECT_EQ(got[0].hdr.slot, 3);
  EXPECT_EQ(got[0].hdr.round, 5u);
  EXPECT_EQ(payloads[0], payload);
  EXPECT_EQ(got[2].hdr.type, wire::MsgType::kAbort);
  auto drops = [&](DropReason r) { return c.drops[static_cast<size_t>(r)]; };
  EXPECT_EQ(drops(DropReason::kBadIcrc), 1u);
  EXPECT_EQ(drops(DropReason::kBadQkey), 1u);
  EXPECT_EQ(drops(DropReason::kUnknownJob), 1u);
  EXPECT_EQ(drops(DropReason::kUnknownSource), 1u);
  EXPECT_EQ(drops(DropReason::kNotResult), 1u);
  EXPECT_EQ(drops(DropReason::kBadDestQp), 1u);
  EXPECT_EQ(drops(DropReason::kBadRank), 1u);
  EXPECT_EQ(drops(DropReason::kDtypeMismatch), 1u);
  EXPECT_EQ(drops(DropReason::kOpMismatch), 1u);
  EXPECT_EQ(drops(DropReason::kTruncatedBth), 1u);
}

// A notice (docs/protocol.md §7, loss or duplicate: a header, no payload) to our rank is handed on
// and counted as its kind; one to another rank, to the group's rank, or carrying a payload is
// dropped.
TEST(UdpTransport, NoticesToOurRankAreHandedOnAndBadOnesCounted) {
  for (const wire::MsgType type : {wire::MsgType::kLossNotice, wire::MsgType::kDuplicateNotice}) {
    SCOPED_TRACE(static_cast<int>(type));
    auto t = open_transport();
    ASSERT_TRUE(t);
    Appliance app;
    ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
    const Endpoint me = t->local_endpoint();
    wire::SumcastHeader notice = result_header(1);
    notice.type = type;
    app.send_to(me, app.result(me, notice, me.qpn, kQkey, {}));  // accepted
    wire::SumcastHeader other = notice;
    other.rank = 0;
    app.send_to(me, app.result(me, other, me.qpn, kQkey, {}));  // bad_rank
    other.rank = wire::kRankMulticast;
    app.send_to(me, app.result(me, other, me.qpn, kQkey, {}));  // bad_rank: notices are unicast
    notice.elem_count = 1;
    app.send_to(me, app.result(me, notice, me.qpn, kQkey, {0, 0, 128, 63}));  // bad_length
    std::vector<std::vector<uint8_t>> payloads;
    auto got = receive_n(*t, 4, &payloads);
    const TransportCounters& c = t->counters();
    EXPECT_EQ(c.rx_packets, 4u);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].hdr.type, type);
    EXPECT_EQ(got[0].hdr.slot, 3);
    EXPECT_EQ(got[0].hdr.round, 5u);
    EXPECT_EQ(got[0].hdr.elem_count, 4u);
    EXPECT_EQ(got[0].hdr.elem_offset, 1024u);
    EXPECT_EQ(got[0].payload_len, 0u);
    EXPECT_EQ(c.loss_notices, type == wire::MsgType::kLossNotice ? 1u : 0u);
    EXPECT_EQ(c.duplicate_notices, type == wire::MsgType::kDuplicateNotice ? 1u : 0u);
    EXPECT_EQ(c.results, 0u);
    EXPECT_EQ(c.drops[static_cast<size_t>(DropReason::kBadRank)], 2u);
    EXPECT_EQ(c.drops[static_cast<size_t>(DropReason::kBadLength)], 1u);
  }
}

// A CNP (no Sumcast header: the peer is the appliance at its source) to our QP is handed on as
// one; a CNP with a bad ICRC, to another QP, from a stranger, or not of a CNP's length is counted.
TEST(UdpTransport, CnpsToOurQpAreHandedOnAndBadOnesCounted) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  Appliance stranger(0x7F000009);
  ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
  const Endpoint me = t->local_endpoint();
  const auto good = app.cnp(me, me.qpn);
  app.send_to(me, good);  // accepted
  auto bad_icrc = good;
  bad_icrc.back() ^= 1;
  app.send_to(me, bad_icrc);                       // bad_icrc
  app.send_to(me, app.cnp(me, me.qpn + 1));        // bad_dest_qp
  stranger.send_to(me, stranger.cnp(me, me.qpn));  // unknown_source
  auto longer = good;
  longer.resize(good.size() + 4);
  app.send_to(me, longer);  // bad_opcode: not a CNP's length, and no UD SEND_ONLY either

  std::vector<std::vector<uint8_t>> payloads;
  auto got = receive_n(*t, 5, &payloads);
  const TransportCounters& c = t->counters();
  EXPECT_EQ(c.rx_packets, 5u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].cnp);
  EXPECT_EQ(got[0].peer, 0u);
  EXPECT_EQ(c.cnps, 1u);
  EXPECT_EQ(c.results, 0u);
  auto drops = [&](DropReason r) { return c.drops[static_cast<size_t>(r)]; };
  EXPECT_EQ(drops(DropReason::kBadIcrc), 1u);
  EXPECT_EQ(drops(DropReason::kBadDestQp), 1u);
  EXPECT_EQ(drops(DropReason::kUnknownSource), 1u);
  EXPECT_EQ(drops(DropReason::kBadOpcode), 1u);
}

// With recv_ecn, a result that arrived marked CE says so (and is counted); one not marked, or
// marked ECT(0) only, does not.
TEST(UdpTransport, ResultsMarkedCeAreFlaggedWithRecvEcn) {
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  o.recv_ecn = true;
  auto t = UdpTransport::open(o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  Appliance app;
  ASSERT_TRUE((*t)->add_peer(peer_of(app)).ok());
  const Endpoint me = (*t)->local_endpoint();
  const auto b = app.result(me, result_header(1), me.qpn, kQkey, std::vector<uint8_t>(16, 1));
  for (const int tos : {0, 0x02, 0x03, 0x68 | 0x03}) {  // not-ECT, ECT(0), CE, DSCP 26 with CE
    ASSERT_EQ(setsockopt(app.fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)), 0);
    app.send_to(me, b);
  }
  std::vector<std::vector<uint8_t>> payloads;
  const auto got = receive_n(**t, 4, &payloads);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_FALSE(got[0].ce);
  EXPECT_FALSE(got[1].ce);
  EXPECT_TRUE(got[2].ce);
  EXPECT_TRUE(got[3].ce);
  EXPECT_EQ((*t)->counters().ce_results, 2u);
  EXPECT_EQ((*t)->counters().results, 4u);
}

// A receive buffer too small for a burst: the kernel drops the overflow, and SO_RXQ_OVFL tells the
// transport how many with the next datagram that arrives, so every datagram sent is either
// received or counted in rx_overflows.
TEST(UdpTransport, DatagramsDroppedForWantOfReceiveBufferAreCounted) {
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  o.socket_buffer_bytes = 1;  // the kernel's minimum: a few datagrams
  auto t = UdpTransport::open(o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_GT((*t)->counters().rx_buffer_bytes, 0u);
  EXPECT_LT((*t)->counters().rx_buffer_bytes, 64u * 1024) << "the minimum buffer was not granted";
  EXPECT_GT((*t)->counters().tx_buffer_bytes, 0u);
  Appliance app;
  ASSERT_TRUE((*t)->add_peer(peer_of(app)).ok());
  const Endpoint me = (*t)->local_endpoint();
  const auto b = app.result(me, result_header(1), me.qpn, kQkey, std::vector<uint8_t>(16, 1));
  constexpr uint64_t kBurst = 200;
  for (uint64_t i = 0; i < kBurst; ++i) app.send_to(me, b);
  std::vector<Received> buf(64);
  const auto drain = [&](uint64_t total) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((*t)->counters().rx_packets + (*t)->counters().rx_overflows < total &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd p{(*t)->wait_fd(), POLLIN, 0};
      (void)poll(&p, 1, 100);
      (void)(*t)->receive(buf);
    }
  };
  drain(1);  // what fit in the buffer
  const uint64_t first = (*t)->counters().rx_packets;
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, kBurst) << "the burst fit: nothing to count";
  app.send_to(me, b);  // the datagram after the drops reports the socket's count
  drain(kBurst + 1);
  const TransportCounters& c = (*t)->counters();
  EXPECT_GT(c.rx_overflows, 0u);
  EXPECT_EQ(c.rx_packets + c.rx_overflows, kBurst + 1)
      << "received " << c.rx_packets << ", counted dropped " << c.rx_overflows;
  EXPECT_EQ(c.results, c.rx_packets);
}

// The default payload follows the path MTU: the largest RoCE payload whose datagram (BTH..ICRC,
// plus 28 bytes of IPv4 and UDP) fits.
TEST(UdpTransport, PayloadForMtuIsTheLargestRoceMtuThatFits) {
  EXPECT_EQ(udp_payload_for_mtu(1500), 1024u);
  EXPECT_EQ(udp_payload_for_mtu(9000), 4096u);
  const uint32_t fit4096 = static_cast<uint32_t>(wire::roce_len(4096) + 28);
  EXPECT_EQ(fit4096, 4180u) << "docs/agg.conf.md's port.mtu for 4096-byte payloads";
  EXPECT_EQ(udp_payload_for_mtu(fit4096), 4096u);
  EXPECT_EQ(udp_payload_for_mtu(fit4096 - 1), 2048u);
  EXPECT_EQ(udp_payload_for_mtu(static_cast<uint32_t>(wire::roce_len(2048) + 28)), 2048u);
  EXPECT_EQ(udp_payload_for_mtu(static_cast<uint32_t>(wire::roce_len(1024) + 27)), 512u);
  EXPECT_EQ(udp_payload_for_mtu(576), 256u);
  EXPECT_EQ(udp_payload_for_mtu(300), 0u);
  auto t = open_transport();
  ASSERT_TRUE(t);
  EXPECT_GE(t->path_mtu(kLoopback), 65535u) << "loopback's MTU (IP_MTU caps it at 65535)";
  EXPECT_EQ(udp_payload_for_mtu(t->path_mtu(kLoopback)), 4096u);
}

// Busy polling is off unless asked for; asked for, the socket carries it; out of range, refused.
TEST(UdpTransport, BusyPollIsASocketOptionWhenAskedFor) {
  const auto busy_poll = [](const UdpTransport& t) {
    int v = -1;
    socklen_t len = sizeof(v);
    EXPECT_EQ(getsockopt(t.wait_fd(), SOL_SOCKET, SO_BUSY_POLL, &v, &len), 0);
    return v;
  };
  auto off = open_transport();
  ASSERT_TRUE(off);
  EXPECT_EQ(busy_poll(*off), 0);
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  o.busy_poll_us = 50;
  auto on = UdpTransport::open(o);
  if (!on.ok() && on.status().message().find("SO_BUSY_POLL") != std::string::npos) {
    GTEST_SKIP() << "skipped: this kernel refuses SO_BUSY_POLL here: " << on.status().to_string();
  }
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_EQ(busy_poll(**on), 50);
  o.busy_poll_us = 1'000'001;
  auto bad = UdpTransport::open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("busy_poll_us"), std::string::npos) << bad.status().to_string();
}

// With verify_icrc off, a corrupted ICRC passes (for captures of NICs that compute it wrong).
TEST(UdpTransport, IcrcCheckCanBeTurnedOff) {
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  o.verify_icrc = false;
  auto t = UdpTransport::open(o);
  ASSERT_TRUE(t.ok());
  Appliance app;
  ASSERT_TRUE((*t)->add_peer(peer_of(app)).ok());
  const Endpoint me = (*t)->local_endpoint();
  auto b = app.result(me, result_header(1), me.qpn, kQkey, std::vector<uint8_t>(16, 1));
  b.back() ^= 0xFF;
  app.send_to(me, b);
  std::vector<std::vector<uint8_t>> payloads;
  EXPECT_EQ(receive_n(**t, 1, &payloads).size(), 1u);
}

// ---- UDP GRO ----------------------------------------------------------------------------------

// `count` results of 16 fp32 elements each (elem_offset 16 k, every byte k + 1), the last one with
// `last_elems` elements: a train the kernel may coalesce.
std::vector<std::vector<uint8_t>> result_train(const Appliance& app, const Endpoint& to, size_t count,
                                               uint16_t last_elems) {
  std::vector<std::vector<uint8_t>> train;
  for (size_t k = 0; k < count; ++k) {
    wire::SumcastHeader h = result_header(1);
    h.elem_count = k + 1 == count ? last_elems : 16;
    h.elem_offset = static_cast<uint32_t>(16 * k);
    train.push_back(app.result(to, h, to.qpn, kQkey, std::vector<uint8_t>(4u * h.elem_count, uint8_t(k + 1))));
  }
  return train;
}

// Sends the train as one UDP_SEGMENT send (segment size: the first datagram's length). On
// loopback the kernel hands it whole to a socket with UDP_GRO (one buffer and a UDP_GRO control
// message, as a NIC's GRO would) and segments it for any other. False: this kernel has no UDP GSO.
bool send_segmented(const Appliance& app, const Endpoint& to, const std::vector<std::vector<uint8_t>>& train) {
  std::vector<uint8_t> all;
  for (const auto& d : train) all.insert(all.end(), d.begin(), d.end());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(to.udp_port);
  a.sin_addr.s_addr = htonl(to.ip);
  iovec iov{all.data(), all.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(uint16_t))] = {};
  msghdr m{};
  m.msg_name = &a;
  m.msg_namelen = sizeof(a);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof(ctl);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = IPPROTO_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  const uint16_t seg = static_cast<uint16_t>(train.front().size());
  std::memcpy(CMSG_DATA(c), &seg, sizeof(seg));
  return sendmsg(app.fd, &m, 0) == static_cast<ssize_t>(all.size());
}

// Receives until `n` results were handed out (bounded), `out_size` at a time.
std::vector<Received> receive_results(UdpTransport& t, size_t n, size_t out_size,
                                      std::vector<std::vector<uint8_t>>* payloads) {
  std::vector<Received> all;
  std::vector<Received> buf(out_size);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    const size_t k = t.receive(buf);
    if (k == 0) {
      pollfd p{t.wait_fd(), POLLIN, 0};
      (void)poll(&p, 1, 100);
    }
    for (size_t i = 0; i < k; ++i) {
      all.push_back(buf[i]);
      payloads->emplace_back(buf[i].payload, buf[i].payload + buf[i].payload_len);
    }
  }
  return all;
}

// Every result of `got` is the train's k-th: its offset, length and bytes.
void expect_train(const std::vector<Received>& got, const std::vector<std::vector<uint8_t>>& payloads, size_t count,
                  uint16_t last_elems) {
  ASSERT_EQ(got.size(), count);
  for (size_t k = 0; k < count; ++k) {
    const uint32_t elems = k + 1 == count ? last_elems : 16;
    EXPECT_EQ(got[k].hdr.elem_offset, 16 * k) << k;
    EXPECT_EQ(got[k].hdr.elem_count, elems) << k;
    EXPECT_EQ(payloads[k], std::vector<uint8_t>(4 * elems, uint8_t(k + 1))) << k;
  }
}

int udp_gro_option(const UdpTransport& t) {
  int v = -1;
  socklen_t len = sizeof(v);
  EXPECT_EQ(getsockopt(t.wait_fd(), IPPROTO_UDP, UDP_GRO, &v, &len), 0);
  return v;
}

// A coalesced buffer is split into datagrams of the segment size, the last one shorter, each
// validated (ICRC with IP ID 0) and handed out in order.
TEST(UdpTransport, GroBufferIsSplitIntoItsDatagramsTheLastShorter) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  EXPECT_EQ(udp_gro_option(*t), 1);  // on by default
  EXPECT_EQ(t->counters().gro_refused, 0u);
  Appliance app;
  ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
  const Endpoint me = t->local_endpoint();
  const auto train = result_train(app, me, 5, 3);
  if (!send_segmented(app, me, train)) GTEST_SKIP() << "skipped: no UDP_SEGMENT here: " << std::strerror(errno);
  std::vector<std::vector<uint8_t>> payloads;
  const auto got = receive_results(*t, 5, 64, &payloads);
  expect_train(got, payloads, 5, 3);
  EXPECT_EQ(t->counters().gro_receives, 1u);
  EXPECT_EQ(t->counters().gro_segments, 5u);
  EXPECT_EQ(t->counters().rx_packets, 5u);
  EXPECT_EQ(t->counters().results, 5u);
  EXPECT_EQ(t->counters().drops[static_cast<size_t>(DropReason::kBadIcrc)], 0u);
}

// A corrupted segment in a coalesced buffer is dropped alone; its neighbours pass.
TEST(UdpTransport, GroSegmentsAreValidatedOneByOne) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
  const Endpoint me = t->local_endpoint();
  auto train = result_train(app, me, 4, 16);
  train[2][wire::kRoceHeadersLen] ^= 0xFF;  // a payload byte: the ICRC no longer holds
  if (!send_segmented(app, me, train)) GTEST_SKIP() << "skipped: no UDP_SEGMENT here: " << std::strerror(errno);
  std::vector<std::vector<uint8_t>> payloads;
  const auto got = receive_results(*t, 3, 64, &payloads);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].hdr.elem_offset, 0u);
  EXPECT_EQ(got[1].hdr.elem_offset, 16u);
  EXPECT_EQ(got[2].hdr.elem_offset, 48u);
  EXPECT_EQ(t->counters().drops[static_cast<size_t>(DropReason::kBadIcrc)], 1u);
  EXPECT_EQ(t->counters().gro_segments, 4u);
}

// More datagrams in coalesced buffers than one receive() takes: the rest come with the next
// calls, before the socket is read again, none lost, in order.
TEST(UdpTransport, GroSegmentsBeyondOneReceiveWaitForTheNext) {
  auto t = open_transport();
  ASSERT_TRUE(t);
  Appliance app;
  ASSERT_TRUE(t->add_peer(peer_of(app)).ok());
  const Endpoint me = t->local_endpoint();
  const auto train = result_train(app, me, 40, 16);
  if (!send_segmented(app, me, train)) GTEST_SKIP() << "skipped: no UDP_SEGMENT here: " << std::strerror(errno);
  std::vector<std::vector<uint8_t>> payloads;
  const auto got = receive_results(*t, 40, 16, &payloads);
  expect_train(got, payloads, 40, 16);
  EXPECT_EQ(t->counters().gro_receives, 1u);
  EXPECT_EQ(t->counters().gro_segments, 40u);
  std::vector<Received> more(16);
  EXPECT_EQ(t->receive(more), 0u);  // nothing is handed out twice
}

// A train cut on the way (a hop segmented it and nothing coalesced it again): its datagrams come
// alone, datagram k stamped for IP ID k. Each is taken (rx_cut_train counts k > 0); a datagram
// stamped for 64, a place no train has, is a bad ICRC. Without GRO the same.
TEST(UdpTransport, TrainMembersThatArriveAloneAreTakenWhateverTheirPlace) {
  for (const bool gro : {true, false}) {
    SCOPED_TRACE(gro ? "gro" : "no gro");
    UdpTransportOptions o;
    o.bind_ip = kLoopback;
    o.gro = gro;
    auto t = UdpTransport::open(o);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    Appliance app;
    ASSERT_TRUE((*t)->add_peer(peer_of(app)).ok());
    const Endpoint me = (*t)->local_endpoint();
    auto train = result_train(app, me, 5, 16);
    auto beyond = train[0];
    app.stamp(me, beyond, 64);
    app.send_to(me, beyond);  // first: read before the results below (loopback keeps the order)
    for (size_t k = 0; k < train.size(); ++k) {
      app.stamp(me, train[k], static_cast<uint16_t>(k));
      app.send_to(me, train[k]);
    }
    std::vector<std::vector<uint8_t>> payloads;
    const auto got = receive_results(**t, 5, 64, &payloads);
    expect_train(got, payloads, 5, 16);
    EXPECT_EQ((*t)->counters().rx_packets, 6u);
    EXPECT_EQ((*t)->counters().results, 5u);
    EXPECT_EQ((*t)->counters().rx_cut_train, 4u);
    EXPECT_EQ((*t)->counters().drops[static_cast<size_t>(DropReason::kBadIcrc)], 1u);
  }
}

// The seam of a kernel that refuses the UDP option kName (and takes the others).
template <int kName>
int refuse_option(int, int, int name, const void*, socklen_t) {
  if (name != kName) return 0;
  errno = ENOPROTOOPT;
  return -1;
}

// A kernel that refuses UDP_GRO (the seam) or GRO turned off: one datagram per buffer, counted
// and said; a segmented send still arrives whole, the kernel splitting it for the socket.
TEST(UdpTransport, WithoutGroEveryDatagramComesAlone) {
  for (const bool refused : {true, false}) {
    SCOPED_TRACE(refused ? "refused" : "off");
    UdpTransportOptions o;
    o.bind_ip = kLoopback;
    if (refused) {
      o.offload_setsockopt = refuse_option<UDP_GRO>;
    } else {
      o.gro = false;
    }
    auto t = UdpTransport::open(o);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(udp_gro_option(**t), 0);
    EXPECT_EQ((*t)->counters().gro_refused, refused ? 1u : 0u);
    EXPECT_EQ((*t)->describe().find("no GRO: setsockopt(UDP_GRO)") != std::string::npos, refused) << (*t)->describe();
    Appliance app;
    ASSERT_TRUE((*t)->add_peer(peer_of(app)).ok());
    const Endpoint me = (*t)->local_endpoint();
    const auto train = result_train(app, me, 5, 3);
    if (!send_segmented(app, me, train)) GTEST_SKIP() << "skipped: no UDP_SEGMENT here: " << std::strerror(errno);
    std::vector<std::vector<uint8_t>> payloads;
    const auto got = receive_results(**t, 5, 64, &payloads);
    expect_train(got, payloads, 5, 3);
    EXPECT_EQ((*t)->counters().gro_receives, 0u);
    EXPECT_EQ((*t)->counters().gro_segments, 0u);
  }
}

// ---- UDP GSO ----------------------------------------------------------------------------------

// `count` contributions of 256 bytes (the last of `last_len`), built by `t` for `peer`: every byte
// of packet k is k + 1.
std::vector<std::vector<uint8_t>> built_train(UdpTransport& t, uint32_t peer, size_t count, size_t last_len) {
  std::vector<std::vector<uint8_t>> train;
  for (size_t k = 0; k < count; ++k) {
    wire::SumcastHeader h = result_header(1);
    h.type = wire::MsgType::kContribution;
    h.elem_count = static_cast<uint16_t>((k + 1 == count ? last_len : 256) / 4);
    h.elem_offset = static_cast<uint32_t>(64 * k);
    const std::vector<uint8_t> payload(4u * h.elem_count, uint8_t(k + 1));
    std::vector<uint8_t> b(t.packet_capacity(payload.size()));
    b.resize(t.build(b.data(), peer, 0x100, static_cast<uint32_t>(k), h, payload.data()));
    train.push_back(std::move(b));
  }
  return train;
}

// The ICRC fields of what `t` sends to `app` (IP ID 0).
icrc::UdpFields fields_toward(const UdpTransport& t, const Appliance& app) {
  return {.src_ip = kLoopback, .dst_ip = app.ip, .src_port = t.local_endpoint().udp_port, .dst_port = app.port};
}

// The packets of `train` to `peer`, in order, none marked alone.
std::vector<OutPacket> out_packets(uint32_t peer, const std::vector<std::vector<uint8_t>>& train) {
  std::vector<OutPacket> out;
  for (const auto& b : train) out.push_back({peer, b.data(), static_cast<uint32_t>(b.size())});
  return out;
}

Status send_train(UdpTransport& t, uint32_t peer, const std::vector<std::vector<uint8_t>>& train) {
  return t.send(out_packets(peer, train));
}

// One buffer as the appliance socket got it, the segment size the kernel said (0: none) and its
// IPv4 TOS (-1: not said; the socket needs IP_RECVTOS).
struct Got {
  std::vector<uint8_t> bytes;
  uint32_t gso_size = 0;
  int tos = -1;
};
std::vector<Got> appliance_receive(const Appliance& app, size_t datagrams) {
  std::vector<Got> got;
  size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (seen < datagrams && std::chrono::steady_clock::now() < deadline) {
    pollfd p{app.fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    Got g;
    g.bytes.resize(70000);
    iovec iov{g.bytes.data(), g.bytes.size()};
    alignas(cmsghdr) char ctl[2 * CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(app.fd, &m, MSG_DONTWAIT);
    if (n < 0) continue;
    g.bytes.resize(static_cast<size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
        int v = 0;
        std::memcpy(&v, CMSG_DATA(c), sizeof(v));
        g.gso_size = static_cast<uint32_t>(v);
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        g.tos = *CMSG_DATA(c);
      }
    }
    seen += g.gso_size != 0 ? (g.bytes.size() + g.gso_size - 1) / g.gso_size : 1;
    got.push_back(std::move(g));
  }
  return got;
}

// A GSO transport and an appliance socket that takes its trains whole (UDP_GRO on loopback).
class UdpTransportGso : public ::testing::Test {
 protected:
  void SetUp() override {
    UdpTransportOptions o;
    o.bind_ip = kLoopback;
    o.gso = true;
    auto r = UdpTransport::open(o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    t = std::move(r).value();
    if (t->counters().gso_refused != 0) GTEST_SKIP() << "skipped: no UDP GSO here: " << t->describe();
    const int one = 1;
    ASSERT_EQ(setsockopt(app.fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)), 0);
    auto p = t->add_peer(peer_of(app));
    ASSERT_TRUE(p.ok());
    peer = *p;
  }
  std::unique_ptr<UdpTransport> t;
  Appliance app;
  uint32_t peer = 0;
};

// With GSO a train to one peer leaves in one UDP_SEGMENT send; segment k carries the ICRC of the
// IPv4 header the kernel writes for it (IP ID k, DF): what sumcastd checks on the real header.
// The appliance socket takes the train whole (UDP_GRO on loopback) to see where each segment lies.
TEST_F(UdpTransportGso, GsoTrainIsOneSendAndSegmentKCarriesTheIcrcOfIpIdK) {
  const auto train = built_train(*t, peer, 6, 40);
  ASSERT_TRUE(send_train(*t, peer, train).ok());
  const TransportCounters& c = t->counters();
  EXPECT_EQ(c.gso_sends, 1u);
  EXPECT_EQ(c.gso_segments, 6u);
  EXPECT_EQ(c.tx_packets, 6u);
  const auto got = appliance_receive(app, 6);
  ASSERT_EQ(got.size(), 1u) << "the train did not arrive as one buffer";
  ASSERT_EQ(got[0].gso_size, train[0].size());
  icrc::UdpFields f = fields_toward(*t, app);
  size_t off = 0;
  for (size_t k = 0; k < train.size(); ++k) {
    const std::span<const uint8_t> seg(got[0].bytes.data() + off, train[k].size());
    off += train[k].size();
    f.ip_id = static_cast<uint16_t>(k);
    EXPECT_TRUE(icrc::verify_udp(f, seg)) << "segment " << k << " with IP ID " << k;
    f.ip_id = 0;
    EXPECT_EQ(icrc::verify_udp(f, seg), k == 0) << "segment " << k << " with IP ID 0";
    wire::ParsedPacket pp;
    ASSERT_EQ(wire::parse_roce(seg, &pp), wire::ParseError::kOk) << k;
    EXPECT_EQ(pp.hdr.elem_offset, 64 * k);
    EXPECT_EQ(pp.payload[0], uint8_t(k + 1));
  }
  EXPECT_EQ(off, got[0].bytes.size());

  // The same buffers sent one at a time (another peer between them) are stamped for ID 0 again.
  Appliance other;
  auto peer2 = t->add_peer(peer_of(other));
  ASSERT_TRUE(peer2.ok());
  const auto lone = built_train(*t, *peer2, 1, 256);
  std::vector<OutPacket> mixed = {{peer, train[3].data(), static_cast<uint32_t>(train[3].size())},
                                  {*peer2, lone[0].data(), static_cast<uint32_t>(lone[0].size())}};
  ASSERT_TRUE(t->send(mixed).ok());
  EXPECT_EQ(c.gso_sends, 1u);  // nothing to coalesce
  const auto again = appliance_receive(app, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].gso_size, 0u);
  f.ip_id = 0;
  EXPECT_TRUE(icrc::verify_udp(f, again[0].bytes));
}

// A train ends after a shorter packet (only the last segment may be shorter), and a buffer already
// in the batch waits for the next sendmmsg: [A A B] [A X] then [X], each segment's ICRC for its place.
TEST_F(UdpTransportGso, GsoTrainEndsAfterAShorterPacketAndBeforeARepeatedBuffer) {
  const auto first = built_train(*t, peer, 3, 40);    // A A B
  const auto second = built_train(*t, peer, 2, 256);  // A A
  std::vector<OutPacket> out = out_packets(peer, first);
  for (const OutPacket& o : out_packets(peer, second)) out.push_back(o);
  out.push_back(out.back());  // the same buffer twice: two sends
  ASSERT_TRUE(t->send(out).ok());
  EXPECT_EQ(t->counters().gso_sends, 2u);
  EXPECT_EQ(t->counters().gso_segments, 5u);
  EXPECT_EQ(t->counters().tx_packets, 6u);
  const auto got = appliance_receive(app, 6);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].bytes.size(), 2 * first[0].size() + first[2].size());
  EXPECT_EQ(got[1].bytes.size(), 2 * second[0].size());
  EXPECT_EQ(got[2].bytes, second[1]);  // alone: stamped for ID 0 again
  icrc::UdpFields f = fields_toward(*t, app);
  EXPECT_TRUE(icrc::verify_udp(f, got[2].bytes));
  f.ip_id = 2;
  EXPECT_TRUE(icrc::verify_udp(f, std::span<const uint8_t>(got[0].bytes).subspan(2 * first[0].size())));
  f.ip_id = 1;  // the repeated buffer went in the next sendmmsg: its place in the train kept its stamp
  EXPECT_TRUE(icrc::verify_udp(f, std::span<const uint8_t>(got[1].bytes).subspan(second[0].size())));
}

// A packet marked alone (a resend) never rides in a train, and ends the train before it:
// [A A] [R] [R] [A A] for six packets of one length to one peer, R alone; each R is stamped for
// IP ID 0, so it passes where a path cuts trains (docs/deployment.md, "UDP trains").
TEST_F(UdpTransportGso, PacketsMarkedAloneLeaveAloneWithIpId0) {
  const auto train = built_train(*t, peer, 6, 256);
  std::vector<OutPacket> out = out_packets(peer, train);
  out[2].resend = out[3].resend = true;
  ASSERT_TRUE(t->send(out).ok());
  EXPECT_EQ(t->counters().gso_sends, 2u);
  EXPECT_EQ(t->counters().gso_segments, 4u);
  EXPECT_EQ(t->counters().tx_packets, 6u);
  const auto got = appliance_receive(app, 6);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].bytes.size(), 2 * train[0].size());
  EXPECT_EQ(got[1].bytes, train[2]);
  EXPECT_EQ(got[2].bytes, train[3]);
  EXPECT_EQ(got[3].bytes.size(), 2 * train[0].size());
  icrc::UdpFields f = fields_toward(*t, app);
  EXPECT_TRUE(icrc::verify_udp(f, got[1].bytes));
  EXPECT_TRUE(icrc::verify_udp(f, got[2].bytes));
  f.ip_id = 1;  // the last train's second segment: IP ID 1
  EXPECT_TRUE(icrc::verify_udp(f, std::span<const uint8_t>(got[3].bytes).subspan(train[0].size())));
}

// With a repair TOS, a resend leaves with it (an IP_TOS control message of its own), every other
// packet with the socket's TOS, trains included; the ICRC holds for both (it masks the TOS).
// Without GSO and with it: [A A R A A] to one peer, R a resend.
TEST(UdpTransport, ResendsLeaveWithTheRepairTosEverythingElseWithTheSocketsTos) {
  constexpr int kTos = 26 << 2 | 0x2, kRepairTos = 34 << 2 | 0x2;  // DSCP 26 / 34, ECT(0)
  for (const bool gso : {false, true}) {
    SCOPED_TRACE(gso ? "gso" : "no gso");
    UdpTransportOptions o;
    o.bind_ip = kLoopback;
    o.tos = kTos;
    o.repair_tos = kRepairTos;
    o.gso = gso;
    auto t = UdpTransport::open(o);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    if (gso && (*t)->counters().gso_refused != 0) {
      std::printf("note: no UDP GSO here (%s): the repair TOS was checked without trains only\n",
                  (*t)->describe().c_str());
      continue;
    }
    Appliance app;
    const int one = 1;
    ASSERT_EQ(setsockopt(app.fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)), 0);
    auto peer = (*t)->add_peer(peer_of(app));
    ASSERT_TRUE(peer.ok());
    const auto packets = built_train(**t, *peer, 5, 256);
    std::vector<OutPacket> out = out_packets(*peer, packets);
    out[2].resend = true;
    ASSERT_TRUE((*t)->send(out).ok());
    EXPECT_EQ((*t)->counters().gso_sends, gso ? 2u : 0u);
    const auto got = appliance_receive(app, 5);  // no UDP_GRO here: the kernel hands over datagrams
    ASSERT_EQ(got.size(), 5u);
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].bytes, packets[k]) << "datagram " << k;
      EXPECT_EQ(got[k].tos, k == 2 ? kRepairTos : kTos) << "datagram " << k;
    }
    icrc::UdpFields f = fields_toward(**t, app);
    EXPECT_TRUE(icrc::verify_udp(f, got[2].bytes)) << "the resend, IP ID 0";
  }
}

// A repair TOS outside 0..255 (-1: none) is refused, naming the option.
TEST(UdpTransport, RepairTosOutsideAByteIsRefused) {
  UdpTransportOptions o;
  o.bind_ip = kLoopback;
  for (const int bad : {-2, 256}) {
    o.repair_tos = bad;
    const auto t = UdpTransport::open(o);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("repair_tos must be -1..255"), std::string::npos) << t.status().to_string();
  }
}

// GSO is off unless asked for; asked for where the kernel refuses UDP_SEGMENT (the seam), every
// packet goes alone with the ICRC of IP ID 0, counted and said.
TEST(UdpTransport, WithoutGsoEveryPacketGoesAloneWithIpId0) {
  for (const bool asked : {false, true}) {
    SCOPED_TRACE(asked ? "asked, refused" : "not asked");
    UdpTransportOptions o;
    o.bind_ip = kLoopback;
    o.gso = asked;
    o.offload_setsockopt = refuse_option<UDP_SEGMENT>;
    auto t = UdpTransport::open(o);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ((*t)->counters().gso_refused, asked ? 1u : 0u);
    EXPECT_EQ((*t)->describe().find("no GSO: setsockopt(UDP_SEGMENT)") != std::string::npos, asked) << (*t)->describe();
    Appliance app;
    auto peer = (*t)->add_peer(peer_of(app));
    ASSERT_TRUE(peer.ok());
    const auto train = built_train(**t, *peer, 4, 256);
    ASSERT_TRUE(send_train(**t, *peer, train).ok());
    EXPECT_EQ((*t)->counters().gso_sends, 0u);
    EXPECT_EQ((*t)->counters().tx_packets, 4u);
    const auto got = appliance_receive(app, 4);
    ASSERT_EQ(got.size(), 4u);
    const icrc::UdpFields f = fields_toward(**t, app);
    for (const Got& g : got) EXPECT_TRUE(icrc::verify_udp(f, g.bytes));
  }
}

TEST(UdpTransport, DropReasonNamesMatchTheWireForStructuralReasons) {
  EXPECT_STREQ(drop_reason_name(DropReason::kBadLength), wire::parse_error_name(wire::ParseError::kBadLength));
  EXPECT_STREQ(drop_reason_name(DropReason::kBadIcrc), "bad_icrc");
  EXPECT_STREQ(drop_reason_name(DropReason::kChunkMismatch), "chunk_mismatch");
}

// ---- Multicast results ------------------------------------------------------------------------

using testing::joined_on_lo;
using testing::test_group;

// Sends from `a` to group:4791, ICRC stamped with the group as destination (as sumcastd does).
void send_to_group(const Appliance& a, uint32_t group, const wire::SumcastHeader& h,
                   uint32_t dest_qp = wire::kMulticastQpn) {
  Endpoint g;
  g.ip = group;
  g.udp_port = wire::kRoceUdpPort;
  const in_addr ifa{htonl(a.ip)};
  ASSERT_EQ(setsockopt(a.fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa)), 0);
  a.send_to(g, a.result(g, h, dest_qp, kQkey, std::vector<uint8_t>(16, 0x11)));
}

TEST(UdpTransport, MulticastResultsReachEveryJoinedWorkerOfTheJobAndNoOther) {
  Appliance app;
  const uint32_t g1 = test_group(0), g2 = test_group(1);
  // Two workers of job kJob on one host (one group, SO_REUSEADDR), one of another job.
  auto a = open_transport(), b = open_transport(), c = open_transport();
  ASSERT_TRUE(a && b && c);
  PeerSpec pa = peer_of(app);
  pa.group = g1;
  PeerSpec pb = pa;
  pb.rank = 2;
  PeerSpec pc = peer_of(app);
  pc.job_id = kJob + 1;
  pc.group = g2;
  ASSERT_TRUE(a->add_peer(pa).ok());
  auto added = b->add_peer(pb);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  ASSERT_TRUE(c->add_peer(pc).ok());
  EXPECT_NE(a->wait_fd(), -1);
  EXPECT_TRUE(joined_on_lo(g1));
  EXPECT_TRUE(joined_on_lo(g2));

  send_to_group(app, g1, result_header(wire::kRankMulticast));
  std::vector<std::vector<uint8_t>> pay;
  for (UdpTransport* t : {a.get(), b.get()}) {
    const auto got = receive_n(*t, 1, &pay);
    ASSERT_EQ(got.size(), 1u) << t->describe();
    EXPECT_EQ(got[0].hdr.rank, wire::kRankMulticast);
    EXPECT_EQ(t->counters().group_results, 1u);
    EXPECT_EQ(t->counters().results, 1u);
  }
  // Job kJob's frame on job kJob+1's group is not c's: counted, never handed on.
  send_to_group(app, g2, result_header(wire::kRankMulticast));
  EXPECT_TRUE(receive_n(*c, 1, &pay).empty());
  EXPECT_EQ(c->counters().drops[static_cast<size_t>(DropReason::kUnknownJob)], 1u);
  EXPECT_EQ(c->counters().results, 0u);
  // On the group, only frames addressed to the group: a rank's own frame or QPN is not.
  send_to_group(app, g1, result_header(1));
  send_to_group(app, g1, result_header(wire::kRankMulticast), a->local_endpoint().qpn);
  EXPECT_TRUE(receive_n(*a, 3, &pay).empty());
  EXPECT_EQ(a->counters().drops[static_cast<size_t>(DropReason::kBadRank)], 1u);
  EXPECT_EQ(a->counters().drops[static_cast<size_t>(DropReason::kBadDestQp)], 1u);
  // Unicast results still arrive on the worker's own socket.
  app.send_to(a->local_endpoint(), app.result(a->local_endpoint(), result_header(1), a->local_endpoint().qpn, kQkey,
                                              std::vector<uint8_t>(16, 0x22)));
  ASSERT_EQ(receive_n(*a, 4, &pay).size(), 1u);
  EXPECT_EQ(a->counters().results, 2u);
  EXPECT_EQ(a->counters().group_results, 1u);

  // Leaving: the memberships are gone at once; b still holds g1.
  a->leave_groups();
  a->leave_groups();  // idempotent
  EXPECT_TRUE(joined_on_lo(g1)) << "b still a member";
  b.reset();
  EXPECT_FALSE(joined_on_lo(g1));
  c.reset();  // the destructor leaves too
  EXPECT_FALSE(joined_on_lo(g2));
}

TEST(UdpTransport, AGroupOutside224Slash4IsRefusedAndNoPeerAdded) {
  Appliance app;
  auto t = open_transport();
  ASSERT_TRUE(t);
  PeerSpec p = peer_of(app);
  p.group = 0x0A000001;
  auto r = t->add_peer(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("224.0.0.0/4"), std::string::npos) << r.status().to_string();
  p.group = 0;
  auto ok = t->add_peer(p);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 0u) << "the refused peer took no index";
}

}  // namespace
}  // namespace sumcast::shim
