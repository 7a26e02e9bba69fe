// The MPI entry points libsumcast_mpi.so defines (the version script exports exactly these).
// Each one either takes the call (the appliance does it) or calls the PMPI_ function with the
// arguments unchanged. Completion calls (MPI_Wait/Test families, MPI_Request_free,
// MPI_Request_get_status) look for the interposer's own MPI_Iallreduce requests and complete
// them; with none outstanding they cost one atomic load before PMPI.
#include <mpi.h>

#include <cstring>
#include <vector>

#include "runtime.h"

#define SUMCAST_MPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using sumcast::Status;
using sumcast::mpi::CallKind;
using sumcast::mpi::PassReason;
using sumcast::mpi::Plan;
using sumcast::mpi::Runtime;

// The runtime when MPI is initialized and not finalized (the interposer never acts outside).
Runtime* live_runtime() {
  int init = 0, fin = 0;
  PMPI_Initialized(&init);
  if (init == 0) return nullptr;
  PMPI_Finalized(&fin);
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
  if (count <= 0 || PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

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

SUMCAST_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                     MPI_Comm comm) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const uint64_t t0 = Runtime::now_ns();
  Plan plan;
  PassReason why = PassReason::kDisabled;
  const bool take = rt->plan(CallKind::kAllreduce, count, datatype, op, comm, true, &plan, &why);
  rt->check_decision(comm, CallKind::kAllreduce, count, take);
  if (take) {
    const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    Status st = rt->run_blocking(plan, src, recvbuf);
    if (!st.ok()) return rt->fail_call(comm, CallKind::kAllreduce, st, plan.job.get());
    rt->stats().taken(CallKind::kAllreduce, plan.bytes, Runtime::now_ns() - t0, plan.intranode);
    return MPI_SUCCESS;
  }
  const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  rt->stats().passed(CallKind::kAllreduce, why, bytes_of(count, datatype), Runtime::now_ns() - t0);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                      MPI_Comm comm, MPI_Request* request) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  const uint64_t t0 = Runtime::now_ns();
  Plan plan;
  PassReason why = PassReason::kDisabled;
  // Always the flat job: the intra-node path synchronises the host's ranks with MPI calls, which a
  // background thread may not make.
  const bool take = rt->plan(CallKind::kIallreduce, count, datatype, op, comm, false, &plan, &why);
  rt->check_decision(comm, CallKind::kIallreduce, count, take);
  if (take) {
    const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    return rt->start_iallreduce(plan, src, recvbuf, request);
  }
  const int rc = PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  rt->stats().passed(CallKind::kIallreduce, why, bytes_of(count, datatype), Runtime::now_ns() - t0);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Runtime* rt = live_runtime();
  if (rt == nullptr) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  const uint64_t t0 = Runtime::now_ns();
  int inter = 0, size = 0, rank = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  const int64_t total = inter != 0 ? 0 : static_cast<int64_t>(recvcount) * size;
  Plan plan;
  PassReason why = inter != 0 ? PassReason::kComm : PassReason::kDisabled;
  const bool take = inter == 0 && rt->plan(CallKind::kReduceScatterBlock, total, datatype, op, comm, true, &plan, &why);
  rt->check_decision(comm, CallKind::kReduceScatterBlock, total, take);
  if (take) {
    // The appliance returns every chunk to every member: all-reduce the whole buffer, keep our block.
    const size_t block = static_cast<size_t>(recvcount) * plan.type.mpi_size;
    auto* out = static_cast<uint8_t*>(recvbuf);
    Status st;
    if (sendbuf == MPI_IN_PLACE) {
      st = rt->run_blocking(plan, recvbuf, recvbuf);
      if (st.ok() && rank != 0) std::memmove(out, out + static_cast<size_t>(rank) * block, block);
    } else {
      std::vector<uint8_t>& tmp = plan.state->scratch;
      tmp.resize(static_cast<size_t>(total) * plan.type.mpi_size);
      st = rt->run_blocking(plan, sendbuf, tmp.data());
      if (st.ok()) std::memcpy(out, tmp.data() + static_cast<size_t>(rank) * block, block);
    }
    if (!st.ok()) return rt->fail_call(comm, CallKind::kReduceScatterBlock, st, plan.job.get());
    rt->stats().taken(CallKind::kReduceScatterBlock, plan.bytes, Runtime::now_ns() - t0, plan.intranode);
    return MPI_SUCCESS;
  }
  const int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  rt->stats().passed(CallKind::kReduceScatterBlock, why, bytes_of(total, datatype), Runtime::now_ns() - t0);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Wait(request, status);
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  drive_until(*rt, 1, request, &ours, [&] {
    int flag = 0;  // MPI's own progress; ours is incomplete, so this cannot complete it
    PMPI_Test(request, &flag, MPI_STATUS_IGNORE);
    return false;
  });
  const int rc = PMPI_Wait(request, status);
  rt->forget_freed(request, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Test(request, flag, status);
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  rt->drive(1, request, &ours);
  const int rc = PMPI_Test(request, flag, status);
  rt->forget_freed(request, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Waitall(count, requests, statuses);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  drive_until(*rt, count, requests, &ours, [&] {
    int flag = 0;
    PMPI_Testall(count, requests, &flag, MPI_STATUSES_IGNORE);
    return false;
  });
  const int rc = PMPI_Waitall(count, requests, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Testall(count, requests, flag, statuses);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  rt->drive(count, requests, &ours);
  const int rc = PMPI_Testall(count, requests, flag, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Waitany(count, requests, index, status);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  int rc = MPI_SUCCESS;
  bool got = false;
  drive_until(*rt, count, requests, &ours, [&] {
    int flag = 0;
    rc = PMPI_Testany(count, requests, index, &flag, status);
    got = flag != 0 || rc != MPI_SUCCESS;
    return got;
  });
  if (!got) rc = PMPI_Waitany(count, requests, index, status);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  Runtime* rt = count > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Testany(count, requests, index, flag, status);
  const std::vector<MPI_Request> before(requests, requests + count);
  std::vector<int> ours;
  rt->drive(count, requests, &ours);
  const int rc = PMPI_Testany(count, requests, index, flag, status);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                    MPI_Status statuses[]) {
  Runtime* rt = incount > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  const std::vector<MPI_Request> before(requests, requests + incount);
  std::vector<int> ours;
  int rc = MPI_SUCCESS;
  bool got = false;
  drive_until(*rt, incount, requests, &ours, [&] {
    rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    got = (*outcount != 0 && *outcount != MPI_UNDEFINED) || rc != MPI_SUCCESS;
    return got;
  });
  if (!got) rc = PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                    MPI_Status statuses[]) {
  Runtime* rt = incount > 0 ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Testsome(incount, requests, outcount, indices, statuses);
  const std::vector<MPI_Request> before(requests, requests + incount);
  std::vector<int> ours;
  rt->drive(incount, requests, &ours);
  const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  rt->forget_freed(requests, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  Runtime* rt = runtime_with_requests();
  if (rt != nullptr) {
    std::vector<int> ours;
    rt->drive(1, &request, &ours);
  }
  return PMPI_Request_get_status(request, flag, status);
}

SUMCAST_MPI_EXPORT int MPI_Request_free(MPI_Request* request) {
  Runtime* rt = request != nullptr ? runtime_with_requests() : nullptr;
  if (rt == nullptr) return PMPI_Request_free(request);
  // An appliance call cannot be abandoned half-way (the other ranks' calls need ours): finish it.
  const std::vector<MPI_Request> before{*request};
  std::vector<int> ours;
  drive_until(*rt, 1, request, &ours, [] { return false; });
  const int rc = PMPI_Request_free(request);
  rt->forget_freed(request, ours, before);
  return rc;
}

SUMCAST_MPI_EXPORT int MPI_Comm_free(MPI_Comm* comm) {
  Runtime* rt = comm != nullptr ? live_runtime() : nullptr;
  if (rt != nullptr) rt->comm_free(*comm);
  return PMPI_Comm_free(comm);
}

SUMCAST_MPI_EXPORT int MPI_Comm_disconnect(MPI_Comm* comm) {
  Runtime* rt = comm != nullptr ? live_runtime() : nullptr;
  if (rt != nullptr) rt->comm_free(*comm);
  return PMPI_Comm_disconnect(comm);
}

SUMCAST_MPI_EXPORT int MPI_Finalize(void) {
  Runtime* rt = live_runtime();
  if (rt != nullptr) rt->finalize();
  return PMPI_Finalize();
}
