// The control server's connection loop: the listening socket, one thread polling non-blocking
// connections, message framing, authentication (HELLO with the shared token), the per-connection
// io timeouts, and the queue of replies. What a message means for a job is the JobRegistry's:
// the loop hands it decoded REGISTER/LEAVE/STATUS_REQUEST messages and lost connections, and
// delivers what it sends back (it is the registry's MemberLink).
//
// Connections that fail (EOF, error, malformed message, timeout) are only *marked* dead where it
// happens; reap() later tells the registry and closes them, so no handler ever re-enters another.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sumcast/control/job_registry.h"
#include "sumcast/control/server.h"
#include "sumcast/wire/control.h"

namespace sumcast::control {

class ConnectionLoop final : public MemberLink {
 public:
  // `opt` must outlive the loop.
  ConnectionLoop(const ServerOptions& opt, JobSink* sink, CounterBoard* counters);
  ~ConnectionLoop() override;
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  Status open();  // binds and listens on opt.listen_ip:opt.port, creates the wake-up fd
  void run();     // the server thread: returns after wake(), having shut every job and connection down
  void wake();    // any thread: makes run() return
  uint16_t port() const { return port_; }
  const JobRegistry& registry() const { return registry_; }

  // MemberLink
  bool connected(uint64_t conn_id) const override { return find(conn_id) != nullptr; }
  void send(uint64_t conn_id, const wire::RefuseMsg& m) override { queue(conn_id, m); }
  void send(uint64_t conn_id, const wire::GrantMsg& m) override { queue(conn_id, m); }
  void send(uint64_t conn_id, const wire::AbortMsg& m) override { queue(conn_id, m); }

 private:
  using Time = std::chrono::steady_clock::time_point;
  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;  // "a.b.c.d:port", for messages
    Time accepted;
    bool authenticated = false;
    bool dead = false;     // to be reaped
    bool closing = false;  // last message queued; close once flushed and the peer closed
    bool shut_wr = false;
    Time closing_deadline;
    std::vector<uint8_t> in;
    std::optional<Time> partial_since;  // an incomplete message is buffered since
    std::vector<uint8_t> out;
    size_t out_off = 0;
    std::optional<Time> out_since;  // unsent bytes waiting since
  };

  void shutdown_all();
  void accept_all(Time now);
  void on_readable(Conn& c, Time now);
  void process_input(Conn& c, Time now);
  void dispatch(Conn& c, const wire::ControlHeader& h, std::span<const uint8_t> body, Time now);
  void flush(Conn& c, Time now);
  template <typename M>
  void send_to(Conn& c, const M& m);
  template <typename M>
  void queue(uint64_t conn_id, const M& m) {
    if (Conn* c = find(conn_id)) send_to(*c, m);
  }
  void bad_message(Conn& c);
  void finish(Conn& c, Time now);  // close after the queued message
  void flush_all(Time now);
  void check_deadlines(Time now);
  void reap();
  Conn* find(uint64_t id);
  const Conn* find(uint64_t id) const;

  const ServerOptions& opt_;
  CounterBoard* counters_;
  JobRegistry registry_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::map<uint64_t, Conn> conns_;
  uint64_t next_conn_id_ = 1;
  Time next_tick_;
  Time accept_resume_;  // accept() failed for lack of resources: not polled until then
};

}  // namespace sumcast::control
