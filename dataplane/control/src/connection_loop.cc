// The control server's connection loop (connection_loop.h): one thread, non-blocking sockets,
// poll(2). Protocol: the layout in sumcast/wire/control.h (docs/protocol.md §8).
#include "connection_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "sumcast/ipv4.h"
#include "token.h"

namespace sumcast::control {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
namespace w = sumcast::wire;

// The loop wakes at least this often; the registry's tick() (progress polled, deadlines checked)
// and the io deadlines run at this period.
constexpr milliseconds kTick{100};
constexpr size_t kReadChunk = 8192;
constexpr int kReadsPerWake = 16;

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

}  // namespace

ConnectionLoop::ConnectionLoop(const ServerOptions& opt, JobSink* sink, CounterBoard* counters)
    : opt_(opt), counters_(counters), registry_(opt, sink, this, counters) {}

ConnectionLoop::~ConnectionLoop() {
  close_fd(listen_fd_);
  close_fd(wake_fd_);
}

ConnectionLoop::Conn* ConnectionLoop::find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second.dead ? nullptr : &it->second;
}

const ConnectionLoop::Conn* ConnectionLoop::find(uint64_t id) const {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second.dead ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------------------------
// Start / stop

Status ConnectionLoop::open() {
  const std::string where = format_ipv4(opt_.listen_ip) + ":" + std::to_string(opt_.port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::from_errno("control: socket");
  const int one = 1;
  if (::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    const int err = errno;
    close_fd(listen_fd_);
    return Status::from_errno("control: SO_REUSEADDR on " + where, err);
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(opt_.listen_ip);
  sa.sin_port = htons(opt_.port);
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    close_fd(listen_fd_);
    return Status::from_errno("control: bind " + where, err);
  }
  if (::listen(listen_fd_, 128) != 0) {
    const int err = errno;
    close_fd(listen_fd_);
    return Status::from_errno("control: listen " + where, err);
  }
  socklen_t len = sizeof sa;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const int err = errno;
    close_fd(listen_fd_);
    return Status::from_errno("control: getsockname " + where, err);
  }
  port_ = ntohs(sa.sin_port);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int err = errno;
    close_fd(listen_fd_);
    return Status::from_errno("control: eventfd", err);
  }
  return Status();
}

void ConnectionLoop::wake() {
  const uint64_t one = 1;
  while (::write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

// ---------------------------------------------------------------------------------------------
// The loop

void ConnectionLoop::run() {
  next_tick_ = SteadyClock::now() + kTick;
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;  // pfds[i + 2] belongs to conns_[ids[i]]
  for (;;) {
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_fd_, POLLIN, 0});
    pfds.push_back({listen_fd_, static_cast<short>(SteadyClock::now() >= accept_resume_ ? POLLIN : 0), 0});
    for (auto& [id, c] : conns_) {
      short ev = POLLIN;
      if (c.out_off < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.fd, ev, 0});
      ids.push_back(id);
    }
    auto now = SteadyClock::now();
    const int wait_ms = static_cast<int>(
        std::clamp<int64_t>(std::chrono::duration_cast<milliseconds>(next_tick_ - now).count() + 1, 0, kTick.count()));
    const int n = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (n < 0 && errno != EINTR) {
      // Nothing sensible is left to do without poll(); behave as if stopped.
      break;
    }
    now = SteadyClock::now();
    if (n > 0 && (pfds[0].revents & POLLIN)) break;  // stop()
    if (n > 0) {
      for (size_t i = 0; i < ids.size(); ++i) {
        const short re = pfds[i + 2].revents;
        if (re == 0) continue;
        Conn* c = find(ids[i]);
        if (c == nullptr) continue;
        if (re & POLLOUT) flush(*c, now);
        if (!c->dead && (re & (POLLIN | POLLHUP | POLLERR))) on_readable(*c, now);
      }
      if (pfds[1].revents & POLLIN) accept_all(now);
    }
    if (now >= next_tick_) {
      registry_.tick();
      next_tick_ = now + kTick;
    }
    check_deadlines(now);
    reap();
    registry_.publish();
    flush_all(now);
  }
  shutdown_all();
}

void ConnectionLoop::shutdown_all() {
  const auto now = SteadyClock::now();
  registry_.shutdown();
  for (auto& [id, c] : conns_) {
    if (!c.dead) flush(c, now);
    close_gracefully(c.fd);
  }
  conns_.clear();
  close_fd(listen_fd_);
}

