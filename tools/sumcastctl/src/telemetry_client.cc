#include "sumcast/ctl/telemetry_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace sumcast::ctl {

std::string telemetry_socket_path(const std::string& prefix) {
  std::string dir;
  if (const char* rd = std::getenv("RUNTIME_DIRECTORY"); rd != nullptr && *rd != '\0') {
    dir = rd;
  } else if (getuid() == 0) {
    dir = "/var/run";
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    dir = xdg;
  } else {
    dir = "/tmp";
  }
  return dir + "/dpdk/" + prefix + "/dpdk_telemetry.v2";
}

Result<std::unique_ptr<TelemetryClient>> TelemetryClient::connect(const std::string& socket_path, uint32_t timeout_ms) {
  std::unique_ptr<TelemetryClient> c(new TelemetryClient());
  c->path_ = socket_path;
  c->timeout_ms_ = timeout_ms;
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) return Status::invalid_argument(socket_path + ": path too long");
  c->fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0) return Status::from_errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::connect(c->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ECONNREFUSED) {
      return Status::not_found(socket_path + ": " + std::strerror(err) +
                               " (is sumcastd running with this --prefix / eal.file_prefix, telemetry on?)");
    }
    return Status::from_errno("connect " + socket_path, err);
  }
  Result<Json> greeting = c->receive();
  if (!greeting.ok()) return greeting.status();
  c->greeting_ = std::move(greeting.value());
  if (!c->greeting_.is_object()) return Status::invalid_argument(socket_path + ": greeting is not a JSON object");
  if (const uint64_t max = uint_at(c->greeting_, "max_output_len"); max > 0 && max < (64u << 20)) c->max_len_ = max;
  return c;
}

TelemetryClient::~TelemetryClient() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Json> TelemetryClient::receive() {
  pollfd p{fd_, POLLIN, 0};
  const int rc = ::poll(&p, 1, static_cast<int>(timeout_ms_));
  if (rc < 0) return Status::from_errno("poll " + path_);
  if (rc == 0) return Status::timeout(path_ + ": no reply within " + std::to_string(timeout_ms_) + " ms");
  std::vector<char> buf(max_len_ + 1);
  const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
  if (n < 0) return Status::from_errno("recv " + path_);
  if (n == 0) return Status::io_error(path_ + ": the application closed the connection");
  Result<Json> v = parse_json(std::string_view(buf.data(), static_cast<size_t>(n)));
  if (!v.ok()) return Status::invalid_argument(path_ + ": " + v.status().message());
  return v;
}

Result<Json> TelemetryClient::query(const std::string& command) {
  if (::send(fd_, command.data(), command.size(), MSG_NOSIGNAL) < 0) return Status::from_errno("send " + path_);
  Result<Json> reply = receive();
  if (!reply.ok()) return reply.status();
  const Json& r = reply.value();
  if (!r.is_object() || r.size() != 1) {
    return Status::invalid_argument(path_ + ": reply to " + command + " is not {\"<command>\": value}");
  }
  return r.begin().value();
}

}  // namespace sumcast::ctl
