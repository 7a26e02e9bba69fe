// The engine's cost per packet, in memory: pre-built contribution frames of n emulated workers
// fed to one Engine (one core) in bursts of 32, results built into a MemoryTxSink that recycles
// its buffers (recording off). No network, no DPDK: this is the dataplane's CPU cost alone.
//
// Frames: for every round r, slot s and rank k (in that order: the n workers' streams merged
// packet by packet, each worker sending its window of slots), one frame with its ICRC stamped,
// sitting 128 bytes into a buffer as in an mbuf. Rounds advance: a pass holds several rounds of
// every slot; between passes (not timed) the jobs are removed and registered again, so every pass
// replays the same frames from round 0. The frame set is sized to ~4 MiB (an rx ring's worth),
// and at least two rounds of every slot.
//
// Counters (per packet received; the n results of a slot are amortised over its n contributions):
//   ns_per_pkt, cycles_per_pkt (TSC cycles), Mpps, Gbps (gradient payload bits absorbed per second).
// Benchmarks:
//   engine/<dtype>/payload:<B>/icrc:<on|off>/n:<ranks>   every dtype x payload x ICRC x rank count
//   floor/<dtype>/payload:<B>/icrc:<on|off>/n:8           the baseline: the same ICRC verify, summation
//                                                          and result copy per packet and one result
//                                                          CRC per n packets, with no parsing, checks
//                                                          or slot logic (what the engine can't avoid)
//   memcpy/<dtype>/payload:<B>/n:8                         the floor's baseline: the same frames,
//                                                          each copied once, nothing else (memory
//                                                          traffic alone, measured in the same run)
//   udp_checksum/fp32/payload:<B>/icrc:on/n:8             engine/... with EngineOptions::udp_checksum:
//                                                          every result frame's UDP checksum filled
//   scale/ranks:<n>, scale/slots:<S> (n=2),               1 KiB fp32, ICRC on: per-packet cost against
//   scale/jobs:<J> (n=8), scale/feed_KiB:<K> (n=8)         ranks, slots, jobs, and the frame set's size
//                                                          (from L2-resident to DRAM)
//   memory/ranks:<n>/slots:<S>/jobs:<J>/<dtype>/payload:<B>  appliance bytes (counter `bytes`) from
//                                                          EngineOptions::allocate; time = add_job x J
//   deterministic/<dtype>/payload:<B>/icrc:on/n:<ranks>   engine/... with JobSpec::deterministic
//                                                          (docs/fidelity.md): payloads staged, summed
//                                                          in rank order at completion
//   memory/deterministic/ranks:<n>/...                     its appliance bytes
//   not_for_us/fp32/payload:1024/icrc:on/n:8             engine/... with the engine's IPv4 address
//                                                          changed: every frame dropped (not_for_us),
//                                                          ns per frame dropped
//   multicast/fp32/payload:1024/icrc:on/n:<ranks>         results by multicast (one frame per slot
//                                                          round to the group) against per-member
//                                                          replication, the same frames, passes
//                                                          alternating between the two engines in one
//                                                          benchmark: ns_per_pkt (multicast),
//                                                          ns_per_pkt_replicated, and their ratio
//                                                          (`multicast_over_replicated`); tx frames per
//                                                          slot round: 1 against n
// SUMCAST_BENCH_PASSES=N in the environment fixes the passes per benchmark (for instruction
// counts: valgrind --tool=callgrind --toggle-collect='*process_burst*' gives Ir per packet).
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "sumcast/endian.h"
#include "sumcast/engine/engine.h"
#include "sumcast/engine/memory_port.h"
#include "sumcast/engine/testing.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::engine {
namespace {

using wire::Dtype;

constexpr size_t kBurst = 32;
constexpr size_t kHeadroom = 128;               // where an mbuf's data starts
constexpr size_t kFeedBytes = size_t{4} << 20;  // target size of one pass's frames
constexpr uint32_t kDefaultSlots = 64;

struct Scenario {
  Dtype dtype = Dtype::kFp32;
  uint32_t payload = 1024;  // bytes per packet
  bool icrc = true;
  uint32_t ranks = 2;
  uint32_t slots = kDefaultSlots;  // per job; reduced (not below 1) to keep the feed near kFeedBytes
  uint32_t jobs = 1;
  size_t feed_bytes = kFeedBytes;  // target size of one pass's frames
  bool deterministic = false;      // JobSpec::deterministic
  bool multicast = false;          // JobSpec::multicast: one result frame per slot round, to a group
  bool udp_checksum = false;       // EngineOptions::udp_checksum: every result frame checksummed
};

constexpr size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Memory on 2 MiB pages where the kernel gives them (transparent huge pages, madvise mode), as
// DPDK's mbufs and sumcastd's accumulators sit on hugepages: 4 KiB pages would add TLB misses
// that the appliance does not have.
constexpr size_t kHugePage = size_t{2} << 20;
struct HugeFree {
  size_t bytes = 0;
  void operator()(uint8_t* p) const { munmap(p, bytes); }
};
using HugeBytes = std::unique_ptr<uint8_t, HugeFree>;
HugeBytes huge_alloc(size_t bytes) {
  const size_t len = round_up(std::max<size_t>(bytes, 1), kHugePage);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  madvise(p, len, MADV_HUGEPAGE);
  std::memset(p, 0, len);  // fault it in now, not in a timed pass
  return HugeBytes(static_cast<uint8_t*>(p), HugeFree{len});
}
// EngineOptions::allocate on huge pages, from a pool that keeps released blocks for the next
// allocation of the same size: a benchmark re-registers its jobs between passes, and the memory
// must come back already faulted in (DPDK's hugepage heap does not fault either).
struct JobMemoryPool {
  std::vector<std::pair<size_t, uint8_t*>> free;  // (requested bytes, block)
  std::vector<HugeBytes> all;
};
void* pool_allocate(size_t bytes, void* ctx) {
  auto* pool = static_cast<JobMemoryPool*>(ctx);
  for (size_t i = 0; i < pool->free.size(); ++i) {
    if (pool->free[i].first == bytes) {
      uint8_t* p = pool->free[i].second;
      pool->free.erase(pool->free.begin() + static_cast<std::ptrdiff_t>(i));
      return p;
    }
  }
  pool->all.push_back(huge_alloc(bytes + 64));
  uint8_t* p = pool->all.back().get();
  std::memcpy(p, &bytes, sizeof bytes);
  return p + 64;
}
void pool_release(void* p, void* ctx) {
  auto* pool = static_cast<JobMemoryPool*>(ctx);
  uint8_t* block = static_cast<uint8_t*>(p);
  size_t bytes = 0;
  std::memcpy(&bytes, block - 64, sizeof bytes);
  pool->free.emplace_back(bytes, block);
}

EngineOptions appliance_options(bool icrc, bool udp_checksum = false) {
  EngineOptions o;
  o.udp_checksum = udp_checksum;
  const uint8_t mac[6] = {0x02, 0x5C, 0x00, 0x00, 0x00, 0x01};
  std::memcpy(o.local_mac, mac, 6);
  o.local_ip = 0x0A4D0001;  // 10.77.0.1
  o.verify_icrc = icrc;
  return o;
}

JobSpec job_spec(uint32_t job_index, uint32_t ranks, uint32_t slots, Dtype dtype, uint32_t payload,
                 bool deterministic = false, bool multicast = false) {
  JobSpec j;
  j.deterministic = deterministic;
  if (multicast) {
    j.multicast = true;
    j.mcast_ip = 0xEFFF4D00u | job_index;  // 239.255.77.<job>
    const uint8_t mac[6] = {0x01, 0x00, 0x5E, 0x7F, 0x4D, static_cast<uint8_t>(job_index)};
    std::memcpy(j.mcast_mac, mac, 6);
  }
  j.job_id = 100 + job_index;
  j.qkey = 0x5C000000u | job_index;
  j.dtype = dtype;
  j.slot_count = static_cast<uint16_t>(slots);
  j.max_payload_bytes = static_cast<uint16_t>(payload);
  j.members.resize(ranks);
  for (uint32_t k = 0; k < ranks; ++k) {
    Member& m = j.members[k];
    const uint8_t mac[6] = {
        0x02, 0x00, static_cast<uint8_t>(job_index), 0x00, static_cast<uint8_t>(k >> 8), static_cast<uint8_t>(k)};
    std::memcpy(m.mac, mac, 6);
    m.ip = 0x0A000000u | (job_index << 16) | (k + 10);
    m.udp_port = static_cast<uint16_t>(49152 + k);
    m.qpn = 0x1000 + k;
  }
  return j;
}

// One pass of frames for a scenario, and the jobs they belong to.
struct Feed {
  explicit Feed(const Scenario& s);
  Scenario sc;
  EngineOptions options;
  std::vector<JobSpec> jobs;
  uint32_t slots = 0;
  uint32_t rounds = 0;
  size_t stride = 0;
  HugeBytes storage;
  uint8_t* base = nullptr;
  std::vector<PacketView> frames;
  uint64_t payload_bytes = 0;  // per pass
  uint64_t completions = 0;    // slot rounds completed per pass (all jobs)
};

Feed::Feed(const Scenario& s) : sc(s), options(appliance_options(s.icrc, s.udp_checksum)) {
  const size_t frame_len = wire::frame_len(s.payload);
  stride = round_up(kHeadroom + frame_len, 64);
  const size_t target = std::max<size_t>(s.feed_bytes / stride, 256);
  const size_t per_slot_round = size_t{s.ranks} * s.jobs;
  slots = s.slots;
  while (slots > 1 && 2 * slots * per_slot_round > target && s.slots == kDefaultSlots) slots /= 2;
  rounds = static_cast<uint32_t>(std::max<size_t>(2, target / (slots * per_slot_round)));
  rounds = (rounds + 1) & ~1u;
  for (uint32_t j = 0; j < s.jobs; ++j)
    jobs.push_back(job_spec(j, s.ranks, slots, s.dtype, s.payload, s.deterministic, s.multicast));

  const size_t count = size_t{rounds} * slots * per_slot_round;
  storage = huge_alloc(count * stride);
  base = storage.get();
  frames.reserve(count);

  // Ordinary values in [-1, 1) (no subnormals, no overflow), different per rank.
  const size_t elems = s.payload / wire::dtype_size(s.dtype);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<std::vector<uint8_t>> payloads(s.ranks);
  for (auto& p : payloads) {
    std::vector<double> v(elems);
    for (double& x : v) x = value(rng);
    p = encode_elements(s.dtype, v);
  }
  uint8_t* out = base;
  for (uint32_t r = 0; r < rounds; ++r) {
    for (uint32_t slot = 0; slot < slots; ++slot) {
      for (uint32_t k = 0; k < s.ranks; ++k) {
        for (uint32_t j = 0; j < s.jobs; ++j) {
          ContributionFields f;
          f.rank = static_cast<uint16_t>(k);
          f.slot = static_cast<uint16_t>(slot);
          f.round = r;
          f.elem_offset = (uint64_t{r} * slots + slot) * elems;
          const size_t len = write_contribution_frame(out + kHeadroom, jobs[j], options, f, payloads[k]);
          frames.push_back({out + kHeadroom, static_cast<uint32_t>(len)});
          out += stride;
        }
      }
    }
  }
  payload_bytes = uint64_t{count} * s.payload;
  completions = uint64_t{rounds} * slots * s.jobs;
}

uint64_t total_drops(const CoreCounters& c) {
  uint64_t d = 0;
  for (const auto& x : c.drops) d += x.load(std::memory_order_relaxed);
  return d;
}

// This thread's CPU time: the machine is shared (2 CPUs), and time spent preempted is not ours.
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// TSC ticks per ns, measured once against CLOCK_MONOTONIC over 50 ms.
double tsc_per_ns() {
  static const double rate = [] {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = __rdtsc();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50)) {
    }
    const uint64_t c1 = __rdtsc();
    const auto t1 = std::chrono::steady_clock::now();
    return static_cast<double>(c1 - c0) / std::chrono::duration<double, std::nano>(t1 - t0).count();
  }();
  return rate;
}

