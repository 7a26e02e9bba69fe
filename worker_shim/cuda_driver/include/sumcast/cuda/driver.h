// The few CUDA driver API calls the worker shim needs, through a driver library opened at run
// time, so that one build serves hosts with and without GPUs.
//
// The entry points are declared here from the driver API reference (CUresult is an int,
// CUdeviceptr a 64-bit integer, CUcontext a pointer): no CUDA header is needed to build.
//
// Thread safety: a Driver is immutable after open(); its calls may be made from any thread (the
// CUDA driver's own rules apply: copies run in the context that owns the pointer, pushed for the
// duration of the call).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "sumcast/status.h"

namespace sumcast::cuda {

enum class MemoryKind : uint8_t {
  kHost,    // memory the CPU may read and write: pageable, pinned or registered host memory, managed memory
  kDevice,  // device memory: only the driver's copies may touch it
};

class Driver {
 public:
  // Opens the driver library `path` (libcuda.so.1, or a path) and initialises it (cuInit).
  // Unavailable when it does not load, lacks an entry point or cuInit fails: the message says which.
  static Result<std::unique_ptr<Driver>> open(const std::string& path);
  // The same, only if the library is already loaded in this process (a CUDA program loads it
  // before it can have device memory); nullptr with an OK status when it is not loaded.
  static Result<std::unique_ptr<Driver>> open_if_loaded(const std::string& path);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The kind of memory at `p`. An error for a pointer the driver cannot classify (never guessed
  // to be host memory).
  Result<MemoryKind> kind(const void* p) const;

  // Synchronous copies, each in the context that owns the device pointer.
  Status copy_to_host(void* host, const void* device, size_t bytes) const;
  Status copy_to_device(void* device, const void* host, size_t bytes) const;

  // Page-locked host memory usable from every context (for fast copies), allocated in the
  // context that owns `device` (the driver needs one current), or an error.
  Result<void*> alloc_pinned(size_t bytes, const void* device) const;
  void free_pinned(void* p) const;

  const std::string& path() const { return path_; }

 private:
  struct Api;
  Driver(void* lib, std::string path, std::unique_ptr<Api> api);
  static Result<std::unique_ptr<Driver>> bind(void* lib, const std::string& path);
  Status error(const char* what, int result) const;
  Result<void*> context_of(const void* device) const;

  void* lib_;
  std::string path_;
  std::unique_ptr<Api> api_;
};

}  // namespace sumcast::cuda
