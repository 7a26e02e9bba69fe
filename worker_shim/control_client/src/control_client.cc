// The worker's control connection (docs/protocol.md §8; layout in sumcast/wire/control.h).
// The socket is non-blocking throughout; blocking calls wait with poll(2) against a deadline.
#include "sumcast/shim/control_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/wire/control.h"

namespace sumcast::shim {
namespace {

using Clock = std::chrono::steady_clock;
namespace w = sumcast::wire;

int ms_left(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (now >= deadline) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms + 1, 1 << 30));
}

// One decoded message of any type.
struct Incoming {
  w::ControlHeader hdr;
  std::vector<uint8_t> body;
};

}  // namespace

struct ControlClient::Impl {
  // Where the connection stands (the non-blocking steps move it on).
  enum class Phase : uint8_t { kConnecting, kAuthenticating, kReady, kRegistering, kInJob };
  int fd = -1;
  std::string where;  // "host:port", for messages
  std::string token;  // until HELLO is queued
  Phase phase = Phase::kConnecting;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;  // queued and not yet taken by the socket
  std::string registering;   // "rank R of job 'J'", while REGISTER waits for its answer
  uint32_t job_id = 0;
  Status sticky;  // set once the connection is aborted or broken; returned thereafter

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  // Sends what the socket takes now of `out`.
  Status flush() {
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return Status::from_errno("control: send to " + where);
    }
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(off));
    return Status();
  }

  // Waits up to the deadline for what poll_events() says; a timeout is `timeout_text`.
  Status wait_io(short events, Clock::time_point deadline, const std::string& timeout_text) {
    for (;;) {
      pollfd p{fd, events, 0};
      const int r = ::poll(&p, 1, ms_left(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::from_errno("control: poll " + where);
      if (r == 0) return Status::timeout(timeout_text);
      return Status();
    }
  }

  template <typename M>
  Status queue_msg(const M& m) {
    const auto e = w::encode_append(m, &out);
    if (e != w::ControlError::kOk) {
      return Status::invalid_argument(std::string("control: cannot encode ") + w::control_type_name(M::kType) + ": " +
                                      w::control_error_name(e));
    }
    return flush();
  }

  template <typename M>
  Status send_msg(const M& m, Clock::time_point deadline) {
    SUMCAST_RETURN_IF_ERROR(queue_msg(m));
    while (!out.empty()) {
      SUMCAST_RETURN_IF_ERROR(wait_io(POLLOUT, deadline, "control: send to " + where + " timed out"));
      SUMCAST_RETURN_IF_ERROR(flush());
    }
    return Status();
  }

  // Takes one complete message off `in`, if there is one. Malformed input is an I/O error.
  Result<bool> take(Incoming* m) {
    w::ControlHeader h;
    std::span<const uint8_t> body;
    const auto e = w::split_control_message(in, &h, &body);
    if (e == w::ControlError::kTruncatedHeader || e == w::ControlError::kTruncatedBody) return false;
    if (e != w::ControlError::kOk) {
      return Status::io_error("control: malformed message from " + where + ": " + w::control_error_name(e));
    }
    m->hdr = h;
    m->body.assign(body.begin(), body.end());
    in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(w::kControlHeaderLen + h.body_len));
    return true;
  }

  // Reads what is available without blocking. Returns false at EOF.
  Result<bool> read_available() {
    uint8_t buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in.insert(in.end(), buf, buf + n);
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      return Status::from_errno("control: recv from " + where);
    }
  }

  // Without blocking: one message if one arrived (sending what is queued first).
  Result<bool> receive_now(Incoming* m, const char* waiting_for) {
    SUMCAST_RETURN_IF_ERROR(flush());
    auto got = take(m);
    if (!got.ok() || *got) return got;
    auto more = read_available();
    if (!more.ok()) return more.status();
    got = take(m);  // at EOF a complete message may still be buffered ahead of it
    if (!got.ok() || *got || *more) return got;
    return Status::io_error("control: " + where + " closed the connection while we waited for " + waiting_for);
  }

  // Blocks until one message arrived or the deadline passed.
  Status receive(Incoming* m, Clock::time_point deadline, const char* waiting_for) {
    for (;;) {
      auto got = receive_now(m, waiting_for);
      if (!got.ok()) return got.status();
      if (*got) return Status();
      SUMCAST_RETURN_IF_ERROR(wait_io(out.empty() ? POLLIN : POLLIN | POLLOUT, deadline,
                                      std::string("control: no ") + waiting_for + " from " + where + " in time"));
    }
  }

  // AUTH_OK, or why not.
  Result<bool> auth_reply(const Incoming& m);
  // The grant, or why not (sticky where the connection is unusable after it).
  Result<JobGrant> grant_reply(const Incoming& m);

  Status aborted_status(const Incoming& m) {
    w::AbortMsg a;
    const auto e = w::decode_body(m.body, &a);
    if (e != w::ControlError::kOk) {
      return Status::io_error(std::string("control: malformed ABORT from ") + where + ": " + w::control_error_name(e));
    }
    return Status::aborted("job " + std::to_string(a.job_id) + " aborted by the appliance at " + where + " (" +
                               w::abort_reason_name(a.reason) + "): " + a.text,
                           static_cast<uint32_t>(a.reason));
  }

  Status refused_status(const Incoming& m, const std::string& what) {
    w::RefuseMsg r;
    const auto e = w::decode_body(m.body, &r);
    if (e != w::ControlError::kOk) {
      return Status::io_error(std::string("control: malformed REFUSE from ") + where + ": " + w::control_error_name(e));
    }
    return Status::refused("control: " + where + " refused " + what + ": " + r.text + " (" +
                           w::refuse_code_name(r.code) + ")");
  }

  Status unexpected(const Incoming& m, const char* waiting_for) {
    return Status::io_error(std::string("control: ") + where + " sent " + w::control_type_name(m.hdr.type) +
                            " while we waited for " + waiting_for);
  }
};

