#include "sumcast/cuda/driver.h"

#include <dlfcn.h>

#include <cstdint>
#include <string>

namespace sumcast::cuda {

// Driver API values used here (from the CUDA driver API reference).
namespace {
constexpr int kSuccess = 0;
constexpr int kErrorInvalidValue = 1;       // cuPointerGetAttribute: not memory CUDA knows: host memory
constexpr int kAttributeContext = 1;        // CU_POINTER_ATTRIBUTE_CONTEXT
constexpr int kAttributeMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttributeIsManaged = 8;      // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr unsigned kMemoryTypeDevice = 2;   // CU_MEMORYTYPE_DEVICE
constexpr unsigned kHostAllocPortable = 1;  // CU_MEMHOSTALLOC_PORTABLE
using DevicePtr = unsigned long long;       // CUdeviceptr on 64-bit hosts
using Context = void*;                      // CUcontext
}  // namespace

struct Driver::Api {
  int (*init)(unsigned flags) = nullptr;
  int (*pointer_attribute)(void* data, int attribute, DevicePtr ptr) = nullptr;
  int (*dtoh)(void* dst, DevicePtr src, size_t bytes) = nullptr;
  int (*htod)(DevicePtr dst, const void* src, size_t bytes) = nullptr;
  int (*host_alloc)(void** p, size_t bytes, unsigned flags) = nullptr;
  int (*free_host)(void* p) = nullptr;
  int (*ctx_push)(Context ctx) = nullptr;
  int (*ctx_pop)(Context* ctx) = nullptr;
  int (*error_string)(int result, const char** text) = nullptr;
};

namespace {

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// The device pointer's context pushed for one scope (copies must run in it).
class ScopedContext {
 public:
  ScopedContext(int (*push)(Context), int (*pop)(Context*), Context ctx) : pop_(pop) {
    pushed_ = ctx != nullptr && push(ctx) == kSuccess;
  }
  ~ScopedContext() {
    Context old = nullptr;
    if (pushed_) pop_(&old);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  int (*pop_)(Context*);
  bool pushed_ = false;
};

}  // namespace

Driver::Driver(void* lib, std::string path, std::unique_ptr<Api> api)
    : lib_(lib), path_(std::move(path)), api_(std::move(api)) {}

Driver::~Driver() {
  if (lib_ != nullptr) dlclose(lib_);
}

Result<std::unique_ptr<Driver>> Driver::bind(void* lib, const std::string& path) {
  auto api = std::make_unique<Api>();
  const char* missing = nullptr;
  if (!resolve(lib, "cuInit", &api->init)) missing = "cuInit";
  if (!missing && !resolve(lib, "cuPointerGetAttribute", &api->pointer_attribute)) missing = "cuPointerGetAttribute";
  if (!missing && !resolve(lib, "cuMemcpyDtoH_v2", &api->dtoh)) missing = "cuMemcpyDtoH_v2";
  if (!missing && !resolve(lib, "cuMemcpyHtoD_v2", &api->htod)) missing = "cuMemcpyHtoD_v2";
  if (!missing && !resolve(lib, "cuMemHostAlloc", &api->host_alloc)) missing = "cuMemHostAlloc";
  if (!missing && !resolve(lib, "cuMemFreeHost", &api->free_host)) missing = "cuMemFreeHost";
  if (!missing && !resolve(lib, "cuCtxPushCurrent_v2", &api->ctx_push)) missing = "cuCtxPushCurrent_v2";
  if (!missing && !resolve(lib, "cuCtxPopCurrent_v2", &api->ctx_pop)) missing = "cuCtxPopCurrent_v2";
  if (!missing && !resolve(lib, "cuGetErrorString", &api->error_string)) missing = "cuGetErrorString";
  if (missing != nullptr) {
    dlclose(lib);
    return Status::unavailable("CUDA driver " + path + " lacks " + missing);
  }
  const int r = api->init(0);
  if (r != kSuccess) {
    const char* text = "unknown";
    api->error_string(r, &text);
    dlclose(lib);
    return Status::unavailable("CUDA driver " + path + ": cuInit failed: error " + std::to_string(r) + " (" +
                               (text != nullptr ? text : "unknown") + ")");
  }
  return std::unique_ptr<Driver>(new Driver(lib, path, std::move(api)));
}

Result<std::unique_ptr<Driver>> Driver::open(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    return Status::unavailable("no CUDA driver: " + std::string(e != nullptr ? e : path));
  }
  return bind(lib, path);
}

Result<std::unique_ptr<Driver>> Driver::open_if_loaded(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) return std::unique_ptr<Driver>();
  return bind(lib, path);
}

Status Driver::error(const char* what, int result) const {
  const char* text = nullptr;
  api_->error_string(result, &text);
  return Status::io_error(std::string(what) + ": CUDA error " + std::to_string(result) + " (" +
                          (text != nullptr ? text : "unknown") + ")");
}

Result<MemoryKind> Driver::kind(const void* p) const {
  unsigned type = 0;
  const int r = api_->pointer_attribute(&type, kAttributeMemoryType, reinterpret_cast<DevicePtr>(p));
  if (r == kErrorInvalidValue) return MemoryKind::kHost;  // memory CUDA does not know: plain host memory
  if (r != kSuccess) return error("cuPointerGetAttribute(MEMORY_TYPE)", r);
  if (type != kMemoryTypeDevice) return MemoryKind::kHost;  // pinned or registered host memory
  int managed = 0;
  const int m = api_->pointer_attribute(&managed, kAttributeIsManaged, reinterpret_cast<DevicePtr>(p));
  if (m != kSuccess) return error("cuPointerGetAttribute(IS_MANAGED)", m);
  return managed != 0 ? MemoryKind::kHost : MemoryKind::kDevice;
}

Result<void*> Driver::context_of(const void* device) const {
  Context ctx = nullptr;
  const int r = api_->pointer_attribute(&ctx, kAttributeContext, reinterpret_cast<DevicePtr>(device));
  if (r != kSuccess) return error("cuPointerGetAttribute(CONTEXT)", r);
  return ctx;
}

Status Driver::copy_to_host(void* host, const void* device, size_t bytes) const {
  auto ctx = context_of(device);
  if (!ctx.ok()) return ctx.status();
  ScopedContext scope(api_->ctx_push, api_->ctx_pop, *ctx);
  const int r = api_->dtoh(host, reinterpret_cast<DevicePtr>(device), bytes);
  return r == kSuccess ? Status() : error("cuMemcpyDtoH", r);
}

Status Driver::copy_to_device(void* device, const void* host, size_t bytes) const {
  auto ctx = context_of(device);
  if (!ctx.ok()) return ctx.status();
  ScopedContext scope(api_->ctx_push, api_->ctx_pop, *ctx);
  const int r = api_->htod(reinterpret_cast<DevicePtr>(device), host, bytes);
  return r == kSuccess ? Status() : error("cuMemcpyHtoD", r);
}

Result<void*> Driver::alloc_pinned(size_t bytes, const void* device) const {
  auto ctx = context_of(device);
  if (!ctx.ok()) return ctx.status();
  ScopedContext scope(api_->ctx_push, api_->ctx_pop, *ctx);
  void* p = nullptr;
  const int r = api_->host_alloc(&p, bytes, kHostAllocPortable);
  if (r != kSuccess) return error("cuMemHostAlloc", r);
  return p;
}

void Driver::free_pinned(void* p) const {
  if (p != nullptr) api_->free_host(p);
}

}  // namespace sumcast::cuda
