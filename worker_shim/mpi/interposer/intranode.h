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
// NUMA-aware plan: the ranks' NUMA nodes come from SUMCAST_MPI_TOPOLOGY (local rank i is GPU i of
// the described host) or, without it, from the CPU each rank runs on at set-up. When the ranks of
// a host span several NUMA nodes and some node has two or more, the reduce runs in two stages per
// piece: the ranks of each node reduce-scatter the node's inputs into a partial held in the
// segment of the node's first rank (segment layout [input][node partial][results]), barrier,
// then local rank l sums shard l of the nodes' partials: one read across the SMP link per byte and
// remote node instead of one per remote rank. fp16/bf16 keep the one-stage reduce (rounded once
// per host, as the appliance does). Every piece's stage runs and the bytes read on the own node
// and across nodes go to the statistics.
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
#include "sumcast/mpi/stats.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::mpi {

class Intranode {
 public:
  // Collective over `comm`. Returns nullptr with an OK status when the layout does not call for it
  // (one host, one rank per host, or hosts with different rank counts): the same answer on every
  // rank. Resource failures (shared memory) return a non-OK status on the ranks concerned; the
  // caller agrees on the outcome.
  // `topology_file` ("" to detect) gives each local rank's NUMA node; `stats` (may be null)
  // receives every piece's stage runs and bytes read.
  static Result<std::unique_ptr<Intranode>> create(MPI_Comm comm, uint64_t piece_bytes,
                                                   const std::string& topology_file, Stats* stats, std::string* layout);
  ~Intranode();  // no MPI calls: see free_collective()
  Intranode(const Intranode&) = delete;
  Intranode& operator=(const Intranode&) = delete;

  // Collective over the local and cross communicators: frees the window and both communicators.
  void free_collective();

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int cross_rank() const { return cross_rank_; }
  int cross_size() const { return cross_size_; }
  // Whether the reduce runs within NUMA nodes first (see above).
  bool numa_plan() const { return numa_plan_; }

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
  Stats* stats_ = nullptr;
  std::vector<int> numa_of_;              // per local rank: its NUMA node (os index)
  std::vector<std::vector<int>> groups_;  // local ranks per NUMA node, in node order
  size_t my_group_ = 0, my_pos_ = 0;      // this rank's group and its place in it
  bool numa_plan_ = false;
  std::vector<uint8_t*> partial_;  // per local rank: its node-partial area (used on each node's first rank)
  std::vector<const void*> group_srcs_;
};

}  // namespace sumcast::mpi
