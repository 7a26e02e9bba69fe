// Summation kernels vs memcpy. Every row reports bytes of *source* (wire elements) consumed per
// second, so accumulate/<isa>/<dtype>/<size> and memcpy/<size> compare directly (ratios.py prints
// the ratios and checks the targets listed there). Chunk sizes are source bytes: 16 KiB stays
// in L1 with its accumulator, 256 KiB in L2, 64 MiB goes to DRAM. Sources sit 30 bytes past a
// 64-byte boundary, where a payload lands in an mbuf (headroom 128 + wire::kPayloadOffset 94);
// accumulators and memcpy destinations are 64-byte aligned, as the engine allocates them.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "sumcast/kernels/kernels.h"

namespace sumcast::kernels {
namespace {

using wire::Dtype;
using wire::ReduceOp;

constexpr size_t kSourceMisalignment = 30;
constexpr Dtype kDtypes[] = {Dtype::kFp32, Dtype::kFp16, Dtype::kBf16, Dtype::kInt32, Dtype::kFp64};

struct Size {
  size_t bytes;
  const char* name;
};
constexpr Size kSizes[] = {{16 << 10, "16KiB"}, {256 << 10, "256KiB"}, {64 << 20, "64MiB"}};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeDeleter>;

AlignedBytes allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (p == nullptr) std::abort();
  std::memset(p, 0, rounded);  // fault every page in before timing
  return AlignedBytes(p);
}

// Ordinary values in [-1, 1): sums stay normal (no subnormal assists), never NaN. The first
// 16 Ki elements are random, the rest repeats them (keeps 64 MiB set-ups short).
void fill_source(Dtype d, uint8_t* p, size_t n) {
  constexpr size_t kDistinct = 16384;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const size_t distinct = n < kDistinct ? n : kDistinct;
  for (size_t i = 0; i < distinct; ++i) {
    const float f = value(rng);
    switch (d) {
      case Dtype::kFp32:
        std::memcpy(p + 4 * i, &f, 4);
        break;
      case Dtype::kFp16: {
        const uint16_t h = float_to_half(f);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case Dtype::kBf16: {
        const uint16_t b = float_to_bf16(f);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case Dtype::kInt32: {
        const auto v = static_cast<int32_t>(rng());
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case Dtype::kFp64: {
        const auto x = static_cast<double>(f);
        std::memcpy(p + 8 * i, &x, 8);
        break;
      }
    }
  }
  const size_t block = distinct * wire::dtype_size(d);
  for (size_t done = block; done < n * wire::dtype_size(d); done += block) {
    std::memcpy(p + done, p, std::min(block, n * wire::dtype_size(d) - done));
  }
}

enum class Kind { kAccumulate, kLoad, kFinish };

void bm_kernel(benchmark::State& state, Isa isa, Kind kind, Dtype d, ReduceOp op, size_t src_bytes) {
  const KernelTable* table = kernels_for(isa);
  const size_t n = src_bytes / wire::dtype_size(d);
  AlignedBytes src_storage = allocate(src_bytes + 64);
  uint8_t* src = src_storage.get() + kSourceMisalignment;
  AlignedBytes acc = allocate(n * wire::accumulator_size(d));
  fill_source(d, src, n);
  const int di = static_cast<int>(d);
  table->load[di](acc.get(), src, n);
  switch (kind) {
    case Kind::kAccumulate: {
      const AccumulateFn fn = table->accumulate[di][static_cast<int>(op)];
      for (auto _ : state) {
        fn(acc.get(), src, n);
        benchmark::ClobberMemory();
      }
      break;
    }
    case Kind::kLoad: {
      const LoadFn fn = table->load[di];
      for (auto _ : state) {
        fn(acc.get(), src, n);
        benchmark::ClobberMemory();
      }
      break;
    }
    case Kind::kFinish: {  // writes the wire dtype back over the source buffer
      const FinishFn fn = table->finish[di];
      for (auto _ : state) {
        fn(src, acc.get(), n);
        benchmark::ClobberMemory();
      }
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(src_bytes));
}

void bm_memcpy(benchmark::State& state, size_t bytes) {
  AlignedBytes src_storage = allocate(bytes + 64);
  uint8_t* src = src_storage.get() + kSourceMisalignment;
  AlignedBytes dst = allocate(bytes);
  fill_source(Dtype::kFp32, src, bytes / 4);
  for (auto _ : state) {
    std::memcpy(dst.get(), src, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void register_all() {
  for (const Size& size : kSizes) {
    benchmark::RegisterBenchmark((std::string("memcpy/") + size.name).c_str(), bm_memcpy, size.bytes);
    for (int i = 0; i < kIsaCount; ++i) {
      const auto isa = static_cast<Isa>(i);
      if (!cpu_supports(isa)) continue;
      for (Dtype d : kDtypes) {
        const std::string suffix = std::string(isa_name(isa)) + "/" + wire::dtype_name(d) + "/" + size.name;
        benchmark::RegisterBenchmark(("accumulate_sum/" + suffix).c_str(), bm_kernel, isa, Kind::kAccumulate, d,
                                     ReduceOp::kSum, size.bytes);
      }
    }
  }
  // Secondary rows at L2 size: the other ops, and the widening load / narrowing finish.
  const Size& l2 = kSizes[1];
  for (int i = 0; i < kIsaCount; ++i) {
    const auto isa = static_cast<Isa>(i);
    if (!cpu_supports(isa)) continue;
    for (Dtype d : {Dtype::kFp32, Dtype::kBf16}) {
      for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
        const std::string name = std::string("accumulate_") + wire::reduce_op_name(op) + "/" + isa_name(isa) + "/" +
                                 wire::dtype_name(d) + "/" + l2.name;
        benchmark::RegisterBenchmark(name.c_str(), bm_kernel, isa, Kind::kAccumulate, d, op, l2.bytes);
      }
    }
    for (Dtype d : {Dtype::kFp16, Dtype::kBf16}) {
      const std::string suffix = std::string(isa_name(isa)) + "/" + wire::dtype_name(d) + "/" + l2.name;
      benchmark::RegisterBenchmark(("load/" + suffix).c_str(), bm_kernel, isa, Kind::kLoad, d, ReduceOp::kSum,
                                   l2.bytes);
      benchmark::RegisterBenchmark(("finish/" + suffix).c_str(), bm_kernel, isa, Kind::kFinish, d, ReduceOp::kSum,
                                   l2.bytes);
    }
  }
}

}  // namespace
}  // namespace sumcast::kernels

int main(int argc, char** argv) {
  sumcast::kernels::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
