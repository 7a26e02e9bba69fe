// ShmReduction (cpu_executor.h): the plan's buffers in one POSIX shared-memory segment and a
// process-shared barrier (mutex + condition variable on CLOCK_MONOTONIC, generation counted).
//
// Layout: Header (one page) | rank buffers (ranks x stride) | staging buffers (slots x stride);
// stride = bytes rounded up to 64.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "exec_util.h"
#include "sumcast/topo/cpu_executor.h"

namespace sumcast::topo {
namespace {

constexpr uint64_t kMagic = 0x31435453504F5453ull;  // "STOPSTC1"
constexpr size_t kHeaderSize = 4096;

struct Header {
  uint64_t magic;
  uint64_t size;
  uint64_t bytes;
  uint32_t ranks;
  uint32_t slots;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  uint32_t arrived;
  uint64_t generation;
  // The first generation (barrier) at which a rank reported a failure; kNoFailure if none. Ranks
  // leaving an earlier barrier late must not see a failure recorded for a later one.
  uint64_t failed_gen;
};
constexpr uint64_t kNoFailure = ~uint64_t{0};
static_assert(sizeof(Header) <= kHeaderSize);

size_t stride_of(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

Status barrier(Header* h, int timeout_ms, bool failing) {
  pthread_mutex_lock(&h->mutex);
  uint64_t gen = h->generation;
  if (failing) h->failed_gen = std::min(h->failed_gen, gen);
  if (++h->arrived == h->ranks) {
    h->arrived = 0;
    ++h->generation;
    pthread_cond_broadcast(&h->cond);
  } else {
    timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000L;
    }
    while (h->generation == gen) {
      int rc = pthread_cond_timedwait(&h->cond, &h->mutex, &deadline);
      if (rc == ETIMEDOUT && h->generation == gen) {
        h->failed_gen = std::min(h->failed_gen, gen);
        pthread_mutex_unlock(&h->mutex);
        return Status::timeout("shared-memory reduction: other ranks did not reach the barrier within " +
                               std::to_string(timeout_ms) + " ms");
      }
    }
  }
  bool failed = h->failed_gen <= gen;
  pthread_mutex_unlock(&h->mutex);
  return failed ? Status::aborted("shared-memory reduction: another rank failed") : Status();
}

}  // namespace

ShmReduction::ShmReduction(ShmReduction&& o) noexcept
    : name_(std::move(o.name_)),
      creator_(o.creator_),
      base_(o.base_),
      size_(o.size_),
      ranks_(o.ranks_),
      model_(o.model_),
      plan_(o.plan_),
      dtype_(o.dtype_),
      op_(o.op_),
      staging_offset_(std::move(o.staging_offset_)),
      owner_(std::move(o.owner_)) {
  o.base_ = nullptr;
  o.creator_ = false;
}

ShmReduction::~ShmReduction() {
  if (base_) munmap(base_, size_);
  if (creator_) shm_unlink(name_.c_str());
}

Result<ShmReduction> ShmReduction::create(const std::string& name, const HostModel& model, const Plan& plan,
                                          wire::Dtype dtype, wire::ReduceOp op) {
  return map(name, model, plan, dtype, op, true);
}

Result<ShmReduction> ShmReduction::attach(const std::string& name, const HostModel& model, const Plan& plan,
                                          wire::Dtype dtype, wire::ReduceOp op) {
  return map(name, model, plan, dtype, op, false);
}

Result<ShmReduction> ShmReduction::map(const std::string& name, const HostModel& model, const Plan& plan,
                                       wire::Dtype dtype, wire::ReduceOp op, bool create) {
  SUMCAST_RETURN_IF_ERROR(check_host_dtype(dtype, op));
  if (plan.elem_size != internal::host_elem_size(dtype)) {
    return Status::invalid_argument("plan element size does not match the dtype");
  }
  SUMCAST_RETURN_IF_ERROR(validate_plan(model, plan));
  ShmReduction r;
  r.name_ = name;
  r.model_ = &model;
  r.plan_ = &plan;
  r.dtype_ = dtype;
  r.op_ = op;
  r.ranks_ = model.gpu_count();
  size_t stride = stride_of(plan.bytes);
  size_t slots = 0;
  r.staging_offset_.assign(model.nodes().size(), 0);
  for (const auto& [node, n] : plan.host_slots) {
    r.staging_offset_[static_cast<size_t>(node)] = kHeaderSize + (static_cast<size_t>(r.ranks_) + slots) * stride;
    slots += static_cast<size_t>(n);
  }
  r.size_ = kHeaderSize + (static_cast<size_t>(r.ranks_) + slots) * stride;
  // Owners: GPUs own themselves; a NUMA node's staging belongs to its lowest rank, else rank 0.
  r.owner_.assign(model.nodes().size(), 0);
  for (int g : model.gpus()) r.owner_[static_cast<size_t>(g)] = model.node(g).index;
  for (int numa : model.numa_nodes()) {
    for (int g : model.gpus()) {
      if (model.node(g).numa == numa) {
        r.owner_[static_cast<size_t>(numa)] = model.node(g).index;
        break;
      }
    }
  }
  int fd = shm_open(name.c_str(), create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR, 0600);
  if (fd < 0) return Status::from_errno("shm_open " + name);
  if (create && ftruncate(fd, static_cast<off_t>(r.size_)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Status::from_errno("ftruncate " + name, err);
  }
  struct stat st {};
  if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != r.size_)) {
    close(fd);
    return Status::invalid_argument("shared memory " + name + " does not have this plan's size");
  }
  void* p = mmap(nullptr, r.size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return Status::from_errno("mmap " + name, err);
  }
  r.base_ = static_cast<uint8_t*>(p);
  r.creator_ = create;
  auto* h = reinterpret_cast<Header*>(r.base_);
  if (create) {
    h->size = r.size_;
    h->bytes = plan.bytes;
    h->ranks = static_cast<uint32_t>(r.ranks_);
    h->slots = static_cast<uint32_t>(slots);
    h->arrived = 0;
    h->generation = 0;
    h->failed_gen = kNoFailure;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&h->mutex, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cond, &ca);
    pthread_condattr_destroy(&ca);
    __atomic_store_n(&h->magic, kMagic, __ATOMIC_RELEASE);
  } else if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kMagic || h->bytes != plan.bytes ||
             h->ranks != static_cast<uint32_t>(r.ranks_) || h->slots != slots) {
    return Status::invalid_argument("shared memory " + name + " was made for another plan");
  }
  return r;
}

