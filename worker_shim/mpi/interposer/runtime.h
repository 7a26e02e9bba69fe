// The interposer's process-wide state: configuration, per-communicator set-up and jobs, the
// decision for each call, the non-blocking requests, statistics, and teardown.
//
// The decision rule (every rank must take the same one, or the ranks that went to the appliance
// wait for the ones that went to MPI): it depends only on what MPI requires to be identical on
// every rank of a collective (count, datatype, op, communicator) and on state the ranks of the
// communicator agreed on with a PMPI_Allreduce: that the configuration is usable and identical
// everywhere (fingerprint), that each appliance job was set up on every rank.
//
// Thread safety: MPI_THREAD_MULTIPLE programs may call from several threads; collectives on one
// communicator are ordered by the program (MPI's rule), global state is under mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "intranode.h"
#include "mpi_lib.h"
#include "sumcast/cuda/driver.h"
#include "sumcast/mpi/async_engine.h"
#include "sumcast/mpi/device_staging.h"
#include "sumcast/mpi/env_config.h"
#include "sumcast/mpi/stats.h"
#include "types.h"

namespace sumcast::mpi {

// What the interposer keeps for one communicator (cached as an MPI attribute, so a freed
// handle that MPI reuses never finds stale state).
struct CommState {
  bool active = false;  // the ranks agreed to use the appliance on this communicator
  int rank = 0;
  int size = 0;
  bool prepared = false;  // job base name chosen and intra-node layout set up
  std::string job_base;
  std::unique_ptr<Intranode> intranode;           // null: every rank is a member of the jobs (flat)
  std::map<uint32_t, std::shared_ptr<Job>> jobs;  // key: path, dtype, op
  std::vector<uint8_t> scratch;                   // MPI_Reduce_scatter_block out of place
  std::unique_ptr<DeviceStaging> staging;         // host copies of CUDA device buffers (blocking calls)
  uint64_t order = 0;                             // set-up order (teardown in reverse)
  // SUMCAST_MPI_FAILOVER_FALLBACK=mpi (docs/failover.md, "Both lost"): the blocking calls taken
  // on the flat path so far, the last one's result (a rank one call behind may need it), room for
  // an in-place call's result (its input must survive the call until it succeeded), a duplicate
  // of the communicator (the recovery's collectives then match none of the program's), and
  // whether every appliance was lost (from then on, every call goes to MPI).
  uint64_t calls_done = 0;
  std::vector<uint8_t> last_result;
  std::vector<uint8_t> in_place_result;
  MPI_Comm recovery = MPI_COMM_NULL;
  bool fallback = false;
};

// A call the interposer takes.
struct Plan {
  CommState* state = nullptr;
  std::shared_ptr<Job> job;
  WireType type;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  size_t elems = 0;  // wire elements
  uint64_t bytes = 0;
  bool intranode = false;
  // The call as MPI sees it (the fall-back to MPI runs it so).
  MPI_Datatype datatype = MPI_DATATYPE_NULL;
  MPI_Op mpi_op = MPI_OP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int64_t count = 0;
};

class Runtime {
 public:
  // The instance, created on the first call (after MPI_Init).
  static Runtime& get();
  // The instance if get() ran already, else nullptr (never creates it).
  static Runtime* existing();

  const MpiConfig& config() const { return config_; }
  Stats& stats() { return stats_; }
  AsyncEngine& engine() { return *engine_; }
  bool finalized() const { return finalized_.load(std::memory_order_acquire); }

  // Decides whether a call of `count` elements of `datatype` with `op` on `comm` goes to the
  // appliance; may run collective set-up on `comm` (every rank reaches it in the same call).
  // kind == kReduceScatterBlock: count is the whole buffer (recvcount x size).
  // Returns true and fills *plan, or false with *why.
  bool plan(CallKind kind, int64_t count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, bool allow_intranode,
            Plan* plan, PassReason* why);

  // SUMCAST_MPI_CHECK: compares (kind, count, taken) across the ranks of `comm`; aborts on a
  // mismatch, naming both sides. A no-op unless enabled.
  void check_decision(MPI_Comm comm, CallKind kind, int64_t count, bool taken);

  // Runs a planned blocking all-reduce (send may equal recv). With SUMCAST_MPI_FAILOVER_FALLBACK=mpi
  // and every appliance lost, completes it through MPI (fall_back).
  Status run_blocking(Plan& plan, const void* send, void* recv);

