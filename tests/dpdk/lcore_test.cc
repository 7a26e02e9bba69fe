// The DPDK side in one process, on a loopback net_ring port (what is sent comes back as rx):
// DpdkTxSink keeps what the PMD refuses in a bounded backlog, sends it in order on later polls,
// counts what it frees and returns every mbuf; the port reads its own counters; the lcore loop drops
// multi-segment frames by name, dispatches frames to the core that owns their slot, runs jobs
// installed through LcoreJobSink, and sends aborts on removal.
#include "sumcast/dpdk/lcore.h"

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/dpdk/job_sink.h"
#include "sumcast/dpdk/neighbour_service.h"
#include "sumcast/dpdk/port.h"
#include "sumcast/dpdk/tx_sink.h"
#include "sumcast/engine/memory_port.h"
#include "sumcast/engine/testing.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::dpdk {
namespace {

using Clock = std::chrono::steady_clock;

bool g_eal_up = false;

// EAL and the loopback port, once per process. Lcore 1 and 2 run loops (2 shares CPU 0).
Port* test_port() {
  static Port* port = []() -> Port* {
    const std::string prefix = "sclcore" + std::to_string(getpid());
    std::vector<std::string> args = {"lcore_test", "--lcores",  "0@0,1@1,2@0",    "--no-huge",     "-m",
                                     "256",        "--no-pci",  "--no-telemetry", "--file-prefix", prefix,
                                     "--vdev",     "net_ring0", "--log-level",    "lib.eal:error"};
    static std::vector<char*> argv;
    static std::vector<std::string> storage = args;
    for (std::string& s : storage) argv.push_back(s.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) return nullptr;
    g_eal_up = true;
    config::AggConfig c;
    c.path = "lcore_test";
    c.port.device = "net_ring0";
    c.port.ipv4 = 0x0A000001;  // 10.0.0.1
    c.dataplane.mbufs = 4095;
    Result<std::unique_ptr<Port>> p = Port::open(c, 2);
    if (!p.ok()) {
      ADD_FAILURE() << p.status().to_string();
      return nullptr;
    }
    if (!(*p)->start().ok()) return nullptr;
    return p.value().release();
  }();
  return port;
}

// Closes the port and EAL at the end of the binary and removes EAL's runtime directory.
class EalEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!g_eal_up) return;
    delete test_port();
    const std::string dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

void drain_rx(const Port& port) {
  rte_mbuf* m[64];
  uint16_t n = 0;
  for (uint16_t q = 0; q < port.info().queues; ++q) {
    while ((n = rte_eth_rx_burst(port.info().port_id, q, m, 64)) > 0) rte_pktmbuf_free_bulk(m, n);
  }
}

rte_mbuf* mbuf_from(rte_mempool* pool, const std::vector<uint8_t>& bytes) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), bytes.data(), bytes.size());
  m->data_len = static_cast<uint16_t>(bytes.size());
  m->pkt_len = static_cast<uint32_t>(bytes.size());
  return m;
}

uint64_t drops(const LcoreContext& c, engine::DropReason r) {
  return c.engine->counters().drops[static_cast<size_t>(r)].load(std::memory_order_relaxed);
}

// Fills `buf` as frame number `i`: a Sumcast result frame when `result` (what the sink counts as
// results_unsent while unsent), else a frame of another kind; `len` bytes.
void fill_frame(uint8_t* buf, uint32_t i, uint32_t len, bool result) {
  std::memset(buf, 0, len);
  std::memcpy(buf, &i, sizeof(i));
  buf[12] = 0x08;  // IPv4
  buf[wire::kSumcastOffset + 1] = static_cast<uint8_t>(result ? wire::MsgType::kResult : wire::MsgType::kAbort);
}

// Submits frames first..first+n-1 (every third a result), lengths 100 + i % 4.
void submit_frames(DpdkTxSink& tx, uint32_t first, uint32_t n) {
  for (uint32_t i = first; i < first + n; ++i) {
    uint8_t* buf = tx.acquire();
    ASSERT_NE(buf, nullptr);
    fill_frame(buf, i, 100 + i % 4, i % 3 == 0);
    tx.submit(buf, 100 + i % 4);
  }
}

// Result frames among frames from..to-1 of submit_frames.
uint32_t results_among(uint64_t from, uint64_t to) {
  uint32_t n = 0;
  for (uint64_t i = from; i < to; ++i) n += i % 3 == 0 ? 1 : 0;
  return n;
}

// Reads what came back on queue 0 and checks it is frames `*next`, `*next + 1`, ... in order.
void expect_in_order(const Port& port, uint32_t* next) {
  rte_mbuf* m[32];
  uint16_t n = 0;
  while ((n = rte_eth_rx_burst(port.info().port_id, 0, m, 32)) > 0) {
    for (uint16_t k = 0; k < n; ++k, ++*next) {
      uint32_t v = 0;
      std::memcpy(&v, rte_pktmbuf_mtod(m[k], const uint8_t*), sizeof(v));
      EXPECT_EQ(v, *next);
      EXPECT_EQ(m[k]->data_len, 100 + *next % 4);
    }
    rte_pktmbuf_free_bulk(m, n);
  }
}

