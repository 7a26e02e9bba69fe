// The intra-node path (README.md, "Intra-node reduction"): the ranks of one host (an
// MPI_COMM_TYPE_SHARED split) reduce-scatter each piece of a call in shared memory, local rank l
// sends only shard l of the host's sum to the appliance, in a job made of the l-th ranks of every
// host (the "cross" communicator), and every rank copies all shards' results back: per host, the
// data crosses the network once in each direction, carried by all local ranks in parallel.
//
// Layout of each rank's shared segment: [input piece: piece_bytes][result shard, 2 buffers]. Per
// piece: copy in, barrier, reduce my shard of all inputs, appliance all-reduce of my shard, barrier,
// copy every rank's result shard out. The result shards alternate between two buffers, so one
// barrier per phase suffices (a rank still copying out piece k reads buffers that piece k+1 does
// not write).
//
// Thread safety: one thread at a time (MPI's rule for collectives on one communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpi_lib.h"
#include "sumcast/mpi/async_engine.h"
#include "sumcast/mpi/local_reduce.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::mpi {

class Intranode {
 public:
  // Collective over `comm`. Returns nullptr with an OK status when the layout does not call for it
  // (one host, one rank per host, or hosts with different rank counts): the same answer on every
  // rank. Resource failures (shared memory) return a non-OK status on the ranks concerned; the
  // caller agrees on the outcome.
  static Result<std::unique_ptr<Intranode>> create(MPI_Comm comm, uint64_t piece_bytes, std::string* layout);
  ~Intranode();  // no MPI calls: see free_collective()
  Intranode(const Intranode&) = delete;
  Intranode& operator=(const Intranode&) = delete;

  // Collective over the local and cross communicators: frees the window and both communicators.
  void free_collective();

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int cross_rank() const { return cross_rank_; }
  int cross_size() const { return cross_size_; }

  // All-reduce of `count` wire elements (send may equal recv) through the shared segments and
  // `job` (this rank's cross job). Collective over the original communicator.
  Status allreduce(Job& job, wire::Dtype dtype, wire::ReduceOp op, const void* send, void* recv, size_t count);

 private:
  Intranode() = default;
  void sync();

  MPI_Comm local_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  bool locked_ = false;
  int local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1;
  uint64_t piece_bytes_ = 0;
  uint64_t result_bytes_ = 0;        // one result buffer
  std::vector<uint8_t*> input_;      // per local rank
  std::vector<uint8_t*> result_[2];  // per local rank, per parity
  std::vector<const void*> srcs_;
  unsigned parity_ = 0;
  LocalReducer reducer_;
};

}  // namespace sumcast::mpi
