// The control-plane server: one thread, non-blocking sockets, poll(2). Protocol: the layout in
// sumcast/wire/control.h (docs/protocol.md §8).
//
// Everything below Impl::run() runs on the server thread only, except what is guarded by
// Impl::mu (the counters and the published job snapshot that jobs()/counters() read).
//
// Connections that fail (EOF, error, malformed message, timeout) are only *marked* dead where it
// happens; reap() later applies what their loss means for their job and closes them, so no
// handler ever re-enters another.
#include "sumcast/control/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sumcast/ipv4.h"
#include "sumcast/wire/control.h"
#include "token.h"

namespace sumcast::control {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace w = sumcast::wire;

// The loop wakes at least this often; progress is polled and deadlines checked at this period.
constexpr milliseconds kTick{100};
constexpr size_t kReadChunk = 8192;
constexpr int kReadsPerWake = 16;

uint64_t ms_between(Clock::time_point from, Clock::time_point to) {
  return to <= from ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<milliseconds>(to - from).count());
}

// A Q_Key for a new job: random, non-zero, bit 31 clear (Q_Keys with bit 31 set are "controlled"
// and an unprivileged verbs UD QP cannot send with them).
uint32_t random_qkey() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    std::random_device rd;
    v = rd();
  }
  v &= 0x7FFFFFFFu;
  return v == 0 ? 1u : v;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Shuts down our side, discards what the peer sent (so close() sends FIN rather than RST, which
// could destroy the last message we queued), then closes.
void close_gracefully(int& fd) {
  if (fd < 0) return;
  ::shutdown(fd, SHUT_WR);
  uint8_t sink[1024];
  while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  close_fd(fd);
}

struct Conn {
  uint64_t id = 0;
  int fd = -1;
  std::string peer;  // "a.b.c.d:port", for messages
  Clock::time_point accepted;
  bool authenticated = false;
  bool dead = false;     // to be reaped
  bool closing = false;  // last message queued; close once flushed and the peer closed
  bool shut_wr = false;
  Clock::time_point closing_deadline;
  std::vector<uint8_t> in;
  std::optional<Clock::time_point> partial_since;  // an incomplete message is buffered since
  std::vector<uint8_t> out;
  size_t out_off = 0;
  std::optional<Clock::time_point> out_since;  // unsent bytes waiting since
  uint64_t job_key = 0;                        // the job (pending or running) this rank is in; 0 = none
  uint16_t rank = 0;
};

struct JobMember {
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
  w::Dtype dtype = w::Dtype::kFp32;
  w::ReduceOp op = w::ReduceOp::kSum;
  bool deterministic = false;      // REGISTER flag (docs/fidelity.md); every rank must agree
  bool multicast_wanted = false;   // REGISTER flag; every rank must agree
  std::vector<JobMember> members;  // index = rank
  uint16_t registered = 0;
  Clock::time_point first_registration;
  bool running = false;
  uint32_t job_id = 0;
  bool multicast = false;    // running with results to its group (wanted and allowed)
  uint32_t mcast_index = 0;  // its group is multicast_base_ip + this (multicast jobs only)
  uint64_t progress = 0;
  Clock::time_point last_change;  // progress changed (running) or a rank registered (pending)
};

// What jobs() reports, kept by the server thread under the mutex.
struct JobSnapshot {
  JobInfo info;
  Clock::time_point last_change;
};

}  // namespace

struct Server::Impl {
  Impl(ServerOptions o, JobSink* s) : opt(std::move(o)), sink(s) {}

  // ---- Immutable after start() ----
  ServerOptions opt;
  JobSink* sink;
  uint16_t port = 0;

  // ---- Shared with other threads ----
  mutable std::mutex mu;
  ServerCounters counters;
  std::vector<JobSnapshot> snapshot;
  std::thread thread;
  int wake_fd = -1;
  std::atomic<bool> started{false};

  // ---- Server thread only ----
  int listen_fd = -1;
  std::map<uint64_t, Conn> conns;
  std::map<uint64_t, Job> jobs;
  uint64_t next_conn_id = 1;
  uint64_t next_job_key = 1;
  uint32_t next_job_id = 1;
  Clock::time_point next_tick;
  Clock::time_point accept_resume;  // accept() failed for lack of resources: not polled until then