// A DpdkTxSink on queue 0 of the loopback port, emptied first; at the end every mbuf must be back
// in the pool (what looped back read and freed, the sink gone).
class SinkOnLoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = test_port();
    ASSERT_NE(port_, nullptr);
    drain_rx(*port_);
    pool_ = port_->tx_pool();
    avail_ = rte_mempool_avail_count(pool_);
    tx_ = std::make_unique<DpdkTxSink>(port_->info().port_id, 0, pool_, nullptr);
  }
  void TearDown() override {
    if (port_ == nullptr) return;
    tx_.reset();
    drain_rx(*port_);
    EXPECT_EQ(rte_mempool_avail_count(pool_), avail_) << "every mbuf went back to the pool";
  }

  Port* port_ = nullptr;
  rte_mempool* pool_ = nullptr;
  unsigned avail_ = 0;
  std::unique_ptr<DpdkTxSink> tx_;
};

// The loopback ring holds fewer frames than are sent, and nobody reads it meanwhile: what it
// refuses waits in the backlog, goes out in order once the ring has room again, and is counted
// as sent only then.
TEST_F(SinkOnLoopbackTest, RefusedFramesWaitInTheBacklogAndGoOutInOrderOnLaterPolls) {
  Port* port = port_;
  DpdkTxSink& tx = *tx_;
  constexpr uint32_t kFrames = 1100;
  submit_frames(tx, 0, kFrames);
  tx.flush();
  const uint64_t accepted = tx.sent();
  EXPECT_LT(accepted, kFrames) << "the ring should have been full";
  EXPECT_EQ(tx.backlog(), kFrames - accepted);
  EXPECT_EQ(tx.deferred(), kFrames - accepted);
  EXPECT_EQ(tx.refused(), 0u);
  EXPECT_EQ(tx.results_unsent(), results_among(accepted, kFrames));
  tx.poll();  // still full: nothing moves
  EXPECT_EQ(tx.sent(), accepted);
  uint32_t next = 0;
  expect_in_order(*port, &next);
  EXPECT_EQ(next, accepted);
  // A new frame queues behind the backlog, never ahead of it.
  submit_frames(tx, kFrames, 1);
  tx.flush();
  expect_in_order(*port, &next);
  EXPECT_EQ(next, kFrames + 1);
  EXPECT_EQ(tx.sent(), kFrames + 1);
  EXPECT_EQ(tx.backlog(), 0u);
  EXPECT_EQ(tx.results_unsent(), 0u);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i <= kFrames; ++i) bytes += 100 + i % 4;
  EXPECT_EQ(tx.sent_bytes(), bytes);
  // Acquired but never submitted: freed at flush and counted.
  ASSERT_NE(tx.acquire(), nullptr);
  ASSERT_NE(tx.acquire(), nullptr);
  tx.flush();
  EXPECT_EQ(tx.unsubmitted(), 2u);
  EXPECT_EQ(rte_mempool_avail_count(pool_), avail_) << "every mbuf went back to the pool";
}

// More than the ring and the backlog together: the surplus is freed and counted as refused (the
// results among it as results that were never sent), and so is the backlog when the core stops.
TEST_F(SinkOnLoopbackTest, FramesBeyondAFullBacklogAreFreedAndCounted) {
  Port* port = port_;
  DpdkTxSink& tx = *tx_;
  const uint32_t frames = 1100 + DpdkTxSink::kBacklog;
  submit_frames(tx, 0, frames);
  tx.flush();
  const uint64_t accepted = tx.sent();
  ASSERT_LT(accepted + DpdkTxSink::kBacklog, frames);
  EXPECT_EQ(tx.backlog(), DpdkTxSink::kBacklog);
  EXPECT_EQ(tx.refused(), frames - accepted - DpdkTxSink::kBacklog);
  const uint32_t results = results_among(accepted, frames);
  EXPECT_EQ(tx.results_unsent(), results) << "waiting or freed, they were not sent";
  tx.drop_backlog();
  EXPECT_EQ(tx.backlog(), 0u);
  EXPECT_EQ(tx.refused(), frames - accepted);
  EXPECT_EQ(tx.results_unsent(), results);
  uint32_t next = 0;
  expect_in_order(*port, &next);
  EXPECT_EQ(next, accepted);
  EXPECT_EQ(rte_mempool_avail_count(pool_), avail_) << "every mbuf went back to the pool";
}

