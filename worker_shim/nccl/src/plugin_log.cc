#include "plugin_log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace sumcast::nccl {
namespace {
std::atomic<abi::ncclDebugLogger_t> g_logger{nullptr};
}  // namespace

void set_logger(abi::ncclDebugLogger_t logger) {
  if (logger != nullptr) g_logger.store(logger, std::memory_order_release);
}

void log_line(abi::ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  const abi::ncclDebugLogger_t logger = g_logger.load(std::memory_order_acquire);
  if (logger == nullptr) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  logger(level, flags, file, line, "NET/sumcast: %s", text);
}

}  // namespace sumcast::nccl