// Times are this thread's CPU time; cycles are that time in TSC cycles (the TSC runs at the
// nominal clock); `preempted` is the share of the passes' wall time the thread did not run.
void set_rate_counters(benchmark::State& state, uint64_t packets, uint64_t payload_bytes, double ns,
                       uint64_t wall_tsc) {
  const auto p = static_cast<double>(packets);
  state.counters["ns_per_pkt"] = ns / p;
  state.counters["cycles_per_pkt"] = ns * tsc_per_ns() / p;
  state.counters["preempted"] = std::max(0.0, 1.0 - ns * tsc_per_ns() / static_cast<double>(wall_tsc));
  state.counters["Mpps"] = p / ns * 1e3;
  state.counters["Gbps"] = static_cast<double>(payload_bytes) * 8.0 / ns;
}

// `o` with its job memory from `pool` (huge pages, faulted in, reused across re-registrations).
EngineOptions pooled(EngineOptions o, JobMemoryPool& pool) {
  o.allocate = pool_allocate;
  o.release = pool_release;
  o.alloc_ctx = &pool;
  return o;
}

// Registers `jobs`; false (the benchmark skipped with the engine's error) if one is refused.
bool add_jobs(benchmark::State& state, Engine& engine, const std::vector<JobSpec>& jobs) {
  for (const JobSpec& j : jobs) {
    const Status st = engine.add_job(j);
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      return false;
    }
  }
  return true;
}

