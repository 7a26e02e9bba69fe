// The interposer's recovery once every appliance of a communicator's jobs is lost and
// SUMCAST_MPI_FAILOVER_FALLBACK=mpi (docs/failover.md, "Every aggregator lost"): the ranks meet in
// one PMPI_Allreduce (MPI_MAX over two long longs) of what fallback_key() gives, and each learns
// from the result (fallback_roles()) how far the others got and what to do.
//
// Why the ranks are at most one call apart: a rank completes blocking call k only after every
// rank sent its part of call k, so every rank is at least in call k and has completed call k - 1
// (blocking calls on a communicator run one after the other, in the same order on every rank).
// MPI-free, so that the arithmetic is unit-tested.
#pragma once

#include <array>
#include <cstdint>

namespace sumcast::mpi {

// This rank's contribution: its count of completed calls, and among the ranks with the most, the
// lowest rank wins.
std::array<long long, 2> fallback_key(uint64_t calls_done, int rank, int size);

struct FallbackRoles {
  bool valid = false;   // false: the ranks are more than one call apart (cannot be) or the input is bad
  uint64_t least = 0;   // the fewest calls any rank completed
  uint64_t most = 0;    // the most (least or least + 1)
  int root = 0;         // the lowest rank that completed `most` calls
  bool behind = false;  // this rank completed `least` < `most`: it gets that call's result from root
};

// What the all-reduced keys say to a rank that completed `calls_done` calls.
FallbackRoles fallback_roles(const std::array<long long, 2>& max_keys, uint64_t calls_done, int size);

}  // namespace sumcast::mpi
