#include "memory.h"

#include <string>

#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl {

Status register_memory(const void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return Status::invalid_argument("regMr: mhandle is NULL");
  if (type == abi::NCCL_PTR_CUDA) {
    return Status::unavailable(
        "regMr: NCCL_PTR_CUDA memory, but the plugin offers host memory only (ptrSupport "
        "NCCL_PTR_HOST: NCCL stages device data itself)");
  }
  if (type != abi::NCCL_PTR_HOST) {
    return Status::invalid_argument("regMr: unsupported memory type " + std::to_string(type));
  }
  *mhandle = new MemHandle{data, size};
  return Status();
}

Status deregister_memory(void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return Status();
}

}  // namespace sumcast::nccl