void run_engine(benchmark::State& state, const Scenario& sc) {
  const Feed feed(sc);
  JobMemoryPool pool;
  Engine engine(pooled(feed.options, pool));
  MemoryTxSink tx(256);
  tx.set_recording(false);
  if (!add_jobs(state, engine, feed.jobs)) return;
  const std::span<const PacketView> all(feed.frames);
  bool first = true;
  double ns = 0;
  uint64_t wall_tsc = 0;
  uint64_t passes = 0;
  for (auto _ : state) {
    if (!first) {
      for (const JobSpec& j : feed.jobs) {
        engine.remove_job(j.job_id, wire::AbortReason::kNone, tx);
        if (!engine.add_job(j).ok()) std::abort();
      }
    }
    first = false;
    const double t0 = thread_cpu_ns();
    const uint64_t c0 = __rdtsc();
    for (size_t i = 0; i < all.size(); i += kBurst) {
      engine.process_burst(all.subspan(i, std::min(kBurst, all.size() - i)), tx);
    }
    const uint64_t c1 = __rdtsc();
    const double pass_ns = thread_cpu_ns() - t0;
    state.SetIterationTime(pass_ns * 1e-9);
    ns += pass_ns;
    wall_tsc += c1 - c0;
    ++passes;
  }
  // The run must have done what it claims: every frame summed, every slot round answered.
  const CoreCounters& c = engine.counters();
  const uint64_t frames = passes * feed.frames.size();
  if (total_drops(c) != 0 || c.contributions.load() != frames ||
      c.slots_completed.load() != passes * feed.completions ||
      c.results_sent.load() != passes * feed.completions * (sc.multicast ? 1 : sc.ranks)) {
    state.SkipWithError("engine did not sum and answer every frame (drops or missing results)");
    return;
  }
  set_rate_counters(state, frames, passes * feed.payload_bytes, ns, wall_tsc);
  state.counters["ranks"] = sc.ranks;
  state.counters["slots"] = feed.slots;
  state.counters["jobs"] = sc.jobs;
  state.counters["feed_MiB"] = static_cast<double>(feed.frames.size() * feed.stride) / (1 << 20);
}