Result<bool> ControlClient::Impl::auth_reply(const Incoming& m) {
  switch (m.hdr.type) {
    case w::ControlType::kAuthOk:
      if (!m.body.empty()) return Status::io_error("control: malformed AUTH_OK from " + where);
      phase = Phase::kReady;
      return true;
    case w::ControlType::kAuthFail:
      return Status::refused("control: " + where + " rejected the token");
    case w::ControlType::kRefuse:
      return refused_status(m, "the connection");
    default:
      return unexpected(m, "AUTH_OK");
  }
}

Result<JobGrant> ControlClient::Impl::grant_reply(const Incoming& m) {
  switch (m.hdr.type) {
    case w::ControlType::kGrant: {
      w::GrantMsg g;
      const auto e = w::decode_body(m.body, &g);
      if (e != w::ControlError::kOk) {
        sticky = Status::io_error("control: malformed GRANT from " + where + ": " + w::control_error_name(e));
        return sticky;
      }
      JobGrant out_grant;
      out_grant.job_id = g.job_id;
      out_grant.qkey = g.qkey;
      out_grant.slot_count = g.slot_count;
      out_grant.payload_bytes = g.payload_bytes;
      std::copy(g.mac.begin(), g.mac.end(), out_grant.appliance.mac);
      out_grant.appliance.ip = g.ip;
      out_grant.appliance.udp_port = g.udp_port;
      out_grant.appliance.qpn = 0;
      out_grant.core_qpns = std::move(g.core_qpns);
      out_grant.multicast = g.multicast;
      out_grant.deterministic = g.deterministic;
      out_grant.loss_notices = g.loss_notices;
      out_grant.multicast_ip = g.multicast_ip;
      job_id = g.job_id;
      phase = Phase::kInJob;
      return out_grant;
    }
    case w::ControlType::kRefuse:
      phase = Phase::kReady;  // refused, not broken: another registration may follow
      return refused_status(m, "registration of " + registering);
    case w::ControlType::kAbort:
      sticky = aborted_status(m);
      return sticky;
    default:
      sticky = unexpected(m, "GRANT");
      return sticky;
  }
}

