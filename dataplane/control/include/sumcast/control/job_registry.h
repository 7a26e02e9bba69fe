// The control server's job registry: the jobs workers register into, the registration barrier
// (a job starts once all its ranks registered and their next hops resolved), the register and
// no-progress timeouts, aborts, and the counters and job list the server publishes.
//
// It knows connections only by id and reaches them through a MemberLink, so it holds no socket:
// the connection loop (connection_loop.h) feeds it decoded messages and lost connections, and
// tests drive it directly. Every timeout it applies is measured on the clock it is given
// (steady_clock unless a test injects another), so a test can move time instead of waiting.
//
// Thread safety: everything runs on one thread (the server's), except jobs(), now() and the
// CounterBoard, which any thread may call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sumcast/control/server.h"
#include "sumcast/wire/control.h"

namespace sumcast::control {

using Clock = std::chrono::steady_clock;
// Returns the time; must be callable from any thread. The real one is Clock::now.
using ClockFn = std::function<Clock::time_point()>;

// The server's counters, shared by the connection loop and the registry.
class CounterBoard {
 public:
  void add(uint64_t ServerCounters::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.*field += n;
  }
  ServerCounters read() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }

 private:
  mutable std::mutex mu_;
  ServerCounters counters_;
};

// How the registry reaches a member's control connection.
class MemberLink {
 public:
  virtual ~MemberLink() = default;
  // The connection is open (not failed or closed); messages to others are dropped.
  virtual bool connected(uint64_t conn_id) const = 0;
  // Queues a message to the connection (nothing when it is closing or gone).
  virtual void send(uint64_t conn_id, const wire::RefuseMsg& m) = 0;
  virtual void send(uint64_t conn_id, const wire::GrantMsg& m) = 0;
  virtual void send(uint64_t conn_id, const wire::AbortMsg& m) = 0;
};

class JobRegistry {
 public:
  // `opt` (limits, timeouts, data endpoints, next hops) must outlive the registry, as must sink,
  // link and counters.
  JobRegistry(const ServerOptions& opt, JobSink* sink, MemberLink* link, CounterBoard* counters,
              ClockFn clock = &Clock::now);
  JobRegistry(const JobRegistry&) = delete;
  JobRegistry& operator=(const JobRegistry&) = delete;

  // ---- Server thread ----
  // A REGISTER from an authenticated connection: answered by a REFUSE at once, or later by a
  // GRANT or a REFUSE to every rank of its job.
  void on_register(uint64_t conn_id, const wire::RegisterMsg& m);
  // A LEAVE. False when it names another job than the connection's running one (a bad message:
  // the caller closes the connection and reports it lost).
  bool on_leave(uint64_t conn_id, const wire::LeaveMsg& m);
  // The answer to a STATUS_REQUEST.
  wire::StatusReplyMsg status() const;
  // The connection is gone: its rank leaves its pending job, or its running job fails.
  void on_connection_lost(uint64_t conn_id);
  // Called periodically: starts jobs whose next hops resolved, applies the register and
  // no-progress timeouts.
  void tick();
  // The appliance stops: running jobs fail, pending ones are refused.
  void shutdown();
  // Publishes the job list jobs() returns.
  void publish();

  // ---- Any thread ----
  std::vector<JobInfo> jobs() const;  // as of the last publish()
  Clock::time_point now() const { return clock_(); }

 private:
  struct Member {
    bool registered = false;
    bool left = false;     // sent LEAVE
    uint64_t conn_id = 0;  // 0 once gone or left
    engine::Member endpoint;
    uint16_t payload_bytes = 0;  // this rank's wish, already clamped and rounded
    uint16_t slots = 0;          // this rank's wish, already clamped
  };
  struct Job {
    uint64_t key = 0;
    std::string name;
    uint16_t world_size = 0;
    wire::Dtype dtype = wire::Dtype::kFp32;
    wire::ReduceOp op = wire::ReduceOp::kSum;
    bool deterministic = false;     // REGISTER flag (docs/fidelity.md); every rank must agree
    bool multicast_wanted = false;  // REGISTER flag; every rank must agree
    bool notices_wanted = false;    // REGISTER flag (loss notices, docs/protocol.md §7); every rank must agree
    std::vector<Member> members;    // index = rank
    uint16_t registered = 0;
    Clock::time_point first_registration;
    bool running = false;
    uint32_t job_id = 0;
    bool multicast = false;    // running with results to its group (wanted and allowed)
    uint32_t mcast_index = 0;  // its group is multicast_base_ip + this (multicast jobs only)
    uint64_t progress = 0;
    Clock::time_point last_change;  // progress changed (running) or a rank registered (pending)
  };
  // The rank a connection holds in a job (pending or running).
  struct Seat {
    uint64_t job_key = 0;
    uint16_t rank = 0;
  };
  struct Snapshot {
    JobInfo info;
    Clock::time_point last_change;
  };

  void refuse(uint64_t conn_id, wire::RefuseCode code, std::string text);
  // Refuses every connected member of a pending job with `text` and forgets the job.
  void refuse_all(Job& job, wire::RefuseCode code, const std::string& text);
  void withdraw(Job& job, uint16_t rank);
  void try_start(Job& job);
  void start_job(Job& job);
  void fail_job(Job& job, wire::AbortReason reason, const std::string& text);

  const ServerOptions& opt_;
  JobSink* sink_;
  MemberLink* link_;
  CounterBoard* counters_;
  ClockFn clock_;

  std::map<uint64_t, Job> jobs_;
  std::map<uint64_t, Seat> seats_;  // by connection id
  uint64_t next_job_key_ = 1;
  uint32_t next_job_id_ = 1;

  mutable std::mutex mu_;  // guards snapshot_
  std::vector<Snapshot> snapshot_;
};

}  // namespace sumcast::control