// Multicast against replication in one benchmark: two engines, the same frames (results by
// multicast change only what the engine sends), passes alternating so that both see the same
// machine. The timed iteration is a pass of each.
void run_multicast_vs_replication(benchmark::State& state, const Scenario& sc) {
  Scenario ms = sc;
  ms.multicast = true;
  const Feed feed(ms);
  struct Side {
    JobMemoryPool pool;
    std::unique_ptr<Engine> engine;
    MemoryTxSink tx{256};
    double ns = 0;
    uint64_t wall_tsc = 0;
    std::vector<JobSpec> jobs;
  };
  Side side[2];  // 0: multicast, 1: replication
  for (int k = 0; k < 2; ++k) {
    Side& x = side[k];
    x.engine = std::make_unique<Engine>(pooled(feed.options, x.pool));
    x.tx.set_recording(false);
    x.jobs = feed.jobs;
    for (JobSpec& j : x.jobs) j.multicast = k == 0;
    if (!add_jobs(state, *x.engine, x.jobs)) return;
  }
  const std::span<const PacketView> all(feed.frames);
  uint64_t passes = 0;
  for (auto _ : state) {
    double iteration_ns = 0;
    for (Side& x : side) {
      if (passes != 0) {
        for (const JobSpec& j : x.jobs) {
          x.engine->remove_job(j.job_id, wire::AbortReason::kNone, x.tx);
          if (!x.engine->add_job(j).ok()) std::abort();
        }
      }
      const double t0 = thread_cpu_ns();
      const uint64_t c0 = __rdtsc();
      for (size_t i = 0; i < all.size(); i += kBurst) {
        x.engine->process_burst(all.subspan(i, std::min(kBurst, all.size() - i)), x.tx);
      }
      const uint64_t c1 = __rdtsc();
      const double pass_ns = thread_cpu_ns() - t0;
      x.ns += pass_ns;
      x.wall_tsc += c1 - c0;
      iteration_ns += pass_ns;
    }
    state.SetIterationTime(iteration_ns * 1e-9);
    ++passes;
  }
  const uint64_t frames = passes * feed.frames.size();
  for (int k = 0; k < 2; ++k) {
    const CoreCounters& c = side[k].engine->counters();
    const uint64_t per_round = k == 0 ? 1 : sc.ranks;
    if (total_drops(c) != 0 || c.contributions.load() != frames ||
        c.results_sent.load() != passes * feed.completions * per_round ||
        c.group_frames.load() != (k == 0 ? passes * feed.completions : 0)) {
      state.SkipWithError("engine did not sum and answer every frame as multicast / replication");
      return;
    }
  }
  set_rate_counters(state, frames, passes * feed.payload_bytes, side[0].ns, side[0].wall_tsc);
  const double rep_ns = side[1].ns / static_cast<double>(frames);
  state.counters["ns_per_pkt_replicated"] = rep_ns;
  state.counters["multicast_over_replicated"] = (side[0].ns / static_cast<double>(frames)) / rep_ns;
  state.counters["tx_frames_per_round"] = 1;
  state.counters["tx_frames_per_round_replicated"] = sc.ranks;
  state.counters["ranks"] = sc.ranks;
}

