#include "collnet.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "plugin_log.h"
#include "sumcast/shim/communicator.h"

namespace sumcast::nccl {
namespace {

constexpr uint32_t kCollHandleMagic = 0x5343434e;  // "SCCN"
// The lane connect registers (collnet.h "Set-up"): fp32 sum, what training all-reduces most.
constexpr wire::Dtype kSetupDtype = wire::Dtype::kFp32;
constexpr wire::ReduceOp kSetupOp = wire::ReduceOp::kSum;
constexpr uint16_t kCollVersion = 1;

struct CollHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t nonce;
};
static_assert(sizeof(CollHandle) <= abi::NCCL_NET_HANDLE_MAXSIZE);

struct CollListen {
  int dev = 0;
  uint64_t nonce = 0;
  int traffic_class = -1;  // the communicator's (collnet.h "Traffic class"); -1: none
};

enum class LaneState { kCreating, kReady, kFailed };

struct CollRequest;

struct Lane {
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  std::string job;
  LaneState state = LaneState::kCreating;
  std::thread creator;
  std::atomic<bool> created{false};
  Result<std::unique_ptr<shim::Communicator>> made{Status::internal("registering")};  // creator's result
  std::unique_ptr<shim::Communicator> comm;
  Status error;
  CollRequest* queue_head = nullptr;  // accepted, waiting for the lane, in call order
  CollRequest* queue_tail = nullptr;
  uint64_t calls = 0;
  size_t failovers_logged = 0;  // the communicator's failovers already reported
  ~Lane() {
    if (creator.joinable()) creator.join();
  }
};

struct Copy {
  void* dst;
  size_t src_offset;  // into the request's staging buffer
  size_t bytes;
};

struct CollRequest {
  bool in_use = false;
  Lane* lane = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  uint64_t id = 0;
  bool started = false;
  bool finished = false;
  Status status;
  size_t result_bytes = 0;
  Copy copies[kCollMaxParts] = {};
  int n_copies = 0;
  std::vector<unsigned char> staging;  // capacity kept across uses
  CollRequest* next = nullptr;
};

struct CollComm {
  int rank = 0;
  int nranks = 0;
  std::string job;
  const PluginConfig* config = nullptr;
  uint8_t dscp = 0;  // the contributions' marks: the settings', or the traffic class's (connect)
  bool ecn = false;
  std::unique_ptr<Lane> lanes[wire::kDtypeCount][wire::kReduceOpCount];
  CollRequest reqs[kCollMaxRequests];
  uint64_t allreduce_calls = 0;
  uint64_t allgather_calls = 0;
  uint64_t reducescatter_calls = 0;
  uint64_t bytes = 0;  // through the appliance
};

uint64_t random_nonce() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// A new lane of `c` and the worker library's settings for its job.
shim::CommConfig new_lane(CollComm* c, wire::Dtype dtype, wire::ReduceOp op, Lane** out) {
  std::unique_ptr<Lane>& slot = c->lanes[static_cast<int>(dtype)][static_cast<int>(op)];
  slot = std::make_unique<Lane>();
  Lane* lane = slot.get();
  *out = lane;
  lane->dtype = dtype;
  lane->op = op;
  lane->job = c->job + "-" + wire::dtype_name(dtype) + "-" + wire::reduce_op_name(op);
  shim::CommConfig cfg;
  cfg.job_name = lane->job;
  cfg.rank = static_cast<uint16_t>(c->rank);
  cfg.world_size = static_cast<uint16_t>(c->nranks);
  cfg.appliances = c->config->appliances;
  cfg.token = c->config->token;
  cfg.dtype = dtype;
  cfg.op = op;
  cfg.payload_bytes = c->config->payload_bytes;
  cfg.payload_explicit = c->config->payload_explicit;
  cfg.slots = static_cast<uint16_t>(c->config->slots);
  cfg.multicast = c->config->multicast;
  cfg.bind_ip = c->config->bind_ip;
  cfg.rto_initial_us = c->config->rto_us;
  cfg.busy_poll_us = c->config->busy_poll_us;
  cfg.udp_gro = c->config->udp_gro;
  cfg.udp_gso = c->config->udp_gso;
  cfg.send_queue_us = c->config->send_queue_us;
  cfg.loss_notices = c->config->loss_notices;
  cfg.dscp = c->dscp;
  cfg.ecn = c->ecn;
  cfg.repair_dscp = c->config->repair_dscp;
  cfg.cnp_reaction = c->config->cnp_reaction;
  cfg.window_cut_percent = c->config->window_cut_percent;
  cfg.window_step = c->config->window_step;
  cfg.rto_max_us = std::max<uint32_t>(cfg.rto_max_us, c->config->rto_us);
  cfg.op_timeout_ms = c->config->op_timeout_ms;
  cfg.register_timeout_ms = c->config->register_timeout_ms;
  SUMCAST_NCCL_INFO(abi::NCCL_NET, "CollNet rank %d/%d: registering job %s", c->rank, c->nranks, lane->job.c_str());
  return cfg;
}

void log_registered(const Lane* lane) {
  const auto& apps = lane->comm->appliances();
  SUMCAST_NCCL_INFO(abi::NCCL_NET, "CollNet job %s registered with %zu appliance(s), %u elements per packet",
                    lane->job.c_str(), apps.size(), apps.empty() ? 0u : apps[0].chunk_elems);
}

// An aggregator the lane's communicator lost and replaced (docs/failover.md) is no error for
// NCCL: the calls go on with exact results. Said once per failover, as INFO.
void log_failovers(Lane* lane) {
  const auto& log = lane->comm->failovers();
  for (; lane->failovers_logged < log.size(); ++lane->failovers_logged) {
    const shim::FailoverEvent& e = log[lane->failovers_logged];
    SUMCAST_NCCL_INFO(abi::NCCL_NET,
                      "CollNet job %s: failover %u: %s lost (%s); its range moved to %s in %" PRIu64 " ms, %" PRIu64
                      " chunks replayed",
                      lane->job.c_str(), e.epoch, e.lost.c_str(), e.reason.c_str(), e.new_home.c_str(), e.ms,
                      e.replayed);
  }
}

// The lane of (dtype, op); a new one starts registering in the background.
Lane* lane_for(CollComm* c, wire::Dtype dtype, wire::ReduceOp op) {
  if (Lane* lane = c->lanes[static_cast<int>(dtype)][static_cast<int>(op)].get()) return lane;
  Lane* lane = nullptr;
  const shim::CommConfig cfg = new_lane(c, dtype, op, &lane);
  lane->creator = std::thread([lane, cfg] {
    lane->made = shim::Communicator::create(cfg);
    lane->created.store(true, std::memory_order_release);
  });
  return lane;
}

void start(Lane* lane, CollRequest* r) {
  r->started = true;
  ++lane->calls;
  if (r->count == 0) {
    r->finished = true;
    return;
  }
  auto id = lane->comm->start_allreduce(r->send, r->recv, r->count);
  if (!id.ok()) {
    r->finished = true;
    r->status = id.status();
    return;
  }
  r->id = *id;
}

// Notices a finished registration; starts (or fails) the calls that waited for it.
void pump(Lane* lane) {
  if (lane->state != LaneState::kCreating || !lane->created.load(std::memory_order_acquire)) return;
  lane->creator.join();
  if (lane->made.ok()) {
    lane->comm = std::move(lane->made).value();
    lane->state = LaneState::kReady;
    log_registered(lane);
  } else {
    lane->state = LaneState::kFailed;
    lane->error = lane->made.status();
    SUMCAST_NCCL_WARN("CollNet job %s: registration failed: %s", lane->job.c_str(), lane->error.message().c_str());
  }
  for (CollRequest* r = lane->queue_head; r != nullptr; r = r->next) {
    if (lane->state == LaneState::kReady) {
      start(lane, r);
    } else {
      r->started = r->finished = true;
      r->status = lane->error;
    }
  }
  lane->queue_head = lane->queue_tail = nullptr;
}

CollRequest* take_request(CollComm* c) {
  for (CollRequest& r : c->reqs) {
    if (!r.in_use) {
      r.in_use = true;
      r.started = r.finished = false;
      r.status = Status();
      r.n_copies = 0;
      r.result_bytes = 0;
      r.next = nullptr;
      return &r;
    }
  }
  return nullptr;
}

// Hands an accepted request to its lane: now if it is ready, else after registration.
void submit(CollComm* c, Lane* lane, CollRequest* r, void** request) {
  c->bytes += r->count * wire::dtype_size(lane->dtype);
  pump(lane);
  if (lane->state == LaneState::kCreating) {
    (lane->queue_tail != nullptr ? lane->queue_tail->next : lane->queue_head) = r;
    lane->queue_tail = r;
  } else if (lane->state == LaneState::kReady) {
    start(lane, r);
  } else {
    r->started = r->finished = true;
    r->status = lane->error;
  }
  *request = r;
}

void copy_in(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

// The bytes [lo, hi) of the window that are this rank's own part.
void own_part(const CollComm* c, size_t bytes_per_rank, size_t window_offset, size_t window_bytes, size_t* lo,
              size_t* hi) {
  const size_t mine = static_cast<size_t>(c->rank) * bytes_per_rank;
  *lo = std::max(window_offset, mine);
  *hi = std::min(window_offset + window_bytes, mine + bytes_per_rank);
  if (*hi < *lo) *hi = *lo;
}

Status check_parts(int n_parts, const Sge* parts, size_t window_bytes) {
  if (n_parts < 1 || n_parts > kCollMaxParts || parts == nullptr) {
    return Status::invalid_argument("CollNet: " + std::to_string(n_parts) + " SGE parts (1.." +
                                    std::to_string(kCollMaxParts) + ")");
  }
  size_t total = 0;
  for (int i = 0; i < n_parts; ++i) total += parts[i].size;
  if (total != window_bytes) {
    return Status::invalid_argument("CollNet: SGE parts hold " + std::to_string(total) + " bytes, the window " +
                                    std::to_string(window_bytes));
  }
  return Status();
}

}  // namespace

bool to_wire(abi::ncclDataType_t dtype, abi::ncclRedOp_t op, wire::Dtype* wd, wire::ReduceOp* wo) {
  switch (dtype) {
    case abi::ncclFloat32:
      *wd = wire::Dtype::kFp32;
      break;
    case abi::ncclFloat16:
      *wd = wire::Dtype::kFp16;
      break;
    case abi::ncclBfloat16:
      *wd = wire::Dtype::kBf16;
      break;
    case abi::ncclInt32:
      *wd = wire::Dtype::kInt32;
      break;
    case abi::ncclFloat64:
      *wd = wire::Dtype::kFp64;
      break;
    default:
      return false;
  }
  switch (op) {
    case abi::ncclSum:
      *wo = wire::ReduceOp::kSum;
      break;
    case abi::ncclMin:
      *wo = wire::ReduceOp::kMin;
      break;
    case abi::ncclMax:
      *wo = wire::ReduceOp::kMax;
      break;
    default:
      return false;  // prod, and avg (NCCL hands the network avg as sum)
  }
  return true;
}

Status collnet_listen(int dev, void* handle, void** listen_comm, int traffic_class) {
  if (handle == nullptr || listen_comm == nullptr) return Status::invalid_argument("CollNet listen: NULL argument");
  auto* l = new CollListen{dev, random_nonce(), traffic_class};
  const CollHandle h{kCollHandleMagic, kCollVersion, 0, l->nonce};
  std::memset(handle, 0, abi::NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return Status();
}

Status collnet_connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) {
  if (handles == nullptr || coll_comm == nullptr) return Status::invalid_argument("CollNet connect: NULL argument");
  *coll_comm = nullptr;
  if (nranks < 1 || nranks > 65535 || rank < 0 || rank >= nranks) {
    return Status::invalid_argument("CollNet connect: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  }
  for (int i = 0; i < nranks; ++i) {
    const auto* h = static_cast<const CollHandle*>(handles[i]);
    if (h == nullptr || h->magic != kCollHandleMagic || h->version != kCollVersion) {
      return Status::invalid_argument("CollNet connect: handle of rank " + std::to_string(i) +
                                      " is not a sumcast CollNet handle");
    }
  }
  auto cfg = plugin_config();
  if (!cfg.ok()) return cfg.status();
  if ((*cfg)->appliances.empty()) return Status::unavailable("CollNet connect: SUMCAST_APPLIANCES is not set");
  auto c = std::make_unique<CollComm>();
  c->rank = rank;
  c->nranks = nranks;
  c->config = *cfg;
  char job[32];
  std::snprintf(job, sizeof(job), "nccl-%016" PRIx64, static_cast<const CollHandle*>(handles[0])->nonce);
  c->job = job;
  c->dscp = (*cfg)->dscp;
  c->ecn = (*cfg)->ecn;
  const int tc = listen_comm != nullptr ? static_cast<const CollListen*>(listen_comm)->traffic_class : -1;
  if (tc >= 0) {  // collnet.h "Traffic class"
    c->dscp = traffic_class_dscp(tc);
    c->ecn = c->ecn || traffic_class_ecn(tc);
    SUMCAST_NCCL_INFO(abi::NCCL_INIT | abi::NCCL_NET,
                      "CollNet rank %d of %d: NCCL's traffic class %d marks the contributions: DSCP %d%s, resends "
                      "DSCP %d",
                      rank, nranks, tc, c->dscp, c->ecn ? ", ECT(0)" : "",
                      (*cfg)->repair_dscp >= 0 ? (*cfg)->repair_dscp : c->dscp);
  }
  // The set-up lane registers here, on the calling thread, bounded by the connect and register
  // timeouts: the appliance's answer proves it is reachable, accepts the token and has room for
  // the job, and it comes only once every node registered, so either every node's connect
  // succeeds or every node's fails (the others' registrations time out). A failure is the error
  // NCCL needs to set CollNet aside for this communicator and go on over the ncclNet.
  Lane* lane = nullptr;
  auto made = shim::Communicator::create(new_lane(c.get(), kSetupDtype, kSetupOp, &lane));
  if (!made.ok()) {
    return Status(made.status().code(), "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ": job " +
                                            lane->job + " via " + (*cfg)->appliances[0].address + ": " +
                                            made.status().message() +
                                            " (NCCL goes on without CollNet for this communicator)");
  }
  lane->comm = std::move(made).value();
  lane->state = LaneState::kReady;
  lane->created.store(true, std::memory_order_release);
  log_registered(lane);
  SUMCAST_NCCL_INFO(abi::NCCL_INIT | abi::NCCL_NET, "CollNet connected: rank %d of %d, job %s, %zu appliance(s) (%s)",
                    rank, nranks, job, (*cfg)->appliances.size(), (*cfg)->appliances[0].address.c_str());
  *coll_comm = c.release();
  return Status();
}

Status collnet_iallreduce(void* coll_comm, const void* send, void* recv, size_t count, abi::ncclDataType_t dtype,
                          abi::ncclRedOp_t op, void* /*send_mhandle*/, void* /*recv_mhandle*/, void** request) {
  if (coll_comm == nullptr || request == nullptr) return Status::invalid_argument("iallreduce: NULL argument");
  *request = nullptr;
  wire::Dtype wd;
  wire::ReduceOp wo;
  if (!to_wire(dtype, op, &wd, &wo)) {
    return Status::invalid_argument("iallreduce: dtype " + std::to_string(dtype) + " op " + std::to_string(op) +
                                    " is not supported (reduceSupport says so)");
  }
  auto* c = static_cast<CollComm*>(coll_comm);
  CollRequest* r = take_request(c);
  if (r == nullptr) return Status();  // NCCL retries
  Lane* lane = lane_for(c, wd, wo);
  const size_t bytes = count * wire::dtype_size(wd);
  r->lane = lane;
  r->count = count;
  r->result_bytes = bytes;
  r->send = send;
  r->recv = recv;
  ++c->allreduce_calls;
  submit(c, lane, r, request);
  return Status();
}

Status collnet_iallgather(void* coll_comm, const void* send, int n_parts, const Sge* recv_parts, size_t bytes_per_rank,
                          size_t window_offset, size_t window_bytes, void* /*send_mhandle*/, void** request) {
  if (coll_comm == nullptr || request == nullptr) return Status::invalid_argument("iallgather: NULL argument");
  *request = nullptr;
  SUMCAST_RETURN_IF_ERROR(check_parts(n_parts, recv_parts, window_bytes));
  auto* c = static_cast<CollComm*>(coll_comm);
  CollRequest* r = take_request(c);
  if (r == nullptr) return Status();
  const size_t padded = (window_bytes + 3) / 4 * 4;  // int32 elements; the padding sums zeros
  r->staging.assign(padded, 0);
  size_t lo = 0;
  size_t hi = 0;
  own_part(c, bytes_per_rank, window_offset, window_bytes, &lo, &hi);
  copy_in(r->staging.data() + (lo - window_offset), send, hi - lo);
  size_t off = 0;
  for (int i = 0; i < n_parts; ++i) {
    r->copies[r->n_copies++] = Copy{recv_parts[i].address, off, recv_parts[i].size};
    off += recv_parts[i].size;
  }
  r->lane = lane_for(c, wire::Dtype::kInt32, wire::ReduceOp::kSum);
  r->send = r->recv = r->staging.data();
  r->count = padded / 4;
  r->result_bytes = window_bytes;
  ++c->allgather_calls;
  submit(c, r->lane, r, request);
  return Status();
}

Status collnet_ireducescatter(void* coll_comm, int n_parts, const Sge* send_parts, void* recv, size_t bytes_per_rank,
                              size_t window_offset, size_t window_bytes, abi::ncclDataType_t dtype, abi::ncclRedOp_t op,
                              void* /*recv_mhandle*/, void** request) {
  if (coll_comm == nullptr || request == nullptr) return Status::invalid_argument("ireducescatter: NULL argument");
  *request = nullptr;
  SUMCAST_RETURN_IF_ERROR(check_parts(n_parts, send_parts, window_bytes));
  wire::Dtype wd;
  wire::ReduceOp wo;
  if (!to_wire(dtype, op, &wd, &wo)) {
    return Status::invalid_argument("ireducescatter: dtype " + std::to_string(dtype) + " op " + std::to_string(op) +
                                    " is not supported");
  }
  const size_t elem = wire::dtype_size(wd);
  if (window_bytes % elem != 0 || window_offset % elem != 0 || bytes_per_rank % elem != 0) {
    return Status::invalid_argument("ireducescatter: window not aligned to the element size");
  }
  auto* c = static_cast<CollComm*>(coll_comm);
  CollRequest* r = take_request(c);
  if (r == nullptr) return Status();
  r->staging.resize(window_bytes);
  size_t off = 0;
  for (int i = 0; i < n_parts; ++i) {
    copy_in(r->staging.data() + off, send_parts[i].address, send_parts[i].size);
    off += send_parts[i].size;
  }
  size_t lo = 0;
  size_t hi = 0;
  own_part(c, bytes_per_rank, window_offset, window_bytes, &lo, &hi);
  r->copies[r->n_copies++] = Copy{recv, lo - window_offset, hi - lo};
  r->lane = lane_for(c, wd, wo);
  r->send = r->recv = r->staging.data();
  r->count = window_bytes / elem;
  r->result_bytes = hi - lo;
  ++c->reducescatter_calls;
  submit(c, r->lane, r, request);
  return Status();
}

Status collnet_test(void* request, int* done, int* size) {
  if (request == nullptr || done == nullptr) return Status::invalid_argument("CollNet test: NULL argument");
  auto* r = static_cast<CollRequest*>(request);
  if (!r->in_use) return Status::invalid_argument("CollNet test: request is not in use (tested after completion?)");
  *done = 0;
  Lane* lane = r->lane;
  pump(lane);
  if (!r->finished && r->started) {
    r->finished = lane->comm->test(r->id, &r->status);
    log_failovers(lane);
  }
  if (!r->finished) return Status();
  const Status s = r->status;
  for (int i = 0; s.ok() && i < r->n_copies; ++i) {
    const Copy& cp = r->copies[i];
    copy_in(cp.dst, r->staging.data() + cp.src_offset, cp.bytes);
  }
  r->in_use = false;
  if (!s.ok()) return Status(s.code(), "CollNet job " + lane->job + ": " + s.message());
  if (size != nullptr) *size = static_cast<int>(r->result_bytes);
  *done = 1;
  return Status();
}

Status collnet_close(void* coll_comm) {
  auto* c = static_cast<CollComm*>(coll_comm);
  if (c == nullptr) return Status();
  std::string lanes;
  for (auto& row : c->lanes) {
    for (auto& lane : row) {
      if (!lane) continue;
      lanes += " " + lane->job.substr(c->job.size() + 1) + ":" + std::to_string(lane->calls);
      if (lane->state == LaneState::kReady) {
        const shim::CommStats st = lane->comm->stats();
        if (st.failovers != 0) {
          lanes += " (" + std::to_string(st.failovers) + " failover, " + std::to_string(st.replayed_chunks) +
                   " chunks replayed)";
        }
      }
    }
  }
  SUMCAST_NCCL_INFO(abi::NCCL_NET,
                    "CollNet closeColl rank %d/%d job %s: %" PRIu64 " iallreduce, %" PRIu64 " iallgather, %" PRIu64
                    " ireducescatter, %" PRIu64 " bytes through the appliance; calls per lane (and failovers):%s",
                    c->rank, c->nranks, c->job.c_str(), c->allreduce_calls, c->allgather_calls, c->reducescatter_calls,
                    c->bytes, lanes.c_str());
  delete c;  // joins registrations still running; each Communicator leaves its job
  return Status();
}

Status collnet_close_listen(void* listen_comm) {
  delete static_cast<CollListen*>(listen_comm);
  return Status();
}

}  // namespace sumcast::nccl
