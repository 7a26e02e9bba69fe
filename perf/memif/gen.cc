// sumcast-memif-gen: a DPDK load generator for the memif comparison (perf/memif/run): sends
// pre-built contribution frames of n emulated workers on one port (a net_memif client), receives
// what comes back and counts both, for a fixed time.
//
//   sumcast-memif-gen [EAL args] -- --mode sumcast|echo|sink [options]
//   --mode sumcast   register n ranks of a job with the appliance (--control, --token-file), build
//                    their frames from the grant; what comes back are the results (n per slot round)
//   --mode echo      the same frames for a made-up job, for a peer that only forwards them back
//                    (dpdk-testpmd --forward-mode=io --port-topology=loop), or that only takes
//                    them (--forward-mode=rxonly: then tx_pps is the generator's sending ceiling)
//   --mode sink      send nothing, only receive and count (a peer that only sends,
//                    --forward-mode=txonly: rx_pps is the generator's receiving ceiling)
//   --ranks N (8)  --payload B (1024)  --dtype fp32|bf16|... (fp32)  --rounds R (2, even)
//   --seconds S (3) measured after --warmup S (1)  --control HOST:PORT (127.0.0.1:4790)
//   --token-file F  --json
//   --multicast     (--mode sumcast) ask for results by multicast (the appliance needs
//                   dataplane.multicast = true): one result frame per slot round instead of one per
//                   rank; "summed_pps" counts the contributions the results answer either way
//   --hold          after printing the result, stop polling and wait for EOF on stdin before
//                   closing the port: the peer can then be stopped while the link is still up
//                   (DPDK 22.11's memif PMD may crash a peer whose client disconnects while its
//                   lcore polls)
//
// Frames: rounds x slots x ranks, in the order the workers' streams merge (round, slot, rank),
// each in its own mbuf held with an extra reference, so a transmit only takes a reference (the
// memif PMD copies the bytes into its ring and drops the reference; a zero-copy client port,
// vdev zero-copy=yes with EAL --single-file-segments, hands the peer the mbuf's own buffer and
// drops the reference once the peer has read it: a frame still referenced is not sent again
// until then, and costs the generator no copy either way). When the generator wraps
// around, each frame's round moves on by R before it is sent again, and its ICRC is updated by
// the CRC of the change (tables built at start: the ICRC is affine in the bytes), so the
// appliance sees rounds advance for ever at the cost of a few loads per frame.
//
// Output: a table, or with --json one line {"mode","ranks","payload","seconds","tx_pps","rx_pps",
// "tx_gbps_payload","rx_gbps_payload","tx_busy_retries","tx_wait_share","multicast","summed_pps"}
// (summed_pps, --mode sumcast only: contributions per second the results answer, rx_pps times the
// ranks with --multicast, else rx_pps; tx_busy_retries and tx_wait_share are over the
// measured time: loops in which the port did not take all it was offered, and their share of all
// loops: a generator that waits on its peer is not what limits the rate). Exit 0, or 1 on any failure.
#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/endian.h"
#include "sumcast/engine/engine.h"
#include "sumcast/engine/testing.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/token_file.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace {

using sumcast::engine::ContributionFields;
using sumcast::engine::EngineOptions;
using sumcast::engine::JobSpec;
using sumcast::engine::Member;
using sumcast::wire::Dtype;

constexpr uint16_t kBurst = 32;
constexpr uint16_t kRxBurst = 64;
constexpr uint32_t kMemberIpBase = 0x0A4E000A;  // 10.78.0.10 + rank

struct Options {
  std::string mode = "sumcast";
  uint32_t ranks = 8;
  uint32_t payload = 1024;
  Dtype dtype = Dtype::kFp32;
  uint32_t rounds = 2;
  double seconds = 3;
  double warmup = 1;
  std::string control_host = "127.0.0.1";
  uint16_t control_port = 4790;
  std::string token_file;
  bool json = false;
  bool hold = false;
  bool multicast = false;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "sumcast-memif-gen: %s\n", what.c_str());
  std::exit(1);
}