// Runs `pass` once per benchmark iteration, timed by the thread's CPU time (the iteration's manual
// time) and by the TSC (wall, for the preempted share).
struct PassTimes {
  double ns = 0;
  uint64_t wall_tsc = 0;
  uint64_t passes = 0;
};
template <class Pass>
PassTimes timed_passes(benchmark::State& state, Pass&& pass) {
  PassTimes t;
  for (auto _ : state) {
    const double t0 = thread_cpu_ns();
    const uint64_t c0 = __rdtsc();
    pass();
    const uint64_t c1 = __rdtsc();
    const double pass_ns = thread_cpu_ns() - t0;
    state.SetIterationTime(pass_ns * 1e-9);
    t.ns += pass_ns;
    t.wall_tsc += c1 - c0;
    ++t.passes;
  }
  return t;
}

// What the engine cannot avoid per packet: verify the ICRC, sum the payload into its slot's
// accumulator and copy one result frame (n contributions bring n results), plus, once per slot
// round (every n-th packet), one CRC pass over the result. No parsing, no checks, no slot versions.
void run_floor(benchmark::State& state, const Scenario& sc) {
  const Feed feed(sc);
  const kernels::KernelTable& kt = kernels::active_kernels();
  const auto d = static_cast<size_t>(sc.dtype);
  const kernels::AccumulateFn acc_fn = kt.accumulate[d][0];
  const size_t elems = sc.payload / wire::dtype_size(sc.dtype);
  const size_t acc_stride = round_up(elems * wire::accumulator_size(sc.dtype), 64);
  std::vector<uint8_t> acc_mem(acc_stride * feed.slots * 2 + 64);
  uint8_t* acc = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(acc_mem.data()), 64));
  alignas(64) static uint8_t out[wire::kMaxFrameLen + 64];
  uint64_t bad = 0;
  uint32_t crc = 0;
  const PassTimes t = timed_passes(state, [&] {
    uint32_t k = 0;
    for (const PacketView& f : feed.frames) {
      if (sc.icrc && !icrc::verify_frame({f.data, f.len})) ++bad;
      const uint16_t slot = load_be16(f.data + wire::kSumcastOffset + 10);
      uint8_t* a = acc + (size_t{slot} * 2 + (f.data[wire::kSumcastOffset + 22] & 1)) * acc_stride;
      acc_fn(a, f.data + wire::kPayloadOffset, elems);
      if (++k == sc.ranks) {
        k = 0;
        crc ^= icrc::crc32(0, a, sc.payload);
      }
      std::memcpy(out, f.data, f.len);
      benchmark::ClobberMemory();
    }
  });
  benchmark::DoNotOptimize(crc);
  if (bad != 0) {
    state.SkipWithError("floor: a frame failed its ICRC");
    return;
  }
  set_rate_counters(state, t.passes * feed.frames.size(), t.passes * feed.payload_bytes, t.ns, t.wall_tsc);
}

