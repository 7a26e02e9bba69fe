// Stress streams (sumcast/pktgen/stream.h): the pcap files are read back with libpcap (an
// independent reader) and every frame checked field by field; the frames replayed into in-memory
// engines (one per appliance core, frames dispatched to the owner core as sumcastd does) complete
// every slot round with exact results and no drop, for every dtype; files split by slot keep each
// slot's order.
#include "sumcast/pktgen/stream.h"

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sumcast/engine/engine.h"
#include "sumcast/engine/memory_port.h"
#include "sumcast/engine/testing.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/wire/packet.h"

namespace sumcast::pktgen {
namespace {

constexpr uint8_t kApplianceMac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x09};
constexpr uint32_t kApplianceIp = 0x0A4D0001;  // 10.77.0.1

StreamSpec spec(wire::Dtype dtype, uint32_t ranks, uint16_t slots, uint32_t rounds, uint32_t cores) {
  StreamSpec s;
  s.job_id = 42;
  s.qkey = 0x5C0FFEE5;
  s.dtype = dtype;
  s.slots = slots;
  s.payload_bytes = static_cast<uint16_t>(256 / wire::dtype_size(dtype) * wire::dtype_size(dtype));
  s.rounds = rounds;
  std::memcpy(s.appliance_mac, kApplianceMac, 6);
  s.appliance_ip = kApplianceIp;
  for (uint32_t c = 0; c < cores; ++c) s.core_qpns.push_back(0x100 + c);
  for (uint32_t r = 0; r < ranks; ++r) {
    engine::Member m;
    const uint8_t mac[6] = {0x02, 0x50, 0x47, 0, 0, 0x10};
    std::memcpy(m.mac, mac, 6);
    m.ip = 0x0A4D000A;  // one sender for every rank, as sumcast-pcapgen registers them
    m.udp_port = wire::kRoceUdpPort;
    m.qpn = 0x2000 + r;
    s.ranks.push_back(m);
  }
  return s;
}

std::string temp_dir() {
  char t[] = "/tmp/pktgen-test.XXXXXX";
  const char* d = mkdtemp(t);
  return d != nullptr ? d : "/tmp";
}

std::vector<std::vector<uint8_t>> read_pcap(const std::string& path, int* linktype) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  std::vector<std::vector<uint8_t>> frames;
  if (p == nullptr) {
    ADD_FAILURE() << path << ": " << err;
    return frames;
  }
  *linktype = pcap_datalink(p);
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  while (pcap_next_ex(p, &h, &data) == 1) {
    EXPECT_EQ(h->caplen, h->len);
    frames.emplace_back(data, data + h->caplen);
  }
  pcap_close(p);
  return frames;
}

TEST(PktgenStreamTest, PcapReadsBackWithLibpcapFrameByFrame) {
  const StreamSpec s = spec(wire::Dtype::kFp32, 3, 4, 2, 2);
  const std::string dir = temp_dir();
  const std::string path = dir + "/s.pcap";
  auto n = write_pcaps(s, {path}, 1e6);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n.value(), 3u * 4 * 2);
  int linktype = -1;
  const auto frames = read_pcap(path, &linktype);
  EXPECT_EQ(linktype, DLT_EN10MB);
  ASSERT_EQ(frames.size(), n.value());
  // Round-major order: round, then slot, then rank.
  size_t k = 0;
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint16_t slot = 0; slot < 4; ++slot) {
      for (uint16_t rank = 0; rank < 3; ++rank, ++k) {
        const auto& f = frames[k];
        wire::ParsedPacket p;
        ASSERT_EQ(wire::parse_frame(f, &p), wire::ParseError::kOk) << k;
        EXPECT_TRUE(icrc::verify_frame(f)) << k;
        EXPECT_EQ(std::memcmp(p.dst_mac, kApplianceMac, 6), 0);
        EXPECT_EQ(std::memcmp(p.src_mac, s.ranks[rank].mac, 6), 0);
        EXPECT_EQ(p.dst_ip, kApplianceIp);
        EXPECT_EQ(p.src_ip, s.ranks[rank].ip);
        EXPECT_EQ(p.qkey, s.qkey);
        EXPECT_EQ(p.src_qp, 0x2000u + rank);
        EXPECT_EQ(p.dest_qp, 0x100u + slot % 2);  // the slot's owner core
        EXPECT_EQ(p.hdr.type, wire::MsgType::kContribution);
        EXPECT_EQ(p.hdr.job_id, 42u);
        EXPECT_EQ(p.hdr.rank, rank);
        EXPECT_EQ(p.hdr.slot, slot);
        EXPECT_EQ(p.hdr.round, round);
        EXPECT_EQ(p.hdr.flags & wire::kFlagSlotVersion, round & 1);
        EXPECT_EQ(p.payload_len, 256u);
        const std::vector<double> v = engine::decode_elements(s.dtype, {p.payload, p.payload_len});
        for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], stream_element(rank, slot, round, i));
      }
    }
  }
  std::system(("rm -rf " + dir).c_str());
}