  void count(uint64_t ServerCounters::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu);
    counters.*field += n;
  }

  Status validate_options() const;
  Status open_listener();
  void run();
  void shutdown_all();

  // Connections
  void accept_all(Clock::time_point now);
  void on_readable(Conn& c, Clock::time_point now);
  void process_input(Conn& c, Clock::time_point now);
  void dispatch(Conn& c, const w::ControlHeader& h, std::span<const uint8_t> body, Clock::time_point now);
  void flush(Conn& c, Clock::time_point now);
  template <typename M>
  void send(Conn& c, const M& m, Clock::time_point now);
  void bad_message(Conn& c) {
    count(&ServerCounters::bad_messages);
    c.dead = true;
  }
  void finish(Conn& c, Clock::time_point now) {  // close after the queued message
    c.closing = true;
    c.closing_deadline = now + milliseconds(std::max<uint32_t>(opt.io_timeout_ms, 1));
  }
  void flush_all(Clock::time_point now) {
    for (auto& [id, c] : conns) {
      if (!c.dead) flush(c, now);
    }
  }
  void check_deadlines(Clock::time_point now);
  void reap(Clock::time_point now);
  Conn* conn(uint64_t id) {
    auto it = conns.find(id);
    return it == conns.end() || it->second.dead ? nullptr : &it->second;
  }

  // Jobs
  void handle_register(Conn& c, const w::RegisterMsg& m, Clock::time_point now);
  void handle_leave(Conn& c, const w::LeaveMsg& m, Clock::time_point now);
  void handle_status(Conn& c, Clock::time_point now);
  void refuse(Conn& c, w::RefuseCode code, std::string text, Clock::time_point now) {
    count(&ServerCounters::registrations_refused);
    if (text.size() > w::kMaxTextLen) text.resize(w::kMaxTextLen);
    send(c, w::RefuseMsg{code, std::move(text)}, now);
  }
  void withdraw(Job& job, uint16_t rank);
  void try_start(Job& job, Clock::time_point now);
  void start_job(Job& job, Clock::time_point now);
  void fail_job(Job& job, w::AbortReason reason, const std::string& text, Clock::time_point now);
  void tick(Clock::time_point now);
  void publish();
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

Status Server::Impl::open_listener() {
  const std::optional<uint32_t> listen_ip = parse_ipv4(opt.listen_address);
  if (!listen_ip) {
    return Status::invalid_argument("control: listen_address '" + opt.listen_address + "' is not an IPv4 address");
  }
  const std::string where = opt.listen_address + ":" + std::to_string(opt.port);
  listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return Status::from_errno("control: socket");
  const int one = 1;
  if (::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    const int err = errno;
    close_fd(listen_fd);
    return Status::from_errno("control: SO_REUSEADDR on " + where, err);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(*listen_ip);
  sa.sin_port = htons(opt.port);
  if (::bind(listen_fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    close_fd(listen_fd);
    return Status::from_errno("control: bind " + where, err);
  }
  if (::listen(listen_fd, 128) != 0) {
    const int err = errno;
    close_fd(listen_fd);
    return Status::from_errno("control: listen " + where, err);
  }
  socklen_t len = sizeof sa;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const int err = errno;
    close_fd(listen_fd);
    return Status::from_errno("control: getsockname " + where, err);
  }
  port = ntohs(sa.sin_port);
  return Status();
}

Server::Server(ServerOptions options, JobSink* sink) : impl_(std::make_unique<Impl>(std::move(options), sink)) {}

Server::~Server() { stop(); }

Status Server::start() {
  Impl& s = *impl_;
  if (s.started.load()) return Status::invalid_argument("control: server already started");
  SUMCAST_RETURN_IF_ERROR(s.validate_options());
  SUMCAST_RETURN_IF_ERROR(s.open_listener());
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wake_fd < 0) {
    const int err = errno;
    close_fd(s.listen_fd);
    return Status::from_errno("control: eventfd", err);
  }
  s.started.store(true);
  s.thread = std::thread([&s] {
    pthread_setname_np(pthread_self(), "sumcast-ctl");
    s.run();
  });
  return Status();
}

