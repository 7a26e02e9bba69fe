// The interposer's MPI functions (exported by entry.cc when the process's MPI library is this
// build's flavour). Each one either takes the call (the appliance does it) or calls the PMPI_
// function with the arguments unchanged. Completion calls (MPI_Wait/Test families, MPI_Request_free,
// MPI_Request_get_status) look for the interposer's own MPI_Iallreduce requests and complete
// them; with none outstanding they cost one atomic load before PMPI.
#include "calls.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "mpi_lib.h"
#include "runtime.h"

namespace {

using sumcast::Status;
using sumcast::mpi::CallKind;
using sumcast::mpi::DeviceStaging;
using sumcast::mpi::Handle;
using sumcast::mpi::PassReason;
using sumcast::mpi::Plan;
using sumcast::mpi::pmpi;
using sumcast::mpi::Runtime;

// The runtime when MPI is initialized and not finalized (the interposer never acts outside).
Runtime* live_runtime() {
  int init = 0, fin = 0;
  pmpi.Initialized(&init);
  if (init == 0) return nullptr;
  pmpi.Finalized(&fin);
  if (fin != 0) return nullptr;
  Runtime& rt = Runtime::get();
  return rt.finalized() ? nullptr : &rt;
}

// The runtime only if it exists and has requests of ours: the fast path of completion calls.
Runtime* runtime_with_requests() {
  Runtime* rt = Runtime::existing();
  return rt != nullptr && rt->have_requests() ? rt : nullptr;
}

uint64_t bytes_of(int64_t count, MPI_Datatype datatype) {
  int size = 0;
  if (count <= 0 || pmpi.Type_size(datatype, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

// SUMCAST_MPI_DEVICE_BUFFERS=mpi and a rank passed device memory: the call goes to MPI.
bool device_allowed(Runtime& rt, MPI_Comm comm, const void* send, const void* recv, PassReason* why) {
  if (rt.device_policy(comm, send, recv)) return true;
  *why = PassReason::kDevice;
  return false;
}

// One blocking call's buffers through the communicator's DeviceStaging, with the statistics.
class Staged {
 public:
  Staged(Runtime& rt, DeviceStaging& staging) : rt_(rt), staging_(staging) {}
  Status begin(const void* send, void* recv, size_t bytes) {
    before_ = copied();
    auto b = staging_.begin(send, recv, bytes);
    if (!b.ok()) return b.status();
    b_ = *b;
    return Status();
  }
  const void* send() const { return b_.send; }
  void* recv() const { return b_.recv; }
  Status finish(size_t bytes) {
    Status st = staging_.finish(b_, bytes);
    if (b_.staged) rt_.stats().staged(copied() - before_);
    return st;
  }

 private:
  uint64_t copied() const { return staging_.counters().bytes_to_host + staging_.counters().bytes_to_device; }
  Runtime& rt_;
  DeviceStaging& staging_;
  DeviceStaging::Buffers b_;
  uint64_t before_ = 0;
};

// Blocks until none of ours among reqs[0..n) is still running, giving MPI a turn (PMPI_Testall on
// the whole set never completes anything while one of ours is incomplete) between steps, so the
// program's other requests progress as they would inside MPI_Waitall.
template <typename Done>
void drive_until(Runtime& rt, int n, MPI_Request* reqs, std::vector<int>* ours, Done&& done) {
  for (;;) {
    const size_t running = rt.drive(n, reqs, ours);
    if (running == 0 || done()) return;
    rt.step(reqs, *ours, 1);
  }
}

}  // namespace

namespace impl {

int Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return pmpi.Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const uint64_t t0 = Runtime::now_ns();
  Plan plan;
  PassReason why = PassReason::kDisabled;
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const bool take = rt->plan(CallKind::kAllreduce, count, datatype, op, comm, true, &plan, &why) &&
                    device_allowed(*rt, comm, src, recvbuf, &why);
  rt->check_decision(comm, CallKind::kAllreduce, count, take);
  if (take) {
    Staged staged(*rt, rt->staging(*plan.state));
    Status st = staged.begin(src, recvbuf, plan.bytes);
    if (st.ok()) st = rt->run_blocking(plan, staged.send(), staged.recv());
    if (st.ok()) st = staged.finish(plan.bytes);
    if (!st.ok()) return rt->fail_call(comm, CallKind::kAllreduce, st, plan.job.get());
    rt->stats().taken(CallKind::kAllreduce, plan.bytes, Runtime::now_ns() - t0, plan.intranode);
    return MPI_SUCCESS;
  }
  const int rc = pmpi.Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  rt->stats().passed(CallKind::kAllreduce, why, bytes_of(count, datatype), Runtime::now_ns() - t0);
  return rc;
}

int Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return pmpi.Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  const uint64_t t0 = Runtime::now_ns();
  Plan plan;
  PassReason why = PassReason::kDisabled;
  // Always the flat job: the intra-node path synchronises the host's ranks with MPI calls, which a
  // background thread may not make.
  const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const bool take = rt->plan(CallKind::kIallreduce, count, datatype, op, comm, false, &plan, &why) &&
                    device_allowed(*rt, comm, src, recvbuf, &why);
  rt->check_decision(comm, CallKind::kIallreduce, count, take);
  if (take) return rt->start_iallreduce(plan, src, recvbuf, request);
  const int rc = pmpi.Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  rt->stats().passed(CallKind::kIallreduce, why, bytes_of(count, datatype), Runtime::now_ns() - t0);
  return rc;
}

int Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return pmpi.Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  const uint64_t t0 = Runtime::now_ns();
  int inter = 0, size = 0, rank = 0;
  pmpi.Comm_test_inter(comm, &inter);
  pmpi.Comm_size(comm, &size);
  pmpi.Comm_rank(comm, &rank);
  const int64_t total = inter != 0 ? 0 : static_cast<int64_t>(recvcount) * size;
  Plan plan;
  PassReason why = inter != 0 ? PassReason::kComm : PassReason::kDisabled;
  const bool take = inter == 0 &&
                    rt->plan(CallKind::kReduceScatterBlock, total, datatype, op, comm, true, &plan, &why) &&
                    device_allowed(*rt, comm, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, &why);
  rt->check_decision(comm, CallKind::kReduceScatterBlock, total, take);
  if (take) {
    // The appliance returns every chunk to every member: all-reduce the whole buffer, keep our block.
    const size_t block = static_cast<size_t>(recvcount) * plan.type.mpi_size;
    DeviceStaging& staging = rt->staging(*plan.state);
    Staged staged(*rt, staging);
    Status st;
    if (sendbuf == MPI_IN_PLACE) {
      st = staged.begin(recvbuf, recvbuf, plan.bytes);
      if (st.ok()) st = rt->run_blocking(plan, staged.recv(), staged.recv());
      auto* out = static_cast<uint8_t*>(staged.recv());
      if (st.ok() && rank != 0) std::memmove(out, out + static_cast<size_t>(rank) * block, block);
      if (st.ok()) st = staged.finish(plan.bytes);
    } else {
      std::vector<uint8_t>& tmp = plan.state->scratch;
      tmp.resize(static_cast<size_t>(total) * plan.type.mpi_size);
      st = staged.begin(sendbuf, tmp.data(), plan.bytes);
      if (st.ok()) st = rt->run_blocking(plan, staged.send(), tmp.data());
      if (st.ok()) st = staged.finish(plan.bytes);
      if (st.ok()) st = staging.copy_out(recvbuf, tmp.data() + static_cast<size_t>(rank) * block, block);
    }
    if (!st.ok()) return rt->fail_call(comm, CallKind::kReduceScatterBlock, st, plan.job.get());
    rt->stats().taken(CallKind::kReduceScatterBlock, plan.bytes, Runtime::now_ns() - t0, plan.intranode);
    return MPI_SUCCESS;
  }
  const int rc = pmpi.Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  rt->stats().passed(CallKind::kReduceScatterBlock, why, bytes_of(total, datatype), Runtime::now_ns() - t0);
  return rc;
}

int Wait(MPI_Request* request, MPI_Status* status) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Wait(request, status);
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  drive_until(*rt, 1, request, &ours, [&] {
    int flag = 0;  // MPI's own progress; ours is incomplete, so this cannot complete it
    pmpi.Test(request, &flag, MPI_STATUS_IGNORE);
    return false;
  });
  const int rc = pmpi.Wait(request, status);
  rt->forget_freed(request, ours, before);
  return rc;
}