// The port's own counters: rte_eth_stats by name in a fixed order, kernel_ring_drops (no packet
// sockets on net_ring: 0), and the extended stats on request; what the sink sent shows there.
TEST(PortStatsTest, PortCountersFollowTheFramesAndExtendedStatsComeOnRequest) {
  Port* port = test_port();
  ASSERT_NE(port, nullptr);
  drain_rx(*port);
  const auto get = [](const std::vector<PortStat>& rows, const std::string& name) -> int64_t {
    for (const PortStat& r : rows) {
      if (r.name == name) return static_cast<int64_t>(r.value);
    }
    ADD_FAILURE() << "no port counter " << name;
    return -1;
  };
  const std::vector<PortStat> before = port->stats(false);
  const std::vector<std::string> names = {"ipackets", "opackets", "ibytes",    "obytes",           "imissed",
                                          "ierrors",  "oerrors",  "rx_nombuf", "kernel_ring_drops"};
  ASSERT_EQ(before.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(before[i].name, names[i]);
  EXPECT_EQ(port->ring_sockets(), 0u);
  EXPECT_EQ(get(before, "kernel_ring_drops"), 0);
  DpdkTxSink tx(port->info().port_id, 0, port->tx_pool(), nullptr);
  submit_frames(tx, 0, 10);
  tx.flush();
  ASSERT_EQ(tx.sent(), 10u);
  drain_rx(*port);
  const std::vector<PortStat> after = port->stats(true);
  EXPECT_EQ(get(after, "opackets") - get(before, "opackets"), 10);
  EXPECT_EQ(get(after, "ipackets") - get(before, "ipackets"), 10);
  EXPECT_EQ(get(after, "xstat_tx_good_packets"), get(after, "opackets")) << "ethdev's generic xstats";
  bool only_names = true;
  for (const PortStat& r : after) {
    only_names =
        only_names && r.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
                          std::string::npos;
  }
  EXPECT_TRUE(only_names) << "names are valid metric and telemetry keys";
}

// nic_offload's plan chooses TX IPv4 checksum offload when the port offers it; the sink then
// flags IPv4 frames for the NIC and zeroes their checksum field, and leaves other frames alone.
TEST(DpdkTxSinkTest, Ipv4ChecksumOffloadFlagsIpv4FramesAndZeroesTheirChecksum) {
  Port* port = test_port();
  ASSERT_NE(port, nullptr);
  drain_rx(*port);
  wire::Addressing a;
  a.src_ip = 0x0A000001;
  a.dst_ip = 0x0A000002;
  std::vector<uint8_t> ip_frame(wire::frame_len(8));
  wire::write_frame_headers(ip_frame.data(), a, wire::SumcastHeader{}, 8);
  const uint16_t sw_cksum =
      static_cast<uint16_t>((ip_frame[wire::kIpOffset + 10] << 8) | ip_frame[wire::kIpOffset + 11]);
  ASSERT_NE(sw_cksum, 0);
  std::vector<uint8_t> arp_frame(60, 0);
  arp_frame[12] = 0x08;
  arp_frame[13] = 0x06;
  arp_frame[wire::kIpOffset + 10] = 0xAB;  // would be an IPv4 checksum, were it IPv4
  for (const bool offload : {true, false}) {
    DpdkTxSink tx(port->info().port_id, 0, port->tx_pool(), nullptr);
    tx.set_ipv4_checksum_offload(offload);
    for (const auto* f : {&ip_frame, &arp_frame}) {
      uint8_t* buf = tx.acquire();
      ASSERT_NE(buf, nullptr);
      std::memcpy(buf, f->data(), f->size());
      tx.submit(buf, static_cast<uint32_t>(f->size()));
    }
    tx.flush();
    ASSERT_EQ(tx.sent(), 2u);
    rte_mbuf* m[4];
    ASSERT_EQ(rte_eth_rx_burst(port->info().port_id, 0, m, 4), 2);  // net_ring: the same mbufs come back
    const uint8_t* ip = rte_pktmbuf_mtod(m[0], const uint8_t*) + wire::kIpOffset;
    if (offload) {
      EXPECT_EQ(m[0]->ol_flags & (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM),
                RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM);
      EXPECT_EQ(m[0]->l2_len, 14u);
      EXPECT_EQ(m[0]->l3_len, 20u);
      EXPECT_EQ(ip[10], 0);
      EXPECT_EQ(ip[11], 0);
    } else {
      EXPECT_EQ(m[0]->ol_flags & RTE_MBUF_F_TX_IP_CKSUM, 0u);
      EXPECT_EQ((ip[10] << 8) | ip[11], sw_cksum) << "software checksum kept";
    }
    EXPECT_EQ(m[1]->ol_flags & RTE_MBUF_F_TX_IP_CKSUM, 0u) << "ARP is not IPv4";
    EXPECT_EQ(rte_pktmbuf_mtod(m[1], const uint8_t*)[wire::kIpOffset + 10], 0xAB);
    rte_pktmbuf_free_bulk(m, 2);
  }
}

// net_ring has no rte_flow and no checksum offload: the probe falls back to RSS + software
// dispatch for 2 cores, says why, and keeps checksums in software.
TEST(PortOffloadTest, PortWithoutRteFlowFallsBackToSoftwareDispatch) {
  Port* port = test_port();
  ASSERT_NE(port, nullptr);
  const PortInfo& info = port->info();
  EXPECT_EQ(info.caps.steering, nic_offload::FlowSupport::kRefused);
  EXPECT_EQ(info.plan.mode, nic_offload::SteeringMode::kRssSoftwareDispatch);
  EXPECT_TRUE(info.software_dispatch);
  EXPECT_EQ(info.software_dispatch, info.plan.software_dispatch);
  EXPECT_FALSE(info.plan.tx_ipv4_cksum);
  EXPECT_EQ(info.flow_rules, 0u);
  EXPECT_EQ(port->xdp(), nullptr);
  EXPECT_NE(info.plan.reason.find("rte_flow_validate refused"), std::string::npos) << info.plan.reason;
}

// What the lcore does after a poll, as "poll", "yield" or the sleep in us ("sleep 4").
std::string step_of(IdleBackoff& b, bool worked, uint64_t now_ns) {
  const IdleStep step = b.after_poll(worked, now_ns);
  switch (step.kind) {
    case IdleStep::Kind::kPoll:
      return step.sleep_us == 0 ? "poll" : "poll with a sleep";
    case IdleStep::Kind::kYield:
      return step.sleep_us == 0 ? "yield" : "yield with a sleep";
    case IdleStep::Kind::kSleep:
      return "sleep " + std::to_string(step.sleep_us);
  }
  return "unknown";
}

// dataplane.idle_poll = "adaptive": full speed while polls find work; every empty poll of the
// first idle_after_us of an idle run yields the CPU; then sleeps of 1, 2, 4, ... us up to the
// limit; any work returns to full speed at once (no yield) and starts a new idle run.
TEST(IdleBackoffTest, YieldsThroughAGapThenSleepsDoublingToTheLimit) {
  constexpr uint64_t kIdleNsBeforeSleep = 500'000;
  IdleBackoff b(10, 500);
  uint64_t t = 1'000'000;
  EXPECT_EQ(step_of(b, true, t), "poll");
  EXPECT_EQ(step_of(b, true, t += 100), "poll");
  EXPECT_EQ(step_of(b, false, t += 100), "yield");  // the idle run starts here
  const uint64_t start = t;
  for (; t < start + kIdleNsBeforeSleep - 100; t += 100) ASSERT_EQ(step_of(b, false, t), "yield") << t - start;
  t = start + kIdleNsBeforeSleep;
  EXPECT_EQ(step_of(b, false, t), "sleep 1");
  EXPECT_EQ(step_of(b, false, t += 1000), "sleep 2");
  EXPECT_EQ(step_of(b, false, t += 2000), "sleep 4");
  EXPECT_EQ(step_of(b, false, t += 4000), "sleep 8");
  EXPECT_EQ(step_of(b, false, t += 8000), "sleep 10");
  EXPECT_EQ(step_of(b, false, t += 10000), "sleep 10");
  EXPECT_EQ(step_of(b, true, t += 10000), "poll");  // work: full speed again
  EXPECT_EQ(step_of(b, false, t += 100), "yield");  // a new idle run, not yet long enough
  EXPECT_EQ(step_of(b, false, t += kIdleNsBeforeSleep / 2), "yield");
  EXPECT_EQ(step_of(b, false, t += kIdleNsBeforeSleep), "sleep 1");  // the doubling restarted
}

// dataplane.idle_after_us = 20: the sleeps start 20 us into an idle run, not 500; 0 sleeps from
// the second empty poll on (the first one starts the run and yields).
TEST(IdleBackoffTest, IdleAfterSetsWhenTheSleepsStart) {
  IdleBackoff b(100, 20);
  uint64_t t = 1'000'000;
  EXPECT_EQ(step_of(b, false, t), "yield");  // the idle run starts here
  EXPECT_EQ(step_of(b, false, t + 19'999), "yield");
  EXPECT_EQ(step_of(b, false, t + 20'000), "sleep 1");
  EXPECT_EQ(step_of(b, false, t + 21'000), "sleep 2");
  IdleBackoff at_once(100, 0);
  EXPECT_EQ(step_of(at_once, true, t), "poll");
  EXPECT_EQ(step_of(at_once, false, t), "yield");
  EXPECT_EQ(step_of(at_once, false, t), "sleep 1");
  EXPECT_EQ(step_of(at_once, true, t), "poll");  // work: full speed again
  EXPECT_EQ(step_of(at_once, false, t), "yield");
}

// A limit of 0 us is taken as 1 us: an idle core that sleeps never sleeps for nothing.
TEST(IdleBackoffTest, AZeroSleepLimitSleepsOneMicrosecond) {
  IdleBackoff b(0, 0);
  EXPECT_EQ(step_of(b, false, 0), "yield");
  EXPECT_EQ(step_of(b, false, 0), "sleep 1");
  EXPECT_EQ(step_of(b, false, 0), "sleep 1");
}

TEST(DpdkTxSinkTest, SubmitOfAForeignBufferSendsNothingAndIsCounted) {
  Port* port = test_port();
  ASSERT_NE(port, nullptr);
  drain_rx(*port);
  DpdkTxSink tx(port->info().port_id, 0, port->tx_pool(), nullptr);
  uint8_t foreign[64] = {};
  tx.submit(foreign, sizeof(foreign));
  tx.flush();
  EXPECT_EQ(tx.sent(), 0u);
  EXPECT_EQ(tx.unknown_buffers(), 1u) << "a foreign buffer is counted, not ignored";
  rte_mbuf* m[4];
  EXPECT_EQ(rte_eth_rx_burst(port->info().port_id, 0, m, 4), 0);
}

// dataplane.tx_coalesce: a batch of fewer frames than the coalesce count stays in the sink at
// flush() (nothing reaches the port) until it fills or send_held(); frames still go out in order,
// every one counted once; buffers acquired and not submitted are freed at flush() either way.
TEST_F(SinkOnLoopbackTest, CoalescingHoldsAPartialBatchUntilItFillsOrIsSent) {
  Port* port = port_;
  DpdkTxSink& tx = *tx_;
  tx.set_coalesce(16);
  EXPECT_EQ(tx.coalesce(), 16u);
  uint32_t next = 0;
  submit_frames(tx, 0, 5);
  ASSERT_NE(tx.acquire(), nullptr);  // acquired, never submitted
  tx.flush();
  EXPECT_EQ(tx.held(), 5u);
  EXPECT_EQ(tx.sent(), 0u);
  EXPECT_EQ(tx.unsubmitted(), 1u);
  expect_in_order(*port, &next);
  EXPECT_EQ(next, 0u) << "a held batch reached the port";
  submit_frames(tx, 5, 11);  // 16: the batch is full enough
  tx.flush();
  EXPECT_EQ(tx.held(), 0u);
  EXPECT_EQ(tx.sent(), 16u);
  expect_in_order(*port, &next);
  EXPECT_EQ(next, 16u);
  submit_frames(tx, 16, 3);
  tx.flush();
  EXPECT_EQ(tx.held(), 3u);
  tx.send_held();
  EXPECT_EQ(tx.held(), 0u);
  EXPECT_EQ(tx.sent(), 19u);
  expect_in_order(*port, &next);
  EXPECT_EQ(next, 19u);
  tx.send_held();  // nothing held: nothing sent
  EXPECT_EQ(tx.sent(), 19u);
  // Coalescing off and above a batch: flush() sends whatever there is; a full batch goes out on
  // submit whatever the setting.
  tx.set_coalesce(0);
  submit_frames(tx, 19, 1);
  tx.flush();
  EXPECT_EQ(tx.sent(), 20u);
  tx.set_coalesce(1000);
  EXPECT_EQ(tx.coalesce(), DpdkTxSink::kBatch);
  submit_frames(tx, 20, DpdkTxSink::kBatch);
  EXPECT_EQ(tx.sent(), 20u + DpdkTxSink::kBatch);
  expect_in_order(*port, &next);
  EXPECT_EQ(next, 20u + DpdkTxSink::kBatch);
}

// When the lcore sends what its sink holds: after any poll that did not fill its burst, and
// after TxHoldPolicy::kMaxHeldBursts full ones in a row.
TEST(TxHoldPolicyTest, HeldFramesGoAfterAShortPollOrFourFullBursts) {
  static_assert(TxHoldPolicy::kMaxHeldBursts == 4);
  TxHoldPolicy p;
  EXPECT_TRUE(p.send_after(false));
  EXPECT_FALSE(p.send_after(true));
  EXPECT_FALSE(p.send_after(true));
  EXPECT_FALSE(p.send_after(true));
  EXPECT_TRUE(p.send_after(true));   // the fourth full burst
  EXPECT_FALSE(p.send_after(true));  // the count starts again
  EXPECT_TRUE(p.send_after(false));  // a short poll sends and restarts it
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(p.send_after(true)) << i;
  EXPECT_TRUE(p.send_after(true));
}

// Two engine cores, each with its loopback queue pair: the test injects on queue 0, so core 0
// receives every contribution and hands core 1 its slots; each core's results come back to
// itself (and are dropped there as not for us).
class LcoreLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = test_port();
    ASSERT_NE(port_, nullptr);
    drain_rx(*port_);
    rte_spinlock_init(&tx_lock_);
    std::vector<unsigned> lcores;
    unsigned l = 0;
    RTE_LCORE_FOREACH_WORKER(l) { lcores.push_back(l); }
    ASSERT_GE(lcores.size(), 2u);
    const PortInfo& pi = port_->info();
    ASSERT_EQ(pi.queues, 2);
    ASSERT_TRUE(pi.software_dispatch);
    for (uint32_t i = 0; i < 2; ++i) {
      auto c = std::make_unique<LcoreContext>();
      c->lcore_id = lcores[i];
      c->core_index = i;
      c->core_count = 2;
      c->port_id = pi.port_id;
      c->rx_queue = static_cast<int>(i);
      c->tx_queue = static_cast<uint16_t>(i);
      c->burst_size = 32;
      c->software_dispatch = true;
      c->stop = &stop_;
      const std::string idx = std::to_string(i) + "_" + std::to_string(run_++);
      c->dispatch_ring = rte_ring_create(("td" + idx).c_str(), 1024, 0, RING_F_SC_DEQ);
      c->control_ring = rte_ring_create(("tc" + idx).c_str(), kControlRingSize, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      c->ack_ring = rte_ring_create(("ta" + idx).c_str(), kControlRingSize, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      ASSERT_NE(c->dispatch_ring, nullptr);
      ASSERT_NE(c->control_ring, nullptr);
      ASSERT_NE(c->ack_ring, nullptr);
      engine::EngineOptions o;
      o.core_index = i;
      o.core_count = 2;
      std::memcpy(o.local_mac, pi.mac, 6);
      o.local_ip = pi.ipv4;
      o.qpn = kCoreQpnBase + i;
      c->engine = std::make_unique<engine::Engine>(o);
      c->tx = std::make_unique<DpdkTxSink>(pi.port_id, c->tx_queue, port_->tx_pool(), i == 0 ? &tx_lock_ : nullptr);
      // As sumcastd's default: each core's few results are held at the end of its burst and must
      // go out when its next poll comes back short (the tests wait for them to loop back).
      c->tx->set_coalesce(config::DataplaneConfig{}.tx_coalesce);
      cores_.push_back(std::move(c));
    }
    std::vector<LcoreContext*> all;
    for (auto& c : cores_) all.push_back(c.get());
    for (auto& c : cores_) c->peers = all;
    sink_ = std::make_unique<LcoreJobSink>(all, 2000);
    for (auto& c : cores_) ASSERT_EQ(launch_lcore(*c), 0);
    launched_ = true;
  }

  void TearDown() override {
    stop_ = true;
    if (launched_) {
      for (auto& c : cores_) {
        rte_eal_wait_lcore(c->lcore_id);
        // The loop's release store, read here, orders its last writes before the teardown (DPDK's
        // join is invisible to ThreadSanitizer).
        EXPECT_TRUE(c->finished.load(std::memory_order_acquire));
      }
    }
    sink_.reset();
    for (auto& c : cores_) {
      void* m = nullptr;
      while (rte_ring_dequeue(c->dispatch_ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      c->tx.reset();
      c->engine.reset();
      rte_ring_free(c->dispatch_ring);
      rte_ring_free(c->control_ring);
      rte_ring_free(c->ack_ring);
    }
    if (port_ != nullptr) drain_rx(*port_);
  }

  // Sends frames into queue 0 (they loop back to core 0's rx queue; core 0 shares it, locked).
  void inject(std::vector<rte_mbuf*> frames) {
    rte_spinlock_lock(&tx_lock_);
    const uint16_t sent =
        rte_eth_tx_burst(port_->info().port_id, 0, frames.data(), static_cast<uint16_t>(frames.size()));
    rte_spinlock_unlock(&tx_lock_);
    ASSERT_EQ(sent, frames.size());
  }

  // A job of `ranks` members at 10.0.0.2, 10.0.0.3, ... (not the port's address: results that loop
  // back are dropped), 256-byte payloads, installed on both cores.
  engine::JobSpec install_job(uint32_t id, uint32_t qkey, uint16_t slots, uint32_t ranks) {
    engine::JobSpec job;
    job.job_id = id;
    job.qkey = qkey;
    job.slot_count = slots;
    job.max_payload_bytes = 256;
    for (uint32_t r = 0; r < ranks; ++r) {
      engine::Member m;
      const uint8_t member_mac[6] = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(1 + r)};
      std::memcpy(m.mac, member_mac, 6);
      m.ip = 0x0A000002 + r;
      m.qpn = 0x1000;
      job.members.push_back(m);
    }
    EXPECT_TRUE(sink_->install(job).ok());
    return job;
  }

  // Polls `done` until it holds or 10 s pass.
  template <typename F>
  bool eventually(F done) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  static inline int run_ = 0;
  Port* port_ = nullptr;
  rte_spinlock_t tx_lock_;
  std::atomic<bool> stop_{false};
  bool launched_ = false;
  std::vector<std::unique_ptr<LcoreContext>> cores_;
  std::unique_ptr<LcoreJobSink> sink_;
};

TEST_F(LcoreLoopTest, DispatchesSlotsToOwnersDropsMultiSegmentAndRunsJobs) {
  const PortInfo& pi = port_->info();
  const engine::JobSpec job = install_job(42, 0x77, 8, 1);  // world size 1: every contribution completes its slot

  std::vector<rte_mbuf*> frames;
  const std::vector<double> values(16, 3.0);
  const std::vector<uint8_t> payload = engine::encode_elements(wire::Dtype::kFp32, values);
  for (uint16_t slot = 0; slot < 8; ++slot) {
    engine::EngineOptions appliance = cores_[slot % 2]->engine->options();
    engine::ContributionFields f;
    f.slot = slot;
    frames.push_back(mbuf_from(port_->tx_pool(), engine::make_contribution_frame(job, appliance, f, payload)));
  }
  // A valid contribution split over two segments: dropped as multi_segment, never parsed.
  engine::ContributionFields f;
  f.slot = 0;
  f.round = 1;
  std::vector<uint8_t> whole = engine::make_contribution_frame(job, cores_[0]->engine->options(), f, payload);
  std::vector<uint8_t> head(whole.begin(), whole.begin() + 40);
  std::vector<uint8_t> tail(whole.begin() + 40, whole.end());
  rte_mbuf* seg0 = mbuf_from(port_->tx_pool(), head);
  rte_mbuf* seg1 = mbuf_from(port_->tx_pool(), tail);
  ASSERT_EQ(rte_pktmbuf_chain(seg0, seg1), 0);
  frames.push_back(seg0);
  inject(frames);

  LcoreContext& c0 = *cores_[0];
  LcoreContext& c1 = *cores_[1];
  auto completed = [&] {
    return c0.engine->counters().slots_completed.load() + c1.engine->counters().slots_completed.load();
  };
  ASSERT_TRUE(eventually([&] {
    return completed() == 8 && drops(c0, engine::DropReason::kMultiSegment) == 1 &&
           c0.engine->counters().rx_packets.load() == 4 + 4 &&  // its own 4, then its 4 results looped back
           c1.engine->counters().rx_packets.load() == 4 + 4;
  })) << "completed "
      << completed();
  EXPECT_EQ(c0.counters.dispatched_out.load(), 4u);
  EXPECT_EQ(c1.counters.dispatched_in.load(), 4u);
  EXPECT_EQ(c0.engine->counters().slots_completed.load(), 4u);
  EXPECT_EQ(c1.engine->counters().slots_completed.load(), 4u);
  EXPECT_EQ(drops(c0, engine::DropReason::kNotForUs) + drops(c0, engine::DropReason::kNotContribution), 4u);
  EXPECT_EQ(drops(c1, engine::DropReason::kNotForUs) + drops(c1, engine::DropReason::kNotContribution), 4u);
  EXPECT_EQ(drops(c1, engine::DropReason::kMultiSegment), 0u);
  EXPECT_EQ(drops(c0, engine::DropReason::kWrongCore) + drops(c1, engine::DropReason::kWrongCore), 0u);
  EXPECT_EQ(c0.engine->counters().results_sent.load() + c1.engine->counters().results_sent.load(), 8u);
  EXPECT_EQ(c0.counters.dispatch_full.load(), 0u);
  EXPECT_EQ(sink_->progress(42), 8u);
  EXPECT_EQ(sink_->waiting_rounds(42), 0u);

  // Removal with a reason: each core sends its abort to the member.
  sink_->remove(42, wire::AbortReason::kAdmin);
  EXPECT_EQ(c0.engine->counters().aborts_sent.load(), 1u);
  EXPECT_EQ(c1.engine->counters().aborts_sent.load(), 1u);
  EXPECT_EQ(sink_->progress(42), 0u);
  (void)pi;
}

TEST_F(LcoreLoopTest, RoundsWaitingForContributionsAreReported) {
  const engine::JobSpec job = install_job(43, 0x78, 8, 2);  // world size 2; only rank 0 contributes
  EXPECT_EQ(sink_->waiting_rounds(43), 0u);
  const std::vector<uint8_t> payload = engine::encode_elements(wire::Dtype::kFp32, std::vector<double>(16, 1.0));
  std::vector<rte_mbuf*> frames;
  for (uint16_t slot = 0; slot < 3; ++slot) {
    engine::ContributionFields f;
    f.slot = slot;
    frames.push_back(mbuf_from(port_->tx_pool(),
                               engine::make_contribution_frame(job, cores_[slot % 2]->engine->options(), f, payload)));
  }
  inject(frames);
  ASSERT_TRUE(eventually([&] { return sink_->waiting_rounds(43) == 3; })) << sink_->waiting_rounds(43);
  EXPECT_EQ(sink_->progress(43), 0u);
  sink_->remove(43, wire::AbortReason::kNone);
  EXPECT_EQ(sink_->waiting_rounds(43), 0u);
}

// Five full rx bursts in a row on core 0, each with three contributions whose results the sink
// holds (fewer than the 16 dataplane.tx_coalesce waits for): the held results go out after the
// fourth full burst, which tx_hold_capped counts once; the fifth burst's go after the short poll
// that follows, uncounted.
TEST_F(LcoreLoopTest, HeldResultsGoOutAfterFourFullBurstsAndThatIsCounted) {
  const engine::JobSpec job = install_job(44, 0x79, 32, 1);  // world size 1: every contribution completes its slot
  const std::vector<uint8_t> payload = engine::encode_elements(wire::Dtype::kFp32, std::vector<double>(16, 2.0));
  constexpr uint32_t kBursts = 5, kPerBurst = 3;
  std::vector<rte_mbuf*> frames;
  for (uint32_t b = 0; b < kBursts; ++b) {
    for (uint32_t k = 0; k < 32; ++k) {
      if (k < kPerBurst) {
        engine::ContributionFields f;
        f.slot = static_cast<uint16_t>(2 * (b * kPerBurst + k));  // even: core 0's
        frames.push_back(mbuf_from(port_->tx_pool(),
                                   engine::make_contribution_frame(job, cores_[0]->engine->options(), f, payload)));
      } else {
        frames.push_back(mbuf_from(port_->tx_pool(), std::vector<uint8_t>(60, 0)));  // dropped, no result
      }
    }
  }
  inject(frames);  // one enqueue: core 0's next poll finds all 160 frames in its rx queue
  LcoreContext& c0 = *cores_[0];
  LcoreContext& c1 = *cores_[1];
  const uint64_t results = kBursts * kPerBurst;
  ASSERT_TRUE(eventually([&] {
    return c0.engine->counters().slots_completed.load() == results &&
           c0.engine->counters().rx_packets.load() == frames.size() + results;  // the results loop back
  })) << "completed "
      << c0.engine->counters().slots_completed.load();
  EXPECT_EQ(c0.counters.tx_hold_capped.load(), 1u);
  EXPECT_EQ(c1.counters.tx_hold_capped.load(), 0u);
  EXPECT_EQ(c0.counters.dispatched_out.load(), 0u);
  sink_->remove(44, wire::AbortReason::kNone);
}

// The neighbour service as sumcastd runs it: its thread announces the port's address and asks for
// a member's gateway (frames core 0 sends from its ring), an ARP reply handed over as the lcores do
// (observe()) publishes the gateway's MAC to the table the engines read, and the change is logged.
TEST(NeighbourServiceTest, RequestsGoOutThroughCoreZerosSinkAndAReplyPublishesTheMac) {
  ASSERT_NE(test_port(), nullptr);
  neighbour::ResolverOptions o;
  const uint8_t me[6] = {0x02, 0, 0, 0, 0, 0x01}, gw[6] = {0x02, 0x47, 0x57, 0, 0, 0xFE};
  std::memcpy(o.local_mac, me, 6);
  o.local_ip = 0x0A000001;  // 10.0.0.1/24, default via 10.0.0.254
  o.routes = neighbour::RoutingTable(o.local_ip, 24, 0x0A0000FE, {});
  std::mutex mu;
  std::vector<std::string> lines;
  NeighbourService svc(o, 0, [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(l);
  });
  ASSERT_TRUE(svc.start().ok());
  const neighbour::Resolution r = svc.resolve(0x0A4D000A);  // 10.77.0.10, behind the gateway
  ASSERT_EQ(r.state, neighbour::Resolution::State::kPending);
  engine::MemoryTxSink tx;
  std::vector<uint32_t> targets;  // ARP target addresses of what core 0 sent
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (targets.size() < 2 && Clock::now() < deadline) {
    tx.clear();
    svc.send_queued(tx);
    for (const auto& f : tx.frames()) {
      ASSERT_EQ(f.len, 60u);
      EXPECT_EQ(f.data[12], 0x08);
      EXPECT_EQ(f.data[13], 0x06);
      targets.push_back(static_cast<uint32_t>(f.data[38]) << 24 | static_cast<uint32_t>(f.data[39]) << 16 |
                        static_cast<uint32_t>(f.data[40]) << 8 | f.data[41]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling the ring, bounded by the deadline
  }
  ASSERT_GE(targets.size(), 2u);
  EXPECT_EQ(targets[0], 0x0A000001u);  // gratuitous ARP for our own address first
  EXPECT_EQ(targets[1], 0x0A0000FEu);  // then the gateway
  // The gateway's reply, as an lcore hands it over.
  uint8_t reply[42] = {};
  std::memcpy(reply, me, 6);
  std::memcpy(reply + 6, gw, 6);
  reply[12] = 0x08, reply[13] = 0x06, reply[15] = 1, reply[16] = 0x08, reply[18] = 6, reply[19] = 4, reply[21] = 2;
  std::memcpy(reply + 22, gw, 6);
  reply[28] = 10, reply[31] = 0xFE;
  std::memcpy(reply + 32, me, 6);
  reply[38] = 10, reply[41] = 1;
  NeighbourService::observe(reply, sizeof reply, &svc);
  uint8_t mac[6] = {};
  while (!svc.table()->mac(r.next_hop, mac) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(svc.table()->mac(r.next_hop, mac));
  EXPECT_EQ(std::memcmp(mac, gw, 6), 0);
  EXPECT_EQ(svc.status(0x0A4D000A).state, neighbour::Resolution::State::kReady);
  svc.stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "neighbour 10.0.0.254 is at 02:47:57:00:00:fe");
  EXPECT_EQ(svc.observe_overflows(), 0u);
}

}  // namespace
}  // namespace sumcast::dpdk
