// Host views of a call's buffers when a CUDA-aware MPI program passes device memory to a
// reduction: the interposer, its worker library and its shared-memory step read and write host
// memory only, so a device buffer is copied into a host buffer before the call and the result is
// copied back after it. A device pointer is never read or written as host memory.
//
// Whole buffers are staged, not pieces of them: every rank of a call must cut it into the same
// appliance calls, and a rank whose buffers are host memory does not stage. The host buffers are
// page-locked (fast copies) where the driver allows, pageable otherwise; kept between calls and
// grown as needed.
//
// Thread safety: one call at a time per DeviceStaging (one per communicator, MPI's rule for
// collectives; one per outstanding non-blocking call).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/cuda/driver.h"
#include "sumcast/status.h"

namespace sumcast::mpi {

class DeviceStaging {
 public:
  // `driver` null: every buffer is host memory (a process without the CUDA driver).
  explicit DeviceStaging(const cuda::Driver* driver) : driver_(driver) {}
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // What a call runs on. send == recv when the call is in place.
  struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
    bool staged = false;  // some buffer is device memory
  };

  // Host buffers for a call reading `bytes` from `send` and writing `bytes` to `recv` (send ==
  // recv: in place); a device `send` is copied in. An error when a kind cannot be told or a copy
  // or allocation fails: the call must then fail, nothing was touched as host memory.
  Result<Buffers> begin(const void* send, void* recv, size_t bytes);
  // After the call ran on `b`: copies the result to a device `recv` (of begin()).
  Status finish(const Buffers& b, size_t bytes);
  // Copies `bytes` of host memory to `dst`, whatever `dst` is (a block of a result).
  Status copy_out(void* dst, const void* host, size_t bytes);

  // Is any of these device memory? (errors count as device: the caller must not read it)
  Result<bool> any_device(const void* a, const void* b) const;

  struct Counters {
    uint64_t staged_calls = 0;
    uint64_t bytes_to_host = 0;
    uint64_t bytes_to_device = 0;
    uint64_t pageable_fallbacks = 0;  // page-locked allocation refused: pageable host memory used
  };
  const Counters& counters() const { return counters_; }
  const cuda::Driver* driver() const { return driver_; }

 private:
  struct Host {
    void* p = nullptr;
    size_t size = 0;
    bool pinned = false;
  };
  Result<void*> host(int which, size_t bytes, const void* device);
  void release(Host& h);

  const cuda::Driver* driver_;
  Host host_[2];  // 0: staged send, 1: staged recv
  void* device_recv_ = nullptr;
  Counters counters_;
};

}  // namespace sumcast::mpi
