#include "intranode.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "sumcast/topo/loaders.h"

namespace sumcast::mpi {
namespace {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (pmpi.Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

// The NUMA node (os index) of the CPU this process runs on now, from sysfs; 0 when unknown.
int current_numa_node() {
  const int cpu = sched_getcpu();
  if (cpu < 0) return 0;
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  int node = 0;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') {
      node = std::atoi(e->d_name + 4);
      break;
    }
  }
  closedir(d);
  return node;
}

// This process's NUMA node (os index), found once per process: with a topology file the node of
// GPU i, i being the rank's local rank on its host in the launch (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID), so that sub-communicators agree with the world; else the CPU it runs on.
struct Placement {
  int node = 0;
  std::string error;  // non-empty: the file does not place this rank
};

Placement place_process(const std::string& file) {
  Placement p;
  p.node = current_numa_node();
  if (file.empty()) return p;
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (env == nullptr) env = std::getenv("MPI_LOCALRANKID");
  if (env == nullptr) {
    p.error =
        "SUMCAST_MPI_TOPOLOGY: the launcher gives no local rank (OMPI_COMM_WORLD_LOCAL_RANK or "
        "MPI_LOCALRANKID) to map ranks to its GPUs";
    return p;
  }
  auto model = topo::load_file(file, topo::SourceFormat::kDetect, topo::LoadOptions{});
  if (!model.ok()) {
    p.error = "SUMCAST_MPI_TOPOLOGY=" + file + ": " + model.status().message();
    return p;
  }
  const int i = std::atoi(env);
  if (i < 0 || i >= model->gpu_count()) {
    p.error = "SUMCAST_MPI_TOPOLOGY=" + file + " describes " + std::to_string(model->gpu_count()) +
              " GPUs, one per local rank, but this is local rank " + std::to_string(i);
    return p;
  }
  const int numa = model->node(model->gpus()[static_cast<size_t>(i)]).numa;
  p.node = numa >= 0 ? model->node(numa).index : 0;
  return p;
}

Placement process_numa_node(const std::string& file) {
  static std::mutex mu;
  static std::map<std::string, Placement> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(file);
  if (it == cache.end()) it = cache.emplace(file, place_process(file)).first;
  return it->second;
}

// Every local rank's NUMA node, gathered over `local` (an all-gather as a max-reduction: the pmpi
// table has what the interposer needs, no more). Fails on every rank when one rank's fails.
Result<std::vector<int>> local_numa_nodes(MPI_Comm local, int lsize, int lrank, const std::string& file) {
  constexpr int kFailed = 1 << 20;
  const Placement mine = process_numa_node(file);
  std::vector<int> in(static_cast<size_t>(lsize), -1), out(static_cast<size_t>(lsize), 0);
  in[static_cast<size_t>(lrank)] = mine.error.empty() ? mine.node : kFailed;
  pmpi.Allreduce(in.data(), out.data(), lsize, MPI_INT, MPI_MAX, local);
  if (!mine.error.empty()) return Status::invalid_argument(mine.error);
  for (int v : out) {
    if (v >= kFailed)
      return Status::unavailable("another rank of this host could not place itself in SUMCAST_MPI_TOPOLOGY");
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Intranode>> Intranode::create(MPI_Comm comm, uint64_t piece_bytes,
                                                     const std::string& topology_file, Stats* stats,
                                                     std::string* layout) {
  int rank = 0;
  pmpi.Comm_rank(comm, &rank);
  MPI_Comm local = MPI_COMM_NULL;
  if (pmpi.Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) != MPI_SUCCESS) {
    return Status::unavailable("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
  }
  int lsize = 0, lrank = 0;
  pmpi.Comm_size(local, &lsize);
  pmpi.Comm_rank(local, &lrank);
  // Same rank count on every host? {min, -max} in one reduction.
  int in[2] = {lsize, -lsize}, out[2] = {0, 0};
  pmpi.Allreduce(in, out, 2, MPI_INT, MPI_MIN, comm);
  const int min_local = out[0], max_local = -out[1];
  int size = 0;
  pmpi.Comm_size(comm, &size);
  const int hosts = size / std::max(1, lsize);
  *layout = std::to_string(hosts) + " host(s) x " + std::to_string(lsize) + " rank(s)";
  if (min_local != max_local || lsize < 2 || min_local == size) {
    if (min_local != max_local)
      *layout = "hosts with " + std::to_string(min_local) + ".." + std::to_string(max_local) + " ranks";
    pmpi.Comm_free(&local);
    return std::unique_ptr<Intranode>();
  }
  std::unique_ptr<Intranode> n(new Intranode());
  n->local_ = local;
  n->local_rank_ = lrank;
  n->local_size_ = lsize;
  n->stats_ = stats;
  pmpi.Comm_set_errhandler(local, MPI_ERRORS_RETURN);
  auto numa = local_numa_nodes(local, lsize, lrank, topology_file);
  if (!numa.ok()) return numa.status();
  n->numa_of_ = std::move(*numa);
  {
    std::map<int, std::vector<int>> by_node;
    for (int r = 0; r < lsize; ++r) by_node[n->numa_of_[static_cast<size_t>(r)]].push_back(r);
    bool some_pair = false;
    std::string plan;
    for (auto& [node, ranks] : by_node) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i] == lrank) {
          n->my_group_ = n->groups_.size();
          n->my_pos_ = i;
        }
      }
      some_pair = some_pair || ranks.size() >= 2;
      plan += (plan.empty() ? "" : ", ") + std::string("NUMA") + std::to_string(node) + ":";
      for (int r : ranks) plan += " " + std::to_string(r);
      n->groups_.push_back(std::move(ranks));
    }
    n->numa_plan_ = n->groups_.size() >= 2 && some_pair;
    *layout += n->numa_plan_ ? "; plan: within NUMA nodes first (" + plan + ")"
                             : "; plan: one stage (" + plan + (n->groups_.size() < 2 ? ", one NUMA node)" : ")");
    if (!topology_file.empty()) *layout += " from " + topology_file;
  }
  if (pmpi.Comm_split(comm, lrank, rank, &n->cross_) != MPI_SUCCESS)
    return Status::unavailable("MPI_Comm_split failed");
  pmpi.Comm_rank(n->cross_, &n->cross_rank_);
  pmpi.Comm_size(n->cross_, &n->cross_size_);

  n->piece_bytes_ = piece_bytes;
  n->result_bytes_ = (piece_bytes / static_cast<uint64_t>(lsize) + 64 + 63) & ~uint64_t{63};
  const uint64_t partial_bytes = n->numa_plan_ ? piece_bytes : 0;
  const uint64_t seg = piece_bytes + partial_bytes + 2 * n->result_bytes_;
  MPI_Info info;
  pmpi.Info_create(&info);
  pmpi.Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  const int rc = pmpi.Win_allocate_shared(static_cast<MPI_Aint>(seg), 1, info, local, &base, &n->win_);
  pmpi.Info_free(&info);
  if (rc != MPI_SUCCESS) {
    n->win_ = MPI_WIN_NULL;
    return Status::unavailable("MPI_Win_allocate_shared of " + std::to_string(seg) + " bytes: " + mpi_error(rc));
  }
  pmpi.Win_set_errhandler(n->win_, MPI_ERRORS_RETURN);
  n->input_.resize(static_cast<size_t>(lsize));
  n->partial_.resize(static_cast<size_t>(lsize));
  for (auto& r : n->result_) r.resize(static_cast<size_t>(lsize));
  for (int r = 0; r < lsize; ++r) {
    MPI_Aint sz = 0;
    int disp = 0;
    void* p = nullptr;
    if (pmpi.Win_shared_query(n->win_, r, &sz, &disp, &p) != MPI_SUCCESS || p == nullptr ||
        static_cast<uint64_t>(sz) < seg) {
      return Status::unavailable("MPI_Win_shared_query for local rank " + std::to_string(r) + " failed");
    }
    auto* b = static_cast<uint8_t*>(p);
    n->input_[static_cast<size_t>(r)] = b;
    n->partial_[static_cast<size_t>(r)] = b + piece_bytes;
    n->result_[0][static_cast<size_t>(r)] = b + piece_bytes + partial_bytes;
    n->result_[1][static_cast<size_t>(r)] = b + piece_bytes + partial_bytes + n->result_bytes_;
  }
  pmpi.Win_lock_all(MPI_MODE_NOCHECK, n->win_);
  n->locked_ = true;
  n->srcs_.resize(static_cast<size_t>(lsize));
  n->group_srcs_.resize(static_cast<size_t>(lsize));
  return n;
}