void Server::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  const uint64_t one = 1;
  while (::write(s.wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
  s.thread.join();
  close_fd(s.wake_fd);
}

uint16_t Server::bound_port() const { return impl_->port; }

std::vector<JobInfo> Server::jobs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto now = Clock::now();
  std::vector<JobInfo> out;
  out.reserve(impl_->snapshot.size());
  for (const auto& j : impl_->snapshot) {
    out.push_back(j.info);
    out.back().ms_since_progress = ms_between(j.last_change, now);
  }
  return out;
}

ServerCounters Server::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

// ---------------------------------------------------------------------------------------------
// The loop

void Server::Impl::run() {
  next_tick = Clock::now() + kTick;
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;  // pfds[i + 2] belongs to conns[ids[i]]
  for (;;) {
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_fd, POLLIN, 0});
    pfds.push_back({listen_fd, static_cast<short>(Clock::now() >= accept_resume ? POLLIN : 0), 0});
    for (auto& [id, c] : conns) {
      short ev = POLLIN;
      if (c.out_off < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.fd, ev, 0});
      ids.push_back(id);
    }
    auto now = Clock::now();
    const int wait_ms = static_cast<int>(
        std::clamp<int64_t>(std::chrono::duration_cast<milliseconds>(next_tick - now).count() + 1, 0, kTick.count()));
    const int n = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (n < 0 && errno != EINTR) {
      // Nothing sensible is left to do without poll(); behave as if stopped.
      break;
    }
    now = Clock::now();
    if (n > 0 && (pfds[0].revents & POLLIN)) break;  // stop()
    if (n > 0) {
      for (size_t i = 0; i < ids.size(); ++i) {
        const short re = pfds[i + 2].revents;
        if (re == 0) continue;
        Conn* c = conn(ids[i]);
        if (c == nullptr) continue;
        if (re & POLLOUT) flush(*c, now);
        if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR))) on_readable(*c, now);
      }
      if (pfds[1].revents & POLLIN) accept_all(now);
    }
    if (now >= next_tick) {
      tick(now);
      next_tick = now + kTick;
    }
    check_deadlines(now);
    reap(now);
    publish();
    flush_all(now);
  }
  shutdown_all();
}

void Server::Impl::shutdown_all() {
  const auto now = Clock::now();
  // Running jobs are failed; pending ones refused. Jobs are removed from the map as we go.
  while (!jobs.empty()) {
    Job& job = jobs.begin()->second;
    if (job.running) {
      fail_job(job, w::AbortReason::kApplianceStop, "the appliance is shutting down", now);
    } else {
      for (uint16_t r = 0; r < job.world_size; ++r) {
        if (Conn* c = conn(job.members[r].conn_id)) {
          c->job_key = 0;
          refuse(*c, w::RefuseCode::kShuttingDown, "the appliance is shutting down", now);
        }
      }
      jobs.erase(jobs.begin());
    }
  }
  publish();
  for (auto& [id, c] : conns) {
    if (!c.dead) flush(c, now);
    close_gracefully(c.fd);
  }
  conns.clear();
  close_fd(listen_fd);
}

void Server::Impl::accept_all(Clock::time_point now) {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: the listener stays readable, so stop polling it for a
      // tick rather than spin on it.
      if (errno != EAGAIN && errno != EWOULDBLOCK) accept_resume = now + kTick;
      return;
    }
    if (conns.size() >= opt.max_connections) {
      count(&ServerCounters::connections_refused);
      std::vector<uint8_t> msg;
      (void)w::encode_append(
          w::RefuseMsg{w::RefuseCode::kTooManyConnections, "the appliance already has " + std::to_string(conns.size()) +
                                                               " control connections (max_connections)"},
          &msg);
      (void)::send(fd, msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      close_gracefully(fd);
      continue;
    }
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    count(&ServerCounters::connections_accepted);
    Conn c;
    c.id = next_conn_id++;
    c.fd = fd;
    c.peer = format_ipv4(ntohl(sa.sin_addr.s_addr)) + ":" + std::to_string(ntohs(sa.sin_port));
    c.accepted = now;
    conns.emplace(c.id, std::move(c));
  }
}

