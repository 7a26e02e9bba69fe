// CudaExecutor (cuda_executor.h). One stream per plan GPU on its device; the plan runs as
// cuda_schedule() says (cuda_schedule.h, tested without a device): a stage's GPU-side steps are
// queued on their destination's stream (so steps writing one buffer keep their order) and the
// stage ends when every stream is idle. Host-side steps (CPU reduce, host-to-host copy, exchange)
// first wait for all streams, then run on the calling thread.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "reduce_kernels.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/topo/cuda_executor.h"
#include "sumcast/topo/cuda_schedule.h"

namespace sumcast::topo {
namespace {

Status cuda_error(cudaError_t e, const std::string& what) {
  return Status::unavailable(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

#define SUMCAST_CUDA_TRY(expr, what)                    \
  do {                                                  \
    cudaError_t _e = (expr);                            \
    if (_e != cudaSuccess) return cuda_error(_e, what); \
  } while (0)

size_t elem_size(wire::Dtype d) { return d == wire::Dtype::kFp64 ? 8 : 4; }

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

struct CudaExecutor::Impl {
  const HostModel* model = nullptr;
  const Plan* plan = nullptr;
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  std::vector<int> device;                  // plan GPU index -> CUDA ordinal
  std::vector<int> gpu_of_node;             // model node id -> plan GPU index, -1
  std::vector<cudaStream_t> streams;        // per plan GPU
  std::vector<void*> scratch;               // per plan GPU, plan.bytes on its device
  std::vector<std::vector<bool>> peer;      // [dst][src]: direct reads
  std::vector<std::vector<void*>> staging;  // node id -> pinned slots
  void* host_scratch = nullptr;             // pinned, plan.bytes
  std::vector<CudaOp> schedule;             // cuda_schedule() of the plan

  ~Impl() {
    for (size_t i = 0; i < streams.size(); ++i) {
      cudaSetDevice(device[i]);
      if (streams[i]) cudaStreamDestroy(streams[i]);
      if (scratch[i]) cudaFree(scratch[i]);
    }
    for (auto& slots : staging) {
      for (void* p : slots) cudaFreeHost(p);
    }
    if (host_scratch) cudaFreeHost(host_scratch);
  }

  Status sync_all() {
    for (size_t i = 0; i < streams.size(); ++i) {
      cudaSetDevice(device[i]);
      SUMCAST_CUDA_TRY(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize");
    }
    return Status();
  }

  Status cpu_reduce(uint8_t* dst, const uint8_t* src, uint64_t len) {
    const kernels::KernelTable& k = kernels::active_kernels();
    k.accumulate[static_cast<int>(dtype)][static_cast<int>(op)](dst, src, len / elem_size(dtype));
    return Status();
  }

  // Carries out one op of the schedule (cuda_schedule.h decides; this only calls CUDA).
  Status run_op(const CudaOp& o, std::span<void* const> bufs, const ExchangeFn& exchange) {
    const Step& s = plan->stages[o.stage].steps[o.step];
    const int dg = o.dst_gpu, sg = o.src_gpu;
    auto host = [&](const BufferRef& b) {
      return static_cast<uint8_t*>(staging[static_cast<size_t>(b.node)][static_cast<size_t>(b.slot)]) + s.offset;
    };
    auto dev = [&](int g) { return static_cast<uint8_t*>(bufs[static_cast<size_t>(g)]) + s.offset; };
    const size_t n = s.length / elem_size(dtype);
    if (o.stream < 0) {
      SUMCAST_RETURN_IF_ERROR(sync_all());  // earlier steps of this stage may write what this one reads
    } else {
      cudaSetDevice(device[static_cast<size_t>(o.stream)]);
    }
    cudaStream_t stream = o.stream >= 0 ? streams[static_cast<size_t>(o.stream)] : nullptr;
    uint8_t* dev_tmp = dg >= 0 ? static_cast<uint8_t*>(scratch[static_cast<size_t>(dg)]) + s.offset : nullptr;
    uint8_t* host_tmp = static_cast<uint8_t*>(host_scratch) + s.offset;
    switch (o.kind) {
      case CudaOpKind::kPeerCopy:
        SUMCAST_CUDA_TRY(cudaMemcpyPeerAsync(dev(dg), device[static_cast<size_t>(dg)], dev(sg),
                                             device[static_cast<size_t>(sg)], s.length, stream),
                         "cudaMemcpyPeerAsync");
        return Status();
      case CudaOpKind::kHostToDevice:
        SUMCAST_CUDA_TRY(cudaMemcpyAsync(dev(dg), host(s.src), s.length, cudaMemcpyHostToDevice, stream),
                         "cudaMemcpyAsync H2D");
        return Status();
      case CudaOpKind::kDeviceToHost:
        cudaSetDevice(device[static_cast<size_t>(sg)]);
        SUMCAST_CUDA_TRY(cudaMemcpy(host(s.dst), dev(sg), s.length, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        return Status();
      case CudaOpKind::kHostCopy:
        std::memmove(host(s.dst), host(s.src), s.length);
        return Status();
      case CudaOpKind::kReduceDirect:
        SUMCAST_CUDA_TRY(cuda::launch_reduce(dtype, op, dev(dg), dev(sg), n, stream), "reduce kernel");
        return Status();
      case CudaOpKind::kReducePeerScratch:
        SUMCAST_CUDA_TRY(cudaMemcpyPeerAsync(dev_tmp, device[static_cast<size_t>(dg)], dev(sg),
                                             device[static_cast<size_t>(sg)], s.length, stream),
                         "cudaMemcpyPeerAsync to scratch");
        SUMCAST_CUDA_TRY(cuda::launch_reduce(dtype, op, dev(dg), dev_tmp, n, stream), "reduce kernel");
        return Status();
      case CudaOpKind::kReduceHostScratch:
        SUMCAST_CUDA_TRY(cudaMemcpyAsync(dev_tmp, host(s.src), s.length, cudaMemcpyHostToDevice, stream),
                         "cudaMemcpyAsync H2D to scratch");
        SUMCAST_CUDA_TRY(cuda::launch_reduce(dtype, op, dev(dg), dev_tmp, n, stream), "reduce kernel");
        return Status();
      case CudaOpKind::kReduceHostFromGpu:
        cudaSetDevice(device[static_cast<size_t>(sg)]);
        SUMCAST_CUDA_TRY(cudaMemcpy(host_tmp, dev(sg), s.length, cudaMemcpyDeviceToHost), "cudaMemcpy D2H to scratch");
        return cpu_reduce(host(s.dst), host_tmp, s.length);
      case CudaOpKind::kReduceHost:
        return cpu_reduce(host(s.dst), host(s.src), s.length);
      case CudaOpKind::kExchangeHost:
      case CudaOpKind::kExchangeGpu:
        if (!exchange)
          return Status::invalid_argument("the plan has an exchange step and no exchange function was given");
        if (o.kind == CudaOpKind::kExchangeHost) return exchange(host(s.dst), s.offset, s.length);
        cudaSetDevice(device[static_cast<size_t>(dg)]);
        SUMCAST_CUDA_TRY(cudaMemcpy(host_tmp, dev(dg), s.length, cudaMemcpyDeviceToHost),
                         "cudaMemcpy D2H for exchange");
        SUMCAST_RETURN_IF_ERROR(exchange(host_tmp, s.offset, s.length));
        SUMCAST_CUDA_TRY(cudaMemcpy(dev(dg), host_tmp, s.length, cudaMemcpyHostToDevice),
                         "cudaMemcpy H2D after exchange");
        return Status();
    }
    return Status::internal("unknown op");
  }
};

CudaExecutor::CudaExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaExecutor::~CudaExecutor() = default;

bool CudaExecutor::direct(int dst, int src) const {
  return impl_->peer[static_cast<size_t>(dst)][static_cast<size_t>(src)];
}

Result<std::unique_ptr<CudaExecutor>> CudaExecutor::create(const HostModel& model, const Plan& plan, wire::Dtype dtype,
                                                           wire::ReduceOp op, std::vector<int> devices) {
  SUMCAST_RETURN_IF_ERROR(check_host_dtype(dtype, op));
  if (plan.elem_size != elem_size(dtype)) return Status::invalid_argument("plan element size does not match the dtype");
  SUMCAST_RETURN_IF_ERROR(validate_plan(model, plan));
  int count = cuda_device_count();
  if (count == 0) return Status::unavailable("no CUDA device");
  size_t gpus = static_cast<size_t>(model.gpu_count());
  if (devices.empty()) {
    for (size_t i = 0; i < gpus; ++i) devices.push_back(static_cast<int>(i));
  }
  if (devices.size() != gpus) return Status::invalid_argument("need one CUDA device per GPU of the plan");
  for (int d : devices) {
    if (d < 0 || d >= count) return Status::invalid_argument("CUDA device " + std::to_string(d) + " does not exist");
  }
  auto impl = std::make_unique<Impl>();
  impl->model = &model;
  impl->plan = &plan;
  impl->dtype = dtype;
  impl->op = op;
  impl->device = devices;
  impl->gpu_of_node.assign(model.nodes().size(), -1);
  for (int g : model.gpus()) impl->gpu_of_node[static_cast<size_t>(g)] = model.node(g).index;
  impl->streams.assign(gpus, nullptr);
  impl->scratch.assign(gpus, nullptr);
  impl->peer.assign(gpus, std::vector<bool>(gpus, false));
  for (size_t i = 0; i < gpus; ++i) {
    SUMCAST_CUDA_TRY(cudaSetDevice(devices[i]), "cudaSetDevice");
    SUMCAST_CUDA_TRY(cudaStreamCreateWithFlags(&impl->streams[i], cudaStreamNonBlocking), "cudaStreamCreate");
    SUMCAST_CUDA_TRY(cudaMalloc(&impl->scratch[i], plan.bytes == 0 ? 1 : plan.bytes), "cudaMalloc scratch");
    for (size_t j = 0; j < gpus; ++j) {
      if (devices[i] == devices[j]) {
        impl->peer[i][j] = true;
        continue;
      }
      int can = 0;
      SUMCAST_CUDA_TRY(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]), "cudaDeviceCanAccessPeer");
      if (!can) continue;
      cudaError_t e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      impl->peer[i][j] = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    }
  }
  impl->schedule = cuda_schedule(model, plan, impl->peer);
  impl->staging.resize(model.nodes().size());
  for (const auto& [node, slots] : plan.host_slots) {
    for (int s = 0; s < slots; ++s) {
      void* p = nullptr;
      SUMCAST_CUDA_TRY(cudaMallocHost(&p, plan.bytes == 0 ? 1 : plan.bytes), "cudaMallocHost staging");
      impl->staging[static_cast<size_t>(node)].push_back(p);
    }
  }
  SUMCAST_CUDA_TRY(cudaMallocHost(&impl->host_scratch, plan.bytes == 0 ? 1 : plan.bytes), "cudaMallocHost scratch");
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(impl)));
}

Status CudaExecutor::run(std::span<void* const> device_buffers, const ExchangeFn& exchange) {
  if (device_buffers.size() != impl_->device.size()) {
    return Status::invalid_argument("run() needs one device buffer per GPU of the plan");
  }
  const std::vector<CudaOp>& ops = impl_->schedule;
  size_t i = 0;
  for (size_t stage = 0; stage < impl_->plan->stages.size(); ++stage) {
    for (; i < ops.size() && ops[i].stage == stage; ++i) {
      Status st = impl_->run_op(ops[i], device_buffers, exchange);
      if (!st.ok()) {
        (void)impl_->sync_all();
        return st;
      }
    }
    SUMCAST_RETURN_IF_ERROR(impl_->sync_all());
  }
  return Status();
}

}  // namespace sumcast::topo
