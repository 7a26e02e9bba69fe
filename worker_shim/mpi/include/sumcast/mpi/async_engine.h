// Non-blocking all-reduces for MPI_Iallreduce: each appliance job (a shim::Communicator, which
// allows one thread at a time) is guarded by its own mutex, and an optional background thread
// moves the packets of every started call while the program computes, so a rank that sits in
// some other MPI call, or in no MPI call at all, still feeds the appliance and answers its
// results (MPI progresses non-blocking collectives inside any MPI call; the interposer's calls
// must not depend on the program calling MPI_Wait soon). The thread never calls MPI.
//
// Thread safety: every method may be called from any thread. A Pending is completed exactly once,
// by whichever thread first sees its call finish.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/shim/communicator.h"
#include "sumcast/status.h"

namespace sumcast::mpi {

// One appliance job: its communicator and the mutex every user of it holds.
struct Job {
  std::mutex mu;
  std::unique_ptr<shim::Communicator> comm;
  std::string name;  // the job name registered with the appliances
};

// One started non-blocking all-reduce.
class Pending {
 public:
  bool done() const { return done_.load(std::memory_order_acquire); }
  // The outcome; valid once done() returned true.
  const Status& status() const { return status_; }
  Job& job() const { return *job_; }

 private:
  friend class AsyncEngine;
  std::shared_ptr<Job> job_;
  uint64_t id_ = 0;
  std::atomic<bool> done_{false};
  Status status_;
};

class AsyncEngine {
 public:
  // With `background_thread`, a thread (started on the first call) progresses every outstanding call.
  explicit AsyncEngine(bool background_thread);
  ~AsyncEngine();  // stop()s
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Starts an all-reduce of `count` elements on `job` (see shim::Communicator::start_allreduce
  // for the buffer rules).
  Result<std::shared_ptr<Pending>> start(const std::shared_ptr<Job>& job, const void* send, void* recv, size_t count);
  // Progress without blocking; true when `p` finished.
  bool test(Pending& p);
  // Waits up to `timeout_ms` for a packet on p's job (or the background thread's completing it),
  // then progresses; true when `p` finished.
  bool step(Pending& p, int timeout_ms);
  // Blocks until `p` finished.
  void wait(Pending& p);
  // Stops the background thread (pending calls stay pending; test/wait still work). Idempotent.
  void stop();
  // Calls started and not yet seen finished.
  size_t outstanding() const;

 private:
  static void complete_locked(Pending& p);
  void run();

  const bool background_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Pending>> active_;  // guarded by mu_
  bool stopping_ = false;                         // guarded by mu_
  std::thread thread_;
};

}  // namespace sumcast::mpi