void Server::Impl::on_readable(Conn& c, Clock::time_point now) {
  uint8_t buf[kReadChunk];
  // A bounded number of reads per wake-up, so that one busy peer cannot starve the others.
  for (int i = 0; i < kReadsPerWake && !c.dead; ++i) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      if (c.closing) continue;  // discarded: we only wait for the peer to close
      c.in.insert(c.in.end(), buf, buf + n);
      process_input(c, now);
      continue;
    }
    if (n == 0) {
      c.dead = true;  // EOF: reap() applies what it means for the job
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    return;
  }
}

void Server::Impl::process_input(Conn& c, Clock::time_point now) {
  size_t off = 0;
  while (!c.dead && !c.closing) {
    w::ControlHeader h;
    std::span<const uint8_t> body;
    const auto e = w::split_control_message(std::span<const uint8_t>(c.in).subspan(off), &h, &body);
    if (e == w::ControlError::kTruncatedHeader || e == w::ControlError::kTruncatedBody) break;
    if (e != w::ControlError::kOk) {  // bad magic/version/type, oversize: closed before the body
      bad_message(c);
      return;
    }
    off += w::kControlHeaderLen + h.body_len;
    dispatch(c, h, body, now);
  }
  if (c.dead || c.closing) {
    c.in.clear();
    c.partial_since.reset();
    return;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
  if (c.in.empty()) {
    c.partial_since.reset();
  } else if (!c.partial_since) {
    c.partial_since = now;
  }
}

void Server::Impl::dispatch(Conn& c, const w::ControlHeader& h, std::span<const uint8_t> body, Clock::time_point now) {
  if (!w::is_worker_to_appliance(h.type)) {
    bad_message(c);
    return;
  }
  if (!c.authenticated) {
    if (h.type != w::ControlType::kHello) {
      count(&ServerCounters::bad_messages);
      send(c, w::RefuseMsg{w::RefuseCode::kNotAuthenticated, "HELLO with the token must come first"}, now);
      finish(c, now);
      return;
    }
    w::HelloMsg m;
    if (w::decode_body(body, &m) != w::ControlError::kOk) {
      bad_message(c);
      return;
    }
    if (!token_equal(m.token, opt.token)) {
      count(&ServerCounters::auth_failures);
      send(c, w::AuthFailMsg{}, now);
      finish(c, now);
      return;
    }
    c.authenticated = true;
    send(c, w::AuthOkMsg{}, now);
    return;
  }
  switch (h.type) {
    case w::ControlType::kRegister: {
      w::RegisterMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      handle_register(c, m, now);
      return;
    }
    case w::ControlType::kLeave: {
      w::LeaveMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      handle_leave(c, m, now);
      return;
    }
    case w::ControlType::kStatusRequest: {
      w::StatusRequestMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      handle_status(c, now);
      return;
    }
    default:  // a second HELLO
      bad_message(c);
      return;
  }
}

template <typename M>
void Server::Impl::send(Conn& c, const M& m, Clock::time_point now) {
  if (c.dead || c.closing) return;
  // Queued only: run() flushes every connection after publish(), so a peer that got a reply
  // already sees its effect in jobs(). Encoding cannot fail for what we send (every field is
  // bounded); if it did, nothing would be queued, never a partial message.
  (void)w::encode_append(m, &c.out);
  (void)now;
}

void Server::Impl::flush(Conn& c, Clock::time_point now) {
  while (!c.dead && c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c.out_since) c.out_since = now;
      return;
    }
    c.dead = true;
    return;
  }
  c.out.clear();
  c.out_off = 0;
  c.out_since.reset();
  if (c.closing && !c.shut_wr && !c.dead) {
    ::shutdown(c.fd, SHUT_WR);
    c.shut_wr = true;
  }
}