// The appliance's cores as sumcastd runs them: one engine per core, frames dispatched to the
// slot's owner (Engine::owner_core) in bursts of 32.
struct Appliance {
  explicit Appliance(const StreamSpec& s) {
    const auto cores = static_cast<uint32_t>(s.core_qpns.size());
    for (uint32_t c = 0; c < cores; ++c) {
      engine::EngineOptions o;
      o.core_index = c;
      o.core_count = cores;
      std::memcpy(o.local_mac, s.appliance_mac, 6);
      o.local_ip = s.appliance_ip;
      o.qpn = s.core_qpns[c];
      engines.push_back(std::make_unique<engine::Engine>(o));
      sinks.push_back(std::make_unique<engine::MemoryTxSink>(4096));
      EXPECT_TRUE(engines.back()->add_job(engine_job(s)).ok());
    }
  }
  void feed(const std::vector<std::vector<uint8_t>>& frames, const StreamSpec& s, uint64_t* exact, uint64_t* results) {
    for (size_t at = 0; at < frames.size(); at += 32) {
      std::vector<std::vector<engine::PacketView>> per_core(engines.size());
      for (size_t i = at; i < std::min(at + 32, frames.size()); ++i) {
        const int c = engine::Engine::owner_core(frames[i].data(), static_cast<uint32_t>(frames[i].size()),
                                                 static_cast<uint32_t>(engines.size()));
        ASSERT_GE(c, 0);
        per_core[c].push_back({frames[i].data(), static_cast<uint32_t>(frames[i].size())});
      }
      for (size_t c = 0; c < engines.size(); ++c) {
        engines[c]->process_burst(per_core[c], *sinks[c]);
        for (const auto& f : sinks[c]->frames()) {
          wire::ParsedPacket p;
          ASSERT_EQ(wire::parse_frame(f.bytes(), &p), wire::ParseError::kOk);
          ASSERT_EQ(p.hdr.type, wire::MsgType::kResult);
          ++*results;
          if (result_is_exact(s, p.hdr, {p.payload, p.payload_len})) ++*exact;
        }
        sinks[c]->clear();
      }
    }
  }
  uint64_t total(std::atomic<uint64_t> engine::CoreCounters::*field) const {
    uint64_t n = 0;
    for (const auto& e : engines) n += (e->counters().*field).load();
    return n;
  }
  uint64_t drops() const {
    uint64_t n = 0;
    for (const auto& e : engines) {
      for (const auto& d : e->counters().drops) n += d.load();
    }
    return n;
  }
  std::vector<std::unique_ptr<engine::Engine>> engines;
  std::vector<std::unique_ptr<engine::MemoryTxSink>> sinks;
};

TEST(PktgenStreamTest, ReplayedIntoEnginesEverySlotRoundCompletesExactlyForEveryDtype) {
  for (const wire::Dtype d :
       {wire::Dtype::kFp32, wire::Dtype::kFp16, wire::Dtype::kBf16, wire::Dtype::kInt32, wire::Dtype::kFp64}) {
    SCOPED_TRACE(wire::dtype_name(d));
    const StreamSpec s = spec(d, 5, 6, 4, 2);
    std::vector<std::vector<uint8_t>> frames;
    for_each_frame(s, 0, [&](std::span<const uint8_t> f) { frames.emplace_back(f.begin(), f.end()); });
    ASSERT_EQ(frames.size(), stream_frames(s));
    Appliance a(s);
    uint64_t exact = 0;
    uint64_t results = 0;
    a.feed(frames, s, &exact, &results);
    EXPECT_EQ(a.total(&engine::CoreCounters::slots_completed), 6u * 4);
    EXPECT_EQ(a.total(&engine::CoreCounters::contributions), frames.size());
    EXPECT_EQ(a.drops(), 0u);
    EXPECT_EQ(a.total(&engine::CoreCounters::duplicates), 0u);
    EXPECT_EQ(results, 6u * 4 * 5);  // one per rank per slot round
    EXPECT_EQ(exact, results);
  }
}