ControlClient::ControlClient() : impl_(std::make_unique<Impl>()) {}
ControlClient::~ControlClient() = default;

Result<std::unique_ptr<ControlClient>> ControlClient::start_connect(const std::string& host, uint16_t port,
                                                                    const std::string& token) {
  std::unique_ptr<ControlClient> client(new ControlClient());
  Impl& s = *client->impl_;
  s.where = host + ":" + std::to_string(port);
  if (token.empty() || token.size() > w::kMaxTokenLen) {
    return Status::invalid_argument("control: token must be 1.." + std::to_string(w::kMaxTokenLen) + " bytes");
  }
  s.token = token;

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (gai != 0 || res == nullptr) {
    return Status::not_found("control: cannot resolve '" + host + "': " + ::gai_strerror(gai));
  }
  sockaddr_in sa{};
  std::memcpy(&sa, res->ai_addr, sizeof sa);
  ::freeaddrinfo(res);
  sa.sin_port = htons(port);

  s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return Status::from_errno("control: socket");
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    return Status::from_errno("control: connect " + s.where);
  }
  return client;
}

Result<bool> ControlClient::advance_connect() {
  Impl& s = *impl_;
  if (s.phase == Impl::Phase::kConnecting) {
    pollfd p{s.fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, 0);
    if (r < 0 && errno != EINTR) return Status::from_errno("control: poll " + s.where);
    if (r <= 0) return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return Status::from_errno("control: SO_ERROR");
    if (err != 0) return Status::from_errno("control: connect " + s.where, err);
    const int one = 1;
    (void)::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s.phase = Impl::Phase::kAuthenticating;
    SUMCAST_RETURN_IF_ERROR(s.queue_msg(w::HelloMsg{s.token}));
    s.token.clear();
  }
  if (s.phase != Impl::Phase::kAuthenticating) return true;
  Incoming m;
  auto got = s.receive_now(&m, "AUTH_OK");
  if (!got.ok()) return got.status();
  if (!*got) return false;
  return s.auth_reply(m);
}

Result<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& host, uint16_t port,
                                                              const std::string& token, uint32_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto started = start_connect(host, port, token);
  if (!started.ok()) return started.status();
  std::unique_ptr<ControlClient> client = std::move(started).value();
  Impl& s = *client->impl_;
  for (;;) {
    auto done = client->advance_connect();
    if (!done.ok()) return done.status();
    if (*done) return client;
    const std::string late = s.phase == Impl::Phase::kConnecting ? "control: connect " + s.where + " timed out after " +
                                                                       std::to_string(timeout_ms) + " ms"
                                                                 : "control: no AUTH_OK from " + s.where + " in time";
    SUMCAST_RETURN_IF_ERROR(s.wait_io(client->poll_events(), deadline, late));
  }
}

Status ControlClient::start_register(const RegisterRequest& req) {
  Impl& s = *impl_;
  if (!s.sticky.ok()) return s.sticky;
  if (s.fd < 0) return Status::invalid_argument("control: the connection was closed");
  if (s.job_id != 0)
    return Status::invalid_argument("control: this connection already holds job " + std::to_string(s.job_id));
  if (s.phase != Impl::Phase::kReady) {
    return Status::invalid_argument("control: the connection to " + s.where +
                                    " is not ready to register (waiting for " + waiting_for() + ")");
  }
  w::RegisterMsg m;
  m.world_size = req.world_size;
  m.rank = req.rank;
  m.dtype = req.dtype;
  m.op = req.op;
  m.payload_bytes = req.max_payload_bytes;
  m.slots = req.slots;
  std::copy(req.endpoint.mac, req.endpoint.mac + 6, m.mac.begin());
  m.ip = req.endpoint.ip;
  m.udp_port = req.endpoint.udp_port;
  m.qpn = req.endpoint.qpn;
  m.name = req.job_name;
  m.deterministic = req.deterministic;
  m.multicast = req.multicast;
  m.loss_notices = req.loss_notices;
  s.registering = "rank " + std::to_string(req.rank) + " of job '" + req.job_name + "'";
  s.phase = Impl::Phase::kRegistering;
  return s.queue_msg(m);
}

