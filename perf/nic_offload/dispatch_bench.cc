// Dispatch cost per packet, direct steering vs software dispatch (docs/nic_offload.md §5).
//
// Both variants run the rx side of the lcore loop (dataplane/dpdk/src/lcore.cc) over the same
// bursts of 32 real contribution frames (1024-byte payload, slots 0..63 round robin, DestQP of the
// owner core) held in plain rte_mbuf headers, and stop where the engine would start:
//   Direct:   rte_flow put every frame on its owner's queue; the core checks the segment count
//             and keeps the frame (what lcore.cc does with software_dispatch off).
//   Software: the rx core parses each frame's slot (engine::Engine::owner_core), keeps its own,
//             enqueues the others, grouped per owner, on the owners' rte_rings; then every owner
//             dequeues its ring (done on this thread: the cross-core cache-line transfer a real
//             second core pays is not in this figure, so it is a lower bound).
// Reported: ns and TSC cycles per packet (counters ns_per_pkt, cycles_per_pkt).
#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "sumcast/engine/engine.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace {

constexpr uint32_t kBurst = 32;
constexpr uint32_t kFrames = 1024;  // 32 bursts
constexpr uint32_t kSlots = 64;
constexpr uint32_t kPayload = 1024;
constexpr uint32_t kQpnBase = 0x100;

struct Frames {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<rte_mbuf> mbufs;
  std::vector<rte_mbuf*> ptrs;
};

Frames make_frames(uint32_t cores) {
  Frames f;
  f.bytes.resize(kFrames);
  f.mbufs.resize(kFrames);
  for (uint32_t i = 0; i < kFrames; ++i) {
    const uint32_t slot = i % kSlots;
    sumcast::wire::Addressing a;
    a.src_ip = 0x0A00000A;
    a.dst_ip = 0x0A000001;
    a.src_port = 49152;
    a.dest_qp = kQpnBase + slot % cores;
    a.src_qp = 0x42;
    a.qkey = 0x1234ABCD;
    sumcast::wire::SumcastHeader h;
    h.job_id = 7;
    h.slot = static_cast<uint16_t>(slot);
    h.round = i / kSlots;
    h.elem_count = kPayload / 4;
    h.elem_offset = uint64_t{i} * (kPayload / 4);
    f.bytes[i].assign(sumcast::wire::frame_len(kPayload), 0);
    sumcast::wire::write_frame_headers(f.bytes[i].data(), a, h, kPayload);
    rte_mbuf& m = f.mbufs[i];
    std::memset(&m, 0, sizeof(m));
    m.buf_addr = f.bytes[i].data();
    m.data_off = 0;
    m.data_len = static_cast<uint16_t>(f.bytes[i].size());
    m.pkt_len = m.data_len;
    m.nb_segs = 1;
  }
  for (rte_mbuf& m : f.mbufs) f.ptrs.push_back(&m);
  return f;
}

struct RingDeleter {
  void operator()(rte_ring* r) const { std::free(r); }
};
using RingPtr = std::unique_ptr<rte_ring, RingDeleter>;

RingPtr make_ring(uint32_t count) {
  const ssize_t size = rte_ring_get_memsize(count);
  void* mem = std::aligned_alloc(RTE_CACHE_LINE_SIZE, (static_cast<size_t>(size) + 63) & ~size_t{63});
  auto* r = static_cast<rte_ring*>(mem);
  if (rte_ring_init(r, "bench", count, RING_F_SC_DEQ) != 0) {
    std::free(mem);
    return nullptr;
  }
  return RingPtr(r);
}

void report(benchmark::State& state, uint64_t cycles) {
  const double packets = static_cast<double>(state.iterations()) * kFrames;
  state.counters["ns_per_pkt"] = benchmark::Counter(packets, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["cycles_per_pkt"] = static_cast<double>(cycles) / packets;
  state.SetItemsProcessed(static_cast<int64_t>(packets));
}

void BM_DirectSteering(benchmark::State& state) {
  Frames f = make_frames(2);
  rte_mbuf* kept[kBurst];
  uint64_t cycles = 0;
  for (auto _ : state) {
    const uint64_t t0 = rte_rdtsc();
    for (uint32_t b = 0; b < kFrames; b += kBurst) {
      rte_mbuf** rx = f.ptrs.data() + b;
      uint32_t n = 0;
      for (uint32_t i = 0; i < kBurst; ++i) {
        if (i + 1 < kBurst) rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void*));
        if (rx[i]->nb_segs > 1) continue;
        kept[n++] = rx[i];
      }
      benchmark::DoNotOptimize(kept);
      benchmark::DoNotOptimize(n);
    }
    cycles += rte_rdtsc() - t0;
  }
  report(state, cycles);
}

void BM_SoftwareDispatch(benchmark::State& state) {
  const auto cores = static_cast<uint32_t>(state.range(0));
  Frames f = make_frames(cores);
  std::vector<RingPtr> rings;
  for (uint32_t c = 0; c < cores; ++c) rings.push_back(make_ring(1024));
  for (const RingPtr& r : rings) {
    if (r == nullptr) {
      state.SkipWithError("rte_ring_init failed");
      return;
    }
  }
  rte_mbuf* kept[kBurst];
  rte_mbuf* foreign[kBurst];
  int owner[kBurst];
  rte_mbuf* group[kBurst];
  void* out[kBurst];
  uint64_t cycles = 0;
  uint64_t dispatched = 0;
  for (auto _ : state) {
    const uint64_t t0 = rte_rdtsc();
    for (uint32_t b = 0; b < kFrames; b += kBurst) {
      rte_mbuf** rx = f.ptrs.data() + b;
      uint32_t n = 0;
      uint32_t nf = 0;
      for (uint32_t i = 0; i < kBurst; ++i) {
        rte_mbuf* m = rx[i];
        if (i + 1 < kBurst) rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void*));
        if (m->nb_segs > 1) continue;
        const int o = sumcast::engine::Engine::owner_core(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, cores);
        if (o > 0) {  // this is core 0
          foreign[nf] = m;
          owner[nf++] = o;
          continue;
        }
        kept[n++] = m;
      }
      // Grouped per owner, one enqueue each (as lcore.cc's dispatch()).
      for (uint32_t i = 0; i < nf; ++i) {
        const int o = owner[i];
        if (o < 0) continue;
        uint32_t k = 0;
        for (uint32_t j = i; j < nf; ++j) {
          if (owner[j] == o) {
            group[k++] = foreign[j];
            owner[j] = -1;
          }
        }
        dispatched += rte_ring_mp_enqueue_burst(rings[static_cast<uint32_t>(o)].get(), reinterpret_cast<void**>(group),
                                                k, nullptr);
      }
      // The owners drain their rings.
      for (uint32_t c = 1; c < cores; ++c) {
        const unsigned got = rte_ring_sc_dequeue_burst(rings[c].get(), out, kBurst, nullptr);
        benchmark::DoNotOptimize(out);
        benchmark::DoNotOptimize(got);
      }
      benchmark::DoNotOptimize(kept);
      benchmark::DoNotOptimize(n);
    }
    cycles += rte_rdtsc() - t0;
  }
  report(state, cycles);
  state.counters["dispatched_share"] =
      static_cast<double>(dispatched) / (static_cast<double>(state.iterations()) * kFrames);
}

BENCHMARK(BM_DirectSteering);
BENCHMARK(BM_SoftwareDispatch)->Arg(2)->Arg(4)->Arg(8);

}  // namespace

BENCHMARK_MAIN();