int Test(MPI_Request* request, int* flag, MPI_Status* status) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Test(request, flag, status);
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  rt->drive(1, request, &ours);
  const int rc = pmpi.Test(request, flag, status);
  rt->forget_freed(request, ours, before);
  return rc;
}

int Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Waitall(count, requests, statuses);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  drive_until(*rt, count, requests, &ours, [&] {
    int flag = 0;
    pmpi.Testall(count, requests, &flag, MPI_STATUSES_IGNORE);
    return false;
  });
  const int rc = pmpi.Waitall(count, requests, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Testall(count, requests, flag, statuses);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  rt->drive(count, requests, &ours);
  const int rc = pmpi.Testall(count, requests, flag, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Waitany(count, requests, index, status);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  int rc = MPI_SUCCESS;
  bool got = false;
  drive_until(*rt, count, requests, &ours, [&] {
    int flag = 0;
    rc = pmpi.Testany(count, requests, index, &flag, status);
    got = flag != 0 || rc != MPI_SUCCESS;
    return got;
  });
  if (!got) rc = pmpi.Waitany(count, requests, index, status);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Testany(count, requests, index, flag, status);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  rt->drive(count, requests, &ours);
  const int rc = pmpi.Testany(count, requests, index, flag, status);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  Runtime* rt = incount > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Waitsome(incount, requests, outcount, indices, statuses);
  const std::vector<MPI_Request> before(requests, requests + incount);
  std::vector<int> ours;
  int rc = MPI_SUCCESS;
  bool got = false;
  drive_until(*rt, incount, requests, &ours, [&] {
    rc = pmpi.Testsome(incount, requests, outcount, indices, statuses);
    got = (*outcount != 0 && *outcount != MPI_UNDEFINED) || rc != MPI_SUCCESS;
    return got;
  });
  if (!got) rc = pmpi.Waitsome(incount, requests, outcount, indices, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  Runtime* rt = incount > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Testsome(incount, requests, outcount, indices, statuses);
  const std::vector<MPI_Request> before(requests, requests + incount);
  std::vector<int> ours;
  rt->drive(incount, requests, &ours);
  const int rc = pmpi.Testsome(incount, requests, outcount, indices, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

int Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  Runtime* rt = runtime_with_requests();
  if (rt != nullptr) {
    std::vector<int> ours;
    rt->drive(1, &request, &ours);
  }
  return pmpi.Request_get_status(request, flag, status);
}

int Request_free(MPI_Request* request) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return pmpi.Request_free(request);
  // An appliance call cannot be abandoned half-way (the other ranks' calls need ours): finish it.
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  drive_until(*rt, 1, request, &ours, [] { return false; });
  const int rc = pmpi.Request_free(request);
  rt->forget_freed(request, ours, before);
  return rc;
}

int Comm_free(MPI_Comm* comm) {
  Runtime* rt = comm != nullptr ? live_runtime() : nullptr;
  if (rt != nullptr) rt->comm_free(*comm);
  return pmpi.Comm_free(comm);
}

int Comm_disconnect(MPI_Comm* comm) {
  Runtime* rt = comm != nullptr ? live_runtime() : nullptr;
  if (rt != nullptr) rt->comm_free(*comm);
  return pmpi.Comm_disconnect(comm);
}

int Finalize(void) {
  Runtime* rt = live_runtime();
  if (rt != nullptr) rt->finalize();
  return pmpi.Finalize();
}

}  // namespace impl

namespace sumcast::mpi::calls {
namespace {

// A handle of this flavour from its neutral bits (Open MPI: a pointer; MPICH: an int).
template <typename T>
T as(Handle h) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(h);
  } else {
    return static_cast<T>(h);
  }
}
MPI_Request* requests(void* p) { return static_cast<MPI_Request*>(p); }
MPI_Status* statuses(void* p) { return static_cast<MPI_Status*>(p); }

}  // namespace

