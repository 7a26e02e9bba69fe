#include "sumcast/mpi/local_reduce.h"

#include <algorithm>

#include "sumcast/kernels/kernels.h"

namespace sumcast::mpi {
namespace {
// Elements per pass: 8192 accumulators (at most 64 KiB) stay in L2 while every source streams through.
constexpr size_t kBlockElems = 8192;
}  // namespace

ElemRange shard_of(size_t count, size_t parts, size_t index) {
  const auto at = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned __int128>(count) * i / parts); };
  return {at(index), at(index + 1)};
}

void LocalReducer::reduce(wire::Dtype dtype, wire::ReduceOp op, const void* const* srcs, size_t nsrc, void* dst,
                          size_t n) {
  const kernels::KernelTable& k = kernels::active_kernels();
  const auto d = static_cast<size_t>(dtype);
  const size_t esize = wire::dtype_size(dtype);
  if (acc_.size() < kBlockElems) acc_.resize(kBlockElems);  // 8 bytes per element covers every accumulator
  for (size_t off = 0; off < n; off += kBlockElems) {
    const size_t m = std::min(kBlockElems, n - off);
    const size_t byte_off = off * esize;
    k.load[d](acc_.data(), static_cast<const uint8_t*>(srcs[0]) + byte_off, m);
    for (size_t s = 1; s < nsrc; ++s) {
      k.accumulate[d][static_cast<size_t>(op)](acc_.data(), static_cast<const uint8_t*>(srcs[s]) + byte_off, m);
    }
    k.finish[d](static_cast<uint8_t*>(dst) + byte_off, acc_.data(), m);
  }
}

}  // namespace sumcast::mpi
