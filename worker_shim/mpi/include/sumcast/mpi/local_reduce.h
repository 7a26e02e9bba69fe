// The arithmetic of the intra-node path (worker_shim/mpi/README.md, "Intra-node reduction"):
// how a piece of a call is cut into one shard per local rank, and the reduction of the local
// ranks' copies of a shard with the appliance's own kernels (sumcast::kernels), so a host sums
// exactly as the appliance does: fp16/bf16 are accumulated in fp32 and rounded once per host.
//
// Thread safety: reentrant; a LocalReducer is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sumcast/wire/format.h"

namespace sumcast::mpi {

struct ElemRange {
  size_t begin = 0;
  size_t end = 0;  // one past the last
  size_t size() const { return end - begin; }
};

// Shard `index` of `parts` contiguous shards of `count` elements: shard i is
// [count*i/parts, count*(i+1)/parts), so the sizes differ by at most one and every rank
// computes the same cut. Precondition: parts > 0, index < parts.
ElemRange shard_of(size_t count, size_t parts, size_t index);

class LocalReducer {
 public:
  // dst[0..n) = srcs[0][i] op srcs[1][i] op ... (nsrc >= 1 sources of n elements each, in wire
  // dtype layout, little-endian). dst may be one of the sources. No alignment needed.
  void reduce(wire::Dtype dtype, wire::ReduceOp op, const void* const* srcs, size_t nsrc, void* dst, size_t n);

 private:
  std::vector<uint64_t> acc_;  // one block of accumulators (fp32 or wider)
};

}  // namespace sumcast::mpi