// The memory traffic alone, as the baseline of the floor: every frame of the same feed copied
// once (its whole length, into the one destination the floor copies results to), nothing else.
// The floor over this says what the ICRC and the summation add to moving the bytes.
void run_memcpy(benchmark::State& state, const Scenario& sc) {
  const Feed feed(sc);
  alignas(64) static uint8_t out[wire::kMaxFrameLen + 64];
  const PassTimes t = timed_passes(state, [&] {
    for (const PacketView& f : feed.frames) {
      std::memcpy(out, f.data, f.len);
      benchmark::ClobberMemory();
    }
  });
  set_rate_counters(state, t.passes * feed.frames.size(), t.passes * feed.payload_bytes, t.ns, t.wall_tsc);
}

// Frames addressed to another host (unknown unicast a switch floods, or a misconfigured worker): the
// same feed, the engine's own IPv4 address one higher, so every frame is dropped as not_for_us.
// Such a drop must stay cheap, next to the engine/... row of the same frames: the engine checks a
// frame's destination before it spends an ICRC pass on it.
void run_not_for_us(benchmark::State& state, const Scenario& sc) {
  const Feed feed(sc);
  JobMemoryPool pool;
  EngineOptions options = feed.options;
  options.local_ip += 1;
  Engine engine(pooled(options, pool));
  MemoryTxSink tx(256);
  tx.set_recording(false);
  if (!add_jobs(state, engine, feed.jobs)) return;
  const std::span<const PacketView> all(feed.frames);
  const PassTimes t = timed_passes(state, [&] {
    for (size_t i = 0; i < all.size(); i += kBurst)
      engine.process_burst(all.subspan(i, std::min(kBurst, all.size() - i)), tx);
  });
  const CoreCounters& c = engine.counters();
  const uint64_t frames = t.passes * feed.frames.size();
  if (c.drops[static_cast<size_t>(DropReason::kNotForUs)].load() != frames || total_drops(c) != frames ||
      c.contributions.load() != 0) {
    state.SkipWithError("not_for_us: the engine did not drop every frame as not_for_us");
    return;
  }
  set_rate_counters(state, frames, t.passes * feed.payload_bytes, t.ns, t.wall_tsc);
}

// Bytes the engine asks EngineOptions::allocate for.
struct AllocCount {
  size_t live = 0;
  size_t peak = 0;
};
void* counting_allocate(size_t bytes, void* ctx) {
  auto* c = static_cast<AllocCount*>(ctx);
  void* p = ::operator new (bytes + 64, std::align_val_t{64}, std::nothrow);
  if (p == nullptr) return nullptr;
  std::memcpy(p, &bytes, sizeof bytes);  // the size sits in the first cache line
  c->live += bytes;
  c->peak = std::max(c->peak, c->live);
  return static_cast<uint8_t*>(p) + 64;
}
void counting_release(void* p, void* ctx) {
  auto* c = static_cast<AllocCount*>(ctx);
  uint8_t* block = static_cast<uint8_t*>(p) - 64;
  size_t bytes = 0;
  std::memcpy(&bytes, block, sizeof bytes);
  c->live -= bytes;
  ::operator delete (block, std::align_val_t{64});
}

