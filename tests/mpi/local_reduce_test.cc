// The intra-node arithmetic: shard cuts, and the local reduction against a scalar reference for
// every dtype and op, across the kernel's block size and the burst sizes the kernels care about.
#include "sumcast/mpi/local_reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sumcast/kernels/kernels.h"

namespace sumcast::mpi {
namespace {

TEST(ShardOf, ShardsTileTheRangeAndDifferByAtMostOne) {
  for (size_t count : {0, 1, 3, 4, 31, 32, 257, 100003}) {
    for (size_t parts = 1; parts <= 9; ++parts) {
      size_t next = 0, lo = ~size_t{0}, hi = 0;
      for (size_t i = 0; i < parts; ++i) {
        const ElemRange r = shard_of(count, parts, i);
        EXPECT_EQ(r.begin, next) << count << "/" << parts << " shard " << i;
        next = r.end;
        lo = std::min(lo, r.size());
        hi = std::max(hi, r.size());
      }
      EXPECT_EQ(next, count) << count << "/" << parts;
      EXPECT_LE(hi - lo, 1u) << count << "/" << parts;
    }
  }
}

int input(size_t src, size_t i) { return static_cast<int>((i * 5 + src * 11) % 13) - 6; }

void store(wire::Dtype d, uint8_t* p, double v) {
  switch (d) {
    case wire::Dtype::kFp32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case wire::Dtype::kFp64:
      std::memcpy(p, &v, 8);
      break;
    case wire::Dtype::kInt32: {
      const auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case wire::Dtype::kFp16: {
      const uint16_t h = kernels::float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case wire::Dtype::kBf16: {
      const uint16_t h = kernels::float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

class LocalReduceExact : public ::testing::TestWithParam<std::tuple<wire::Dtype, wire::ReduceOp>> {};

TEST_P(LocalReduceExact, MatchesAScalarReferenceAtEverySize) {
  const auto [dtype, op] = GetParam();
  const size_t es = wire::dtype_size(dtype);
  LocalReducer reducer;
  for (size_t nsrc : {1, 2, 5}) {
    for (size_t n : {1, 3, 4, 31, 32, 257, 8192 + 5, 20000}) {
      std::vector<std::vector<uint8_t>> bufs(nsrc, std::vector<uint8_t>(n * es + 1));
      std::vector<const void*> srcs;
      for (size_t s = 0; s < nsrc; ++s) {
        for (size_t i = 0; i < n; ++i) store(dtype, bufs[s].data() + 1 + i * es, input(s, i));  // unaligned
        srcs.push_back(bufs[s].data() + 1);
      }
      std::vector<uint8_t> want(n * es), got(n * es);
      for (size_t i = 0; i < n; ++i) {
        int acc = input(0, i);
        for (size_t s = 1; s < nsrc; ++s) {
          const int x = input(s, i);
          acc = op == wire::ReduceOp::kSum ? acc + x : op == wire::ReduceOp::kMin ? std::min(acc, x) : std::max(acc, x);
        }
        store(dtype, want.data() + i * es, acc);
      }
      reducer.reduce(dtype, op, srcs.data(), nsrc, got.data(), n);
      EXPECT_EQ(got, want) << wire::dtype_name(dtype) << " " << wire::reduce_op_name(op) << " sources " << nsrc << " n "
                           << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndOps, LocalReduceExact,
    ::testing::Combine(::testing::Values(wire::Dtype::kFp32, wire::Dtype::kFp16, wire::Dtype::kBf16,
                                         wire::Dtype::kInt32, wire::Dtype::kFp64),
                       ::testing::Values(wire::ReduceOp::kSum, wire::ReduceOp::kMin, wire::ReduceOp::kMax)));

TEST(LocalReduce, DestinationMayBeTheFirstSource) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  const void* srcs[] = {a.data(), b.data()};
  LocalReducer r;
  r.reduce(wire::Dtype::kFp32, wire::ReduceOp::kSum, srcs, 2, a.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
}

TEST(LocalReduce, Fp16IsRoundedOnceFromAnFp32Sum) {
  // 2048 + 1 + 1: summed pairwise in fp16, each +1 rounds away (2049 is not representable) and
  // the result is 2048; summed in fp32 and rounded once it is 2050, which fp16 represents.
  const uint16_t big = kernels::float_to_half(2048), one = kernels::float_to_half(1);
  const void* srcs[] = {&big, &one, &one};
  uint16_t out = 0;
  LocalReducer r;
  r.reduce(wire::Dtype::kFp16, wire::ReduceOp::kSum, srcs, 3, &out, 1);
  EXPECT_EQ(kernels::half_to_float(out), 2050.0f);
}

}  // namespace
}  // namespace sumcast::mpi
