// A client of DPDK's telemetry socket (v2): a unix SOCK_SEQPACKET socket at
// <runtime dir>/dpdk_telemetry.v2, where the runtime dir is /var/run/dpdk/<file_prefix> for root
// (else $XDG_RUNTIME_DIR/dpdk/<prefix> or /tmp/dpdk/<prefix>), as DPDK's EAL names it. On connect
// the application sends a JSON greeting ({"version", "pid", "max_output_len"}); each command
// ("/sumcast/stats" or "/sumcast/stats,0") gets one JSON reply {"<command>": value}.
//
// Thread safety: one thread at a time per client.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sumcast/ctl/json.h"
#include "sumcast/status.h"

namespace sumcast::ctl {

// The telemetry socket path of the DPDK process started with --file-prefix `prefix`.
std::string telemetry_socket_path(const std::string& prefix);

class TelemetryClient {
 public:
  // Connects and reads the greeting; every later reply must come within `timeout_ms`.
  static Result<std::unique_ptr<TelemetryClient>> connect(const std::string& socket_path, uint32_t timeout_ms = 2000);
  ~TelemetryClient();
  TelemetryClient(const TelemetryClient&) = delete;
  TelemetryClient& operator=(const TelemetryClient&) = delete;

  // Sends `command` and returns the value of the reply's single member (null when the
  // application's callback failed or the command is unknown).
  Result<Json> query(const std::string& command);
  const Json& greeting() const { return greeting_; }

 private:
  TelemetryClient() = default;
  Result<Json> receive();

  int fd_ = -1;
  std::string path_;
  size_t max_len_ = 16384;
  uint32_t timeout_ms_ = 2000;
  Json greeting_;
};

}  // namespace sumcast::ctl