void run_memory(benchmark::State& state, const Scenario& sc) {
  std::vector<JobSpec> jobs;
  for (uint32_t j = 0; j < sc.jobs; ++j) {
    jobs.push_back(job_spec(j, sc.ranks, sc.slots, sc.dtype, sc.payload, sc.deterministic));
  }
  AllocCount count;
  EngineOptions o = appliance_options(sc.icrc);
  o.allocate = counting_allocate;
  o.release = counting_release;
  o.alloc_ctx = &count;
  Engine engine(o);
  MemoryTxSink tx(16);
  for (auto _ : state) {
    for (const JobSpec& j : jobs) {
      if (!engine.add_job(j).ok()) {
        state.SkipWithError("add_job failed");
        return;
      }
    }
    state.PauseTiming();
    for (const JobSpec& j : jobs) engine.remove_job(j.job_id, wire::AbortReason::kNone, tx);
    state.ResumeTiming();
  }
  state.counters["bytes"] = static_cast<double>(count.peak);
  state.counters["bytes_per_job"] = static_cast<double>(count.peak) / sc.jobs;
  state.counters["ranks"] = sc.ranks;
  state.counters["slots"] = sc.slots;
  state.counters["jobs"] = sc.jobs;
  state.counters["payload"] = sc.payload;
}

std::string on_off(bool b) { return b ? "on" : "off"; }

// ->UseManualTime(), and a fixed number of passes when SUMCAST_BENCH_PASSES says so.
void timed(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
  if (const char* p = std::getenv("SUMCAST_BENCH_PASSES"); p != nullptr && std::atoi(p) > 0) {
    b->Iterations(std::atoi(p));
  }
}

