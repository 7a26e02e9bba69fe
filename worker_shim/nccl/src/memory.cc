#include "memory.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "config.h"
#include "plugin_log.h"
#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl {
namespace {

// The few CUDA driver API entry points staging needs, declared from the driver API reference
// (CUresult is an int; CUdeviceptr an unsigned 64-bit integer on 64-bit hosts).
using CuResult = int;
using CuDevicePtr = unsigned long long;
struct CudaDriver {
  CuResult (*init)(unsigned int flags) = nullptr;
  CuResult (*device_count)(int* count) = nullptr;
  CuResult (*dtoh)(void* dst, CuDevicePtr src, size_t bytes) = nullptr;
  CuResult (*htod)(CuDevicePtr dst, const void* src, size_t bytes) = nullptr;
  CuResult (*error_string)(CuResult error, const char** text) = nullptr;
  bool usable = false;
};

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

const CudaDriver& driver() {
  static CudaDriver d;
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef SUMCAST_NCCL_CUDA
    auto cfg = plugin_config();
    if (cfg.ok() && !(*cfg)->cuda) {
      SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers off (SUMCAST_NCCL_CUDA=0)");
      return;
    }
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers off: no CUDA driver (%s)", dlerror());
      return;
    }
    if (!resolve(lib, "cuInit", &d.init) || !resolve(lib, "cuDeviceGetCount", &d.device_count) ||
        !resolve(lib, "cuMemcpyDtoH_v2", &d.dtoh) || !resolve(lib, "cuMemcpyHtoD_v2", &d.htod) ||
        !resolve(lib, "cuGetErrorString", &d.error_string)) {
      SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers off: the driver lacks an entry point");
      return;
    }
    int count = 0;
    const CuResult r = d.init(0);
    if (r != 0 || d.device_count(&count) != 0 || count == 0) {
      SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers off: cuInit %d, %d devices", r, count);
      return;
    }
    d.usable = true;
    SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers on: %d devices, staged through host memory", count);
#else
    SUMCAST_NCCL_INFO(abi::NCCL_INIT, "CUDA pointers off: built without SUMCAST_NCCL_CUDA");
#endif
  });
  return d;
}

Status cuda_error(const char* what, CuResult r) {
  const char* text = "unknown";
  if (driver().error_string != nullptr) driver().error_string(r, &text);
  return Status::io_error(std::string(what) + ": CUDA error " + std::to_string(r) + " (" + text + ")");
}

}  // namespace

Status register_memory(const void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return Status::invalid_argument("regMr: mhandle is NULL");
  if (type != abi::NCCL_PTR_HOST && type != abi::NCCL_PTR_CUDA) {
    return Status::invalid_argument("regMr: unsupported memory type " + std::to_string(type));
  }
  if (type == abi::NCCL_PTR_CUDA && !cuda_usable()) {
    return Status::unavailable("regMr: NCCL_PTR_CUDA memory but CUDA staging is not available here");
  }
  *mhandle = new MemHandle{type, data, size};
  return Status();
}

Status deregister_memory(void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return Status();
}

bool is_cuda(const void* mhandle) {
  return mhandle != nullptr && static_cast<const MemHandle*>(mhandle)->type == abi::NCCL_PTR_CUDA;
}

bool cuda_usable() { return driver().usable; }

Status cuda_to_host(void* host, const void* device, size_t bytes) {
  if (!cuda_usable()) return Status::unavailable("CUDA staging is not available");
  const CuResult r = driver().dtoh(host, reinterpret_cast<CuDevicePtr>(device), bytes);
  return r == 0 ? Status() : cuda_error("cuMemcpyDtoH", r);
}

Status cuda_to_device(void* device, const void* host, size_t bytes) {
  if (!cuda_usable()) return Status::unavailable("CUDA staging is not available");
  const CuResult r = driver().htod(reinterpret_cast<CuDevicePtr>(device), host, bytes);
  return r == 0 ? Status() : cuda_error("cuMemcpyHtoD", r);
}

}  // namespace sumcast::nccl