int Allreduce(const void* send, void* recv, int count, Handle type, Handle op, Handle comm) {
  return impl::Allreduce(send, recv, count, as<MPI_Datatype>(type), as<MPI_Op>(op), as<MPI_Comm>(comm));
}
int Iallreduce(const void* send, void* recv, int count, Handle type, Handle op, Handle comm, void* request) {
  return impl::Iallreduce(send, recv, count, as<MPI_Datatype>(type), as<MPI_Op>(op), as<MPI_Comm>(comm),
                          requests(request));
}
int Reduce_scatter_block(const void* send, void* recv, int count, Handle type, Handle op, Handle comm) {
  return impl::Reduce_scatter_block(send, recv, count, as<MPI_Datatype>(type), as<MPI_Op>(op), as<MPI_Comm>(comm));
}
int Wait(void* request, void* status) { return impl::Wait(requests(request), statuses(status)); }
int Test(void* request, int* flag, void* status) { return impl::Test(requests(request), flag, statuses(status)); }
int Waitall(int count, void* reqs, void* sts) { return impl::Waitall(count, requests(reqs), statuses(sts)); }
int Testall(int count, void* reqs, int* flag, void* sts) {
  return impl::Testall(count, requests(reqs), flag, statuses(sts));
}
int Waitany(int count, void* reqs, int* index, void* status) {
  return impl::Waitany(count, requests(reqs), index, statuses(status));
}
int Testany(int count, void* reqs, int* index, int* flag, void* status) {
  return impl::Testany(count, requests(reqs), index, flag, statuses(status));
}
int Waitsome(int count, void* reqs, int* outcount, int* indices, void* sts) {
  return impl::Waitsome(count, requests(reqs), outcount, indices, statuses(sts));
}
int Testsome(int count, void* reqs, int* outcount, int* indices, void* sts) {
  return impl::Testsome(count, requests(reqs), outcount, indices, statuses(sts));
}
int Request_get_status(Handle request, int* flag, void* status) {
  return impl::Request_get_status(as<MPI_Request>(request), flag, statuses(status));
}
int Request_free(void* request) { return impl::Request_free(requests(request)); }
int Comm_free(void* comm) { return impl::Comm_free(static_cast<MPI_Comm*>(comm)); }
int Comm_disconnect(void* comm) { return impl::Comm_disconnect(static_cast<MPI_Comm*>(comm)); }
int Finalize() { return impl::Finalize(); }

}  // namespace sumcast::mpi::calls