  // CUDA device buffers of a call plan() took. With SUMCAST_MPI_DEVICE_BUFFERS=mpi: false when
  // any rank of `comm` passed device memory (the ranks agree: one small PMPI_Allreduce, on every
  // rank); the call then goes to MPI. With the default (stage): true, without communication.
  bool device_policy(MPI_Comm comm, const void* send, const void* recv);
  // The communicator's staging of device buffers, bound to the CUDA driver as now known.
  DeviceStaging& staging(CommState& st);
  // The CUDA driver once the process has loaded it (looked for again on each call until then);
  // nullptr on hosts without CUDA.
  const cuda::Driver* cuda_driver();

  // A failed call: prints one error line and raises MPI_ERR_OTHER on `comm` (its error handler;
  // fatal by default). Returns what the handler returned.
  // `job`, when given, adds its counters to the message (the caller must not hold its mutex).
  int fail_call(MPI_Comm comm, CallKind kind, const Status& st, Job* job = nullptr);

  // MPI_Comm_free / MPI_Comm_disconnect on `comm`: leaves its jobs (after a barrier, so no member
  // leaves while another still waits for a result) and frees the intra-node resources.
  void comm_free(MPI_Comm comm);
  // MPI_Finalize, before PMPI_Finalize: statistics, then every job left.
  void finalize();

  // Non-blocking requests (generalized requests completed by the interposer).
  struct Request {
    std::shared_ptr<Pending> pending;
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t start_ns = 0;
    uint64_t bytes = 0;
    bool completed = false;                  // MPI_Grequest_complete called
    std::unique_ptr<DeviceStaging> staging;  // set when the call's buffers are device memory
    DeviceStaging::Buffers staged;
    void* greq = nullptr;  // the generalized request's extra state (alive until MPI frees it)
  };
  // Starts a planned MPI_Iallreduce and returns its generalized request.
  int start_iallreduce(Plan& plan, const void* send, void* recv, MPI_Request* request);
  // Any of our requests not yet freed? (cheap: the fast path of every MPI_Wait/Test.)
  bool have_requests() const { return request_count_.load(std::memory_order_acquire) != 0; }
  // Drives ours among reqs[0..n) without blocking; completes the generalized requests of the
  // finished ones. Returns how many of ours are still running; `ours` gets their positions.
  size_t drive(int n, const MPI_Request* reqs, std::vector<int>* ours);
  // Blocks up to `timeout_ms` for progress on the first running request of ours at `pos`.
  void step(const MPI_Request* reqs, const std::vector<int>& ours, int timeout_ms);
  // After a PMPI completion call: forgets ours at `ours` positions that MPI freed (now NULL).
  void forget_freed(const MPI_Request* reqs, const std::vector<int>& ours, const std::vector<MPI_Request>& before);

  static uint64_t now_ns();
  // Prints every communicator's jobs with their counters and the outstanding requests (debugging;
  // takes no lock that a blocked program thread could hold for long).
  void debug_dump();

 private:
  Runtime();
  CommState* state_for(MPI_Comm comm, int size);
  bool prepare(CommState& st, MPI_Comm comm);
  std::shared_ptr<Job> job_for(CommState& st, MPI_Comm comm, bool intranode, const WireType& t, wire::ReduceOp op);
  // Collective over comm: true when every rank is ok. Otherwise the lowest-numbered rank with a
  // problem not yet reported prints it as the one warning.
  bool agree(MPI_Comm comm, int rank, bool ok, const std::string& problem);
  void warn(const std::string& text);
  void warn_cuda(const std::string& why);
  void teardown_jobs(CommState& st);
  Status fall_back(Plan& plan, const void* send, void* recv, const Status& why);
  static int delete_attr(MPI_Comm comm, int keyval, void* attr, void* extra);

  MpiConfig config_;
  Status config_status_;
  std::string bind_ip_;
  uint64_t fingerprint_ = 0;
  Stats stats_;
  std::unique_ptr<AsyncEngine> engine_;
  int keyval_ = MPI_KEYVAL_INVALID;
  std::atomic<bool> disabled_{false};  // a set-up failed: nothing more goes to the appliance
  std::atomic<bool> warned_{false};    // this process printed, or saw printed, the one warning
  std::atomic<bool> finalized_{false};
  std::atomic<bool> error_printed_{false};
  std::atomic<const cuda::Driver*> cuda_{nullptr};
  std::unique_ptr<cuda::Driver> cuda_owner_;  // under mu_
  bool cuda_warned_ = false;                  // under mu_

  std::mutex mu_;                   // guards the members below
  std::vector<CommState*> states_;  // every live CommState
  uint64_t next_order_ = 0;
  uint64_t job_counter_ = 0;
  std::unordered_map<uint64_t, Request> requests_;  // key: the MPI_Request's bits
  std::atomic<size_t> request_count_{0};
};

}  // namespace sumcast::mpi
