#include "intranode.h"

#include <algorithm>
#include <cstring>

namespace sumcast::mpi {
namespace {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace

Result<std::unique_ptr<Intranode>> Intranode::create(MPI_Comm comm, uint64_t piece_bytes, std::string* layout) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  MPI_Comm local = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) != MPI_SUCCESS) {
    return Status::unavailable("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
  }
  int lsize = 0, lrank = 0;
  PMPI_Comm_size(local, &lsize);
  PMPI_Comm_rank(local, &lrank);
  // Same rank count on every host? {min, -max} in one reduction.
  int in[2] = {lsize, -lsize}, out[2] = {0, 0};
  PMPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, comm);
  const int min_local = out[0], max_local = -out[1];
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const int hosts = size / std::max(1, lsize);
  *layout = std::to_string(hosts) + " host(s) x " + std::to_string(lsize) + " rank(s)";
  if (min_local != max_local || lsize < 2 || min_local == size) {
    if (min_local != max_local)
      *layout = "hosts with " + std::to_string(min_local) + ".." + std::to_string(max_local) + " ranks";
    PMPI_Comm_free(&local);
    return std::unique_ptr<Intranode>();
  }
  std::unique_ptr<Intranode> n(new Intranode());
  n->local_ = local;
  n->local_rank_ = lrank;
  n->local_size_ = lsize;
  PMPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
  if (PMPI_Comm_split(comm, lrank, rank, &n->cross_) != MPI_SUCCESS)
    return Status::unavailable("MPI_Comm_split failed");
  PMPI_Comm_rank(n->cross_, &n->cross_rank_);
  PMPI_Comm_size(n->cross_, &n->cross_size_);

  n->piece_bytes_ = piece_bytes;
  n->result_bytes_ = (piece_bytes / static_cast<uint64_t>(lsize) + 64 + 63) & ~uint64_t{63};
  const uint64_t seg = piece_bytes + 2 * n->result_bytes_;
  MPI_Info info;
  PMPI_Info_create(&info);
  PMPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  const int rc = PMPI_Win_allocate_shared(static_cast<MPI_Aint>(seg), 1, info, local, &base, &n->win_);
  PMPI_Info_free(&info);
  if (rc != MPI_SUCCESS) {
    n->win_ = MPI_WIN_NULL;
    return Status::unavailable("MPI_Win_allocate_shared of " + std::to_string(seg) + " bytes: " + mpi_error(rc));
  }
  PMPI_Win_set_errhandler(n->win_, MPI_ERRORS_RETURN);
  n->input_.resize(static_cast<size_t>(lsize));
  for (auto& r : n->result_) r.resize(static_cast<size_t>(lsize));
  for (int r = 0; r < lsize; ++r) {
    MPI_Aint sz = 0;
    int disp = 0;
    void* p = nullptr;
    if (PMPI_Win_shared_query(n->win_, r, &sz, &disp, &p) != MPI_SUCCESS || p == nullptr ||
        static_cast<uint64_t>(sz) < seg) {
      return Status::unavailable("MPI_Win_shared_query for local rank " + std::to_string(r) + " failed");
    }
    auto* b = static_cast<uint8_t*>(p);
    n->input_[static_cast<size_t>(r)] = b;
    n->result_[0][static_cast<size_t>(r)] = b + piece_bytes;
    n->result_[1][static_cast<size_t>(r)] = b + piece_bytes + n->result_bytes_;
  }
  PMPI_Win_lock_all(MPI_MODE_NOCHECK, n->win_);
  n->locked_ = true;
  n->srcs_.resize(static_cast<size_t>(lsize));
  return n;
}

Intranode::~Intranode() = default;

void Intranode::free_collective() {
  if (locked_) PMPI_Win_unlock_all(win_);
  locked_ = false;
  if (win_ != MPI_WIN_NULL) PMPI_Win_free(&win_);
  if (cross_ != MPI_COMM_NULL) PMPI_Comm_free(&cross_);
  if (local_ != MPI_COMM_NULL) PMPI_Comm_free(&local_);
}

void Intranode::sync() {
  // The unified memory model's recipe for load/store sharing: a memory barrier on each side of a
  // process barrier.
  PMPI_Win_sync(win_);
  PMPI_Barrier(local_);
  PMPI_Win_sync(win_);
}

Status Intranode::allreduce(Job& job, wire::Dtype dtype, wire::ReduceOp op, const void* send, void* recv,
                            size_t count) {
  const size_t esize = wire::dtype_size(dtype);
  const size_t piece_elems = piece_bytes_ / esize;
  const auto locals = static_cast<size_t>(local_size_);
  const auto me = static_cast<size_t>(local_rank_);
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  for (size_t off = 0; off < count; off += piece_elems) {
    const size_t n = std::min(piece_elems, count - off);
    std::memcpy(input_[me], in + off * esize, n * esize);
    sync();
    const ElemRange mine = shard_of(n, locals, me);
    for (size_t r = 0; r < locals; ++r) srcs_[r] = input_[r] + mine.begin * esize;
    uint8_t* res = result_[parity_][me];
    reducer_.reduce(dtype, op, srcs_.data(), locals, res, mine.size());
    {
      std::lock_guard<std::mutex> lock(job.mu);
      Status st = job.comm->allreduce(res, res, mine.size());
      if (!st.ok()) return st;
    }
    sync();
    for (size_t r = 0; r < locals; ++r) {
      const ElemRange s = shard_of(n, locals, r);
      std::memcpy(out + (off + s.begin) * esize, result_[parity_][r], s.size() * esize);
    }
    parity_ ^= 1;
  }
  return {};
}

}  // namespace sumcast::mpi