// The generator's own options, those after "--" (argv[0] is the program's name). Returns -1 to go
// on, else the exit status.
int parse(int argc, char** argv, Options* o) {
  CLI::App app{
      "A DPDK load generator for the memif comparison (perf/memif/run):\n"
      "  sumcast-memif-gen [EAL args] -- --mode sumcast|echo|sink [options]",
      "sumcast-memif-gen"};
  sumcast::cli::setup(app);
  app.add_option(
         "--mode", o->mode,
         "sumcast: register the ranks of a job with the appliance (--control, --token-file) and build "
         "their frames from the grant; echo: the same frames for a made-up job, for a peer that only "
         "forwards them back (dpdk-testpmd --forward-mode=io --port-topology=loop) or takes them (rxonly); sink: send "
         "nothing, only receive (a peer that only sends: testpmd --forward-mode=txonly)")
      ->check(CLI::IsMember({"sumcast", "echo", "sink"}));
  app.add_option("--ranks", o->ranks, "emulated workers")->check(CLI::Range(1, 256));
  app.add_option("--payload", o->payload, "payload bytes per frame")
      ->check(CLI::Range(1u, static_cast<unsigned>(sumcast::wire::kMaxPayloadBytes)));
  sumcast::cli::add_named_option(app, "--dtype", &o->dtype, sumcast::wire::kDtypeCount, sumcast::wire::dtype_name,
                                 "element type (default fp32)");
  app.add_option("--rounds", o->rounds, "slot rounds of pre-built frames (even)")
      ->check(CLI::Range(2, 1 << 20))
      ->check(CLI::Validator([](std::string& v) { return std::stoul(v) % 2 == 0 ? "" : "must be even"; }, "EVEN"));
  app.add_option("--seconds", o->seconds, "measured time")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o->warmup, "time before the measurement")->check(CLI::NonNegativeNumber);
  app.add_option_function<std::string>(
         "--control",
         [o](const std::string& hp) {
           const size_t colon = hp.rfind(':');
           char* end = nullptr;
           const unsigned long port = colon == std::string::npos ? 0 : std::strtoul(hp.c_str() + colon + 1, &end, 10);
           if (port == 0 || port > 65535 || *end != '\0') {
             throw CLI::ValidationError("--control", "needs HOST:PORT, not " + hp);
           }
           o->control_host = hp.substr(0, colon);
           o->control_port = static_cast<uint16_t>(port);
         },
         "the appliance's control endpoint (default 127.0.0.1:4790)")
      ->type_name("HOST:PORT");
  app.add_option("--token-file", o->token_file, "the appliance's shared secret (--mode sumcast)");
  app.add_flag("--json", o->json, "print one JSON line instead of the table");
  app.add_flag("--multicast", o->multicast,
               "--mode sumcast: ask for results by multicast (the appliance needs dataplane.multicast = true): one "
               "result frame per slot round instead of one per rank");
  app.add_flag("--hold", o->hold,
               "after printing the result, stop polling and wait for EOF on stdin before closing the port: the peer "
               "can then be stopped while the link is still up (DPDK 22.11's memif PMD may crash a peer whose client "
               "disconnects while its lcore polls)");
  return sumcast::cli::parse(app, argc, argv);
}

Member member(uint32_t rank, const uint8_t mac[6]) {
  Member m;
  std::memcpy(m.mac, mac, 6);
  m.ip = kMemberIpBase + rank;
  m.udp_port = sumcast::wire::kRoceUdpPort;
  m.qpn = 0x2000 + rank;
  return m;
}

// The appliance resolves every member's MAC by ARP (at registration and again now and then): an
// ARP request for one of the emulated members' addresses is answered in place, with this port's
// MAC. Returns true when `m` was an ARP frame (answered or not; the caller no longer owns it).
bool answer_arp(uint16_t port, rte_mbuf* m, const rte_ether_addr& me, uint32_t ranks) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr) ||
      eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
    return false;
  }
  auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
  const uint32_t tip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
  if (arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) || tip < kMemberIpBase || tip >= kMemberIpBase + ranks) {
    rte_pktmbuf_free(m);
    return true;
  }
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
  arp->arp_data.arp_tha = arp->arp_data.arp_sha;
  arp->arp_data.arp_tip = arp->arp_data.arp_sip;
  arp->arp_data.arp_sha = me;
  arp->arp_data.arp_sip = rte_cpu_to_be_32(tip);
  eth->dst_addr = eth->src_addr;
  eth->src_addr = me;
  if (rte_eth_tx_burst(port, 0, &m, 1) != 1) rte_pktmbuf_free(m);
  return true;
}

