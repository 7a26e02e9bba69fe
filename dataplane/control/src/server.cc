// The control-plane server (sumcast/control/server.h): the facade over the connection loop
// (connection_loop.h: sockets, framing, authentication, io timeouts) and the job registry it
// feeds (sumcast/control/job_registry.h: jobs, registration barrier, timeouts, aborts), run on one
// thread of its own.
#include "sumcast/control/server.h"

#include <pthread.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>

#include "connection_loop.h"
#include "sumcast/control/job_registry.h"
#include "sumcast/wire/control.h"

namespace sumcast::control {
namespace {
namespace w = sumcast::wire;
}  // namespace

struct Server::Impl {
  Impl(ServerOptions o, JobSink* s) : opt(std::move(o)), sink(s), loop(opt, sink, &counters) {}

  ServerOptions opt;  // immutable after start(); the loop and the registry read it
  JobSink* sink;
  CounterBoard counters;
  ConnectionLoop loop;
  std::thread thread;
  std::atomic<bool> started{false};

  Status validate_options() const;
};

// ---------------------------------------------------------------------------------------------
// Start / stop

Status Server::Impl::validate_options() const {
  if (sink == nullptr) return Status::invalid_argument("control: no JobSink");
  if (opt.token.empty()) return Status::invalid_argument("control: the shared token is empty");
  if (opt.token.size() > w::kMaxTokenLen) {
    return Status::invalid_argument("control: the shared token is longer than " + std::to_string(w::kMaxTokenLen) +
                                    " bytes");
  }
  if (opt.core_qpns.empty() || opt.core_qpns.size() > w::kMaxCoreQpns) {
    return Status::invalid_argument("control: core_qpns must list 1.." + std::to_string(w::kMaxCoreQpns) +
                                    " QPNs, has " + std::to_string(opt.core_qpns.size()));
  }
  for (uint32_t q : opt.core_qpns) {
    if (q > w::kMaxQpn) return Status::invalid_argument("control: core QPN " + std::to_string(q) + " is not 24-bit");
  }
  if (opt.max_connections == 0) return Status::invalid_argument("control: max_connections is 0");
  if (opt.max_jobs == 0) return Status::invalid_argument("control: max_jobs is 0");
  if (opt.max_ranks < 2) return Status::invalid_argument("control: max_ranks < 2");
  if (opt.slots_per_job == 0) return Status::invalid_argument("control: slots_per_job is 0");
  if (opt.max_payload_bytes == 0) return Status::invalid_argument("control: max_payload_bytes is 0");
  return Status();
}

Server::Server(ServerOptions options, JobSink* sink) : impl_(std::make_unique<Impl>(std::move(options), sink)) {}

Server::~Server() { stop(); }

Status Server::start() {
  Impl& s = *impl_;
  if (s.started.load()) return Status::invalid_argument("control: server already started");
  SUMCAST_RETURN_IF_ERROR(s.validate_options());
  SUMCAST_RETURN_IF_ERROR(s.loop.open());
  s.started.store(true);
  s.thread = std::thread([&s] {
    pthread_setname_np(pthread_self(), "sumcast-ctl");
    s.loop.run();
  });
  return Status();
}

void Server::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  s.loop.wake();
  s.thread.join();
}

uint16_t Server::bound_port() const { return impl_->loop.port(); }

std::vector<JobInfo> Server::jobs() const { return impl_->loop.registry().jobs(); }

ServerCounters Server::counters() const { return impl_->counters.read(); }

}  // namespace sumcast::control
