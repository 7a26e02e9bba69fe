// The appliance's control plane: a TCP server (kernel stack, management interface) where workers
// register into jobs (docs/protocol.md §8). Authenticated by a shared token (constant-time
// compare). A job starts when all its ranks registered; it is failed (every member told, on the
// control connection and by an abort packet from the dataplane) when it makes no progress for
// job_timeout_ms or a member's connection drops. The server never touches lcore state: it hands
// jobs to the dataplane through a JobSink.
//
// Inside, two parts on the server's one thread: a connection loop (src/connection_loop.h: the
// listener, poll(2), framing, HELLO, io timeouts) feeds decoded messages to a job registry
// (job_registry.h: jobs, the registration barrier, register and no-progress timeouts, aborts),
// which answers through the loop by connection id. The registry's timeouts run on an injectable
// clock, so they are tested without sockets or waiting.
//
// Thread safety: start()/stop() from one thread; the server runs its own thread; jobs() and
// counters() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sumcast/engine/engine.h"
#include "sumcast/neighbour/resolver.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::control {

// The dataplane as the control plane sees it (sumcastd implements it over lcore rings; tests
// implement it in memory).
class JobSink {
 public:
  virtual ~JobSink() = default;
  // Makes the job live on every core; returns when all cores have it (or an error, job not installed).
  virtual Status install(const engine::JobSpec& spec) = 0;
  // Removes the job from every core; reason != kNone makes the cores send abort packets to members.
  virtual void remove(uint32_t job_id, wire::AbortReason reason) = 0;
  // Slots completed so far by the job, summed over cores (monotonic; used for the no-progress timeout).
  virtual uint64_t progress(uint32_t job_id) = 0;
  // Rounds of the job that opened and wait for more contributions, summed over cores (approximate).
  // The no-progress timeout runs only while this is non-zero, so idle jobs are never failed.
  // The default (always 1) makes every job without progress time out.
  virtual uint64_t waiting_rounds(uint32_t /*job_id*/) { return 1; }
};

// Where results to a member go next (sumcastd: its ARP resolver). Called on the server thread;
// implementations never wait for the network.
class NextHopResolver {
 public:
  virtual ~NextHopResolver() = default;
  // Starts resolving the next hop of a member at `ip` (host order).
  virtual neighbour::Resolution resolve(uint32_t ip) = 0;
  // The state of a resolution resolve() started.
  virtual neighbour::Resolution status(uint32_t ip) = 0;
};

struct ServerOptions {
  uint32_t listen_ip = 0;  // host order; 0 = every address
  uint16_t port = 4790;    // 0: pick a free port (tests); see bound_port()
  std::string token;       // the shared secret (contents of control.token_file)
  uint32_t max_connections = 256;
  uint32_t job_timeout_ms = 10000;
  uint32_t register_timeout_ms = 60000;
  uint32_t io_timeout_ms = 5000;
  // Limits (from agg.conf dataplane.*), enforced at registration.
  uint32_t max_jobs = 16;
  uint32_t max_ranks = 64;
  uint32_t slots_per_job = 128;
  uint32_t max_payload_bytes = 1024;
  std::vector<wire::Dtype> dtypes;  // accepted; empty = all
  // The data endpoints workers send to: one per engine core (same MAC/IP, distinct QPN).
  uint8_t data_mac[6] = {};
  uint32_t data_ip = 0;             // host order
  std::vector<uint32_t> core_qpns;  // index = core
  // Jobs whose ranks ask for results by multicast get them (the others, and all when this is
  // false, get one copy per member).
  bool multicast = false;
  uint32_t multicast_base_ip = 0;  // host order; the multicast job with index i gets base + i
  // Jobs whose ranks ask for loss notices (docs/protocol.md §7) get them; false: none does (the
  // grants say so, and the ranks repair losses from results and timers alone).
  bool loss_notices = true;
  // Next hops of members: a registration without a route is refused (unreachable) at once; a job
  // whose ranks all registered starts once every member's next hop is resolved, and is refused
  // (unreachable, naming the address) when one fails to resolve. nullptr: members' registered
  // MACs are used as they are.
  NextHopResolver* next_hops = nullptr;
};

struct JobInfo {
  uint32_t job_id;
  std::string name;
  uint16_t world_size;
  uint16_t registered;
  wire::Dtype dtype;
  wire::ReduceOp op;
  bool running;  // all ranks registered and installed in the dataplane
  uint64_t slots_completed;
  uint64_t ms_since_progress;
  bool multicast = false;     // running with results to its group
  uint32_t multicast_ip = 0;  // that group (host order), 0 unless multicast
};

struct ServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections
  uint64_t auth_failures = 0;
  uint64_t bad_messages = 0;  // malformed, oversize, wrong direction, or before HELLO: closed
  uint64_t io_timeouts = 0;   // no HELLO / half-sent message / unread replies within io_timeout_ms: closed
  uint64_t registrations = 0;
  uint64_t registrations_refused = 0;  // REFUSE answering a REGISTER, at once or later (timeout, install, stop)
  uint64_t jobs_started = 0;
  uint64_t jobs_completed = 0;  // all members left cleanly
  uint64_t jobs_failed = 0;     // running jobs aborted: no progress, member lost, appliance stop
};

class Server {
 public:
  Server(ServerOptions options, JobSink* sink);
  ~Server();  // stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status start();  // binds, listens, starts the thread
  void stop();     // aborts every job (kApplianceStop), closes connections, joins
  uint16_t bound_port() const;
  std::vector<JobInfo> jobs() const;
  ServerCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::control