// The job (and the appliance's side of it) the frames are built for.
struct Plan {
  JobSpec job;
  EngineOptions appliance;
  std::vector<uint32_t> core_qpns;
  std::vector<std::unique_ptr<sumcast::shim::ControlClient>> clients;  // kept open: the job lives
};

Plan register_job(const Options& o, uint16_t port, const rte_ether_addr& me) {
  const uint8_t* my_mac = me.addr_bytes;
  sumcast::Result<std::string> read = sumcast::read_token_file(o.token_file);
  if (!read.ok()) die("--token-file " + read.status().message());
  const std::string token = std::move(read.value());
  Plan plan;
  plan.clients.resize(o.ranks);
  std::vector<sumcast::shim::JobGrant> grants(o.ranks);
  std::vector<std::string> errors(o.ranks);
  const std::string job_name = "memif-bench-" + std::to_string(::getpid());
  std::vector<std::thread> threads;
  std::atomic<uint32_t> done{0};
  for (uint32_t r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      struct Done {
        std::atomic<uint32_t>* n;
        ~Done() { n->fetch_add(1); }
      } mark{&done};
      auto c = sumcast::shim::ControlClient::connect(o.control_host, o.control_port, token, 5000);
      if (!c.ok()) {
        errors[r] = c.status().to_string();
        return;
      }
      plan.clients[r] = std::move(c).value();
      sumcast::shim::RegisterRequest req;
      req.job_name = job_name;
      req.world_size = static_cast<uint16_t>(o.ranks);
      req.rank = static_cast<uint16_t>(r);
      req.dtype = o.dtype;
      req.max_payload_bytes = static_cast<uint16_t>(o.payload);
      req.multicast = o.multicast;
      const Member m = member(r, my_mac);
      std::memcpy(req.endpoint.mac, m.mac, 6);
      req.endpoint.ip = m.ip;
      req.endpoint.udp_port = m.udp_port;
      req.endpoint.qpn = m.qpn;
      auto g = plan.clients[r]->register_rank(req, 10000);
      if (!g.ok()) {
        errors[r] = g.status().to_string();
        return;
      }
      grants[r] = *g;
    });
  }
  // The appliance checks each member by ARP before it grants: answer while the ranks register
  // (every rank's call is bounded by its timeout, so this loop is too).
  std::array<rte_mbuf*, kRxBurst> got{};
  while (done.load() < o.ranks) {
    const uint16_t n = rte_eth_rx_burst(port, 0, got.data(), kRxBurst);
    for (uint16_t i = 0; i < n; ++i) {
      if (!answer_arp(port, got[i], me, o.ranks)) rte_pktmbuf_free(got[i]);
    }
    if (n == 0) rte_delay_us_sleep(100);
  }
  for (auto& t : threads) t.join();
  for (uint32_t r = 0; r < o.ranks; ++r) {
    if (!errors[r].empty()) die("rank " + std::to_string(r) + ": " + errors[r]);
  }
  const sumcast::shim::JobGrant& g = grants[0];
  if (g.payload_bytes < o.payload) die("the appliance grants " + std::to_string(g.payload_bytes) + " B payloads");
  if (g.multicast != o.multicast) {
    die(o.multicast ? "the appliance refused results by multicast; run it with dataplane.multicast = true"
                    : "the appliance answers by multicast, which was not asked for");
  }
  plan.job.job_id = g.job_id;
  plan.job.qkey = g.qkey;
  plan.job.slot_count = g.slot_count;
  plan.core_qpns = g.core_qpns;
  std::memcpy(plan.appliance.local_mac, g.appliance.mac, 6);
  plan.appliance.local_ip = g.appliance.ip;
  return plan;
}