Intranode::~Intranode() = default;

void Intranode::free_collective() {
  if (locked_) pmpi.Win_unlock_all(win_);
  locked_ = false;
  if (win_ != MPI_WIN_NULL) pmpi.Win_free(&win_);
  if (cross_ != MPI_COMM_NULL) pmpi.Comm_free(&cross_);
  if (local_ != MPI_COMM_NULL) pmpi.Comm_free(&local_);
}

void Intranode::sync() {
  // The unified memory model's recipe for load/store sharing: a memory barrier on each side of a
  // process barrier.
  pmpi.Win_sync(win_);
  pmpi.Barrier(local_);
  pmpi.Win_sync(win_);
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
    uint8_t* res = result_[parity_][me];
    const int my_node = numa_of_[me];
    uint64_t local_bytes = 0, smp_bytes = 0;
    auto account = [&](size_t rank, size_t bytes) { (numa_of_[rank] == my_node ? local_bytes : smp_bytes) += bytes; };
    const bool two_stage = numa_plan_ && dtype != wire::Dtype::kFp16 && dtype != wire::Dtype::kBf16;
    if (two_stage) {
      // Stage 1: the ranks of each NUMA node reduce-scatter the node's inputs into the partial of
      // the node's first rank.
      const std::vector<int>& grp = groups_[my_group_];
      if (grp.size() >= 2) {
        const ElemRange part = shard_of(n, grp.size(), my_pos_);
        for (size_t k = 0; k < grp.size(); ++k) {
          group_srcs_[k] = input_[static_cast<size_t>(grp[k])] + part.begin * esize;
          account(static_cast<size_t>(grp[k]), part.size() * esize);
        }
        reducer_.reduce(dtype, op, group_srcs_.data(), grp.size(),
                        partial_[static_cast<size_t>(grp[0])] + part.begin * esize, part.size());
      }
      sync();
      // Stage 2: my shard across the nodes' partials (a node of one rank: its input).
      for (size_t g = 0; g < groups_.size(); ++g) {
        const auto first = static_cast<size_t>(groups_[g][0]);
        const uint8_t* base = groups_[g].size() >= 2 ? partial_[first] : input_[first];
        group_srcs_[g] = base + mine.begin * esize;
        account(first, mine.size() * esize);
      }
      reducer_.reduce(dtype, op, group_srcs_.data(), groups_.size(), res, mine.size());
    } else {
      for (size_t r = 0; r < locals; ++r) {
        srcs_[r] = input_[r] + mine.begin * esize;
        account(r, mine.size() * esize);
      }
      reducer_.reduce(dtype, op, srcs_.data(), locals, res, mine.size());
    }
    {
      std::lock_guard<std::mutex> lock(job.mu);
      Status st = job.comm->allreduce(res, res, mine.size());
      if (!st.ok()) return st;
    }
    sync();
    for (size_t r = 0; r < locals; ++r) {
      const ElemRange s = shard_of(n, locals, r);
      std::memcpy(out + (off + s.begin) * esize, result_[parity_][r], s.size() * esize);
      account(r, s.size() * esize);
    }
    if (stats_ != nullptr) stats_->intranode_piece(two_stage, two_stage, local_bytes, smp_bytes);
    parity_ ^= 1;
  }
  return {};
}

}  // namespace sumcast::mpi
