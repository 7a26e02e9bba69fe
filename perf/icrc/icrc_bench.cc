// ISA-L CRC-32 (through sumcast::icrc::crc32) against a plain byte-wise table CRC-32 written here,
// at 64 B, 256 B, 1 KiB and 4 KiB, and the full ICRC verify of a Sumcast frame with a 64 B and a
// 1 KiB payload (ISA-L vs the same masking with the table CRC). After the usual table, prints the
// ISA-L / table throughput ratio for each pair (target >= 10x; README.md, Performance), then how
// much of the ISA-L verify's time one ISA-L pass over the same bytes takes (bm_icrc_one_pass_isal)
// and the fused AVX-512 verify (bm_icrc_verify_avx512, the default where the CPU has it) takes. With
// --benchmark_repetitions=N the ratios use the medians.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sumcast/icrc/icrc.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

// The baseline: Sarwate's byte-at-a-time table CRC-32, zlib-compatible.
uint32_t table_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

const std::vector<uint8_t>& random_bytes() {
  static const std::vector<uint8_t> buf = [] {
    std::vector<uint8_t> b(8192);
    std::mt19937 rng(1);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  }();
  return buf;
}

void bm_crc32_isal(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const uint8_t* p = random_bytes().data();
  for (auto _ : state) {
    uint32_t c = sumcast::icrc::crc32(0, p, n);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

void bm_crc32_table(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const uint8_t* p = random_bytes().data();
  for (auto _ : state) {
    uint32_t c = table_crc32(0, p, n);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

BENCHMARK(bm_crc32_isal)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(bm_crc32_table)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);

std::vector<uint8_t> make_frame(size_t payload_len) {
  sumcast::wire::Addressing a;
  a.src_ip = 0x0A000001;
  a.dst_ip = 0x0A000002;
  a.qkey = 0x12345678;
  sumcast::wire::SumcastHeader h;
  h.elem_count = static_cast<uint16_t>(payload_len / 4);
  std::vector<uint8_t> frame(sumcast::wire::frame_len(payload_len));
  uint8_t* payload = sumcast::wire::write_frame_headers(frame.data(), a, h, payload_len);
  std::memcpy(payload, random_bytes().data(), payload_len);
  sumcast::icrc::stamp_frame(frame);
  return frame;
}

void bm_icrc_verify(benchmark::State& state, sumcast::icrc::Impl impl) {
  const std::vector<uint8_t> frame = make_frame(static_cast<size_t>(state.range(0)));
  if (!sumcast::icrc::verify_frame_with(impl, frame)) state.SkipWithError("frame does not verify");
  for (auto _ : state) {
    bool ok = sumcast::icrc::verify_frame_with(impl, frame);
    benchmark::DoNotOptimize(ok);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(frame.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// The masked prefix stored on the stack, then two ISA-L calls (every CPU).
void bm_icrc_verify_isal(benchmark::State& state) { bm_icrc_verify(state, sumcast::icrc::Impl::kIsal); }
// The fused AVX-512 VPCLMULQDQ pass (registered in main() where the CPU has it).
void bm_icrc_verify_avx512(benchmark::State& state) { bm_icrc_verify(state, sumcast::icrc::Impl::kAvx512); }

// A ring of 64 distinct frames (about 72 KB at 1 KiB payloads: past L1, in L2), verified in turn,
// either back to back (`chained` false: no verify waits on another, so the CPU overlaps them) or
// each frame chosen by the previous result (true: every verify waits on the one before, as a
// packet's processing waits on its check). The two differ by how latency-bound the check is.
void bm_icrc_verify_ring(benchmark::State& state, sumcast::icrc::Impl impl, bool chained) {
  constexpr size_t kRing = 64;
  std::vector<std::vector<uint8_t>> ring;
  for (size_t i = 0; i < kRing; ++i) {
    std::vector<uint8_t> f = make_frame(static_cast<size_t>(state.range(0)));
    f[sumcast::wire::kPayloadOffset] = static_cast<uint8_t>(i);  // distinct payloads
    sumcast::icrc::stamp_frame(f);
    if (!sumcast::icrc::verify_frame_with(impl, f)) {
      state.SkipWithError("a frame does not verify");
      return;
    }
    ring.push_back(std::move(f));
  }
  size_t i = 0;
  for (auto _ : state) {
    const bool ok = sumcast::icrc::verify_frame_with(impl, ring[i]);
    benchmark::DoNotOptimize(ok);
    // Every frame verifies, so the step is 1 either way; chained, the CPU cannot know that first.
    i = (i + (chained ? static_cast<size_t>(ok) : 1)) % kRing;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(ring[0].size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
void bm_icrc_ring_isal(benchmark::State& state) { bm_icrc_verify_ring(state, sumcast::icrc::Impl::kIsal, false); }
void bm_icrc_chained_isal(benchmark::State& state) { bm_icrc_verify_ring(state, sumcast::icrc::Impl::kIsal, true); }
void bm_icrc_ring_avx512(benchmark::State& state) { bm_icrc_verify_ring(state, sumcast::icrc::Impl::kAvx512, false); }
void bm_icrc_chained_avx512(benchmark::State& state) { bm_icrc_verify_ring(state, sumcast::icrc::Impl::kAvx512, true); }

// What a verify that made one pass would cost: one ISA-L call over as many bytes as the ICRC
// covers (the 48-byte masked prefix and the rest of the packet up to the ICRC field), where
// verify_frame() makes two (the prefix built on the stack, then the rest chained) and checks the
// result. Its ratio to the verify (printed below) bounds what fusing the prefix into one CRC pass
// could save.
void bm_icrc_one_pass_isal(benchmark::State& state) {
  const std::vector<uint8_t> frame = make_frame(static_cast<size_t>(state.range(0)));
  const size_t ip_len = frame.size() - sumcast::wire::kIpOffset;
  const size_t covered = 48 + (ip_len - 40 - sumcast::wire::kIcrcLen);  // prefix + the rest
  const uint8_t* p = frame.data();
  for (auto _ : state) {
    uint32_t c = sumcast::icrc::crc32(0, p, covered);
    benchmark::DoNotOptimize(c);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(frame.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// The same verify with the table CRC: mask a 48-byte prefix on the stack, CRC it and the rest.
bool table_verify_frame(const std::vector<uint8_t>& frame) {
  const uint8_t* ip = frame.data() + sumcast::wire::kIpOffset;
  const size_t total = static_cast<size_t>((ip[2] << 8) | ip[3]);
  uint8_t prefix[48];
  std::memset(prefix, 0xFF, 8);
  std::memcpy(prefix + 8, ip, 40);
  prefix[8 + 1] = prefix[8 + 8] = prefix[8 + 10] = prefix[8 + 11] = 0xFF;
  prefix[28 + 6] = prefix[28 + 7] = prefix[36 + 4] = 0xFF;
  uint32_t c = table_crc32(0, prefix, sizeof prefix);
  c = table_crc32(c, ip + 40, total - 44);
  const uint8_t* f = ip + total - 4;
  return c == (static_cast<uint32_t>(f[0]) | (static_cast<uint32_t>(f[1]) << 8) | (static_cast<uint32_t>(f[2]) << 16) |
               (static_cast<uint32_t>(f[3]) << 24));
}

void bm_icrc_verify_table(benchmark::State& state) {
  const std::vector<uint8_t> frame = make_frame(static_cast<size_t>(state.range(0)));
  if (!table_verify_frame(frame)) state.SkipWithError("frame does not verify with the table CRC");
  for (auto _ : state) {
    bool ok = table_verify_frame(frame);
    benchmark::DoNotOptimize(ok);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(frame.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// Argument: payload bytes (frame = payload + 98 bytes of headers and ICRC).
BENCHMARK(bm_icrc_verify_isal)->Arg(64)->Arg(1024);
BENCHMARK(bm_icrc_verify_table)->Arg(64)->Arg(1024);
BENCHMARK(bm_icrc_one_pass_isal)->Arg(64)->Arg(1024);
BENCHMARK(bm_icrc_ring_isal)->Arg(1024);
BENCHMARK(bm_icrc_chained_isal)->Arg(1024);

// Prints like the console reporter and keeps each benchmark's bytes/s (the median when there
// are repetitions) for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& reports) override {
    ConsoleReporter::ReportRuns(reports);
    for (const Run& r : reports) {
      const auto it = r.counters.find("bytes_per_second");
      if (r.error_occurred || it == r.counters.end()) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      const std::string name = r.run_name.str();
      if (median || medians_.count(name) == 0) {
        rates_[name] = it->second.value;
        const auto items = r.counters.find("items_per_second");
        if (items != r.counters.end()) items_[name] = items->second.value;
      }
      if (median) medians_[name] = true;
    }
  }

  void print_ratios() const {
    std::printf("\nISA-L / table CRC throughput, CPU time, GB = 1e9 bytes (target >= 10x):\n");
    print_ratio("bm_crc32_isal/64", "bm_crc32_table/64", "crc32 64 B");
    print_ratio("bm_crc32_isal/256", "bm_crc32_table/256", "crc32 256 B");
    print_ratio("bm_crc32_isal/1024", "bm_crc32_table/1024", "crc32 1 KiB");
    print_ratio("bm_crc32_isal/4096", "bm_crc32_table/4096", "crc32 4 KiB");
    print_ratio("bm_icrc_verify_isal/64", "bm_icrc_verify_table/64", "ICRC verify, 64 B payload frame");
    print_ratio("bm_icrc_verify_isal/1024", "bm_icrc_verify_table/1024", "ICRC verify, 1 KiB payload frame");
    print_ratio("bm_icrc_verify_avx512/64", "bm_icrc_verify_table/64", "ICRC verify fused, 64 B payload");
    print_ratio("bm_icrc_verify_avx512/1024", "bm_icrc_verify_table/1024", "ICRC verify fused, 1 KiB payload");
    std::printf("\nTime per frame over the ISA-L verify's (two ISA-L calls; 1.00: as fast):\n");
    print_share("bm_icrc_verify_isal/64", "bm_icrc_one_pass_isal/64", "one ISA-L pass, 64 B payload");
    print_share("bm_icrc_verify_isal/1024", "bm_icrc_one_pass_isal/1024", "one ISA-L pass, 1 KiB payload");
    if (rates_.count("bm_icrc_verify_avx512/64") == 0) {
      std::printf("  (the fused verify did not run: this CPU lacks AVX-512 BW/VL or VPCLMULQDQ)\n");
    }
    print_share("bm_icrc_verify_isal/64", "bm_icrc_verify_avx512/64", "fused verify, 64 B payload");
    print_share("bm_icrc_verify_isal/1024", "bm_icrc_verify_avx512/1024", "fused verify, 1 KiB payload");
    std::printf("\nA ring of 64 frames, 1 KiB payloads: ns per verify back to back and each waiting on the last:\n");
    print_latency("bm_icrc_ring_isal/1024", "bm_icrc_chained_isal/1024", "ISA-L");
    print_latency("bm_icrc_ring_avx512/1024", "bm_icrc_chained_avx512/1024", "fused");
  }

 private:
  void print_ratio(const std::string& isal, const std::string& table, const char* what) const {
    const auto a = rates_.find(isal);
    const auto b = rates_.find(table);
    if (a == rates_.end() || b == rates_.end() || b->second <= 0) return;
    const double ratio = a->second / b->second;
    std::printf("  %-34s %8.2f GB/s vs %6.3f GB/s = %6.1fx %s\n", what, a->second / 1e9, b->second / 1e9, ratio,
                ratio >= 10.0 ? "(ok)" : "(BELOW TARGET)");
  }

  // No target: the other's time per frame as a share of the ISA-L verify's.
  void print_share(const std::string& verify, const std::string& one_pass, const char* what) const {
    const auto a = rates_.find(verify);
    const auto b = rates_.find(one_pass);
    if (a == rates_.end() || b == rates_.end() || b->second <= 0) return;
    std::printf("  %-34s %6.2f\n", what, a->second / b->second);
  }

  // Time per frame (from items per second) of two runs over the same frames, and their ratio.
  void print_latency(const std::string& free, const std::string& chained, const char* what) const {
    const auto a = items_.find(free);
    const auto b = items_.find(chained);
    if (a == items_.end() || b == items_.end() || a->second <= 0 || b->second <= 0) return;
    std::printf("  %-6s back to back %6.1f ns, chained %6.1f ns (%.2fx)\n", what, 1e9 / a->second, 1e9 / b->second,
                a->second / b->second);
  }

  std::map<std::string, double> rates_;
  std::map<std::string, double> items_;
  std::map<std::string, bool> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (sumcast::icrc::impl_supported(sumcast::icrc::Impl::kAvx512)) {
    benchmark::RegisterBenchmark("bm_icrc_verify_avx512", bm_icrc_verify_avx512)->Arg(64)->Arg(1024);
    benchmark::RegisterBenchmark("bm_icrc_ring_avx512", bm_icrc_ring_avx512)->Arg(1024);
    benchmark::RegisterBenchmark("bm_icrc_chained_avx512", bm_icrc_chained_avx512)->Arg(1024);
  } else {
    std::printf("icrc: this CPU lacks AVX-512 BW/VL or VPCLMULQDQ: no fused verify rows\n");
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
