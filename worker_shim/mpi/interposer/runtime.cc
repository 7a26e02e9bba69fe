#include "runtime.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sumcast/mpi/fallback.h"

namespace sumcast::mpi {
namespace {

constexpr uint64_t kNone = ~uint64_t{0};

uint32_t job_key(bool intranode, wire::Dtype d, wire::ReduceOp op) {
  return (intranode ? 1u << 16 : 0u) | static_cast<uint32_t>(d) << 8 | static_cast<uint32_t>(op);
}

uint64_t request_key(MPI_Request r) {
  static_assert(sizeof(MPI_Request) <= sizeof(uint64_t));
  uint64_t k = 0;
  std::memcpy(&k, &r, sizeof r);  // NOLINT(bugprone-sizeof-expression): the handle's own bits (a pointer in Open MPI)
  return k;
}

int world_rank() {
  int r = 0;
  pmpi.Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The generalized request of an MPI_Iallreduce. extra_state: a heap copy of the Pending handle.
struct GreqState {
  std::shared_ptr<Pending> pending;
  bool copy_failed = false;  // the result could not be copied back to the device buffer
};

int greq_query(void* extra, MPI_Status* status) {
  const auto* g = static_cast<GreqState*>(extra);
  pmpi.Status_set_elements(status, MPI_BYTE, 0);
  pmpi.Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_ANY_SOURCE;  // an empty status, as MPI returns for collectives
  status->MPI_TAG = MPI_ANY_TAG;
  return g->pending->status().ok() && !g->copy_failed ? MPI_SUCCESS : MPI_ERR_OTHER;
}

int greq_free(void* extra) {
  delete static_cast<GreqState*>(extra);
  return MPI_SUCCESS;
}

int greq_cancel(void*, int) { return MPI_SUCCESS; }  // an appliance call cannot be withdrawn

// What MPI_COMM_NULL_COPY_FN does (a duplicated communicator starts without our state), as a
// function of our own: Open MPI's is a symbol of the MPI library, which this code never names.
int null_copy(MPI_Comm, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

// "job NAME: calls C, chunks K, results R, retransmissions T, ..." for error messages.
std::string describe(const Job& job) {
  std::string out = "job " + job.name + ":";
  for (const auto& [name, value] : job.comm->stat_list()) {
    if (value != 0) out += " " + name + " " + std::to_string(value);
  }
  return out;
}

}  // namespace

uint64_t Runtime::now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace {
std::atomic<Runtime*> live_instance{nullptr};  // set once by Runtime::get()
}  // namespace

Runtime* Runtime::existing() { return live_instance.load(std::memory_order_acquire); }

Runtime& Runtime::get() {
  static Runtime* instance = [] {
    auto* rt = new Runtime();  // never destroyed: MPI may call back after exit handlers
    live_instance.store(rt, std::memory_order_release);
    return rt;
  }();
  return *instance;
}

Runtime::Runtime() {
  LoadedConfig lc = load_config([](const char* name) { return std::getenv(name); });
  config_ = std::move(lc.config);
  config_status_ = std::move(lc.status);
  if (config_status_.ok() && config_.enable) {
    auto b = resolve_bind(config_.bind);
    if (b.ok()) {
      bind_ip_ = *b;
    } else {
      config_status_ = Status::invalid_argument("SUMCAST_MPI_BIND='" + config_.bind + "': " + b.status().message());
    }
  }
  fingerprint_ = fingerprint(config_);
  const char* help = std::getenv("SUMCAST_MPI_HELP");
  if (help != nullptr && std::strcmp(help, "0") != 0 && world_rank() == 0) {
    std::fprintf(stderr, "sumcast-mpi: environment variables\n%s", env_table_markdown().c_str());
  }
  engine_ = std::make_unique<AsyncEngine>(config_.progress_thread);
  pmpi.Comm_create_keyval(null_copy, &Runtime::delete_attr, &keyval_, nullptr);
}

int Runtime::delete_attr(MPI_Comm, int, void* attr, void*) {
  auto* st = static_cast<CommState*>(attr);
  Runtime& rt = get();
  {
    std::lock_guard<std::mutex> lock(rt.mu_);
    std::erase(rt.states_, st);
  }
  delete st;  // its jobs leave the appliance (their Pending calls keep them alive until done)
  return MPI_SUCCESS;
}

void Runtime::warn(const std::string& text) {
  std::fprintf(stderr, "sumcast-mpi: WARNING: %s; passing the calls to MPI\n", text.c_str());
  std::fflush(stderr);
}

bool Runtime::agree(MPI_Comm comm, int rank, bool ok, const std::string& problem) {
  unsigned long long in[2] = {ok ? 1ull : 0ull,
                              !ok && !problem.empty() ? static_cast<unsigned long long>(rank) : kNone};
  unsigned long long out[2] = {0, 0};
  pmpi.Allreduce(in, out, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
  if (out[0] == 1) return true;
  if (out[1] == static_cast<unsigned long long>(rank)) warn(problem);
  if (out[1] != kNone) warned_.store(true);
  return false;
}

CommState* Runtime::state_for(MPI_Comm comm, int size) {
  void* attr = nullptr;
  int flag = 0;
  pmpi.Comm_get_attr(comm, keyval_, &attr, &flag);
  if (flag != 0) return static_cast<CommState*>(attr);

  // First use of this communicator: agree that the configuration is usable and identical.
  auto st = std::make_unique<CommState>();
  pmpi.Comm_rank(comm, &st->rank);
  st->size = size;
  const bool ok = config_.enable && config_status_.ok() && !disabled_.load();
  std::string problem;
  if (config_.enable && !config_status_.ok() && !warned_.load()) problem = config_status_.message();
  unsigned long long in[4] = {ok ? 1ull : 0ull, problem.empty() ? kNone : static_cast<unsigned long long>(st->rank),
                              fingerprint_, ~fingerprint_};
  unsigned long long out[4] = {0, 0, 0, 0};
  pmpi.Allreduce(in, out, 4, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
  const bool same = out[2] == ~out[3];
  st->active = out[0] == 1 && same;
  if (out[1] != kNone) {
    if (out[1] == static_cast<unsigned long long>(st->rank)) warn("configuration: " + problem);
    warned_.store(true);
  } else if (!same) {
    if (st->rank == 0 && !warned_.load()) {
      warn(
          "the SUMCAST_MPI_* settings differ between the ranks of a communicator (they must be the same "
          "everywhere: use mpirun -x)");
    }
    warned_.store(true);
  }
  CommState* raw = st.release();
  pmpi.Comm_set_attr(comm, keyval_, raw);
  std::lock_guard<std::mutex> lock(mu_);
  states_.push_back(raw);
  return raw;
}

bool Runtime::prepare(CommState& st, MPI_Comm comm) {
  char name[64] = {};
  if (st.rank == 0) {
    char host[128] = {};
    gethostname(host, sizeof host - 1);
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&](const void* p, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<const uint8_t*>(p)[i];
        h *= 0x100000001b3ull;
      }
    };
    const pid_t pid = getpid();
    const uint64_t t = now_ns();
    mix(host, std::strlen(host));
    mix(&pid, sizeof pid);
    mix(&t, sizeof t);
    uint64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = job_counter_++;
    }
    std::snprintf(name, sizeof name, "%s-%08x-%llu", config_.job_prefix.c_str(), static_cast<unsigned>(h ^ (h >> 32)),
                  static_cast<unsigned long long>(n));
  }
  pmpi.Bcast(name, sizeof name, MPI_CHAR, 0, comm);
  name[sizeof name - 1] = '\0';
  st.job_base = name;
  if (config_.fallback_mpi) pmpi.Comm_dup(comm, &st.recovery);  // collective: every rank prepares in this call
  std::string layout = "off";
  if (config_.intranode) {
    auto r = Intranode::create(comm, config_.shm_bytes, config_.topology_file, &stats_, &layout);
    const bool ok = r.ok();
    if (agree(comm, st.rank, ok, ok ? std::string() : "intra-node set-up: " + r.status().message())) {
      st.intranode = std::move(r).value();
      if (!st.intranode) layout += ": flat";
    } else {
      layout = "failed: flat";  // every rank goes on without it (the resources it made are left to MPI_Finalize)
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.order = next_order_++;
  }
  st.prepared = true;
  if (config_.verbose && st.rank == 0) {
    std::fprintf(stderr, "sumcast-mpi: communicator of %d ranks: jobs %s.*, intra-node %s, threshold %llu bytes\n",
                 st.size, st.job_base.c_str(), layout.c_str(),
                 static_cast<unsigned long long>(config_.threshold_bytes));
  }
  return true;
}

std::shared_ptr<Job> Runtime::job_for(CommState& st, MPI_Comm comm, bool intranode, const WireType& t,
                                      wire::ReduceOp op) {
  const uint32_t key = job_key(intranode, t.dtype, op);
  auto it = st.jobs.find(key);
  if (it != st.jobs.end()) return it->second;

  shim::CommConfig cc;
  cc.job_name = st.job_base + (intranode ? ".x" + std::to_string(st.intranode->local_rank()) : std::string(".f")) +
                "." + wire::dtype_name(t.dtype) + "." + wire::reduce_op_name(op);
  cc.rank = static_cast<uint16_t>(intranode ? st.intranode->cross_rank() : st.rank);
  cc.world_size = static_cast<uint16_t>(intranode ? st.intranode->cross_size() : st.size);
  cc.appliances = config_.appliances;
  cc.token = config_.token;
  cc.dtype = t.dtype;
  cc.op = op;
  cc.payload_bytes = config_.payload_bytes;
  cc.payload_explicit = config_.payload_explicit;
  cc.slots = static_cast<uint16_t>(config_.slots);
  cc.multicast = config_.multicast;
  cc.loss_notices = config_.loss_notices;
  cc.bind_ip = bind_ip_;
  cc.rto_initial_us = config_.rto_us;
  cc.busy_poll_us = config_.busy_poll_us;
  cc.udp_gro = config_.udp_gro;
  cc.udp_gso = config_.udp_gso;
  cc.send_queue_us = config_.send_queue_us;
  cc.dscp = config_.dscp;
  cc.ecn = config_.ecn;
  cc.repair_dscp = config_.repair_dscp;
  cc.rto_max_us = std::max<uint32_t>(config_.rto_us, 200000);
  cc.cnp_reaction = config_.cnp_reaction;
  cc.window_cut_percent = config_.window_cut;
  cc.window_step = config_.window_step;
  cc.retries = config_.retries;
  cc.op_timeout_ms = config_.op_timeout_ms;
  cc.failover = config_.failover;
  cc.failover_after_ms = config_.failover_after_ms;
  cc.connect_timeout_ms = config_.connect_timeout_ms;
  cc.register_timeout_ms = config_.register_timeout_ms;
  auto c = shim::Communicator::create(cc);
  const bool ok = c.ok();
  std::string problem;
  if (!ok) problem = "cannot set up appliance job '" + cc.job_name + "': " + c.status().to_string();
  if (!agree(comm, st.rank, ok, problem)) {
    st.active = false;
    disabled_.store(true);  // later communicators agree to stay with MPI, without another warning
    return nullptr;
  }
  auto job = std::make_shared<Job>();
  job->comm = std::move(c).value();
  job->name = cc.job_name;
  st.jobs.emplace(key, job);
  return job;
}

bool Runtime::plan(CallKind kind, int64_t count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, bool allow_intranode,
                   Plan* plan, PassReason* why) {
  if (count <= 0) {
    *why = PassReason::kSmall;
    return false;
  }
  const auto t = wire_type(datatype);
  if (!t) {
    *why = PassReason::kDatatype;
    return false;
  }
  const auto o = wire_op(op);
  if (!o || (t->sum_only && *o != wire::ReduceOp::kSum)) {
    *why = PassReason::kOp;
    return false;
  }
  int inter = 0, size = 0;
  pmpi.Comm_test_inter(comm, &inter);
  if (inter == 0) pmpi.Comm_size(comm, &size);
  if (inter != 0 || size < 2 || size > 65535) {
    *why = PassReason::kComm;
    return false;
  }
  CommState* st = state_for(comm, size);
  if (!st->active) {
    *why = st->prepared ? PassReason::kSetup : PassReason::kDisabled;
    return false;
  }
  if (st->fallback) {  // every appliance was lost: MPI from then on, on every rank (they agreed)
    *why = PassReason::kFallback;
    return false;
  }
  if ((config_.calls & call_bit(kind)) == 0) {
    *why = PassReason::kCallOff;
    return false;
  }
  const uint64_t bytes = static_cast<uint64_t>(count) * t->mpi_size;
  if (bytes < config_.threshold_bytes) {
    *why = PassReason::kSmall;
    return false;
  }
  if (!st->prepared) prepare(*st, comm);
  const bool intra = allow_intranode && st->intranode != nullptr;
  auto job = job_for(*st, comm, intra, *t, *o);
  if (!job) {
    *why = PassReason::kSetup;
    return false;
  }
  plan->state = st;
  plan->job = std::move(job);
  plan->type = *t;
  plan->op = *o;
  plan->elems = static_cast<size_t>(count) * t->mult;
  plan->bytes = bytes;
  plan->intranode = intra;
  plan->datatype = datatype;
  plan->mpi_op = op;
  plan->comm = comm;
  plan->count = count;
  return true;
}

void Runtime::check_decision(MPI_Comm comm, CallKind kind, int64_t count, bool taken) {
  if (!config_.check) return;
  int inter = 0;
  pmpi.Comm_test_inter(comm, &inter);
  if (inter != 0) return;
  const long long mine[3] = {static_cast<long long>(kind), count, taken ? 1 : 0};
  long long in[6], out[6];
  for (int i = 0; i < 3; ++i) {
    in[i] = mine[i];
    in[3 + i] = -mine[i];
  }
  pmpi.Allreduce(in, out, 6, MPI_LONG_LONG, MPI_MIN, comm);
  if (out[0] == -out[3] && out[1] == -out[4] && out[2] == -out[5]) return;
  std::fprintf(stderr,
               "sumcast-mpi: CHECK FAILED on rank %d: this rank: %s count %lld %s; over the ranks: kind %lld..%lld, "
               "count %lld..%lld, taken %lld..%lld\n",
               world_rank(), call_kind_name(kind), static_cast<long long>(count), taken ? "taken" : "passed", out[0],
               -out[3], out[1], -out[4], out[2], -out[5]);
  std::fflush(stderr);
  pmpi.Abort(comm, 3);
}

Status Runtime::run_blocking(Plan& plan, const void* send, void* recv) {
  if (plan.intranode) {
    return plan.state->intranode->allreduce(*plan.job, plan.type.dtype, plan.op, send, recv, plan.elems);
  }
  if (!config_.fallback_mpi) {
    Status st;
    bool all_lost = false;
    {
      std::lock_guard<std::mutex> lock(plan.job->mu);
      st = plan.job->comm->allreduce(send, recv, plan.elems);
      all_lost = !st.ok() && plan.job->comm->every_aggregator_lost();
    }
    if (!all_lost) return st;
    return Status(st.code(), st.message() + " (SUMCAST_MPI_FAILOVER_FALLBACK=mpi would complete the call through MPI)");
  }
  // With the fall-back enabled, the call's input must outlive a failed call (an in-place call
  // sums into room of its own first) and its result is kept (a rank one call behind may need it).
  CommState& cs = *plan.state;
  const bool in_place = send == recv;
  auto* out = static_cast<uint8_t*>(recv);
  if (in_place) {
    cs.in_place_result.resize(plan.bytes);
    out = cs.in_place_result.data();
  }
  Status st;
  bool all_lost = false;
  {
    std::lock_guard<std::mutex> lock(plan.job->mu);
    st = plan.job->comm->allreduce(send, out, plan.elems);
    all_lost = !st.ok() && plan.job->comm->every_aggregator_lost();
  }
  if (!st.ok()) return all_lost ? fall_back(plan, send, recv, st) : st;
  if (in_place) {
    std::memcpy(recv, out, plan.bytes);
    cs.last_result.swap(cs.in_place_result);
  } else {
    cs.last_result.assign(out, out + plan.bytes);
  }
  ++cs.calls_done;
  return {};
}

// Every appliance of the plan's job is lost and SUMCAST_MPI_FAILOVER_FALLBACK=mpi (docs/failover.md,
// "Every aggregator lost"). The ranks can be one call apart, never more: a rank completes call k
// only after every rank sent its part of call k, so every rank is at least in call k and has
// completed call k - 1 (blocking calls on a communicator run one after the other, in the same
// order on every rank). They meet on the recovery communicator, where one all-reduce of (calls
// done, rank) tells how far each got. If some completed this call and others did not, the lowest
// rank that did broadcasts its copy of the result, the ranks behind return it, and the ranks ahead
// (already in the next call) run theirs through MPI. Otherwise every rank runs this call through
// MPI, from its untouched input. Either way the communicator passes every later call to MPI, so a
// rank behind meets the others in its next call. The wait for the others is bounded: a rank that
// got ahead into a collective the interposer does not take (waiting there for a rank behind)
// never comes.
Status Runtime::fall_back(Plan& plan, const void* send, void* recv, const Status& why) {
  CommState& cs = *plan.state;
  const std::array<long long, 2> in = fallback_key(cs.calls_done, cs.rank, cs.size);
  std::array<long long, 2> out = {0, 0};
  const std::string what = why.message() + "; falling back to MPI";
  MPI_Request req = MPI_REQUEST_NULL;
  if (cs.recovery == MPI_COMM_NULL ||
      pmpi.Iallreduce(in.data(), out.data(), 2, MPI_LONG_LONG, MPI_MAX, cs.recovery, &req) != MPI_SUCCESS) {
    return Status::internal(what + ": the recovery communicator is unusable");
  }
  const uint32_t bound_ms = config_.op_timeout_ms != 0 ? config_.op_timeout_ms : 30000;
  const uint64_t deadline = now_ns() + uint64_t{bound_ms} * 1'000'000;
  for (int flag = 0; flag == 0;) {
    if (pmpi.Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return Status::internal(what + ": PMPI_Test failed");
    if (flag != 0) break;
    if (now_ns() >= deadline) {
      return Status::timeout(what + ": not every rank of the communicator came to the recovery within " +
                             std::to_string(bound_ms) +
                             " ms (a rank that completed this call may wait for this one in another collective)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // poll interval
  }
  const FallbackRoles roles = fallback_roles(out, cs.calls_done, cs.size);
  if (!roles.valid) {
    return Status::internal(what + ": the ranks' call counts (" + std::to_string(-out[1]) + ".." +
                            std::to_string(out[0] / cs.size) + ") are more than one call apart, which cannot be");
  }
  const int root = roles.root;
  bool copied = false;
  if (roles.most != roles.least) {  // call `least` completed on some ranks: theirs goes to the ranks behind
    const bool behind = roles.behind;
    auto* buf = behind ? static_cast<uint8_t*>(recv) : cs.last_result.data();
    const uint64_t n = behind ? plan.bytes : cs.last_result.size();
    constexpr uint64_t kPiece = uint64_t{1} << 30;  // MPI counts are int
    for (uint64_t off = 0; off < n; off += kPiece) {
      const int len = static_cast<int>(std::min(kPiece, n - off));
      if (pmpi.Bcast(buf + off, len, MPI_BYTE, root, cs.recovery) != MPI_SUCCESS) {
        return Status::internal(what + ": PMPI_Bcast of the result of the call one behind failed");
      }
    }
    if (behind) {
      ++cs.calls_done;
      copied = true;
    }
  }
  if (!copied) {
    constexpr int64_t kPiece = int64_t{1} << 30;
    const size_t esize = plan.type.mpi_size;
    for (int64_t off = 0; off < plan.count; off += kPiece) {
      const int len = static_cast<int>(std::min(kPiece, plan.count - off));
      auto* r = static_cast<uint8_t*>(recv) + static_cast<size_t>(off) * esize;
      const void* sp =
          send == recv ? MPI_IN_PLACE : static_cast<const uint8_t*>(send) + static_cast<size_t>(off) * esize;
      if (pmpi.Allreduce(sp, r, len, plan.datatype, plan.mpi_op, plan.comm) != MPI_SUCCESS) {
        return Status::internal(what + ": PMPI_Allreduce failed");
      }
    }
  }
  cs.fallback = true;
  stats_.fell_back(copied);
  if (cs.rank == root) {
    std::fprintf(
        stderr,
        "sumcast-mpi: every appliance lost on a communicator of %d ranks (%s); this call and the later ones go "
        "to MPI%s\n",
        cs.size, why.message().c_str(),
        roles.behind || roles.most != roles.least ? " (the ranks one call behind got that call's result from this rank)"
                                                  : "");
    std::fflush(stderr);
  }
  return {};
}

const cuda::Driver* Runtime::cuda_driver() {
  const cuda::Driver* d = cuda_.load(std::memory_order_acquire);
  if (d != nullptr) return d;
  std::lock_guard<std::mutex> lock(mu_);
  if (cuda_owner_) return cuda_owner_.get();
  // Only a driver the program loaded: a process without one has no device memory.
  auto r = cuda::Driver::open_if_loaded(config_.cuda_driver);
  if (!r.ok()) {
    // Loaded but unusable (cuInit failed, an entry point missing): no device memory can exist
    // through it either. Said once.
    if (!cuda_warned_) warn_cuda(r.status().message());
    cuda_warned_ = true;
    return nullptr;
  }
  if (!*r) return nullptr;
  cuda_owner_ = std::move(r).value();
  if (config_.verbose) {
    std::fprintf(stderr, "sumcast-mpi: CUDA driver %s loaded by the program: device buffers are %s\n",
                 cuda_owner_->path().c_str(), config_.device_stage ? "staged through host memory" : "passed to MPI");
  }
  cuda_.store(cuda_owner_.get(), std::memory_order_release);
  return cuda_owner_.get();
}

void Runtime::warn_cuda(const std::string& why) {
  std::fprintf(stderr,
               "sumcast-mpi: WARNING: the CUDA driver is loaded but unusable (%s): buffers are taken as host "
               "memory\n",
               why.c_str());
  std::fflush(stderr);
}

DeviceStaging& Runtime::staging(CommState& st) {
  const cuda::Driver* d = cuda_driver();
  if (!st.staging || (d != nullptr && st.staging->driver() != d)) st.staging = std::make_unique<DeviceStaging>(d);
  return *st.staging;
}

bool Runtime::device_policy(MPI_Comm comm, const void* send, const void* recv) {
  if (config_.device_stage) return true;
  int mine = 0, any = 0;
  if (const cuda::Driver* d = cuda_driver(); d != nullptr) {
    DeviceStaging probe(d);
    auto dev = probe.any_device(send, recv);
    mine = !dev.ok() || *dev ? 1 : 0;  // an unclassifiable buffer is never read as host memory
  }
  pmpi.Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  return any == 0;
}

int Runtime::fail_call(MPI_Comm comm, CallKind kind, const Status& st, Job* job) {
  std::string counters;
  if (job != nullptr) {
    std::lock_guard<std::mutex> lock(job->mu);
    counters = " (" + describe(*job) + ")";
  }
  std::fprintf(stderr, "sumcast-mpi: ERROR: %s through the appliance failed on rank %d: %s%s\n", call_kind_name(kind),
               world_rank(), st.to_string().c_str(), counters.c_str());
  std::fflush(stderr);
  error_printed_.store(true);
  pmpi.Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

void Runtime::teardown_jobs(CommState& st) {
  for (auto& [key, job] : st.jobs) {
    std::lock_guard<std::mutex> lock(job->mu);
    const shim::CommStats cs = job->comm->stats();
    stats_.add_data_path({.retransmissions = cs.retransmissions,
                          .stall_probes = cs.stall_probes,
                          .fast_retransmissions = cs.fast_retransmissions,
                          .loss_notices = cs.loss_notices,
                          .notice_retransmissions = cs.notice_retransmissions,
                          .duplicate_notices = cs.transport.duplicate_notices,
                          .rx_overflows = cs.transport.rx_overflows,
                          .tx_refused = cs.transport.tx_eagain + cs.transport.tx_enobufs,
                          .tx_dropped = cs.transport.tx_dropped,
                          .gro_receives = cs.transport.gro_receives,
                          .gro_segments = cs.transport.gro_segments,
                          .gso_sends = cs.transport.gso_sends,
                          .gso_segments = cs.transport.gso_segments,
                          .rx_cut_train = cs.transport.rx_cut_train});
  }
  st.jobs.clear();
}

void Runtime::comm_free(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  void* attr = nullptr;
  int flag = 0;
  pmpi.Comm_get_attr(comm, keyval_, &attr, &flag);
  if (flag == 0) return;
  auto* st = static_cast<CommState*>(attr);
  if (st->recovery != MPI_COMM_NULL) pmpi.Comm_free(&st->recovery);  // made on every rank or on none
  // Jobs and the intra-node layout exist on every rank of the communicator or on none (agreed).
  if (st->jobs.empty() && !st->intranode) return;
  pmpi.Barrier(comm);  // nobody leaves a job while another member still waits for a result
  teardown_jobs(*st);
  if (st->intranode) {
    st->intranode->free_collective();
    st->intranode.reset();
  }
}

void Runtime::finalize() {
  engine_->stop();
  int want = config_.stats, level = 0;
  // Also the barrier that keeps every rank in its jobs until all ranks finished their calls.
  pmpi.Allreduce(&want, &level, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  std::vector<CommState*> states;
  {
    std::lock_guard<std::mutex> lock(mu_);
    states = states_;
  }
  std::sort(states.begin(), states.end(), [](const CommState* a, const CommState* b) { return a->order > b->order; });
  for (CommState* st : states) teardown_jobs(*st);
  if (level > 0) {
    const Stats::Snapshot mine = stats_.snapshot();
    Stats::Snapshot max{};
    pmpi.Reduce(mine.data(), max.data(), static_cast<int>(mine.size()), MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    int rank = 0, size = 0;
    pmpi.Comm_rank(MPI_COMM_WORLD, &rank);
    pmpi.Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
      std::fputs(Stats::format(max, "largest per rank over " + std::to_string(size) + " ranks").c_str(), stderr);
    }
    if (level >= 2) std::fputs(Stats::format(mine, "rank " + std::to_string(rank)).c_str(), stderr);
    std::fflush(stderr);
  }
  finalized_.store(true, std::memory_order_release);
}

void Runtime::debug_dump() {
  std::fprintf(stderr, "sumcast-mpi: debug dump of rank %d\n", world_rank());
  for (CommState* st : states_) {
    std::fprintf(stderr, "  communicator of %d ranks (rank %d): active %d prepared %d jobs %zu\n", st->size, st->rank,
                 st->active ? 1 : 0, st->prepared ? 1 : 0, st->jobs.size());
    for (auto& [key, job] : st->jobs) {
      std::unique_lock<std::mutex> lock(job->mu, std::try_to_lock);
      std::fprintf(stderr, "    %s\n", lock.owns_lock() ? describe(*job).c_str() : (job->name + ": busy").c_str());
    }
  }
  for (auto& [key, r] : requests_) {
    std::fprintf(stderr, "  request %llx: job %s, %llu bytes, done %d, completed %d\n",
                 static_cast<unsigned long long>(key), r.pending->job().name.c_str(),
                 static_cast<unsigned long long>(r.bytes), r.pending->done() ? 1 : 0, r.completed ? 1 : 0);
  }
  std::fflush(stderr);
}

int Runtime::start_iallreduce(Plan& plan, const void* send, void* recv, MPI_Request* request) {
  const uint64_t t0 = now_ns();
  // Device buffers: a staging of this call's own (several calls may be outstanding).
  std::unique_ptr<DeviceStaging> staging;
  DeviceStaging::Buffers staged{send, recv, false};
  if (const cuda::Driver* d = cuda_driver(); d != nullptr) {
    staging = std::make_unique<DeviceStaging>(d);
    auto b = staging->begin(send, recv, plan.bytes);
    if (!b.ok()) return fail_call(MPI_COMM_WORLD, CallKind::kIallreduce, b.status(), plan.job.get());
    staged = *b;
    if (!staged.staged) staging.reset();
  }
  auto p = engine_->start(plan.job, staged.send, staged.recv, plan.elems);
  if (!p.ok()) return fail_call(MPI_COMM_WORLD, CallKind::kIallreduce, p.status(), plan.job.get());
  auto* g = new GreqState{*p};
  const int rc = pmpi.Grequest_start(greq_query, greq_free, greq_cancel, g, request);
  if (rc != MPI_SUCCESS) {
    delete g;
    return rc;
  }
  std::lock_guard<std::mutex> lock(mu_);
  requests_[request_key(*request)] =
      Request{std::move(p).value(), MPI_COMM_NULL, t0, plan.bytes, false, std::move(staging), staged, g};
  request_count_.store(requests_.size(), std::memory_order_release);
  return MPI_SUCCESS;
}

size_t Runtime::drive(int n, const MPI_Request* reqs, std::vector<int>* ours) {
  ours->clear();
  size_t running = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    auto it = requests_.find(request_key(reqs[i]));
    if (it == requests_.end()) continue;
    ours->push_back(i);
    Request& r = it->second;
    if (r.completed) continue;
    if (!engine_->test(*r.pending)) {
      ++running;
      continue;
    }
    if (!r.pending->status().ok() && !error_printed_.exchange(true)) {
      std::string counters;
      {
        std::lock_guard<std::mutex> job_lock(r.pending->job().mu);
        counters = describe(r.pending->job());
      }
      std::fprintf(stderr, "sumcast-mpi: ERROR: MPI_Iallreduce through the appliance failed on rank %d: %s (%s)\n",
                   world_rank(), r.pending->status().to_string().c_str(), counters.c_str());
    }
    if (r.staging) {
      Status st = r.pending->status().ok() ? r.staging->finish(r.staged, r.bytes) : Status();
      if (!st.ok()) {
        static_cast<GreqState*>(r.greq)->copy_failed = true;
        std::fprintf(stderr, "sumcast-mpi: ERROR: MPI_Iallreduce through the appliance failed on rank %d: %s\n",
                     world_rank(), st.to_string().c_str());
      }
      // The request's own staging: its counters are this call's copies, in and out.
      stats_.staged(r.staging->counters().bytes_to_host + r.staging->counters().bytes_to_device);
      r.staging.reset();  // its host buffers are not needed any more
    }
    stats_.taken(CallKind::kIallreduce, r.bytes, now_ns() - r.start_ns, false);
    pmpi.Grequest_complete(reqs[i]);
    r.completed = true;
  }
  return running;
}

void Runtime::step(const MPI_Request* reqs, const std::vector<int>& ours, int timeout_ms) {
  std::shared_ptr<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i : ours) {
      auto it = requests_.find(request_key(reqs[i]));
      if (it != requests_.end() && !it->second.completed) {
        p = it->second.pending;
        break;
      }
    }
  }
  if (p) engine_->step(*p, timeout_ms);
}

void Runtime::forget_freed(const MPI_Request* reqs, const std::vector<int>& ours,
                           const std::vector<MPI_Request>& before) {
  if (ours.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (int i : ours) {
    if (reqs[i] == MPI_REQUEST_NULL) requests_.erase(request_key(before[static_cast<size_t>(i)]));
  }
  request_count_.store(requests_.size(), std::memory_order_release);
}

}  // namespace sumcast::mpi

// For debugging a hung program: `gdb -p PID -batch -ex 'call sumcast_mpi_debug_dump()'` prints
// every job's counters and every outstanding request of this process (not exported; gdb finds it
// through the debug symbols).
extern "C" __attribute__((used, noinline)) void sumcast_mpi_debug_dump() {
  using sumcast::mpi::Runtime;
  Runtime* rt = Runtime::existing();
  if (rt != nullptr) rt->debug_dump();
}