TEST(PktgenStreamTest, WideWorldsStayExactInBf16) {
  // Sums of +-1 over 200 ranks: integers up to 200, exact in bf16 (8 significant bits).
  const StreamSpec s = spec(wire::Dtype::kBf16, 200, 2, 2, 1);
  std::vector<std::vector<uint8_t>> frames;
  for_each_frame(s, 0, [&](std::span<const uint8_t> f) { frames.emplace_back(f.begin(), f.end()); });
  Appliance a(s);
  uint64_t exact = 0;
  uint64_t results = 0;
  a.feed(frames, s, &exact, &results);
  EXPECT_EQ(a.total(&engine::CoreCounters::slots_completed), 4u);
  EXPECT_EQ(results, 4u * 200);
  EXPECT_EQ(exact, results);
}

TEST(PktgenStreamTest, FilesSplitBySlotAndEachCompletesOnItsOwn) {
  StreamSpec s = spec(wire::Dtype::kFp32, 2, 6, 3, 2);
  s.files = 3;
  const std::string dir = temp_dir();
  const std::vector<std::string> paths = pcap_paths(dir + "/split.pcap", 3);
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[1], dir + "/split-1.pcap");
  auto n = write_pcaps(s, paths, 0);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n.value(), stream_frames(s));
  Appliance a(s);
  uint64_t total = 0;
  for (uint32_t f = 0; f < 3; ++f) {
    int linktype = 0;
    const auto frames = read_pcap(paths[f], &linktype);
    EXPECT_EQ(frames.size(), stream_frames(s, f));
    uint32_t last_round = 0;
    for (const auto& fr : frames) {
      wire::ParsedPacket p;
      ASSERT_EQ(wire::parse_frame(fr, &p), wire::ParseError::kOk);
      EXPECT_EQ(p.hdr.slot % 3, f);
      EXPECT_GE(p.hdr.round, last_round);
      last_round = p.hdr.round;
    }
    // Replayed one file after the other (as independent ports would, in any interleaving by slot).
    uint64_t exact = 0;
    uint64_t results = 0;
    a.feed(frames, s, &exact, &results);
    EXPECT_EQ(exact, results);
    total += frames.size();
  }
  EXPECT_EQ(total, stream_frames(s));
  EXPECT_EQ(a.total(&engine::CoreCounters::slots_completed), 6u * 3);
  EXPECT_EQ(a.drops(), 0u);
  EXPECT_EQ(pcap_paths("out", 2)[0], "out-0");
  EXPECT_EQ(pcap_paths("x.pcap", 1)[0], "x.pcap");
  std::system(("rm -rf " + dir).c_str());
}

TEST(PktgenStreamTest, ResultWithOneWrongElementIsNotExact) {
  const StreamSpec s = spec(wire::Dtype::kInt32, 3, 2, 1, 1);
  const size_t n = stream_elements(s);
  std::vector<double> sums(n);
  for (size_t i = 0; i < n; ++i) sums[i] = stream_sum(3, 1, 0, i);
  std::vector<uint8_t> payload = engine::encode_elements(s.dtype, sums);
  wire::SumcastHeader h;
  h.type = wire::MsgType::kResult;
  h.dtype = s.dtype;
  h.job_id = s.job_id;
  h.slot = 1;
  h.round = 0;
  h.elem_count = static_cast<uint16_t>(n);
  h.elem_offset = 1 * n;
  EXPECT_TRUE(result_is_exact(s, h, payload));
  payload[4 * (n - 1)] ^= 1;
  EXPECT_FALSE(result_is_exact(s, h, payload));
  payload[4 * (n - 1)] ^= 1;
  h.elem_offset = 0;  // the chunk of slot 0
  EXPECT_FALSE(result_is_exact(s, h, payload));
}

TEST(PktgenStreamTest, ValidateNamesTheBadField) {
  StreamSpec s = spec(wire::Dtype::kFp32, 2, 4, 1, 1);
  EXPECT_TRUE(validate(s).ok());
  auto bad = [&](auto change, const char* field) {
    StreamSpec t = s;
    change(t);
    const Status st = validate(t);
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  };
  bad([](StreamSpec& t) { t.payload_bytes = 6; }, "payload");
  bad([](StreamSpec& t) { t.payload_bytes = 0; }, "payload");
  bad([](StreamSpec& t) { t.slots = 0; }, "slots");
  bad([](StreamSpec& t) { t.rounds = 0; }, "rounds");
  bad([](StreamSpec& t) { t.ranks.clear(); }, "ranks");
  bad([](StreamSpec& t) { t.core_qpns.clear(); }, "QPN");
  bad([](StreamSpec& t) { t.files = 5; }, "files");
}

}  // namespace
}  // namespace sumcast::pktgen