void register_all() {
  const Dtype dtypes[] = {Dtype::kFp32, Dtype::kBf16};
  const uint32_t payloads[] = {256, 1024, 4096};
  for (const Dtype d : dtypes) {
    for (const uint32_t p : payloads) {
      for (const bool icrc : {true, false}) {
        const std::string tail =
            std::string(wire::dtype_name(d)) + "/payload:" + std::to_string(p) + "/icrc:" + on_off(icrc);
        for (const uint32_t n : {2u, 8u, 64u}) {
          Scenario s;
          s.dtype = d;
          s.payload = p;
          s.icrc = icrc;
          s.ranks = n;
          benchmark::RegisterBenchmark(("engine/" + tail + "/n:" + std::to_string(n)).c_str(), run_engine, s)
              ->Apply(timed);
        }
        Scenario s;
        s.dtype = d;
        s.payload = p;
        s.icrc = icrc;
        s.ranks = 8;
        benchmark::RegisterBenchmark(("floor/" + tail + "/n:8").c_str(), run_floor, s)->Apply(timed);
      }
      // The floor's baseline: the same frames copied (their length depends on the payload alone,
      // so once per dtype x payload: ICRC off, n = 8 like the floor).
      Scenario s;
      s.dtype = d;
      s.payload = p;
      s.icrc = false;
      s.ranks = 8;
      benchmark::RegisterBenchmark(
          ("memcpy/" + std::string(wire::dtype_name(d)) + "/payload:" + std::to_string(p) + "/n:8").c_str(), run_memcpy,
          s)
          ->Apply(timed);
    }
  }
  // Deterministic mode against engine/... (and scale/ranks:256) with the same frames.
  for (const Dtype d : dtypes) {
    for (const uint32_t n : {2u, 8u, 64u, 256u}) {
      Scenario s;
      s.dtype = d;
      s.ranks = n;
      s.deterministic = true;
      benchmark::RegisterBenchmark(
          ("deterministic/" + std::string(wire::dtype_name(d)) + "/payload:1024/icrc:on/n:" + std::to_string(n))
              .c_str(),
          run_engine, s)
          ->Apply(timed);
    }
  }
  // UDP checksums on every result (dataplane.udp_checksum) against engine/...: fp32, ICRC on, n = 8.
  for (const uint32_t p : {1024u, 4096u}) {
    Scenario s;
    s.payload = p;
    s.ranks = 8;
    s.udp_checksum = true;
    benchmark::RegisterBenchmark(("udp_checksum/fp32/payload:" + std::to_string(p) + "/icrc:on/n:8").c_str(),
                                 run_engine, s)
        ->Apply(timed);
  }
  // Frames for another appliance, dropped: 1 KiB fp32, ICRC on, n = 8.
  {
    Scenario s;
    s.ranks = 8;
    benchmark::RegisterBenchmark("not_for_us/fp32/payload:1024/icrc:on/n:8", run_not_for_us, s)->Apply(timed);
  }
  // Results by multicast against replication: 1 KiB fp32, ICRC on.
  for (const uint32_t n : {8u, 64u}) {
    Scenario s;
    s.ranks = n;
    benchmark::RegisterBenchmark(("multicast/fp32/payload:1024/icrc:on/n:" + std::to_string(n)).c_str(),
                                 run_multicast_vs_replication, s)
        ->Apply(timed);
  }
  // Scaling of the per-packet cost: 1 KiB fp32, ICRC on.
  for (const uint32_t n : {2u, 4u, 8u, 16u, 32u, 64u, 128u, 256u}) {
    Scenario s;
    s.ranks = n;
    benchmark::RegisterBenchmark(("scale/ranks:" + std::to_string(n)).c_str(), run_engine, s)->Apply(timed);
  }
  for (const uint32_t slots : {8u, 32u, 128u, 512u, 1024u}) {
    Scenario s;
    s.ranks = 2;  // two rounds of 1024 slots x 2 ranks keep the frame set near 4 MiB
    s.slots = slots;
    benchmark::RegisterBenchmark(("scale/slots:" + std::to_string(slots)).c_str(), run_engine, s)->Apply(timed);
  }
  for (const uint32_t jobs : {1u, 4u, 16u, 64u}) {
    Scenario s;
    s.ranks = 8;
    s.jobs = jobs;
    benchmark::RegisterBenchmark(("scale/jobs:" + std::to_string(jobs)).c_str(), run_engine, s)->Apply(timed);
  }
  for (const size_t kib : {size_t{512}, size_t{1024}, size_t{4096}, size_t{16384}, size_t{65536}}) {
    Scenario s;
    s.ranks = 8;
    s.feed_bytes = kib << 10;
    benchmark::RegisterBenchmark(("scale/feed_KiB:" + std::to_string(kib)).c_str(), run_engine, s)->Apply(timed);
  }
  // Appliance memory.
  auto memory = [](uint32_t n, uint32_t slots, uint32_t jobs, Dtype d, uint32_t payload, bool det = false) {
    Scenario s;
    s.deterministic = det;
    s.ranks = n;
    s.slots = slots;
    s.jobs = jobs;
    s.dtype = d;
    s.payload = payload;
    const std::string name = std::string(det ? "memory/deterministic/" : "memory/") + "ranks:" + std::to_string(n) +
                             "/slots:" + std::to_string(slots) + "/jobs:" + std::to_string(jobs) + "/" +
                             wire::dtype_name(d) + "/payload:" + std::to_string(payload);
    benchmark::RegisterBenchmark(name.c_str(), run_memory, s)->Unit(benchmark::kMicrosecond)->Iterations(3);
  };
  for (const uint32_t n : {2u, 4u, 8u, 16u, 32u, 64u, 128u, 256u}) memory(n, 64, 1, Dtype::kFp32, 1024);
  for (const uint32_t slots : {8u, 32u, 128u, 512u, 1024u}) memory(8, slots, 1, Dtype::kFp32, 1024);
  for (const uint32_t jobs : {1u, 4u, 16u, 64u}) memory(8, 64, jobs, Dtype::kFp32, 1024);
  memory(8, 64, 1, Dtype::kBf16, 1024);
  memory(8, 64, 1, Dtype::kFp32, 4096);
  memory(256, 1024, 64, Dtype::kFp32, 4096);  // every limit at its default maximum
  for (const uint32_t n : {8u, 64u, 256u}) {  // staging: + local slots x n x payload per job
    memory(n, 64, 1, Dtype::kFp32, 1024, true);
    memory(n, 64, 1, Dtype::kBf16, 1024, true);
  }
}

}  // namespace
}  // namespace sumcast::engine

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  sumcast::engine::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