void ConnectionLoop::accept_all(Time now) {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: the listener stays readable, so stop polling it for a
      // tick rather than spin on it.
      if (errno != EAGAIN && errno != EWOULDBLOCK) accept_resume_ = now + kTick;
      return;
    }
    if (conns_.size() >= opt_.max_connections) {
      counters_->add(&ServerCounters::connections_refused);
      std::vector<uint8_t> msg;
      (void)w::encode_append(w::RefuseMsg{w::RefuseCode::kTooManyConnections,
                                          "the appliance already has " + std::to_string(conns_.size()) +
                                              " control connections (max_connections)"},
                             &msg);
      (void)::send(fd, msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      close_gracefully(fd);
      continue;
    }
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    counters_->add(&ServerCounters::connections_accepted);
    Conn c;
    c.id = next_conn_id_++;
    c.fd = fd;
    c.peer = format_ipv4(ntohl(sa.sin_addr.s_addr)) + ":" + std::to_string(ntohs(sa.sin_port));
    c.accepted = now;
    conns_.emplace(c.id, std::move(c));
  }
}

void ConnectionLoop::on_readable(Conn& c, Time now) {
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

void ConnectionLoop::process_input(Conn& c, Time now) {
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

void ConnectionLoop::dispatch(Conn& c, const w::ControlHeader& h, std::span<const uint8_t> body, Time now) {
  if (!w::is_worker_to_appliance(h.type)) {
    bad_message(c);
    return;
  }
  if (!c.authenticated) {
    if (h.type != w::ControlType::kHello) {
      counters_->add(&ServerCounters::bad_messages);
      send_to(c, w::RefuseMsg{w::RefuseCode::kNotAuthenticated, "HELLO with the token must come first"});
      finish(c, now);
      return;
    }
    w::HelloMsg m;
    if (w::decode_body(body, &m) != w::ControlError::kOk) {
      bad_message(c);
      return;
    }
    if (!token_equal(m.token, opt_.token)) {
      counters_->add(&ServerCounters::auth_failures);
      send_to(c, w::AuthFailMsg{});
      finish(c, now);
      return;
    }
    c.authenticated = true;
    send_to(c, w::AuthOkMsg{});
    return;
  }
  switch (h.type) {
    case w::ControlType::kRegister: {
      w::RegisterMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      registry_.on_register(c.id, m);
      return;
    }
    case w::ControlType::kLeave: {
      w::LeaveMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      if (!registry_.on_leave(c.id, m)) bad_message(c);
      return;
    }
    case w::ControlType::kStatusRequest: {
      w::StatusRequestMsg m;
      if (w::decode_body(body, &m) != w::ControlError::kOk) return bad_message(c);
      send_to(c, registry_.status());
      return;
    }
    default:  // a second HELLO
      bad_message(c);
      return;
  }
}

template <typename M>
void ConnectionLoop::send_to(Conn& c, const M& m) {
  if (c.dead || c.closing) return;
  // Queued only: run() flushes every connection after publish(), so a peer that got a reply
  // already sees its effect in jobs(). Encoding cannot fail for what we send (every field is
  // bounded); if it did, nothing would be queued, never a partial message.
  (void)w::encode_append(m, &c.out);
}

void ConnectionLoop::bad_message(Conn& c) {
  counters_->add(&ServerCounters::bad_messages);
  c.dead = true;
}

void ConnectionLoop::finish(Conn& c, Time now) {
  c.closing = true;
  c.closing_deadline = now + milliseconds(std::max<uint32_t>(opt_.io_timeout_ms, 1));
}

void ConnectionLoop::flush_all(Time now) {
  for (auto& [id, c] : conns_) {
    if (!c.dead) flush(c, now);
  }
}

void ConnectionLoop::flush(Conn& c, Time now) {
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

void ConnectionLoop::check_deadlines(Time now) {
  const auto io = milliseconds(opt_.io_timeout_ms);
  for (auto& [id, c] : conns_) {
    if (c.dead) continue;
    if (c.closing) {
      if (now >= c.closing_deadline) c.dead = true;
      continue;
    }
    const bool slow_auth = !c.authenticated && now - c.accepted >= io;
    const bool slow_msg = c.partial_since && now - *c.partial_since >= io;
    const bool slow_reader = c.out_since && now - *c.out_since >= io;
    if (slow_auth || slow_msg || slow_reader) {
      counters_->add(&ServerCounters::io_timeouts);
      c.dead = true;
    }
  }
}

void ConnectionLoop::reap() {
  // Losing a member can fail its job, which queues aborts to other connections, which may die
  // too: repeat until nothing is marked.
  for (;;) {
    auto it = std::find_if(conns_.begin(), conns_.end(), [](const auto& kv) { return kv.second.dead; });
    if (it == conns_.end()) return;
    const uint64_t id = it->first;
    close_fd(it->second.fd);
    conns_.erase(it);
    registry_.on_connection_lost(id);
  }
}

}  // namespace sumcast::control
