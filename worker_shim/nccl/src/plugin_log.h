// Log lines through the logger NCCL hands to init (NCCL_DEBUG=INFO shows them), prefixed
// "NET/sumcast". Nothing is printed before init or when NCCL passed no logger.
//
// Thread safety: any thread; the logger is set once by init.
#pragma once

#include "sumcast/nccl/nccl_abi.h"

namespace sumcast::nccl {

void set_logger(abi::ncclDebugLogger_t logger);
void log_line(abi::ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace sumcast::nccl

#define SUMCAST_NCCL_WARN(...)                                                                                       \
  ::sumcast::nccl::log_line(::sumcast::nccl::abi::NCCL_LOG_WARN, ::sumcast::nccl::abi::NCCL_NET, __FILE__, __LINE__, \
                            __VA_ARGS__)
#define SUMCAST_NCCL_INFO(flags, ...) \
  ::sumcast::nccl::log_line(::sumcast::nccl::abi::NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__)
