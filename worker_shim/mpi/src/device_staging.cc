#include "sumcast/mpi/device_staging.h"

#include <cstdlib>
#include <cstring>

namespace sumcast::mpi {

DeviceStaging::~DeviceStaging() {
  release(host_[0]);
  release(host_[1]);
}

void DeviceStaging::release(Host& h) {
  if (h.p == nullptr) return;
  if (h.pinned) {
    driver_->free_pinned(h.p);
  } else {
    std::free(h.p);
  }
  h = Host{};
}

Result<void*> DeviceStaging::host(int which, size_t bytes, const void* device) {
  Host& h = host_[which];
  if (h.p != nullptr && h.size >= bytes) return h.p;
  release(h);
  const size_t want = bytes == 0 ? 1 : bytes;
  auto pinned = driver_->alloc_pinned(want, device);
  if (pinned.ok()) {
    h = Host{*pinned, want, true};
    return h.p;
  }
  void* p = std::malloc(want);
  if (p == nullptr) {
    return Status::unavailable("staging a device buffer: no " + std::to_string(want) + " bytes of host memory (" +
                               pinned.status().message() + ")");
  }
  ++counters_.pageable_fallbacks;
  h = Host{p, want, false};
  return h.p;
}

Result<bool> DeviceStaging::any_device(const void* a, const void* b) const {
  if (driver_ == nullptr) return false;
  for (const void* p : {a, b}) {
    if (p == nullptr) continue;
    auto k = driver_->kind(p);
    if (!k.ok()) return k.status();
    if (*k == cuda::MemoryKind::kDevice) return true;
  }
  return false;
}

Result<DeviceStaging::Buffers> DeviceStaging::begin(const void* send, void* recv, size_t bytes) {
  Buffers b{send, recv, false};
  device_recv_ = nullptr;
  if (driver_ == nullptr) return b;
  auto send_kind = driver_->kind(send);
  if (!send_kind.ok()) return send_kind.status();
  const bool in_place = send == recv;
  cuda::MemoryKind recv_kind = *send_kind;
  if (!in_place) {
    auto k = driver_->kind(recv);
    if (!k.ok()) return k.status();
    recv_kind = *k;
  }
  const bool send_dev = *send_kind == cuda::MemoryKind::kDevice;
  const bool recv_dev = recv_kind == cuda::MemoryKind::kDevice;
  if (!send_dev && !recv_dev) return b;
  b.staged = true;
  if (recv_dev) {
    auto h = host(1, bytes, recv);
    if (!h.ok()) return h.status();
    b.recv = *h;
    device_recv_ = recv;
  }
  if (in_place) {
    b.send = b.recv;
  } else if (send_dev) {
    auto h = host(0, bytes, send);
    if (!h.ok()) return h.status();
    b.send = *h;
  }
  if (send_dev) {
    Status st = driver_->copy_to_host(const_cast<void*>(b.send), send, bytes);
    if (!st.ok()) return Status::io_error("staging the send buffer to host memory: " + st.message());
    counters_.bytes_to_host += bytes;
  }
  ++counters_.staged_calls;
  return b;
}

Status DeviceStaging::finish(const Buffers& b, size_t bytes) {
  if (!b.staged || device_recv_ == nullptr) return Status();
  Status st = driver_->copy_to_device(device_recv_, b.recv, bytes);
  device_recv_ = nullptr;
  if (!st.ok()) return Status::io_error("copying the result to the device buffer: " + st.message());
  counters_.bytes_to_device += bytes;
  return Status();
}

Status DeviceStaging::copy_out(void* dst, const void* host_src, size_t bytes) {
  auto dev = any_device(dst, nullptr);
  if (!dev.ok()) return dev.status();
  if (!*dev) {
    std::memmove(dst, host_src, bytes);
    return Status();
  }
  Status st = driver_->copy_to_device(dst, host_src, bytes);
  if (!st.ok()) return Status::io_error("copying the result to the device buffer: " + st.message());
  counters_.bytes_to_device += bytes;
  return Status();
}

}  // namespace sumcast::mpi
