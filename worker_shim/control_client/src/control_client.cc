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
  int fd = -1;
  std::string where;  // "host:port", for messages
  std::vector<uint8_t> in;
  uint32_t job_id = 0;
  Status sticky;  // set once the connection is aborted or broken; returned thereafter

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  Status send_all(const std::vector<uint8_t>& bytes, Clock::time_point deadline) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd, POLLOUT, 0};
        const int r = ::poll(&p, 1, ms_left(deadline));
        if (r == 0) return Status::timeout("control: send to " + where + " timed out");
        if (r < 0 && errno != EINTR) return Status::from_errno("control: poll " + where);
        continue;
      }
      return Status::from_errno("control: send to " + where);
    }
    return Status();
  }

  template <typename M>
  Status send_msg(const M& m, Clock::time_point deadline) {
    std::vector<uint8_t> bytes;
    const auto e = w::encode_append(m, &bytes);
    if (e != w::ControlError::kOk) {
      return Status::invalid_argument(std::string("control: cannot encode ") + w::control_type_name(M::kType) + ": " +
                                      w::control_error_name(e));
    }
    return send_all(bytes, deadline);
  }

  // Takes one complete message off `in`, if there is one. Malformed input is an I/O error.
  Result<bool> take(Incoming* out) {
    w::ControlHeader h;
    std::span<const uint8_t> body;
    const auto e = w::split_control_message(in, &h, &body);
    if (e == w::ControlError::kTruncatedHeader || e == w::ControlError::kTruncatedBody) return false;
    if (e != w::ControlError::kOk) {
      return Status::io_error("control: malformed message from " + where + ": " + w::control_error_name(e));
    }
    out->hdr = h;
    out->body.assign(body.begin(), body.end());
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

  // Blocks until one message arrived or the deadline passed.
  Status receive(Incoming* out, Clock::time_point deadline, const char* waiting_for) {
    for (;;) {
      auto got = take(out);
      if (!got.ok()) return got.status();
      if (*got) return Status();
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, ms_left(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::from_errno("control: poll " + where);
      if (r == 0) return Status::timeout(std::string("control: no ") + waiting_for + " from " + where + " in time");
      auto more = read_available();
      if (!more.ok()) return more.status();
      if (!*more) {
        // EOF: a complete message may still be buffered ahead of it.
        got = take(out);
        if (!got.ok()) return got.status();
        if (*got) return Status();
        return Status::io_error("control: " + where + " closed the connection while we waited for " + waiting_for);
      }
    }
  }

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

ControlClient::ControlClient() : impl_(std::make_unique<Impl>()) {}
ControlClient::~ControlClient() = default;

Result<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& host, uint16_t port,
                                                              const std::string& token, uint32_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_ptr<ControlClient> client(new ControlClient());
  Impl& s = *client->impl_;
  s.where = host + ":" + std::to_string(port);
  if (token.empty() || token.size() > w::kMaxTokenLen) {
    return Status::invalid_argument("control: token must be 1.." + std::to_string(w::kMaxTokenLen) + " bytes");
  }

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
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return Status::from_errno("control: connect " + s.where);
    for (;;) {
      pollfd p{s.fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, ms_left(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::from_errno("control: poll " + s.where);
      if (r == 0)
        return Status::timeout("control: connect " + s.where + " timed out after " + std::to_string(timeout_ms) +
                               " ms");
      break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return Status::from_errno("control: SO_ERROR");
    if (err != 0) return Status::from_errno("control: connect " + s.where, err);
  }
  const int one = 1;
  (void)::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  SUMCAST_RETURN_IF_ERROR(s.send_msg(w::HelloMsg{token}, deadline));
  Incoming m;
  SUMCAST_RETURN_IF_ERROR(s.receive(&m, deadline, "AUTH_OK"));
  switch (m.hdr.type) {
    case w::ControlType::kAuthOk:
      if (!m.body.empty()) return Status::io_error("control: malformed AUTH_OK from " + s.where);
      return client;
    case w::ControlType::kAuthFail:
      return Status::refused("control: " + s.where + " rejected the token");
    case w::ControlType::kRefuse:
      return s.refused_status(m, "the connection");
    default:
      return s.unexpected(m, "AUTH_OK");
  }
}

Result<JobGrant> ControlClient::register_rank(const RegisterRequest& req, uint32_t timeout_ms) {
  Impl& s = *impl_;
  if (!s.sticky.ok()) return s.sticky;
  if (s.fd < 0) return Status::invalid_argument("control: the connection was closed");
  if (s.job_id != 0)
    return Status::invalid_argument("control: this connection already holds job " + std::to_string(s.job_id));
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
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
  SUMCAST_RETURN_IF_ERROR(s.send_msg(m, deadline));

  const std::string what = "rank " + std::to_string(req.rank) + " of job '" + req.job_name + "'";
  Incoming in;
  Status st = s.receive(&in, deadline, "GRANT");
  if (!st.ok()) {
    if (st.code() != StatusCode::kTimeout) s.sticky = st;
    return st;
  }
  switch (in.hdr.type) {
    case w::ControlType::kGrant: {
      w::GrantMsg g;
      const auto e = w::decode_body(in.body, &g);
      if (e != w::ControlError::kOk) {
        s.sticky = Status::io_error("control: malformed GRANT from " + s.where + ": " + w::control_error_name(e));
        return s.sticky;
      }
      JobGrant out;
      out.job_id = g.job_id;
      out.qkey = g.qkey;
      out.slot_count = g.slot_count;
      out.payload_bytes = g.payload_bytes;
      std::copy(g.mac.begin(), g.mac.end(), out.appliance.mac);
      out.appliance.ip = g.ip;
      out.appliance.udp_port = g.udp_port;
      out.appliance.qpn = 0;
      out.core_qpns = std::move(g.core_qpns);
      out.multicast = g.multicast;
      out.deterministic = g.deterministic;
      out.multicast_ip = g.multicast_ip;
      s.job_id = g.job_id;
      return out;
    }
    case w::ControlType::kRefuse:
      return s.refused_status(in, "registration of " + what);
    case w::ControlType::kAbort:
      s.sticky = s.aborted_status(in);
      return s.sticky;
    default:
      s.sticky = s.unexpected(in, "GRANT");
      return s.sticky;
  }
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