void* ShmReduction::buffer(int rank) const {
  return base_ + kHeaderSize + static_cast<size_t>(rank) * stride_of(plan_->bytes);
}

int ShmReduction::owner_of(int node) const { return owner_[static_cast<size_t>(node)]; }

uint8_t* ShmReduction::resolve(const BufferRef& b) const {
  if (model_->node(b.node).kind == NodeKind::kGpu) return static_cast<uint8_t*>(buffer(model_->node(b.node).index));
  return base_ + staging_offset_[static_cast<size_t>(b.node)] + static_cast<size_t>(b.slot) * stride_of(plan_->bytes);
}

Status ShmReduction::run(int rank, const ExchangeFn& exchange, int timeout_ms) {
  if (rank < 0 || rank >= ranks_) return Status::invalid_argument("rank " + std::to_string(rank) + " out of range");
  auto* h = reinterpret_cast<Header*>(base_);
  SUMCAST_RETURN_IF_ERROR(barrier(h, timeout_ms, false));  // every rank's input is in place
  for (const Stage& stage : plan_->stages) {
    Status st;
    for (const Step& step : stage.steps) {
      if (owner_of(step.dst.node) != rank) continue;
      st = internal::apply_host_step(step, resolve(step.dst), resolve(step.src), dtype_, op_, exchange);
      if (!st.ok()) break;
    }
    Status b = barrier(h, timeout_ms, !st.ok());
    if (!st.ok()) return st;
    SUMCAST_RETURN_IF_ERROR(b);
  }
  return Status();
}

}  // namespace sumcast::topo
