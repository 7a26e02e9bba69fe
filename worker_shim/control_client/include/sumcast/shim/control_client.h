// A worker's control connection to one appliance (docs/protocol.md §8): authenticate, register
// into a job, learn the job's parameters and the appliance's data endpoints, then keep the
// connection open for the job's life (closing it makes the appliance fail the job). The
// appliance reports an abort on this connection.
//
// Thread safety: one thread at a time per ControlClient.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::shim {

struct Endpoint {
  uint8_t mac[6] = {};
  uint32_t ip = 0;  // host order
  uint16_t udp_port = wire::kRoceUdpPort;
  uint32_t qpn = 0;
};

struct RegisterRequest {
  std::string job_name;  // ranks of one job use the same name (<= 64 bytes)
  uint16_t world_size = 0;
  uint16_t rank = 0;
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  uint16_t max_payload_bytes = 1024;  // wanted; the grant may be smaller
  uint16_t slots = 0;                 // wanted; 0 = the appliance's default
  Endpoint endpoint;                  // where this rank receives results
  bool deterministic = false;         // bitwise-reproducible summation (docs/fidelity.md); all ranks alike
  bool multicast = false;             // results to the job's group wanted (the grant says if so); all ranks alike
  bool loss_notices = false;          // loss notices wanted (docs/protocol.md §7; the grant says if so); all alike
};

struct JobGrant {
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  uint16_t slot_count = 0;
  uint16_t payload_bytes = 0;       // payload per packet to use
  Endpoint appliance;               // MAC/IP/UDP port of the appliance's data port (qpn unused)
  std::vector<uint32_t> core_qpns;  // slot s goes to core_qpns[s % size()]
  bool multicast = false;           // results arrive at multicast_ip (asked for and allowed)
  bool deterministic = false;       // the appliance sums this job deterministically
  bool loss_notices = false;        // the appliance tells this rank of its contributions it misses (§7)
  uint32_t multicast_ip = 0;        // the job's group, host order; 0 unless multicast
};

// True when `st` is an appliance's abort for `reason` (ControlClient::poll's Aborted status).
inline bool aborted_for(const Status& st, wire::AbortReason reason) {
  return st.code() == StatusCode::kAborted && st.detail() == static_cast<uint32_t>(reason);
}

class ControlClient {
 public:
  // Connects to host:port (IPv4 dotted quad or name) and authenticates with `token`.
  static Result<std::unique_ptr<ControlClient>> connect(const std::string& host, uint16_t port,
                                                        const std::string& token, uint32_t timeout_ms);
  ~ControlClient();
  // Blocks until every rank of the job registered (the appliance answers then) or timeout.
  Result<JobGrant> register_rank(const RegisterRequest& req, uint32_t timeout_ms);

  // The same two steps without blocking, for a caller that must keep serving other work while
  // the appliance waits for the other ranks (a failover driven from progress calls). The blocking
  // calls above are these plus a poll(2) loop. start_connect begins the TCP connect (a host name
  // is resolved first, which can block; a dotted quad does not); advance_connect moves it on
  // (connected, HELLO sent, AUTH_OK read) and is true once authenticated. start_register sends
  // REGISTER (what the socket does not take now goes with the next advance); advance_register is
  // the grant once it arrived, nullopt meanwhile. The caller keeps the deadlines.
  static Result<std::unique_ptr<ControlClient>> start_connect(const std::string& host, uint16_t port,
                                                              const std::string& token);
  Result<bool> advance_connect();
  Status start_register(const RegisterRequest& req);
  Result<std::optional<JobGrant>> advance_register();
  // What to poll fd() for while one of the steps above is under way (POLLOUT while connecting or
  // with output not yet sent, POLLIN otherwise), and what it is waiting for, for messages.
  short poll_events() const;
  std::string waiting_for() const;
  // Non-blocking: OK while the job is alive; Aborted after an abort message, with the appliance's
  // reason in the text and as detail() (aborted_for() tests it); IoError when the connection dropped.
  Status poll();
  // The connection's fd, for poll()/epoll by callers that wait on several things.
  int fd() const;
  // Tells the appliance this rank leaves the job cleanly; closes the connection.
  Status leave();

 private:
  ControlClient();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::shim