Plan made_up_job(const Options& o) {
  Plan plan;
  plan.job.job_id = 77;
  plan.job.qkey = 0x5C0000AA;
  plan.job.slot_count = 128;
  plan.core_qpns = {0x100};
  const uint8_t mac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
  std::memcpy(plan.appliance.local_mac, mac, 6);
  plan.appliance.local_ip = 0x0A4E0001;
  (void)o;
  return plan;
}

// ICRC change tables for a frame of `frame_len` bytes whose 4-byte round field changes: the ICRC
// input is the 48-byte masked prefix then the IPv4 packet from byte 40 to the ICRC (icrc.h).
struct RoundPatch {
  std::array<std::array<uint32_t, 256>, 4> delta{};
  void build(size_t frame_len) {
    const size_t ip_len = frame_len - sumcast::wire::kIpOffset;
    const size_t message = 48 + ip_len - 40 - sumcast::wire::kIcrcLen;
    const size_t at = 48 + (sumcast::wire::kSumcastOffset + 12 - sumcast::wire::kIpOffset) - 40;
    std::vector<uint8_t> z(message, 0);
    const uint32_t zero = sumcast::icrc::crc32(0, z.data(), z.size());
    for (size_t b = 0; b < 4; ++b) {
      for (uint32_t v = 0; v < 256; ++v) {
        z[at + b] = static_cast<uint8_t>(v);
        delta[b][v] = sumcast::icrc::crc32(0, z.data(), z.size()) ^ zero;
      }
      z[at + b] = 0;
    }
  }
  // Moves the frame's round on by `step` (even: the version bit stays) and fixes its ICRC.
  void apply(uint8_t* frame, size_t frame_len, uint32_t step) const {
    uint8_t* rp = frame + sumcast::wire::kSumcastOffset + 12;
    const uint32_t old_round = sumcast::load_be32(rp);
    const uint32_t new_round = old_round + step;
    sumcast::store_be32(rp, new_round);
    const uint32_t d = old_round ^ new_round;  // byte b of the field is bits 24-8b..31-8b
    uint32_t c = delta[0][d >> 24] ^ delta[1][(d >> 16) & 0xFF] ^ delta[2][(d >> 8) & 0xFF] ^ delta[3][d & 0xFF];
    uint8_t* icrc = frame + frame_len - sumcast::wire::kIcrcLen;
    c ^= static_cast<uint32_t>(icrc[0]) | static_cast<uint32_t>(icrc[1]) << 8 | static_cast<uint32_t>(icrc[2]) << 16 |
         static_cast<uint32_t>(icrc[3]) << 24;
    icrc[0] = static_cast<uint8_t>(c);
    icrc[1] = static_cast<uint8_t>(c >> 8);
    icrc[2] = static_cast<uint8_t>(c >> 16);
    icrc[3] = static_cast<uint8_t>(c >> 24);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // EAL's arguments, then "--", then the generator's: these are parsed first, so that --help and a
  // usage error need no EAL.
  int eal_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      eal_argc = i;
      break;
    }
  }
  std::vector<char*> own(argv + std::min(eal_argc + 1, argc), argv + argc);
  own.insert(own.begin(), argv[0]);
  Options o;
  if (const int rc = parse(static_cast<int>(own.size()), own.data(), &o); rc >= 0) return rc;
  if (o.multicast && o.mode != "sumcast") {
    std::fprintf(stderr, "sumcast-memif-gen: --multicast is for --mode sumcast (the appliance's results)\n");
    return 2;
  }
  if (rte_eal_init(eal_argc, argv) < 0) die("rte_eal_init failed");
  if (rte_eth_dev_count_avail() < 1) die("no port (give --vdev net_memif0,role=client,socket=...)");
  const uint16_t port = 0;

  rte_mempool* rx_pool = rte_pktmbuf_pool_create("gen_rx", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (rx_pool == nullptr) die("rx mempool");
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) die("rte_eth_dev_configure");
  if (rte_eth_rx_queue_setup(port, 0, 1024, rte_socket_id(), nullptr, rx_pool) != 0) die("rx queue");
  if (rte_eth_tx_queue_setup(port, 0, 1024, rte_socket_id(), nullptr) != 0) die("tx queue");
  if (rte_eth_dev_start(port) != 0) die("rte_eth_dev_start");
  rte_ether_addr my_mac{};
  rte_eth_macaddr_get(port, &my_mac);
  // memif connects asynchronously: wait (bounded) for the link.
  for (int i = 0; i < 500; ++i) {
    rte_eth_link link{};
    rte_eth_link_get_nowait(port, &link);
    if (link.link_status == RTE_ETH_LINK_UP) break;
    if (i == 499) die("port link did not come up (is the peer running?)");
    rte_delay_ms(20);
  }

  Plan plan = o.mode == "sumcast" ? register_job(o, port, my_mac) : made_up_job(o);
  JobSpec& job = plan.job;
  job.dtype = o.dtype;
  job.max_payload_bytes = static_cast<uint16_t>(o.payload);
  for (uint32_t r = 0; r < o.ranks; ++r) job.members.push_back(member(r, my_mac.addr_bytes));

  // Frames for o.rounds rounds of every slot.
  const size_t elems = o.payload / sumcast::wire::dtype_size(o.dtype);
  const size_t payload = elems * sumcast::wire::dtype_size(o.dtype);
  const size_t count = size_t{o.rounds} * job.slot_count * o.ranks;
  const uint32_t data_room = RTE_PKTMBUF_HEADROOM + sumcast::wire::kMaxFrameLen;
  rte_mempool* frame_pool = rte_pktmbuf_pool_create("gen_frames", static_cast<unsigned>(count + 1), 0, 0,
                                                    static_cast<uint16_t>(data_room), rte_socket_id());
  if (frame_pool == nullptr) die("frame mempool (" + std::to_string(count) + " mbufs)");
  std::vector<rte_mbuf*> frames(count);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> value(-4, 4);
  std::vector<std::vector<uint8_t>> payloads(o.ranks);
  for (auto& p : payloads) {
    std::vector<double> v(elems);
    for (double& x : v) x = value(rng);
    p = sumcast::engine::encode_elements(o.dtype, v);
  }
  size_t frame_len = 0;
  size_t i = 0;
  for (uint32_t r = 0; r < o.rounds; ++r) {
    for (uint32_t s = 0; s < job.slot_count; ++s) {
      plan.appliance.qpn = plan.core_qpns[s % plan.core_qpns.size()];
      for (uint32_t k = 0; k < o.ranks; ++k) {
        rte_mbuf* m = rte_pktmbuf_alloc(frame_pool);
        if (m == nullptr) die("frame mbuf");
        ContributionFields f;
        f.rank = static_cast<uint16_t>(k);
        f.slot = static_cast<uint16_t>(s);
        f.round = r;
        f.elem_offset = (uint64_t{r} * job.slot_count + s) * elems;
        frame_len = sumcast::engine::write_contribution_frame(rte_pktmbuf_mtod(m, uint8_t*), job, plan.appliance, f,
                                                              payloads[k]);
        m->data_len = static_cast<uint16_t>(frame_len);
        m->pkt_len = static_cast<uint32_t>(frame_len);
        frames[i++] = m;
      }
    }
  }
  RoundPatch patch;
  patch.build(frame_len);

  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_rdtsc();
  const uint64_t measure_from = start + static_cast<uint64_t>(o.warmup * static_cast<double>(hz));
  const uint64_t end = measure_from + static_cast<uint64_t>(o.seconds * static_cast<double>(hz));
  uint64_t tx = 0, rx = 0, tx_at_start = 0, rx_at_start = 0, busy = 0, busy_at_start = 0, loops_at_start = 0;
  bool measuring = false;
  size_t next = 0;
  bool wrapped = false;
  std::array<rte_mbuf*, kBurst> burst{};
  uint16_t head = 0;     // first frame in `burst` not yet accepted by the port
  uint16_t pending = 0;  // frames from `head` on not yet accepted
  std::array<rte_mbuf*, kRxBurst> got{};
  uint64_t now = start;
  uint64_t loops = 0;
  const bool send = o.mode != "sink";
  const bool arp = o.mode == "sumcast";  // only the appliance asks (echo and sink peers never do)
  while (now < end) {
    if (send) {
      if (pending == 0) {
        head = 0;
        for (; pending < kBurst; ++pending) {
          rte_mbuf* m = frames[next];
          // A zero-copy memif port holds a sent frame until the peer has read it: one still held
          // must not be touched (its round would change under the peer), so the burst ends there.
          if (rte_mbuf_refcnt_read(m) != 1) break;
          if (wrapped) patch.apply(rte_pktmbuf_mtod(m, uint8_t*), frame_len, o.rounds);
          rte_mbuf_refcnt_update(m, 1);
          burst[pending] = m;
          if (++next == frames.size()) {
            next = 0;
            wrapped = true;
          }
        }
      }
      // Called even with nothing to send: a zero-copy port reclaims what the peer has read here.
      const uint16_t sent = rte_eth_tx_burst(port, 0, burst.data() + head, pending);
      head = static_cast<uint16_t>(head + sent);
      pending = static_cast<uint16_t>(pending - sent);
      tx += sent;
      if (pending != 0 || sent == 0) ++busy;
    }
    const uint16_t n = rte_eth_rx_burst(port, 0, got.data(), kRxBurst);
    if (n != 0) {
      // A frame that is no answer (an ARP request of the appliance: short, so the length tells
      // without touching the frame's bytes) is not counted.
      uint16_t keep = n;
      if (arp) {
        keep = 0;
        for (uint16_t k = 0; k < n; ++k) {
          if (got[k]->pkt_len >= frame_len || !answer_arp(port, got[k], my_mac, o.ranks)) got[keep++] = got[k];
        }
      }
      rx += keep;
      rte_pktmbuf_free_bulk(got.data(), keep);
    }
    if ((++loops & 63) == 0) {
      now = rte_rdtsc();
      if (!measuring && now >= measure_from) {
        measuring = true;
        tx_at_start = tx;
        rx_at_start = rx;
        busy_at_start = busy;
        loops_at_start = loops;
      }
    }
  }
  const double secs = static_cast<double>(now - measure_from) / static_cast<double>(hz);
  const double tx_pps = static_cast<double>(tx - tx_at_start) / secs;
  const double rx_pps = static_cast<double>(rx - rx_at_start) / secs;
  const double summed_pps = o.multicast ? rx_pps * o.ranks : rx_pps;
  if (o.json) {
    nlohmann::ordered_json out = {
        {"mode", o.mode},
        {"ranks", o.ranks},
        {"payload", payload},
        {"dtype", sumcast::wire::dtype_name(o.dtype)},
        {"frame_len", frame_len},
        {"seconds", secs},
        {"tx_pps", tx_pps},
        {"rx_pps", rx_pps},
        {"tx_gbps_payload", tx_pps * static_cast<double>(payload) * 8e-9},
        {"rx_gbps_payload", rx_pps * static_cast<double>(payload) * 8e-9},
        {"tx_busy_retries", busy - busy_at_start},
        // Share of the measured loops in which the port did not take
        // every frame offered: the generator waited on its peer (it is
        // then not what limits the rate).
        {"tx_wait_share", loops == loops_at_start ? 0.0
                                                  : static_cast<double>(busy - busy_at_start) /
                                                        static_cast<double>(loops - loops_at_start)}};
    if (o.mode == "sumcast") {
      out["multicast"] = o.multicast;
      out["summed_pps"] = summed_pps;
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("mode %s, %u ranks, %zu B payloads (%zu B frames), %.2f s: sent %.3f Mpps, received %.3f Mpps%s\n",
                o.mode.c_str(), o.ranks, payload, frame_len, secs, tx_pps / 1e6, rx_pps / 1e6,
                o.multicast ? " (results by multicast)" : "");
  }
  std::fflush(stdout);
  if (o.hold) {
    char buf[256];
    while (std::fread(buf, 1, sizeof buf, stdin) > 0) {
    }
  }
  for (auto& c : plan.clients) {
    if (c) (void)c->leave();
  }
  // Unsent frames keep their extra reference; the pools go with the process.
  rte_eth_dev_stop(port);
  rte_eal_cleanup();
  return 0;
}