void Server::Impl::check_deadlines(Clock::time_point now) {
  const auto io = milliseconds(opt.io_timeout_ms);
  for (auto& [id, c] : conns) {
    if (c.dead) continue;
    if (c.closing) {
      if (now >= c.closing_deadline) c.dead = true;
      continue;
    }
    const bool slow_auth = !c.authenticated && now - c.accepted >= io;
    const bool slow_msg = c.partial_since && now - *c.partial_since >= io;
    const bool slow_reader = c.out_since && now - *c.out_since >= io;
    if (slow_auth || slow_msg || slow_reader) {
      count(&ServerCounters::io_timeouts);
      c.dead = true;
    }
  }
}

void Server::Impl::reap(Clock::time_point now) {
  // Losing a member can fail its job, which queues aborts to other connections, which may die
  // too: repeat until nothing is marked.
  for (;;) {
    auto it = std::find_if(conns.begin(), conns.end(), [](const auto& kv) { return kv.second.dead; });
    if (it == conns.end()) return;
    Conn& c = it->second;
    const uint64_t key = c.job_key;
    const uint16_t rank = c.rank;
    c.job_key = 0;
    close_fd(c.fd);
    conns.erase(it);
    auto jt = jobs.find(key);
    if (key == 0 || jt == jobs.end()) continue;
    Job& job = jt->second;
    if (!job.running) {
      withdraw(job, rank);
    } else {
      job.members[rank].conn_id = 0;
      if (!job.members[rank].left) {
        fail_job(job, w::AbortReason::kMemberLeft,
                 "rank " + std::to_string(rank) + " of job '" + job.name + "' closed its control connection", now);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Jobs

void Server::Impl::handle_register(Conn& c, const w::RegisterMsg& m, Clock::time_point now) {
  using w::RefuseCode;
  const std::string who = "rank " + std::to_string(m.rank) + " of job '" + m.name + "'";
  if (c.job_key != 0) {
    return refuse(c, RefuseCode::kAlreadyRegistered, "this connection already registered a rank", now);
  }
  if (m.name.empty()) return refuse(c, RefuseCode::kBadName, "the job name is empty", now);
  if (m.world_size < 2 || m.world_size > opt.max_ranks) {
    return refuse(
        c, RefuseCode::kBadWorldSize,
        who + ": world size " + std::to_string(m.world_size) + " is not in 2.." + std::to_string(opt.max_ranks), now);
  }
  if (m.rank >= m.world_size) {
    return refuse(c, RefuseCode::kBadRank, who + ": rank is not below world size " + std::to_string(m.world_size), now);
  }
  if (!opt.dtypes.empty() && std::find(opt.dtypes.begin(), opt.dtypes.end(), m.dtype) == opt.dtypes.end()) {
    return refuse(c, RefuseCode::kDtypeNotAccepted,
                  who + ": dtype " + w::dtype_name(m.dtype) + " is not accepted by this appliance", now);
  }
  const uint32_t elem = static_cast<uint32_t>(w::dtype_size(m.dtype));
  const uint32_t payload = std::min<uint32_t>(m.payload_bytes, opt.max_payload_bytes) / elem * elem;
  if (payload == 0) {
    return refuse(c, RefuseCode::kBadPayload,
                  who + ": payload of " + std::to_string(m.payload_bytes) + " bytes holds no " +
                      w::dtype_name(m.dtype) + " element",
                  now);
  }
  const uint32_t slots = std::min<uint32_t>({m.slots == 0 ? opt.slots_per_job : m.slots, opt.slots_per_job, 0xFFFF});
  uint32_t next_hop = kNoNextHop;
  if (opt.next_hops != nullptr) {
    const neighbour::Resolution res = opt.next_hops->resolve(m.ip);
    if (res.state == neighbour::Resolution::State::kFailed) {
      return refuse(c, RefuseCode::kUnreachable, who + ": " + res.text, now);
    }
    next_hop = res.next_hop;
  }

  Job* job = nullptr;
  for (auto& [key, j] : jobs) {
    if (j.name == m.name) job = &j;
  }
  if (job != nullptr) {
    if (job->running) {
      return refuse(c, RefuseCode::kJobRunning, who + ": a job of that name is already running", now);
    }
    if (job->deterministic != m.deterministic) {
      return refuse(c, RefuseCode::kJobMismatch,
                    who + (m.deterministic ? " asks for" : " does not ask for") +
                        " deterministic summation; the job's other ranks " + (job->deterministic ? "do" : "do not"),
                    now);
    }
    if (job->multicast_wanted != m.multicast) {
      return refuse(c, RefuseCode::kJobMismatch,
                    who + (m.multicast ? " asks for" : " does not ask for") +
                        " results by multicast; the job's other ranks " + (job->multicast_wanted ? "do" : "do not"),
                    now);
    }
    if (job->world_size != m.world_size || job->dtype != m.dtype || job->op != m.op) {
      return refuse(c, RefuseCode::kJobMismatch,
                    who + " asks for world size " + std::to_string(m.world_size) + ", " + w::dtype_name(m.dtype) +
                        ", " + w::reduce_op_name(m.op) + "; the job has world size " + std::to_string(job->world_size) +
                        ", " + w::dtype_name(job->dtype) + ", " + w::reduce_op_name(job->op),
                    now);
    }
    if (job->members[m.rank].registered) {
      return refuse(c, RefuseCode::kRankTaken, who + " is already registered", now);
    }
  } else {
    if (jobs.size() >= opt.max_jobs) {
      return refuse(c, RefuseCode::kTooManyJobs,
                    who + ": the appliance already has " + std::to_string(jobs.size()) + " jobs (max_jobs)", now);
    }
    Job j;
    j.key = next_job_key++;
    j.name = m.name;
    j.world_size = m.world_size;
    j.dtype = m.dtype;
    j.op = m.op;
    j.deterministic = m.deterministic;
    j.multicast_wanted = m.multicast;
    j.members.resize(m.world_size);
    j.first_registration = now;
    job = &jobs.emplace(j.key, std::move(j)).first->second;
  }
  JobMember& mem = job->members[m.rank];
  mem.registered = true;
  mem.left = false;
  mem.conn_id = c.id;
  std::copy(m.mac.begin(), m.mac.end(), mem.endpoint.mac);
  mem.endpoint.ip = m.ip;
  mem.endpoint.udp_port = m.udp_port;
  mem.endpoint.qpn = m.qpn;
  mem.endpoint.next_hop = next_hop;
  mem.payload_bytes = static_cast<uint16_t>(payload);
  mem.slots = static_cast<uint16_t>(slots);
  job->registered++;
  job->last_change = now;
  c.job_key = job->key;
  c.rank = m.rank;
  count(&ServerCounters::registrations);
  if (job->registered == job->world_size) try_start(*job, now);
}

// Every rank registered: start once every member's next hop is resolved (tick() comes back while
// one is pending); a next hop that failed to resolve refuses every rank, naming it.
void Server::Impl::try_start(Job& job, Clock::time_point now) {
  if (opt.next_hops != nullptr) {
    bool pending = false;
    for (size_t r = 0; r < job.members.size(); ++r) {
      const neighbour::Resolution res = opt.next_hops->status(job.members[r].endpoint.ip);
      if (res.state == neighbour::Resolution::State::kPending) pending = true;
      if (res.state != neighbour::Resolution::State::kFailed) continue;
      const std::string text = "rank " + std::to_string(r) + " of job '" + job.name + "' is unreachable: " + res.text;
      for (JobMember& mem : job.members) {
        if (Conn* c = conn(mem.conn_id)) {
          c->job_key = 0;
          refuse(*c, w::RefuseCode::kUnreachable, text, now);
        }
      }
      jobs.erase(job.key);
      return;
    }
    if (pending) return;
  }
  start_job(job, now);
}

void Server::Impl::withdraw(Job& job, uint16_t rank) {
  JobMember& mem = job.members[rank];
  if (!mem.registered) return;
  mem = JobMember{};
  job.registered--;
  if (job.registered == 0) jobs.erase(job.key);
}

void Server::Impl::start_job(Job& job, Clock::time_point now) {
  uint32_t job_id = next_job_id++;
  if (job_id == 0) job_id = next_job_id++;
  // A job gets results by multicast when its ranks asked and the appliance allows it; its group
  // is the lowest index no running multicast job uses (indices stay below max_jobs, so every
  // group is in the configured range and no two live jobs share one).
  const bool multicast = job.multicast_wanted && opt.multicast;
  uint32_t index = 0;
  for (bool taken = multicast; taken;) {
    taken = false;
    for (const auto& [key, j] : jobs) {
      if (j.running && j.multicast && j.mcast_index == index) {
        taken = true;
        ++index;
        break;
      }
    }
  }
  engine::JobSpec spec;
  spec.job_id = job_id;
  spec.qkey = random_qkey();
  spec.dtype = job.dtype;
  spec.op = job.op;
  spec.deterministic = job.deterministic;
  spec.slot_count = 0xFFFF;
  spec.max_payload_bytes = 0xFFFF;
  for (const JobMember& mem : job.members) {
    spec.slot_count = std::min(spec.slot_count, mem.slots);
    spec.max_payload_bytes = std::min(spec.max_payload_bytes, mem.payload_bytes);
    spec.members.push_back(mem.endpoint);
  }
  spec.multicast = multicast;
  if (multicast) {
    spec.mcast_ip = opt.multicast_base_ip + index;
    const uint8_t mac[6] = {0x01,
                            0x00,
                            0x5E,
                            static_cast<uint8_t>((spec.mcast_ip >> 16) & 0x7F),
                            static_cast<uint8_t>(spec.mcast_ip >> 8),
                            static_cast<uint8_t>(spec.mcast_ip)};
    std::memcpy(spec.mcast_mac, mac, 6);
  }

  const Status st = sink->install(spec);
  if (!st.ok()) {
    const std::string text = "the dataplane did not install job '" + job.name + "': " + st.to_string();
    for (JobMember& mem : job.members) {
      if (Conn* c = conn(mem.conn_id)) {
        c->job_key = 0;
        refuse(*c, w::RefuseCode::kInstallFailed, text.substr(0, w::kMaxTextLen), now);
      }
    }
    jobs.erase(job.key);
    return;
  }
  job.running = true;
  job.job_id = job_id;
  job.multicast = multicast;
  job.mcast_index = index;
  job.progress = sink->progress(job_id);
  job.last_change = now;
  count(&ServerCounters::jobs_started);

  w::GrantMsg g;
  g.job_id = job_id;
  g.qkey = spec.qkey;
  g.slot_count = spec.slot_count;
  g.payload_bytes = spec.max_payload_bytes;
  std::copy(opt.data_mac, opt.data_mac + 6, g.mac.begin());
  g.ip = opt.data_ip;
  g.udp_port = w::kRoceUdpPort;
  g.multicast = spec.multicast;
  g.deterministic = spec.deterministic;
  g.multicast_ip = spec.mcast_ip;
  g.core_qpns = opt.core_qpns;
  for (JobMember& mem : job.members) {
    if (Conn* c = conn(mem.conn_id)) send(*c, g, now);
  }
}

void Server::Impl::fail_job(Job& job, w::AbortReason reason, const std::string& text, Clock::time_point now) {
  sink->remove(job.job_id, reason);
  count(&ServerCounters::jobs_failed);
  const w::AbortMsg msg{job.job_id, reason, text.substr(0, w::kMaxTextLen)};
  for (JobMember& mem : job.members) {
    if (Conn* c = conn(mem.conn_id)) {
      c->job_key = 0;
      send(*c, msg, now);
    }
  }
  jobs.erase(job.key);
}

void Server::Impl::handle_leave(Conn& c, const w::LeaveMsg& m, Clock::time_point now) {
  auto it = jobs.find(c.job_key);
  if (c.job_key == 0 || it == jobs.end()) return;  // nothing to leave (e.g. after an abort)
  Job& job = it->second;
  if (!job.running) {
    c.job_key = 0;
    withdraw(job, c.rank);
    return;
  }
  if (m.job_id != job.job_id) return bad_message(c);
  c.job_key = 0;
  JobMember& mem = job.members[c.rank];
  mem.left = true;
  mem.conn_id = 0;
  const bool all_left = std::all_of(job.members.begin(), job.members.end(), [](const JobMember& x) { return x.left; });
  if (all_left) {
    sink->remove(job.job_id, w::AbortReason::kNone);
    count(&ServerCounters::jobs_completed);
    jobs.erase(job.key);
  }
  (void)now;
}

void Server::Impl::handle_status(Conn& c, Clock::time_point now) {
  w::StatusReplyMsg reply;
  size_t size = w::kControlHeaderLen + w::kStatusReplyFixedLen;
  for (const auto& [key, j] : jobs) {
    w::JobStatusEntry e;
    e.job_id = j.job_id;
    e.world_size = j.world_size;
    e.registered = j.registered;
    e.dtype = j.dtype;
    e.op = j.op;
    e.running = j.running;
    e.slots_completed = j.progress;
    e.ms_since_progress = static_cast<uint32_t>(std::min<uint64_t>(ms_between(j.last_change, now), 0xFFFFFFFFu));
    e.name = j.name;
    size += w::kStatusEntryFixedLen + e.name.size();
    if (size > w::kMaxControlMessageLen) {
      reply.truncated = true;
      break;
    }
    reply.jobs.push_back(std::move(e));
  }
  send(c, reply, now);
}

void Server::Impl::tick(Clock::time_point now) {
  const auto reg_timeout = milliseconds(opt.register_timeout_ms);
  const auto job_timeout = milliseconds(opt.job_timeout_ms);
  std::vector<uint64_t> keys;
  for (const auto& [key, j] : jobs) keys.push_back(key);
  for (uint64_t key : keys) {
    auto it = jobs.find(key);
    if (it == jobs.end()) continue;
    Job& job = it->second;
    if (!job.running) {
      if (job.registered == job.world_size) {
        try_start(job, now);  // it waits for next hops to resolve
        if (jobs.count(key) == 0 || job.running) continue;
      }
      if (now - job.first_registration < reg_timeout) continue;
      const std::string text = "registration timed out: " + std::to_string(job.registered) + " of " +
                               std::to_string(job.world_size) + " ranks of job '" + job.name + "' registered within " +
                               std::to_string(opt.register_timeout_ms) + " ms";
      for (JobMember& mem : job.members) {
        if (Conn* c = conn(mem.conn_id)) {
          c->job_key = 0;
          refuse(*c, w::RefuseCode::kRegisterTimeout, text, now);
        }
      }
      jobs.erase(it);
      continue;
    }
    const uint64_t p = sink->progress(job.job_id);
    // An idle job (no round waiting for contributions: between collectives, during compute) is
    // never failed for lack of progress; only a job with rounds waiting is.
    if (p != job.progress || sink->waiting_rounds(job.job_id) == 0) {
      job.progress = p;
      job.last_change = now;
    } else if (now - job.last_change >= job_timeout) {
      fail_job(job, w::AbortReason::kTimeout,
               "job '" + job.name + "' (id " + std::to_string(job.job_id) + ") made no progress for " +
                   std::to_string(opt.job_timeout_ms) + " ms",
               now);
    }
  }
}

void Server::Impl::publish() {
  std::vector<JobSnapshot> snap;
  snap.reserve(jobs.size());
  for (const auto& [key, j] : jobs) {
    JobSnapshot s;
    s.info.job_id = j.job_id;
    s.info.name = j.name;
    s.info.world_size = j.world_size;
    s.info.registered = j.registered;
    s.info.dtype = j.dtype;
    s.info.op = j.op;
    s.info.running = j.running;
    s.info.slots_completed = j.progress;
    s.info.multicast = j.running && j.multicast;
    s.info.multicast_ip = s.info.multicast ? opt.multicast_base_ip + j.mcast_index : 0;
    s.info.ms_since_progress = 0;
    s.last_change = j.last_change;
    snap.push_back(std::move(s));
  }
  std::lock_guard<std::mutex> lock(mu);
  snapshot = std::move(snap);
}

}  // namespace sumcast::control