Result<std::optional<JobGrant>> ControlClient::advance_register() {
  Impl& s = *impl_;
  if (!s.sticky.ok()) return s.sticky;
  if (s.phase != Impl::Phase::kRegistering) return Status::invalid_argument("control: no registration under way");
  Incoming in;
  auto got = s.receive_now(&in, "GRANT");
  if (!got.ok()) {
    s.sticky = got.status();
    return s.sticky;
  }
  if (!*got) return std::optional<JobGrant>();
  auto grant = s.grant_reply(in);
  if (!grant.ok()) return grant.status();
  return std::optional<JobGrant>(std::move(grant).value());
}

Result<JobGrant> ControlClient::register_rank(const RegisterRequest& req, uint32_t timeout_ms) {
  Impl& s = *impl_;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  SUMCAST_RETURN_IF_ERROR(start_register(req));
  for (;;) {
    auto grant = advance_register();
    if (!grant.ok()) return grant.status();
    if (grant->has_value()) return std::move(**grant);
    Status st = s.wait_io(poll_events(), deadline, "control: no GRANT from " + s.where + " in time");
    if (!st.ok()) {
      if (st.code() != StatusCode::kTimeout) s.sticky = st;
      s.phase = Impl::Phase::kReady;  // given up waiting: the caller may register again (the appliance decides)
      return st;
    }
  }
}

short ControlClient::poll_events() const {
  const Impl& s = *impl_;
  if (s.phase == Impl::Phase::kConnecting) return POLLOUT;
  return static_cast<short>(s.out.empty() ? POLLIN : POLLIN | POLLOUT);
}

std::string ControlClient::waiting_for() const {
  switch (impl_->phase) {
    case Impl::Phase::kConnecting:
      return "the TCP connection to " + impl_->where;
    case Impl::Phase::kAuthenticating:
      return "AUTH_OK from " + impl_->where;
    case Impl::Phase::kRegistering:
      return "the grant of " + impl_->registering + " from " + impl_->where;
    case Impl::Phase::kReady:
    case Impl::Phase::kInJob:
      break;
  }
  return "nothing";
}

Status ControlClient::poll() {
  Impl& s = *impl_;
  if (!s.sticky.ok()) return s.sticky;
  if (s.fd < 0) return Status::invalid_argument("control: the connection was closed");
  auto more = s.read_available();
  // Messages already received come before a broken or closed connection.
  for (;;) {
    Incoming m;
    auto got = s.take(&m);
    if (!got.ok()) {
      s.sticky = got.status();
      return s.sticky;
    }
    if (!*got) break;
    if (m.hdr.type == w::ControlType::kAbort) {
      s.sticky = s.aborted_status(m);
      return s.sticky;
    }
    s.sticky = s.unexpected(m, "nothing");
    return s.sticky;
  }
  if (!more.ok()) {
    s.sticky = more.status();
    return s.sticky;
  }
  if (!*more) {
    s.sticky = Status::io_error("control: " + s.where + " closed the control connection");
    return s.sticky;
  }
  return Status();
}

int ControlClient::fd() const { return impl_->fd; }

Status ControlClient::leave() {
  Impl& s = *impl_;
  if (s.fd < 0) return Status();
  Status st = s.send_msg(w::LeaveMsg{s.job_id}, Clock::now() + std::chrono::seconds(1));
  ::shutdown(s.fd, SHUT_WR);
  uint8_t discard[1024];  // unread input would make close() send RST instead of FIN
  while (::recv(s.fd, discard, sizeof discard, MSG_DONTWAIT) > 0) {
  }
  ::close(s.fd);
  s.fd = -1;
  s.job_id = 0;
  return st;
}

}  // namespace sumcast::shim
