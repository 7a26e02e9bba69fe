// A tiny out-of-band all-gather between the harness processes (NCCL does the same with its own
// bootstrap network): rank 0 serves a UNIX stream socket at a path in the file system, which
// processes in other network namespaces reach too; every rank sends its blob, rank 0 answers
// with all of them in rank order. Blocking, bounded by a deadline.
#pragma once

#include <string>
#include <vector>

namespace sumcast::nccl_test {

class Bootstrap {
 public:
  // Connects all `nranks` ranks through `path` (rank 0 creates it); waits up to timeout_ms.
  // Throws std::runtime_error on failure.
  Bootstrap(const std::string& path, int rank, int nranks, int timeout_ms);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Every rank passes a blob of the same size; returns all ranks' blobs, concatenated in rank order.
  std::string allgather(const std::string& mine);
  void barrier() { allgather(std::string(1, '\0')); }

 private:
  int rank_;
  int nranks_;
  int timeout_ms_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: fds of ranks 1..n-1; others: one fd to rank 0
  std::string path_;
};

}  // namespace sumcast::nccl_test
